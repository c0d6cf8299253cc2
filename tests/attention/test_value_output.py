"""Eigen-reparameterized W_V W_proj (paper 003 §4): spectra, gradients, the module."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from vit_spectral.analysis.eigen import h_matrix
from vit_spectral.attention import get_attention, token_attentions
from vit_spectral.attention import value_output as vo
from vit_spectral.models import build_model

WIDTH, HEADS = 8, 2


def eigen_params(seed: int, psi, symmetric: bool):
  rng = np.random.default_rng(seed)
  basis = rng.normal(size=(WIDTH, WIDTH))
  key = vo.THETA if symmetric else vo.VECTORS
  return {key: jnp.asarray(basis, jnp.float32), vo.PSI: jnp.asarray(psi, jnp.float32)}


def spectrum(params, mode, **kw):
  w_v, w_proj = vo.value_output_kernels(params, mode, HEADS, **kw)
  return np.linalg.eigvals(h_matrix(w_v, w_proj))


psis = st.lists(st.floats(0.05, 1.0), min_size=WIDTH, max_size=WIDTH)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), psi=psis)
def test_symmetric_minus_and_plus_spectra_are_real_in_the_paper_ranges(seed, psi):
  params = eigen_params(seed, psi, symmetric=True)
  minus, plus = spectrum(params, "minus"), spectrum(params, "plus")
  for lam in (minus, plus):
    np.testing.assert_allclose(lam.imag, 0.0, atol=1e-5)
  assert np.all(minus.real >= -1 - 1e-5) and np.all(minus.real < 0)
  assert np.all(plus.real > 0) and np.all(plus.real <= 1 + 1e-5)
  np.testing.assert_allclose(np.sort(minus.real), np.sort(-np.square(psi)), atol=1e-5)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), psi=psis)
def test_non_symmetric_h_has_eigenvalues_minus_psi_squared(seed, psi):
  params = eigen_params(seed, psi, symmetric=False)
  v = np.asarray(params[vo.VECTORS], np.float64)
  if np.linalg.cond(v) > 1e3:  # nearly singular V: eigenvalues too ill-conditioned to compare
    return
  lam = spectrum(params, "minus_ns")
  np.testing.assert_allclose(np.sort(lam.real), np.sort(-np.square(psi)), atol=1e-3)
  np.testing.assert_allclose(lam.imag, 0.0, atol=1e-3)


def test_non_symmetric_h_is_not_symmetric_but_the_qr_one_is():
  psi = np.linspace(0.2, 1.0, WIDTH)
  for mode, symmetric in (("minus_ns", False), ("minus", True)):
    w_v, w_proj = vo.value_output_kernels(eigen_params(0, psi, symmetric), mode, HEADS)
    h = h_matrix(w_v, w_proj)
    assert (np.abs(h - h.T).max() > 1e-2) != symmetric


def test_clip_keeps_eigenvalues_in_minus_one_minus_eps():
  psi = np.array([0.0, 1e-3, 0.5, 1.0, 1.5, 3.0, -2.0, 0.01])
  lam = np.asarray(vo.eigenvalues(jnp.asarray(psi), vo.ValueOutput("minus", clip=True, eps=0.01)))
  np.testing.assert_allclose(lam, np.clip(-psi**2, -1.0, -0.01), rtol=1e-6)
  lam = np.asarray(vo.eigenvalues(jnp.asarray(psi), vo.ValueOutput("plus_ns", clip=True, eps=0.01)))
  np.testing.assert_allclose(lam, np.clip(psi**2, 0.01, 1.0), rtol=1e-6)
  # Without the clip, ψ outside (0, 1] leaves the range: the clip is what bounds it.
  assert np.asarray(vo.eigenvalues(jnp.asarray(psi), "minus")).min() < -1


@pytest.mark.parametrize("mode", ["minus", "plus_ns"])
def test_module_output_equals_direct_computation(mode):
  """Zero query/key kernels make every head's map uniform, so y = 1·mean(X)·W_V W_proj."""
  attn = get_attention("dot_product")(num_heads=HEADS, value_output=mode)
  x = jax.random.normal(jax.random.key(0), (2, 5, WIDTH))
  params = attn.init(jax.random.key(1), x)["params"]
  params = {k: jax.tree_util.tree_map(jnp.zeros_like, v) if k in ("query", "key") else v
            for k, v in params.items()}
  y, _ = attn.apply({"params": params}, x)

  sign = -1.0 if mode.startswith("minus") else 1.0
  lam = sign * np.square(np.asarray(params[vo.PSI], np.float64))
  if mode == "minus":
    q, _ = np.linalg.qr(np.asarray(params[vo.THETA], np.float64))
    m = q @ np.diag(lam) @ q.T
  else:
    v = np.asarray(params[vo.VECTORS], np.float64)
    m = v @ np.diag(lam) @ np.linalg.inv(v)
  expected = np.broadcast_to(np.asarray(x, np.float64).mean(1, keepdims=True) @ m, x.shape)
  np.testing.assert_allclose(np.asarray(y), expected, atol=1e-5)


