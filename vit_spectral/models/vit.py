"""Vision Transformer: patch embedding, position embedding, Block, Encoder, head.

One `Block` serves every paper and every backbone: what it computes is its
`BlockSpec` (`models.specs`: the attention variant, resolved through
`vit_spectral.attention`'s registry, the norm, the papers' block options),
where its tokens lie and which ones each head group sees is its token layout
(`models.token_layouts`: global, Swin's windows, CSwin's stripes). The
encoder runs the blocks as one `nn.scan` per segment of equal layers
(optionally rematerialised) or as a Python loop (`EncoderSpec`); both carry
`(x, state)` from block to block, where `state` is the attention variant's
memory (None for stateless variants).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_spectral.attention import fused
from vit_spectral.layers.drop_path import DropPath, linear_drop_path_rates
from vit_spectral.layers.feat_scale import FeatScale
from vit_spectral.layers.grid_conv import GridConv
from vit_spectral.layers.initializers import get_initializer
from vit_spectral.layers.mlp import MlpBlock
from vit_spectral.layers.norms import make_norm
from vit_spectral.layers.space_to_depth import space_to_depth
from vit_spectral.models.backbone import (POOLINGS, ClassifierHead, IsotropicBackbone,
                                          check_bools, check_heads, check_patches,
                                          check_positive, register_models)
from vit_spectral.models.posemb import POSEMB_CHOICES, sincos_2d
from vit_spectral.models.segments import BLOCK_NAME, layer_specs, scan_name, segments
from vit_spectral.models.specs import BlockSpec, BranchSpec, EncoderSpec
from vit_spectral.models.token_layouts import TokenLayout
from vit_spectral.settings import check_choice
from vit_spectral.models.variants import MODEL_NAMES, variant_fields

__all__ = ["Block", "Encoder", "POSEMB_TOKENS", "STEMS", "ViT", "stem_initializer"]

# The stems, and which tokens the learned position embedding covers (ViT.posemb_tokens).
STEMS = ("patch", "space_to_depth")
POSEMB_TOKENS = ("all", "patches")


# encoder_residuals="dots": what the backward pass keeps (`Encoder.block_class`).
SAVED_BY_DOTS = jax.checkpoint_policies.save_from_both_policies(
    jax.checkpoint_policies.dots_with_no_batch_dims_saveable, fused.is_kernel_forward)


def _as_float32(tree):
  """Pins the carried state to float32: the scan carry's dtype must not change."""
  return jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), tree)


def stem_initializer(kernel_init: str) -> str:
  """The stem's initializer name: spectral init covers every convolution
  (paper 001, §4.1.4), the patch embedding included (non-overlapping: its
  kernel matrix's σ_max is its norm); other initializers leave the stem at
  flax's default (LeCun normal)."""
  return "spectral" if kernel_init == "spectral" else "lecun_normal"


