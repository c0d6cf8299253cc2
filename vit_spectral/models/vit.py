"""Vision Transformer: patch embedding, position embedding, Block, Encoder, head.

One `Block` serves every paper: the attention variant (`attention`, resolved through
`vit_spectral.attention`'s registry) and the norm (`norm`) are config, not
subclasses. The encoder runs the blocks either as one `nn.scan` (optionally
rematerialised) or as a Python loop; both carry `(x, state)` from block to block,
where `state` is the attention variant's memory (None for stateless variants).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_spectral.attention import get_attention
from vit_spectral.layers.drop_path import DropPath, linear_drop_path_rates
from vit_spectral.layers.feat_scale import FeatScale, check_feat_scale_form
from vit_spectral.layers.grid_conv import GridConv
from vit_spectral.layers.initializers import get_initializer
from vit_spectral.layers.mlp import MlpBlock, check_activation
from vit_spectral.layers.space_to_depth import space_to_depth
from vit_spectral.layers import windows as windows_lib
from vit_spectral.layers.norms import LAYER_NORM_EPSILON, make_norm
from vit_spectral.models.posemb import POSEMB_CHOICES, sincos_2d
from vit_spectral.models.segments import BLOCK_NAME, scan_name, segments

ENCODER_MODES = ("scan", "loop")
# What the encoder's backward pass keeps from the forward (Encoder.residuals).
ENCODER_RESIDUALS = ("all", "dots")
# How the attention branch meets the residual stream (Block.attention_residual).
ATTENTION_RESIDUALS = ("add", "replace", "none")
POOLINGS = ("cls", "mean")
STEMS = ("patch", "space_to_depth")
# The attention fields every Block sets itself (so not `model.attention` options).
ATTENTION_FIELDS_SET_BY_BLOCK = ("num_heads", "dropout_rate", "deterministic", "kernel_init",
                                 "grid_size", "num_prefix_tokens", "dtype", "param_dtype")
# The Block fields the Encoder sets itself (so not `layer_overrides[n].block` keys).
BLOCK_FIELDS_SET_BY_ENCODER = ("deterministic", "dtype", "param_dtype")
BLOCK_ORDERS = ("pre_norm", "post_norm", "lipsformer")


def _as_float32(tree):
  """Pins the carried state to float32: the scan carry's dtype must not change."""
  return jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), tree)


def check_attention_residual(choice: str, attention_cls: type) -> None:
  """Raises ValueError unless `choice` is valid for the attention class."""
  if choice not in ATTENTION_RESIDUALS:
    raise ValueError(f"model.block.attention_residual={choice!r}; choose one of "
                     f"{list(ATTENTION_RESIDUALS)}")
  if choice == "replace" and not attention_cls.mixes_skip:
    raise ValueError(
        "model.block.attention_residual='replace' needs an attention variant with "
        f"its own skip path (mixes_skip); {attention_cls.__name__} has none: "
        "use 'add' or 'none'")


class BranchSpec(NamedTuple):
  """One branch of a `Block`, as `Block.__call__` builds it and analysis reads it.

    pre_norm:                 x <- x + DropPath(α ⊙ f(Norm(x)))
    post_norm:                x <- Norm(x + DropPath(α ⊙ f(x)))
    neither:                  x <- x + DropPath(α ⊙ f(x))
    residual=False:           x <- f(Norm(x))   (the output is the stream)

  Attributes:
    name: "conv", "attention" or "mlp".
    suffix: the suffix of the branch's parameters and modules: "norm{suffix}",
      "alpha{suffix}", "drop_path{suffix}".
    modules: the submodules that make f, in call order.
    pre_norm: Norm on the branch input (inside the residual).
    post_norm: Norm after the residual sum.
    weighted: f is scaled by the learned per-channel α (eq. 4).
    residual: added to the stream; False = f's output is the stream
      (attention_residual "replace" or "none"), so no α and no DropPath.
  """
  name: str
  suffix: str
  modules: tuple[str, ...]
  pre_norm: bool
  post_norm: bool
  weighted: bool
  residual: bool = True


def _branch_specs(block_order: str, conv_block: bool, use_mlp: bool,
                  attention_residual: str, residual_alpha: float | None,
                  extra_depthwise_branch: bool = False) -> tuple[BranchSpec, ...]:
  """The branches of a `Block` with these fields, in call order (see `Block`)."""
  weighted = residual_alpha is not None
  post = block_order != "pre_norm"
  branches = []
  if conv_block:   # §4.2.1: a weighted residual branch with no CenterNorm after it
    branches.append(BranchSpec("conv", "_conv", ("conv_dw", "conv_pw"), pre_norm=False,
                               post_norm=False, weighted=weighted))
  if conv_block and extra_depthwise_branch:   # LipsFormer-CSwin's second dwc (§5.3)
    branches.append(BranchSpec("conv_depthwise", "_conv2", ("conv2_dw",), pre_norm=False,
                               post_norm=False, weighted=weighted))
  if attention_residual == "add":
    branches.append(BranchSpec("attention", "1", ("attention",), pre_norm=not post,
                               post_norm=post, weighted=weighted))
  else:
    branches.append(BranchSpec("attention", "1", ("attention",), pre_norm=True,
                               post_norm=False, weighted=False, residual=False))
  if use_mlp:
    branches.append(BranchSpec("mlp", "2", ("mlp",), pre_norm=not post, post_norm=post,
                               weighted=weighted))
  return tuple(branches)