@pytest.mark.parametrize("mode,basis", [("minus", vo.THETA), ("plus_ns", vo.VECTORS)])
def test_gradients_reach_the_eigenbasis_and_psi(mode, basis):
  attn = get_attention("dot_product")(num_heads=HEADS, value_output=mode)
  x = jax.random.normal(jax.random.key(0), (2, 5, WIDTH))
  params = attn.init(jax.random.key(1), x)["params"]
  target = jax.random.normal(jax.random.key(2), (2, 5, WIDTH))

  def loss(p):
    return jnp.sum((attn.apply({"params": p}, x)[0] - target) ** 2)

  grads = jax.grad(loss)(params)
  for name in (basis, vo.PSI):
    g = grads[name]
    assert np.all(np.isfinite(g)) and np.abs(g).max() > 1e-4, name
    # Directional derivative against a central finite difference.
    d = jax.random.normal(jax.random.key(3), g.shape)
    eps = 1e-3
    shifted = lambda s: loss(dict(params, **{name: params[name] + s * eps * d}))
    fd = (shifted(1.0) - shifted(-1.0)) / (2 * eps)
    np.testing.assert_allclose(float(jnp.vdot(g, d)), float(fd), rtol=2e-2, atol=1e-3)


def test_standard_keeps_dense_parameter_names():
  attn = get_attention("dot_product")(num_heads=HEADS)
  params = attn.init(jax.random.key(1), jnp.zeros((1, 3, WIDTH)))["params"]
  assert sorted(params) == ["key", "out", "query", "value"]
  assert params["value"]["kernel"].shape == (WIDTH, HEADS, WIDTH // HEADS)


@pytest.mark.parametrize("name", token_attentions())
def test_every_registered_variant_gets_the_reparameterization(name):
  model = build_model(dict(patch_size=4, hidden_size=16, depth=1, num_heads=2, mlp_dim=16,
                           attention=dict(name=name, value_output="minus"),
                           encoder_mode="loop"), num_classes=3)
  params = model.init(jax.random.key(0), jnp.zeros((1, 8, 8, 1)))["params"]
  attn = params["encoder"]["encoderblock_0"]["attention"]
  assert {vo.THETA, vo.PSI, "out_bias"} <= set(attn) and not {"value", "out"} & set(attn)


def test_bad_settings_raise_naming_the_field():
  x = jnp.zeros((1, 3, WIDTH))
  with pytest.raises(ValueError, match="value_output='nope'.*minus"):
    get_attention("dot_product")(num_heads=HEADS, value_output="nope").init(jax.random.key(0), x)
  with pytest.raises(ValueError, match="num_heads\\*head_dim"):
    get_attention("dot_product")(num_heads=HEADS, head_dim=3, value_output="minus").init(
        jax.random.key(0), x)
  with pytest.raises(ValueError, match="value_output_eps"):
    vo.ValueOutput("minus", clip=True, eps=0.0)


@pytest.mark.parametrize("options,match", [
    (dict(value_output="x"), r"model.attention.value_output='x'; choose one of \['standard'"),
    (dict(value_output_eps=0.0), r"model.attention.value_output_eps=0.0 must be in \(0"),
    (dict(value_output="minus", value_output_clip=True, value_output_eps=2.0),
     "value_output_eps=2.0"),
    (dict(value_output_clip="yes"), "value_output_clip='yes' must be True or False"),
    (dict(value_output="plus", head_dim=3), r"num_heads\*head_dim == hidden_size"),
])
def test_a_model_with_bad_value_output_settings_fails_at_trace_time(options, match):
  """Every variant checks its settings when traced (eval_shape of init: no compile)."""
  for name in ("dot_product", "gaussian"):
    model = build_model(dict(patch_size=4, hidden_size=8, depth=1, num_heads=2, mlp_dim=8,
                             attention=dict(name=name, **options)), num_classes=3)
    with pytest.raises(ValueError, match=match):
      jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 8, 8, 1)))


def test_settings_from_attention_options():
  options = {"value_output": "plus_ns", "value_output_eps": 0.1, "num_heads": 3}
  assert vo.ValueOutput.from_options(options) == vo.ValueOutput("plus_ns", eps=0.1)
  assert vo.ValueOutput.from_options(None) == vo.ValueOutput()
  assert not vo.ValueOutput().eigen and vo.ValueOutput("minus").symmetric
  assert not vo.ValueOutput("minus_ns").symmetric


# --- The cheaper kernels compute what the plain calls compute (issue 40) ---------

