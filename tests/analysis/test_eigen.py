"""Paper 003's theory on fixed matrices: dominating eigenvalues, filtering, rank one."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.analysis import eigen
from vit_spectral.analysis.frequency import hc_dc_ratio
from vit_spectral.attention import value_output as vo
from vit_spectral.models import build_model, per_layer
from vit_spectral.models.segments import star_overrides

N, D = 6, 4


def real_spectrum_attention(rng, n=N):
  """Positive row-stochastic A = S_D⁻¹ S with S symmetric positive: real spectrum."""
  s = np.exp(rng.normal(scale=1.5, size=(n, n)))
  s = (s + s.T) / 2
  return s / s.sum(1, keepdims=True)


def softmax_attention(rng, n=N):
  """A generic attention map (complex spectrum in general)."""
  logits = rng.normal(scale=2.0, size=(n, n))
  e = np.exp(logits - logits.max(1, keepdims=True))
  return e / e.sum(1, keepdims=True)


def reparameterized_h(rng, mode, psi=None):
  """H = W_projᵀ W_Vᵀ of the model's own eigen kernels (one head)."""
  key = vo.THETA if not mode.endswith("_ns") else vo.VECTORS
  psi = rng.uniform(0.2, 1.0, D) if psi is None else psi
  params = {key: jnp.asarray(rng.normal(size=(D, D)), jnp.float32),
            vo.PSI: jnp.asarray(psi, jnp.float32)}
  return eigen.h_matrix(*vo.value_output_kernels(params, mode, num_heads=1))


def iterate(a, h, x, layers):
  """X_l = X_{l−1} + A X_{l−1} Hᵀ (eq. 3), renormalised (ratios are scale-free)."""
  for _ in range(layers):
    x = x + a @ x @ h.T
    x = x / np.linalg.norm(x)
  return x


def test_update_is_the_kronecker_form_of_eq3():
  rng = np.random.default_rng(0)
  a, h, x = softmax_attention(rng), rng.normal(size=(D, D)), rng.normal(size=(N, D))
  vec = lambda m: m.reshape(-1, order="F")  # stacks columns
  np.testing.assert_allclose(vec(x + a @ x @ h.T), (np.eye(N * D) + np.kron(h, a)) @ vec(x))
  dom = eigen.dominating_eigenvalue(h, a)
  top = np.abs(np.linalg.eigvals(np.eye(N * D) + np.kron(h, a))).max()
  np.testing.assert_allclose(abs(dom.value), top, rtol=1e-9)


def test_asymmetry_of_known_matrices():
  np.testing.assert_allclose(eigen.asymmetry(np.array([[1.0, 2.0], [0.0, 1.0]])), np.sqrt(2) / 2)
  sym = np.random.default_rng(0).normal(size=(5, 5))
  np.testing.assert_allclose(eigen.asymmetry(sym + sym.T), 0.0, atol=1e-15)


@pytest.mark.parametrize("seed", range(3))
def test_plus_h_low_pass_filters_and_minus_h_does_not(seed):
  """Corollary 2 + Theorem 3 by iteration, and Theorem 2's limit v_i^A v_j^Hᵀ."""
  rng = np.random.default_rng(seed)
  a = real_spectrum_attention(rng)
  x0 = rng.normal(size=(N, D))
  for mode in ("plus", "minus", "minus_ns"):
    h = reparameterized_h(rng, mode)
    dom = eigen.dominating_eigenvalue(h, a)
    x = iterate(a, h, x0, 3000)
    ratio = float(hc_dc_ratio(jnp.asarray(x)))
    assert dom.low_pass == (mode == "plus"), mode
    if mode == "plus":
      assert ratio < 1e-3
    else:
      lam_a, vec_a = np.linalg.eig(a)
      limit = float(hc_dc_ratio(jnp.asarray(np.outer(vec_a[:, dom.i].real, np.ones(D)))))
      assert limit > 0.05
      np.testing.assert_allclose(ratio, limit, rtol=1e-3)


def test_corollary2_on_generic_attention_maps_with_complex_spectra():
  rng = np.random.default_rng(1)
  for _ in range(40):
    a = softmax_attention(rng)
    assert eigen.dominating_eigenvalue(reparameterized_h(rng, "plus"), a).low_pass
    assert not eigen.dominating_eigenvalue(reparameterized_h(rng, "minus"), a).low_pass
    assert not eigen.dominating_eigenvalue(reparameterized_h(rng, "minus_ns"), a).low_pass


