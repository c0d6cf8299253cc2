"""The LipsFormer recipes validate and carry Table 6's settings."""

import pytest

from vit_spectral.configs import lipsformer_cifar, lipsformer_digits, lipsformer_imagenet
from vit_spectral.training import config_checks
from vit_spectral.models import build_model


@pytest.mark.parametrize("module,arg,blocks", [
    (lipsformer_cifar, None, 12), (lipsformer_cifar, "dataset=cifar100", 12),
    (lipsformer_imagenet, None, 12), (lipsformer_imagenet, "size=large", 24),
    (lipsformer_digits, None, 12)])
def test_recipes_validate_and_follow_table_6(module, arg, blocks):
  config = module.get_config(arg)
  config_checks.validate_model(config.model, config.input.image_size)
  assert config.optim.warmup_steps == 0 and config.optim.grad_clip_norm is None
  assert config.optim.name == "adamw" and config.optim.b1 == 0.9
  # L = 3 weighted branches per block (conv, attention, MLP; §4.2.1)
  assert config.model.block.residual_alpha == pytest.approx(1 / (3 * blocks))
  assert config.model.block.drop_path_rescale is False                   # App. J
  model = build_model(config.model, num_classes=10)
  assert (model.norm, model.attention, model.kernel_init) == ("center_norm", "cosine", "spectral")
  assert model.attention_kwargs["tau"] == 12.0 and model.depth == blocks


def test_digits_baseline_is_the_plain_vit():
  model = build_model(lipsformer_digits.get_config("baseline=true").model, num_classes=10)
  assert (model.norm, model.attention, model.block_options) == ("layer_norm", "dot_product", None)


def test_unknown_dataset_or_size_is_rejected():
  with pytest.raises(ValueError, match="dataset"):
    lipsformer_cifar.get_config("dataset=mnist")
  with pytest.raises(ValueError, match="size"):
    lipsformer_imagenet.get_config("size=huge")
