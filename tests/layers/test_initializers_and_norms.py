"""The PyTorch-default and timm initializers and the "none" norm, against their definitions."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.layers.initializers import get_initializer
from vit_spectral.layers.norms import make_norm, LAYER_NORM_EPSILON


@pytest.mark.parametrize("features,axis,fan_in", [(256, -1, 192), ((3, 64), -1, 192),
                                                   (192, (-2, -1), 3 * 64)])
def test_torch_linear_is_uniform_within_one_over_root_fan_in(features, axis, fan_in):
  # nn.Linear: kaiming_uniform_(a=√5) -> bound √(6 / ((1 + 5) fan_in)) = 1/√fan_in,
  # variance bound²/3. Flax's DenseGeneral initialises the flattened (in, out) kernel.
  shape_in = (1, 192) if axis == -1 else (1, 3, 64)
  kernel = np.asarray(nn.DenseGeneral(features, axis=axis,
                                      kernel_init=get_initializer("torch_linear")).init(
      jax.random.key(0), jnp.ones(shape_in))["params"]["kernel"])
  bound = 1 / np.sqrt(fan_in)
  assert np.abs(kernel).max() <= bound
  assert np.abs(kernel).max() > 0.99 * bound
  assert kernel.std() == pytest.approx(bound / np.sqrt(3), rel=0.02)


def test_timm_trunc_normal_has_std_002_and_cuts_at_two():
  kernel = np.asarray(get_initializer("timm_trunc_normal")(jax.random.key(1), (512, 512)))
  # 262,144 draws: the sample std is within 0.5 % of 0.02 (its standard error is 0.14 %).
  assert kernel.std() == pytest.approx(0.02, rel=0.005)
  assert abs(kernel.mean()) < 1e-4
  assert np.abs(kernel).max() <= 2.0
  # A cut at ±2σ (jax's truncated_normal default) would leave nothing beyond 0.04.
  assert np.abs(kernel).max() > 0.08


def test_none_norm_passes_tokens_through_in_its_dtype():
  x = jax.random.normal(jax.random.key(2), (2, 5, 8)) * 3 + 1
  norm = make_norm("none", LAYER_NORM_EPSILON, dtype=jnp.bfloat16)
  variables = norm.init(jax.random.key(0), x)
  assert not variables
  out = norm.apply(variables, x)
  assert out.dtype == jnp.bfloat16
  np.testing.assert_array_equal(np.asarray(out), np.asarray(x.astype(jnp.bfloat16)))
