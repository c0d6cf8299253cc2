"""Attention spectrum, cosine similarities, Theorem 1 / Corollary 2 and Theorem 3 (paper 000).

Each function is checked against an independent direct computation: an explicit
DFT matrix, explicit pair loops, an explicit SVD.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from vit_spectral.analysis import (attention_cosine_similarity, attention_spectrum, hc,
                                   hc_dc_ratio, smoothing_rate_bound, token_cosine_similarity)


def softmax(p):
  e = np.exp(p - p.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def unitary_dft(n, sign=-1):
  k = np.arange(n)
  return np.exp(sign * 2j * np.pi * np.outer(k, k) / n) / np.sqrt(n)


@pytest.mark.parametrize("sign", [-1, 1])  # the paper prints e^{+2πj km}: same norms
def test_attention_spectrum_is_the_row_norm_of_f_a_f_inverse(sign):
  a = softmax(np.random.default_rng(0).standard_normal((2, 3, 6, 6)))
  f = unitary_dft(6, sign)
  expected = np.empty((2, 3, 6))
  for b in range(2):
    for h in range(3):
      lam = f @ a[b, h] @ np.linalg.inv(f)
      expected[b, h] = [np.sqrt(sum(abs(z) ** 2 for z in row)) for row in lam]
  np.testing.assert_allclose(attention_spectrum(a), expected, rtol=1e-5, atol=1e-6)


def test_attention_spectrum_of_pure_low_pass_and_all_pass_maps():
  n = 5
  np.testing.assert_allclose(attention_spectrum(np.ones((n, n)) / n), [1, 0, 0, 0, 0], atol=1e-6)
  np.testing.assert_allclose(attention_spectrum(np.eye(n)), np.ones(n), atol=1e-6)
  with pytest.raises(ValueError, match="square"):
    attention_spectrum(np.ones((3, 4)))


def explicit_mean_abs_cos(vectors):
  n = len(vectors)
  total = 0.0
  for i in range(n):
    for j in range(i + 1, n):
      u, v = vectors[i], vectors[j]
      total += abs(u @ v) / (np.linalg.norm(u) * np.linalg.norm(v))
  return 2 * total / (n * (n - 1))


def test_attention_cosine_similarity_is_eq_75():
  a = softmax(np.random.default_rng(1).standard_normal((2, 3, 5, 5)) * 2)  # (B, H, n, n)
  expected = [np.mean([explicit_mean_abs_cos(a[b, h].T) for h in range(3)]) for b in range(2)]
  np.testing.assert_allclose(attention_cosine_similarity(a), expected, rtol=1e-5)
  with pytest.raises(ValueError, match="heads"):
    attention_cosine_similarity(a[0, 0])


def test_token_cosine_similarity_is_eq_76():
  x = np.random.default_rng(2).standard_normal((3, 6, 4))
  expected = [explicit_mean_abs_cos(x[b]) for b in range(3)]
  np.testing.assert_allclose(token_cosine_similarity(x), expected, rtol=1e-5)
  # identical tokens: similarity 1; orthogonal tokens: 0
  np.testing.assert_allclose(token_cosine_similarity(np.tile([[1.0, -2.0]], (4, 1))), 1.0, rtol=1e-6)
  np.testing.assert_allclose(token_cosine_similarity(np.eye(4)), 0.0, atol=1e-7)


def test_smoothing_rate_bound_is_the_theorem_3_formula():
  rng = np.random.default_rng(3)
  logits, w_v = rng.standard_normal((2, 7, 7)), rng.standard_normal((2, 4, 3))
  for b in range(2):
    alpha, n = np.abs(logits[b]).max(), 7
    direct = np.sqrt(n * np.exp(2 * alpha) / (np.exp(2 * alpha) + n - 1))
    direct *= np.linalg.svd(w_v[b], compute_uv=False)[0]
    np.testing.assert_allclose(smoothing_rate_bound(logits, w_v)[b], direct, rtol=1e-5)
  # huge logits do not overflow: the factor tends to sqrt(n)
  np.testing.assert_allclose(smoothing_rate_bound(np.full((4, 4), 1e4), np.eye(2)), 2.0, rtol=1e-6)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 9), d=st.integers(1, 6),
       scale=st.floats(0.05, 3.0))
def test_theorem_3_bound_holds_for_random_attention_layers(seed, n, d, scale):
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((n, d)) * scale
  w_q, w_k, w_v = (rng.standard_normal((d, d)) * scale for _ in range(3))
  logits = x @ w_q @ (x @ w_k).T / np.sqrt(d)
  out = softmax(logits) @ x @ w_v                                  # SA(X) = A X W_V
  bound = float(smoothing_rate_bound(logits, w_v))
  hc_out = np.linalg.norm(np.asarray(hc(out)))
  assert hc_out <= bound * np.linalg.norm(np.asarray(hc(x))) * (1 + 1e-4) + 1e-6
  # and α ≤ γ² ‖W_Q W_Kᵀ‖₂ / √d with γ the largest token norm
  gamma = np.linalg.norm(x, axis=1).max()
  assert np.abs(logits).max() <= gamma**2 * np.linalg.norm(w_q @ w_k.T, 2) / np.sqrt(d) * (1 + 1e-9)


def test_theorem_1_and_corollary_2_products_of_softmax_maps_are_low_pass():
  rng = np.random.default_rng(4)
  n, z = 8, rng.standard_normal((8, 3))
  a = softmax(rng.standard_normal((n, n)))
  repeated, varying = z.copy(), z.copy()
  ratios_repeated, ratios_varying = [], []
  for _ in range(60):
    repeated = a @ repeated                                         # A^t z (Thm. 1)
    varying = softmax(rng.standard_normal((n, n)) * 2) @ varying    # Π_k A_k z (Cor. 2)
    repeated, varying = repeated / np.linalg.norm(repeated), varying / np.linalg.norm(varying)
    ratios_repeated.append(float(hc_dc_ratio(repeated)))
    ratios_varying.append(float(hc_dc_ratio(varying)))
  assert float(hc_dc_ratio(z)) > 0.5
  assert ratios_repeated[-1] < 1e-4 and ratios_varying[-1] < 1e-4
  assert ratios_varying[9] < ratios_varying[0] and ratios_repeated[9] < ratios_repeated[0]
