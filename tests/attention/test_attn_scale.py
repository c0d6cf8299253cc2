"""AttnScale (paper 000, eqs. 7-9): neutral ω, fast vs explicit form, sown Â, all-pass."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.analysis import hc_dc_ratio
from vit_spectral.attention import apply_weights, get_attention
from vit_spectral.attention.attn_scale import AttnScaleAttention, all_pass_apply, all_pass_weights
from vit_spectral.models import build_model


def softmax(p):
  e = np.exp(p - p.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def explicit_all_pass(a, omega):
  """Eqs. 7-9 with explicit n×n matrices, head by head."""
  n = a.shape[-1]
  low = np.ones((n, n)) / n
  out = np.empty_like(a)
  for b in range(a.shape[0]):
    for h in range(a.shape[1]):
      out[b, h] = low + (omega[h] + 1.0) * (a[b, h] - low)
  return out


def test_registered_as_a_subclass_of_the_base_attention():
  assert get_attention("attn_scale") is AttnScaleAttention


def test_fast_form_equals_explicit_a_hat_times_v_for_random_omega():
  rng = np.random.default_rng(0)
  a = softmax(rng.standard_normal((2, 3, 7, 7)) * 2)
  v = rng.standard_normal((2, 7, 3, 5))
  omega = rng.standard_normal(3)
  a_hat = explicit_all_pass(a, omega)
  np.testing.assert_allclose(all_pass_weights(jnp.asarray(a), jnp.asarray(omega)), a_hat,
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(a_hat.sum(-1), 1.0, rtol=1e-10)  # still row-stochastic
  expected = np.einsum("bhts,bshd->bthd", a_hat, v)
  np.testing.assert_allclose(all_pass_apply(jnp.asarray(a), jnp.asarray(v), jnp.asarray(omega)),
                             expected, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(apply_weights(all_pass_weights(a, omega), v), expected,
                             rtol=1e-4, atol=1e-5)


def test_module_output_and_sown_map_match_a_direct_computation():
  x = jax.random.normal(jax.random.key(0), (2, 6, 16))
  module = AttnScaleAttention(num_heads=4)
  params = module.init(jax.random.key(1), x)["params"]
  assert params["omega"].shape == (4,) and not np.any(params["omega"])  # ω starts at 0
  omega = np.array([0.5, -0.3, 2.0, 0.0], np.float32)
  params = dict(params, omega=jnp.asarray(omega))
  (y, _), state = jax.jit(lambda p: module.apply({"params": p}, x, mutable=["intermediates"]))(params)

  p = jax.tree_util.tree_map(np.asarray, params)
  xs = np.asarray(x, np.float64)
  proj = lambda name: np.einsum("btd,dhk->bthk", xs, p[name]["kernel"]) + p[name]["bias"]
  q, k, v = proj("query"), proj("key"), proj("value")
  a = softmax(np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(q.shape[-1]))
  a_hat = explicit_all_pass(a, omega)
  heads = np.einsum("bhts,bshk->bthk", a_hat, v)
  expected = np.einsum("bthk,hkd->btd", heads, p["out"]["kernel"]) + p["out"]["bias"]
  np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)
  sown = state["intermediates"]["attention_weights"][0]
  np.testing.assert_allclose(sown, a_hat, rtol=1e-4, atol=1e-5)  # the map is Â, not A


def test_zero_omega_gives_exactly_the_baseline_vit():
  fields = dict(patch_size=2, hidden_size=32, depth=2, num_heads=4, mlp_dim=64)
  baseline = build_model(fields, num_classes=10)
  scaled = build_model(dict(fields, attention=dict(name="attn_scale")), num_classes=10)
  x = jax.random.normal(jax.random.key(1), (2, 8, 8, 1))
  params = jax.jit(baseline.init)(jax.random.key(0), x)["params"]
  params["head"]["kernel"] = jax.random.normal(jax.random.key(2), params["head"]["kernel"].shape)
  with_omega = jax.tree_util.tree_map(lambda a: a, params)
  with_omega["encoder"]["encoderblock"]["attention"]["omega"] = jnp.zeros((2, 4))
  y_base = jax.jit(baseline.apply)({"params": params}, x)
  y_scaled = jax.jit(scaled.apply)({"params": with_omega}, x)
  np.testing.assert_array_equal(y_base, y_scaled)
  # and a non-zero ω does change the model
  with_omega["encoder"]["encoderblock"]["attention"]["omega"] = jnp.ones((2, 4))
  assert not np.allclose(jax.jit(scaled.apply)({"params": with_omega}, x), y_base)


def second_eigenvalue_modulus(a):
  return np.sort(np.abs(np.linalg.eigvals(a)))[-2]


def ratio_after_products(matrix, z, steps):
  """hc_dc_ratio of matrix^t z for t = 1..steps (renormalised: the ratio is scale-free)."""
  ratios = []
  for _ in range(steps):
    z = matrix @ z
    z = z / np.linalg.norm(z)
    ratios.append(float(hc_dc_ratio(z)))
  return np.array(ratios)


@pytest.mark.parametrize("gain", [0.8, 1.25])
def test_attn_scale_breaks_the_low_pass_filter_once_one_plus_omega_times_lambda2_reaches_one(gain):
  # Theorem 1 holds for A; Â's non-DC eigenvalues are (1 + ω)·λ_i(A), so with
  # (1 + ω)|λ₂| = gain ≥ 1 powers of Â keep their high frequencies.
  rng = np.random.default_rng(3)
  a = softmax(rng.standard_normal((8, 8)))  # |λ₂| ≈ 0.77, a single real eigenvalue
  lam2 = second_eigenvalue_modulus(a)
  omega = gain / lam2 - 1.0
  a_hat = np.asarray(all_pass_weights(jnp.asarray(a[None, None]), jnp.asarray([omega])))[0, 0]
  # Spectrum of Â: the DC eigenvalue 1, then (1 + ω) times every other eigenvalue of A.
  moduli = np.sort(np.abs(np.linalg.eigvals(a)))[:-1]
  np.testing.assert_allclose(np.sort(np.abs(np.linalg.eigvals(a_hat))),
                             np.sort(np.append((1 + omega) * moduli, 1.0)), rtol=1e-4)
  z = rng.standard_normal((8, 4))
  plain = ratio_after_products(a, z, 120)
  scaled = ratio_after_products(a_hat, z, 120)
  assert plain[-1] < 1e-5  # Theorem 1: A alone is low-pass
  if gain < 1:
    assert scaled[-1] < 1e-5
  else:
    assert scaled[-1] > 0.1 and scaled[-40:].min() > 0.5 * scaled[-80:-40].min()


def explicit_masked_all_pass(a, omega, allowed):
  """Eq. 9 with A_LP row t uniform over query t's allowed keys, head by head.

  allowed: (B, T, S) bool.
  """
  out = np.empty_like(a)
  for b in range(a.shape[0]):
    low = allowed[b] / allowed[b].sum(-1, keepdims=True)
    for h in range(a.shape[1]):
      out[b, h] = low + (omega[h] + 1.0) * (a[b, h] - low)
  return out


def masked_softmax(logits, allowed):
  return softmax(np.where(allowed[:, None], logits, -1e30))


MASKS = {
    "causal": lambda b, t: np.broadcast_to(np.tril(np.ones((t, t), bool)), (b, t, t)),
    "padding": lambda b, t: np.broadcast_to((np.arange(t) < np.array([t, t - 3])[:, None])[:, None],
                                            (b, t, t)),
}


def as_attention_mask(name, allowed):
  """The contract's layout: causal (1, 1, T, T), padding (B, 1, 1, T)."""
  if name == "causal":
    return jnp.asarray(allowed[:1, None])
  return jnp.asarray(allowed[:, None, :1])


