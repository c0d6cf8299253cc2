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
import typing
from typing import Any, ClassVar, Mapping, NamedTuple

import jax.numpy as jnp

from vit_spectral.attention import get_attention, registered_attentions
from vit_spectral.layers.feat_scale import FEAT_SCALE_FORMS
from vit_spectral.layers.initializers import registered_initializers
from vit_spectral.layers.mlp import MLP_ACTIVATIONS
from vit_spectral.layers.norms import LAYER_NORM_EPSILON, registered_norms
# The checks and the encoder's spec, JAX-free for the command line (re-exported).
from vit_spectral.models.spec_checks import (  # noqa: F401
    ATTENTION_FIELDS_SET_BY_BLOCK, ATTENTION_RESIDUALS, BLOCK_ORDERS, ENCODER_MODES,
    ENCODER_RESIDUALS, AttentionFacts, EncoderSpec, check_block, check_rate)
from vit_spectral.settings import plain

__all__ = ["ATTENTION_FIELDS_SET_BY_BLOCK", "ATTENTION_RESIDUALS", "BLOCK_ORDERS", "BlockSpec",
           "BranchSpec", "DTYPES", "ENCODER_MODES", "ENCODER_RESIDUALS", "EncoderSpec",
           "LIVE_FACTS", "attention_facts", "check_rate"]


def attention_facts(cls: type) -> AttentionFacts:
  """What the checks need of attention class `cls` (`spec_checks.AttentionFacts`):
  its fields the Block does not set itself, with their types."""
  hints = typing.get_type_hints(cls)
  options = {f.name: type_name(hints.get(f.name, Any)) for f in dataclasses.fields(cls)
             if f.name not in ("parent", "name", *ATTENTION_FIELDS_SET_BY_BLOCK)}
  return AttentionFacts(cls.__name__, dict(sorted(options.items())),
                        bool(getattr(cls, "updates_prefix_only", False)),
                        bool(getattr(cls, "mixes_skip", False)),
                        cls.initial_state(1, 1, 1) is not None, dict(cls.option_ranges()))


def type_name(hint: Any) -> str:
  """"int", "float", "bool", "str" or "tuple" for a field's type (`X | None` ->
  X's), else "any"."""
  args = [a for a in typing.get_args(hint) if a is not type(None)]
  if type(None) in typing.get_args(hint) and len(args) == 1:
    hint = args[0]
  hint = typing.get_origin(hint) or hint
  return {int: "int", float: "float", bool: "bool", str: "str", tuple: "tuple"}.get(hint, "any")


# config.model's dtype names and the dtypes they stand for.
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


class _LiveFacts:
  """The facts `spec_checks.check_block` and `model_settings.model_plan` need,
  from the live registries (a run checks with what is registered now, a
  variant registered by the user's own code included)."""

  def attention(self, name: str) -> AttentionFacts:
    return attention_facts(get_attention(name))

  @property
  def attention_names(self) -> tuple[str, ...]:
    return registered_attentions()

  @property
  def norms(self) -> tuple[str, ...]:
    return registered_norms()

  @property
  def initializers(self) -> tuple[str, ...]:
    return registered_initializers()

  activations = MLP_ACTIVATIONS
  feat_scale_forms = FEAT_SCALE_FORMS
  dtypes = tuple(DTYPES)


LIVE_FACTS = _LiveFacts()


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
    check_block(self.as_dict(), LIVE_FACTS)   # spec_checks: the command line runs it too

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
