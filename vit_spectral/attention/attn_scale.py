"""AttnScale: softmax attention re-scaled into an all-pass filter (paper 000, §3.1).

For the attention map A of layer l and head h (rows sum to one), eqs. 7–9:

    A_LP = 11ᵀ/n                              (7)  the DC (low-pass) filter
    A_HP = A − A_LP                           (8)  the high-pass remainder
    Â    = A_LP + (ω_{l,h} + 1)·A_HP          (9)  ω_{l,h} trainable, initialised to 0

with n the number of tokens, CLS included (as in the authors' code). Since A·1 = 1,

    Â·V = (1 + ω)·(A·V) − ω·1·mean_tokens(V)ᵀ,

so the output costs O(n·d) on top of plain attention and never builds an n×n
array besides the softmax itself (a fused attention kernel could replace A·V).
`all_pass_weights` is the explicit Â; it is only built when the map is recorded
for the diagnostics (the "intermediates" collection is mutable).

Reading chosen where the paper is silent: attention dropout, when enabled, is
applied to A before the rescaling (Â = A_LP + (1 + ω)·(drop(A) − A_LP)), which keeps
the fast form exact; the paper's DeiT recipes use no attention dropout. With a
mask, A_LP stays the uniform map over all n tokens, as in eq. 7.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.attention.base import Attention, apply_weights, scaled_dot_logits
from vit_spectral.attention.registry import register_attention


def all_pass_weights(weights, omega):
  """Explicit Â = A_LP + (ω + 1)(A − A_LP), eqs. 7–9.

  Args:
    weights: A, (B, H, T, T) attention probabilities.
    omega: ω, (H,) one scale per head.

  Returns:
    Â, (B, H, T, T); rows still sum to one, entries may be negative.
  """
  low_pass = 1.0 / weights.shape[-1]                          # every entry of 11ᵀ/n
  scale = (1.0 + omega.astype(weights.dtype))[:, None, None]  # (H, 1, 1)
  return low_pass + scale * (weights - low_pass)


def all_pass_apply(weights, v, omega):
  """Â·V without forming Â: (1 + ω)·(A·V) − ω·mean_tokens(V).

  Args:
    weights: A, (B, H, T, S) attention probabilities (rows sum to one).
    v: (B, S, H, Dh) values.
    omega: (H,) one scale per head.

  Returns:
    (B, T, H, Dh), equal to `apply_weights(all_pass_weights(A, ω), v)`.
  """
  omega = omega.astype(v.dtype)[:, None]                      # (H, 1)
  dc = jnp.mean(v, axis=1, keepdims=True)                     # (B, 1, H, Dh)
  # ω = 0 gives exactly A·V: 1·x − 0·dc is x bit for bit.
  return (1.0 + omega) * apply_weights(weights, v) - omega * dc


@register_attention("attn_scale")
class AttnScaleAttention(Attention):
  """Multi-head softmax attention with AttnScale (paper 000, eqs. 7–9).

  Parameters: those of the baseline ("query", "key", "value", "out") plus
  "omega", (num_heads,) zeros, so ω = 0 is exactly `dot_product` attention and
  ω is never weight-decayed (1-D). The sown `attention_weights` are Â.

  Call contract: see `vit_spectral.attention.base`.
  """

  @nn.compact
  def __call__(self, x, state=None, mask=None):
    """x: (B, T, D) -> ((B, T, D), state unchanged)."""
    omega = self.param("omega", nn.initializers.zeros, (self.num_heads,),
                       self.param_dtype)
    q, k, v = self.project_qkv(x)                                  # (B, T, H, Dh)
    weights = self.probabilities(scaled_dot_logits(q, k), mask)    # A, (B, H, T, T)
    return self.project_out(all_pass_apply(weights, v, omega), x.shape[-1]), state

  def sow_weights(self, weights):
    """Records Â (not the softmax A) for the diagnostics, (B, H, T, T)."""
    # Â is an extra n×n array: build it only when someone collects it.
    if self.is_mutable_collection("intermediates"):
      omega = self.get_variable("params", "omega")
      super().sow_weights(all_pass_weights(weights, omega))
