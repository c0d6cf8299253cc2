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
own image (`Block.window_size`): AttnScale's DC (paper 000, eq. 7, of the
attention map) is the window's. FeatScale (eqs. 10-12) re-weights the
attention output after the windows are merged and the shift undone, so its
DC is the token mean of the whole stage map, as the authors' Swin code takes
it (VITA-Group/ViT-Anti-Oversmoothing, swin/models/swin_featscale.py).

The relative position bias (§3.2) is the shared attention field
`relative_position_bias` (`attention.base`), so every registered variant
(`attention`) gets it; Swin turns it on (`relative_position_bias`, its one
owner here).

Every stage's blocks alternate regular and shifted windows; the Encoder runs
them as per-layer segments (`Encoder.layer_overrides` with window_shift on the
odd layers), so in scan mode each block is its own length-1 scan
("encoderblock_segment{k}") and `models.layouts.layer_trees(params[stage])`
lists the stage's layers in order in either mode.

LipsFormer-Swin-T (paper 001, App. Table 5, §4.2, Fig. 1 and 3): Swin-T's
shape with the LipsFormer block (`Block(block_order="lipsformer")`:
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

from typing import Any, ClassVar, Mapping, Sequence

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.attention import get_attention
from vit_spectral.layers import windows as windows_lib
from vit_spectral.layers.drop_path import linear_drop_path_rates
from vit_spectral.layers.initializers import get_initializer
from vit_spectral.layers.norms import make_norm
from vit_spectral.models.vit import Block, Encoder

__all__ = ["MERGES", "MODEL", "PatchMerging", "Swin", "SwinStage", "VARIANTS", "stage_windows"]

# How two stages meet (Swin.merge).
MERGES = ("linear", "conv")
# Swin's LayerNorm ε (torch's default, timm's Swin).
SWIN_NORM_EPSILON = 1e-5


def stage_windows(grid: tuple[int, int], window: int) -> tuple[tuple[int, int], tuple[int, int]]:
  """(window, shift) of a stage with this token grid: per side, the window
  clipped to the grid, and shift window // 2 where the grid is larger than
  the window, else 0 (Swin; timm's `_calc_window_shift`)."""
  size = tuple(min(g, window) for g in grid)
  shift = tuple(0 if g <= window else window // 2 for g in grid)
  return size, shift


class PatchMerging(nn.Module):
  """2×2 neighbouring tokens -> one token of width `features`; (B, H, W, C) ->
  (B, H/2, W/2, features).

  "linear" (Swin): the four tokens concatenated in the original code's and
  timm's channel order [x(0,0), x(1,0), x(0,1), x(1,1)] ((row, col) offsets),
  norm "norm" over 4C, Linear "reduction" 4C -> features without bias.
  "conv" (LipsFormer, §4.2): a 2×2 stride-2 convolution "reduction" (with
  bias), then norm "norm" over `features`.
  """
  features: int
  mode: str = "linear"
  norm: str = "layer_norm"
  norm_epsilon: float = SWIN_NORM_EPSILON
  kernel_init: str = "xavier_uniform"
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    batch, rows, cols, width = x.shape
    norm = make_norm(self.norm, self.norm_epsilon, dtype=self.dtype,
                     param_dtype=self.param_dtype, name="norm")
    if self.mode == "conv":
      x = nn.Conv(self.features, (2, 2), strides=2, padding="VALID",
                  kernel_init=get_initializer(self.kernel_init), dtype=self.dtype,
                  param_dtype=self.param_dtype, name="reduction")(x)
      return norm(x)
    # (B, H/2, 2, W/2, 2, C) -> (B, H/2, W/2, col offset, row offset, C): timm's order.
    x = x.reshape(batch, rows // 2, 2, cols // 2, 2, width).transpose(0, 1, 3, 4, 2, 5)
    x = norm(x.reshape(batch, rows // 2, cols // 2, 4 * width))
    return nn.Dense(self.features, use_bias=False,
                    kernel_init=get_initializer(self.kernel_init), dtype=self.dtype,
                    param_dtype=self.param_dtype, name="reduction")(x)


class SwinStage(nn.Module):
  """Optional patch merging "merge", then `depth` blocks in an Encoder
  "encoder" with alternating regular / shifted windows; (B, H, W, C) ->
  (B, H', W', width).

  Attributes:
    depth: blocks in the stage.
    width: the stage's token width (the merge's output width).
    block_kwargs: the Block fields every block shares (num_heads, mlp_dim,
      attention, norm, ...), without the token layout and windows.
    window_size: Swin's window side (clipped by `stage_windows`).
    merge: None (first stage) or one of MERGES.
    merge_norm_epsilon, kernel_init: the merge's.
    drop_path_rates: one per block (a slice of the model's linear schedule).
    encoder_mode, encoder_unroll, encoder_residuals, remat, deterministic:
      the Encoder's.
  """
  depth: int
  width: int
  block_kwargs: Mapping[str, Any]
  window_size: int
  merge: str | None = None
  merge_norm_epsilon: float = SWIN_NORM_EPSILON
  kernel_init: str = "xavier_uniform"
  drop_path_rates: Sequence[float] | None = None
  encoder_mode: str = "scan"
  encoder_unroll: int = 1
  encoder_residuals: str | None = None
  remat: bool = False
  deterministic: bool = True
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    if self.merge is not None:
      x = PatchMerging(self.width, self.merge, norm=self.block_kwargs.get("norm", "layer_norm"),
                       norm_epsilon=self.merge_norm_epsilon, kernel_init=self.kernel_init,
                       dtype=self.dtype, param_dtype=self.param_dtype, name="merge")(x)
    batch, rows, cols, width = x.shape
    window, shift = stage_windows((rows, cols), self.window_size)
    windows_lib.check_window((rows, cols), window, "model.window_size")
    block_kwargs = dict(self.block_kwargs, grid_size=(rows, cols), num_prefix_tokens=0,
                        window_size=window)
    shifted = tuple({"start": i, "stop": i + 1, "block": {"window_shift": shift}}
                    for i in range(1, self.depth, 2)) if any(shift) else None
    x = Encoder(depth=self.depth, block_kwargs=block_kwargs, layer_overrides=shifted,
                drop_path_rates=self.drop_path_rates, final_norm=False,
                mode=self.encoder_mode, unroll=self.encoder_unroll,
                residuals=self.encoder_residuals, remat=self.remat,
                deterministic=self.deterministic, dtype=self.dtype,
                param_dtype=self.param_dtype,
                name="encoder")(x.reshape(batch, rows * cols, width))
    return x.reshape(batch, rows, cols, width)


class Swin(nn.Module):
  """Swin Transformer for image classification (module docstring).

  Attributes:
    num_classes: size of the zero-initialised head (0 = no head, features).
    embed_dim: width of the first stage (doubled by each merge).
    depths, num_heads: blocks and attention heads per stage.
    patch_size: side of the patch partition's convolution (and stride).
    window_size: side of the attention windows.
    mlp_ratio: MLP width / token width.
    merge: patch merging, "linear" (Swin) or "conv" (LipsFormer, §4.2).
    relative_position_bias: Swin's learned relative position bias in every
      block (`attention.base.Attention.relative_position_bias`); set here,
      not in `model.attention`.
    (the blocks' `norm_epsilon`, `block_options`, is also the ε of the
    stem's, the merges' and the final norm, as the ViT's final norm takes it.)
    dropout_rate, attention_dropout_rate: as the ViT's.
    drop_path_rate: the largest drop-path rate, linear from 0 over all
      blocks of all stages (Swin; `Encoder.drop_path_rates` per stage).
    attention, attention_kwargs, norm, block_options, kernel_init,
    encoder_mode, encoder_unroll, encoder_residuals, remat, dtype,
    param_dtype: as `models.vit.ViT`'s (block_options may not set the fields
      Swin sets per stage: `BLOCK_FIELDS_SET_BY_MODEL`).
  """
  BLOCK_FIELDS_SET_BY_MODEL: ClassVar[tuple[str, ...]] = (
      "mlp_dim", "window_shift", "stripe_width")

  num_classes: int
  embed_dim: int = 96
  depths: tuple[int, ...] = (2, 2, 6, 2)
  num_heads: tuple[int, ...] = (3, 6, 12, 24)
  patch_size: int = 4
  window_size: int = 7
  mlp_ratio: float = 4.0
  merge: str = "linear"
  relative_position_bias: bool = True
  dropout_rate: float = Block.dropout_rate
  attention_dropout_rate: float = Block.attention_dropout_rate
  drop_path_rate: float = 0.0
  attention: str = Block.attention
  attention_kwargs: Mapping[str, Any] | None = None
  norm: str = Block.norm
  block_options: Mapping[str, Any] | None = None
  encoder_mode: str = "scan"
  encoder_unroll: int = 1
  encoder_residuals: str | None = None
  remat: bool = False
  kernel_init: str = Block.kernel_init
  dtype: Any = Block.dtype
  param_dtype: Any = Block.param_dtype

  def check_options(self, height: int, width: int) -> None:
    """Raises ValueError naming the field for settings Swin cannot run."""
    if len(self.depths) != len(self.num_heads) or not self.depths:
      raise ValueError(f"model.depths={tuple(self.depths)} and model.num_heads="
                       f"{tuple(self.num_heads)} need one entry per stage each")
    for field in ("embed_dim", "patch_size", "window_size"):
      if getattr(self, field) <= 0:
        raise ValueError(f"model.{field}={getattr(self, field)} must be positive")
    if min(self.depths) <= 0 or min(self.num_heads) <= 0:
      raise ValueError(f"model.depths={tuple(self.depths)} and model.num_heads="
                       f"{tuple(self.num_heads)} must be positive")
    if self.merge not in MERGES:
      raise ValueError(f"model.merge={self.merge!r}; choose one of {list(MERGES)}")
    for field in ("dropout_rate", "attention_dropout_rate", "drop_path_rate"):
      if not 0.0 <= getattr(self, field) < 1.0:
        raise ValueError(f"model.{field}={getattr(self, field)} must be in [0, 1)")
    if "relative_position_bias" in (self.attention_kwargs or {}):
      raise ValueError("model.attention.relative_position_bias is set by Swin: use "
                       "model.relative_position_bias")
    if get_attention(self.attention).initial_state(1, 1, 1) is not None:
      raise ValueError(
          f"model.attention.name={self.attention!r} carries a score memory from layer to "
          "layer; Swin's stages differ in token count (patch merging) and attend within "
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

  def norm_epsilon(self) -> float:
    """The blocks' norm ε (`block_options`, else Block's default)."""
    return Block.settings(dict(self.block_options or {}))["norm_epsilon"]

  def stage_width(self, stage: int) -> int:
    return self.embed_dim * 2 ** stage

  def block_fields(self, stage: int) -> dict[str, Any]:
    """The Block fields of every block of `stage` (windows and layout added by the stage)."""
    width = self.stage_width(stage)
    return dict(
        num_heads=self.num_heads[stage], mlp_dim=int(width * self.mlp_ratio),
        attention=self.attention,
        attention_kwargs=dict(self.attention_kwargs or {},
                              relative_position_bias=self.relative_position_bias),
        norm=self.norm, dropout_rate=self.dropout_rate,
        attention_dropout_rate=self.attention_dropout_rate, kernel_init=self.kernel_init,
        dtype=self.dtype, param_dtype=self.param_dtype, **dict(self.block_options or {}))

  @nn.compact
  def __call__(self, images, *, train: bool = False):
    """images: (B, H, W, C) -> logits (B, num_classes), float32 (features
    (B, D), float32, when num_classes is 0)."""
    self.check_options(*images.shape[1:3])
    stem_init = (get_initializer("spectral") if self.kernel_init == "spectral"
                 else nn.initializers.lecun_normal())
    x = nn.Conv(self.embed_dim, (self.patch_size,) * 2, strides=self.patch_size,
                padding="VALID", kernel_init=stem_init, dtype=self.dtype,
                param_dtype=self.param_dtype, name="embedding")(images.astype(self.dtype))
    x = make_norm(self.norm, self.norm_epsilon(), dtype=self.dtype, param_dtype=self.param_dtype,
                  name="embedding_norm")(x)
    x = nn.Dropout(self.dropout_rate)(x, deterministic=not train)

    rates = linear_drop_path_rates(self.drop_path_rate, sum(self.depths))
    start = 0
    for s, depth in enumerate(self.depths):
      x = SwinStage(depth=depth, width=self.stage_width(s), block_kwargs=self.block_fields(s),
                    window_size=self.window_size, merge=self.merge if s else None,
                    merge_norm_epsilon=self.norm_epsilon(), kernel_init=self.kernel_init,
                    drop_path_rates=rates[start:start + depth],
                    encoder_mode=self.encoder_mode, encoder_unroll=self.encoder_unroll,
                    encoder_residuals=self.encoder_residuals, remat=self.remat,
                    deterministic=not train, dtype=self.dtype, param_dtype=self.param_dtype,
                    name=f"stage_{s}")(x)
      start += depth

    x = make_norm(self.norm, self.norm_epsilon(), dtype=self.dtype, param_dtype=self.param_dtype,
                  name="norm")(x)
    x = x.astype(jnp.promote_types(self.dtype, jnp.float32))   # pool and head in float32
    x = x.reshape(x.shape[0], -1, x.shape[-1]).mean(axis=1)    # (B, D)
    self.sow("intermediates", "pre_logits", x)
    if not self.num_classes:
      return x
    return nn.Dense(self.num_classes, kernel_init=nn.initializers.zeros,
                    dtype=x.dtype, param_dtype=self.param_dtype, name="head")(x)


MODEL = Swin

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
