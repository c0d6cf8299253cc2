"""Rejects invalid configs before anything is compiled, naming the field.

Each section is checked by building its typed settings (their `__post_init__`
holds the checks); what needs two sections is checked here; the model is
checked by `jax.eval_shape` of its init on one image, which traces every
module (patch size vs. image size, heads vs. width, block and attention
options raise there, naming the field) without compiling anything.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vit_spectral import settings as settings_lib
from vit_spectral.models.build import build_model
from vit_spectral.training.optim import check_schedule_length
from vit_spectral.training.run_settings import TrainingSettings, training_settings
from vit_spectral.training.sharding import MeshSettings


def validate_model(model_config, image_size: int, channels: int = 3) -> None:
  """Checks `config.model` on an image_size² input with `channels` channels."""
  model = build_model(model_config, num_classes=1)
  image = jax.ShapeDtypeStruct((1, image_size, image_size, channels), jnp.float32)
  try:
    jax.eval_shape(lambda x: model.init(jax.random.key(0), x, train=False), image)
  except ValueError as e:
    # The module's one-line message, without the note JAX appends under tracing.
    raise ValueError(str(e).splitlines()[0]) from e


def check_batch_sizes(input_config, mesh: MeshSettings) -> None:
  """Batches split evenly over the data-parallel devices and the processes."""
  data_devices = mesh.shape(jax.device_count())[0]
  for key in ("batch_size", "eval_batch_size"):
    value = getattr(input_config, key)
    settings_lib.require(value % data_devices == 0,
                         f"input.{key}={value} must be divisible by the {data_devices} "
                         "data-parallel devices (config.mesh.data)")
    settings_lib.require(value % jax.process_count() == 0,
                         f"input.{key}={value} must be divisible by the "
                         f"{jax.process_count()} processes")


def validate_config(config) -> TrainingSettings:
  """Raises ValueError naming the first invalid field of a training config;
  returns its typed training sections."""
  settings_lib.require("model" in config, "config.model is missing")
  sections = training_settings(config)
  check_batch_sizes(sections.input, sections.mesh)
  run, optim = sections.run, sections.optim
  # Durations in epochs are known only with the data set (the schedule checks them).
  if run.total_steps and optim.warmup_epochs is None and optim.cooldown_epochs is None:
    check_schedule_length(optim, run.total_steps)
  settings_lib.require(
      not (sections.robustness.enabled and sections.robustness.use_ema)
      or sections.run.uses_ema,
      "robustness.use_ema=True needs config.ema_decay > 0")
  validate_model(config.model, sections.input.image_size, len(sections.input.mean))
  return sections