class Block(nn.Module):
  """Transformer block, called as `(x, state), _ = block((x, state), rate, mask)`.

  A sequence of residual branches (`Block.branches` describes them; analysis
  reads that description): with `conv_block` a convolution branch, then
  attention, then (with `use_mlp`) the MLP. `block_order` places the norm
  around the attention and MLP branches (LipsFormer, paper 001, Table 1):

    "pre_norm" (default):  x <- x + DropPath(α ⊙ f(Norm(x)))
    "post_norm":           x <- Norm(x + DropPath(α ⊙ f(x)))
    "lipsformer":          x <- Norm(x + DropPath(α ⊙ f(x)))  with α required
                           (the LipsFormer block; use norm="center_norm")

  The LipsFormer block (§4.2.1, Fig. 1) as the paper draws it: three
  sub-modules, each a residual branch re-weighted by α and dropped by DropPath
  — the convolution block (7×7 depth-wise then 1×1 point-wise convolution on
  the patch grid, one branch), scaled cosine attention, feed-forward — with
  CenterNorm after the attention branch and after the feed-forward branch
  only (the paper: "CenterNorm operator is optional after each sub-module. In
  this work we apply CenterNorm after scaled cosine similarity attention and
  feed-forward connection"), i.e. two norms per block, each on the residual
  sum:

    x <- x + DropPath(α_c ⊙ PW(DW(x)))               conv branch, no norm
    x <- CN(x + DropPath(α_1 ⊙ SCSA(x)))
    x <- CN(x + DropPath(α_2 ⊙ FFN(x)))

  The conv branch has no norm in any order. The block then ends in its norm,
  so the encoder adds no final norm after it (`Block.ends_in_norm`).

  α is the weighted residual shortcut of eq. 4, a learned per-channel vector
  ("alpha{suffix}", initialised to `residual_alpha`); with `residual_alpha=None`
  the branch is not weighted (α ≡ 1, no parameter). The attention output goes
  through dropout before DropPath. DropPath rescales kept branches by
  1/(1 − p) in training unless `drop_path_rescale=False` (LipsFormer, App. J),
  which keeps them unscaled and scales the branch by (1 − p) at evaluation
  instead; either way the evaluation output is the training output's mean
  over the drop masks (`layers.drop_path`). Defaults give
  the plain pre-norm ViT block, parameter names "norm1", "attention", "norm2",
  "mlp".

  Options for the attention branch (defaults: the standard block, same
  parameters, same numbers):

  * feat_scale: FeatScale (paper 000, eqs. 10-12) re-weights the DC and
    high-frequency parts of the attention output before dropout;
    feat_scale_form picks eqs. 10-12 as written ("equations") or the
    authors' DeiT code, which adds the re-weighted parts twice
    ("authors_deit", `layers.feat_scale`).
  * attention_residual="replace" (paper 004): x <- Attn(Norm(x), skip=x). The
    attention's own skip path (Hopfield's α·skip) takes the block input x and
    replaces the residual: α·x + (1 - α)·Attn(Norm(x)). Needs a variant with
    `mixes_skip` (e.g. "hopfield").
  * attention_residual="none": x <- Attn(Norm(x)), no residual around attention
    (a variant's own skip, if any, still mixes its input Norm(x)).
    In both, the attention output is the stream itself, not a residual branch,
    so the block's dropout, drop-path and α do not apply to it; both need
    block_order="pre_norm".
  * use_mlp=False: no MLP sub-block (and no norm2). With attention_residual=
    "none" this is the attention-only network of Dong et al. / paper 004 Thm 5.2.
  * window_size (Swin): attention within non-overlapping windows of the patch
    grid (`layers.windows`), after a cyclic shift by −window_shift when it is
    set (shifted windows, with the mask that keeps tokens brought together by
    the roll apart); the attention sees each window as its own image
    (grid_size = the window), so AttnScale's "DC" (of the attention map) is
    the window's, and the recorded maps are per window, (B·nW, H, N, N).
    FeatScale acts on the attention output after the windows are merged
    back and the shift undone, so its DC is the token mean of the whole
    stage map: paper 000 re-weights "the output of MSA", and the authors'
    Swin code (VITA-Group/ViT-Anti-Oversmoothing,
    swin/models/swin_featscale.py, SwinTransformerBlock.forward) takes the
    mean after window_reverse and the reverse cyclic shift.
  * stripe_width (CSwin): cross-shaped windows: the first half of the heads
    attend within horizontal stripes (stripe_width rows, full width:
    submodule "attention_rows"), the second half within vertical stripes
    (full height, stripe_width columns: "attention_cols"); each head group
    has its own projections, and the block adds the two outputs. The column
    group's output projection has no bias (`out_bias=False`): the two
    projections then hold exactly the parameters of CSwin's one projection
    of the concatenated groups. A stripe as wide as the grid is one window:
    one group of all heads ("attention"). The eigen `value_output` needs
    one group (raises otherwise). FeatScale re-weights the sum of the two
    groups (CSwin's one MSA output) with the stage-wide token mean, as for
    Swin: the authors' code has no CSwin, and their Swin code's reading
    (the mean of the merged map) gives the stripes one DC.

  Attributes:
    num_heads: attention heads.
    mlp_dim: MLP hidden width.
    attention: registered attention name.
    attention_kwargs: extra fields for the attention class (variant options).
    norm: registered norm name.
    dropout_rate: dropout after attention and inside the MLP.
    attention_dropout_rate: dropout on attention probabilities.
    deterministic: disables dropout and drop-path.
    kernel_init: initializer name for Dense and Conv kernels.
    grid_size, num_prefix_tokens: token layout, handed to the attention.
    feat_scale: re-weight the DC and high-frequency parts of the attention
      output per channel (paper 000, FeatScale, eqs. 10-12; submodule
      "feat_scale"). Off = no parameters, exactly the plain block.
    feat_scale_form: with feat_scale, one of `layers.feat_scale.
      FEAT_SCALE_FORMS`: "equations" (eqs. 10-12; the authors' CaiT and Swin
      code) or "authors_deit" (the authors' DeiT featscale.py: s and t enter
      twice). Same parameters; ignored without feat_scale.
    attention_residual: one of ATTENTION_RESIDUALS (see above).
    use_mlp: whether the block has its MLP sub-block.
    block_order: "pre_norm", "post_norm" or "lipsformer" (see above).
    residual_alpha: initial value of the per-channel residual weight α (eq. 4),
      the same on every weighted branch; None = no α. LipsFormer: 1/L with L
      the number of blocks (Table 6; `configs.lipsformer_parts.block_alpha`),
      0.2 for LipsFormer-CSwin (the authors' code, `models.cswin`).
    conv_block: add LipsFormer's convolution branch (§4.2.1): depth-wise
      `conv_kernel_size`² ("conv_dw") then point-wise 1×1 ("conv_pw") on the
      patch grid, one weighted residual branch ("alpha_conv"); CLS passes
      around it.
    conv_kernel_size: side of the depth-wise kernel (7 in the paper).
    extra_depthwise_branch: with `conv_block`, a second convolution branch
      after it: the depth-wise `conv_kernel_size`² convolution alone
      ("conv2_dw"), weighted ("alpha_conv2"), no norm. LipsFormer-CSwin
      "use[s] two depth-wise convolutions (dwc) and one point-wise
      convolution (pwc)" (paper 001, §5.3; the authors' `dw_conv_layer=2`).
    drop_path_rescale: DropPath scales kept branches by 1/(1 − p) in training
      (True) or leaves them unscaled in training and scales the branch by
      (1 − p) at evaluation (False, LipsFormer App. J).
    mlp_activation: the MLP's GELU, "gelu_tanh" (flax's and big_vision's
      default) or "gelu_erf" (exact; timm's ViT/DeiT, see `models.pretrained`).
    norm_epsilon: ε of the norms that have one (LayerNorm; 1e-6 as in
      big_vision and timm's ViT/DeiT); the encoder's final norm takes it too.
    window_size: (rows, cols) of the local attention windows (Swin); None =
      global attention. window_shift: (rows, cols) of the cyclic shift
      (shifted windows; (0, 0) = none). stripe_width: CSwin's cross-shaped
      windows (see above); None = none. Windows need tokens on a grid with no
      prefix token, a stateless attention variant, attention_residual="add"
      and no `mask`.
  """
  num_heads: int
  mlp_dim: int
  attention: str = "dot_product"
  attention_kwargs: Mapping[str, Any] | None = None
  norm: str = "layer_norm"
  dropout_rate: float = 0.0
  attention_dropout_rate: float = 0.0
  deterministic: bool = True
  kernel_init: str = "xavier_uniform"
  grid_size: tuple[int, int] | None = None
  num_prefix_tokens: int = 0
  feat_scale: bool = False
  feat_scale_form: str = "equations"
  attention_residual: str = "add"
  use_mlp: bool = True
  block_order: str = "pre_norm"
  residual_alpha: float | None = None
  conv_block: bool = False
  conv_kernel_size: int = 7
  extra_depthwise_branch: bool = False
  drop_path_rescale: bool = True
  mlp_activation: str = "gelu_tanh"
  norm_epsilon: float = LAYER_NORM_EPSILON
  window_size: tuple[int, int] | None = None
  window_shift: tuple[int, int] = (0, 0)
  stripe_width: int | None = None
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @classmethod
  def settings(cls, fields: Mapping[str, Any]) -> dict[str, Any]:
    """`fields` completed with the Block's defaults (keys that are not Block
    fields dropped): what a Block built from `fields` would hold."""
    names = {f.name for f in dataclasses.fields(cls)} - {"parent", "name"}
    defaults = {f.name: f.default for f in dataclasses.fields(cls)
                if f.name in names and f.default is not dataclasses.MISSING}
    return {**defaults, **{k: v for k, v in fields.items() if k in names}}

  @classmethod
  def branches(cls, fields: Mapping[str, Any]) -> tuple[BranchSpec, ...]:
    """The residual branches of a Block with `fields` (others at their defaults)."""
    values = cls.settings(fields)
    return _branch_specs(values["block_order"], values["conv_block"], values["use_mlp"],
                         values["attention_residual"], values["residual_alpha"],
                         values["extra_depthwise_branch"])

  @classmethod
  def ends_in_norm(cls, fields: Mapping[str, Any]) -> bool:
    """Whether a Block with `fields` ends in a norm (its last branch post-norms)."""
    return cls.branches(fields)[-1].post_norm

  def check_options(self):
    check_activation(self.mlp_activation)
    if self.block_order not in BLOCK_ORDERS:
      raise ValueError(f"model.block.block_order={self.block_order!r}; choose one "
                       f"of {list(BLOCK_ORDERS)}")
    if self.block_order == "lipsformer" and self.residual_alpha is None:
      raise ValueError("model.block.block_order='lipsformer' needs "
                       "model.block.residual_alpha (e.g. 1/L for L blocks)")
    if self.conv_block and self.grid_size is None:
      raise ValueError("model.block.conv_block=True needs tokens on a patch grid")
    if self.extra_depthwise_branch and not self.conv_block:
      raise ValueError("model.block.extra_depthwise_branch=True is a second convolution "
                       "branch: it needs model.block.conv_block=True")
    if self.conv_kernel_size < 1:
      raise ValueError(f"model.block.conv_kernel_size={self.conv_kernel_size} "
                       "must be positive")
    if not isinstance(self.feat_scale, bool):
      raise ValueError(f"model.block.feat_scale={self.feat_scale!r} must be True or False")
    check_feat_scale_form(self.feat_scale_form, "model.block.feat_scale_form")
    if not isinstance(self.drop_path_rescale, bool):
      raise ValueError(f"model.block.drop_path_rescale={self.drop_path_rescale!r} must "
                       "be True or False")

  def attention_groups(self) -> list[tuple[str, int, tuple[int, int], tuple[int, int]]]:
    """The attention's head groups: (submodule name, heads, window, shift) each;
    [("attention", num_heads, None, (0, 0))] for global attention."""
    if self.window_size is None and self.stripe_width is None:
      return [("attention", self.num_heads, None, (0, 0))]
    if self.window_size is not None and self.stripe_width is not None:
      raise ValueError("model.block sets both window_size and stripe_width; choose one")
    if self.grid_size is None or self.num_prefix_tokens:
      raise ValueError("windowed attention (window_size / stripe_width) needs patch tokens "
                       f"on a grid and no prefix token (got grid_size={self.grid_size}, "
                       f"num_prefix_tokens={self.num_prefix_tokens})")
    grid = tuple(self.grid_size)
    if self.window_size is not None:
      window = tuple(self.window_size)
      windows_lib.check_window(grid, window, "model.block.window_size")
      shift = tuple(self.window_shift)
      if any(not 0 <= s < w for s, w in zip(shift, window)):
        raise ValueError(f"model.block.window_shift={shift} must be in [0, window) on each "
                         f"side (window_size={window})")
      return [("attention", self.num_heads, window, shift)]
    width = self.stripe_width
    if width >= max(grid):
      return [("attention", self.num_heads, grid, (0, 0))]
    windows_lib.check_window(grid, (width, width), "model.block.stripe_width")
    if self.num_heads % 2:
      raise ValueError(f"model.block.stripe_width needs an even number of heads (half per "
                       f"stripe direction), got num_heads={self.num_heads}")
    half = self.num_heads // 2
    return [("attention_rows", half, (width, grid[1]), (0, 0)),
            ("attention_cols", half, (grid[0], width), (0, 0))]

  def residual(self, x, spec: BranchSpec, branch, drop_path_rate):
    """One branch `spec` around `branch(y, skip)`: (B, T, D) -> (B, T, D)."""
    norm = None
    if spec.pre_norm or spec.post_norm:
      norm = make_norm(self.norm, self.norm_epsilon, dtype=self.dtype,
                       param_dtype=self.param_dtype, name=f"norm{spec.suffix}")
    y = branch(norm(x) if spec.pre_norm else x, x)
    if not spec.residual:
      return y
    if spec.weighted:
      alpha = self.param(f"alpha{spec.suffix}", nn.initializers.constant(self.residual_alpha),
                         (x.shape[-1],), self.param_dtype)
      y = y * alpha.astype(y.dtype)
    drop_path = DropPath(rescale=self.drop_path_rescale, name=f"drop_path{spec.suffix}")
    x = x + drop_path(y, drop_path_rate, self.deterministic)
    return norm(x) if spec.post_norm else x

  @nn.compact
  def __call__(self, carry, drop_path_rate, mask=None):
    """carry: (x (B, T, D), state); drop_path_rate: scalar; mask: see attention.base."""
    self.check_options()
    x, state = carry
    groups = self.attention_groups()
    windowed = groups[0][2] is not None
    set_by_block = dict(
        num_heads=self.num_heads, dropout_rate=self.attention_dropout_rate,
        deterministic=self.deterministic, kernel_init=self.kernel_init,
        grid_size=self.grid_size, num_prefix_tokens=self.num_prefix_tokens,
        dtype=self.dtype, param_dtype=self.param_dtype)
    assert set(set_by_block) == set(ATTENTION_FIELDS_SET_BY_BLOCK)
    attention_cls = get_attention(self.attention)
    kwargs = dict(self.attention_kwargs or {})
    if len(groups) > 1 and kwargs.get("head_dim") is None:
      kwargs["head_dim"] = x.shape[-1] // self.num_heads   # the groups split the heads
    # Two stripe groups stand for CSwin's one output projection (W [x1; x2] + b
    # = W1 x1 + W2 x2 + b): the second group's has no bias, so the parameters
    # match the reference's one by one.
    attentions = [attention_cls(name=name, **dict(set_by_block, num_heads=heads,
                                                  grid_size=window or self.grid_size,
                                                  num_prefix_tokens=0 if window
                                                  else self.num_prefix_tokens),
                                **dict(kwargs, **({"out_bias": False} if n else {})))
                  for n, (name, heads, window, _) in enumerate(groups)]
    attention = attentions[0]
    if len(groups) > 1 and attention.value_output_settings().eigen:
      raise ValueError(
          f"model.attention.value_output={attention.value_output!r} with stripe_width: "
          "each stripe group has half the heads, so its heads*head_dim is half the "
          "width and there is no width x width W_V W_proj to eigen-reparameterize; "
          "use 'standard'")

    check_attention_residual(self.attention_residual, type(attention))
    if type(attention).updates_prefix_only:
      raise ValueError(f"model.attention.name={self.attention!r} updates the class token "
                       "only and cannot run in a Block (its output is not one per token); "
                       "it is the class stage of models.cait")
    if self.attention_residual != "add" and self.block_order != "pre_norm":
      raise ValueError(
          f"model.block.attention_residual={self.attention_residual!r} needs "
          f"model.block.block_order='pre_norm' (got {self.block_order!r})")
    if windowed:
      if attention_cls.initial_state(1, 1, 1) is not None:
        raise ValueError(
            f"attention {self.attention!r} carries a state from layer to layer over the "
            "whole token sequence; windowed attention (window_size / stripe_width) splits "
            "the tokens into windows whose count and size change between stages, so the "
            "state cannot be carried: use a stateless variant")
      if self.attention_residual != "add" or mask is not None:
        raise ValueError("windowed attention (window_size / stripe_width) needs "
                         "model.block.attention_residual='add' and no attention mask")

    def windowed_attention(y):
      """The head groups, each within its windows; (B, T, D) -> (B, T, D)."""
      grid = tuple(self.grid_size)
      total = None
      for module, (_, _, window, shift) in zip(attentions, groups):
        z = windows_lib.roll(y, grid, (-shift[0], -shift[1])) if any(shift) else y
        window_mask = None
        if any(shift):
          window_mask = jnp.asarray(windows_lib.shifted_window_mask(grid, window, shift))
          window_mask = jnp.tile(window_mask[:, None], (y.shape[0], 1, 1, 1))
        z, _ = module(windows_lib.partition(z, grid, window), None, window_mask)
        z = windows_lib.merge(z, grid, window)
        z = windows_lib.roll(z, grid, shift) if any(shift) else z
        total = z if total is None else total + z
      return total

    def convolve(y, skip, layers=(("conv_dw", True), ("conv_pw", False))):
      del skip
      for name, depthwise in layers:
        size = self.conv_kernel_size if depthwise else 1
        y = GridConv(grid_size=self.grid_size, num_prefix_tokens=self.num_prefix_tokens,
                     kernel_size=size, depthwise=depthwise, kernel_init=self.kernel_init,
                     dtype=self.dtype, param_dtype=self.param_dtype, name=name)(y)
      return y

    def attend(y, skip):
      nonlocal state
      if windowed:
        y = windowed_attention(y)
      elif self.attention_residual == "replace":   # the variant's own skip takes x
        y, state = attention(y, state, mask, skip=skip)
      else:
        y, state = attention(y, state, mask)
      if self.feat_scale:   # paper 000 eqs. 10-12, on the attention output (windows merged)
        y = FeatScale(form=self.feat_scale_form, dtype=self.dtype,
                      param_dtype=self.param_dtype, name="feat_scale")(y)
      if self.attention_residual == "add":
        y = nn.Dropout(self.dropout_rate)(y, deterministic=self.deterministic)
      return y

    def feed_forward(y, skip):
      del skip
      return MlpBlock(mlp_dim=self.mlp_dim, dropout_rate=self.dropout_rate,
                      deterministic=self.deterministic, kernel_init=self.kernel_init,
                      activation=self.mlp_activation, dtype=self.dtype,
                      param_dtype=self.param_dtype, name="mlp")(y)

    def convolve_depthwise(y, skip):
      return convolve(y, skip, layers=(("conv2_dw", True),))

    functions = {"conv": convolve, "conv_depthwise": convolve_depthwise, "attention": attend,
                 "mlp": feed_forward}
    for spec in _branch_specs(self.block_order, self.conv_block, self.use_mlp,
                              self.attention_residual, self.residual_alpha,
                              self.extra_depthwise_branch):
      x = self.residual(x, spec, functions[spec.name], drop_path_rate)

    self.sow("intermediates", "block_output", x)
    return (x, _as_float32(state)), None


