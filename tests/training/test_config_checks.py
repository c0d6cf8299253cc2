"""Bad configs are rejected before anything compiles, naming the field."""

import dataclasses
import logging

import pytest

from vit_spectral.configs import digits_vit
from vit_spectral.training import config_checks
from vit_spectral.data import DatasetNotPreparedError
from vit_spectral.training import trainer
from vit_spectral.sections.run import training_settings


def test_the_default_config_is_valid():
  config_checks.validate_config(digits_vit.get_config())


@pytest.mark.parametrize("change,match", [
    (lambda c: setattr(c.model, "patch_size", 3), "model.patch_size=3 does not divide the image size 8x8$"),
    (lambda c: setattr(c.model, "depth", -2), "model.depth=-2 must be positive"),
    (lambda c: setattr(c.model, "num_heads", 5), "model.hidden_size=64 is not divisible by model.num_heads=5"),
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
    (lambda c: setattr(c.input, "batch_size", 100), "input.batch_size=100 must be a multiple of 8 .*nearest valid sizes are 96 or 104$"),
    (lambda c: setattr(c.input, "train_augment", "autoaugment"), "input.train_augment='autoaugment'"),
    (lambda c: setattr(c, "num_epochs", 3), "exactly one of config.total_steps and config.num_epochs"),
    # optim
    (lambda c: setattr(c.optim, "weight_decay", -0.1), r"optim.weight_decay=-0.1 must be in \[0, inf\)"),
    (lambda c: setattr(c.optim, "base_batch_size", 0), "optim.base_batch_size=0 must be positive"),
    (lambda c: setattr(c.optim, "warmup_epochs", 2.0), "exactly one of optim.warmup_steps=100 and optim.warmup_epochs=2.0"),
    (lambda c: setattr(c.optim, "b2", 1.0), r"optim.b2=1.0 must be in \[0, 1\)"),
    (lambda c: setattr(c.optim, "grad_clip_norm", 0.0), "optim.grad_clip_norm=0.0"),
    (lambda c: setattr(c, "total_steps", 100), "optim.warmup_steps=100 plus optim.cooldown_steps=0 must be smaller than config.total_steps=100"),
    (lambda c: c.optim.update(beta1=0.9), r"config.optim has unknown fields \['beta1'\]"),
    # mixup
    (lambda c: setattr(c.mixup, "mixup_alpha", -0.8), "mixup.mixup_alpha=-0.8"),
    (lambda c: setattr(c.mixup, "switch_prob", 1.5), r"mixup.switch_prob=1.5 must be in \[0, 1\]"),
    # robustness
    (lambda c: c.robustness.update(dataset="cifar10_corrupted", severities=(0, 1)), r"robustness.severities=\(0, 1\)"),
    (lambda c: c.robustness.update(every=-5), "robustness.every=-5"),
    (lambda c: c.robustness.update(dataset="x", use_ema=True), "robustness.use_ema=True needs config.ema_decay > 0"),
    # mesh
    (lambda c: setattr(c.mesh, "model", 0), "mesh.model=0 must be positive or -1"),
    (lambda c: setattr(c.mesh, "model", -1), "at most one axis may be -1"),
    (lambda c: setattr(c.mesh, "data", 3), "config.mesh=.* needs 3 devices"),
    # trainer fields
    (lambda c: setattr(c, "eval_every_epochs", 1.0), "set only one of config.eval_every=500 and config.eval_every_epochs=1.0"),
    (lambda c: setattr(c, "checkpoint_every", None), "set config.checkpoint_every"),
    (lambda c: setattr(c, "log_every", 0), "config.log_every=0 must be positive"),
    (lambda c: setattr(c, "label_smoothing", 1.0), "config.label_smoothing=1.0"),
    (lambda c: setattr(c, "ema_decay", 1.0), "config.ema_decay=1.0"),
    (lambda c: setattr(c, "keep_checkpoints", 0), "config.keep_checkpoints=0"),
    (lambda c: c.update(total_step=5), r"config has unknown fields \['total_step'\]"),
    (lambda c: setattr(c, "sharding_rules", ()), "config.sharding_rules=\\(\\) must list"),
    (lambda c: c.robustness.update(dataset="x", severities=(1.5,)), r"robustness.severities=\(1.5,\)"),
    (lambda c: delattr(c.input, "batch_size"), "config.input.batch_size is missing"),
    # model, model.block, model.attention
    (lambda c: c.model.update(widht=3), r"config.model has unknown options \['widht'\]"),
    (lambda c: setattr(c.model, "stem", "conv"), "model.stem='conv'"),
    (lambda c: setattr(c.model, "posemb", "rope"), "model.posemb='rope'"),
    (lambda c: setattr(c.model, "kernel_init", "he"), "kernel_init='he'"),
    (lambda c: setattr(c.model, "attention_dropout_rate", -0.1), "model.attention_dropout_rate=-0.1"),
    (lambda c: setattr(c.model, "param_dtype", "int8"), "model.param_dtype='int8'"),
    (lambda c: c.model.block.update(block_order="sandwich"), "model.block.block_order='sandwich'"),
    (lambda c: c.model.block.update(block_order="lipsformer"), "needs model.block.residual_alpha"),
    (lambda c: c.model.block.update(conv_kernel_size=0), "model.block.conv_kernel_size=0"),
    (lambda c: c.model.block.update(num_heads=2), r"model.block has unknown options \['num_heads'\]"),
    (lambda c: c.model.block.update(attention_residual="replace"), "needs an attention variant with its own skip"),
    (lambda c: c.model.attention.update(temperature=2.0), r"model.attention has unknown options \['temperature'\]"),
    (lambda c: c.model.attention.update(value_output="minuss"), "model.attention.value_output='minuss'"),
    (lambda c: c.model.attention.update(value_output="minus", head_dim=8), "needs num_heads\\*head_dim == hidden_size"),
    (lambda c: c.model.attention.update(head_dim=8, full_width_heads=True), "sets both head_dim and full_width_heads"),
    (lambda c: c.model.update(layer_overrides=({"stop": 2, "block": {"nope": 1}},)), r"model.layer_overrides\[0\].block has unknown options"),
    # input (fields that exist today)
    (lambda c: setattr(c.input, "train_fraction", 0.0), "input.train_fraction=0.0"),
    (lambda c: setattr(c.input, "mean", (0.5, 0.5)), r"input.mean=\(0.5, 0.5\) and input.std=\(0.5,\)"),
])
def test_invalid_values_name_the_field(change, match):
  config = digits_vit.get_config()
  change(config)
  with pytest.raises(ValueError, match=match) as raised:
    config_checks.validate_config(config)
  assert "\n" not in str(raised.value)  # one line, as the user reads it


