"""The optimizer and learning-rate schedule, from `config.optim`.

`OptimSettings` is the section's one definition: its fields, defaults and
checks. `make_optimizer`, `learning_rate_schedule` and `peak_learning_rate`
read it (a ConfigDict is converted once on entry).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import jax
import optax
from absl import logging

from vit_spectral import settings as settings_lib
from vit_spectral.models.segments import is_scanned_path

# The section's one definition (JAX-free, for the command line), re-exported.
from vit_spectral.sections.optim import (  # noqa: E402,F401
    BATCH_SCALINGS, DEIT_NO_DECAY, FREEZE_ALL_BUT_HEAD, OPTIMIZERS, OptimSettings,
    check_schedule_length)


def param_path(path) -> str:
  """A pytree key path as "a/b/c" (the form regex rules are written against)."""
  parts = []
  for key in path:
    for attr in ("key", "name", "idx"):
      if hasattr(key, attr):
        parts.append(str(getattr(key, attr)))
        break
  return "/".join(parts)


def weight_decay_mask(params, no_decay_patterns: Sequence[str] = (), *,
                      exempt_vectors_and_biases: bool = True) -> Any:
  """True for leaves that are decayed: no pattern matches the path and (with
  `exempt_vectors_and_biases`, the default) ndim >= 2 and not a bias.

  Scanned encoders stack parameters along a leading depth axis (one stack, or
  one per segment), so "1-D" means one dimension besides that axis: the rule
  looks at the shape of one layer. Biases are exempt by name whatever their
  shape: the query/key/value biases of a DenseGeneral are (heads, head_dim),
  2-D, and DeiT/timm exempt every bias (so are the eigen-reparameterized
  `value_bias`/`out_bias` of paper 003).
  """
  patterns = [re.compile(p) for p in no_decay_patterns]

  def decide(path, leaf):
    name = param_path(path)
    ndim = leaf.ndim - (1 if is_scanned_path(name) else 0)
    is_bias = name.rsplit("/", 1)[-1].endswith("bias")
    if exempt_vectors_and_biases and (ndim < 2 or is_bias):
      return False
    return not any(p.search(name) for p in patterns)

  return jax.tree_util.tree_map_with_path(decide, params)


def freeze_labels(params, freeze_patterns: Sequence[str]) -> Any:
  """"frozen" for the leaves a pattern matches (their path, as `param_path`
  writes it), "trainable" for the others."""
  patterns = [re.compile(p) for p in freeze_patterns]
  return jax.tree_util.tree_map_with_path(
      lambda path, _: "frozen" if any(p.search(param_path(path)) for p in patterns)
      else "trainable", params)


def peak_learning_rate(optim: OptimSettings | Any,
                       batch_size: int | None = None) -> float:
  """`learning_rate`, scaled by batch_size / base_batch_size when that is set
  (linearly or as its square root: `batch_scaling`).

  Raises:
    ValueError: base_batch_size is set but no batch_size is given.
  """
  optim = settings_lib.as_settings(OptimSettings, optim)
  if optim.base_batch_size is None:
    return float(optim.learning_rate)
  if batch_size is None:
    raise ValueError("optim.base_batch_size is set, so make_optimizer needs the "
                     "global batch_size to scale the learning rate")
  ratio = batch_size / optim.base_batch_size
  if optim.batch_scaling == "sqrt":
    ratio = ratio ** 0.5
  return float(optim.learning_rate) * ratio



def learning_rate_schedule(optim: OptimSettings | Any, total_steps: int,
                           batch_size: int | None = None) -> optax.Schedule:
  """Warmup, cosine to a floor, then (optionally) a constant cooldown.

  With P the peak (`peak_learning_rate`), W warmup steps, C cooldown steps,
  I = warmup_init_learning_rate and E = end_learning_rate, step t gets
    t < W:             I + (P - I) t / W
    W <= t < T - C:    E + (P - E) (1 + cos(pi (t - W) / (T - C - W))) / 2
    t >= T - C:        E
  (W = 0: no warmup, the first step trains at P.)

  Raises:
    ValueError: warmup or cooldown still in epochs, or W + C >= T.
  """
  optim = settings_lib.as_settings(OptimSettings, optim)
  for unit in ("warmup", "cooldown"):
    epochs = getattr(optim, f"{unit}_epochs")
    if epochs is not None:
      raise ValueError(
          f"optim.{unit}_epochs={epochs} is in epochs: convert the settings "
          "with vit_spectral.training.durations.resolve first")
  peak = peak_learning_rate(optim, batch_size)
  check_schedule_length(optim, total_steps)
  warmup, cooldown = optim.warmup_steps, optim.cooldown_steps
  decay_steps = total_steps - cooldown
  schedule = optax.warmup_cosine_decay_schedule(
      init_value=optim.warmup_init_learning_rate, peak_value=peak,
      warmup_steps=warmup, decay_steps=decay_steps, end_value=optim.end_learning_rate)
  if cooldown:
    schedule = optax.join_schedules(
        [schedule, optax.constant_schedule(optim.end_learning_rate)], [decay_steps])
  return schedule


def make_optimizer(optim: OptimSettings | Any, total_steps: int, *,
                   batch_size: int | None = None
                   ) -> tuple[optax.GradientTransformation, Callable[[int], Any]]:
  """Returns (optax transformation, learning-rate schedule).

  Args:
    optim: `OptimSettings` (or `config.optim`, converted here).
    total_steps: optimizer steps of the whole run.
    batch_size: the global batch size; needed when base_batch_size is set.
  """
  optim = settings_lib.as_settings(OptimSettings, optim)
  schedule = learning_rate_schedule(optim, total_steps, batch_size)
  if optim.base_batch_size is None:
    logging.info("optim: peak learning rate %.6g", optim.learning_rate)
  else:
    logging.info("optim: peak learning rate %.6g = %.6g scaled %s by batch %d / %d",
                 peak_learning_rate(optim, batch_size), optim.learning_rate,
                 optim.batch_scaling, batch_size, optim.base_batch_size)
  mask = lambda params: weight_decay_mask(
      params, optim.no_decay_patterns,
      exempt_vectors_and_biases=optim.exempt_vectors_and_biases)
  if optim.name == "adamw":
    tx = optax.adamw(schedule, b1=optim.b1, b2=optim.b2, eps=optim.eps,
                     weight_decay=optim.weight_decay, mask=mask)
  else:  # "sgd" (the name is checked by OptimSettings)
    tx = optax.chain(
        optax.add_decayed_weights(optim.weight_decay, mask=mask),
        optax.sgd(schedule, momentum=optim.momentum, nesterov=optim.nesterov))
  if optim.grad_clip_norm is not None:
    tx = optax.chain(optax.clip_by_global_norm(optim.grad_clip_norm), tx)
  if optim.freeze_patterns:
    # The frozen leaves never reach `tx` (no state, no decay, not in the norm).
    tx = optax.multi_transform(
        {"trainable": tx, "frozen": optax.set_to_zero()},
        lambda params: freeze_labels(params, optim.freeze_patterns))
  return tx, schedule
