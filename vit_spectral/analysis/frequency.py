"""Direct-current / high-frequency decomposition of token sequences (paper 000, §2.2).

For X ∈ ℝ^{n×d} (n tokens, d channels), the DFT along the token axis splits X into
its direct-current part DC[X] = (1/n)·1·1ᵀ·X (every token replaced by the token
mean, Definition 1) and its high-frequency part HC[X] = X − DC[X]. All functions
accept any leading batch/head axes: x has shape (..., n, d).
"""

from __future__ import annotations

import jax.numpy as jnp


def dc(x):
  """DC[X] = (1/n) 1 1ᵀ X (paper 000, Def. 1): (..., n, d) -> (..., n, d)."""
  return jnp.broadcast_to(jnp.mean(x, axis=-2, keepdims=True), x.shape)


def hc(x):
  """HC[X] = X − DC[X] (paper 000, Def. 1): (..., n, d) -> (..., n, d)."""
  return x - jnp.mean(x, axis=-2, keepdims=True)


def _fro(x):
  return jnp.sqrt(jnp.sum(jnp.square(x), axis=(-2, -1)))


def hc_dc_ratio(x):
  """‖HC[X]‖_F / ‖DC[X]‖_F, the ratio Definition 1 / Thm. 1 drive to 0: (..., n, d) -> (...)."""
  return _fro(hc(x)) / _fro(dc(x))


def hc_proportion(x):
  """‖HC[X]‖_F / ‖X‖_F, the high-frequency proportion of App. G.3: (..., n, d) -> (...)."""
  return _fro(hc(x)) / _fro(x)
