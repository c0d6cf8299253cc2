"""Baseline multi-head softmax dot-product attention (Vaswani et al., 2017)."""

from __future__ import annotations

import flax.linen as nn

from vit_spectral.attention.base import Attention, apply_weights, scaled_dot_logits
from vit_spectral.attention.registry import register_attention


@register_attention("dot_product")
class DotProductAttention(Attention):
  """softmax(Q Kᵀ / sqrt(d_h)) V, heads concatenated and projected.

  Call contract: see `vit_spectral.attention.base`.
  """

  @nn.compact
  def __call__(self, x, state=None, mask=None):
    """x: (B, T, D) -> ((B, T, D), state unchanged)."""
    q, k, v = self.project_qkv(x)                        # (B, T, H, Dh) each
    weights = self.probabilities(scaled_dot_logits(q, k), mask)  # (B, H, T, T)
    return self.project_out(apply_weights(weights, v), x.shape[-1]), state
