"""empirical_lipschitz against exact norms; eq. (19) and Theorem 2 on a built model."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.analysis import (empirical_lipschitz, exp_kappa_bound,
                                   lipsformer_lipschitz_bound, vit_lipschitz_bound)
from vit_spectral.analysis.lipschitz import block_branches, gelu_lipschitz, scsa_lipschitz_bound
from vit_spectral.models import Block, BlockSpec, TokenLayout, build_model, scan_to_loop


def test_empirical_lipschitz_finds_the_spectral_norm_of_a_jacobian():
  a = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
  x = jnp.linspace(-1.0, 1.0, 5)
  linear = empirical_lipschitz(lambda v: a @ v, x, num_iters=200)
  assert abs(linear - np.linalg.norm(a, 2)) < 1e-4 * np.linalg.norm(a, 2)
  # Non-linear: the local constant is ‖diag(1 − tanh²(Ax)) A‖_2 at x.
  jac = (1 - np.tanh(a @ np.asarray(x)) ** 2)[:, None] * a
  local = empirical_lipschitz(lambda v: jnp.tanh(a @ v), x, num_iters=200)
  assert abs(local - np.linalg.norm(jac, 2)) < 1e-4 * np.linalg.norm(jac, 2)


def test_eq19_is_the_product_and_theorem2_holds_at_alpha_one_over_l():
  lips = [0.5, 2.0, 1.0, 3.0]
  alphas = [np.array([0.1, -0.2]), 0.3, np.array([0.05]), 0.25]
  expected = (1 + 0.2 * 0.5) * (1 + 0.3 * 2.0) * (1 + 0.05 * 1.0) * (1 + 0.25 * 3.0)
  assert math.isclose(lipsformer_lipschitz_bound(alphas, lips), expected, rel_tol=1e-12)
  uniform = lipsformer_lipschitz_bound([1 / len(lips)] * len(lips), lips)
  assert uniform <= (1 + max(lips) / len(lips)) ** len(lips) <= exp_kappa_bound(lips)
  with pytest.raises(ValueError, match="alphas"):
    lipsformer_lipschitz_bound([0.1], lips)


def test_theorem_1_formulas():
  w = np.diag([2.0, 1.0])                     # ‖W‖_2 = 2, ‖W‖_∞ = 2
  n, tau, nu, eps = 3, 12.0, 1.5, 0.25
  two = scsa_lipschitz_bound(w, w, w, n, tau=tau, nu=nu, epsilon=eps)
  assert math.isclose(two, (2 * n * (n - 1) * 2 + 2 * (n - 1) * 2) * nu * tau / 0.5
                      + 2 * n * nu / 0.5 * 2)
  inf = scsa_lipschitz_bound(w, w, w, n, tau=tau, nu=nu, epsilon=eps, norm="inf")
  assert math.isclose(inf, (n * n + n) * math.sqrt(2) * nu * tau / 0.5 * 2 + 2 * n * nu / 0.5 * 2)


DEPTH, WIDTH, HEADS = 3, 16, 2
OPTIONS = dict(block_order="lipsformer", conv_block=True, conv_kernel_size=3)
ATTENTION = dict(tau=2.0, epsilon=1.0)


def lipsformer(alpha):
  return build_model(dict(patch_size=2, hidden_size=WIDTH, depth=DEPTH, num_heads=HEADS,
                          mlp_dim=2 * WIDTH, norm="center_norm",
                          attention=dict(name="cosine", **ATTENTION), kernel_init="spectral",
                          block=dict(OPTIONS, residual_alpha=alpha)), num_classes=0)


def test_network_bound_of_a_built_model():
  branches_per_block = 3                                  # conv, attention, MLP
  model = lipsformer(1 / (DEPTH * branches_per_block))
  images = jnp.zeros((1, 4, 4, 1))                        # 2×2 grid + CLS = 5 tokens
  params = model.init(jax.random.key(0), images)["params"]
  report = vit_lipschitz_bound(model, params, num_tokens=5, include_norms=False)
  assert len(report.branches) == DEPTH and all(len(b) == branches_per_block for b in report.branches)
  assert math.isclose(report.network_bound, float(np.prod(report.block_bounds)), rel_tol=1e-9)
  # Spectral init makes the MLP branch exactly Lip(GELU)-Lipschitz (‖W1‖ = ‖W2‖ = 1).
  mlp = [b for b in report.branches[0] if b.name == "mlp"][0]
  assert math.isclose(mlp.lip, gelu_lipschitz(), rel_tol=1e-5)
  # Theorem 2: α = 1/L gives at most exp(κ).
  lips = [b.lip for block in report.branches for b in block]
  assert report.network_bound <= exp_kappa_bound(lips)
  # Norms counted: still the product of the per-block bounds, now larger.
  with_norms = vit_lipschitz_bound(model, params, num_tokens=5)
  assert math.isclose(with_norms.network_bound, float(np.prod(with_norms.block_bounds)), rel_tol=1e-9)
  assert with_norms.network_bound > report.network_bound


def test_block_branches_follow_the_blocks_own_description():
  # The report's branches are BlockSpec.branches: the conv branch has no norm after
  # it (§4.2.1), attention and MLP end in CenterNorm (D/(D−1) at γ = 1).
  model = lipsformer(0.1)
  params = model.init(jax.random.key(0), jnp.zeros((1, 4, 4, 1)))["params"]
  fields = model.block.as_dict()
  assert fields["attention"] == "cosine" and fields["attention_kwargs"] == ATTENTION
  assert fields["norm"] == "center_norm" and fields["residual_alpha"] == 0.1
  block = scan_to_loop(params)["encoder"]["encoderblock_0"]
  branches = block_branches(block, fields, num_tokens=5)
  assert [b.name for b in branches] == [s.name for s in model.block.branches()]
  assert [b.post_norm_lip for b in branches] == pytest.approx([1.0, WIDTH / (WIDTH - 1),
                                                               WIDTH / (WIDTH - 1)])
  conv = branches[0]
  dw = np.asarray(block["conv_dw"]["conv"]["kernel"])
  pw = np.asarray(block["conv_pw"]["conv"]["kernel"]).reshape(WIDTH, WIDTH)
  assert math.isclose(conv.lip, np.abs(dw).sum(axis=(0, 1, 2)).max() * np.linalg.norm(pw, 2),
                      rel_tol=1e-5)


def test_the_blocks_empirical_constant_stays_below_the_bound():
  model = lipsformer(0.5)                                 # a large α: a tighter test
  params = model.init(jax.random.key(0), jnp.zeros((1, 4, 4, 1)))["params"]
  rng = np.random.default_rng(1)                          # move off the init (γ, β, biases)
  params = jax.tree_util.tree_map(lambda a: a + 0.2 * rng.standard_normal(a.shape, np.float32), params)
  blocks = params["encoder"]["encoderblock"]
  block = Block(BlockSpec(num_heads=HEADS, mlp_dim=2 * WIDTH, norm="center_norm",
                          attention="cosine", attention_kwargs=ATTENTION, residual_alpha=0.5,
                          **OPTIONS), TokenLayout((2, 2), 1))

  def stack(x):
    for i in range(DEPTH):
      p = jax.tree_util.tree_map(lambda a: a[i], blocks)
      (x, _), _ = block.apply({"params": p}, (x[None], None), 0.0)
      x = x[0]
    return x

  bound = vit_lipschitz_bound(model, params, num_tokens=5).network_bound
  for seed in range(2):
    x = jax.random.normal(jax.random.key(seed), (5, WIDTH))
    assert 0 < empirical_lipschitz(stack, x, num_iters=30) <= bound


def test_models_without_a_bound_are_refused():
  dot = build_model(dict(patch_size=2, hidden_size=WIDTH, depth=1, num_heads=HEADS,
                         mlp_dim=WIDTH, norm="center_norm"), num_classes=0)
  params = dot.init(jax.random.key(0), jnp.zeros((1, 4, 4, 1)))["params"]
  with pytest.raises(ValueError, match="dot-product attention is not Lipschitz"):
    vit_lipschitz_bound(dot, params, num_tokens=5)
  lips = lipsformer(0.1)
  layer_norm = lips.clone(block=lips.block.replace(norm="layer_norm"))
  params = layer_norm.init(jax.random.key(0), jnp.zeros((1, 4, 4, 1)))["params"]
  with pytest.raises(ValueError, match="LayerNorm is not Lipschitz"):
    vit_lipschitz_bound(layer_norm, params, num_tokens=5)
