"""The optimizer and learning-rate schedule, from `config.optim`.

Fields of `config.optim`:
  name: "adamw" | "sgd" (SGD with momentum).
  learning_rate: peak learning rate (after warmup).
  warmup_steps: linear warmup from 0 to the peak (0 = no warmup).
  end_learning_rate: floor reached by the cosine decay at the last step.
  weight_decay: decoupled weight decay (AdamW) or L2-style decay added to the
    gradient (SGD); never applied to parameters with ndim <= 1 (biases, norm
    scales, per-channel scales), nor to the ones `no_decay_patterns` matches.
  no_decay_patterns: regexes on the parameter path ("encoder/encoderblock/...")
    exempted from weight decay in addition to the 1-D ones.
  b1, b2, eps: Adam moments; momentum, nesterov: SGD.
  grad_clip_norm: clip the global gradient norm (None = no clipping).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import jax
import optax

from vit_spectral.models.segments import is_scanned_path

OPTIMIZERS = ("adamw", "sgd")


def param_path(path) -> str:
  """A pytree key path as "a/b/c" (the form regex rules are written against)."""
  parts = []
  for key in path:
    for attr in ("key", "name", "idx"):
      if hasattr(key, attr):
        parts.append(str(getattr(key, attr)))
        break
  return "/".join(parts)


def weight_decay_mask(params, no_decay_patterns: Sequence[str] = ()) -> Any:
  """True for leaves that are decayed: ndim >= 2 and no pattern matches the path.

  Scanned encoders stack parameters along a leading depth axis (one stack, or
  one per segment), so "1-D" means one dimension besides that axis: the rule
  looks at the shape of one layer.
  """
  patterns = [re.compile(p) for p in no_decay_patterns]

  def decide(path, leaf):
    name = param_path(path)
    ndim = leaf.ndim - (1 if is_scanned_path(name) else 0)
    return ndim >= 2 and not any(p.search(name) for p in patterns)

  return jax.tree_util.tree_map_with_path(decide, params)


def learning_rate_schedule(optim_config, total_steps: int) -> optax.Schedule:
  """Linear warmup to `learning_rate`, then cosine to `end_learning_rate`."""
  peak = float(optim_config.learning_rate)
  warmup = int(optim_config.get("warmup_steps", 0))
  end = float(optim_config.get("end_learning_rate", 0.0))
  if warmup >= total_steps:
    raise ValueError(f"optim.warmup_steps={warmup} must be smaller than the "
                     f"total number of steps ({total_steps})")
  return optax.warmup_cosine_decay_schedule(
      init_value=0.0, peak_value=peak, warmup_steps=warmup,
      decay_steps=total_steps, end_value=end)


def make_optimizer(optim_config, total_steps: int
                   ) -> tuple[optax.GradientTransformation, Callable[[int], Any]]:
  """Returns (optax transformation, learning-rate schedule)."""
  name = optim_config.name
  schedule = learning_rate_schedule(optim_config, total_steps)
  patterns = tuple(optim_config.get("no_decay_patterns", ()))
  mask = lambda params: weight_decay_mask(params, patterns)
  weight_decay = float(optim_config.get("weight_decay", 0.0))
  if name == "adamw":
    tx = optax.adamw(schedule, b1=optim_config.get("b1", 0.9),
                     b2=optim_config.get("b2", 0.999),
                     eps=optim_config.get("eps", 1e-8),
                     weight_decay=weight_decay, mask=mask)
  elif name == "sgd":
    tx = optax.chain(
        optax.add_decayed_weights(weight_decay, mask=mask),
        optax.sgd(schedule, momentum=optim_config.get("momentum", 0.9),
                  nesterov=optim_config.get("nesterov", False)))
  else:
    raise ValueError(f"optim.name={name!r}; choose one of {list(OPTIMIZERS)}")
  clip = optim_config.get("grad_clip_norm")
  if clip:
    tx = optax.chain(optax.clip_by_global_norm(float(clip)), tx)
  return tx, schedule
