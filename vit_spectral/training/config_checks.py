"""Rejects invalid configs before anything is compiled, naming the field.

Each section is checked by building its typed settings (their `__post_init__`
holds the checks); what needs two sections is checked here; the model is
checked by `jax.eval_shape` of its init on one image, which traces every
module (patch size vs. image size, heads vs. width, block and attention
options raise there, naming the field) without compiling anything.

Batches against the mesh: the train batch must split evenly over the
batch-parallel devices (mesh.data × mesh.fsdp) and the processes (the error
names the nearest valid sizes); the eval batch is rounded up to do so
(`round_eval_batch`), which the trainer uses through `validate_config`'s result.

`check_config` converts the config once and makes every check that needs no
device (the command line's `--print_config`, before any JAX backend starts);
`check_on_devices` makes the rest on its typed result; `validate_config` is
the two in one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from absl import logging

from vit_spectral import settings as settings_lib
from vit_spectral.sections.input import InputSettings
from vit_spectral.sections.optim import check_schedule_length
from vit_spectral.sections.run import TrainingSettings, training_settings
from vit_spectral.sections.mesh import MeshSettings


def validate_model(model: Any, image_size: int, channels: int = 3) -> None:
  """Checks the converted `config.model` (`TrainingSettings.model`, a
  `models.build.ModelSpec`) on an image_size² input with `channels` channels
  (an abstract init: what depends on the input, e.g. the patch size dividing
  the image)."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  model = model.build(num_classes=1)
  image = jax.ShapeDtypeStruct((1, image_size, image_size, channels), jnp.float32)
  try:
    jax.eval_shape(lambda x: model.init(jax.random.key(0), x, train=False), image)
  except ValueError as e:
    # The module's one-line message, without the note JAX appends under tracing.
    raise ValueError(str(e).splitlines()[0]) from e


def batch_unit(mesh: MeshSettings, num_devices: int, process_count: int) -> int:
  """What every global batch must be a multiple of: the batch-parallel size
  of `mesh` on `num_devices` devices (mesh.data × mesh.fsdp), itself a
  multiple of the process count (each process reads batch // process_count
  rows onto its own devices).

  Raises:
    ValueError: the batch axes do not span the processes (each process's
      rows must land on its own devices: a batch replicated across processes
      would silently hold different rows on each).
  """
  unit = mesh.batch_parallel(num_devices)
  settings_lib.require(
      unit % process_count == 0,
      f"config.mesh={mesh.sizes()} puts {unit} devices on the batch axes "
      f"{_batch_axes(mesh, num_devices)}, which must be a multiple of the "
      f"{process_count} processes (each reads its own rows of the batch): give "
      "mesh.data or mesh.fsdp more devices or mesh.model fewer")
  return unit


def _batch_axes(mesh: MeshSettings, num_devices: int) -> str:
  """E.g. "(mesh.data 2 × mesh.fsdp 4)": the batch-parallel axes' sizes."""
  sizes = dict(zip(mesh.sizes(), mesh.shape(num_devices)))
  return f"(mesh.data {sizes['data']} × mesh.fsdp {sizes['fsdp']})"


def _unit_reason(mesh: MeshSettings, num_devices: int, process_count: int) -> str:
  reason = (f"the {mesh.batch_parallel(num_devices)} batch-parallel devices "
            f"{_batch_axes(mesh, num_devices)} of config.mesh={mesh.sizes()} on "
            f"{num_devices} devices")
  return reason + (f" and the {process_count} processes" if process_count > 1 else "")


def check_train_batch(input_config: InputSettings, mesh: MeshSettings,
                      num_devices: int, process_count: int) -> None:
  """Raises ValueError unless input.batch_size splits evenly over
  mesh.data × mesh.fsdp (and the processes), naming the nearest valid sizes."""
  unit = batch_unit(mesh, num_devices, process_count)
  size = input_config.batch_size
  if size % unit:
    below, above = size // unit * unit, (size // unit + 1) * unit
    nearest = f"{below} or {above}" if below else f"{above}"
    raise ValueError(f"input.batch_size={size} must be a multiple of {unit} "
                     f"({_unit_reason(mesh, num_devices, process_count)}); the "
                     f"nearest valid sizes are {nearest}")


