"""Durations and cadences given in epochs, converted to optimizer steps.

Recipes speak in epochs (DeiT: 300 epochs, 5 warmup epochs; paper 004: 20
warmup and 10 cooldown epochs); the trainer and the schedule count steps. Each
duration may be given either way, never both (the settings classes check it):

  config.total_steps | config.num_epochs
  config.eval_every | config.eval_every_epochs
  config.checkpoint_every | config.checkpoint_every_epochs
  config.optim.warmup_steps | config.optim.warmup_epochs
  config.optim.cooldown_steps | config.optim.cooldown_epochs

One epoch is `num_train_examples // global_batch_size` steps (the examples of
the training split after `input.train_fraction`; with repeated augmentation an
epoch still counts that many examples, as DeiT's RASampler does). Epoch
values may be fractional; the result is rounded to the nearest step.
"""

from __future__ import annotations

import dataclasses

from vit_spectral.training.optim import OptimSettings
from vit_spectral.sections.run import RunSettings

# (section, steps field, epochs field) for every duration that may be in
# epochs; the section is the settings class's SECTION ("config" = top level).
# The run's length (total_steps | num_epochs) is handled by `total_steps`.
CADENCES = (
    ("config", "eval_every", "eval_every_epochs"),
    ("config", "checkpoint_every", "checkpoint_every_epochs"),
    ("optim", "warmup_steps", "warmup_epochs"),
    ("optim", "cooldown_steps", "cooldown_epochs"),
)
# Cadences of at least one step: a positive fraction of an epoch is >= 1 step.
_AT_LEAST_ONE = ("eval_every", "checkpoint_every")


def steps_per_epoch(batch_size: int, num_train_examples: int) -> int:
  """Optimizer steps in one pass over the (fraction of the) training split."""
  steps = num_train_examples // batch_size
  if steps < 1:
    raise ValueError(
        f"config.input.batch_size={batch_size} is larger than the "
        f"{num_train_examples} training examples: an epoch has no step")
  return steps


def total_steps(run: RunSettings, batch_size: int, num_train_examples: int) -> int:
  """`run.total_steps`, or `run.num_epochs` converted to steps."""
  if run.total_steps:
    return run.total_steps
  return int(round(run.num_epochs * steps_per_epoch(batch_size, num_train_examples)))


def resolve(run: RunSettings, optim: OptimSettings, *, batch_size: int,
            num_train_examples: int) -> tuple[RunSettings, OptimSettings]:
  """Copies of `run` and `optim` with every `*_epochs` duration in steps.

  `total_steps` is set (from `num_epochs` if needed) and every epochs field
  is None; settings with no epoch fields come back with the same values.
  """
  sections = {RunSettings.SECTION: run, OptimSettings.SECTION: optim}
  changes = {name: {} for name in sections}
  changes[RunSettings.SECTION] = dict(
      total_steps=total_steps(run, batch_size, num_train_examples), num_epochs=None)
  for section, steps_field, epochs_field in CADENCES:
    epochs = getattr(sections[section], epochs_field)
    if epochs is None:
      continue
    steps = int(round(epochs * steps_per_epoch(batch_size, num_train_examples)))
    if steps_field in _AT_LEAST_ONE:
      steps = max(steps, 1)
    changes[section].update({steps_field: steps, epochs_field: None})
  return (dataclasses.replace(run, **changes[RunSettings.SECTION]),
          dataclasses.replace(optim, **changes[OptimSettings.SECTION]))
