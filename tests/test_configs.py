"""Every shipped recipe (vit_spectral/configs) loads, validates and builds its model."""

import importlib

import jax
import jax.numpy as jnp
import pytest

from vit_spectral.configs import recipe_names
from vit_spectral.training import config_checks
from vit_spectral.models import build_model

# Recipe files are the ones with get_config; the others hold shared pieces.
CONFIGS = recipe_names()


def test_the_spine_recipes_exist():
  assert {"digits_vit", "cifar10_vit", "cifar100_vit", "imagenet_deit"} <= set(CONFIGS)


# Every recipe is an every-recipe run (the `extended` step); the digits ones run by default.
@pytest.mark.parametrize("name", [name if name.startswith("digits") else
                                  pytest.param(name, marks=pytest.mark.extended)
                                  for name in CONFIGS])
def test_config_validates_and_builds(name):
  module = importlib.import_module(f"vit_spectral.configs.{name}")
  config = module.get_config()
  assert module.__doc__ and ("train.py" in module.__doc__ or "launch/" in module.__doc__), \
      "the docstring must carry the launch command"
  config.input.batch_size = max(8, config.input.batch_size // 8 * 8)
  config.input.eval_batch_size = max(8, config.input.eval_batch_size // 8 * 8)
  config_checks.validate_config(config)
  size = config.input.image_size
  model = build_model(config.model, num_classes=10)
  out = jax.eval_shape(lambda x: model.init_with_output(jax.random.key(0), x)[0],
                       jax.ShapeDtypeStruct((2, size, size, 3), jnp.float32))
  assert out.shape == (2, 10)