def round_eval_batch(input_config: InputSettings, mesh: MeshSettings,
                     num_devices: int, process_count: int) -> InputSettings:
  """`input_config` with eval_batch_size rounded up to a multiple of the
  batch unit (logged). Evaluation pads the last batch and masks the padding,
  so every example still counts once."""
  unit = batch_unit(mesh, num_devices, process_count)
  size = input_config.eval_batch_size
  rounded = -(-size // unit) * unit
  if rounded == size:
    return input_config
  logging.info("input.eval_batch_size=%d rounded up to %d, a multiple of %s "
               "(the padding is masked: every example counts once)", size, rounded,
               _unit_reason(mesh, num_devices, process_count))
  return dataclasses.replace(input_config, eval_batch_size=rounded)


def check_config(config) -> TrainingSettings:
  """The config converted once (`sections.run.training_settings`) and every
  check of a run that needs no device: each section's, the checks across
  sections and the model class's own checks on the input's image size
  (`ModelSpec.check`). Typed settings are returned as they are.

  Raises:
    ValueError: naming the first invalid field.
  """
  if isinstance(config, TrainingSettings):
    return config
  sections = training_settings(config)
  check_across_sections(sections)
  sections.model.check(sections.input.image_size, sections.input.image_size)
  return sections


def check_across_sections(sections: TrainingSettings) -> None:
  """What needs two sections: the schedule against the run's length, EMA
  for the corruption evaluation's EMA parameters, what config.num_seeds > 1
  refuses (`check_num_seeds`)."""
  run, optim = sections.run, sections.optim
  # Durations in epochs are known only with the data set (the schedule checks them).
  if run.total_steps and optim.warmup_epochs is None and optim.cooldown_epochs is None:
    check_schedule_length(optim, run.total_steps)
  settings_lib.require(
      not (sections.robustness.enabled and sections.robustness.use_ema)
      or sections.run.uses_ema,
      "robustness.use_ema=True needs config.ema_decay > 0")
  check_num_seeds(sections)


def check_num_seeds(sections: TrainingSettings) -> None:
  """What config.num_seeds > 1 cannot combine with yet, one line each."""
  k = sections.run.num_seeds
  if k == 1:
    return
  refused = (
      (f"diagnostics.every={sections.diagnostics.every}", sections.diagnostics.enabled,
       "set --config.diagnostics.every=None, or run each seed on its own"),
      (f"init_from.path={sections.init_from.path!r}", sections.init_from.enabled,
       "fine-tune each seed in a run of its own (config.num_seeds=1)"),
      ("config.on_nonfinite='rollback'", sections.run.on_nonfinite == "rollback",
       "use 'stop' (one seed's rollback would skip every seed's batches), or run "
       "each seed on its own"),
  )
  for field, present, remedy in refused:
    settings_lib.require(not present, f"config.num_seeds={k} cannot be combined with "
                         f"{field} yet: {remedy}")


def validate_config(config, num_devices: int | None = None) -> TrainingSettings:
  """`check_config`, then `check_on_devices`: raises ValueError naming the
  first invalid field of a training config (or its typed settings)."""
  return check_on_devices(check_config(config), num_devices)


def check_on_devices(sections: TrainingSettings,
                     num_devices: int | None = None) -> TrainingSettings:
  """The checks that need the devices, on settings `check_config` made: the
  batch against the mesh and the model's abstract init. Returns the settings
  with the eval batch rounded up to fit the mesh (`round_eval_batch`).

  Args:
    sections: the config's typed settings (`check_config`).
    num_devices: devices the mesh spans (default: all, `jax.device_count()`).
  """
  import jax  # pylint: disable=import-outside-toplevel
  num_devices = jax.device_count() if num_devices is None else num_devices
  check_train_batch(sections.input, sections.mesh, num_devices, jax.process_count())
  sections = dataclasses.replace(sections, input=round_eval_batch(
      sections.input, sections.mesh, num_devices, jax.process_count()))
  validate_model(sections.model, sections.input.image_size, len(sections.input.mean))
  return sections
