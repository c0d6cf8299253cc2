"""How wide each attention head is: one rule, read by the attention modules
(`Attention.resolved_head_dim`) and by the command line's model checks
(`models.model_checks`), which import no JAX."""

from __future__ import annotations

__all__ = ["head_width"]


def head_width(width: int, num_heads: int, head_dim: int | None = None,
               full_width_heads: bool = False) -> int:
  """Dh of `num_heads` heads over a `width`-wide token: `head_dim` when set,
  `width` with `full_width_heads`, else width / num_heads.

  Raises:
    ValueError: both head_dim and full_width_heads are set, or width is not
      divisible by num_heads.
  """
  if head_dim is not None and full_width_heads:
    raise ValueError("model.attention sets both head_dim and full_width_heads; choose one")
  if head_dim is not None:
    return head_dim
  if full_width_heads:
    return width
  if width % num_heads:
    raise ValueError(f"model.hidden_size={width} is not divisible by model.num_heads={num_heads}")
  return width // num_heads