def _theta(size: int, seed: int = 0):
  return jax.random.normal(jax.random.key(seed), (size, size))


@pytest.mark.parametrize("size", [8, 64, 192])
def test_householder_qr_is_jnp_linalg_qr(size):
  """Q (geqrf's reflectors in compact-WY form) against `jnp.linalg.qr`: the same
  Q, column signs included, to float32 rounding; R = triu(Qᵀx) the same R."""
  theta = _theta(size, size)
  q_ref, r_ref = jnp.linalg.qr(theta)
  q, r = jax.jit(vo._householder_qr)(theta)
  np.testing.assert_allclose(np.asarray(q), np.asarray(q_ref), rtol=0, atol=2e-6)
  np.testing.assert_allclose(np.asarray(r), np.asarray(r_ref), rtol=0,
                             atol=2e-6 * float(jnp.abs(r_ref).max()))
  np.testing.assert_allclose(np.asarray(q.T @ q), np.eye(size), rtol=0, atol=5e-6)


def test_householder_qr_where_a_reflector_is_the_identity():
  """τ_j = 0 where the column below the diagonal is already zero (H_j = I)."""
  theta = jnp.triu(_theta(6)) + jnp.diag(jnp.arange(1.0, 7.0))
  theta = theta.at[3:, 2].set(0.0).at[1:, 0].set(0.0)
  np.testing.assert_allclose(np.asarray(vo._householder_qr(theta)[0]),
                             np.asarray(jnp.linalg.qr(theta)[0]), rtol=0, atol=1e-6)


@pytest.mark.parametrize("seed", [1, 2])
def test_orthogonal_factor_gradient_is_jnp_linalg_qr_gradient(seed):
  """The gradient through `orthogonal_factor` against `jnp.linalg.qr`'s own rule,
  to the rounding of Q and R (amplified by R's condition number, ~100 here)."""
  theta = _theta(48, seed)
  weights = jnp.cos(_theta(48, seed + 10))
  grad = jax.jit(jax.grad(lambda t: jnp.sum(vo.orthogonal_factor(t) * weights)))(theta)
  ref = jax.jit(jax.grad(lambda t: jnp.sum(jnp.linalg.qr(t)[0] * weights)))(theta)
  np.testing.assert_allclose(np.asarray(grad), np.asarray(ref), rtol=0,
                             atol=1e-5 * float(jnp.abs(ref).max()))


def test_inverse_and_its_gradient_are_jnp_linalg_inv():
  v = jnp.linalg.qr(_theta(48, 3))[0] + 0.3 * _theta(48, 4) / np.sqrt(48)
  weights = jnp.cos(_theta(48, 5))
  inv = jnp.linalg.inv(v)
  np.testing.assert_allclose(np.asarray(vo._inverse(v)), np.asarray(inv), rtol=0,
                             atol=2e-6 * float(jnp.abs(inv).max()))
  grad = jax.grad(lambda v: jnp.sum(vo._inverse(v) * weights))(v)
  ref = jax.grad(lambda v: jnp.sum(jnp.linalg.inv(v) * weights))(v)
  np.testing.assert_allclose(np.asarray(grad), np.asarray(ref), rtol=0,
                             atol=1e-5 * float(jnp.abs(ref).max()))


@pytest.mark.parametrize("mode", ["minus", "plus_ns"])
@pytest.mark.parametrize("residuals", ["all", "dots"])
def test_one_factorisation_per_layer_in_the_train_step(mode, residuals):
  """One factorisation per layer and step, and two triangular solves: the value
  and output projections share the layer's kernels (not one QR or inverse and
  its backward pass per use), Q is formed without orgqr, the inverse's
  gradient solves nothing, and under the scanned encoder's "dots" residual
  policy the backward loop factorises nothing again (Q, R and V⁻¹ are matmul
  outputs, kept). Counted as LAPACK calls in the gradient compiled for the
  CPU: the scan's forward and backward loop bodies, one layer each."""
  model = build_model(dict(patch_size=4, hidden_size=WIDTH, depth=2, num_heads=HEADS,
                           mlp_dim=16, encoder_mode="scan", encoder_residuals=residuals,
                           attention=dict(name="dot_product", value_output=mode)),
                      num_classes=3)
  images = jax.random.normal(jax.random.key(0), (2, 8, 8, 1))
  params = model.init(jax.random.key(1), images)["params"]
  grad = jax.grad(lambda p: jnp.sum(model.apply({"params": p}, images) ** 2))
  calls = re.findall(r'custom_call_target="lapack_\w(\w+)_ffi"',
                     jax.jit(grad).lower(params).compile().as_text())
  assert calls.count("geqrf") + calls.count("getrf") == 1, calls
  assert calls.count("trsm") == 2 and "orgqr" not in calls, calls