class Block(nn.Module):
  """Transformer block with two call forms (same parameters, same numbers):

    y = block(x, drop_path_rate=0.0, mask=None)                   plain
    (x, state), None = block((x, state), drop_path_rate, mask)    carry

  x, y: (B, T, D); drop_path_rate: a scalar; mask: bool, see attention.base.
  The carry form is what the encoder threads from block to block, `state`
  being the attention variant's memory (None for stateless variants;
  `Encoder` starts it); the plain form raises a ValueError where the
  attention carries a state. A tuple (or list) input is a carry, an array the
  plain call's x. Training: `deterministic=False` and a "dropout" rng.

  A sequence of residual branches (`BlockSpec.branches`): with `conv_block` a
  convolution branch, then attention, then (with `use_mlp`) the MLP.
  `block_order` places the norm around the attention and MLP branches
  (LipsFormer, paper 001, Table 1):

    "pre_norm" (default):  x <- x + DropPath(α ⊙ f(Norm(x)))
    "post_norm":           x <- Norm(x + DropPath(α ⊙ f(x)))
    "lipsformer":          x <- Norm(x + DropPath(α ⊙ f(x)))  with α required
                           (the LipsFormer block; use norm="center_norm")

  The LipsFormer block (§4.2.1, Fig. 1; CenterNorm after the attention and
  feed-forward sub-modules only, as the paper's text says):

    x <- x + DropPath(α_c ⊙ PW(DW(x)))               conv branch, no norm
    x <- CN(x + DropPath(α_1 ⊙ SCSA(x)))
    x <- CN(x + DropPath(α_2 ⊙ FFN(x)))

  The conv branch has no norm in any order; a block that ends in its norm
  gets no final encoder norm (`BlockSpec.ends_in_norm`). α is eq. 4's
  per-channel weight ("alpha{suffix}", init `residual_alpha`; None = no
  parameter). The attention output goes through dropout before DropPath;
  `drop_path_rescale=False` is LipsFormer's App. J (`layers.drop_path`).
  Defaults give the plain pre-norm ViT block: "norm1", "attention", "norm2",
  "mlp".

  Attention-branch options of the `spec` (defaults: the standard block):

  * feat_scale: FeatScale (paper 000, eqs. 10-12) on the attention output
    before dropout; feat_scale_form "equations" or "authors_deit"
    (`layers.feat_scale`). Under windows or stripes it acts after they are
    merged back, with the stage-wide token mean, as the authors' Swin code
    does (swin/models/swin_featscale.py).
  * attention_residual="replace" (paper 004): x <- Attn(Norm(x), skip=x),
    i.e. α·x + (1 - α)·Attn(Norm(x)); needs a `mixes_skip` variant.
  * attention_residual="none": x <- Attn(Norm(x)) (Dong et al. / paper 004
    Thm 5.2 with use_mlp=False). In both, dropout, drop-path and α do not
    apply to the attention output; both need block_order="pre_norm".
  * use_mlp=False: no MLP sub-block (and no norm2).

  Design notes: docs/design.md#modelsvitpy

  Attributes:
    spec: what the block computes (`BlockSpec`).
    layout: the token layout (`models.token_layouts`): the grid, prefix
      tokens and windows or stripes the attention and convolutions see.
    deterministic: disables dropout and drop-path.
  """
  spec: BlockSpec
  layout: TokenLayout = TokenLayout()
  deterministic: bool = True

  def residual(self, x, state, branch: BranchSpec, function, drop_path_rate):
    """One branch around `function(y, skip, state) -> (y, state)`: (B, T, D) -> (B, T, D)."""
    spec, norm = self.spec, None
    if branch.pre_norm or branch.post_norm:
      norm = make_norm(spec.norm, spec.norm_epsilon, dtype=spec.dtype,
                       param_dtype=spec.param_dtype, name=f"norm{branch.suffix}")
    y, state = function(norm(x) if branch.pre_norm else x, x, state)
    if not branch.residual:
      return y, state
    if branch.weighted:
      alpha = self.param(f"alpha{branch.suffix}", nn.initializers.constant(spec.residual_alpha),
                         (x.shape[-1],), spec.param_dtype)
      y = y * alpha.astype(y.dtype)
    drop_path = DropPath(rescale=spec.drop_path_rescale, name=f"drop_path{branch.suffix}")
    x = x + drop_path(y, drop_path_rate, self.deterministic)
    return (norm(x) if branch.post_norm else x), state

  def convolve(self, y, layers=(("conv_dw", True), ("conv_pw", False))):
    """LipsFormer's convolution branch on the grid tokens (prefix tokens pass)."""
    spec = self.spec
    if self.layout.grid_size is None:
      raise ValueError("model.block.conv_block=True needs tokens on a patch grid")
    for name, depthwise in layers:
      y = GridConv(grid_size=tuple(self.layout.grid_size),
                   num_prefix_tokens=self.layout.num_prefix_tokens,
                   kernel_size=spec.conv_kernel_size if depthwise else 1, depthwise=depthwise,
                   kernel_init=spec.kernel_init, dtype=spec.dtype,
                   param_dtype=spec.param_dtype, name=name)(y)
    return y

  def attend(self, y, skip, state, mask, plain=False):
    """The attention branch: the layout's head groups, FeatScale, dropout.

    `plain`: the block was called in the plain form (no state to carry on),
    which an attention that carries a state refuses."""
    spec = self.spec
    groups = self.layout.head_groups(spec.num_heads)
    options = dict(spec.attention_kwargs)
    if len(groups) > 1 and options.get("head_dim") is None:
      options["head_dim"] = y.shape[-1] // spec.num_heads   # the groups split the heads
    attentions = [spec.attention_class(
        name=g.name, num_heads=g.num_heads, dropout_rate=spec.attention_dropout_rate,
        deterministic=self.deterministic, kernel_init=spec.kernel_init, grid_size=g.grid_size,
        num_prefix_tokens=g.num_prefix_tokens, dtype=spec.dtype, param_dtype=spec.param_dtype,
        platform=spec.platform, **dict(options, **({} if g.out_bias else {"out_bias": False}))) for g in groups]
    if plain and any(a.carries_state() for a in attentions):
      raise ValueError(
          f"this Block's attention {spec.attention!r} (options "
          f"{dict(spec.attention_kwargs)}) carries its state from block to block, which "
          "the plain call `y = block(x)` would drop: call `(x, state), _ = "
          "block((x, state), drop_path_rate, mask)` with state starting at "
          f"{spec.attention_class.__name__}.initial_state(batch, tokens, num_heads) and "
          "then the previous block's (as `Encoder` does)")
    replace = spec.attention_residual == "replace"   # the variant's own skip takes x
    y, state = self.layout.attend(attentions, groups, y, state, mask,
                                  skip=skip if replace else None)
    if spec.feat_scale:   # paper 000 eqs. 10-12, on the attention output (windows merged)
      y = FeatScale(form=spec.feat_scale_form, dtype=spec.dtype, param_dtype=spec.param_dtype,
                    name="feat_scale")(y)
    if spec.attention_residual == "add":
      y = nn.Dropout(spec.dropout_rate)(y, deterministic=self.deterministic)
    return y, state

  def feed_forward(self, y):
    spec = self.spec
    return MlpBlock(mlp_dim=spec.mlp_dim, dropout_rate=spec.dropout_rate,
                    deterministic=self.deterministic, kernel_init=spec.kernel_init,
                    activation=spec.mlp_activation, dtype=spec.dtype,
                    param_dtype=spec.param_dtype, name="mlp")(y)

  @nn.compact
  def __call__(self, inputs, drop_path_rate=0.0, mask=None):
    """The block, in either form (class docstring).

    Args:
      inputs: x (B, T, D) (plain form) or the carry (x, state).
      drop_path_rate: scalar, this block's drop-path rate (training only).
      mask: optional bool attention mask (`attention.base`); True = may attend.

    Returns:
      y (B, T, D) (plain form), or ((y, new state in float32), None).
    """
    if self.spec.num_heads is None or self.spec.mlp_dim is None:
      raise ValueError("a Block needs BlockSpec.num_heads and BlockSpec.mlp_dim")
    self.layout.check(self.spec, mask)
    carried = isinstance(inputs, (tuple, list))
    x, state = inputs if carried else (inputs, None)
    functions = {
        "conv": lambda y, skip, s: (self.convolve(y), s),
        "conv_depthwise": lambda y, skip, s: (self.convolve(y, (("conv2_dw", True),)), s),
        "attention": lambda y, skip, s: self.attend(y, skip, s, mask, plain=not carried),
        "mlp": lambda y, skip, s: (self.feed_forward(y), s),
    }
    for branch in self.spec.branches():
      x, state = self.residual(x, state, branch, functions[branch.name], drop_path_rate)
    self.sow("intermediates", "block_output", x)
    return ((x, _as_float32(state)), None) if carried else x


