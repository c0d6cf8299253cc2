"""Theorem 3's bound on how fast one self-attention layer removes high frequencies.

For A = softmax(P) and SA(X) = A·X·W_V (paper 000, Thm. 3, eq. 6, App. B.3):

    ‖HC[SA(X)]‖_F ≤ sqrt(n e^{2α} / (e^{2α} + n − 1)) · ‖W_V‖₂ · ‖HC[X]‖_F,
    α = max_ij |P_ij|.

A rate below 1 makes the high-frequency part vanish exponentially with depth.
"""

from __future__ import annotations

import jax.numpy as jnp


def smoothing_rate_bound(logits, w_v):
  """sqrt(n e^{2α} / (e^{2α} + n − 1)) · ‖W_V‖₂, Theorem 3.

  Args:
    logits: P, (..., n, n) pre-softmax attention scores.
    w_v: W_V, (..., d, d_v) value projection (leading axes broadcast with
      those of `logits`).

  Returns:
    (...) the bound on ‖HC[SA(X)]‖_F / ‖HC[X]‖_F.
  """
  if logits.ndim < 2 or logits.shape[-1] != logits.shape[-2]:
    raise ValueError(f"smoothing_rate_bound needs square logits (..., n, n); got {logits.shape}")
  if w_v.ndim < 2:
    raise ValueError(f"smoothing_rate_bound needs w_v of shape (..., d, d_v); got {w_v.shape}")
  n = logits.shape[-1]
  alpha = jnp.max(jnp.abs(logits), axis=(-2, -1))
  # n e^{2α} / (e^{2α} + n − 1) rewritten as n / (1 + (n − 1) e^{−2α}): no overflow.
  softmax_norm = n / (1.0 + (n - 1) * jnp.exp(-2.0 * alpha))
  spectral_norm = jnp.linalg.norm(w_v, ord=2, axis=(-2, -1))   # largest singular value
  return jnp.sqrt(softmax_norm) * spectral_norm
