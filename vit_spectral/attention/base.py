"""The call contract, the one attention pipeline, and the shared pieces.

Contract (what `models.vit.Block` relies on):

    attn = AttentionClass(num_heads=..., deterministic=..., grid_size=...,
                          num_prefix_tokens=..., dtype=..., param_dtype=...,
                          **variant_kwargs)
    y, new_state = attn(x, state, mask=None)          # + skip=... if mixes_skip

    x, y:   (B, T, D), T = num_prefix_tokens + grid_size[0] * grid_size[1]
    state:  whatever `AttentionClass.initial_state(B, T, num_heads)` returned for
            the first block (None for stateless variants), then the previous
            block's `new_state`. Carried in float32.
    mask:   optional bool (B or 1, 1 or heads, T, T); True = may attend.
    skip:   (B, T, D), only for `mixes_skip` variants (others raise TypeError).

Plain call (`return_state=False`; same parameters, same numbers): `y = attn(x,
mask=None)`. It takes no state; a variant whose call carries one
(`carries_state()`: Hopfield with alpha_hidden > 0) raises a ValueError naming
the carry form.

The pipeline (`Attention.__call__`, the same for every variant; a variant
overrides only the hooks where it differs, and never calls the fused path,
`add_lepe` or `project_out` itself):

    prepare(x, state)                 checks; parameters that come first
    use_fused(carries_state())        fused or explicit (below)
    mask = attention_mask(x, mask)    e.g. the relative variants' prefix rule
    q, k, v = project(x)              (B, T, H, Dh) each; q, k None = scores
                                      by position only; v None = `values(x)`
                                      projected after the softmax
    explicit:
      logits = scores(q, k, x)        float32 (B or 1, H, T, S)
      logits, new_state = update_state(logits, state, mask)   (Hopfield)
      weights = probabilities(logits, mask)   bias, talking heads, mask,
                                      softmax, sown, dropout
      mixed = mix_values(weights, v)  A·V, (B, T, H, Dh)
    fused:
      q, k, scale, bias = fused_inputs(q, k, x)
      mixed = fused_attention(q, k, head_values(v), scale, position_bias(bias), mask)
      new_state = state
    mixed = rescale_mixed(mixed, v, mask)   e.g. AttnScale's all-pass Â·V
    mixed = add_lepe(mixed, v)              LePE (`lepe`)
    y = project_out(scale_output(mixed, v)) e.g. cosine's ν and 1/K
    return mix_skip(x, y, skip), new_state  e.g. Hopfield's α skip mix
                                      (y alone with return_state=False)

Every module class that creates parameters states their logical axes in
`PARAM_AXES` (path -> one name per dimension: "embed" (D), "heads" (H),
"head_dim" (Dh), "head_channels" (H·Dh, head major), "mlp", or None);
`param_axes()` merges the bases'. `LOGGED_PARAMS` (parameter path -> tag stem,
logged as _mean, _min, _max) and `LOGGED_SOWN` (sown scalar -> tag) name the
per-layer scalars the training diagnostics log.

Precision (`models.vit.ViT` states the policy): projections and value mixing in
`dtype`; scores and softmax float32. Every variant sows its final probabilities,
float32 (B, H, T, T), as `intermediates/attention_weights`.

Shared fields, the same for every variant (`Attention`'s attributes; off by
default = no parameters, the same numbers): `relative_position_bias` (Swin
§3.2), `value_output` (paper 003, §4), `lepe` (CSwin, Dong et al. 2022, §3.3:
softmax(·)V + DWConv(V)), `implementation` (IMPLEMENTATIONS) and
`talking_heads` (Shazeer et al. 2020 as CaiT uses it: timm's `TalkingHeadAttn`).

Design notes: docs/design.md#attentionbasepy
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, ClassVar, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

from vit_spectral.attention import value_output as vo
from vit_spectral.attention.fused import fused_attention
from vit_spectral.layers.grid_conv import GridConv
from vit_spectral.layers.initializers import get_initializer
from vit_spectral.layers.windows import relative_position_index
from vit_spectral.option_ranges import check_ranges
from vit_spectral.settings import scalar_type

# Added to masked logits instead of -inf so fully masked rows stay finite.
_MASK_VALUE = -1e30

# How a variant computes softmax(scores)·V (`Attention.implementation`).
IMPLEMENTATIONS = ("auto", "fused", "explicit")


class Attention(nn.Module):
  """Shared fields and projections for multi-head attention variants.

  Attributes:
    num_heads: number of heads H.
    head_dim: width per head Dh; None = D // H (or D with `full_width_heads`).
    full_width_heads: every head has Dh = D, the H·D channels projected back
      to D (Cordonnier et al. 2020, remark after Lemma 1).
    qkv_bias: whether query/key/value projections have a bias.
    dropout_rate: dropout on the attention probabilities.
    deterministic: disables dropout.
    kernel_init: initializer name for every projection kernel.
    grid_size: (rows, cols) of the patch grid the tokens come from (for
      position-aware variants); None when tokens have no grid.
    num_prefix_tokens: tokens before the grid tokens (1 with a CLS token).
    dtype: compute dtype; param_dtype: parameter dtype.
    value_output, value_output_clip, value_output_eps:
      `attention.value_output.ValueOutput`'s fields: "standard" (free `value`
      and `out` Dense layers) or an eigen-reparameterization of W_V W_proj
      (paper 003, §4; needs num_heads·head_dim = width), checked when traced.
    relative_position_bias: Swin's learned relative position bias (§3.2) on
      the logits: "relative_position_bias_table", ((2·rows − 1)(2·cols − 1),
      H) on `grid_size`, init as Swin's `trunc_normal_(std=.02)`; prefix
      tokens get none.
    talking_heads: heads×heads maps with bias on the logits and on the
      probabilities ("talking_heads_logits", "talking_heads_weights", kernel
      (H, H), float32); the mixed map is sown and mixes the values, zeroed on
      masked keys; no fused path.
    implementation: one of IMPLEMENTATIONS; `use_fused` resolves it per call.
      "auto" takes "fused" exactly where the variant has a fused path and
      nobody reads the map (no "intermediates", no active attention dropout,
      no carried state, no talking heads).
    lepe: CSwin's LePE (`add_lepe`): submodule "lepe", a depth-wise 3×3
      convolution with bias on V over `grid_size` (the window in a windowed
      Block, as the official CSwin's `get_lepe`), zero-padded at the border.
    out_bias: the output projection has a bias ("out_bias" with an eigen
      `value_output`); False lets head groups that share one projection in
      the reference (CSwin's stripe directions) carry it once.
    platform: the platform compiled for, which picks the fused call's kernel
      (`attention.fused`); None = this process's. The Block sets it.
    return_state: `(y, new_state)` (True, default) or `y` alone (the plain
      call, module docstring).
    mixes_skip: class constant; `__call__` accepts `skip=` (B, T, D), the
      tensor the variant's own skip path mixes in
      (`models.vit.Block(attention_residual="replace")` needs it).
    supports_fused: class constant; the variant has a fused path.
    updates_prefix_only: class constant; the queries are the prefix tokens
      only, output (B, num_prefix_tokens, D) (class attention).
    PARAM_AXES, LOGGED_PARAMS, LOGGED_SOWN: class constants (module
      docstring); `param_axes()` adds the bases'.
  """
  mixes_skip: ClassVar[bool] = False
  supports_fused: ClassVar[bool] = False
  updates_prefix_only: ClassVar[bool] = False

  PARAM_AXES: ClassVar[Mapping[str, tuple[str | None, ...]]] = {
      # Projections (D, H, Dh) and (H, Dh, D): one slice per head.
      "query/kernel": ("embed", "heads", "head_dim"),
      "query/bias": ("heads", "head_dim"),
      "key/kernel": ("embed", "heads", "head_dim"),
      "key/bias": ("heads", "head_dim"),
      "value/kernel": ("embed", "heads", "head_dim"),
      "value/bias": ("heads", "head_dim"),
      "out/kernel": ("heads", "head_dim", "embed"),
      "out/bias": ("embed",),          # added after the heads are summed
      # Eigen value/output (paper 003): V_H and Θ (D, D) enter a QR or an
      # inverse of the whole matrix; ψ (D,) scales W_proj's rows, the heads'
      # channels (H·Dh, head major); the value bias is per head.
      vo.THETA: ("embed", "embed"),
      vo.VECTORS: ("embed", "embed"),
      vo.PSI: ("head_channels",),
      "value_bias": ("heads", "head_dim"),
      "out_bias": ("embed",),
      # LePE: a depth-wise conv of V, (3, 3, 1, H·Dh) and (H·Dh,).
      "lepe/conv/kernel": (None, None, None, "head_channels"),
      "lepe/conv/bias": ("head_channels",),
      # Talking heads mix every head with every other: no axis splits them.
      "talking_heads_logits/kernel": (None, None),
      "talking_heads_logits/bias": (None,),
      "talking_heads_weights/kernel": (None, None),
      "talking_heads_weights/bias": (None,),
      # Swin's table: one column per head over the (2R−1)(2C−1) offsets.
      "relative_position_bias_table": (None, "heads"),
  }
  # Option -> the interval its value must lie in ("[0, 1]", "(0, inf)"): checked
  # when called and by the config checks (`option_ranges.check_ranges`). A
  # subclass's entries add to its bases'.
  OPTION_RANGES: ClassVar[Mapping[str, str]] = {}
  LOGGED_PARAMS: ClassVar[Mapping[str, str]] = {}
  LOGGED_SOWN: ClassVar[Mapping[str, str]] = {}
  # The fields every Block sets itself: the others are `model.attention` options.
  SET_BY_BLOCK: ClassVar[tuple[str, ...]] = (
      "num_heads", "dropout_rate", "deterministic", "kernel_init", "grid_size",
      "num_prefix_tokens", "dtype", "param_dtype", "return_state", "platform")

  num_heads: int
  head_dim: int | None = None
  full_width_heads: bool = False
  qkv_bias: bool = True
  dropout_rate: float = 0.0
  deterministic: bool = True
  kernel_init: str = "xavier_uniform"
  grid_size: tuple[int, int] | None = None
  num_prefix_tokens: int = 0
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  value_output: str = vo.DEFAULT.mode
  value_output_clip: bool = vo.DEFAULT.clip
  value_output_eps: float = vo.DEFAULT.eps
  relative_position_bias: bool = False
  implementation: str = "auto"
  talking_heads: bool = False
  lepe: bool = False
  out_bias: bool = True
  return_state: bool = True
  platform: str | None = None

  @classmethod
  def initial_state(cls, batch_size: int, num_tokens: int, num_heads: int):
    """The state handed to the first block; None = this variant is stateless."""
    del batch_size, num_tokens, num_heads
    return None

  @classmethod
  def param_axes(cls) -> dict[str, tuple[str | None, ...]]:
    """Path (relative to the module) -> logical axes, of every parameter this
    class may create: its `PARAM_AXES` merged over its bases' (a subclass's
    entry wins)."""
    return cls._merged_over_bases("PARAM_AXES")

  @classmethod
  def option_ranges(cls) -> dict[str, str]:
    """Every `OPTION_RANGES` entry along the class hierarchy (a subclass's
    entry wins)."""
    return cls._merged_over_bases("OPTION_RANGES")

  @classmethod
  def config_options(cls) -> dict[str, Any]:
    """Option -> its type (int, float, bool, str, tuple; `X | None` gives X;
    Any where none of these): the fields a config sets in `model.attention`,
    every field but Flax's and `SET_BY_BLOCK`."""
    hints = typing.get_type_hints(cls)
    return {f.name: scalar_type(hints.get(f.name, Any)) for f in dataclasses.fields(cls)
            if f.name not in ("parent", "name", *cls.SET_BY_BLOCK)}

  @classmethod
  def _merged_over_bases(cls, table: str) -> dict:
    """The class-level dict `table` of every class in the MRO, bases first."""
    merged = {}
    for klass in reversed(cls.__mro__):
      merged.update(vars(klass).get(table, {}))
    return merged

  @nn.compact
  def __call__(self, x, state=None, mask=None, skip=None):
    """One attention layer: the pipeline of the module docstring.

    Args:
      x: (B, T, D) module input.
      state: the carried state (module docstring); None for stateless variants.
      mask: optional bool, broadcastable to (B, H, T, S); True = may attend.
      skip: (B, T, D) the tensor a `mixes_skip` variant's own skip path mixes
        in (None = x); other variants take none.

    Returns:
      y, (B, T, D) ((B, P, D) for `updates_prefix_only`), and the new state;
      y alone with `return_state=False` (the plain call).
    """
    if skip is not None and not self.mixes_skip:
      raise TypeError(f"{type(self).__name__} has no skip path (mixes_skip is False); "
                      "call it without skip=")
    ranges = self.option_ranges()
    check_ranges(ranges, {name: getattr(self, name) for name in ranges})
    self.prepare(x, state)
    if not self.return_state:
      self.check_plain_call(state)
    fused = self.use_fused(has_state=self.carries_state())
    mask = self.attention_mask(x, mask)
    q, k, v = self.project(x)                                # (B, T, H, Dh) each
    if fused:
      q, k, scale, bias = self.fused_inputs(q, k, x)
      v = self.head_values(self.values(x) if v is None else v)
      mixed = fused_attention(q, k, v, scale=scale, bias=self.position_bias(bias),
                              mask=mask, dtype=self.dtype, platform=self.platform)
      new_state = state
    else:
      logits = self.scores(q, k, x)                          # float32 (B or 1, H, T, S)
      logits = jnp.broadcast_to(logits, (x.shape[0],) + logits.shape[1:])
      logits, new_state = self.update_state(logits, state, mask)
      weights = self.probabilities(logits, mask)             # (B, H, T, S)
      v = self.values(x) if v is None else v
      mixed = self.mix_values(weights, v)                    # (B, T, H, Dh)
      v = self.head_values(v)
    mixed = self.rescale_mixed(mixed, v, mask)
    mixed = self.add_lepe(mixed, v)                          # LePE (`lepe`), else unchanged
    y = self.project_out(self.scale_output(mixed, v), x.shape[-1])
    y = self.mix_skip(x, y, skip)
    return (y, new_state) if self.return_state else y

  def check_plain_call(self, state) -> None:
    """Raises where the plain call (`return_state=False`) would lose a state.

    Raises:
      TypeError: a state was handed in (the plain call takes none).
      ValueError: this call carries a state from layer to layer
        (`carries_state()`); the message names the carry form.
    """
    name = type(self).__name__
    carry_form = (f"`y, state = attn(x, state)` with return_state=True (the default), "
                  f"`state` starting at {name}.initial_state(batch, tokens, num_heads) "
                  "and then the previous layer's")
    if state is not None:
      raise TypeError(f"{name}(return_state=False) is the plain call `y = attn(x)` and takes "
                      f"no state; to hand a state in and get the next, call {carry_form}")
    if self.carries_state():
      raise ValueError(f"{name} carries its attention state from layer to layer "
                       "(carries_state() is True for these fields), which the plain call "
                       f"`y = attn(x)` (return_state=False) would drop; call {carry_form}")

  # Hooks: a variant overrides only those where it differs. The defaults are
  # multi-head softmax dot-product attention.

  def prepare(self, x, state) -> None:
    """Checks the variant's fields and the call, and creates the parameters
    that come before the projections (their order draws their init keys).

    Args:
      x: (B, T, D) module input.
      state: the state handed in.
    """
    del x, state

  def carries_state(self) -> bool:
    """Whether this call reads and hands on a state (then the map is needed:
    no fused path, `use_fused(has_state=True)`)."""
    return False

  def attention_mask(self, x, mask):
    """The mask both paths apply: the caller's (None allowed), bool
    broadcastable to (B, H, T, S)."""
    del x
    return mask

  def project(self, x):
    """x: (B, T, D) -> q (B, T', H, Dh), k and v (B, T, H, Dh).

    q and k may be None (scores by position only); v None = the values are
    projected by `values(x)` where they are first needed (after the softmax
    on the explicit path).
    """
    return self.project_qkv(x)

  def scores(self, q, k, x):
    """The explicit path's logits: float32 (B or 1, H, T', S) (the batch is
    broadcast after). Default: q kᵀ / √Dh."""
    del x
    return scaled_dot_logits(q, k)

  def fused_inputs(self, q, k, x):
    """What the fused call takes instead of `scores`: (q, k, scale, bias),
    `fused_attention(q, k, v, scale=scale, bias=bias)` computing the same
    softmax as the explicit path (scale None = 1/√Dh; bias None or float32
    broadcastable to (B, H, T', S), the position bias is added to it)."""
    del x
    return q, k, None, None

  def update_state(self, logits, state, mask):
    """Explicit path: (logits (B, H, T, S) float32, state handed in, mask) ->
    (the logits the softmax reads, the state handed on). Default: both
    unchanged."""
    del mask
    return logits, state

  def values(self, x):
    """x: (B, T, D) -> the values, when `project` deferred them (v None)."""
    return self.project_value(x)

  def mix_values(self, weights, v):
    """weights (B, H, T', S), v as `project`/`values` gave it -> A·V (B, T', H, Dh)."""
    return apply_weights(weights, v)

  def head_values(self, v):
    """v as `project`/`values` gave it -> (B, S, H, Dh), one value per head
    (what the fused call mixes and LePE convolves)."""
    return v

  def rescale_mixed(self, mixed, v, mask):
    """The mixed values A·V (B, T', H, Dh) -> what LePE is added to.

    Args:
      mixed: (B, T', H, Dh) from either path.
      v: (B, S, H, Dh) the values that were mixed.
      mask: the mask both paths applied (`attention_mask`).
    """
    del v, mask
    return mixed

  def scale_output(self, mixed, v):
    """After LePE, before the output projection: (B, T', H, Dh) -> the same
    (v: (B, S, H, Dh), the values that were mixed)."""
    del v
    return mixed

  def mix_skip(self, x, out, skip=None):
    """The layer's output from the projected `out` (B, T', D); `skip` is only
    handed to `mixes_skip` variants. Default: `out`."""
    del x, skip
    return out

  def use_fused(self, has_state: bool = False) -> bool:
    """Whether this call takes the fused path (module docstring).

    Args:
      has_state: the call carries attention state (e.g. Hopfield's scores),
        which needs the explicit map.

    Raises:
      ValueError: `implementation` is not one of IMPLEMENTATIONS, or is
        "fused" where the variant has no fused path or the call needs the map
        (the message says which).
    """
    if self.implementation not in IMPLEMENTATIONS:
      raise ValueError(f"model.attention.implementation={self.implementation!r}; "
                       f"choose one of {list(IMPLEMENTATIONS)}")
    if self.implementation == "explicit":
      return False
    needs_map = []
    missing = self.fused_path_missing()
    if missing:
      needs_map.append(missing)
    if self.is_mutable_collection("intermediates"):
      needs_map.append("the attention weights are being recorded (intermediates)")
    if self.dropout_rate and not self.deterministic:
      needs_map.append(f"attention dropout is active (rate {self.dropout_rate})")
    if has_state:
      needs_map.append("the variant carries attention state between layers")
    if self.talking_heads:
      needs_map.append("talking heads mix the attention map across heads")
    if self.implementation == "fused" and needs_map:
      raise ValueError("model.attention.implementation='fused' cannot be used here: "
                       + "; ".join(needs_map) + "; use 'auto' or 'explicit'")
    return not needs_map

  def fused_path_missing(self) -> str | None:
    """Why this module has no fused path, or None where it has one.

    `supports_fused` decides; a variant whose fused path depends on its
    fields overrides this (`LearnedRelativeAttention`: content only).
    """
    return None if self.supports_fused else f"{type(self).__name__} has no fused path"

  def resolved_head_dim(self, width: int) -> int:
    """Dh on a `width`-wide input: `head_dim` when set, `width` with
    `full_width_heads`, else width / num_heads. The config checks call it on
    an unbound module (`models.backbone.check_heads`).

    Raises:
      ValueError: both head_dim and full_width_heads are set, or width is not
        divisible by num_heads.
    """
    if self.head_dim is not None and self.full_width_heads:
      raise ValueError("model.attention sets both head_dim and full_width_heads; choose one")
    if self.head_dim is not None:
      return self.head_dim
    if self.full_width_heads:
      return width
    if width % self.num_heads:
      raise ValueError(f"model.hidden_size={width} is not divisible by "
                       f"model.num_heads={self.num_heads}")
    return width // self.num_heads

  def dense_heads(self, x, name: str, use_bias: bool):
    """x: (B, T, D) -> (B, T, H, Dh), one projection."""
    return nn.DenseGeneral(
        features=(self.num_heads, self.resolved_head_dim(x.shape[-1])),
        use_bias=use_bias, kernel_init=get_initializer(self.kernel_init),
        dtype=self.dtype, param_dtype=self.param_dtype, name=name)(x)

  def project_qkv(self, x):
    """x: (B, T, D) -> q, k, v each (B, T, H, Dh) (submodules query/key/value).

    With an eigen `value_output`, v = x W_V + b with W_V = V_H (paper 003, §5).
    """
    q, k = (self.dense_heads(x, n, self.qkv_bias) for n in ("query", "key"))
    return q, k, self.project_value(x)

  def project_value(self, x):
    """x: (B, T, D) -> v (B, T, H, Dh), submodule "value" or the eigen W_V
    (position-only variants reach it through the `values` hook)."""
    if not self.value_output_settings().eigen:
      return self.dense_heads(x, "value", self.qkv_bias)
    w_v, _ = self._eigen_kernels(x.shape[-1])
    v = jnp.einsum("btd,dhk->bthk", x, w_v.astype(self.dtype))
    if self.qkv_bias:
      v = v + self._shared_param("value_bias", nn.initializers.zeros,
                                 w_v.shape[1:]).astype(self.dtype)
    return v

  def project_out(self, y, width: int):
    """y: (B, T, H, Dh) -> (B, T, width), the output projection "out".

    With an eigen `value_output`, W_proj = Λ_H V_H^{T or −1} (paper 003, §5).
    """
    if not self.value_output_settings().eigen:
      return nn.DenseGeneral(
          features=width, axis=(-2, -1), use_bias=self.out_bias,
          kernel_init=get_initializer(self.kernel_init),
          dtype=self.dtype, param_dtype=self.param_dtype, name="out")(y)
    _, w_proj = self._eigen_kernels(width)
    out = jnp.einsum("bthk,hkd->btd", y, w_proj.astype(self.dtype))
    if not self.out_bias:
      return out
    return out + self._shared_param("out_bias", nn.initializers.zeros,
                                    (width,)).astype(self.dtype)

  def add_lepe(self, mixed, v):
    """mixed + LePE(v) with `lepe` (CSwin §3.3), else `mixed` unchanged.

    Args:
      mixed: (B, T, H, Dh) the mixed values (A·V, or a variant's Â·V).
      v: (B, T, H, Dh) the values that were mixed (the same heads and width;
        a variant with one value shared by every head broadcasts it first).

    Returns:
      (B, T, H, Dh) in `mixed`'s dtype: `mixed` plus the depth-wise 3×3
      convolution (channels H·Dh) of v's grid tokens; zero on prefix tokens.

    Raises:
      ValueError: `lepe` without `grid_size`.
    """
    if not self.lepe:
      return mixed
    if self.grid_size is None:
      raise ValueError("model.attention.lepe=True needs tokens on a patch grid "
                       "(grid_size), the grid its 3x3 convolution runs over")
    batch, tokens, heads, head_dim = v.shape
    conv = GridConv(grid_size=tuple(self.grid_size), num_prefix_tokens=self.num_prefix_tokens,
                    kernel_size=3, depthwise=True, kernel_init=self.kernel_init,
                    dtype=self.dtype, param_dtype=self.param_dtype, name="lepe")
    encoding = conv(v.reshape(batch, tokens, heads * head_dim))
    return mixed + encoding.reshape(v.shape).astype(mixed.dtype)

  def _shared_param(self, name: str, init, shape):
    """A parameter that several methods read: whichever runs first declares
    it, the others read it (one V_H and ψ serve W_V and W_proj)."""
    if self.has_variable("params", name):
      return self.get_variable("params", name)
    return self.param(name, init, shape, self.param_dtype)

  def value_output_settings(self) -> vo.ValueOutput:
    """This module's checked `ValueOutput` (raises ValueError naming the field)."""
    return vo.ValueOutput(self.value_output, self.value_output_clip, self.value_output_eps)

  def _eigen_kernels(self, width: int):
    """(W_V (D, H, Dh), W_proj (H, Dh, D)) of the eigen `value_output`, float32.

    Built once per call (memoized on the parameter objects): `project_value`
    and `project_out` both ask. Design notes: docs/design.md#attentionbasepy
    """
    settings = self.value_output_settings()
    settings.check_heads(self.num_heads, self.resolved_head_dim(width), width)
    if settings.symmetric:
      # Θ takes the kernel initializer; its Q factor is orthogonal whatever Θ's scale.
      basis = {vo.THETA: self._shared_param(
          vo.THETA, get_initializer(self.kernel_init), (width, width))}
    else:
      # V_H starts orthogonal, so V_H⁻¹ = V_Hᵀ is well conditioned at init.
      basis = {vo.VECTORS: self._shared_param(
          vo.VECTORS, nn.initializers.orthogonal(), (width, width))}
    params = dict(basis, **{vo.PSI: self._shared_param(vo.PSI, vo.psi_init, (width,))})
    # A memo on this bound instance (a fresh clone per apply and per lifted
    # trace); keyed by the parameter objects, so a stale trace's never match.
    memo = self.__dict__.get("_eigen_memo")
    if memo is not None and memo[0].keys() == params.keys() and all(
        memo[0][k] is v for k, v in params.items()):
      return memo[1]
    kernels = vo.value_output_kernels(params, settings, self.num_heads)
    object.__setattr__(self, "_eigen_memo", (params, kernels))
    return kernels

  def probabilities(self, logits, mask=None):
    """Masked softmax over keys, computed in float32, sown and dropped out.

    Args:
      logits: (B, H, T, T) attention scores.
      mask: optional bool, broadcastable to logits; True = may attend.

    Returns:
      (B, H, T, T) probabilities (after attention dropout), in `dtype`.
    """
    logits = logits.astype(jnp.float32)
    bias = self.position_bias()
    if bias is not None:
      logits = logits + bias
    if self.talking_heads:
      logits = self.mix_heads(logits, "talking_heads_logits")
    if mask is not None:
      logits = jnp.where(mask, logits, _MASK_VALUE)
    weights = jax.nn.softmax(logits, axis=-1)
    if self.talking_heads:
      weights = self.mix_heads(weights, "talking_heads_weights")
      if mask is not None:
        weights = jnp.where(mask, weights, 0.0)
    self.sow_weights(weights, mask)
    weights = nn.Dropout(self.dropout_rate)(weights, deterministic=self.deterministic)
    return weights.astype(self.dtype)

  def position_bias(self, bias=None):
    """`bias` plus Swin's relative position bias when `relative_position_bias`
    is on: float32 (1 or B, H, T, T); `bias` unchanged (None allowed) when off.
    Row (i, j) of the table is `relative_position_index` of `grid_size`;
    prefix tokens' rows and columns are zero.
    """
    if not self.relative_position_bias:
      return bias
    if self.grid_size is None:
      raise ValueError("model.attention.relative_position_bias needs tokens on a grid "
                       "(grid_size); this attention has none")
    rows, cols = self.grid_size
    # timm's trunc_normal_(std=.02) cuts at ±2 (absolute): ±100 standard deviations.
    init = nn.initializers.truncated_normal(0.02, lower=-100.0, upper=100.0)
    table = self.param("relative_position_bias_table", init,
                       ((2 * rows - 1) * (2 * cols - 1), self.num_heads), self.param_dtype)
    index = relative_position_index((rows, cols))                       # (N, N)
    grid_bias = table.astype(jnp.float32)[index].transpose(2, 0, 1)     # (H, N, N)
    p = self.num_prefix_tokens
    if p:
      grid_bias = jnp.pad(grid_bias, ((0, 0), (p, 0), (p, 0)))
    grid_bias = grid_bias[None]                                          # (1, H, T, T)
    return grid_bias if bias is None else bias.astype(jnp.float32) + grid_bias

  def mix_heads(self, maps, name: str):
    """Talking heads: (B, H, T, S) -> (B, H, T, S), out[g] = Σ_h W[h, g]·maps[h] + b[g]
    (a Dense over the head axis, float32; kernel (H, H) = timm's weightᵀ)."""
    if not isinstance(self.talking_heads, bool):
      raise ValueError(f"model.attention.talking_heads={self.talking_heads!r} must be "
                       "True or False")
    mixed = nn.Dense(maps.shape[1], kernel_init=get_initializer(self.kernel_init),
                     dtype=jnp.float32, param_dtype=self.param_dtype,
                     name=name)(jnp.moveaxis(maps, 1, -1))
    return jnp.moveaxis(mixed, -1, 1)

  def sow_weights(self, weights, mask=None):
    """Records the attention map that the diagnostics read, (B, H, T, T).

    `mask` is the one `probabilities` applied (variants whose recorded map
    depends on it, e.g. AttnScale's Â, read it)."""
    del mask
    self.sow("intermediates", "attention_weights", weights)


def apply_weights(weights, v):
  """weights: (B, H, T, S), v: (B, S, H, Dh) -> (B, T, H, Dh)."""
  return jnp.einsum("bhts,bshd->bthd", weights, v)


def scaled_dot_logits(q, k):
  """q: (B, T, H, Dh), k: (B, S, H, Dh) -> q kᵀ / sqrt(Dh), (B, H, T, S) float32.

  The product runs in q's dtype and accumulates into float32
  (`preferred_element_type`; the policy: `models.vit.ViT`).
  """
  q = q / jnp.sqrt(q.shape[-1]).astype(q.dtype)
  return jnp.einsum("bthd,bshd->bhts", q, k, preferred_element_type=jnp.float32)
