"""What a block is and how an encoder runs its blocks: `BlockSpec`, `EncoderSpec`.

Every model, stage and encoder takes these two frozen specs instead of
repeating their fields (as Flax's lm1b passes one `TransformerConfig`): a
`BlockSpec` says what one Transformer block computes (its attention variant
and options, norm, MLP, the papers' block options, dtypes), an `EncoderSpec`
how an encoder runs its blocks (scan or loop, unroll, what the backward pass
keeps, remat, the largest drop-path rate). Both check their values when they
are made (`__post_init__`, ValueError naming the `config.model` field), so a
model built from them has nothing left to check but what depends on the input
(the token grid, `models.token_layouts`).

`config.model` becomes these specs once, where the run starts
(`models.build.build_model`); layers that differ are `BlockSpec.override`s
(`models.segments`).

    BlockSpec(num_heads=3, mlp_dim=768, attention="attn_scale", feat_scale=True)
    EncoderSpec(mode="scan", residuals="dots", drop_path_rate=0.1)
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping, NamedTuple

import jax.numpy as jnp

from vit_spectral.names import did_you_mean
from vit_spectral import backends
from vit_spectral.attention import get_attention
from vit_spectral.layers.feat_scale import FEAT_SCALE_FORMS
from vit_spectral.layers.initializers import registered_initializers
from vit_spectral.layers.mlp import MLP_ACTIVATIONS
from vit_spectral.layers.norms import LAYER_NORM_EPSILON, registered_norms
from vit_spectral.option_ranges import check_ranges
from vit_spectral.settings import check_choice, plain

__all__ = ["ATTENTION_RESIDUALS", "BLOCK_ORDERS", "BlockSpec", "BranchSpec", "DTYPES",
           "ENCODER_MODES", "ENCODER_RESIDUALS", "EncoderSpec", "check_attention_options",
           "check_rate"]

ENCODER_MODES = ("scan", "loop")
# What the encoder's backward pass keeps from the forward (EncoderSpec.residuals).
ENCODER_RESIDUALS = ("all", "dots")
# How the attention branch meets the residual stream (BlockSpec.attention_residual).
ATTENTION_RESIDUALS = ("add", "replace", "none")
BLOCK_ORDERS = ("pre_norm", "post_norm", "lipsformer")
# config.model's dtype names and the dtypes they stand for.
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


def check_rate(value: float, field: str) -> None:
  """A dropout or drop-path rate: in [0, 1)."""
  if not 0.0 <= value < 1.0:
    raise ValueError(f"{field}={value} must be in [0, 1)")


def check_attention_options(cls: type, options: Mapping[str, Any],
                            field: str = "model.attention") -> None:
  """Every key of `options` is an option of attention class `cls`
  (`Attention.config_options`), and every value lies in its declared interval."""
  valid = sorted(cls.config_options())
  unknown = sorted(set(options) - set(valid))
  if unknown:
    raise ValueError(f"{field} has unknown options {unknown}{did_you_mean(unknown[0], valid)}; "
                     f"{cls.__name__} (the others are set by the model) accepts {valid}")
  check_ranges(cls.option_ranges(), options, field)


class BranchSpec(NamedTuple):
  """One residual branch of a block, as `Block` builds it and analysis reads it.

    pre_norm:                 x <- x + DropPath(α ⊙ f(Norm(x)))
    post_norm:                x <- Norm(x + DropPath(α ⊙ f(x)))
    neither:                  x <- x + DropPath(α ⊙ f(x))
    residual=False:           x <- f(Norm(x))   (the output is the stream)

  Attributes:
    name: "conv", "conv_depthwise", "attention" or "mlp".
    suffix: the suffix of the branch's parameters and modules: "norm{suffix}",
      "alpha{suffix}", "drop_path{suffix}".
    modules: the submodules that make f, in call order.
    pre_norm: Norm on the branch input (inside the residual).
    post_norm: Norm after the residual sum.
    weighted: f is scaled by the learned per-channel α (paper 001, eq. 4).
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