@pytest.mark.parametrize("name", sorted(MASKS))
def test_masked_fast_form_equals_explicit_a_hat_times_v(name):
  rng = np.random.default_rng(4)
  allowed = MASKS[name](2, 7)
  a = masked_softmax(rng.standard_normal((2, 3, 7, 7)) * 2, allowed)
  v = rng.standard_normal((2, 7, 3, 5))
  omega = rng.standard_normal(3)
  mask = as_attention_mask(name, allowed)
  a_hat = explicit_masked_all_pass(a, omega, allowed)
  np.testing.assert_allclose(all_pass_weights(jnp.asarray(a), jnp.asarray(omega), mask), a_hat,
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(a_hat.sum(-1), 1.0, rtol=1e-10)           # rows still sum to one
  np.testing.assert_array_equal(np.where(allowed[:, None], 0.0, a_hat), 0.0)   # masked keys: 0
  np.testing.assert_allclose(
      all_pass_apply(jnp.asarray(a), jnp.asarray(v), jnp.asarray(omega), mask),
      np.einsum("bhts,bshd->bthd", a_hat, v), rtol=1e-4, atol=1e-5)


def test_attn_scale_is_causal_under_a_causal_mask():
  from vit_spectral.attention.masks import causal_mask
  t, cut = 6, 3
  module = AttnScaleAttention(num_heads=2)
  x = jax.random.normal(jax.random.key(0), (1, t, 8))
  params = module.init(jax.random.key(1), x)["params"]
  params = dict(params, omega=jnp.asarray([0.7, -0.4]))               # ω ≠ 0
  future = x.at[:, cut + 1:].set(jax.random.normal(jax.random.key(2), (1, t - cut - 1, 8)))
  apply = lambda z: module.apply({"params": params}, z, mask=causal_mask(t))[0]
  np.testing.assert_allclose(apply(future)[:, :cut + 1], apply(x)[:, :cut + 1],
                             rtol=1e-6, atol=1e-6)
  assert not np.allclose(apply(future)[:, cut + 1:], apply(x)[:, cut + 1:])


def test_attn_scale_ignores_padding_tokens_and_records_the_masked_a_hat():
  from vit_spectral.attention.masks import padding_mask
  t, valid = 6, 4
  module = AttnScaleAttention(num_heads=2)
  x = jax.random.normal(jax.random.key(0), (2, t, 8))
  params = dict(module.init(jax.random.key(1), x)["params"], omega=jnp.asarray([1.5, -0.6]))
  mask = padding_mask(jnp.arange(t)[None].repeat(2, 0) < valid)
  padded = x.at[:, valid:].set(100.0)
  (y, _), state = module.apply({"params": params}, x, mask=mask, mutable=["intermediates"])
  (y_padded, _), _ = module.apply({"params": params}, padded, mask=mask, mutable=["intermediates"])
  np.testing.assert_allclose(y_padded[:, :valid], y[:, :valid], rtol=1e-5, atol=1e-5)
  sown = np.asarray(state["intermediates"]["attention_weights"][0])
  np.testing.assert_array_equal(sown[..., valid:], 0.0)              # Â: no weight on padding
  np.testing.assert_allclose(sown.sum(-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(MASKS))
def test_zero_omega_under_a_mask_is_exactly_dot_product_attention(name):
  x = jax.random.normal(jax.random.key(0), (2, 7, 8))
  mask = as_attention_mask(name, MASKS[name](2, 7))
  scaled = AttnScaleAttention(num_heads=2)
  params = scaled.init(jax.random.key(1), x)["params"]
  plain = get_attention("dot_product")(num_heads=2)
  y, _ = scaled.apply({"params": params}, x, mask=mask)
  y_plain, _ = plain.apply({"params": {k: v for k, v in params.items() if k != "omega"}}, x,
                           mask=mask)
  np.testing.assert_array_equal(y, y_plain)
