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

from typing import ClassVar, Mapping

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from vit_spectral.attention.base import Attention, apply_weights
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

  Hooks (`attention.base`): `project` gives no queries and keys (a variant
  with a content term adds them) and defers the values (`values`, projected
  after the softmax); `attention_mask` adds the prefix rule (`grid_mask`);
  `values`, `mix_values` and `head_values` handle `shared_value`. Subclasses
  supply `scores`: grid logits (…, H, N, N) between the N grid tokens,
  embedded among the prefix tokens (`embed_grid_logits`); the pipeline then
  masks, normalises and mixes the values (per-head value projection, heads
  concatenated, output projection: eq. 4). With `full_width_heads=True`
  every head has width D (§4.3 (ii)).

  Fused path (`implementation`, `attention.base`): a variant with a content
  term q·kᵀ returns it from `fused_inputs`, its positional scores going in as
  the fused call's `bias` (the prefix rule stays a mask). A purely positional
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
  PARAM_AXES: ClassVar[Mapping[str, tuple[str | None, ...]]] = {
      # Shared by every head: (D, Dh) and (Dh,).
      "shared_value/kernel": ("embed", "head_dim"),
      "shared_value/bias": ("head_dim",),
  }

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

  def grid_mask(self, num_tokens: int, mask=None):
    """The caller's mask (or None) and `prefix_mask`: bool, broadcastable to (B, H, T, T)."""
    allowed = self.prefix_mask(num_tokens)
    return allowed if mask is None else jnp.logical_and(mask, allowed)

  def attention_mask(self, x, mask):
    return self.grid_mask(x.shape[1], mask)

  def project(self, x):
    """No queries or keys (scores by position only); the values come later."""
    del x
    return None, None, None

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

  def mix_values(self, weights, v):
    """With `shared_value`, one value (B, S, Dh) for every head's weights."""
    if self.shared_value:
      return jnp.einsum("bhts,bsd->bthd", weights, v)
    return apply_weights(weights, v)

  def head_values(self, v):
    """With `shared_value`, the one value broadcast to every head: (B, S, H, Dh)."""
    if self.shared_value:
      return jnp.broadcast_to(v[:, :, None, :], v.shape[:2] + (self.num_heads, v.shape[-1]))
    return v
