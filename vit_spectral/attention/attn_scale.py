"""AttnScale: softmax attention re-scaled into an all-pass filter (paper 000, §3.1).

For the attention map A of layer l and head h (rows sum to one), eqs. 7–9:

    A_LP = 11ᵀ/n                              (7)  the DC (low-pass) filter
    A_HP = A − A_LP                           (8)  the high-pass remainder
    Â    = A_LP + (ω_{l,h} + 1)·A_HP          (9)  ω_{l,h} trainable, initialised to 0

with n the number of tokens, CLS included (as in the authors' code). Since A·1 = 1,

    Â·V = (1 + ω)·(A·V) − ω·1·mean_tokens(V)ᵀ,

so the output costs O(n·d) on top of plain attention (either path:
`all_pass_rescale`); the explicit Â (`all_pass_weights`) is only built when the
map is recorded.

Readings chosen where the paper is silent (reasons: docs/design.md#attentionattn_scalepy):
with a mask, row t of A_LP is uniform over query t's allowed keys S_t
(eq. 7 when every key is allowed; a row with none allowed: all keys), so

    Â·V = (1 + ω)·(A·V) − ω·mean_{s ∈ S_t}(V_s);

attention dropout, when enabled, is applied to A before the rescaling
(Â = A_LP + (1 + ω)·(drop(A) − A_LP)).
"""

from __future__ import annotations

from typing import ClassVar, Mapping

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.attention.base import Attention, apply_weights
from vit_spectral.attention.registry import register_attention


def low_pass_weights(num_keys: int, mask=None):
  """A_LP: per query, the uniform map over its allowed keys (eq. 7 under a mask).

  Args:
    num_keys: S, keys per query.
    mask: None, or bool broadcastable to (B, H, T, S); True = may attend.

  Returns:
    1/S (a scalar) without a mask; otherwise float32 of the mask's shape with
    its last axis S, each row 1/|allowed keys| on the allowed keys and 0
    elsewhere (a row with none allowed: 1/S everywhere).
  """
  if mask is None:
    return jnp.asarray(1.0 / num_keys, jnp.float32)
  allowed = allowed_keys(num_keys, mask)
  return allowed / allowed.sum(axis=-1, keepdims=True)


def allowed_keys(num_keys: int, mask):
  """The keys A_LP averages over: float32 0/1 of the mask's shape with its last
  axis S; a row with no allowed key allows every key (see `low_pass_weights`)."""
  allowed = jnp.asarray(mask, bool)
  allowed = jnp.broadcast_to(allowed, allowed.shape[:-1] + (num_keys,))
  allowed = allowed | ~allowed.any(axis=-1, keepdims=True)
  return allowed.astype(jnp.float32)


def all_pass_weights(weights, omega, mask=None):
  """Explicit Â = A_LP + (ω + 1)(A − A_LP), eqs. 7–9 (A_LP masked, see the module).

  Args:
    weights: A, (B, H, T, S) attention probabilities.
    omega: ω, (H,) one scale per head.
    mask: optional bool broadcastable to (B, H, T, S); True = may attend.

  Returns:
    Â, (B, H, T, S); rows still sum to one, entries may be negative, masked
    keys get 0.
  """
  low_pass = low_pass_weights(weights.shape[-1], mask).astype(weights.dtype)
  scale = (1.0 + omega.astype(weights.dtype))[:, None, None]  # (H, 1, 1)
  return low_pass + scale * (weights - low_pass)


def all_pass_apply(weights, v, omega, mask=None):
  """Â·V without forming Â: (1 + ω)·(A·V) − ω·mean_allowed(V), as A·V + ω·(A·V − DC).

  A·V runs in v's dtype; the DC mean and the rescaling in float32 (in bf16,
  1 + ω would round ω away while |ω| < 2⁻⁸), cast back to v's dtype.

  Args:
    weights: A, (B, H, T, S) attention probabilities (rows sum to one).
    v: (B, S, H, Dh) values.
    omega: (H,) one scale per head.
    mask: optional bool broadcastable to (B, H, T, S); True = may attend.

  Returns:
    (B, T, H, Dh) in v's dtype, equal to
    `apply_weights(all_pass_weights(A, ω, mask), v)`.
  """
  return all_pass_rescale(apply_weights(weights, v), v, omega, mask)


