"""Class attention (CaiT, Touvron et al. 2021, §3.2; timm's `ClassAttn`).

Only the class token(s) ask: the queries are projections of the first
`num_prefix_tokens` tokens, the keys and values of every token,

    y_cls = Out(softmax(q_cls Kᵀ / sqrt(d_h)) V),   q_cls (B, P, H, Dh),  K, V (B, T, H, Dh),

so the output has the P prefix tokens only: (B, P, D), not the (B, T, D) of
the other variants. A `models.vit.Block` cannot use it (its residual adds the
output to every token; `updates_prefix_only` makes the Block refuse it); it
runs in CaiT's class-attention stage (`models.cait.ClassAttentionBlock`).

The shared fields apply: `value_output` (the eigen value/output pair),
`talking_heads` (mixes the heads of the (B, H, P, T) map, off in CaiT), the
fused path (`implementation`). The map sown as `attention_weights` is
(B, H, P, T).
"""

from __future__ import annotations

from typing import ClassVar

from vit_spectral.attention.base import Attention
from vit_spectral.attention.registry import register_attention


@register_attention("class_attention")
class ClassAttention(Attention):
  """softmax(Q_cls Kᵀ / sqrt(d_h)) V with queries from the prefix tokens only.

  Parameters "query", "key", "value", "out" as `dot_product` (query reads the
  prefix tokens). Stateless: a carried state (Hopfield's T×T score memory)
  has no meaning for a P×T map and raises.

  Hooks (`attention.base`): `prepare` checks the class token, the state and
  that no grid-only field (`lepe`, `relative_position_bias`) is on;
  `project` takes the queries from the prefix tokens.

  Call contract: `attention.base`, except y is (B, P, D), P = num_prefix_tokens.
  """
  supports_fused: ClassVar[bool] = True
  updates_prefix_only: ClassVar[bool] = True

  def prepare(self, x, state) -> None:
    del x
    if self.num_prefix_tokens < 1:
      raise ValueError("model.attention.name='class_attention' needs a class token "
                       f"(num_prefix_tokens >= 1), got {self.num_prefix_tokens}")
    if state is not None:
      raise ValueError("class_attention carries no attention state; a variant's memory "
                       "(e.g. Hopfield's T×T scores) cannot enter the class stage")
    for field in ("lepe", "relative_position_bias"):
      if getattr(self, field):
        raise ValueError(f"class_attention has no grid queries for model.attention.{field} "
                         "to act on; leave it off in the class stage")

  def project(self, x):
    """x: (B, T, D) -> q (B, P, H, Dh) of the prefix tokens, k, v (B, T, H, Dh)."""
    q = self.dense_heads(x[:, :self.num_prefix_tokens], "query", self.qkv_bias)
    k = self.dense_heads(x, "key", self.qkv_bias)
    return q, k, self.project_value(x)
