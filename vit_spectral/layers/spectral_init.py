"""Spectral initialization (LipsFormer, paper 001, §4.1.4, eq. 5).

    W_si = W / σ_max(W),   W ~ Xavier-normal

so every affine map starts 1-Lipschitz in the 2-norm. σ_max is the exact
largest singular value (an SVD at init time, not a power-iteration estimate).

Kernels of any rank are read as the matrix (fan_in, out): a Dense kernel
(in, out) as is, a Conv kernel (kh, kw, in/groups, out) as (kh·kw·in, out),
whose transpose is the (out, in·k·k) matrix of the paper (same singular values).
flax's DenseGeneral already hands initializers the flattened (in, out) shape.
The Xavier scale cancels in the ratio; it only fixes the random direction.

Registered as the initializer "spectral" (`model.kernel_init = "spectral"`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vit_spectral.layers.initializers import register_initializer


def kernel_matrix(kernel: jax.Array) -> jax.Array:
  """(..., out) kernel -> (prod(...), out) matrix: every axis but the last is fan-in."""
  if kernel.ndim < 2:
    raise ValueError(f"spectral init needs a kernel of rank >= 2, got shape {kernel.shape}")
  return kernel.reshape(-1, kernel.shape[-1])


def spectral_norm(kernel: jax.Array) -> jax.Array:
  """Exact largest singular value of `kernel_matrix(kernel)`, in float32."""
  matrix = kernel_matrix(kernel).astype(jnp.float32)
  return jnp.linalg.svd(matrix, compute_uv=False)[0]


def spectral(in_axis: int = -2, out_axis: int = -1):
  """Initializer: Xavier-normal, then divided by its exact σ_max (eq. 5)."""
  xavier = jax.nn.initializers.xavier_normal(in_axis=in_axis, out_axis=out_axis)

  def init(key, shape, dtype=jnp.float32):
    kernel = xavier(key, shape, jnp.float32)
    return (kernel / spectral_norm(kernel)).astype(dtype)

  return init


register_initializer("spectral", spectral)
