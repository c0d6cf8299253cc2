"""Swin Transformer (Liu et al. 2021) and LipsFormer-Swin (paper 001, App. D).

    images (B, H, W, 3)
      -> patch partition: p×p stride-p convolution "embedding", norm "embedding_norm"
      -> stage_0 .. stage_{S-1}: each (but the first) starts with patch merging
         "merge" (2×2 neighbours -> one token, width doubled), then its blocks,
         `models.vit.Block`s run by a `models.vit.Encoder` "encoder" (scan or
         loop, `encoder_mode`); windowed attention, shifted by window // 2 on
         every odd block of a stage (Swin §3.2, cyclic shift + mask)
      -> final norm "norm", mean over tokens, head "head".

Windows as Swin (and timm) set them: a stage whose grid side is not larger
than the window attends over the whole side, unshifted (Swin-T's last stage
at 224²: one 7×7 window). Within a window the attention sees the window as its
own image (`models.token_layouts.WindowLayout`): AttnScale's DC (paper 000, eq. 7, of the
attention map) is the window's. FeatScale (eqs. 10-12) re-weights the
attention output after the windows are merged and the shift undone, so its
DC is the token mean of the whole stage map, as the authors' Swin code takes
it (VITA-Group/ViT-Anti-Oversmoothing, swin/models/swin_featscale.py).

The relative position bias (§3.2) is the shared attention field
`relative_position_bias` (`attention.base`), so every registered variant
(`attention`) gets it; Swin turns it on (`relative_position_bias`, its one
owner here).

Every stage's blocks alternate regular and shifted windows; the Encoder runs
them as per-layer segments (`Encoder.layouts`: a `WindowLayout` per layer,
shifted on the odd ones), so in scan mode each block is its own length-1 scan
("encoderblock_segment{k}") and `models.layouts.layer_trees(params[stage])`
lists the stage's layers in order in either mode.

LipsFormer-Swin-T (paper 001, App. Table 5, §4.2, Fig. 1 and 3): Swin-T's
shape with the LipsFormer block (`BlockSpec(block_order="lipsformer")`:
CenterNorm after the attention and MLP branches, scaled cosine attention with
τ = 12, weighted residuals α = 1/L with L = 12 blocks (Table 6: L counts
residual blocks; the official code below initialises every α of a block to
1/sum(depths)), the 7×7 depth-wise + 1×1 point-wise convolution branch,
DropPath without rescaling in training, × (1 − p) at evaluation), spectral
initialization, CenterNorm in the stem and after each merge, and patch
merging by a 2×2 stride-2 convolution (`merge="conv"`, §4.2). Differences
from the official code (IDEA-Research/LipsFormer, models/lipsformer_swin.py),
which we follow the paper over: that code merges patches with Swin's
concatenation + Linear, has two depth-wise convolutions per block (the
second without a point-wise one), feeds raw V with τ = 10 and uses no shifted
windows. Its α = 1/sum(depths) = 1/12 agrees with the paper (Table 6) and is
ours. Both keep Swin's relative position bias; so do we.
"""

from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn

from vit_spectral.layers.initializers import get_initializer
from vit_spectral.layers.norms import make_norm
from vit_spectral.models.backbone import (StagedBackbone, check_heads, check_positive,
                                          register_models)
from vit_spectral.models.specs import BlockSpec, EncoderSpec
from vit_spectral.settings import check_choice
from vit_spectral.models.token_layouts import WindowLayout
from vit_spectral.models.vit import Encoder, stem_initializer

__all__ = ["MERGES", "PatchMerging", "Swin", "SwinStage", "VARIANTS", "stage_windows"]

# How two stages meet (Swin.merge).
MERGES = ("linear", "conv")