def test_features_become_rank_one():
  """Theorem 2: with a single dominating eigenvalue X_L → c·v_i^A v_j^Hᵀ."""
  rng = np.random.default_rng(3)
  a = real_spectrum_attention(rng)
  h = rng.normal(size=(D, D))
  h = (h + h.T) / 2                     # real spectrum of H as well: no conjugate ties
  dom = eigen.dominating_eigenvalue(h, a)
  assert not dom.tied
  x = iterate(a, h, rng.normal(size=(N, D)), 3000)
  sv = np.linalg.svd(x, compute_uv=False)
  assert sv[1] / sv[0] < 1e-6
  _, vec_a = np.linalg.eig(a)
  _, vec_h = np.linalg.eig(h)
  limit = np.outer(vec_a[:, dom.i].real, vec_h[:, dom.j].real)
  cos = abs(np.sum(limit * x)) / (np.linalg.norm(limit) * np.linalg.norm(x))
  np.testing.assert_allclose(cos, 1.0, atol=1e-6)


def test_theorem4_cases_agree_with_brute_force_on_random_real_spectra():
  rng = np.random.default_rng(0)
  ranges = [(0.01, 3.0), (-1.0, -0.01), (-4.0, -0.01), (-4.0, 3.0), (-1.0, 1.0)]
  for trial in range(2000):
    lo, hi = ranges[trial % len(ranges)]
    lam_h = rng.uniform(lo, hi, rng.integers(1, 6))
    lam_a = np.concatenate([[1.0], rng.uniform(-0.99, 0.99, rng.integers(1, 6))])
    if trial % 2:
      lam_a = np.concatenate([[1.0], rng.uniform(0.01, 0.99, 3)])
    j, i = eigen.theorem4_dominating(lam_h, lam_a)
    h, a = np.sort(lam_h), np.sort(lam_a)
    brute = eigen.dominating_from_spectra(h, a, perron=len(a) - 1)
    np.testing.assert_allclose(abs(1 + h[j] * a[i]), abs(brute.value), rtol=1e-12)


def test_printed_theorem4_mixed_case_misses_the_flip():
  """The counterexample the module docstring gives for the printed case split."""
  h, a = np.array([-1.0, 0.1]), np.array([-0.9, 1.0])
  assert eigen.theorem4_dominating(h, a) == (0, 0)
  assert not eigen.dominating_from_spectra(h, a).low_pass


def test_per_head_spectra_and_the_zero_eigenvalue_tie():
  rng = np.random.default_rng(0)
  heads, dh = 2, 2
  w_v, w_proj = rng.normal(size=(D, heads, dh)), rng.normal(size=(heads, dh, D))
  spectra = eigen.head_h_spectra(w_v, w_proj)
  for head in range(heads):
    direct = np.linalg.eigvals((w_v[:, head] @ w_proj[head]).T)
    np.testing.assert_allclose(np.sort_complex(np.round(spectra[head], 8)),
                               np.sort_complex(np.round(direct, 8)), atol=1e-6)
    assert np.sum(spectra[head] == 0) == D - dh
  # Tiny nonzero eigenvalues: only the exact zeros reach |1 + 0·λ| = 1, tied with
  # every eigenvalue of A, so the case counts as not low-pass (Thm. 3, case 3).
  lam_h = np.array([-0.01, -0.02, 0.0, 0.0])
  dom = eigen.dominating_from_spectra(lam_h, np.array([1.0, 0.5, 0.2]))
  assert dom.tied and not dom.low_pass


def test_bad_attention_map_raises():
  with pytest.raises(ValueError, match="row-stochastic"):
    eigen.dominating_eigenvalue(np.eye(2), np.array([[0.5, 0.6], [0.5, 0.5]]))


def test_counts_and_layer_kernels_of_a_star_model():
  """ViT* : layer 0 reparameterized ("minus"), layer 1 standard; Table-1 counts by hand."""
  model = build_model(dict(patch_size=4, hidden_size=8, depth=2, num_heads=2, mlp_dim=16,
                           layer_overrides=star_overrides(2)), num_classes=3)
  images = jax.random.normal(jax.random.key(0), (3, 8, 8, 1))
  variables = model.init(jax.random.key(1), images)
  _, state = model.apply(variables, images, mutable=["intermediates"])
  maps = [np.asarray(l["attention/attention_weights"]) for l in per_layer(state["intermediates"])]
  kernels = eigen.layer_kernels(model, variables["params"])

  lam0 = np.linalg.eigvals(eigen.h_matrix(*kernels[0]))
  assert np.all(lam0.real < 0) and np.all(lam0.real >= -1 - 1e-6)
  std = variables["params"]["encoder"]["encoderblock_segment1"]["attention"]
  np.testing.assert_array_equal(kernels[1][0], std["value"]["kernel"][0])

  spectra = [np.linalg.eigvals(eigen.h_matrix(*k)) for k in kernels]
  counts = eigen.dominating_counts(spectra, maps)
  by_hand = [eigen.dominating_eigenvalue(eigen.h_matrix(*kernels[l]), maps[l][b].mean(0)).low_pass
             for l in range(2) for b in range(3)]
  assert (counts.low_pass, counts.not_low_pass) == (sum(by_hand), 6 - sum(by_hand))
  assert not any(by_hand[:3])  # the "minus" layer never low-pass filters (Cor. 2)
