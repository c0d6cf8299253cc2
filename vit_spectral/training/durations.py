"""Durations and cadences given in epochs, converted to optimizer steps.

Recipes speak in epochs (DeiT: 300 epochs, 5 warmup epochs; paper 004: 20
warmup and 10 cooldown epochs); the trainer and the schedule count steps. Each
duration may be given either way, never both:

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

from typing import Any

import ml_collections

# (block, steps field, epochs field) for every duration that may be in epochs.
# The total duration is handled by `total_steps` (it is the required one).
CADENCES = (
    ("", "eval_every", "eval_every_epochs"),
    ("", "checkpoint_every", "checkpoint_every_epochs"),
    ("optim", "warmup_steps", "warmup_epochs"),
    ("optim", "cooldown_steps", "cooldown_epochs"),
)


def steps_per_epoch(config, num_train_examples: int) -> int:
  """Optimizer steps in one pass over the (fraction of the) training split."""
  steps = num_train_examples // config.input.batch_size
  if steps < 1:
    raise ValueError(
        f"config.input.batch_size={config.input.batch_size} is larger than the "
        f"{num_train_examples} training examples: an epoch has no step")
  return steps


def total_steps(config, num_train_examples: int) -> int:
  """`config.total_steps`, or `config.num_epochs` converted to steps."""
  if config.get("total_steps"):
    return int(config.total_steps)
  return int(round(config.num_epochs * steps_per_epoch(config, num_train_examples)))


def _block(config, name: str) -> Any:
  return config if not name else config[name]


def _check_one_of(block, prefix: str, steps_field: str, epochs_field: str) -> None:
  if block.get(steps_field) is not None and block.get(epochs_field) is not None:
    raise ValueError(
        f"set only one of config.{prefix}{steps_field}={block[steps_field]} "
        f"and config.{prefix}{epochs_field}={block[epochs_field]}")


def resolve(config, num_train_examples: int) -> ml_collections.ConfigDict:
  """A copy of `config` with every `*_epochs` cadence replaced by its steps.

  Also sets `total_steps` (from `num_epochs` if needed). Configs with no
  epoch fields come back with the same values.

  Raises:
    ValueError: a duration given both ways, or neither way for eval/checkpoint.
  """
  resolved = ml_collections.ConfigDict(config.to_dict())
  per_epoch = None
  resolved.total_steps = total_steps(config, num_train_examples)
  resolved.num_epochs = None
  for block_name, steps_field, epochs_field in CADENCES:
    block = _block(resolved, block_name)
    prefix = f"{block_name}." if block_name else ""
    _check_one_of(block, prefix, steps_field, epochs_field)
    epochs = block.get(epochs_field)
    if epochs is None:
      continue
    if epochs < 0:
      raise ValueError(f"config.{prefix}{epochs_field}={epochs} must be >= 0")
    if per_epoch is None:
      per_epoch = steps_per_epoch(config, num_train_examples)
    steps = int(round(epochs * per_epoch))
    if steps_field in ("eval_every", "checkpoint_every"):
      steps = max(steps, 1)  # a positive fraction of an epoch is >= 1 step
    block[steps_field] = steps
    block[epochs_field] = None
  for field in ("eval_every", "checkpoint_every"):
    if not resolved.get(field):
      raise ValueError(f"set config.{field} (steps) or config.{field}_epochs")
  return resolved
