"""CSwin Transformer (Dong et al., CVPR 2022) and LipsFormer-CSwin (paper 001).

A hierarchical backbone of `models.vit.Block`s with cross-shaped window
attention (`models.token_layouts.StripeLayout`): in every block the first half of the heads
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
`models.token_layouts`), which is the same map with the same parameter count.

LipsFormer-CSwin-T/S/B (paper 001, §4.2, App. B Table 4, Fig. 3): the CSwin
shapes with CenterNorm (stem, merges and blocks), scaled cosine attention
(τ = 12) with LePE, the weighted residual α initialised to 0.2 on every
branch (`LIPSFORMER_CSWIN_ALPHA`, below), spectral init, the convolution
branches — "two depth-wise convolutions (dwc) and one point-wise convolution
(pwc)" (§5.3): the 7×7 depth-wise + 1×1 branch and a second 7×7 depth-wise
branch (`BlockSpec.extra_depthwise_branch`) — the LipsFormer block order
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
(`models.vit.Block`: the authors' Swin code's reading; their code has no CSwin).

Errors: the Hopfield score memory cannot cross windows or stages (raises,
`models.token_layouts`); the eigen `value_output` needs heads·head_dim = width, which a
stripe group (half the heads) does not have (raises); images whose side the
total stride or a stage's stripe width does not divide raise.
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
