"""Theorem 1 of Cordonnier et al. 2020 as code: a K×K convolution as quadratic attention.

Lemma 1: an attention layer with K² heads, head h attending only to the key at
q + f(h) (f a bijection of heads onto the kernel offsets), and per-head
W^(h) = W_val^(h) W_out^(h) equal to the kernel tap at f(h), computes the
convolution (eqs. 11–13). Lemma 2: the quadratic encoding with centre Δ_h = f(h)
reaches that one-hot attention as α → ∞ (eq. 14).

Offsets follow `jax.lax.conv_general_dilated` ("SAME" padding, NHWC / HWIO): tap
(a, b) of a K×K kernel reads the input at (i + a − ⌊K/2⌋, j + b − ⌊K/2⌋), a
cross-correlation, which with δ = k − q is the head centred at
Δ = (a − ⌊K/2⌋, b − ⌊K/2⌋). Head h = a·K + b.

At finite α the softmax leaks weight e^{−α·‖δ − Δ‖²} to the neighbours, so the
error shrinks like e^{−α}. Near the border the zero padding of the convolution and
the renormalised softmax differ, so the equality holds on pixels at least ⌊K/2⌋
from the border.
"""

from __future__ import annotations

import numpy as np


def conv_to_quadratic_attention(kernel, alpha: float, bias=None) -> dict:
  """Variables of a "quadratic" attention layer that reproduces a convolution.

  The layer to apply them to is
  `QuadraticAttention(num_heads=K*K, full_width_heads=True, qkv_bias=True,
  grid_size=(H, W))` on tokens x of width C_in (the image flattened row-major).

  Args:
    kernel: (K, K, C_in, C_out) convolution kernel (HWIO), C_out <= C_in. With
      C_out < C_in the first C_out output channels reproduce the convolution and
      the others are 0 (Theorem 1: min(D_h, D_out) channels).
    alpha: the heads' common width α > 0 (larger = closer to the convolution).
    bias: optional (C_out,) convolution bias.

  Returns:
    {"params": {"centers": (K², 2), "log_alpha": (K²,), "value": {"kernel":
    (C_in, K², C_in) identity per head, "bias": 0}, "out": {"kernel":
    (K², C_in, C_in), "bias": (C_in,)}}}.
  """
  kernel = np.asarray(kernel, np.float32)
  if kernel.ndim != 4 or kernel.shape[0] != kernel.shape[1]:
    raise ValueError(f"kernel must be (K, K, C_in, C_out), got shape {kernel.shape}")
  size, _, c_in, c_out = kernel.shape
  if c_out > c_in:
    raise ValueError(f"kernel has C_out={c_out} > C_in={c_in}: the attention layer "
                     "maps width C_in to C_in (Theorem 1 gives min(D_h, D_out) "
                     "channels)")
  if not alpha > 0:
    raise ValueError(f"alpha={alpha} must be > 0")
  heads = size * size
  offsets = np.stack(np.meshgrid(np.arange(size), np.arange(size), indexing="ij"), -1)
  centers = offsets.reshape(heads, 2) - size // 2                  # Lemma 1's f(h)
  out_kernel = np.zeros((heads, c_in, c_in), np.float32)
  out_kernel[:, :, :c_out] = kernel.reshape(heads, c_in, c_out)    # W^(h), eq. 13
  out_bias = np.zeros((c_in,), np.float32)
  if bias is not None:
    out_bias[:c_out] = np.asarray(bias, np.float32)
  value_kernel = np.broadcast_to(np.eye(c_in, dtype=np.float32)[:, None, :],
                                 (c_in, heads, c_in)).copy()       # W_val^(h) = I
  return {"params": {
      "centers": centers.astype(np.float32),
      "log_alpha": np.full((heads,), np.log(alpha), np.float32),
      "value": {"kernel": value_kernel, "bias": np.zeros((heads, c_in), np.float32)},
      "out": {"kernel": out_kernel, "bias": out_bias},
  }}
