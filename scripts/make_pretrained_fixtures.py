"""Writes tests/fixtures/pretrained/: timm's own outputs for random-weight ViTs.

  PYTHONPATH=. /path/to/torch-venv/bin/python scripts/make_pretrained_fixtures.py [--check]

Needs torch, timm and this package's own dependencies (the family patterns
of pretrained.loading pick timm's names; --check runs our converters); run it
from the repository root in an environment that has them all.

Decision: the tests compare our converters with fixtures, not with a live
timm. The suite must stay under 10 minutes on 2 CPU cores and CI does not
install PyTorch (~3 GB) to run it; torch and timm are never needed by the
package or its tests. What is committed is small (names, shapes, seeds,
timm's logits, versions: no weights): the weights are regenerated from the
seed by `tests/models/pretrained_fixtures.random_weights`, NumPy only, which
this script and the tests share.

For each fixture the script draws the weights from the seed, loads them into
the timm model (a `state_dict` for the timm models; `_load_weights` of an
`.npz` written to a temporary file for the big_vision ones), runs timm's
forward in float32 on two seeded 224² images, and writes the logits:

  deit_small_patch16_224.json     timm DeiT-S/16 (names/shapes: its state_dict)
  vit_base_patch16_224.json       timm ViT-B/16
  big_vision_augreg_b16.json      an AugReg-named ViT-B/16 .npz (encoderblock_{i}),
                                  read by timm's VisionTransformer
  big_vision_scanned_ti16.json    big_vision's own naming, blocks scanned into
                                  one stack, Ti/16 with depth 3 and gap pooling,
                                  read by VisionTransformer(class_token=False,
                                  global_pool="avg", fc_norm=False, no_embed_class=True)
  cait_xxs24_224.json             timm CaiT-XXS24 (LayerScale γ and talking heads at
  cait_s24_224.json               the scales of pretrained_fixtures.scale_of); read by
                                  pretrained.cait_timm through pretrained.load_timm
  swin_tiny_patch4_window7_224.json  timm Swin-T, read by pretrained.swin_timm
  deit3_small_patch16_224.json    timm DeiT-III S/16 (LayerScale, no_embed_class)
  deit_tiny_distilled_patch16_224.json  distilled DeiT-Ti (dist token, head_dist)
  vit_small_patch14_dinov2.json   DINOv2 S/14 (LayerScale, no head: features), and
  vit_small_patch14_reg4_dinov2.json  with 4 registers (no_embed_class): both built
                                  at img_size=224 (16x16 patches) instead of timm's
                                  518 (37x37): the same architecture, a shorter
                                  position embedding, a cheaper test
  vit_base_patch16_224.mae.json   MAE ViT-B/16 encoder (the ".mae" pretrained cfg:
                                  no head, CLS token after the final norm)
  vit_xsmall_patch16_clip_224.json  the smallest CLIP tower (norm_pre, LayerNorm ε
                                  1e-5, no patch bias, exact GELU, 512-wide head)
  vit_base_patch32_clip_quickgelu_224.json  the smallest QuickGELU CLIP tower
  (the new families' weights: pretrained_fixtures.scale_of; LayerScale γ around
  0.5, the dist token and registers N(0, 0.1²), so every mechanism matters)
  swiglu_packed.json              timm's SwiGLUPacked (DINOv2 ViT-g's MLP, 8 -> 16 -> 8)
                                  on seeded weights and a seeded (2, 5, 8) input
  timm_preprocessing.json         timm's data config (resolve_data_config of the
                                  pretrained cfg) of every pretrained tag of every
                                  architecture load_timm reads, and each bare
                                  name's default tag: our table
                                  (pretrained.timm_preprocessing) is checked against it
  timm_architectures.json         timm's list of each family's architecture names
                                  and each one's shape, read from the model timm
                                  builds (on the meta device: no weights), which
                                  the tests compare with pretrained.timm_model_config
  posemb_resample.json            timm's resample_abs_pos_embed on seeded
                                  1+7x7 -> 1+12x12 and 1+14x14 -> 1+10x10 embeddings

--check also runs our converters (pretrained.loading) on the same weights and
prints the relative error ‖ours - timm‖ / ‖timm‖ of each (the tests require
<= 1e-4).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile

import numpy as np
import timm
import torch
from timm.layers import resample_abs_pos_embed
from timm.models.vision_transformer import VisionTransformer, _load_weights

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.models import pretrained_fixtures as fx  # noqa: E402  pylint: disable=C0413

TIMM_MODELS = {"deit_small_patch16_224": 1, "vit_base_patch16_224": 2,
               "cait_xxs24_224": 6, "cait_s24_224": 7, "swin_tiny_patch4_window7_224": 8}
# The pretrained families: name (the fixture's too): (seed, timm.create_model kwargs).
FAMILY_MODELS = {
    "deit3_small_patch16_224": (9, {}),
    "deit_tiny_distilled_patch16_224": (10, {}),
    "vit_small_patch14_dinov2": (11, {"img_size": 224}),
    "vit_small_patch14_reg4_dinov2": (12, {"img_size": 224}),
    "vit_base_patch16_224.mae": (13, {}),
    "vit_xsmall_patch16_clip_224": (14, {}),
    "vit_base_patch32_clip_quickgelu_224": (15, {}),
}
# name: (seed, big_vision_tensors arguments, timm VisionTransformer arguments, our variant)
BIG_VISION = {
    "big_vision_augreg_b16": (
        3, dict(width=768, depth=12, heads=12, mlp_dim=3072, patch=16, classes=1000,
                image_size=224, augreg=True),
        dict(embed_dim=768, depth=12, num_heads=12, num_classes=1000), "B/16", {}),
    "big_vision_scanned_ti16": (
        4, dict(width=192, depth=3, heads=3, mlp_dim=768, patch=16, classes=10,
                image_size=224, augreg=False),
        dict(embed_dim=192, depth=3, num_heads=3, num_classes=10, class_token=False,
             global_pool="avg", fc_norm=False, no_embed_class=True), "Ti/16", {"depth": 3}),
}
POSEMB_SEED = 5
POSEMB_CASES = ((7, 12), (14, 10))       # (old side, new side), one prefix (CLS) row, width 8


def versions() -> dict[str, str]:
  return {"torch": torch.__version__, "timm": timm.__version__, "numpy": np.__version__,
          "python": platform.python_version()}


def timm_logits(model: torch.nn.Module, images: np.ndarray) -> np.ndarray:
  model.eval()
  with torch.no_grad():
    return model(torch.from_numpy(images)).numpy().astype(np.float32)


def write(name: str, content: dict) -> None:
  path = os.path.join(fx.FIXTURE_DIR, f"{name}.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(content, f, indent=None, separators=(",", ":"))
    f.write("\n")
  print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path)} bytes)")


def make_timm(name: str, seed: int, images: np.ndarray, check: bool,
              create_kwargs: dict | None = None) -> None:
  model = timm.create_model(name, pretrained=False, **(create_kwargs or {})).float()
  tensors = [(k, list(v.shape)) for k, v in model.state_dict().items()]
  weights = fx.random_weights(tensors, seed)
  model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
  logits = timm_logits(model, images)
  extra = {"create_kwargs": create_kwargs} if create_kwargs else {}
  write(name, {"kind": "timm", "model": name, "seed": seed, "image_seed": fx.IMAGE_SEED,
               **extra, "tensors": tensors, "logits": logits.tolist(),
               "versions": versions()})
  if check:
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    from vit_spectral.pretrained import loading as pretrained  # pylint: disable=import-outside-toplevel
    ours_model, variables = pretrained.load_timm(weights, name)
    ours = np.asarray(ours_model.apply(variables, jnp.asarray(images.transpose(0, 2, 3, 1))))
    print(f"  check {name}: relative error {fx.relative_error(ours, logits):.2e}, "
          f"max |logit| {np.abs(logits).max():.2f}")


def make_big_vision(name: str, seed: int, tensor_args: dict, timm_args: dict, variant: str,
                    overrides: dict, images: np.ndarray, check: bool) -> None:
  tensors = [(k, list(s)) for k, s in fx.big_vision_tensors(**tensor_args)]
  weights = fx.random_weights(tensors, seed)
  model = VisionTransformer(**timm_args).float()
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, f"{name}.npz")
    np.savez(path, **weights)
    _load_weights(model, path)
    logits = timm_logits(model, images)
    write(name, {"kind": "big_vision", "variant": variant, "overrides": overrides,
                 "seed": seed, "image_seed": fx.IMAGE_SEED, "tensors": tensors,
                 "timm_model": {"class": "VisionTransformer", **timm_args},
                 "logits": logits.tolist(), "versions": versions()})
    if check:
      import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
      from vit_spectral.pretrained import loading as pretrained  # pylint: disable=import-outside-toplevel
      x = jnp.asarray(images.transpose(0, 2, 3, 1))
      for activation in ("gelu_erf", "gelu_tanh"):
        ours_model, variables = pretrained.load_big_vision(
            path, variant, block=dict(mlp_activation=activation), **overrides)
        ours = np.asarray(ours_model.apply(variables, x))
        print(f"  check {name} ({activation}): relative error to timm "
              f"{fx.relative_error(ours, logits):.2e}, max |logit| {np.abs(logits).max():.2f}")


def make_swiglu() -> None:
  from timm.layers import SwiGLUPacked  # pylint: disable=import-outside-toplevel
  seed, input_seed, width, hidden = 16, 17, 8, 16
  mlp = SwiGLUPacked(in_features=width, hidden_features=hidden).float().eval()
  tensors = [(k, list(v.shape)) for k, v in mlp.state_dict().items()]
  weights = fx.random_weights(tensors, seed)
  mlp.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
  x = np.random.default_rng(input_seed).standard_normal((2, 5, width), dtype=np.float32)
  with torch.no_grad():
    out = mlp(torch.from_numpy(x)).numpy().astype(np.float32)
  write("swiglu_packed", {"module": "timm.layers.SwiGLUPacked", "seed": seed,
                          "input_seed": input_seed, "input_shape": [2, 5, width],
                          "hidden_features": hidden, "tensors": tensors,
                          "output": out.tolist(), "versions": versions()})


def supported_architectures() -> dict[str, list[str]]:
  """timm's architecture names of each family load_timm reads: the ViT
  families (every name timm registers that matches the family's pattern) and
  the converters' names."""
  from vit_spectral.pretrained import loading as pretrained  # pylint: disable=import-outside-toplevel
  out = {family: [n for n in timm.list_models() if pattern.fullmatch(n)]
         for family, pattern in timm_names._TIMM_FAMILIES.items()}  # pylint: disable=W0212
  for prefix, converter in pretrained.family_converters().items():
    out[prefix.rstrip("_")] = list(converter.names)
  return out


def make_preprocessing(families: dict[str, list[str]]) -> None:
  from timm.data import resolve_data_config  # pylint: disable=import-outside-toplevel
  from timm.models import get_pretrained_cfg  # pylint: disable=import-outside-toplevel
  names, default_tags, untagged = {}, {}, []
  for arch in (a for archs in families.values() for a in archs):
    tags = timm.list_pretrained(f"{arch}.*")
    if not tags:
      untagged.append(arch)
      continue
    default_tags[arch] = get_pretrained_cfg(arch).tag
    for name in tags:
      config = resolve_data_config(pretrained_cfg=get_pretrained_cfg(name).to_dict())
      names[name] = {"input_size": list(config["input_size"]), "mean": list(config["mean"]),
                     "std": list(config["std"]), "interpolation": config["interpolation"],
                     "crop_pct": config["crop_pct"], "crop_mode": config["crop_mode"]}
  write("timm_preprocessing", {
      "function": "timm.data.resolve_data_config(pretrained_cfg=get_pretrained_cfg(name))",
      "names": names, "default_tags": default_tags, "without_pretrained_weights": untagged,
      "versions": versions()})


def _architecture(name: str) -> dict:
  """The shape of timm's model `name`, read from the modules timm builds."""
  with torch.device("meta"):
    model = timm.create_model(name, pretrained=False)
  block = model.blocks[0]
  mlp = block.mlp
  return {
      "embed_dim": model.embed_dim, "depth": len(model.blocks),
      "num_heads": block.attn.num_heads, "mlp_hidden": mlp.fc1.out_features,
      "mlp_class": type(mlp).__name__, "act": type(mlp.act).__name__,
      "patch_size": list(model.patch_embed.patch_size),
      "patch_bias": model.patch_embed.proj.bias is not None,
      "class_token": model.cls_token is not None,
      "dist_token": getattr(model, "dist_token", None) is not None,
      "reg_tokens": 0 if getattr(model, "reg_token", None) is None else model.reg_token.shape[1],
      "no_embed_class": bool(model.no_embed_class),
      "layer_scale": type(block.ls1).__name__ == "LayerScale",
      "norm_pre": type(model.norm_pre).__name__ != "Identity",
      "norm_eps": block.norm1.eps, "global_pool": model.global_pool,
      "fc_norm": type(model.fc_norm).__name__ != "Identity",
      "attn_pool": getattr(model, "attn_pool", None) is not None,
      "qk_norm": type(block.attn.q_norm).__name__ != "Identity",
  }


def make_architectures(families: dict[str, list[str]]) -> None:
  vit = {f: names for f, names in families.items() if f not in ("cait", "swin")}
  write("timm_architectures", {
      "families": families,
      "architectures": {n: _architecture(n) for names in vit.values() for n in names},
      "versions": versions()})


def make_posemb() -> None:
  rng = np.random.default_rng(POSEMB_SEED)
  cases = []
  for old, new in POSEMB_CASES:
    posemb = rng.standard_normal((1, 1 + old * old, 8), dtype=np.float32)
    out = resample_abs_pos_embed(torch.from_numpy(posemb), [new, new], num_prefix_tokens=1)
    cases.append({"old": old, "new": new, "width": 8, "num_prefix_tokens": 1,
                  "output": out.numpy().astype(np.float32).tolist()})
  write("posemb_resample", {"seed": POSEMB_SEED, "function": "timm.layers.resample_abs_pos_embed"
                            " (bicubic, antialias=True)", "cases": cases,
                            "versions": versions()})


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--check", action="store_true",
                      help="also run our converters and print their relative error")
  parser.add_argument("--only", nargs="*", default=None, metavar="NAME",
                      help="write only these fixtures (names without .json)")
  args = parser.parse_args()
  wanted = lambda name: args.only is None or name in args.only  # noqa: E731
  torch.set_num_threads(max(1, os.cpu_count() or 1))
  os.makedirs(fx.FIXTURE_DIR, exist_ok=True)
  images = fx.images()
  for name, seed in TIMM_MODELS.items():
    if wanted(name):
      make_timm(name, seed, images, args.check)
  for name, (seed, create_kwargs) in FAMILY_MODELS.items():
    if wanted(name):
      make_timm(name, seed, images, args.check, create_kwargs)
  for name, (seed, tensor_args, timm_args, variant, overrides) in BIG_VISION.items():
    if wanted(name):
      make_big_vision(name, seed, tensor_args, timm_args, variant, overrides, images,
                      args.check)
  if wanted("posemb_resample"):
    make_posemb()
  if wanted("swiglu_packed"):
    make_swiglu()
  families = supported_architectures()
  if wanted("timm_preprocessing"):
    make_preprocessing(families)
  if wanted("timm_architectures"):
    make_architectures(families)


if __name__ == "__main__":
  main()
