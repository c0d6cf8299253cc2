"""Boolean attention masks in the contract's layout: True = may attend.

Every mask broadcasts to (B, heads, T_query, T_key), the shape of the logits, and
is passed as `mask=` to `ViT.__call__`, `Encoder`, `Block` and every attention.
"""

from __future__ import annotations

import jax.numpy as jnp


def causal_mask(num_tokens: int):
  """Decoder mask: query t attends to keys 0..t. Returns bool (1, 1, T, T)."""
  if num_tokens <= 0:
    raise ValueError(f"num_tokens={num_tokens} must be positive")
  return jnp.tril(jnp.ones((num_tokens, num_tokens), bool))[None, None]


def padding_mask(valid):
  """Key padding mask from valid (B, T) bool (False = padding). Returns (B, 1, 1, T)."""
  valid = jnp.asarray(valid)
  if valid.ndim != 2:
    raise ValueError(f"padding_mask expects valid of shape (batch, tokens), got {valid.shape}")
  return valid.astype(bool)[:, None, None, :]


def combine_masks(*masks):
  """Logical AND of the given masks (None entries skipped); None if all are None."""
  masks = [m for m in masks if m is not None]
  if not masks:
    return None
  out = masks[0]
  for m in masks[1:]:
    out = jnp.logical_and(out, m)
  return out
