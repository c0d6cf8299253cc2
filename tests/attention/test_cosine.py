"""Scaled cosine attention (eq. 6) against a direct computation; Theorem 1; Kim et al."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.analysis import empirical_lipschitz, multihead_scsa_lipschitz_bound
from vit_spectral.attention import get_attention

N, D, H = 5, 8, 2


def direct_scsa(x, params, *, tau, nu, eps, normalize_value, scale_heads):
  """Explicit per-head loops over tokens, in float64."""
  x = np.asarray(x, np.float64)
  out = np.zeros_like(x)
  kq, kk, kv = (np.asarray(params[n]["kernel"], np.float64) for n in ("query", "key", "value"))
  bq, bk, bv = (np.asarray(params[n]["bias"], np.float64) for n in ("query", "key", "value"))
  wo, bo = np.asarray(params["out"]["kernel"], np.float64), np.asarray(params["out"]["bias"])
  heads = kq.shape[1]
  for b in range(x.shape[0]):
    concat = []
    for h in range(heads):
      unit = lambda v: v / np.sqrt(v @ v + eps)
      q = [unit(x[b, i] @ kq[:, h] + bq[h]) for i in range(x.shape[1])]
      k = [unit(x[b, j] @ kk[:, h] + bk[h]) for j in range(x.shape[1])]
      v = [x[b, j] @ kv[:, h] + bv[h] for j in range(x.shape[1])]
      v = [unit(vj) for vj in v] if normalize_value else v
      rows = []
      for i in range(x.shape[1]):
        logits = np.array([tau * q[i] @ k[j] for j in range(x.shape[1])])
        p = np.exp(logits - logits.max()); p /= p.sum()
        rows.append(nu * sum(p[j] * v[j] for j in range(x.shape[1])))
      concat.append(np.stack(rows))                           # (N, Dh)
    y = np.stack(concat, axis=1) / (heads if scale_heads else 1)  # (N, H, Dh)
    out[b] = np.einsum("thd,hdo->to", y, wo) + bo
  return out


@pytest.mark.parametrize("normalize_value,scale_heads,tau", [(True, True, 12.0), (False, False, 10.0)])
def test_cosine_attention_matches_direct_computation(normalize_value, scale_heads, tau):
  attn = get_attention("cosine")(num_heads=H, tau=tau, nu=1.5, epsilon=1e-3,
                                 normalize_value=normalize_value, scale_heads=scale_heads)
  x = jax.random.normal(jax.random.key(0), (2, N, D))
  params = attn.init(jax.random.key(1), x)["params"]
  params = jax.tree_util.tree_map(lambda a: a + 0.05, params)  # non-zero biases
  (y, state), inter = attn.apply({"params": params}, x, mutable=["intermediates"])
  assert state is None
  expected = direct_scsa(x, params, tau=tau, nu=1.5, eps=1e-3,
                         normalize_value=normalize_value, scale_heads=scale_heads)
  np.testing.assert_allclose(y, expected, rtol=2e-4, atol=2e-5)
  weights = inter["intermediates"]["attention_weights"][0]
  assert weights.shape == (2, H, N, N)
  np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)


def test_learnable_tau_and_nu_are_parameters_that_act():
  attn = get_attention("cosine")(num_heads=H, learnable_tau=True, learnable_nu=True, tau=12.0)
  x = jax.random.normal(jax.random.key(0), (1, N, D))
  params = attn.init(jax.random.key(1), x)["params"]
  assert float(params["tau"]) == 12.0 and float(params["nu"]) == 1.0
  y1, _ = attn.apply({"params": params}, x)
  y2, _ = attn.apply({"params": dict(params, nu=jnp.asarray(2.0))}, x)
  bias = params["out"]["bias"]
  np.testing.assert_allclose(y2 - bias, 2 * (y1 - bias), rtol=1e-5, atol=1e-6)
  fixed = get_attention("cosine")(num_heads=H).init(jax.random.key(1), x)["params"]
  assert "tau" not in fixed and "nu" not in fixed


def test_non_positive_epsilon_is_rejected():
  attn = get_attention("cosine")(num_heads=H, epsilon=0.0)
  with pytest.raises(ValueError, match="epsilon"):
    attn.init(jax.random.key(0), jnp.zeros((1, N, D)))


@pytest.mark.parametrize("eps,scale", [(1.0, 1.0), (1e-2, 0.05), (1e-6, 0.01), (1e-6, 10.0)])
def test_cosine_attention_stays_below_theorem_1(eps, scale):
  attn = get_attention("cosine")(num_heads=H, tau=12.0, epsilon=eps, qkv_bias=False)
  x = scale * jax.random.normal(jax.random.key(int(1 / eps) % 97), (1, N, D))
  params = attn.init(jax.random.key(2), x)["params"]
  f = lambda z: attn.apply({"params": params}, z[None])[0][0]
  # 2-norm: power-iteration estimate; ∞-norm: the exact local Jacobian's row sums.
  bound_2 = multihead_scsa_lipschitz_bound(params, N, tau=12.0, epsilon=eps)
  assert 0 < empirical_lipschitz(f, x[0]) <= bound_2
  jac = np.asarray(jax.jacfwd(f)(x[0])).reshape(N * D, N * D)
  bound_inf = multihead_scsa_lipschitz_bound(params, N, tau=12.0, epsilon=eps, norm="inf")
  assert np.abs(jac).sum(axis=1).max() <= bound_inf


SCALES = (10.0, 100.0, 1000.0)


def kim_family(c):
  """Tokens c·a_i·e1: the key kernel kills e1, so every logit is 0 for every c."""
  a = jnp.linspace(0.5, 1.5, N)
  return c * a[:, None] * jnp.eye(D)[0][None, :]


def test_dot_product_attention_is_not_lipschitz_but_cosine_is():
  """Kim et al. (2021): along inputs whose norm grows with equal logits, the local
  Lipschitz constant of dot-product attention grows (∝ c²) without bound."""
  estimates = {}
  for name in ("dot_product", "cosine"):
    attn = get_attention(name)(num_heads=1, qkv_bias=False)
    params = jax.jit(attn.init)(jax.random.key(3), kim_family(1.0)[None])["params"]
    params["key"]["kernel"] = params["key"]["kernel"].at[0].set(0.0)   # W^K e1 = 0
    # Compiled once per attention, for every scale c.
    maps = jax.jit(lambda z: attn.apply({"params": params}, z[None], mutable=["intermediates"]))
    f = jax.jit(lambda z: attn.apply({"params": params}, z[None])[0][0])
    for c in SCALES:
      x = kim_family(c)
      _, inter = maps(x)
      np.testing.assert_allclose(inter["intermediates"]["attention_weights"][0], 1.0 / N, rtol=1e-5)
      estimates[name, c] = empirical_lipschitz(f, x)
    if name == "cosine":
      bound = multihead_scsa_lipschitz_bound(params, N)
      assert max(estimates[name, c] for c in SCALES) <= bound
  dot = [estimates["dot_product", c] for c in SCALES]
  assert dot[1] > 50 * dot[0] and dot[2] > 50 * dot[1]          # ~c² growth
  assert estimates["cosine", SCALES[-1]] < estimates["cosine", SCALES[0]]  # bounded
