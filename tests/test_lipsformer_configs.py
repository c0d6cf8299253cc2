"""The LipsFormer recipes validate and carry Table 6's settings."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.configs import (digits_cswin, digits_swin, imagenet_swin, lipsformer_cifar,
                                  lipsformer_cswin_imagenet, lipsformer_digits,
                                  lipsformer_imagenet)
from vit_spectral.training import config_checks
from vit_spectral.models import BlockSpec, build_model
from vit_spectral.models.build import block_options, model_spec


@pytest.mark.parametrize("module,arg,blocks", [
    (lipsformer_cifar, None, 12), (lipsformer_cifar, "dataset=cifar100", 12),
    (lipsformer_imagenet, None, 12), (lipsformer_imagenet, "size=large", 24),
    (lipsformer_digits, None, 12)])
def test_recipes_validate_and_follow_table_6(module, arg, blocks):
  config = module.get_config(arg)
  config_checks.validate_model(model_spec(config.model), config.input.image_size)
  assert config.optim.warmup_steps == 0 and config.optim.grad_clip_norm is None
  assert config.optim.name == "adamw" and config.optim.b1 == 0.9
  assert config.model.block.drop_path_rescale is False                   # App. J
  model = build_model(config.model, num_classes=10)
  block = model.block
  assert (block.norm, block.attention, block.kernel_init) == ("center_norm", "cosine", "spectral")
  assert block.attention_kwargs["tau"] == 12.0 and model.depth == blocks
  # Table 6: α = 1/L, L the number of residual (transformer) blocks.
  assert config.model.block.residual_alpha == pytest.approx(1 / model.depth)


def test_digits_baseline_is_the_plain_vit():
  model = build_model(lipsformer_digits.get_config("baseline=true").model, num_classes=10)
  assert (model.block.norm, model.block.attention) == ("layer_norm", "dot_product")
  # No `model.block` option moved from the BlockSpec default.
  default = BlockSpec()
  assert all(getattr(model.block, f) == getattr(default, f) for f in block_options())


def test_unknown_dataset_or_size_is_rejected():
  with pytest.raises(ValueError, match="dataset"):
    lipsformer_cifar.get_config("dataset=mnist")
  with pytest.raises(ValueError, match="size"):
    lipsformer_imagenet.get_config("size=huge")


def alpha_leaves(params):
  """Every initial α vector of a parameter tree ("alpha", "alpha1", "alpha_conv", ...)."""
  flat = jax.tree_util.tree_flatten_with_path(params)[0]
  return [leaf for path, leaf in flat if str(getattr(path[-1], "key", "")).startswith("alpha")]


def paper_alpha(model):
  """The initial α the paper / the authors' code give this model, from its depth.

  ViT: Table 6, α = 1/L with L the number of (transformer) blocks. Swin: the
  authors' models/lipsformer_swin.py, 1/sum(depths) on every branch.
  CSwin: the authors' models/cswin.py, ScaleLayer's init_t = 0.2 on every
  branch, Table 3's best (0.1-0.4 ablated on LipsFormer-CSwin-T)."""
  name = type(model).__name__
  if name == "CSwin":
    return 0.2
  return 1.0 / (sum(model.depths) if name == "Swin" else model.depth)


@pytest.mark.parametrize("module,arg", [
    (lipsformer_cifar, None), (lipsformer_imagenet, "size=large"),
    (imagenet_swin, "row=lipsformer_swin_t"), (lipsformer_cswin_imagenet, "size=T"),
    (lipsformer_cswin_imagenet, "size=B")])
def test_initial_alpha_follows_the_paper_and_the_authors_code(module, arg):
  model = build_model(module.get_config(arg).model, num_classes=10)
  assert model.block.residual_alpha == pytest.approx(paper_alpha(model))


@pytest.mark.parametrize("module,arg,image_size", [
    (lipsformer_digits, None, 8), (lipsformer_digits, "conv=false", 8),
    (digits_swin, "model=LipsFormer-Swin-T", 8), (digits_cswin, "model=lipsformer", 8)])
def test_initial_alpha_parameters_of_the_digits_recipes(module, arg, image_size):
  model = build_model(module.get_config(arg).model, num_classes=10)
  params = jax.jit(model.init)(jax.random.key(0), jnp.zeros((1, image_size, image_size, 1)))
  alphas = alpha_leaves(params["params"])
  assert alphas
  for alpha in alphas:
    np.testing.assert_allclose(alpha, paper_alpha(model), rtol=1e-7)