class Encoder(nn.Module):
  """`depth` Blocks, scanned or looped, then a final norm ("encoder_norm")
  unless the last block already ends in its norm (post-norm and LipsFormer
  orders, `Block.ends_in_norm`).

  Attributes:
    depth: number of blocks.
    block_kwargs: fields of every `Block` (num_heads, mlp_dim, attention, ...).
    layer_overrides: per-layer-range changes of those fields (see
      `models.segments`); consecutive layers with identical fields form a
      segment, scanned as one stack.
    drop_path_rate: largest drop-path rate (linear schedule over depth).
    drop_path_rates: explicit per-layer rates (`depth` of them), e.g. a
      slice of one linear schedule over every stage of a hierarchical
      backbone; None = the schedule of `drop_path_rate`. Not both.
    final_norm: end in the final norm as described above; False = no
      "encoder_norm" (a stage of a backbone that places its norms itself).
    mode: "scan" (parameters stacked along a leading depth axis under
      "encoderblock", or "encoderblock_segment{k}" per segment when layers
      differ) or "loop" (one subtree per block, "encoderblock_{i}").
      `models.layouts` converts between the two.
    unroll: "scan" only: blocks per iteration of the compiled loop, an int
      >= 1; a segment's length or more = no loop at all (straight-line code,
      "loop" mode's speed and compile time). The parameters stay stacked.
    residuals: what the backward pass keeps from the forward (without
      `remat`): "all" (every residual autodiff saves) or "dots" (only the
      outputs of the Dense and Conv matmuls, `jax.checkpoint_policies.
      dots_with_no_batch_dims_saveable`: norms, activations, the attention
      scores, softmax and its product with V are recomputed in the backward
      pass). None (default) = per backend: "dots" for the scan on CPU, "all"
      otherwise. Same parameters, same numbers; only the compiled program
      changes.
    remat: rematerialise each block in the backward pass (keeps nothing).
    deterministic: disables dropout.

  Why the CPU scan keeps only the matmul outputs. The scan's backward pass
  reads the forward's residuals from stacked (L, ...) buffers, and
  `jax.lax.scan` starts each stacked output as a zero-filled buffer
  (`lax.empty2`, a broadcast) that XLA copies before the loop overwrites it
  slice by slice; in "loop" mode the same values are plain temporaries that
  XLA fuses into their consumers. With every residual kept, the train step of
  ViT-Ti at 32² in 4² patches, batch 128, depth 4, compiles to 35 such copies
  writing 758 MB per step before any block runs (the MLP's (4, 128, 65, 768)
  activations five times, the attention probabilities, the norms' inputs,
  ...) and needs 1090 MB of temporaries (loop: 757 MB). A GPU or TPU writes
  memory at over 1 TB/s; this CPU lost ~12 % of the step to it. With "dots"
  the compiled step keeps 12 copies of 74 MB and 389 MB of temporaries, and
  the element-wise work is recomputed inside the backward loop, where it
  fuses (`jax.jit(step).lower(...).compile()`: `as_text()`,
  `memory_analysis()`). Unrolling the loop (`unroll` >= depth) removes the
  buffers too, at the price of "loop" mode's compile time.

  Measured on the 2-core CPU (ViT-Ti width 192, 3 heads, MLP 768, 32² images,
  4² patches, depth 12, batch 128, float32, AdamW, `training.steps.train_step`;
  the variants interleaved in one process, 3 rounds × 2 steps, medians (min);
  2026-11-23, machine load ~1.5): wall per step: scan with every residual
  4.70 s (4.27), loop 3.92 s (3.67), scan with "dots" 3.63 s (3.34); CPU time
  per step 8.39 / 7.19 / 6.59 s. The scan was 20 % slower than the loop; with
  "dots" it is 23 % faster than before and 7 % faster than the loop. (Under
  load 6-10, CPU time per step, unroll=12 added: all 7.64 s, loop 6.83 s,
  unroll=12 6.66 s, "dots" 6.54 s.) Compile of the train step (wall, load
  ~1.5): depth 12: scan 5.3 s, "dots" 4.2 s, loop 6.2 s, unroll=12 9.7 s;
  depth 24: scan 5.0 s, "dots" 4.4 s, loop 14.8 s, unroll=24 18.1 s. The
  scan's compile time stays flat in depth, with or without "dots"; the
  loop's and the unrolled scan's grow with it.
  """
  depth: int
  block_kwargs: Mapping[str, Any]
  layer_overrides: Sequence[Mapping[str, Any]] | None = None
  drop_path_rate: float = 0.0
  drop_path_rates: Sequence[float] | None = None
  final_norm: bool = True
  mode: str = "scan"
  unroll: int = 1
  residuals: str | None = None
  remat: bool = False
  deterministic: bool = True
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  def residual_policy(self) -> str:
    """`residuals`, or its per-backend default (see the class docstring)."""
    if self.residuals is not None:
      return self.residuals
    return "dots" if self.mode == "scan" and jax.default_backend() == "cpu" else "all"

  def check_options(self) -> None:
    if self.mode not in ENCODER_MODES:
      raise ValueError(f"model.encoder_mode={self.mode!r}; choose one of {list(ENCODER_MODES)}")
    if isinstance(self.unroll, bool) or not isinstance(self.unroll, int) or self.unroll < 1:
      raise ValueError(f"model.encoder_unroll={self.unroll!r} must be an int >= 1 (blocks "
                       "per iteration of the scanned encoder's loop)")
    if self.unroll != 1 and self.mode != "scan":
      raise ValueError(f"model.encoder_unroll={self.unroll} applies to "
                       f"model.encoder_mode='scan' only (got {self.mode!r}); leave it at 1")
    if self.residuals is not None and self.residuals not in ENCODER_RESIDUALS:
      raise ValueError(f"model.encoder_residuals={self.residuals!r}; choose one of "
                       f"{list(ENCODER_RESIDUALS)} or None (per backend)")
    if self.drop_path_rates is not None and (
        len(self.drop_path_rates) != self.depth or self.drop_path_rate):
      raise ValueError(f"Encoder.drop_path_rates needs {self.depth} rates (one per layer) "
                       f"and drop_path_rate=0, got {len(self.drop_path_rates)} rates and "
                       f"drop_path_rate={self.drop_path_rate}")
    if self.residuals is not None and self.remat:
      raise ValueError(f"model.encoder_residuals={self.residuals!r} applies without "
                       "model.remat (remat keeps no residuals); leave it None")

  def block_class(self) -> type:
    """Block, or Block under `nn.remat` (`remat`, or residuals="dots")."""
    # prevent_cse=False is safe (and faster) under scan, which already stops CSE.
    if self.remat:
      return nn.remat(Block, prevent_cse=self.mode != "scan")
    if self.residual_policy() == "dots":
      return nn.remat(Block, prevent_cse=self.mode != "scan",
                      policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    return Block

  @nn.compact
  def __call__(self, x, mask=None):
    """x: (B, T, D) -> (B, T, D)."""
    self.check_options()
    shared = Block.settings(self.block_kwargs)    # every Block field, defaults filled in
    segs = segments(self.depth, shared, self.layer_overrides)
    carry = (x, _as_float32(self._initial_state(segs, x.shape[0], x.shape[1])))
    rates = (tuple(float(r) for r in self.drop_path_rates) if self.drop_path_rates is not None
             else linear_drop_path_rates(self.drop_path_rate, self.depth))
    block_cls = self.block_class()

    for k, seg in enumerate(segs):
      kwargs = dict(seg.block_kwargs, deterministic=self.deterministic,
                    dtype=self.dtype, param_dtype=self.param_dtype)
      if self.mode == "scan":
        stack = nn.scan(
            block_cls,
            variable_axes={"params": 0, "intermediates": 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=(0, nn.broadcast),  # (drop_path_rate per layer, mask)
            length=seg.length,
            unroll=min(self.unroll, seg.length))
        carry, _ = stack(name=scan_name(k, len(segs)), **kwargs)(
            carry, jnp.asarray(rates[seg.start:seg.stop], jnp.float32), mask)
      else:
        for i in range(seg.start, seg.stop):
          carry, _ = block_cls(name=f"{BLOCK_NAME}_{i}", **kwargs)(carry, rates[i], mask)

    x, _ = carry
    if not self.final_norm or Block.ends_in_norm(segs[-1].block_kwargs):
      return x    # post-norm / LipsFormer order: the last block already ends in its norm
    return make_norm(shared["norm"], shared["norm_epsilon"], dtype=self.dtype,
                     param_dtype=self.param_dtype, name="encoder_norm")(x)

  @staticmethod
  def _initial_state(segs, batch: int, tokens: int):
    """The first block's state; every segment's variant must carry the same kind
    (segments hold every Block field, so each names its attention)."""
    names = [s.block_kwargs["attention"] for s in segs]
    states = [get_attention(name).initial_state(batch, tokens, s.block_kwargs["num_heads"])
              for name, s in zip(names, segs)]
    shapes = [jax.tree_util.tree_map(jnp.shape, st) for st in states]
    if any(sh != shapes[0] for sh in shapes[1:]):
      raise ValueError(f"model.layer_overrides mixes attention variants {names} whose "
                       "carried states differ; the encoder carries one state through all layers")
    return states[0]


class ViT(nn.Module):
  """Vision Transformer for image classification.

  Attributes:
    num_classes: size of the zero-initialised head (0 = no head, return features).
    patch_size: side of the square patches (must divide the image side).
    stem: "patch" (a patch_size×patch_size stride-patch_size convolution,
      parameters "embedding/kernel" (p, p, C, D)) or "space_to_depth" (the
      invertible down-sampling of Cordonnier et al. 2020 with block patch_size,
      then a Dense, parameters "embedding/kernel" (p·p·C, D)). The two compute
      the same family of maps; the second keeps the lossless re-arrangement
      explicit, as the paper describes it.
    hidden_size, depth, num_heads, mlp_dim: the Transformer's shape.
    pooling: "cls" (prepend a CLS token and read it) or "mean" (mean of tokens).
    posemb: "learned" (N(0, 0.02²), CLS included), "sincos2d" or "none".
    dropout_rate, attention_dropout_rate, drop_path_rate: regularisation.
    attention: registered attention name; attention_kwargs: its options.
    norm: registered norm name.
    block_options: extra `Block` fields (options that later papers add to the
      block, e.g. FeatScale), passed to every block unchanged.
    layer_overrides: per-layer-range changes of the block settings (e.g.
      paper 003's "*": the first half with value_output="minus"); see
      `models.segments`. None = every layer alike.
    encoder_mode: "scan" or "loop"; remat: rematerialise blocks.
    encoder_unroll: with "scan", blocks per iteration of the compiled loop
      (int >= 1; >= depth = no loop); encoder_residuals: "all", "dots" or
      None = per backend ("dots" for the scan on CPU). Neither changes the
      parameters; `Encoder` explains them and gives the measurements.
    kernel_init: initializer name for the blocks' Dense and Conv kernels;
      "spectral" (paper 001, eq. 5) also covers the patch embedding.
    dtype: compute dtype (`model.dtype`, see "Mixed precision");
      param_dtype: parameter dtype (`model.param_dtype`, keep float32).

  Mixed precision (`model.dtype="bfloat16"`, the one switch; the CIFAR and
  ImageNet recipes' default, `vit_spectral/configs/common.py`): parameters stay in
  `param_dtype` (float32) and are cast to bf16 where they are used, so the
  optimizer, its state and the checkpoints are float32. The patch embedding,
  the token stream between blocks (the scan carry) and every projection, MLP
  and convolution run in bf16. In float32 are: the attention scores and their
  softmax (`attention.base`; the sown attention weights are float32), the
  statistics of every norm (LayerNorm, CenterNorm; their outputs are bf16),
  the token means of FeatScale and AttnScale (with their scales), DropPath's
  rescaling, the depth-wise convolution's sum, the carried attention state
  (Hopfield's scores, `_as_float32`), and the pooling, head and logits, so
  the loss and its gradient start in float32. "float16" takes the same
  paths but the trainer has no loss scaling: use bfloat16.
  """
  num_classes: int
  patch_size: int
  hidden_size: int
  depth: int
  num_heads: int
  mlp_dim: int
  stem: str = "patch"
  pooling: str = "cls"
  posemb: str = "learned"
  # The fields every Block receives take the Block's own defaults.
  dropout_rate: float = Block.dropout_rate
  attention_dropout_rate: float = Block.attention_dropout_rate
  drop_path_rate: float = 0.0
  attention: str = Block.attention
  attention_kwargs: Mapping[str, Any] | None = None
  norm: str = Block.norm
  block_options: Mapping[str, Any] | None = None
  layer_overrides: Sequence[Mapping[str, Any]] | None = None
  encoder_mode: str = "scan"
  encoder_unroll: int = 1
  encoder_residuals: str | None = None
  remat: bool = False
  kernel_init: str = Block.kernel_init
  dtype: Any = Block.dtype
  param_dtype: Any = Block.param_dtype

  def block_fields(self) -> dict[str, Any]:
    """The Block fields every layer shares before `layer_overrides`: the ViT's
    own fields of the same name, then `block_options` (the token layout,
    grid_size and num_prefix_tokens, is added when the images are seen)."""
    return dict(
        num_heads=self.num_heads, mlp_dim=self.mlp_dim, attention=self.attention,
        attention_kwargs=self.attention_kwargs, norm=self.norm,
        dropout_rate=self.dropout_rate,
        attention_dropout_rate=self.attention_dropout_rate,
        kernel_init=self.kernel_init, dtype=self.dtype, param_dtype=self.param_dtype,
        **dict(self.block_options or {}))

  @nn.compact
  def __call__(self, images, *, train: bool = False, mask=None):
    """images: (B, H, W, C) -> logits (B, num_classes), float32 (features
    (B, D), float32, when num_classes is 0)."""
    for field in ("hidden_size", "depth", "num_heads", "mlp_dim", "patch_size"):
      if getattr(self, field) <= 0:
        raise ValueError(f"model.{field}={getattr(self, field)} must be positive")
    for field in ("dropout_rate", "attention_dropout_rate", "drop_path_rate"):
      if not 0.0 <= getattr(self, field) < 1.0:
        raise ValueError(f"model.{field}={getattr(self, field)} must be in [0, 1)")
    if self.pooling not in POOLINGS:
      raise ValueError(f"model.pooling={self.pooling!r}; choose one of {list(POOLINGS)}")
    if self.stem not in STEMS:
      raise ValueError(f"model.stem={self.stem!r}; choose one of {list(STEMS)}")
    if self.posemb not in POSEMB_CHOICES:
      raise ValueError(f"model.posemb={self.posemb!r}; choose one of {list(POSEMB_CHOICES)}")
    height, width = images.shape[1:3]
    if height % self.patch_size or width % self.patch_size:
      raise ValueError(f"model.patch_size={self.patch_size} does not divide the "
                       f"image size {height}x{width}")

    # Spectral init covers every convolution (paper 001, §4.1.4), the patch
    # embedding included (non-overlapping: its kernel matrix's σ_max is its
    # norm); other initializers leave the stem at flax's default.
    stem_init = (get_initializer("spectral") if self.kernel_init == "spectral"
                 else nn.initializers.lecun_normal())
    if self.stem == "patch":
      x = nn.Conv(self.hidden_size, (self.patch_size,) * 2, strides=self.patch_size,
                  padding="VALID", kernel_init=stem_init, dtype=self.dtype,
                  param_dtype=self.param_dtype, name="embedding")(images.astype(self.dtype))
    else:
      x = nn.Dense(self.hidden_size, kernel_init=stem_init, dtype=self.dtype,
                   param_dtype=self.param_dtype,
                   name="embedding")(space_to_depth(images.astype(self.dtype),
                                                    self.patch_size))
    batch, rows, cols, _ = x.shape
    x = x.reshape(batch, rows * cols, self.hidden_size)         # (B, N, D)

    num_prefix = 1 if self.pooling == "cls" else 0
    if num_prefix:
      cls = self.param("cls", nn.initializers.zeros, (1, 1, self.hidden_size),
                       self.param_dtype)
      x = jnp.concatenate([jnp.tile(cls.astype(self.dtype), (batch, 1, 1)), x], axis=1)
    if self.posemb == "learned":
      pos = self.param("pos_embedding", nn.initializers.normal(stddev=0.02),
                       (1, x.shape[1], self.hidden_size), self.param_dtype)
      x = x + pos.astype(self.dtype)
    elif self.posemb == "sincos2d":
      pos = sincos_2d((rows, cols), self.hidden_size)
      x = x.at[:, num_prefix:].add(pos.astype(self.dtype))
    x = nn.Dropout(self.dropout_rate)(x, deterministic=not train)

    block_kwargs = dict(self.block_fields(), grid_size=(rows, cols),
                        num_prefix_tokens=num_prefix)
    x = Encoder(depth=self.depth, block_kwargs=block_kwargs,
                layer_overrides=self.layer_overrides,
                drop_path_rate=self.drop_path_rate, mode=self.encoder_mode,
                unroll=self.encoder_unroll, residuals=self.encoder_residuals,
                remat=self.remat,
                deterministic=not train, dtype=self.dtype,
                param_dtype=self.param_dtype, name="encoder")(x, mask)

    x = x.astype(jnp.promote_types(self.dtype, jnp.float32))   # pool and head in float32
    x = x[:, 0] if self.pooling == "cls" else x.mean(axis=1)    # (B, D)
    self.sow("intermediates", "pre_logits", x)
    if not self.num_classes:
      return x
    return nn.Dense(self.num_classes, kernel_init=nn.initializers.zeros,
                    dtype=x.dtype, param_dtype=self.param_dtype, name="head")(x)
