"""Learned 2-D relative positional encoding (paper 002, §4.3 with eq. 8).

A learned vector of size D_p/2 for every row shift δ₁ and every column shift δ₂
(δ = k − q); the encoding of a pair is their concatenation
r_δ = [row(δ₁); col(δ₂)] ∈ ℝ^{D_p}. The scores follow eq. 8 per head h:

    A_qk = ( q_h·k_h + q_h·Ŵ_h r_δ + u_h·k_h + v_h·Ŵ_h r_δ ) / √D_k   (content=True)
    A_qk =   v_h·Ŵ_h r_δ / √D_k                                       (content=False)

with q_h = X_q W_qry,h, k_h = X_k W_key,h, Ŵ_h the per-head slice of Ŵ_key
(D_p -> H·D_k) and u_h, v_h learned per head. content=False is the paper's §4.3
experiment ("(iii) the attention scores are computed using only the relative
positions of the pixels and not the data"). The 1/√D_k is the usual scaling
(eq. 8 drops constant factors, §2.1).

Differences from the paper, stated: the row/column tables are owned by each layer
(the paper shares r_δ across layers and heads; here it is shared across heads).
Because r_δ is a concatenation, Ŵ r_δ = Ŵ_row row(δ₁) + Ŵ_col col(δ₂), which is how
the scores are computed: no (N, N, D_p) tensor is ever built.
"""

from __future__ import annotations

from typing import ClassVar, Mapping

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.attention.base import scaled_dot_logits
from vit_spectral.attention.registry import register_attention
from vit_spectral.attention.relative import RelativePositionAttention, relative_shifts
from vit_spectral.layers.initializers import get_initializer


@register_attention("relative_learned")
class LearnedRelativeAttention(RelativePositionAttention):
  """Attention with learned row/column shift embeddings (§4.3).

  Parameters: "row_embedding" (2R−1, D_p/2), "col_embedding" (2C−1, D_p/2),
  "position_key" (D_p, H, D_k) Ŵ_key, "position_query" (H, D_k) v; with content
  also "content_bias" (H, D_k) u and "query"/"key"; then "value", "out".

  Attributes:
    content: add the data-dependent terms of eq. 8 (q·k, q·Ŵr, u·k).
    position_dim: D_p (even); None = the model width (the paper: D_p = D_out).
    embedding_init_std: std of the row/column embeddings at init.

  Hooks (`attention.base`): `project` gives the content queries and keys
  (none without content); `scores` are eq. 8; `fused_inputs`, with content
  only: the content term q·kᵀ/√D_k goes through the fused call, the rest of
  eq. 8 (q·Ŵr, u·k, v·Ŵr: a (B, H, T, T) float32 array, since q·Ŵr depends on
  the data) as its `bias`, the prefix rule as its mask. Without content the
  scores are positional only and there is no fused path
  (`RelativePositionAttention` says why; `fused_path_missing` says so):
  "fused" raises, "auto" computes the map.
  """
  PARAM_AXES: ClassVar[Mapping[str, tuple[str | None, ...]]] = {
      # Shared by every head: the row/column shift tables (2R−1 or 2C−1, D_p/2).
      "row_embedding": (None, None),
      "col_embedding": (None, None),
      "position_key": (None, "heads", "head_dim"),     # Ŵ_key (D_p, H, D_k)
      "position_query": ("heads", "head_dim"),         # v (H, D_k)
      "content_bias": ("heads", "head_dim"),           # u (H, D_k)
  }

  content: bool = False
  position_dim: int | None = None
  embedding_init_std: float = 1.0

  supports_fused: ClassVar[bool] = True     # with content only (class docstring)

  def fused_path_missing(self) -> str | None:
    if not self.content:
      return ("LearnedRelativeAttention with content=False scores by position only "
              "and has no fused path")
    return None

  def project(self, x):
    """Content queries and keys (B, T, H, D_k) with `content`, else none; the
    values come later."""
    if not self.content:
      return None, None, None
    return (self.dense_heads(x, "query", self.qkv_bias),
            self.dense_heads(x, "key", self.qkv_bias), None)

  def position_terms(self, q, k, x):
    """Eq. 8 but q·k: (position terms (B or 1, H, T, T) float32, zero on prefix
    pairs; u·k/√D_k (B, H, 1, T), None without content)."""
    num_tokens, width = x.shape[1:]
    rows, cols = self.grid_shape(num_tokens)
    dp = self.position_dim or width
    if dp % 2:
      raise ValueError(f"model.attention.position_dim={dp} must be even "
                       "(half for rows, half for columns)")
    dk = self.resolved_head_dim(width)
    emb_init = nn.initializers.normal(self.embedding_init_std)
    row_emb = self.param("row_embedding", emb_init, (2 * rows - 1, dp // 2), self.param_dtype)
    col_emb = self.param("col_embedding", emb_init, (2 * cols - 1, dp // 2), self.param_dtype)
    w_pos = self.param("position_key", get_initializer(self.kernel_init),
                       (dp, self.num_heads, dk), self.param_dtype)
    # Ŵ r_δ split by the concatenation: rows (2R−1, H, Dk), columns (2C−1, H, Dk).
    p_row = jnp.einsum("re,ehd->rhd", row_emb, w_pos[: dp // 2])
    p_col = jnp.einsum("ce,ehd->chd", col_emb, w_pos[dp // 2:])
    shifts = relative_shifts((rows, cols))
    row_idx = shifts[..., 0] + rows - 1                                 # (N, N)
    col_idx = shifts[..., 1] + cols - 1
    scale = 1.0 / jnp.sqrt(jnp.asarray(dk, jnp.float32))

    v_pos = self.param("position_query", nn.initializers.normal(1.0),
                       (self.num_heads, dk), self.param_dtype)
    pos_row = jnp.einsum("hd,rhd->hr", v_pos, p_row)                    # (H, 2R−1)
    pos_col = jnp.einsum("hd,chd->hc", v_pos, p_col)
    grid_logits = (pos_row[:, row_idx] + pos_col[:, col_idx])[None] * scale  # (1, H, N, N)
    if not self.content:
      return self.embed_grid_logits(grid_logits, num_tokens), None

    u = self.param("content_bias", nn.initializers.normal(1.0),
                   (self.num_heads, dk), self.param_dtype)
    qg = q[:, self.num_prefix_tokens:]                                 # grid queries
    q_row = jnp.einsum("bqhd,rhd->bhqr", qg, p_row)                    # (B, H, N, 2R−1)
    q_col = jnp.einsum("bqhd,chd->bhqc", qg, p_col)
    n = rows * cols
    q_pos = (jnp.take_along_axis(q_row, jnp.broadcast_to(row_idx, (1, 1, n, n)), -1)
             + jnp.take_along_axis(q_col, jnp.broadcast_to(col_idx, (1, 1, n, n)), -1))
    grid_logits = grid_logits + q_pos * scale
    u_k = jnp.einsum("hd,bkhd->bhk", u, k)[:, :, None, :] * scale     # (B, H, 1, T)
    return self.embed_grid_logits(grid_logits, num_tokens), u_k

  def scores(self, q, k, x):
    """Eq. 8: (B or 1, H, T, T) float32."""
    positions, u_k = self.position_terms(q, k, x)
    if not self.content:
      return positions
    return scaled_dot_logits(q, k) + u_k + positions

  def fused_inputs(self, q, k, x):
    """The content term through the fused call, the rest of eq. 8 as its bias."""
    positions, u_k = self.position_terms(q, k, x)
    return q, k, None, u_k + positions                                # bias (B, H, T, T)
