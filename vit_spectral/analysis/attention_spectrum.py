"""Frequency response of an attention map (paper 000, App. F.2, Figs. 2, 5, 9, 10).

An attention map A ∈ ℝ^{n×n} acts on the token signals as a linear filter; in the
Fourier domain it is Λ = F·A·F⁻¹ with F the unitary DFT (rows f_k, §2.1). Row k
of Λ maps the input spectrum to the k-th output frequency, so ‖Λ_k‖₂ is the
response intensity of band k: index 0 is DC, then frequencies 1 … n−1. A
low-pass map (Theorem 1) concentrates it on index 0.

The paper's f_k is printed with e^{+2πj(k−1)m}; the sign convention does not
change the result (the conjugate DFT gives Λ̄ for real A, with the same row
norms in the same order).
"""

from __future__ import annotations

import jax.numpy as jnp


def attention_spectrum(a):
  """Row 2-norms of F·A·F⁻¹ (unitary DFT), DC first (App. F.2).

  Args:
    a: (..., n, n) attention maps (any leading batch/head axes).

  Returns:
    (..., n) float response per frequency band, index 0 = DC.
  """
  if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
    raise ValueError(f"attention_spectrum needs square maps (..., n, n); got shape {a.shape}")
  # F·A transforms the columns (axis −2); (F·A)·F⁻¹ = inverse DFT along rows
  # (axis −1). The unitary factors 1/√n and √n cancel: Λ = ifft(fft(A, −2), −1).
  spectrum = jnp.fft.ifft(jnp.fft.fft(a, axis=-2), axis=-1)
  return jnp.sqrt(jnp.sum(jnp.abs(spectrum) ** 2, axis=-1))
