"""CSwin Transformer (Dong et al., CVPR 2022) and LipsFormer-CSwin (paper 001).

A hierarchical backbone of `models.vit.Block`s with cross-shaped window
attention (`models.token_layouts.StripeLayout`): in every block the first half
of the heads attend within horizontal stripes of `stripe_widths[k]` rows, the
second half within vertical stripes, each half with its own projections, the
two outputs added; values get CSwin's LePE (§3.3, the attention field `lepe`).
A stripe as wide as the stage's grid is one window (global attention, one
group, as the official model's last stage at 224²).

Layout: stage k ("stage_0" ... "stage_{n-1}", as Swin's) is a strided
convolution and a norm ("embedding", "embedding_norm") then its blocks, a
`models.vit.Encoder` "encoder"; widths double from stage to stage; then the
final norm "norm" (unless the blocks end in their own norm), the token mean
(sown as "pre_logits") and the head.

Shapes from the official code (microsoft/CSWin-Transformer, models/cswin.py,
read, not copied): CSwin-T width 64, depths (1, 2, 21, 1), heads (2, 4, 8,
16); CSwin-S width 64, depths (2, 4, 32, 2), heads (2, 4, 8, 16); CSwin-B
width 96, depths (2, 4, 32, 2), heads (4, 8, 16, 32); stripes (1, 2, 7, 7),
MLP ratio 4, qkv bias, a 7×7 stride-4 stem with padding 2 and 3×3 stride-2
merges with padding 1 (`embedding="overlapping"`), each followed by a
LayerNorm (ε 1e-5), exact GELU, DropPath linear over all blocks. Parameters
(1000 classes): 22,320,552 / 34,643,304 / 77,382,184, the official layer
list's. Each stripe group has its own output projection (the column group's
without bias) where the official block has one of the concatenation: the same
map, the same parameter count.

LipsFormer-CSwin-T/S/B (paper 001, §4.2, App. B Table 4, Fig. 3): the CSwin
shapes with CenterNorm, scaled cosine attention (τ = 12) with LePE, α = 0.2 on
every branch (`LIPSFORMER_CSWIN_ALPHA`), spectral init, a 7×7 depth-wise + 1×1
branch and a second 7×7 depth-wise branch (§5.3), the LipsFormer block order,
DropPath without rescaling, and non-overlapping embedding and merging
(`embedding="patch"`). Parameters: 23,780,136 / 37,505,832 / 83,052,232, the
authors' code's (IDEA-Research/LipsFormer, models/cswin.py, `dw_conv_layer=2`).
Where that code differs from the paper, the paper is followed; α = 0.2, where
the paper contradicts itself, is the authors' code's.

FeatScale (paper 000) re-weights the two groups' summed output with the
stage-wide token mean as its DC (`models.vit.Block`).

Raises: the Hopfield score memory (it cannot cross windows or stages); an
eigen `value_output` (a stripe group lacks heads·head_dim = width); images
whose side the total stride or a stage's stripe width does not divide.

Design notes: docs/design.md#modelscswinpy
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import flax.linen as nn

from vit_spectral.layers.initializers import get_initializer
from vit_spectral.layers.norms import make_norm
from vit_spectral.models.backbone import (StagedBackbone, check_heads, check_positive,
                                          register_models)
from vit_spectral.settings import check_choice
from vit_spectral.models.specs import BlockSpec, EncoderSpec
from vit_spectral.models.token_layouts import StripeLayout
from vit_spectral.models.vit import Encoder, stem_initializer

__all__ = ["CSwin", "CSwinStage", "EMBEDDINGS", "LIPSFORMER_CSWIN_ALPHA", "VARIANTS",
           "embedding_conv"]

# How the stem and the merges convolve (CSwin.embedding): CSwin's overlapping
# convolutions or LipsFormer's non-overlapping ones ("as in Swin").
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
  "embedding_norm"), then `depth` Blocks on the new grid ("encoder") within
  cross-shaped windows (`models.token_layouts.StripeLayout`).

  Attributes:
    width: the stage's token width.
    depth: blocks in the stage.
    stride: the convolution's stride (the stem's patch size, 2 for a merge).
    embedding: one of EMBEDDINGS (`embedding_conv`).
    block: the stage's `BlockSpec` (its norm and ε also the convolution's
      norm); encoder: the `EncoderSpec`.
    stripe_width: CSwin's split size (`StripeLayout.width`).
    drop_path_rates: the stage's `depth` DropPath rates.
    stem_init: initializer name of the convolution ("spectral" or
      "lecun_normal", `models.vit.stem_initializer`).
    deterministic: disables dropout and drop-path.
  """
  width: int
  depth: int
  stride: int
  embedding: str
  block: BlockSpec
  encoder: EncoderSpec
  stripe_width: int
  drop_path_rates: Sequence[float]
  stem_init: str
  deterministic: bool = True

  @nn.compact
  def __call__(self, x):
    """x: (B, H, W, C) image or previous stage's grid -> (B, H/stride, W/stride, width)."""
    block = self.block
    kernel, padding = embedding_conv(self.stride, self.embedding)
    x = nn.Conv(self.width, (kernel, kernel), strides=self.stride,
                padding=[(padding, padding)] * 2, kernel_init=get_initializer(self.stem_init),
                dtype=block.dtype, param_dtype=block.param_dtype, name="embedding")(x)
    batch, rows, cols, _ = x.shape
    x = x.reshape(batch, rows * cols, self.width)
    x = make_norm(block.norm, block.norm_epsilon, dtype=block.dtype,
                  param_dtype=block.param_dtype, name="embedding_norm")(x)
    x = Encoder(depth=self.depth, block=block, spec=self.encoder,
                layouts=StripeLayout((rows, cols), width=self.stripe_width),
                drop_path_rates=tuple(self.drop_path_rates), final_norm=False,
                deterministic=self.deterministic, name="encoder")(x)
    return x.reshape(batch, rows, cols, self.width)