@pytest.mark.parametrize("batch,mesh,devices,processes,match", [
    (100, {}, 16, 1, r"multiple of 16 \(the 16 batch-parallel devices \(mesh.data 16 × "
                     r"mesh.fsdp 1\) .* on 16 devices\); "
                     "the nearest valid sizes are 96 or 112$"),
    (4, {}, 8, 1, "multiple of 8 .*the nearest valid sizes are 8$"),
    (30, {"model": 2}, 8, 1, r"multiple of 4 \(the 4 batch-parallel devices \(mesh.data 4 × "
                            r"mesh.fsdp 1\) of config.mesh=\{'data': -1, 'fsdp': 1, 'model': 2\} on 8 "
                            r"devices\); .*28 or 32$"),
    (30, {"data": -1, "fsdp": 4}, 8, 1, r"multiple of 8 \(the 8 batch-parallel devices "
                                        r"\(mesh.data 2 × mesh.fsdp 4\) .*; .*24 or 32$"),
    # 2 processes of 2 devices each: rows split over the batch axes and the processes.
    (6, {"data": 4, "model": 1}, 4, 2, "multiple of 4 .* and the 2 processes.*4 or 8$"),
])
def test_a_train_batch_that_does_not_split_names_the_nearest_sizes(batch, mesh, devices,
                                                                   processes, match):
  config = digits_vit.get_config()
  config.input.batch_size = batch
  settings = training_settings(config)
  mesh_settings = dataclasses.replace(settings.mesh, **mesh)
  with pytest.raises(ValueError, match=r"^input.batch_size=.*" + match):
    config_checks.check_train_batch(settings.input, mesh_settings, devices, processes)


def test_a_data_axis_that_does_not_span_the_processes_is_refused():
  # 2 processes of 2 devices and a (1, 4) mesh: the batch would be replicated
  # across processes that each hold different rows.
  settings = training_settings(digits_vit.get_config())
  mesh = dataclasses.replace(settings.mesh, data=1, model=4)
  with pytest.raises(ValueError, match=r"^config.mesh=\{'data': 1, 'fsdp': 1, 'model': 4\} puts "
                     r"1 devices on the batch axes \(mesh.data 1 × mesh.fsdp 1\), which must be "
                     "a multiple of the 2 processes"):
    config_checks.check_train_batch(settings.input, mesh, 4, 2)


def test_the_eval_batch_is_rounded_up_to_the_mesh_and_logged(caplog):
  config = digits_vit.get_config()
  config.input.eval_batch_size = 250  # 8 devices: 256
  with caplog.at_level(logging.INFO):
    sections = config_checks.validate_config(config)
  assert sections.input.eval_batch_size == 256
  assert [r.getMessage() for r in caplog.records if "eval_batch_size" in r.getMessage()] == [
      "input.eval_batch_size=250 rounded up to 256, a multiple of the 8 batch-parallel "
      "devices (mesh.data 8 × mesh.fsdp 1) of config.mesh={'data': -1, 'fsdp': 1, "
      "'model': 1} on 8 devices (the padding is "
      "masked: every example counts once)"]
  assert config_checks.validate_config(config, num_devices=2).input.eval_batch_size == 250
  settings = training_settings(config)
  rounded = config_checks.round_eval_batch(settings.input, settings.mesh, 6, 3)
  assert rounded.eval_batch_size == 252  # 6 devices, 2 per process


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
