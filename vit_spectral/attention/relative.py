"""Shared machinery of the relative-position attention variants (Cordonnier et al. 2020).

The variants "quadratic", "gaussian" and "relative_learned" score a query token q
against a key token k by their *relative position* on the patch grid (paper 002,
§2.3 eq. 8), optionally plus the usual content term.

Sign convention: the shift is δ = k − q = (row_k − row_q, col_k − col_q), as in
App. A.1 (eq. 16) and §4.3. (§3 and Lemma 2 write δ = q − k; with δ = k − q a
head whose centre is Δ attends to the key at q + Δ, which is what
`jax.lax.conv_general_dilated` computes for kernel offset Δ, a cross-correlation.)
Tokens of the grid are numbered row-major, as the patch embedding lays them out.

Prefix tokens (e.g. a CLS token) have no position on the grid, so a relative
score is undefined for any pair that involves one. The rule used here:

* a grid query never attends to a prefix key (those scores are masked), so the
  grid tokens see exactly the attention pattern the paper defines on the image;
* a prefix query attends to every token, its positional score is 0: it averages
  all tokens uniformly under a purely positional encoding, and follows the
  content scores when the variant has a content term.

Heads meet only in the output projection `out` (kernel (H, Dh, D), also with
`shared_value`): the output is Σ_h mixed_h W_out^(h) + b, so zeroing head h's
slice of that kernel removes its term exactly. Head pruning (App. A.1,
`vit_spectral.analysis.head_pruning`) does that to the parameters; the module
carries nothing for it.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from vit_spectral.attention.base import Attention, apply_weights
from vit_spectral.attention.fused import fused_attention
from vit_spectral.layers.initializers import get_initializer


def relative_shifts(grid_size: tuple[int, int]) -> np.ndarray:
  """Shift δ = k − q between every pair of grid tokens.

  Args:
    grid_size: (rows, cols) of the patch grid.

  Returns:
    (N, N, 2) int array, N = rows·cols, entry [q, k] = (row_k − row_q, col_k − col_q).
  """
  rows, cols = grid_size
  pos = np.stack(np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij"), -1)
  pos = pos.reshape(rows * cols, 2)
  return pos[None, :, :] - pos[:, None, :]


class RelativePositionAttention(Attention):
  """Base of the attention variants whose scores depend on δ = k − q.

  Subclasses compute grid logits (…, H, N, N) between the N grid tokens and call
  `attend`, which embeds them among the prefix tokens, masks, normalises and mixes
  the values (per-head value projection, heads concatenated, output projection:
  eq. 4). With `full_width_heads=True` every head has width D (§4.3 (ii)).

  Fused path (`implementation`, `attention.base`): a variant with a content
  term q·kᵀ hands it to `attend_fused`, its positional scores going in as the
  fused call's `bias` (the prefix rule stays a mask). A purely positional
  variant has no fused path (`supports_fused` False, the default here):
  `jax.nn.dot_product_attention` needs keys as wide as the values (zero-width
  q, k are rejected), so it would multiply zero queries by zero keys for a
  (B, H, T, T) product of nothing, and its scores (1, H, T, T) do not depend on
  the data anyway.

  Attributes:
    shared_value: one value projection X W_val (D -> D_h) shared by all heads,
      each head's W^(h) of eq. 11 then being W_val W_out^(h). With full-width
      heads this is the parameter count the paper reports (12.1M for the App. A.4
      model), and Lemma 1 still holds (W_val = I). False: per-head W_val^(h).
  """
  shared_value: bool = False

  def grid_shape(self, num_tokens: int) -> tuple[int, int]:
    """Checks that the tokens are `num_prefix_tokens` + a grid; returns the grid."""
    if self.grid_size is None:
      raise ValueError(f"{type(self).__name__} needs grid_size (the patch grid); "
                       "it is set by the ViT")
    rows, cols = self.grid_size
    if num_tokens != self.num_prefix_tokens + rows * cols:
      raise ValueError(
          f"{type(self).__name__}: {num_tokens} tokens do not match "
          f"num_prefix_tokens={self.num_prefix_tokens} + grid {rows}x{cols}")
    return rows, cols

  def embed_grid_logits(self, grid_logits, num_tokens: int):
    """(…, H, N, N) grid logits -> (…, H, T, T), zero on pairs with a prefix token."""
    p = self.num_prefix_tokens
    if not p:
      return grid_logits
    pad = [(0, 0)] * (grid_logits.ndim - 2) + [(p, 0), (p, 0)]
    return jnp.pad(grid_logits, pad)

  def prefix_mask(self, num_tokens: int):
    """(T, T) bool: False where a grid query would attend to a prefix key."""
    p = self.num_prefix_tokens
    allowed = np.ones((num_tokens, num_tokens), bool)
    allowed[p:, :p] = False
    return jnp.asarray(allowed)

  def attend(self, x, logits, mask=None):
    """Softmax over keys, value mixing and output projection (the explicit path).

    Args:
      x: (B, T, D) the block's normalised input.
      logits: (B or 1, H, T, T) scores (prefix pairs already embedded).
      mask: optional caller mask, see `attention.base`.

    Returns:
      (B, T, D).
    """
    batch, num_tokens, width = x.shape
    mask = self.grid_mask(num_tokens, mask)
    logits = jnp.broadcast_to(logits, (batch, self.num_heads, num_tokens, num_tokens))
    weights = self.probabilities(logits, mask)                 # (B, H, T, T)
    v = self.values(x)
    if self.shared_value:
      mixed = jnp.einsum("bhts,bsd->bthd", weights, v)
      v = jnp.broadcast_to(v[:, :, None, :], mixed.shape)   # for LePE: every head's V
    else:
      mixed = apply_weights(weights, v)
    return self.project_out(self.add_lepe(mixed, v), width)

  def attend_fused(self, x, q, k, bias, mask=None):
    """`attend` with logits q·kᵀ/√Dh + bias, through `fused.fused_attention`.

    Args:
      x: (B, T, D) the block's normalised input.
      q, k: (B, T, H, Dh) the content queries and keys.
      bias: (B or 1, H, T, T) float32, the rest of the scores (prefix pairs
        already embedded).
      mask: optional caller mask, see `attention.base`; the prefix rule is
        added as in `attend`.

    Returns:
      (B, T, D).
    """
    num_tokens, width = x.shape[1:]
    mask = self.grid_mask(num_tokens, mask)
    v = self.values(x)
    if self.shared_value:   # one value per token for every head: (B, T, H, Dh)
      v = jnp.broadcast_to(v[:, :, None, :], v.shape[:2] + (self.num_heads, v.shape[-1]))
    mixed = fused_attention(q, k, v, bias=self.position_bias(bias), mask=mask,
                            dtype=self.dtype)
    return self.project_out(self.add_lepe(mixed, v), width)

  def grid_mask(self, num_tokens: int, mask=None):
    """The caller's mask (or None) and `prefix_mask`: bool, broadcastable to (B, H, T, T)."""
    allowed = self.prefix_mask(num_tokens)
    return allowed if mask is None else jnp.logical_and(mask, allowed)

  def values(self, x):
    """x: (B, T, D) -> v: (B, T, Dh) with `shared_value`, else (B, T, H, Dh)."""
    if not self.shared_value:
      return self.project_value(x)
    if self.value_output_settings().eigen:
      raise ValueError(
          f"model.attention.shared_value=True cannot be combined with "
          f"value_output={self.value_output!r}: the eigen-reparameterization "
          "(paper 003) needs one value projection per head")
    return nn.Dense(self.resolved_head_dim(x.shape[-1]), use_bias=self.qkv_bias,
                    kernel_init=get_initializer(self.kernel_init), dtype=self.dtype,
                    param_dtype=self.param_dtype, name="shared_value")(x)