class CSwin(StagedBackbone):
  """CSwin Transformer for image classification (module docstring).

  Attributes (besides `StagedBackbone`'s: num_classes, depths, num_heads
  (even where a stage has two stripe groups), mlp_ratio, patch_size (the
  stem's stride; each merge has stride 2), block, encoder):
    hidden_size: width of stage 1; stage k has hidden_size·2^(k−1).
    stripe_widths: CSwin's split size per stage (`StripeLayout.width`); a
      stripe as wide as the stage's grid = global attention, one group.
    embedding: "overlapping" (CSwin) or "patch" (LipsFormer), EMBEDDINGS.
  The blocks' norm (`block`) is also the stem's, the merges' and the final
  norm, with the blocks' norm_epsilon; `encoder.drop_path_rate` is the
  largest DropPath rate, reached by the last block of the last stage (linear
  over all blocks, as CSwin and timm).
  """
  hidden_size: int = 64
  stripe_widths: Sequence[int] = (1, 2, 7, 7)
  embedding: str = "overlapping"

  def check_options(self, height: int, width: int) -> None:
    """Raises ValueError naming the field (`Backbone.check_options`)."""
    self.check_stages("stripe_widths")
    check_positive(self, "hidden_size", "stripe_widths")
    stages = len(self.depths)
    check_heads(self.block, [self.hidden_size * 2 ** s for s in range(stages)], self.num_heads)
    check_choice(self.embedding, EMBEDDINGS, "model.embedding")
    stride = self.patch_size * 2 ** (stages - 1)
    image_shape = (height, width)
    if any(side % stride for side in image_shape):
      raise ValueError(f"image size {height}x{width} is not divisible by "
                       f"{stride}, the total stride of model.patch_size={self.patch_size} "
                       f"and {stages - 1} stride-2 merges")
    for k, stripe in enumerate(self.stripe_widths):
      grid = [side // (self.patch_size * 2 ** k) for side in image_shape]
      if stripe < max(grid) and any(side % stripe for side in grid):
        raise ValueError(f"model.stripe_widths[{k}]={stripe} does not divide stage {k + 1}'s "
                         f"{grid[0]}x{grid[1]} token grid (image {height}x{width}); choose "
                         "divisors of each stage's grid")

  @nn.compact
  def __call__(self, images, *, train: bool = False):
    """images: (B, H, W, C) -> logits (B, num_classes), float32 (features
    (B, width of the last stage), float32, when num_classes is 0)."""
    self.check_options(*images.shape[1:3])
    block = self.block
    x = images.astype(block.dtype)
    for k, (depth, rates) in enumerate(zip(self.depths, self.drop_path_rates())):
      width = self.hidden_size * 2 ** k
      x = CSwinStage(
          width=width, depth=depth, stride=self.patch_size if k == 0 else 2,
          embedding=self.embedding, block=self.stage_block(k, width), encoder=self.encoder,
          stripe_width=self.stripe_widths[k], drop_path_rates=rates,
          stem_init=stem_initializer(block.kernel_init), deterministic=not train,
          name=f"stage_{k}")(x)
    batch, rows, cols, width = x.shape
    x = x.reshape(batch, rows * cols, width)
    if not block.ends_in_norm():
      x = make_norm(block.norm, block.norm_epsilon, dtype=block.dtype,
                    param_dtype=block.param_dtype, name="norm")(x)
    return self.classify(x, "mean")


register_models(CSwin, VARIANTS)
