"""Baseline multi-head softmax dot-product attention (Vaswani et al., 2017)."""

from __future__ import annotations

from typing import ClassVar

import flax.linen as nn

from vit_spectral.attention.base import Attention, apply_weights, scaled_dot_logits
from vit_spectral.attention.fused import fused_attention
from vit_spectral.attention.registry import register_attention


@register_attention("dot_product")
class DotProductAttention(Attention):
  """softmax(Q Kᵀ / sqrt(d_h)) V, heads concatenated and projected.

  Fused path (`implementation`, `attention.base`): the same softmax(Q Kᵀ /
  sqrt(d_h), masked) V through `attention.fused.fused_attention`, no map sown.

  Call contract: see `vit_spectral.attention.base`.
  """
  supports_fused: ClassVar[bool] = True

  @nn.compact
  def __call__(self, x, state=None, mask=None):
    """x: (B, T, D) -> ((B, T, D), state unchanged)."""
    fused = self.use_fused()
    q, k, v = self.project_qkv(x)                        # (B, T, H, Dh) each
    if fused:
      mixed = fused_attention(q, k, v, bias=self.position_bias(), mask=mask,
                              dtype=self.dtype)
    else:
      weights = self.probabilities(scaled_dot_logits(q, k), mask)  # (B, H, T, T)
      mixed = apply_weights(weights, v)
    mixed = self.add_lepe(mixed, v)                      # LePE (`lepe`), else unchanged
    return self.project_out(mixed, x.shape[-1]), state
