"""CSwin Transformer (Dong et al., CVPR 2022) and LipsFormer-CSwin (paper 001).

A hierarchical backbone of `models.vit.Block`s with cross-shaped window
attention (`Block.stripe_width`): in every block the first half of the heads
attend within horizontal stripes of `stripe_widths[k]` rows (the whole
width), the second half within vertical stripes (the whole height), each
half with its own projections, the two outputs added. Values get CSwin's
locally-enhanced positional encoding (LePE, §3.3: the shared attention field
`lepe`, a depth-wise 3×3 convolution of V within each stripe, added to
softmax(·)V). A stripe as wide as the stage's grid is one window: the last
stage at 224² (7×7 tokens, stripe 7) attends globally with all heads in one
group, as the official model's last stage.

Layout: stage k (params "stage_0" ... "stage_{n-1}", as Swin's) is a strided
convolution and a norm ("embedding", "embedding_norm": the stem in stage_0, the merging
between stages after it) followed by its blocks, a `models.vit.Encoder`
named "encoder" (scanned or looped by `encoder_mode`, so
`models.layouts.layer_trees(params["stage_2"])` walks the third stage like the
ViT encoder). Widths double from stage to stage. Then the final norm ("norm",
unless the blocks end in their own norm, the LipsFormer order), the mean of
the tokens (sown as "pre_logits") and the head.

Shapes, from the official code (microsoft/CSWin-Transformer, models/cswin.py,
read, not copied): CSwin-T width 64, depths (1, 2, 21, 1), heads (2, 4, 8, 16);
CSwin-S width 64, depths (2, 4, 32, 2), heads (2, 4, 8, 16); CSwin-B width
96, depths (2, 4, 32, 2), heads (4, 8, 16, 32); stripes (1, 2, 7, 7), MLP
ratio 4, qkv bias, a 7×7 stride-4 stem with padding 2 and 3×3 stride-2
merges with padding 1 (`embedding="overlapping"`), each followed by a
LayerNorm (ε 1e-5, PyTorch's), exact GELU, DropPath linear in depth over
all blocks. Parameters (1000 classes): CSwin-T 22,320,552, CSwin-S
34,643,304, CSwin-B 77,382,184, equal to the official layer list counted
independently (tests/models/test_cswin.py; published: 23M, 35M, 78M). One
difference in form, none in function: the official block has one qkv
projection and one output projection of the two groups' concatenation; here
each group has its own (the column group's output projection without bias,
`Block`), which is the same map with the same parameter count.

LipsFormer-CSwin-T/S/B (paper 001, §4.2, App. B Table 4, Fig. 3): the CSwin
shapes with CenterNorm (stem, merges and blocks), scaled cosine attention
(τ = 12) with LePE, the weighted residual α initialised to 0.2 on every
branch (`LIPSFORMER_CSWIN_ALPHA`, below), spectral init, the convolution
branches — "two depth-wise convolutions (dwc) and one point-wise convolution
(pwc)" (§5.3): the 7×7 depth-wise + 1×1 branch and a second 7×7 depth-wise
branch (`Block.extra_depthwise_branch`) — the LipsFormer block order
(CenterNorm after the attention and feed-forward sums, so no final norm),
DropPath without rescaling in training (× (1 − p) at evaluation), and
non-overlapping convolution embedding and merging "as in Swin" (4×4 stride
4, 2×2 stride 2: `embedding="patch"`). Parameters
(1000 classes): 23,780,136 / 37,505,832 / 83,052,232, equal to the
authors' code's layer list (IDEA-Research/LipsFormer, models/cswin.py,
`dw_conv_layer=2`; the paper rounds: 24M / 38M / 83M). Where that code
differs from the paper, the paper (and the library's LipsFormer block) is
followed: the code has GELUs inside the convolution branches, one
CenterNorm per block after the feed-forward sum (it declares a second, unused:
same parameter count) where the paper has one after the attention sum and
one after the feed-forward sum, and in the cosine attention un-normalised V
and the heads divided by √K rather than K (`attention.cosine`'s defaults
follow the paper; LePE convolves the V that is mixed, V̂ there).

α = 0.2: here the paper contradicts itself and the authors' code decides.
Table 6 gives α = 1/L with L the residual blocks (1/25 for CSwin-T), but
§4.1.3 initialises α to "a small value such as 0.1 and 0.2" and Table 3
ablates α ∈ {0.1, 0.2, 0.3, 0.4} on LipsFormer-CSwin-T, 0.2 best (81.6%, the
figure of the full model in every other ablation row; 0.4 diverges), none of
them 1/25. The authors' code (models/cswin.py, in the repository's first
commit 00acb80, deleted since) builds every ScaleLayer of a
block (the two depth-wise branches, attention, MLP) with its default init_t =
0.2 (CSWin_64_12211_tiny_224 passes alpha=dict(init_t=0.05), but the
block's `**alpha_cfg` is commented out); that default does not depend on the
size, so S and B get 0.2 too (the code defines only the tiny model).

FeatScale (paper 000) re-weights the two stripe groups' summed output, CSwin's
one MSA output, with the token mean of the whole stage map as its DC
(`Block`: the authors' Swin code's reading; their code has no CSwin).

Errors: the Hopfield score memory cannot cross windows or stages (raises,
`Block`); the eigen `value_output` needs heads·head_dim = width, which a
stripe group (half the heads) does not have (raises); images whose side the
total stride or a stage's stripe width does not divide raise.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.layers.drop_path import linear_drop_path_rates
from vit_spectral.layers.initializers import get_initializer
from vit_spectral.layers.norms import make_norm
from vit_spectral.models.vit import ENCODER_MODES, Block, Encoder

__all__ = ["CSwin", "CSwinStage", "EMBEDDINGS", "LIPSFORMER_CSWIN_ALPHA", "MODEL", "VARIANTS",
           "embedding_conv"]

# How the stem and the merges convolve (`CSwin.embedding`): CSwin's
# overlapping convolutions or LipsFormer's non-overlapping ones ("as in Swin").
EMBEDDINGS = ("overlapping", "patch")

_SHAPES = {
    "T": dict(hidden_size=64, depths=(1, 2, 21, 1), num_heads=(2, 4, 8, 16)),
    "S": dict(hidden_size=64, depths=(2, 4, 32, 2), num_heads=(2, 4, 8, 16)),
    "B": dict(hidden_size=96, depths=(2, 4, 32, 2), num_heads=(4, 8, 16, 32)),
}
# PyTorch's LayerNorm ε and GELU (exact), as the official CSwin.
_CSWIN_BLOCK = {"norm_epsilon": 1e-5, "mlp_activation": "gelu_erf"}


# LipsFormer-CSwin's initial α on every branch, all sizes: the authors' code
# (IDEA-Research/LipsFormer models/cswin.py, ScaleLayer's init_t) and Table 3's
# best; not Table 6's 1/L (module docstring).
LIPSFORMER_CSWIN_ALPHA = 0.2


def _lipsformer(shape: Mapping[str, Any]) -> dict[str, Any]:
  """The LipsFormer-CSwin fields of one CSwin shape (module docstring)."""
  return dict(shape, embedding="patch", norm="center_norm", kernel_init="spectral",
              attention={"name": "cosine", "tau": 12.0, "lepe": True},
              block={"block_order": "lipsformer", "residual_alpha": LIPSFORMER_CSWIN_ALPHA,
                     "conv_block": True, "conv_kernel_size": 7,
                     "extra_depthwise_branch": True,
                     "drop_path_rescale": False, "mlp_activation": "gelu_erf"})


VARIANTS: dict[str, dict[str, Any]] = {
    **{f"CSwin-{size}": dict(shape, attention={"name": "dot_product", "lepe": True},
                             block=dict(_CSWIN_BLOCK))
       for size, shape in _SHAPES.items()},
    **{f"LipsFormer-CSwin-{size}": _lipsformer(shape) for size, shape in _SHAPES.items()},
}


def embedding_conv(stride: int, embedding: str) -> tuple[int, int]:
  """(kernel side, padding) of a stem or merge of `stride`: "overlapping" =
  kernel 2·stride − 1, padding stride // 2 (CSwin's 7×7/4 pad 2 stem and
  3×3/2 pad 1 merges; the output side is the input side / stride); "patch" =
  kernel stride, no padding (non-overlapping patches)."""
  if embedding == "overlapping":
    return 2 * stride - 1, stride // 2
  return stride, 0


class CSwinStage(nn.Module):
  """One stage: a strided convolution and a norm ("embedding",
  "embedding_norm"), then `depth` Blocks on the new grid ("encoder").

  Attributes:
    width: the stage's token width.
    depth: blocks in the stage.
    stride: the convolution's stride (the stem's patch size, 2 for a merge).
    embedding: one of EMBEDDINGS (`embedding_conv`).
    block_kwargs: the `Block` fields of every block (num_heads, mlp_dim,
      stripe_width, ...; grid_size is added here).
    drop_path_rates: the stage's `depth` DropPath rates.
    norm, norm_epsilon: the norm after the convolution (the blocks' norm).
    stem_init: initializer name of the convolution ("spectral" or
      "lecun_normal", `CSwin`).
    encoder_mode, encoder_unroll, encoder_residuals, remat: `Encoder`'s.
  """
  width: int
  depth: int
  stride: int
  embedding: str
  block_kwargs: Mapping[str, Any]
  drop_path_rates: Sequence[float]
  norm: str
  norm_epsilon: float
  stem_init: str
  encoder_mode: str = "scan"
  encoder_unroll: int = 1
  encoder_residuals: str | None = None
  remat: bool = False
  deterministic: bool = True
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    """x: (B, H, W, C) image or previous stage's grid -> (B, H/stride, W/stride, width)."""
    kernel, padding = embedding_conv(self.stride, self.embedding)
    x = nn.Conv(self.width, (kernel, kernel), strides=self.stride,
                padding=[(padding, padding)] * 2, kernel_init=get_initializer(self.stem_init),
                dtype=self.dtype, param_dtype=self.param_dtype, name="embedding")(x)
    batch, rows, cols, _ = x.shape
    x = x.reshape(batch, rows * cols, self.width)
    x = make_norm(self.norm, self.norm_epsilon, dtype=self.dtype, param_dtype=self.param_dtype,
                  name="embedding_norm")(x)
    x = Encoder(depth=self.depth, block_kwargs=dict(self.block_kwargs, grid_size=(rows, cols),
                                                    num_prefix_tokens=0),
                drop_path_rates=tuple(self.drop_path_rates), final_norm=False,
                mode=self.encoder_mode, unroll=self.encoder_unroll,
                residuals=self.encoder_residuals, remat=self.remat,
                deterministic=self.deterministic, dtype=self.dtype,
                param_dtype=self.param_dtype, name="encoder")(x)
    return x.reshape(batch, rows, cols, self.width)


class CSwin(nn.Module):
  """CSwin Transformer for image classification (module docstring).

  Attributes:
    num_classes: size of the zero-initialised head (0 = return the pooled
      features).
    hidden_size: width of stage 1; stage k has hidden_size·2^(k−1).
      The defaults of hidden_size, depths and num_heads are CSwin-T's.
    depths: blocks per stage (the number of stages is its length).
    num_heads: heads per stage (even where a stage has two stripe groups).
    stripe_widths: CSwin's split size per stage (`Block.stripe_width`); a
      stripe as wide as the stage's grid = global attention, one group.
    mlp_ratio: MLP width / token width.
    patch_size: the stem's stride (4); each merge has stride 2.
    embedding: "overlapping" (CSwin) or "patch" (LipsFormer), EMBEDDINGS.
    attention, attention_kwargs, norm, block_options, kernel_init,
    dropout_rate, attention_dropout_rate, encoder_mode, encoder_unroll,
    encoder_residuals, remat, dtype, param_dtype: as `models.vit.ViT`
      (block_options reach every block; norm is also the stem's, the
      merges' and the final norm, with the blocks' norm_epsilon).
    drop_path_rate: the largest DropPath rate, reached by the last block of
      the last stage (linear over all blocks, as CSwin and timm).
  """
  # Block fields each stage sets itself (so not `model.block` options).
  BLOCK_FIELDS_SET_BY_MODEL: ClassVar[tuple[str, ...]] = (
      "mlp_dim", "stripe_width", "window_size", "window_shift")

  num_classes: int
  # Defaults: CSwin-T's shape (a variant name sets its own).
  hidden_size: int = 64
  depths: Sequence[int] = (1, 2, 21, 1)
  num_heads: Sequence[int] = (2, 4, 8, 16)
  stripe_widths: Sequence[int] = (1, 2, 7, 7)
  mlp_ratio: float = 4.0
  patch_size: int = 4
  embedding: str = "overlapping"
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

  def check_options(self, image_shape: tuple[int, int]) -> None:
    stages = len(self.depths)
    for field in ("num_heads", "stripe_widths"):
      if len(getattr(self, field)) != stages:
        raise ValueError(f"model.{field}={tuple(getattr(self, field))} needs one entry per "
                         f"stage ({stages}, the length of model.depths)")
    if self.embedding not in EMBEDDINGS:
      raise ValueError(f"model.embedding={self.embedding!r}; choose one of {list(EMBEDDINGS)}")
    if self.encoder_mode not in ENCODER_MODES:
      raise ValueError(f"model.encoder_mode={self.encoder_mode!r}; choose one of "
                       f"{list(ENCODER_MODES)}")
    for field in ("dropout_rate", "attention_dropout_rate", "drop_path_rate"):
      if not 0.0 <= getattr(self, field) < 1.0:
        raise ValueError(f"model.{field}={getattr(self, field)} must be in [0, 1)")
    stride = self.patch_size * 2 ** (stages - 1)
    if any(side % stride for side in image_shape):
      raise ValueError(f"image size {image_shape[0]}x{image_shape[1]} is not divisible by "
                       f"{stride}, the total stride of model.patch_size={self.patch_size} "
                       f"and {stages - 1} stride-2 merges")
    for k, width in enumerate(self.stripe_widths):
      grid = [side // (self.patch_size * 2 ** k) for side in image_shape]
      if width < max(grid) and any(side % width for side in grid):
        raise ValueError(f"model.stripe_widths[{k}]={width} does not divide stage {k + 1}'s "
                         f"{grid[0]}x{grid[1]} token grid (image {image_shape[0]}x"
                         f"{image_shape[1]}); choose divisors of each stage's grid")

  def stage_block_fields(self, k: int) -> dict[str, Any]:
    """The Block fields of stage k's blocks (0-based; grid_size added by the stage)."""
    width = self.hidden_size * 2 ** k
    return dict(
        num_heads=self.num_heads[k], mlp_dim=int(width * self.mlp_ratio),
        stripe_width=self.stripe_widths[k], attention=self.attention,
        attention_kwargs=self.attention_kwargs, norm=self.norm,
        dropout_rate=self.dropout_rate, attention_dropout_rate=self.attention_dropout_rate,
        kernel_init=self.kernel_init, dtype=self.dtype, param_dtype=self.param_dtype,
        **dict(self.block_options or {}))

  @nn.compact
  def __call__(self, images, *, train: bool = False):
    """images: (B, H, W, C) -> logits (B, num_classes), float32 (features
    (B, width of the last stage), float32, when num_classes is 0)."""
    self.check_options(images.shape[1:3])
    shared = Block.settings(self.stage_block_fields(0))
    rates = linear_drop_path_rates(self.drop_path_rate, sum(self.depths))
    # As the ViT's stem: spectral init covers the convolutions (non-overlapping:
    # exact; overlapping: the kernel matrix's σ_max), else flax's default.
    stem_init = "spectral" if self.kernel_init == "spectral" else "lecun_normal"
    x = images.astype(self.dtype)
    start = 0
    for k, depth in enumerate(self.depths):
      x = CSwinStage(
          width=self.hidden_size * 2 ** k, depth=depth,
          stride=self.patch_size if k == 0 else 2, embedding=self.embedding,
          block_kwargs=self.stage_block_fields(k), drop_path_rates=rates[start:start + depth],
          norm=self.norm, norm_epsilon=shared["norm_epsilon"], stem_init=stem_init,
          encoder_mode=self.encoder_mode, encoder_unroll=self.encoder_unroll,
          encoder_residuals=self.encoder_residuals, remat=self.remat,
          deterministic=not train, dtype=self.dtype, param_dtype=self.param_dtype,
          name=f"stage_{k}")(x)
      start += depth
    batch, rows, cols, width = x.shape
    x = x.reshape(batch, rows * cols, width)
    if not Block.ends_in_norm(shared):
      x = make_norm(self.norm, shared["norm_epsilon"], dtype=self.dtype,
                    param_dtype=self.param_dtype, name="norm")(x)
    x = x.astype(jnp.promote_types(self.dtype, jnp.float32)).mean(axis=1)   # (B, D)
    self.sow("intermediates", "pre_logits", x)
    if not self.num_classes:
      return x
    return nn.Dense(self.num_classes, kernel_init=nn.initializers.zeros, dtype=x.dtype,
                    param_dtype=self.param_dtype, name="head")(x)


MODEL = CSwin