@dataclasses.dataclass(frozen=True)
class BlockSpec:
  """One Transformer block: what `models.vit.Block` computes (its docstring
  draws the block orders and branches).

  Attributes:
    num_heads: attention heads; mlp_dim: MLP hidden width. None in a
      hierarchical backbone's template (each stage sets its own).
    attention: registered attention name (`vit_spectral.attention`);
      attention_kwargs: that class's options (`model.attention`).
    norm: registered norm name; norm_epsilon: ε of the norms that have one
      (LayerNorm; 1e-6 as big_vision and timm's ViT/DeiT).
    dropout_rate: dropout after attention and inside the MLP;
      attention_dropout_rate: dropout on the attention probabilities.
    kernel_init: initializer name of every Dense and Conv kernel.
    feat_scale: FeatScale (paper 000, eqs. 10-12) on the attention output;
      feat_scale_form: "equations" or "authors_deit" (`layers.feat_scale`).
    attention_residual: one of ATTENTION_RESIDUALS: "add" (the residual
      branch), "replace" (paper 004: the variant's own skip takes the block
      input; needs `mixes_skip`), "none" (no residual around attention);
      the last two need block_order="pre_norm".
    use_mlp: the block has its MLP branch.
    block_order: one of BLOCK_ORDERS ("lipsformer" needs residual_alpha).
    residual_alpha: initial per-channel α of every weighted branch (paper
      001, eq. 4; CaiT's, DeiT-III's and DINOv2's LayerScale γ, timm's
      `gamma_1` / `ls1.gamma`); None = no α.
    conv_block, conv_kernel_size, extra_depthwise_branch: LipsFormer's
      convolution branches (§4.2.1, §5.3).
    drop_path_rescale: DropPath rescales kept branches by 1/(1 − p) in
      training (True) or scales by (1 − p) at evaluation (False, App. J).
    mlp_activation: one of `layers.mlp.MLP_ACTIVATIONS`: "gelu_tanh", "gelu_erf",
      "quick_gelu" (OpenAI CLIP) or the gated "swiglu" (DINOv2 ViT-g).
    dtype: compute dtype; param_dtype: parameter dtype.
    platform: the platform the program is compiled for (`vit_spectral.backends`),
      which picks the fused attention kernel; set by the run
      (`ModelSpec.build`), not a config key; None = this process's backend.
  """
  num_heads: int | None = None
  mlp_dim: int | None = None
  attention: str = "dot_product"
  attention_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  norm: str = "layer_norm"
  norm_epsilon: float = LAYER_NORM_EPSILON
  dropout_rate: float = 0.0
  attention_dropout_rate: float = 0.0
  kernel_init: str = "xavier_uniform"
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
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  platform: str | None = None

  # Fields the run sets (`ModelSpec.build`), never `config.model`.
  SET_BY_RUN: ClassVar[tuple[str, ...]] = ("platform",)
  # Fields `config.model` spells at its top level (the rest go in `model.block`,
  # the attention in `model.attention`).
  TOP_LEVEL: ClassVar[tuple[str, ...]] = (
      "num_heads", "mlp_dim", "norm", "dropout_rate", "attention_dropout_rate", "kernel_init",
      "dtype", "param_dtype")

  def __post_init__(self):
    object.__setattr__(self, "attention_kwargs", dict(plain(self.attention_kwargs or {})))
    for field in ("num_heads", "mlp_dim"):
      value = getattr(self, field)
      if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                or value <= 0):
        raise ValueError(f"model.{field}={value!r} must be a positive integer")
    check_rate(self.dropout_rate, "model.dropout_rate")
    check_rate(self.attention_dropout_rate, "model.attention_dropout_rate")
    for field, kind, names in (("norm", "norm", registered_norms()),
                               ("kernel_init", "initializer", registered_initializers())):
      value = getattr(self, field)
      if value not in names:
        raise ValueError(f"model.{field}={value!r} is not a registered {kind}"
                         f"{did_you_mean(value, names)}; choose one of {list(names)}")
    attention = self.attention_class
    check_attention_options(attention, self.attention_kwargs)
    if attention.updates_prefix_only:
      raise ValueError(f"model.attention.name={self.attention!r} updates the class token "
                       "only and cannot run in a Block (its output is not one per token); "
                       "it is the class stage of models.cait")
    self._check_block_options(attention)

  def _check_block_options(self, attention: type) -> None:
    """The `model.block` fields, against each other and the attention class."""
    check_choice(self.mlp_activation, MLP_ACTIVATIONS, "model.block.mlp_activation")
    if self.mlp_activation == "swiglu" and self.mlp_dim is not None and self.mlp_dim % 2:
      raise ValueError(f"model.mlp_dim={self.mlp_dim} must be even with "
                       "model.block.mlp_activation='swiglu' (fc1's output is split in two)")
    check_choice(self.block_order, BLOCK_ORDERS, "model.block.block_order")
    if self.block_order == "lipsformer" and self.residual_alpha is None:
      raise ValueError("model.block.block_order='lipsformer' needs "
                       "model.block.residual_alpha (e.g. 1/L for L blocks)")
    if self.extra_depthwise_branch and not self.conv_block:
      raise ValueError("model.block.extra_depthwise_branch=True is a second convolution "
                       "branch: it needs model.block.conv_block=True")
    if self.conv_kernel_size < 1:
      raise ValueError(f"model.block.conv_kernel_size={self.conv_kernel_size} "
                       "must be positive")
    for field in ("feat_scale", "drop_path_rescale", "use_mlp", "conv_block"):
      if not isinstance(getattr(self, field), bool):
        raise ValueError(f"model.block.{field}={getattr(self, field)!r} must be True or False")
    check_choice(self.feat_scale_form, FEAT_SCALE_FORMS, "model.block.feat_scale_form")
    residual = self.attention_residual
    check_choice(residual, ATTENTION_RESIDUALS, "model.block.attention_residual")
    if residual == "replace" and not attention.mixes_skip:
      raise ValueError(
          "model.block.attention_residual='replace' needs an attention variant with "
          f"its own skip path (mixes_skip); {attention.__name__} has none: "
          "use 'add' or 'none'")
    if residual != "add" and self.block_order != "pre_norm":
      raise ValueError(
          f"model.block.attention_residual={residual!r} needs "
          f"model.block.block_order='pre_norm' (got {self.block_order!r})")

  @property
  def attention_class(self) -> type:
    return get_attention(self.attention)

  @property
  def stateful(self) -> bool:
    """Whether the attention variant carries a state from block to block."""
    return self.attention_class.initial_state(1, 1, 1) is not None

  def replace(self, **changes: Any) -> "BlockSpec":
    return dataclasses.replace(self, **changes)

  def as_dict(self) -> dict[str, Any]:
    """Every field by name (`models.layouts.layer_fields`' per-layer form)."""
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

  def override(self, override: Mapping[str, Any]) -> "BlockSpec":
    """This spec after one `config.model.layer_overrides` entry: its
    `attention` dict merges into the options (or, naming another variant,
    replaces them) and its `block` dict replaces fields (`models.segments`)."""
    changes: dict[str, Any] = {}
    attention = dict(plain(override.get("attention") or {}))
    if attention:
      name = attention.pop("name", self.attention)
      changes["attention"] = name
      changes["attention_kwargs"] = (dict(self.attention_kwargs, **attention)
                                     if name == self.attention else attention)
    for key, value in dict(plain(override.get("block") or {})).items():
      if key in ("attention", "attention_kwargs"):
        raise ValueError(f"model.layer_overrides: set the attention through the "
                         f"'attention' dict, not block.{key}")
      if key not in self.as_dict() or key in self.SET_BY_RUN:
        raise ValueError(f"model.layer_overrides: block.{key} is not a BlockSpec field; "
                         f"choose from {sorted(set(self.as_dict()) - set(self.SET_BY_RUN))}")
      changes[key] = value
    return self.replace(**changes) if changes else self

  def branches(self) -> tuple[BranchSpec, ...]:
    """The residual branches of a block of this spec, in call order."""
    weighted = self.residual_alpha is not None
    post = self.block_order != "pre_norm"
    out = []
    if self.conv_block:   # §4.2.1: a weighted residual branch with no CenterNorm after it
      out.append(BranchSpec("conv", "_conv", ("conv_dw", "conv_pw"), pre_norm=False,
                            post_norm=False, weighted=weighted))
    if self.conv_block and self.extra_depthwise_branch:   # LipsFormer-CSwin's second dwc
      out.append(BranchSpec("conv_depthwise", "_conv2", ("conv2_dw",), pre_norm=False,
                            post_norm=False, weighted=weighted))
    if self.attention_residual == "add":
      out.append(BranchSpec("attention", "1", ("attention",), pre_norm=not post,
                            post_norm=post, weighted=weighted))
    else:
      out.append(BranchSpec("attention", "1", ("attention",), pre_norm=True,
                            post_norm=False, weighted=False, residual=False))
    if self.use_mlp:
      out.append(BranchSpec("mlp", "2", ("mlp",), pre_norm=not post, post_norm=post,
                            weighted=weighted))
    return tuple(out)

  def ends_in_norm(self) -> bool:
    """Whether the block ends in a norm (its last branch post-norms)."""
    return self.branches()[-1].post_norm


