"""Baseline multi-head softmax dot-product attention (Vaswani et al., 2017)."""

from __future__ import annotations

from typing import ClassVar

from vit_spectral.attention.base import Attention
from vit_spectral.attention.registry import register_attention


@register_attention("dot_product")
class DotProductAttention(Attention):
  """softmax(Q Kᵀ / sqrt(d_h)) V, heads concatenated and projected: the
  pipeline of `attention.base` with every hook at its default.

  Fused path (`implementation`, `attention.base`): the same softmax(Q Kᵀ /
  sqrt(d_h), masked) V through `attention.fused.fused_attention`, no map sown.

  Call contract: see `vit_spectral.attention.base`.
  """
  supports_fused: ClassVar[bool] = True
