"""The checks of a block's and an encoder's fields, without JAX.

`models.specs.BlockSpec` runs `check_block` when it is made, with the facts of
the live registries (attention classes, norms); the command line runs the same
function on `config.model` before JAX is imported, with the same facts read
from `models.catalog` (a test keeps the two equal). `EncoderSpec` needs
nothing of JAX to be made and checked, so it lives here (`models.specs`
re-exports it).

`facts` is any object with:
  attention(name) -> AttentionFacts   (ValueError for an unknown name)
  attention_names, norms, activations, feat_scale_forms, initializers, dtypes
                                      (tuples of the valid names)
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping, NamedTuple, Sequence

from vit_spectral import backends
from vit_spectral.names import did_you_mean
from vit_spectral.option_ranges import check_ranges

__all__ = ["ATTENTION_FIELDS_SET_BY_BLOCK", "ATTENTION_RESIDUALS", "AttentionFacts",
           "BLOCK_ORDERS", "ENCODER_MODES", "ENCODER_RESIDUALS", "EncoderSpec",
           "check_attention_options", "check_block", "check_choice", "check_rate"]

ENCODER_MODES = ("scan", "loop")
# What the encoder's backward pass keeps from the forward (EncoderSpec.residuals).
ENCODER_RESIDUALS = ("all", "dots")
# How the attention branch meets the residual stream (BlockSpec.attention_residual).
ATTENTION_RESIDUALS = ("add", "replace", "none")
BLOCK_ORDERS = ("pre_norm", "post_norm", "lipsformer")
# The attention fields every Block sets itself (so not `model.attention` options).
ATTENTION_FIELDS_SET_BY_BLOCK = ("num_heads", "dropout_rate", "deterministic", "kernel_init",
                                 "grid_size", "num_prefix_tokens", "dtype", "param_dtype",
                                 "return_state", "platform")


class AttentionFacts(NamedTuple):
  """What the checks need of a registered attention class.

  Attributes:
    class_name: the class's name (for messages).
    options: its fields a config may set (`model.attention`), name -> type
      name ("int", "float", "bool", "str", "tuple" or "any").
    updates_prefix_only: it updates the class token only (CaiT's class stage).
    mixes_skip: it has its own skip path (attention_residual="replace").
    stateful: it carries a state from layer to layer (`initial_state` is not None).
    ranges: option -> the interval its value must lie in (`option_ranges`).
  """
  class_name: str
  options: Mapping[str, str]
  updates_prefix_only: bool
  mixes_skip: bool
  stateful: bool = False
  ranges: Mapping[str, str] = {}


def check_rate(value: float, field: str) -> None:
  """A dropout or drop-path rate: in [0, 1)."""
  if not 0.0 <= value < 1.0:
    raise ValueError(f"{field}={value} must be in [0, 1)")


def check_attention_options(facts: AttentionFacts, options: Mapping[str, Any],
                            field: str = "model.attention") -> None:
  """Every key of `options` is an option of the attention `facts` describes,
  and every value lies in its declared interval."""
  valid = sorted(facts.options)
  unknown = sorted(set(options) - set(valid))
  if unknown:
    raise ValueError(f"{field} has unknown options {unknown}{did_you_mean(unknown[0], valid)}; "
                     f"{facts.class_name} (the others are set by the model) accepts {valid}")
  check_ranges(facts.ranges, options, field)


def check_choice(value: Any, choices: Sequence[str], field: str) -> None:
  """`field`'s value is one of `choices`; the error names the nearest and all."""
  if value not in choices:
    raise ValueError(f"{field}={value!r}{did_you_mean(str(value), choices)}; choose one "
                     f"of {list(choices)}")


def check_block(block: Mapping[str, Any], facts: Any) -> None:
  """Raises ValueError naming the first bad field of a block (`BlockSpec`'s
  fields by name: every field, attention_kwargs a dict of the options)."""
  for field in ("num_heads", "mlp_dim"):
    value = block[field]
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value <= 0):
      raise ValueError(f"model.{field}={value!r} must be a positive integer")
  check_rate(block["dropout_rate"], "model.dropout_rate")
  check_rate(block["attention_dropout_rate"], "model.attention_dropout_rate")
  if block["norm"] not in facts.norms:
    raise ValueError(f"model.norm={block['norm']!r} is not a registered norm"
                     f"{did_you_mean(block['norm'], facts.norms)}; choose one of "
                     f"{list(facts.norms)}")
  attention = facts.attention(block["attention"])
  check_attention_options(attention, block["attention_kwargs"])
  if attention.updates_prefix_only:
    raise ValueError(f"model.attention.name={block['attention']!r} updates the class token "
                     "only and cannot run in a Block (its output is not one per token); "
                     "it is the class stage of models.cait")
  check_choice(block["mlp_activation"], tuple(facts.activations), "model.block.mlp_activation")
  if block["mlp_activation"] == "swiglu" and block["mlp_dim"] is not None and block["mlp_dim"] % 2:
    raise ValueError(f"model.mlp_dim={block['mlp_dim']} must be even with "
                     "model.block.mlp_activation='swiglu' (fc1's output is split in two)")
  check_choice(block["block_order"], BLOCK_ORDERS, "model.block.block_order")
  if block["block_order"] == "lipsformer" and block["residual_alpha"] is None:
    raise ValueError("model.block.block_order='lipsformer' needs "
                     "model.block.residual_alpha (e.g. 1/L for L blocks)")
  if block["extra_depthwise_branch"] and not block["conv_block"]:
    raise ValueError("model.block.extra_depthwise_branch=True is a second convolution "
                     "branch: it needs model.block.conv_block=True")
  if block["conv_kernel_size"] < 1:
    raise ValueError(f"model.block.conv_kernel_size={block['conv_kernel_size']} "
                     "must be positive")
  for field in ("feat_scale", "drop_path_rescale", "use_mlp", "conv_block"):
    if not isinstance(block[field], bool):
      raise ValueError(f"model.block.{field}={block[field]!r} must be True or False")
  check_choice(block["feat_scale_form"], tuple(facts.feat_scale_forms),
                "model.block.feat_scale_form")
  residual = block["attention_residual"]
  check_choice(residual, ATTENTION_RESIDUALS, "model.block.attention_residual")
  if residual == "replace" and not attention.mixes_skip:
    raise ValueError(
        "model.block.attention_residual='replace' needs an attention variant with "
        f"its own skip path (mixes_skip); {attention.class_name} has none: "
        "use 'add' or 'none'")
  if residual != "add" and block["block_order"] != "pre_norm":
    raise ValueError(
        f"model.block.attention_residual={residual!r} needs "
        f"model.block.block_order='pre_norm' (got {block['block_order']!r})")


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