@dataclasses.dataclass(frozen=True)
class EncoderSpec:
  """How an encoder runs its blocks (`models.vit.Encoder` explains the modes
  and gives the measurements behind the defaults).

  Attributes:
    mode: "scan" (one `nn.scan` per segment of identical layers, parameters
      stacked on a leading depth axis) or "loop" (one subtree per block).
    unroll: "scan" only: blocks per iteration of the compiled loop (>= 1),
      or None = the backend's default (`backends.Backend.unrolls_encoder`:
      every block of a segment on a GPU, else 1).
    residuals: what the backward pass keeps without remat: "all", "dots"
      (the Dense outputs and the fused attention kernel's), or None = the
      backend's default (`backends.Backend.encoder_residuals`).
    remat: rematerialise each block in the backward pass.
    drop_path_rate: the largest stochastic-depth rate; each model spreads it
      over its blocks (ViT and the hierarchical backbones: linear in depth;
      CaiT: uniform).
  """
  mode: str = "scan"
  unroll: int | None = None
  residuals: str | None = None
  remat: bool = False
  drop_path_rate: float = 0.0

  # config.model spelling of each field.
  CONFIG_KEYS: ClassVar[dict[str, str]] = {
      "mode": "encoder_mode", "unroll": "encoder_unroll", "residuals": "encoder_residuals",
      "remat": "remat", "drop_path_rate": "drop_path_rate"}

  def __post_init__(self):
    check_choice(self.mode, ENCODER_MODES, "model.encoder_mode")
    if self.unroll is not None and (isinstance(self.unroll, bool)
                                    or not isinstance(self.unroll, int) or self.unroll < 1):
      raise ValueError(f"model.encoder_unroll={self.unroll!r} must be an int >= 1 (blocks "
                       "per iteration of the scanned encoder's loop)")
    if self.unroll not in (None, 1) and self.mode != "scan":
      raise ValueError(f"model.encoder_unroll={self.unroll} applies to "
                       f"model.encoder_mode='scan' only (got {self.mode!r}); leave it at 1")
    if self.residuals is not None and self.residuals not in ENCODER_RESIDUALS:
      raise ValueError(f"model.encoder_residuals={self.residuals!r}; choose one of "
                       f"{list(ENCODER_RESIDUALS)} or None (per backend)")
    if self.residuals is not None and self.remat:
      raise ValueError(f"model.encoder_residuals={self.residuals!r} applies without "
                       "model.remat (remat keeps no residuals); leave it None")
    check_rate(self.drop_path_rate, "model.drop_path_rate")

  def for_backend(self, backend: "backends.Backend", depth: int) -> "EncoderSpec":
    """This spec with `backend`'s defaults written in where unset: residuals
    (none with remat) and unroll (for an encoder of `depth` blocks)."""
    residuals, unroll = self.residuals, self.unroll
    if residuals is None and not self.remat:
      residuals = backend.encoder_residuals(self.mode)
    if unroll is None:
      unroll = depth if backend.unrolls_encoder(self.mode) else 1
    return self.replace(residuals=residuals, unroll=unroll)

  def resolved_unroll(self, depth: int) -> int:
    """`unroll`, or (a spec not built by `ModelSpec.build`) this process's
    backend default for an encoder of `depth` blocks."""
    if self.unroll is not None:
      return self.unroll
    return self.for_backend(backends.of_process(), depth).unroll

  def residual_policy(self) -> str:
    """`residuals`, or (a spec not built by `ModelSpec.build`, which writes in
    the run's) this process's backend default (`backends.Backend.encoder_residuals`)."""
    if self.residuals is not None:
      return self.residuals
    return self.for_backend(backends.of_process(), 1).residuals

  def replace(self, **changes: Any) -> "EncoderSpec":
    return dataclasses.replace(self, **changes)