def all_pass_rescale(mixed, v, omega, mask=None):
  """Â·V from the mixed values A·V: A·V + ω·(A·V − DC), DC = mean_allowed(V).

  The second half of `all_pass_apply`, for callers that got A·V without the
  map (the fused path). The DC mean and the rescaling run in float32.

  Args:
    mixed: A·V, (B, T, H, Dh).
    v: (B, S, H, Dh) the values A mixed.
    omega: (H,) one scale per head.
    mask: optional bool broadcastable to (B, H, T, S); True = may attend (the
      mask A was computed under).

  Returns:
    (B, T, H, Dh) in v's dtype.
  """
  omega = omega.astype(jnp.float32)[:, None]                  # (H, 1)
  if mask is None:
    dc = jnp.mean(v.astype(jnp.float32), axis=1, keepdims=True)   # (B, 1, H, Dh)
  else:                                 # per query's allowed keys: 0/1 sums, then / count
    batch, num_keys, heads, _ = v.shape
    shape = (batch, heads, mixed.shape[1], num_keys)          # (B, H, T, S)
    allowed = jnp.broadcast_to(allowed_keys(num_keys, mask), shape)
    sums = jnp.einsum("bhts,bshd->bthd", allowed.astype(v.dtype), v,
                      preferred_element_type=jnp.float32)     # (B, T, H, Dh)
    counts = allowed.sum(axis=-1).transpose(0, 2, 1)[..., None]   # (B, T, H, 1)
    dc = sums / counts
  mixed = mixed.astype(jnp.float32)
  # ω = 0 gives exactly A·V: x + 0·(x − dc) is x bit for bit.
  return (mixed + omega * (mixed - dc)).astype(v.dtype)


@register_attention("attn_scale")
class AttnScaleAttention(Attention):
  """Multi-head softmax attention with AttnScale (paper 000, eqs. 7–9).

  Parameters: "omega", (num_heads,) zeros, then those of the baseline
  ("query", "key", "value", "out"), so ω = 0 is exactly `dot_product`
  attention (ω is 1-D: never weight-decayed). `rescale_mixed` turns A·V of
  either path into Â·V; the sown `attention_weights` are Â. Training
  diagnostics (`LOGGED_PARAMS`; eq. 9, Fig. 6): "attn_scale_omega_mean",
  "_min" and "_max" over the heads' ω.

  Call contract: see `vit_spectral.attention.base`.
  """
  supports_fused: ClassVar[bool] = True
  PARAM_AXES: ClassVar[Mapping[str, tuple[str | None, ...]]] = {"omega": ("heads",)}
  LOGGED_PARAMS: ClassVar[Mapping[str, str]] = {"omega": "attn_scale_omega"}

  def omega(self):
    """ω, (H,): created by the first call (`prepare`, before the projections)."""
    return self._shared_param("omega", nn.initializers.zeros, (self.num_heads,))

  def prepare(self, x, state) -> None:
    del x, state
    self.omega()

  def rescale_mixed(self, mixed, v, mask):
    """A·V -> Â·V (eq. 9 through the fast form, module docstring)."""
    return all_pass_rescale(mixed, v, self.omega(), mask)

  def sow_weights(self, weights, mask=None):
    """Records Â (not the softmax A) for the diagnostics, (B, H, T, T)."""
    # Â is an extra n×n array: build it only when someone collects it.
    if self.is_mutable_collection("intermediates"):
      super().sow_weights(all_pass_weights(weights, self.omega(), mask))