class Encoder(nn.Module):
  """`depth` Blocks, scanned or looped, then a final norm ("encoder_norm")
  unless the last block already ends in its norm (post-norm and LipsFormer
  orders, `BlockSpec.ends_in_norm`).

  Attributes:
    depth: number of blocks.
    block: the `BlockSpec` of every block.
    spec: the `EncoderSpec`: how the blocks run (its fields below).
    layouts: the blocks' token layout (`models.token_layouts`), one for all
      or one per layer (e.g. Swin's regular and shifted windows).
    layer_overrides: per-layer-range changes of the block spec
      (`models.segments`); consecutive equal layers form a segment, scanned
      as one stack.
    drop_path_rates: explicit per-layer rates (`depth` of them); None =
      linear from 0 to `spec.drop_path_rate` over depth.
    final_norm: False = no "encoder_norm" (a backbone stage that places its
      norms itself).
    deterministic: disables dropout.

  The `EncoderSpec` fields (same parameters, same numbers in every setting):
    mode: "scan" (parameters stacked along a leading depth axis under
      "encoderblock", or "encoderblock_segment{k}" per segment) or "loop"
      ("encoderblock_{i}"); `models.layouts` converts between the two.
    unroll: "scan" only: blocks per iteration, an int >= 1 (a segment's
      length or more = no loop). None = the backend's
      (`backends.Backend.unrolls_encoder`: every block on a GPU, else 1).
    residuals: what the backward pass keeps (without `remat`): "all" or
      "dots" (the Dense and Conv matmul outputs,
      `dots_with_no_batch_dims_saveable`, and a fused attention kernel's
      forward, `fused.is_kernel_forward`; the rest is recomputed). None = the
      backend's (`backends.Backend.encoder_residuals`: "dots" for the scan,
      "all" for the loop).
    remat: rematerialise each block in the backward pass (keeps nothing).

  Why "dots" for the scan, with measurements: docs/design.md#modelsvitpy
  """
  depth: int
  block: BlockSpec
  spec: EncoderSpec = EncoderSpec()
  layouts: TokenLayout | Sequence[TokenLayout] = TokenLayout()
  layer_overrides: Sequence[Mapping[str, Any]] | None = None
  drop_path_rates: Sequence[float] | None = None
  final_norm: bool = True
  deterministic: bool = True

  def block_class(self) -> type:
    """Block, or Block under `nn.remat` (`remat`, or residuals="dots")."""
    # prevent_cse=False is safe (and faster) under a scan of one block per
    # iteration, which already stops CSE; blocks unrolled into one iteration
    # (or a loop) need it, or XLA merges the recomputation back into the forward.
    prevent_cse = self.spec.mode != "scan" or self.spec.resolved_unroll(self.depth) > 1
    if self.spec.remat:
      return nn.remat(Block, prevent_cse=prevent_cse)
    if self.spec.residual_policy() == "dots":
      # The Dense outputs and the fused attention kernel's (its forward is not
      # run again in the backward pass); the element-wise work is recomputed.
      return nn.remat(Block, prevent_cse=prevent_cse, policy=SAVED_BY_DOTS)
    return Block

  def layer_segments(self) -> list:
    """The encoder's segments (`models.segments.Segment`: spec and layout each)."""
    layouts = (tuple(self.layouts) if isinstance(self.layouts, Sequence)
               else (self.layouts,) * self.depth)
    if len(layouts) != self.depth:
      raise ValueError(f"Encoder.layouts has {len(layouts)} layouts for {self.depth} layers")
    return segments(layer_specs(self.depth, self.block, self.layer_overrides), layouts)

  def rates(self) -> tuple[float, ...]:
    if self.drop_path_rates is None:
      return tuple(linear_drop_path_rates(self.spec.drop_path_rate, self.depth))
    if len(self.drop_path_rates) != self.depth:
      raise ValueError(f"Encoder.drop_path_rates needs {self.depth} rates (one per layer), "
                       f"got {len(self.drop_path_rates)}")
    return tuple(float(r) for r in self.drop_path_rates)

  @nn.compact
  def __call__(self, x, mask=None):
    """x: (B, T, D) -> (B, T, D)."""
    segs = self.layer_segments()
    carry = (x, _as_float32(self._initial_state(segs, x.shape[0], x.shape[1])))
    rates, block_cls, scan = self.rates(), self.block_class(), self.spec.mode == "scan"
    for k, seg in enumerate(segs):
      kwargs = dict(spec=seg.spec, layout=seg.layout, deterministic=self.deterministic)
      if scan:
        stack = nn.scan(
            block_cls,
            variable_axes={"params": 0, "intermediates": 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=(0, nn.broadcast),  # (drop_path_rate per layer, mask)
            length=seg.length,
            unroll=min(self.spec.resolved_unroll(self.depth), seg.length))
        carry, _ = stack(name=scan_name(k, len(segs)), **kwargs)(
            carry, jnp.asarray(rates[seg.start:seg.stop], jnp.float32), mask)
      else:
        for i in range(seg.start, seg.stop):
          carry, _ = block_cls(name=f"{BLOCK_NAME}_{i}", **kwargs)(carry, rates[i], mask)

    x, _ = carry
    last = segs[-1].spec
    if not self.final_norm or last.ends_in_norm():
      return x    # post-norm / LipsFormer order: the last block already ends in its norm
    return make_norm(last.norm, last.norm_epsilon, dtype=last.dtype,
                     param_dtype=last.param_dtype, name="encoder_norm")(x)

  @staticmethod
  def _initial_state(segs, batch: int, tokens: int):
    """The first block's state; every segment's variant must carry the same kind."""
    names = [s.spec.attention for s in segs]
    states = [s.spec.attention_class.initial_state(batch, tokens, s.spec.num_heads)
              for s in segs]
    shapes = [jax.tree_util.tree_map(jnp.shape, st) for st in states]
    if any(sh != shapes[0] for sh in shapes[1:]):
      raise ValueError(f"model.layer_overrides mixes attention variants {names} whose "
                       "carried states differ; the encoder carries one state through all layers")
    return states[0]


class ViT(IsotropicBackbone):
  """Vision Transformer for image classification.

  Attributes:
    num_classes: size of the zero-initialised head (0 = no head, return features).
    patch_size: side of the square patches (must divide the image side).
    stem: "patch" (a stride-p p×p convolution, "embedding/kernel" (p, p, C,
      D)) or "space_to_depth" (Cordonnier et al. 2020's invertible
      down-sampling with block p, then a Dense, "embedding/kernel" (p·p·C, D)).
    hidden_size, depth: the token width and the number of blocks.
    pooling: "cls" (prepend a CLS token and read it) or "mean" (mean of tokens).
    posemb: "learned" (N(0, 0.02²), CLS included), "sincos2d" or "none".
    layer_overrides: per-layer-range changes of the block spec (e.g. paper
      003's "*": the first half with value_output="minus"); see
      `models.segments`. None = every layer alike.
    block: every block's `BlockSpec`; its kernel_init "spectral" (paper 001,
      eq. 5) also covers the patch embedding, its dropout_rate the embedding's.
    encoder: the `EncoderSpec` (`Encoder`).

  Options of pretrained families (timm's `VisionTransformer` and
  `VisionTransformerDistilled` decide them: the papers are silent; the
  defaults are the plain ViT):
    distilled: DeiT's distillation token "dist" after the CLS token and a
      head "head_dist" on it; logits = the mean of the two heads' (timm's
      `forward_head` at evaluation). Needs pooling="cls".
    register_tokens: R learned tokens "registers" (1, R, D) after the CLS
      (and distillation) token (Darcet et al.; timm's `reg_token`); prefix
      tokens of the stream, left out of mean pooling.
    posemb_tokens: the learned position embedding covers "all" tokens (timm's
      default, ViT, DeiT) or the "patches" only (timm's `no_embed_class=True`:
      DeiT-III, DINOv2 with registers, big_vision). posemb="learned" only.
    norm_pre: a norm "norm_pre" before the first block (CLIP's `ln_pre`,
      timm's `pre_norm=True`); the block's norm and ε.
    stem_bias: the patch embedding has a bias "embedding/bias" (timm's CLIP
      towers have none: `PatchEmbed(bias=not pre_norm)`).

  Mixed precision (`model.dtype="bfloat16"`, `BlockSpec.dtype`, the one
  switch; the CIFAR and ImageNet recipes' default,
  `vit_spectral/configs/common.py`): parameters stay in `param_dtype`
  (float32) and are cast where used, so the optimizer state and checkpoints
  are float32. The patch embedding, the token stream between blocks and every
  projection, MLP and convolution run in bf16. In float32 are: the attention
  scores and softmax (and the sown weights), every norm's statistics (their
  outputs are bf16), the token means of FeatScale and AttnScale (with their
  scales), DropPath's rescaling, the depth-wise convolution's sum, the
  carried attention state (`_as_float32`), and the pooling, head, logits and
  loss. "float16" takes the same paths but the trainer has no loss scaling:
  use bfloat16.
  """
  stem: str = "patch"
  pooling: str = "cls"
  posemb: str = "learned"
  distilled: bool = False
  register_tokens: int = 0
  posemb_tokens: str = "all"
  norm_pre: bool = False
  stem_bias: bool = True

  def num_prefix_tokens(self) -> int:
    """Tokens before the patch tokens: CLS (pooling="cls"), the distillation
    token, the registers."""
    return int(self.pooling == "cls") + int(self.distilled) + self.register_tokens

  def posemb_prefix_rows(self) -> int:
    """Rows of the learned position embedding before the patch tokens'."""
    return self.num_prefix_tokens() if self.posemb_tokens == "all" else 0

  def check_options(self, height: int, width: int) -> None:
    """Raises ValueError naming the field (`Backbone.check_options`)."""
    check_positive(self, "hidden_size", "depth", "patch_size")
    check_choice(self.pooling, POOLINGS, "model.pooling")
    check_choice(self.stem, STEMS, "model.stem")
    check_choice(self.posemb, POSEMB_CHOICES, "model.posemb")
    check_choice(self.posemb_tokens, POSEMB_TOKENS, "model.posemb_tokens")
    if self.posemb_tokens != "all" and self.posemb != "learned":
      raise ValueError(f"model.posemb_tokens={self.posemb_tokens!r} places a learned position "
                       f"embedding; model.posemb={self.posemb!r} has none to place (leave "
                       "posemb_tokens='all')")
    check_bools(self, "distilled", "norm_pre", "stem_bias")
    if (isinstance(self.register_tokens, bool) or not isinstance(self.register_tokens, int)
        or self.register_tokens < 0):
      raise ValueError(f"model.register_tokens={self.register_tokens!r} must be an int >= 0")
    if self.distilled and self.pooling != "cls":
      raise ValueError("model.distilled=True reads the CLS and distillation tokens: it needs "
                       f"model.pooling='cls' (got {self.pooling!r})")
    check_heads(self.block, [self.hidden_size], [self.block.num_heads])
    check_patches(self.patch_size, height, width)

  @nn.compact
  def __call__(self, images, *, train: bool = False, mask=None):
    """images: (B, H, W, C) -> logits (B, num_classes), float32 (features
    (B, D), float32, when num_classes is 0)."""
    self.check_options(*images.shape[1:3])
    block = self.encoder_block()
    dtype, param_dtype = block.dtype, block.param_dtype
    stem_init = get_initializer(stem_initializer(block.kernel_init))
    if self.stem == "patch":
      x = nn.Conv(self.hidden_size, (self.patch_size,) * 2, strides=self.patch_size,
                  padding="VALID", kernel_init=stem_init, use_bias=self.stem_bias,
                  dtype=dtype, param_dtype=param_dtype, name="embedding")(images.astype(dtype))
    else:
      x = nn.Dense(self.hidden_size, kernel_init=stem_init, use_bias=self.stem_bias,
                   dtype=dtype, param_dtype=param_dtype,
                   name="embedding")(space_to_depth(images.astype(dtype), self.patch_size))
    batch, rows, cols, _ = x.shape
    x = x.reshape(batch, rows * cols, self.hidden_size)         # (B, N, D)

    # Prefix tokens in token order, as timm's _pos_embed concatenates them; made
    # before the position embedding, so a plain ViT's init draws as before.
    prefix = [(name, count) for name, count in (("cls", int(self.pooling == "cls")),
                                                ("dist", int(self.distilled)),
                                                ("registers", self.register_tokens)) if count]
    tokens = [jnp.tile(self.param(name, nn.initializers.zeros, (1, count, self.hidden_size),
                                  param_dtype).astype(dtype), (batch, 1, 1))
              for name, count in prefix]
    num_prefix = self.num_prefix_tokens()
    pos = None
    if self.posemb == "learned":
      pos = self.param("pos_embedding", nn.initializers.normal(stddev=0.02),
                       (1, self.posemb_prefix_rows() + rows * cols, self.hidden_size),
                       param_dtype).astype(dtype)
    elif self.posemb == "sincos2d":
      x = x + sincos_2d((rows, cols), self.hidden_size).astype(dtype)
    if pos is not None and self.posemb_tokens == "patches":
      x = x + pos                    # timm's no_embed_class: before the prefix tokens
    if tokens:
      x = jnp.concatenate([*tokens, x], axis=1)                # (B, P + N, D)
    if pos is not None and self.posemb_tokens == "all":
      x = x + pos
    x = nn.Dropout(block.dropout_rate)(x, deterministic=not train)
    if self.norm_pre:
      x = make_norm(block.norm, block.norm_epsilon, dtype=dtype, param_dtype=param_dtype,
                    name="norm_pre")(x)

    x = Encoder(depth=self.depth, block=block, spec=self.encoder,
                layouts=TokenLayout((rows, cols), num_prefix),
                layer_overrides=self.layer_overrides, deterministic=not train,
                name="encoder")(x, mask)
    if self.pooling == "mean":
      return self.classify(x[:, num_prefix:], "mean")         # the patch tokens' mean
    logits = self.classify(x, "cls")
    if not self.distilled:
      return logits
    dist = ClassifierHead(self.num_classes, "cls", param_dtype=param_dtype,
                          name="head_dist")(x[:, 1:])          # the distillation token
    return (logits + dist) / 2


register_models(ViT, {name: variant_fields(name) for name in MODEL_NAMES})
