"""Rank-collapse diagnostics of paper 004 against explicit loops."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vit_spectral.analysis import (attention_entropy, norm_1_inf, rank_residual_ratio,
                                   token_cosine_values, token_residual)


def norm_1_inf_by_loops(m):
  """eqs. (19), (20), (24) written out element by element."""
  rows, cols = m.shape
  col_sums = [sum(abs(m[i, j]) for i in range(rows)) for j in range(cols)]
  row_sums = [sum(abs(m[i, j]) for j in range(cols)) for i in range(rows)]
  return math.sqrt(max(col_sums) * max(row_sums))


def test_norm_and_ratio_match_loops_per_batch_element():
  x = np.random.default_rng(0).standard_normal((3, 6, 4)).astype(np.float32)
  for b in range(3):
    mean = [sum(x[b, i, j] for i in range(6)) / 6 for j in range(4)]  # eq. (27)
    res = np.array([[x[b, i, j] - mean[j] for j in range(4)] for i in range(6)])
    np.testing.assert_allclose(token_residual(x)[b], res, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norm_1_inf(x)[b], norm_1_inf_by_loops(x[b]), rtol=1e-5)
    expected = norm_1_inf_by_loops(res) / norm_1_inf_by_loops(x[b])
    np.testing.assert_allclose(rank_residual_ratio(x)[b], expected, rtol=1e-5)


def test_ratio_is_zero_exactly_for_rank_one_and_for_zero_input():
  row = np.array([1.0, -2.0, 0.5], np.float32)
  assert float(rank_residual_ratio(np.tile(row, (5, 1)))) == 0.0
  assert float(rank_residual_ratio(np.zeros((4, 3)))) == 0.0
  # Centred tokens have no mean to remove: the ratio is 1.
  x = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
  np.testing.assert_allclose(rank_residual_ratio(x - x.mean(0)), 1.0, rtol=1e-5)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.01, 100.0))
def test_ratio_is_invariant_to_scale_and_token_order(seed, scale):
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((7, 5)).astype(np.float32)
  perm = rng.permutation(7)
  base = float(rank_residual_ratio(x))
  np.testing.assert_allclose(float(rank_residual_ratio(scale * x)), base, rtol=1e-4)
  np.testing.assert_allclose(float(rank_residual_ratio(x[perm])), base, rtol=1e-4)


def test_token_cosines_are_every_unordered_pair():
  x = np.random.default_rng(2).standard_normal((2, 5, 3)).astype(np.float32)
  values = np.asarray(token_cosine_values(x))
  assert values.shape == (2, 10)
  for b in range(2):
    expected = [x[b, i] @ x[b, j] / (np.linalg.norm(x[b, i]) * np.linalg.norm(x[b, j]))
                for i in range(5) for j in range(i + 1, 5)]
    np.testing.assert_allclose(values[b], expected, rtol=1e-5, atol=1e-6)
  same = np.tile(np.array([[3.0, 4.0]]), (4, 1))
  np.testing.assert_allclose(token_cosine_values(same), np.ones(6), rtol=1e-6)


def test_attention_entropy_per_head_matches_loops():
  rng = np.random.default_rng(3)
  logits = rng.standard_normal((2, 3, 4, 5))
  p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  p[0, 0, 1] = [1, 0, 0, 0, 0]  # a one-hot row: entropy 0, no NaN from 0 log 0
  out = np.asarray(attention_entropy(p))
  assert out.shape == (2, 3)
  for b in range(2):
    for h in range(3):
      rows = [-sum(q * math.log(q) for q in p[b, h, t] if q > 0) for t in range(4)]
      np.testing.assert_allclose(out[b, h], sum(rows) / 4, rtol=1e-5)
  uniform = np.full((1, 1, 3, 8), 1 / 8)
  np.testing.assert_allclose(attention_entropy(uniform), [[math.log(8)]], rtol=1e-6)


@pytest.mark.parametrize("fn,arg", [(rank_residual_ratio, np.ones(3)),
                                    (token_cosine_values, np.ones(3)),
                                    (attention_entropy, np.ones((3, 3)))])
def test_too_few_axes_raise(fn, arg):
  with pytest.raises(ValueError, match="must have shape"):
    fn(arg)
