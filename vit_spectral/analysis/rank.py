"""Rank collapse and attention diagnostics of paper 004 (Masumura & Taki).

* `rank_residual_ratio`: the normalized residual norm of App. E, eq. (61).
* `token_cosine_values`: every pairwise token cosine, the samples behind the
  violin plots of Fig. 2 and App. H.
* `attention_entropy`: the per-head attention entropy of App. I.
"""

from __future__ import annotations

import jax.numpy as jnp

from vit_spectral.analysis.frequency import hc
from vit_spectral.analysis.similarity import cosine_gram


def _check_rank(x, min_ndim: int, name: str, layout: str) -> None:
  if x.ndim < min_ndim:
    raise ValueError(f"{name} must have shape {layout}, got {x.shape}")


def norm_1_inf(m):
  """‖M‖_{1,∞} = sqrt(‖M‖₁ ‖M‖_∞) (eq. 24) of the trailing two axes.

  ‖M‖₁ is the largest column abs-sum (eq. 19), ‖M‖_∞ the largest row abs-sum
  (eq. 20). m: (..., T, D) -> (...).
  """
  m = jnp.abs(jnp.asarray(m, jnp.float32))
  norm_1 = m.sum(axis=-2).max(axis=-1)
  norm_inf = m.sum(axis=-1).max(axis=-1)
  return jnp.sqrt(norm_1 * norm_inf)


def token_residual(x):
  """Res(X) = X - 1 x̄ᵀ, x̄ = Xᵀ1 / T the token mean (eqs. 25-27). (..., T, D)."""
  return hc(jnp.asarray(x, jnp.float32))  # the same split as paper 000's HC[X]


def rank_residual_ratio(x):
  """‖Res(X)‖_{1,∞} / ‖X‖_{1,∞} (eq. 61): 0 for a rank-one X = 1 x̄ᵀ.

  Args:
    x: tokens (..., T, D), e.g. one layer's output (B, T, D).

  Returns:
    (...) ratios, e.g. one per image; 0 where X = 0.
  """
  x = jnp.asarray(x)
  _check_rank(x, 2, "x", "(..., tokens, width)")
  denominator = norm_1_inf(x)
  safe = jnp.where(denominator > 0, denominator, 1.0)
  return jnp.where(denominator > 0, norm_1_inf(token_residual(x)) / safe, 0.0)


def token_cosine_values(x, eps: float = 1e-12):
  """Cosine similarity of every unordered token pair (i < j).

  Args:
    x: tokens (..., T, D).
    eps: floor on the norms (a zero token gets cosine 0 with everything).

  Returns:
    (..., T (T - 1) / 2) cosines, pairs in row-major upper-triangle order.
  """
  x = jnp.asarray(x, jnp.float32)
  _check_rank(x, 2, "x", "(..., tokens, width)")
  gram = cosine_gram(x, eps)
  rows, cols = jnp.triu_indices(x.shape[-2], k=1)
  return gram[..., rows, cols]


def attention_entropy(weights, eps: float = 0.0):
  """Mean over queries of the Shannon entropy -Σ_s p log p of each attention row.

  Args:
    weights: attention probabilities (..., heads, T_query, T_key), rows sum to 1.
    eps: added inside the log (0 log 0 is taken as 0 either way).

  Returns:
    (..., heads) entropies in nats, e.g. (B, H) for one layer's sown map.
  """
  p = jnp.asarray(weights, jnp.float32)
  _check_rank(p, 3, "weights", "(..., heads, queries, keys)")
  terms = jnp.where(p > 0, -p * jnp.log(jnp.where(p > 0, p, 1.0) + eps), 0.0)
  return terms.sum(axis=-1).mean(axis=-1)
