"""Bad configs are rejected before anything compiles, naming the field."""

import pytest

from configs import digits_vit
from vit_spectral.training import config_checks
from vit_spectral.data import DatasetNotPreparedError
from vit_spectral.training import trainer


def test_the_default_config_is_valid():
  config_checks.validate_config(digits_vit.get_config())


@pytest.mark.parametrize("change,match", [
    (lambda c: setattr(c.model, "patch_size", 3), "model.patch_size=3 does not divide input.image_size=8"),
    (lambda c: setattr(c.model, "depth", -2), "model.depth=-2 must be positive"),
    (lambda c: setattr(c.model, "num_heads", 5), "model.num_heads=5 does not divide"),
    (lambda c: setattr(c.model, "variant", "Huge/16"), "model.variant='Huge/16'"),
    (lambda c: c.model.attention.update(name="flash"), "model.attention.name='flash'.*dot_product"),
    (lambda c: c.model.block.update(no_such_option=1), "model.block has unknown options"),
    (lambda c: setattr(c.model, "norm", "rms"), "model.norm='rms'"),
    (lambda c: setattr(c.model, "pooling", "max"), "model.pooling='max'"),
    (lambda c: setattr(c.model, "encoder_mode", "vmap"), "model.encoder_mode='vmap'"),
    (lambda c: setattr(c.model, "drop_path_rate", 1.5), "model.drop_path_rate=1.5"),
    (lambda c: setattr(c.model, "dtype", "float8"), "model.dtype='float8'"),
    (lambda c: setattr(c.optim, "name", "lion"), "optim.name='lion'"),
    (lambda c: setattr(c.optim, "learning_rate", -1.0), "optim.learning_rate"),
    (lambda c: setattr(c.input, "batch_size", 100), "input.batch_size=100 must be divisible by the 8"),
    (lambda c: setattr(c.input, "train_augment", "autoaugment"), "input.train_augment='autoaugment'"),
    (lambda c: setattr(c, "num_epochs", 3), "exactly one of config.total_steps and config.num_epochs"),
])
def test_invalid_values_name_the_field(change, match):
  config = digits_vit.get_config()
  change(config)
  with pytest.raises(ValueError, match=match):
    config_checks.validate_config(config)


def test_unknown_config_argument_lists_the_valid_ones():
  with pytest.raises(ValueError, match="unknown config argument 'widht'.*width"):
    digits_vit.get_config("widht=32")


def test_an_unprepared_dataset_stops_the_trainer_with_instructions(tmp_path):
  config = digits_vit.get_config()
  config.input.dataset = "cifar10"
  config.input.image_size = 32
  config.input.data_dir = str(tmp_path / "tfds")
  with pytest.raises(DatasetNotPreparedError, match="tfds build cifar10"):
    trainer.train_and_evaluate(config, str(tmp_path / "workdir"))
