"""Block orders, weighted residuals and conv branches against explicit compositions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.configs import common
from vit_spectral.training import config_checks
from vit_spectral.attention import get_attention
from vit_spectral.layers import GridConv, MlpBlock, get_norm
from vit_spectral.models import Block, BlockSpec, TokenLayout, build_model
from vit_spectral.models.build import model_spec

D, HEADS, MLP, GRID = 16, 2, 32, (2, 3)
TOKENS = 1 + GRID[0] * GRID[1]


def make_block(grid_size=GRID, deterministic=True, **options):
  fields = dict(num_heads=HEADS, mlp_dim=MLP)
  fields.update(options)
  return Block(BlockSpec(**fields), TokenLayout(grid_size, 1), deterministic=deterministic)


def reference(block, params, x):
  """The block as paper 001 §4.2.1 draws it, written out from its submodules.

  Conv branch x + α ⊙ PW(DW(x)) with no norm; then attention and MLP, each
  pre-normed (pre_norm) or followed by the norm of the residual sum (post-norm
  and LipsFormer, Table 1).
  """
  spec = block.spec
  norm = get_norm(spec.norm)()
  attn = get_attention(spec.attention)(num_heads=HEADS, **dict(spec.attention_kwargs or {}))
  alpha = lambda suffix: params.get(f"alpha{suffix}", 1.0)
  if spec.conv_block:
    dw = GridConv(GRID, 1, spec.conv_kernel_size, True).apply({"params": params["conv_dw"]}, x)
    x = x + alpha("_conv") * GridConv(GRID, 1, 1, False).apply({"params": params["conv_pw"]}, dw)
  branches = [("1", lambda p, y: attn.apply({"params": p}, y)[0], "attention"),
              ("2", lambda p, y: MlpBlock(MLP).apply({"params": p}, y), "mlp")]
  for suffix, f, name in branches:
    n = lambda y: norm.apply({"params": params[f"norm{suffix}"]}, y)
    if spec.block_order == "pre_norm":
      x = x + alpha(suffix) * f(params[name], n(x))
    else:                                       # post-norm and LipsFormer (Table 1)
      x = n(x + alpha(suffix) * f(params[name], x))
  return x


CASES = {
    "default": dict(),
    "pre_norm_alpha": dict(residual_alpha=0.3),
    "post_norm": dict(block_order="post_norm"),
    "pre_norm_conv": dict(residual_alpha=0.3, conv_block=True, conv_kernel_size=3),
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


def test_lipsformer_block_has_two_center_norms_and_one_conv_branch():
  # §4.2.1: CenterNorm after attention and after the feed-forward branch only;
  # the depth-wise + point-wise convolution is one weighted residual branch.
  x = jnp.zeros((1, TOKENS, D))
  lips = make_block(**CASES["lipsformer"]).init(jax.random.key(1), (x, None), 0.0)["params"]
  assert sorted(lips) == sorted(["conv_dw", "conv_pw", "alpha_conv", "attention", "norm1",
                                 "alpha1", "mlp", "norm2", "alpha2"])
  np.testing.assert_array_equal(lips["alpha1"], np.full(D, 0.25, np.float32))


def test_block_branches_describe_the_built_block():
  fields = CASES["lipsformer"]
  specs = BlockSpec(**fields).branches()
  assert [s.name for s in specs] == ["conv", "attention", "mlp"]
  assert [(s.pre_norm, s.post_norm) for s in specs] == [(False, False), (False, True),
                                                         (False, True)]
  assert BlockSpec(**fields).ends_in_norm() and not BlockSpec().ends_in_norm()
  params = make_block(**fields).init(jax.random.key(1), (jnp.zeros((1, TOKENS, D)), None),
                                     0.0)["params"]
  declared = set()
  for spec in specs:
    declared |= set(spec.modules) | {f"alpha{spec.suffix}"}
    declared |= {f"norm{spec.suffix}"} if spec.pre_norm or spec.post_norm else set()
  assert declared == set(params)
  stream = BlockSpec(attention_residual="none", use_mlp=False).branches()
  assert [(s.name, s.residual, s.pre_norm) for s in stream] == [("attention", False, True)]


@pytest.mark.parametrize("order,final_norm", [("pre_norm", True), ("post_norm", False),
                                              ("lipsformer", False)])
def test_encoder_norm_only_after_a_block_that_does_not_end_in_one(order, final_norm):
  model = build_model(dict(
      patch_size=2, hidden_size=D, depth=2, num_heads=HEADS, mlp_dim=MLP, norm="center_norm",
      block=dict(block_order=order, residual_alpha=0.5),
      # Both applies take the same attention path, so "as is" means bit-equal
      # (without intermediates, "auto" would pick the fused path).
      attention=dict(implementation="explicit")), num_classes=0)
  images = jax.random.normal(jax.random.key(0), (2, 4, 6, 1))
  params = model.init(jax.random.key(1), images)["params"]
  assert ("encoder_norm" in params["encoder"]) == final_norm
  if not final_norm:   # the features are the last block's CenterNorm output, as is
    _, state = model.apply({"params": params}, images, mutable=["intermediates"])
    last = state["intermediates"]["encoder"]["encoderblock"]["block_output"][0][-1]
    features = model.apply({"params": params}, images)
    np.testing.assert_array_equal(features, last[:, 0])


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


@pytest.mark.parametrize("rescale", [False, True])
def test_block_drop_path_rescale_option(rescale):
  # One MLP branch, no attention residual: x <- x + DropPath(α ⊙ MLP(Norm(x))).
  options = dict(attention_residual="none", residual_alpha=0.5, drop_path_rescale=rescale)
  x = jax.random.normal(jax.random.key(0), (32, TOKENS, D))
  params = make_block(**options).init(jax.random.key(1), (x, None), 0.0)["params"]
  apply = lambda block, rate, **kw: block.apply({"params": params}, (x, None), rate, **kw)[0][0]
  stream = apply(make_block(attention_residual="none", use_mlp=False, **{
      k: v for k, v in options.items() if k != "attention_residual"}), 0.0)
  full = apply(make_block(**options), 0.0)
  y = apply(make_block(deterministic=False, **options), 0.5,
            rngs={"dropout": jax.random.key(3)})
  branch = full - stream
  scale = 2.0 if rescale else 1.0                                  # 1/(1 − p), p = 0.5
  kept = np.all(np.isclose(y, stream + scale * branch, atol=1e-5), axis=(1, 2))
  dropped = np.all(np.isclose(y, stream, atol=1e-6), axis=(1, 2))
  assert kept.any() and dropped.any() and np.all(kept | dropped)


@pytest.mark.parametrize("encoder_mode", ["scan", "loop"])
def test_lipsformer_evaluation_is_the_mean_of_training_without_rescaling(encoder_mode):
  # A LipsFormer ViT whose blocks have one weighted branch (attention, then
  # CenterNorm): x <- CN(x + m·α ⊙ SCSA(x)), m ~ Bernoulli(1 − p). CenterNorm is
  # affine, so the model's output is affine in the last block's mask and the
  # evaluation output must be the mean of the training outputs over drop masks
  # (first block: rate 0; second: p = 0.5, a traced rate in scan mode).
  model = lambda: build_model(dict(
      patch_size=2, hidden_size=D, depth=2, num_heads=HEADS, mlp_dim=MLP,
      norm="center_norm", attention=dict(name="cosine", tau=12.0),
      drop_path_rate=0.5, encoder_mode=encoder_mode,
      block=dict(block_order="lipsformer", residual_alpha=0.5, use_mlp=False,
                 drop_path_rescale=False)), num_classes=0)
  images = jax.random.normal(jax.random.key(0), (2, 4, 6, 1))
  variables = model().init(jax.random.key(1), images)
  n = 2000
  train = jax.jit(jax.vmap(lambda key: model().apply(variables, images, train=True,
                                                      rngs={"dropout": key})))
  samples = np.asarray(train(jax.random.split(jax.random.key(2), n)))    # (n, 2, D)
  evaluation = np.asarray(model().apply(variables, images))
  mean, se = samples.mean(0), samples.std(0, ddof=1) / np.sqrt(n)
  assert se.max() > 1e-3                    # the drop masks do move the output
  assert np.all(np.abs(mean - evaluation) <= 5 * se + 1e-5)


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
    config_checks.validate_model(model_spec(model), image_size=8)
  model.block = dict(block_order="lipsformer", residual_alpha=0.1, conv_block=True)
  config_checks.validate_model(model_spec(model), image_size=8)