def stage_windows(grid: tuple[int, int], window: int) -> tuple[tuple[int, int], tuple[int, int]]:
  """(window, shift) of a stage with this token grid: per side, the window
  clipped to the grid, and shift window // 2 where the grid is larger than
  the window, else 0 (Swin; timm's `_calc_window_shift`)."""
  size = tuple(min(g, window) for g in grid)
  shift = tuple(0 if g <= window else window // 2 for g in grid)
  return size, shift

# Swin's LayerNorm ε (torch's default, timm's Swin).
SWIN_NORM_EPSILON = 1e-5


class PatchMerging(nn.Module):
  """2×2 neighbouring tokens -> one token of width `features`; (B, H, W, C) ->
  (B, H/2, W/2, features).

  "linear" (Swin): the four tokens concatenated in the original code's and
  timm's channel order [x(0,0), x(1,0), x(0,1), x(1,1)] ((row, col) offsets),
  norm "norm" over 4C, Linear "reduction" 4C -> features without bias.
  "conv" (LipsFormer, §4.2): a 2×2 stride-2 convolution "reduction" (with
  bias), then norm "norm" over `features`. The norm, its ε, the kernel
  initializer and the dtypes are the blocks' (`spec`).
  """
  features: int
  mode: str
  spec: BlockSpec

  @nn.compact
  def __call__(self, x):
    spec = self.spec
    batch, rows, cols, width = x.shape
    norm = make_norm(spec.norm, spec.norm_epsilon, dtype=spec.dtype,
                     param_dtype=spec.param_dtype, name="norm")
    if self.mode == "conv":
      x = nn.Conv(self.features, (2, 2), strides=2, padding="VALID",
                  kernel_init=get_initializer(spec.kernel_init), dtype=spec.dtype,
                  param_dtype=spec.param_dtype, name="reduction")(x)
      return norm(x)
    # (B, H/2, 2, W/2, 2, C) -> (B, H/2, W/2, col offset, row offset, C): timm's order.
    x = x.reshape(batch, rows // 2, 2, cols // 2, 2, width).transpose(0, 1, 3, 4, 2, 5)
    x = norm(x.reshape(batch, rows // 2, cols // 2, 4 * width))
    return nn.Dense(self.features, use_bias=False,
                    kernel_init=get_initializer(spec.kernel_init), dtype=spec.dtype,
                    param_dtype=spec.param_dtype, name="reduction")(x)


class SwinStage(nn.Module):
  """Optional patch merging "merge", then `depth` blocks in an Encoder
  "encoder" with alternating regular / shifted windows; (B, H, W, C) ->
  (B, H', W', width).

  Attributes:
    depth: blocks in the stage.
    width: the stage's token width (the merge's output width).
    block: the stage's `BlockSpec`; encoder: the `EncoderSpec`.
    window_size: Swin's window side (clipped by `stage_windows`).
    merge: None (first stage) or one of MERGES.
    drop_path_rates: one per block (a slice of the model's linear schedule).
    deterministic: disables dropout and drop-path.
  """
  depth: int
  width: int
  block: BlockSpec
  encoder: EncoderSpec
  window_size: int
  merge: str | None = None
  drop_path_rates: Sequence[float] | None = None
  deterministic: bool = True

  @nn.compact
  def __call__(self, x):
    if self.merge is not None:
      x = PatchMerging(self.width, self.merge, self.block, name="merge")(x)
    batch, rows, cols, width = x.shape
    window, shift = stage_windows((rows, cols), self.window_size)   # WindowLayout checks them
    layouts = tuple(WindowLayout((rows, cols), window=window,
                                 shift=shift if i % 2 else (0, 0))
                    for i in range(self.depth))
    x = Encoder(depth=self.depth, block=self.block, spec=self.encoder, layouts=layouts,
                drop_path_rates=self.drop_path_rates, final_norm=False,
                deterministic=self.deterministic,
                name="encoder")(x.reshape(batch, rows * cols, width))
    return x.reshape(batch, rows, cols, width)


class Swin(StagedBackbone):
  """Swin Transformer for image classification (module docstring).

  Attributes (besides `StagedBackbone`'s: num_classes, depths, num_heads,
  mlp_ratio, patch_size, block, encoder):
    embed_dim: width of the first stage (doubled by each merge).
    window_size: side of the attention windows.
    merge: patch merging, "linear" (Swin) or "conv" (LipsFormer, §4.2).
    relative_position_bias: Swin's learned relative position bias in every
      block (`attention.base.Attention.relative_position_bias`); set here,
      not in `model.attention`.
  The blocks' norm and `norm_epsilon` (`block`) are also the stem's, the
  merges' and the final norm's; `encoder.drop_path_rate` is the largest
  drop-path rate, linear from 0 over all blocks of all stages (Swin).
  """
  embed_dim: int = 96
  window_size: int = 7
  merge: str = "linear"
  relative_position_bias: bool = True

  def check_options(self, height: int, width: int) -> None:
    """Raises ValueError naming the field (`Backbone.check_options`)."""
    self.check_stages()
    check_positive(self, "embed_dim", "window_size")
    check_heads(self.block, [self.stage_width(s) for s in range(len(self.depths))],
                self.num_heads)
    check_choice(self.merge, MERGES, "model.merge")
    if "relative_position_bias" in self.block.attention_kwargs:
      raise ValueError("model.attention.relative_position_bias is set by Swin: use "
                       "model.relative_position_bias")
    if self.block.stateful:
      raise ValueError(
          f"model.attention.name={self.block.attention!r} carries a score memory from layer "
          "to layer; Swin's stages differ in token count (patch merging) and attend within "
          "windows, and the score memory cannot cross stages whose token counts differ: "
          "use a stateless variant")
    side = self.patch_size * 2 ** (len(self.depths) - 1)
    if height % side or width % side:
      raise ValueError(
          f"image size {height}x{width} must be divisible by model.patch_size · "
          f"2^(stages − 1) = {side} (patch partition, then {len(self.depths) - 1} merges)")
    for s in range(len(self.depths)):
      grid = (height // self.patch_size // 2 ** s, width // self.patch_size // 2 ** s)
      window, _ = stage_windows(grid, self.window_size)
      if any(g % w for g, w in zip(grid, window)):
        raise ValueError(f"model.window_size={self.window_size} does not tile stage {s}'s "
                         f"{grid[0]}x{grid[1]} token grid at image size {height}x{width}")

  def stage_width(self, stage: int) -> int:
    return self.embed_dim * 2 ** stage

  def stage_block(self, stage: int, width: int) -> BlockSpec:
    """The stage's BlockSpec, with Swin's relative position bias."""
    block = super().stage_block(stage, width)
    return block.replace(attention_kwargs=dict(
        block.attention_kwargs, relative_position_bias=self.relative_position_bias))

  @nn.compact
  def __call__(self, images, *, train: bool = False):
    """images: (B, H, W, C) -> logits (B, num_classes), float32 (features
    (B, D), float32, when num_classes is 0)."""
    self.check_options(*images.shape[1:3])
    block = self.block
    x = nn.Conv(self.embed_dim, (self.patch_size,) * 2, strides=self.patch_size,
                padding="VALID", kernel_init=get_initializer(stem_initializer(block.kernel_init)),
                dtype=block.dtype, param_dtype=block.param_dtype,
                name="embedding")(images.astype(block.dtype))
    x = make_norm(block.norm, block.norm_epsilon, dtype=block.dtype,
                  param_dtype=block.param_dtype, name="embedding_norm")(x)
    x = nn.Dropout(block.dropout_rate)(x, deterministic=not train)
    for s, (depth, rates) in enumerate(zip(self.depths, self.drop_path_rates())):
      width = self.stage_width(s)
      x = SwinStage(depth=depth, width=width, block=self.stage_block(s, width),
                    encoder=self.encoder, window_size=self.window_size,
                    merge=self.merge if s else None, drop_path_rates=rates,
                    deterministic=not train, name=f"stage_{s}")(x)
    x = make_norm(block.norm, block.norm_epsilon, dtype=block.dtype,
                  param_dtype=block.param_dtype, name="norm")(x)
    return self.classify(x.reshape(x.shape[0], -1, x.shape[-1]), "mean")


_SWIN_BLOCK = dict(mlp_activation="gelu_erf", norm_epsilon=SWIN_NORM_EPSILON)
# LipsFormer-Swin-T: α = 1/L, L = sum(depths) = 12 blocks (paper 001 Table 6; the
# authors' models/lipsformer_swin.py: ScaleLayer(alpha=1/num_layers), num_layers =
# sum(depths), on every branch; configs/lipsformer_parts.py, `block_alpha`).
_LIPSFORMER_SWIN_T_DEPTHS = (2, 2, 6, 2)

VARIANTS: dict[str, dict[str, Any]] = {
    "Swin-T": dict(embed_dim=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24),
                   block=dict(_SWIN_BLOCK)),
    "Swin-S": dict(embed_dim=96, depths=(2, 2, 18, 2), num_heads=(3, 6, 12, 24),
                   block=dict(_SWIN_BLOCK)),
    "Swin-B": dict(embed_dim=128, depths=(2, 2, 18, 2), num_heads=(4, 8, 16, 32),
                   block=dict(_SWIN_BLOCK)),
    "LipsFormer-Swin-T": dict(
        embed_dim=96, depths=_LIPSFORMER_SWIN_T_DEPTHS, num_heads=(3, 6, 12, 24),
        merge="conv", norm="center_norm", kernel_init="spectral",
        attention=dict(name="cosine", tau=12.0, normalize_value=True),
        block=dict(block_order="lipsformer",
                   residual_alpha=1.0 / sum(_LIPSFORMER_SWIN_T_DEPTHS),
                   conv_block=True, conv_kernel_size=7, drop_path_rescale=False,
                   mlp_activation="gelu_erf")),
}


register_models(Swin, VARIANTS)
