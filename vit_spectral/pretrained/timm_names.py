"""timm's ViT architectures by name, as `config.model` fields, without JAX.

A recipe that fine-tunes a timm checkpoint writes its model section from the
checkpoint's name (`timm_model_config("deit_small_patch16_224")`); recipes
import no JAX (the command line checks them first), so the names, the
families and their fields live here. `pretrained.loading` reads the weights
and re-exports these names.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

__all__ = ["TIMM_ARCHITECTURES", "timm_model_config"]

# timm's widths: size word -> (hidden_size, depth, num_heads, mlp_dim), as timm's
# `vision_transformer.py` / `deit.py` register them (mlp_dim = int(width · mlp_ratio)).
_TIMM_SIZES: dict[str, tuple[int, int, int, int]] = {
    "xsmall": (256, 10, 4, 1024), "tiny": (192, 12, 3, 768), "small": (384, 12, 6, 1536),
    "medium": (512, 12, 8, 2048), "betwixt": (640, 12, 10, 2560),
    "base": (768, 12, 12, 3072), "base_plus": (896, 12, 14, 3584),
    "large": (1024, 24, 16, 4096), "huge": (1280, 32, 16, 5120),
    "giant": (1408, 40, 16, 6144),            # mlp_ratio 48/11 (ViT-g/14)
    "gigantic": (1664, 48, 16, 8192),         # mlp_ratio 64/13 (ViT-G/14, CLIP bigG)
}
# One family per pattern of timm architecture names (the ".tag" after a dot is
# not part of them): the sizes timm registers for it, and its fields beyond the
# plain timm ViT (`_timm_family_fields`). Every name timm has of these families
# is accepted; `TIMM_ARCHITECTURES` lists them.
_TIMM_FAMILIES: dict[str, re.Pattern] = {
    # ViT / DeiT / MAE (".mae": the encoder, no head): the plain timm ViT.
    "vit": re.compile(r"(?:vit|deit)_(tiny|small|base|large|huge|giant)_patch(\d+)_(\d+)"),
    # DeiT-III: LayerScale (init 1e-6), the position embedding on the patches only.
    "deit3": re.compile(r"deit3_(small|medium|base|large|huge)_patch(\d+)_(\d+)"),
    # DeiT distilled: a distillation token and head, logits the two heads' mean.
    "deit_distilled": re.compile(r"deit_(tiny|small|base)_distilled_patch(\d+)_(\d+)"),
    # DINOv2: patch 14, LayerScale (init 1e-5), 518² (37x37 grid); _reg4_: four
    # registers and the position embedding on the patches only; ViT-g: SwiGLU.
    "dinov2": re.compile(r"vit_(small|base|large|giant)_patch(14)_(reg4_)?dinov2"),
    # CLIP image towers: norm_pre, LayerNorm ε 1e-5; QuickGELU in _quickgelu_ names
    # (timm's act_layer='quick_gelu'), else the exact GELU.
    "clip": re.compile(r"vit_(xsmall|medium|betwixt|base|large|huge|giant|gigantic)"
                       r"_patch(\d+)(_plus)?_clip_(quickgelu_)?(\d+)"),
}
# Every timm architecture of these families (timm 1.0's registry; the fixture
# tests/fixtures/pretrained/timm_architectures.json holds timm's own list and
# each one's shape, which a test compares with `timm_model_config`).
TIMM_ARCHITECTURES: tuple[str, ...] = (
    "deit_tiny_patch16_224", "deit_small_patch16_224", "deit_base_patch16_224",
    "deit_base_patch16_384",
    "vit_tiny_patch16_224", "vit_tiny_patch16_384", "vit_small_patch8_224",
    "vit_small_patch16_224", "vit_small_patch16_384", "vit_small_patch32_224",
    "vit_small_patch32_384", "vit_base_patch8_224", "vit_base_patch16_224",
    "vit_base_patch16_384", "vit_base_patch32_224", "vit_base_patch32_384",
    "vit_large_patch14_224", "vit_large_patch16_224", "vit_large_patch16_384",
    "vit_large_patch32_224", "vit_large_patch32_384", "vit_huge_patch14_224",
    "vit_giant_patch14_224",
    "deit3_small_patch16_224", "deit3_small_patch16_384", "deit3_medium_patch16_224",
    "deit3_base_patch16_224", "deit3_base_patch16_384", "deit3_large_patch16_224",
    "deit3_large_patch16_384", "deit3_huge_patch14_224",
    "deit_tiny_distilled_patch16_224", "deit_small_distilled_patch16_224",
    "deit_base_distilled_patch16_224", "deit_base_distilled_patch16_384",
    "vit_small_patch14_dinov2", "vit_base_patch14_dinov2", "vit_large_patch14_dinov2",
    "vit_giant_patch14_dinov2", "vit_small_patch14_reg4_dinov2",
    "vit_base_patch14_reg4_dinov2", "vit_large_patch14_reg4_dinov2",
    "vit_giant_patch14_reg4_dinov2",
    "vit_xsmall_patch16_clip_224", "vit_medium_patch16_clip_224",
    "vit_medium_patch32_clip_224", "vit_betwixt_patch32_clip_224",
    "vit_base_patch32_clip_224", "vit_base_patch32_clip_256", "vit_base_patch32_clip_384",
    "vit_base_patch32_clip_448", "vit_base_patch32_clip_quickgelu_224",
    "vit_base_patch16_clip_224", "vit_base_patch16_clip_384",
    "vit_base_patch16_clip_quickgelu_224", "vit_base_patch16_plus_clip_240",
    "vit_large_patch14_clip_224", "vit_large_patch14_clip_336",
    "vit_large_patch14_clip_quickgelu_224", "vit_large_patch14_clip_quickgelu_336",
    "vit_huge_patch14_clip_224", "vit_huge_patch14_clip_336", "vit_huge_patch14_clip_378",
    "vit_huge_patch14_clip_quickgelu_224", "vit_huge_patch14_clip_quickgelu_378",
    "vit_giant_patch14_clip_224", "vit_gigantic_patch14_clip_224",
    "vit_gigantic_patch14_clip_378", "vit_gigantic_patch14_clip_quickgelu_224",
)


def _timm_family_fields(family: str, m: re.Match) -> dict[str, Any]:
  """The `config.model` fields of the architecture `m` matched in `family`."""
  size = m.group(1) + ("_plus" if family == "clip" and m.group(3) else "")
  if family == "dinov2" and size == "giant":           # DINOv2's ViT-g: SwiGLU, 24 heads
    width, depth, heads, mlp = 1536, 40, 24, 8192
  else:
    width, depth, heads, mlp = _TIMM_SIZES[size]
  block: dict[str, Any] = dict(mlp_activation="gelu_erf", norm_epsilon=1e-6)
  fields: dict[str, Any] = dict(hidden_size=width, depth=depth, num_heads=heads, mlp_dim=mlp,
                                patch_size=int(m.group(2)), pooling="cls", posemb="learned",
                                stem="patch", norm="layer_norm")
  if family == "deit3":
    block["residual_alpha"] = 1e-6
    fields["posemb_tokens"] = "patches"
  elif family == "deit_distilled":
    fields["distilled"] = True
  elif family == "dinov2":
    block["residual_alpha"] = 1e-5
    if size == "giant":
      block["mlp_activation"] = "swiglu"
    if m.group(3):                                     # _reg4_
      fields.update(register_tokens=4, posemb_tokens="patches")
  elif family == "clip":
    block.update(norm_epsilon=1e-5,
                 mlp_activation="quick_gelu" if m.group(4) else "gelu_erf")
    fields.update(norm_pre=True, stem_bias=False)
  return dict(fields, block=block)


def timm_model_config(name: str, known: tuple[str, ...] = TIMM_ARCHITECTURES,
                      converter_prefixes: tuple[str, ...] = ()) -> dict[str, Any]:
  """The `config.model` fields of a timm ViT model name.

  `name` is a timm model name such as "deit_small_patch16_224",
  "vit_base_patch16_224.augreg_in21k_ft_in1k" or "vit_base_patch16_224.mae"
  (the tag after the dot does not change the architecture): one of
  `TIMM_ARCHITECTURES`, the families of `_TIMM_FAMILIES` (ViT, DeiT, MAE,
  DeiT-III, distilled DeiT, DINOv2 with and without registers, CLIP image
  towers). What each family adds follows timm's model definitions
  (`timm/models/vision_transformer.py`, `deit.py`): the papers are silent.

  `known` and `converter_prefixes` are what the error names besides
  (`pretrained.timm_model_config` passes the registered converters').

  Raises:
    ValueError: a name outside these families, naming the nearest known one.
  """
  arch = name.split(".")[0]
  if arch in TIMM_ARCHITECTURES:
    for family, pattern in _TIMM_FAMILIES.items():
      if m := pattern.fullmatch(arch):
        return _timm_family_fields(family, m)
  close = difflib.get_close_matches(arch, known, n=1, cutoff=0.0)
  nearest = f" (the nearest known name is {close[0]!r})" if close else ""
  raise ValueError(f"timm model name {name!r} is not supported{nearest}; load_timm "
                   "reads timm's ViT, DeiT, MAE, DeiT-III, distilled DeiT, DINOv2 and CLIP "
                   "towers (TIMM_ARCHITECTURES) and the families of registered converters "
                   f"({', '.join(p + '*' for p in converter_prefixes)})")
