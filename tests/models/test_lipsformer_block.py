"""Block orders, weighted residuals and conv branches against explicit compositions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import common
from vit_spectral.training import config_checks
from vit_spectral.attention import get_attention
from vit_spectral.layers import GridConv, MlpBlock, get_norm
from vit_spectral.models import Block

D, HEADS, MLP, GRID = 16, 2, 32, (2, 3)
TOKENS = 1 + GRID[0] * GRID[1]


def make_block(**options):
  fields = dict(num_heads=HEADS, mlp_dim=MLP, grid_size=GRID, num_prefix_tokens=1)
  fields.update(options)
  return Block(**fields)


def reference(block, params, x):
  """The block written out from its submodules, one residual branch at a time."""
  norm = get_norm(block.norm)()
  attn = get_attention(block.attention)(num_heads=HEADS, **dict(block.attention_kwargs or {}))
  branches = []
  if block.conv_block:
    branches += [("_dw", lambda p, y: GridConv(GRID, 1, block.conv_kernel_size, True).apply({"params": p}, y), "conv_dw"),
                 ("_pw", lambda p, y: GridConv(GRID, 1, 1, False).apply({"params": p}, y), "conv_pw")]
  branches += [("1", lambda p, y: attn.apply({"params": p}, y)[0], "attention"),
               ("2", lambda p, y: MlpBlock(MLP).apply({"params": p}, y), "mlp")]
  for suffix, f, name in branches:
    n = lambda y: norm.apply({"params": params[f"norm{suffix}"]}, y)
    alpha = params.get(f"alpha{suffix}", 1.0)
    if block.block_order == "pre_norm":
      x = x + alpha * f(params[name], n(x))
    else:                                       # post-norm and LipsFormer (Table 1)
      x = n(x + alpha * f(params[name], x))
  return x


CASES = {
    "default": dict(),
    "pre_norm_alpha": dict(residual_alpha=0.3),
    "post_norm": dict(block_order="post_norm"),
    "lipsformer": dict(block_order="lipsformer", residual_alpha=0.25, norm="center_norm",
                       attention="cosine", attention_kwargs=dict(tau=12.0),
                       kernel_init="spectral", conv_block=True, conv_kernel_size=3),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_block_matches_its_explicit_composition(case):
  block = make_block(**CASES[case])
  x = jax.random.normal(jax.random.key(0), (2, TOKENS, D))
  params = block.init(jax.random.key(1), (x, None), 0.0)["params"]
  rng = np.random.default_rng(2)
  params = jax.tree_util.tree_map(lambda a: a + 0.1 * rng.standard_normal(a.shape, np.float32), params)
  (y, state), _ = jax.jit(lambda p, x: block.apply({"params": p}, (x, None), 0.0))(params, x)
  assert state is None
  np.testing.assert_allclose(y, reference(block, params, x), rtol=1e-4, atol=1e-5)


def test_default_block_parameters_keep_their_names():
  block = make_block()
  x = jnp.zeros((1, TOKENS, D))
  params = block.init(jax.random.key(1), (x, None), 0.0)["params"]
  assert sorted(params) == ["attention", "mlp", "norm1", "norm2"]
  lips = make_block(**CASES["lipsformer"]).init(jax.random.key(1), (x, None), 0.0)["params"]
  assert sorted(lips) == sorted(["attention", "mlp", "norm1", "norm2", "alpha1", "alpha2",
                                 "conv_dw", "conv_pw", "norm_dw", "norm_pw", "alpha_dw", "alpha_pw"])
  np.testing.assert_array_equal(lips["alpha1"], np.full(D, 0.25, np.float32))


def test_drop_path_drops_the_weighted_branch_per_example():
  block = make_block(block_order="lipsformer", residual_alpha=0.5, norm="center_norm")
  x = jax.random.normal(jax.random.key(0), (64, TOKENS, D))
  params = block.init(jax.random.key(1), (x, None), 0.0)["params"]
  train = make_block(block_order="lipsformer", residual_alpha=0.5, norm="center_norm",
                     deterministic=False)
  (y, _), _ = train.apply({"params": params}, (x, None), 0.999, rngs={"dropout": jax.random.key(5)})
  # With both branches dropped the block is CenterNorm twice: x centred, ×(D/(D−1))².
  centred = (x - x.mean(-1, keepdims=True)) * (D / (D - 1)) ** 2
  dropped = np.all(np.isclose(y, centred, atol=1e-5), axis=(1, 2))
  assert dropped.sum() >= 60


@pytest.mark.parametrize("options,match", [
    (dict(block_order="sandwich"), "block_order"),
    (dict(block_order="lipsformer"), "residual_alpha"),
    (dict(conv_block=True, grid_size=None), "conv_block"),
])
def test_bad_block_options_raise(options, match):
  with pytest.raises(ValueError, match=match):
    make_block(**options).init(jax.random.key(0), (jnp.zeros((1, TOKENS, D)), None), 0.0)


def test_config_checks_reject_a_bad_block_order():
  model = common.model_config(hidden_size=16, depth=2, num_heads=2, mlp_dim=32, patch_size=2,
                              block=dict(block_order="sandwich"))
  with pytest.raises(ValueError, match="model.block.block_order"):
    config_checks.validate_model(model, image_size=8)
  model.block = dict(block_order="lipsformer", residual_alpha=0.1, conv_block=True)
  config_checks.validate_model(model, image_size=8)
