"""CenterNorm (eq. 2), spectral initialization (eq. 5), DropPath (App. J) and the grid convolution."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.analysis import empirical_lipschitz
from vit_spectral.layers import CenterNorm, DropPath, GridConv, get_initializer, get_norm
from vit_spectral.layers.grid_conv import DepthwiseConv
from vit_spectral.layers import spectral_init
from vit_spectral.layers.spectral_init import kernel_matrix

# Compiled once per shape (op-by-op dispatch compiles every primitive on its own).
grid_matrix = jax.jit(spectral_init.depthwise_grid_matrix, static_argnums=1)
operator_norm = jax.jit(spectral_init.depthwise_operator_norm, static_argnums=1)


def test_center_norm_is_eq2_as_an_explicit_matrix():
  d = 6
  rng = np.random.default_rng(0)
  x = rng.standard_normal((3, 4, d)).astype(np.float32)
  norm = get_norm("center_norm")()
  params = {"scale": rng.standard_normal(d).astype(np.float32),
            "bias": rng.standard_normal(d).astype(np.float32)}
  y = norm.apply({"params": params}, x)
  centring = np.eye(d) - np.ones((d, d)) / d                  # I − 11ᵀ/D
  expected = params["scale"] * (d / (d - 1)) * (x @ centring.T) + params["bias"]
  np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
  # No variance division: scaling the centred input scales the output.
  y0 = norm.apply({"params": {"scale": np.ones(d), "bias": np.zeros(d)}}, x)
  y3 = norm.apply({"params": {"scale": np.ones(d), "bias": np.zeros(d)}}, 3 * x)
  np.testing.assert_allclose(y3, 3 * y0, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("d", [2, 16, 64])
def test_center_norm_lipschitz_constant_is_d_over_d_minus_1(d):
  norm = CenterNorm()
  x = jax.random.normal(jax.random.key(d), (5, d))
  params = jax.jit(norm.init)(jax.random.key(0), x)["params"]   # γ = 1, β = 0
  estimate = empirical_lipschitz(jax.jit(lambda z: norm.apply({"params": params}, z)), x)
  assert abs(estimate - d / (d - 1)) < 1e-3


def test_center_norm_rejects_width_one():
  with pytest.raises(ValueError, match="at least 2"):
    CenterNorm().init(jax.random.key(0), jnp.zeros((2, 1)))


@pytest.mark.parametrize("shape", [(32, 64), (64, 32), (8, 4, 16), (3, 3, 4, 8), (7, 7, 1, 16)])
def test_spectral_init_has_unit_largest_singular_value(shape):
  kernel = jax.jit(get_initializer("spectral"), static_argnums=1)(jax.random.key(1), shape)
  assert kernel.shape == shape
  matrix = np.asarray(kernel, np.float64).reshape(-1, shape[-1])
  # the paper's (out, in·k·k) matrix for conv kernels: same singular values
  out_by_in = np.moveaxis(np.asarray(kernel, np.float64), -1, 0).reshape(shape[-1], -1)
  assert abs(np.linalg.svd(matrix, compute_uv=False)[0] - 1) < 1e-5
  assert abs(np.linalg.svd(out_by_in, compute_uv=False)[0] - 1) < 1e-5
  # It is the Xavier-normal draw, rescaled.
  xavier = np.asarray(jax.jit(get_initializer("xavier_normal"), static_argnums=1)(
      jax.random.key(1), shape))
  np.testing.assert_allclose(np.asarray(kernel), xavier / np.linalg.norm(xavier.reshape(-1, shape[-1]), 2),
                             rtol=1e-4, atol=1e-6)


def test_spectral_init_in_a_model_gives_one_lipschitz_layers():
  from vit_spectral.models import build_model
  model = build_model(dict(patch_size=2, hidden_size=16, depth=1, num_heads=2, mlp_dim=32,
                           kernel_init="spectral", encoder_mode="loop",
                           block=dict(conv_block=True, conv_kernel_size=3)), num_classes=0)
  params = jax.jit(model.init)(jax.random.key(0), jnp.zeros((1, 8, 8, 1)))["params"]
  block = params["encoder"]["encoderblock_0"]
  # Dense maps, the 1×1 conv and the non-overlapping patch embedding: the
  # kernel matrix is the operator (the same matrix on every token / patch).
  kernels = [block["mlp"]["fc1"]["kernel"], block["mlp"]["fc2"]["kernel"],
             block["conv_pw"]["conv"]["kernel"], params["embedding"]["kernel"]]
  kernels += [block["attention"][n]["kernel"].reshape(16, -1) for n in ("query", "key", "value")]
  kernels += [block["attention"]["out"]["kernel"].reshape(-1, 16)]
  for k in kernels:
    assert abs(np.linalg.norm(np.asarray(kernel_matrix(k)), 2) - 1) < 1e-5
  # The depth-wise conv: its operator on the 4×4 token grid.
  grid = jax.random.normal(jax.random.key(1), (1, 4, 4, 16))
  dw = jax.jit(lambda g: DepthwiseConv(3).apply({"params": block["conv_dw"]["conv"]}, g))
  assert abs(empirical_lipschitz(dw, grid, num_iters=200) - 1) < 1e-3


@pytest.mark.parametrize("depthwise,size,grid", [(True, 7, (8, 8)), (True, 3, (2, 3)),
                                                 (True, 4, (3, 5)), (False, 1, (3, 4))])
def test_grid_conv_spectral_init_makes_the_operator_one_lipschitz(depthwise, size, grid):
  # The map GridConv computes on the tokens, not its kernel matrix: a 7×7
  # depth-wise kernel of matrix norm 1 is about 1.5-Lipschitz on an 8×8 grid.
  conv = GridConv(grid_size=grid, num_prefix_tokens=1, kernel_size=size, depthwise=depthwise,
                  kernel_init="spectral")
  x = jax.random.normal(jax.random.key(0), (1, 1 + grid[0] * grid[1], 4))
  params = jax.jit(conv.init)(jax.random.key(1), x)["params"]
  apply = jax.jit(lambda z: conv.apply({"params": params}, z))
  assert abs(empirical_lipschitz(apply, x, num_iters=300) - 1) < 1e-3
  jacobian = np.asarray(jax.jit(jax.jacobian(apply))(x)).reshape(x.size, x.size)
  assert abs(np.linalg.norm(jacobian, 2) - 1) < 1e-4          # exactly 1, not below


@pytest.mark.parametrize("size,grid", [(3, (4, 5)), (4, (3, 3)), (7, (2, 6))])
def test_depthwise_grid_matrix_is_the_convolution(size, grid):
  kernel = jax.random.normal(jax.random.key(0), (size, size, 1, 3))
  conv = jax.jit(lambda g: DepthwiseConv(size).apply(
      {"params": {"kernel": kernel, "bias": jnp.zeros(3)}}, g))
  x = jax.random.normal(jax.random.key(1), (1,) + grid + (3,))
  y = np.asarray(conv(x))
  for c in range(3):
    t = np.asarray(grid_matrix(kernel[:, :, 0, c], grid))
    np.testing.assert_allclose(y[0, :, :, c].ravel(), t @ np.asarray(x[0, :, :, c]).ravel(),
                               rtol=1e-5, atol=1e-5)
  jacobian = np.asarray(jax.jit(jax.jacobian(conv))(x)).reshape(x.size, x.size)
  assert abs(float(operator_norm(kernel, grid)) - np.linalg.norm(jacobian, 2)) < 1e-4


def test_spectral_init_refuses_a_full_grid_convolution():
  conv = GridConv(grid_size=(2, 2), kernel_size=3, depthwise=False, kernel_init="spectral")
  with pytest.raises(ValueError, match="kernel_init='spectral'"):
    conv.init(jax.random.key(0), jnp.zeros((1, 4, 3)))


@pytest.mark.parametrize("rescale,scale", [(False, 1.0), (True, 1 / (1 - 0.25))])
def test_drop_path_keeps_or_rescales_the_surviving_branches(rescale, scale):
  x = jax.random.normal(jax.random.key(0), (256, 3, 4))
  y = np.asarray(DropPath(rescale=rescale).apply({}, x, 0.25, False,
                                                 rngs={"dropout": jax.random.key(1)}))
  dropped = np.all(y == 0, axis=(1, 2))
  kept = ~dropped
  assert 0.15 < dropped.mean() < 0.35
  np.testing.assert_allclose(y[kept], scale * np.asarray(x)[kept], rtol=1e-6)
  # Evaluation is the expectation over the mask: P(kept)·(kept branch) = (1 − p)·scale·x.
  np.testing.assert_allclose(DropPath(rescale=rescale).apply({}, x, 0.25, True),
                             (1 - 0.25) * scale * np.asarray(x), rtol=1e-6)


@pytest.mark.parametrize("rescale", [False, True])
def test_drop_path_evaluation_is_the_mean_of_training_with_a_traced_rate(rescale):
  # E_m[train] = eval (paper 001 App. J form and timm's), the rate traced as in a
  # scanned encoder: the mean of many training draws (one key each) against eval.
  layer, n = DropPath(rescale=rescale), 4000
  x = jax.random.normal(jax.random.key(0), (3, 5))
  train = jax.jit(jax.vmap(lambda key, rate: layer.apply({}, x, rate, False,
                                                         rngs={"dropout": key}),
                           in_axes=(0, None)))
  evaluate = jax.jit(lambda rate: layer.apply({}, x, rate, True))
  for rate in (0.3, 0.5):
    samples = np.asarray(train(jax.random.split(jax.random.key(1), n), rate))
    mean, se = samples.mean(0), samples.std(0, ddof=1) / np.sqrt(n)
    assert np.all(np.abs(mean - np.asarray(evaluate(rate))) <= 5 * se + 1e-6)
  # A traced rate of 0 leaves x as it is, in training and at evaluation.
  np.testing.assert_array_equal(evaluate(0.0), x)
  np.testing.assert_array_equal(train(jax.random.split(jax.random.key(2), 2), 0.0)[0], x)


def test_drop_path_scales_bfloat16_in_float32_and_rounds_once():
  x = jax.random.normal(jax.random.key(0), (4, 8)).astype(jnp.bfloat16)
  rate = 0.1                                  # 1 − p = 0.9 is not a bfloat16 number
  y = DropPath(rescale=False).apply({}, x, rate, True)
  assert y.dtype == jnp.bfloat16
  expected = (np.asarray(x, np.float32) * np.float32(1 - rate)).astype(jnp.bfloat16)
  np.testing.assert_array_equal(np.asarray(y), expected)


@pytest.mark.parametrize("depthwise,size", [(True, 3), (False, 1)])
def test_grid_conv_matches_an_explicit_convolution_and_skips_cls(depthwise, size):
  rows, cols, d = 3, 4, 5
  conv = GridConv(grid_size=(rows, cols), num_prefix_tokens=1, kernel_size=size,
                  depthwise=depthwise)
  x = jax.random.normal(jax.random.key(0), (2, 1 + rows * cols, d))
  params = jax.jit(conv.init)(jax.random.key(1), x)["params"]
  params = jax.tree_util.tree_map(lambda a: a + 0.1, params)   # non-zero bias
  y = np.asarray(jax.jit(conv.apply)({"params": params}, x))
  kernel = np.asarray(params["conv"]["kernel"])                  # (k, k, in/g, out)
  bias = np.asarray(params["conv"]["bias"])
  grid = np.asarray(x)[:, 1:].reshape(2, rows, cols, d)
  pad = size // 2
  padded = np.pad(grid, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
  expected = np.zeros_like(grid)
  for r in range(rows):
    for c in range(cols):
      patch = padded[:, r:r + size, c:c + size]                  # (B, k, k, D)
      if depthwise:
        expected[:, r, c] = np.einsum("bijc,ijc->bc", patch, kernel[:, :, 0])
      else:
        expected[:, r, c] = np.einsum("bijc,ijco->bo", patch, kernel)
  expected += bias
  np.testing.assert_allclose(y[:, 1:].reshape(2, rows, cols, d), expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(y[:, 0], 0.0)


def test_grid_conv_rejects_a_wrong_token_count():
  conv = GridConv(grid_size=(2, 2), num_prefix_tokens=1)
  with pytest.raises(ValueError, match="tokens"):
    conv.init(jax.random.key(0), jnp.zeros((1, 4, 3)))


@pytest.mark.parametrize("size", [7, 4])
def test_depthwise_conv_equals_flax_grouped_conv(size):
  from vit_spectral.layers.grid_conv import DepthwiseConv
  import flax.linen as nn
  grid = jax.random.normal(jax.random.key(0), (2, 4, 4, 6))
  ours = DepthwiseConv(size)
  params = jax.tree_util.tree_map(lambda a: a + 0.1,
                                  jax.jit(ours.init)(jax.random.key(1), grid)["params"])
  flax_conv = nn.Conv(6, (size, size), padding="SAME", feature_group_count=6)
  np.testing.assert_allclose(jax.jit(ours.apply)({"params": params}, grid),
                             jax.jit(flax_conv.apply)({"params": params}, grid),
                             rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("size,grid", [(7, (17, 16)), (4, (12, 23))])
def test_power_iteration_norm_agrees_with_the_svd_on_grids_above_the_exact_limit(size, grid):
  # Grids over EXACT_MAX_TOKENS (LipsFormer-Swin's 56² stage) take power
  # iteration; here it is checked against the SVD of every channel's matrix.
  assert grid[0] * grid[1] > spectral_init.EXACT_MAX_TOKENS
  kernel = jax.random.normal(jax.random.key(2), (size, size, 1, 4))
  exact = max(np.linalg.norm(np.asarray(grid_matrix(kernel[:, :, 0, c], grid)), 2)
              for c in range(4))
  found = float(operator_norm(kernel, grid))
  assert found <= exact * (1 + 1e-5) and found == pytest.approx(exact, rel=1e-3)
