"""The optimizer and learning-rate schedule, from `config.optim`.

Fields of `config.optim`:
  name: "adamw" | "sgd" (SGD with momentum).
  learning_rate: peak learning rate (after warmup) at `base_batch_size`.
  base_batch_size: None = use `learning_rate` as it is; an int B0 = the DeiT
    rule, peak = learning_rate * batch_size / B0 (DeiT: 5e-4 * batch / 512).
  warmup_steps: linear warmup from `warmup_init_learning_rate` to the peak
    (0 = no warmup, as LipsFormer trains). `warmup_epochs` instead gives it in
    epochs (converted by `vit_spectral.training.durations.resolve`).
  warmup_init_learning_rate: where the warmup starts (timm's warmup_lr; 0).
  end_learning_rate: floor reached by the cosine decay (timm's min_lr).
  cooldown_steps: steps held at the floor after the cosine ends (timm's
    cooldown epochs; `cooldown_epochs` in epochs). Default 0.
  weight_decay: decoupled weight decay (AdamW) or L2-style decay added to the
    gradient (SGD); never applied to parameters with ndim <= 1 (norm scales,
    per-channel scales), to biases (any shape), nor to the ones
    `no_decay_patterns` matches.
  no_decay_patterns: regexes on the parameter path ("encoder/encoderblock/...")
    exempted from weight decay in addition to the 1-D ones. DEIT_NO_DECAY
    adds DeiT's exemptions (position embedding and class token); papers add
    theirs (e.g. 002's attention centres and widths).
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

# DeiT's `no_weight_decay()`: {pos_embed, cls_token}. Ours are (1, T, D) and
# (1, 1, D), so the 1-D rule alone does not exempt them.
DEIT_NO_DECAY = (r"^pos_embedding$", r"^cls$")


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
  """True for leaves that are decayed: ndim >= 2, not a bias, and no pattern
  matches the path.

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
    return ndim >= 2 and not is_bias and not any(p.search(name) for p in patterns)

  return jax.tree_util.tree_map_with_path(decide, params)


def peak_learning_rate(optim_config, batch_size: int | None = None) -> float:
  """`learning_rate`, scaled by batch_size / base_batch_size when that is set.

  Raises:
    ValueError: base_batch_size is set but not positive, or no batch_size.
  """
  peak = float(optim_config.learning_rate)
  base = optim_config.get("base_batch_size")
  if base is None:
    return peak
  if int(base) <= 0:
    raise ValueError(f"optim.base_batch_size={base} must be positive (or None "
                     "for no batch-size scaling)")
  if batch_size is None:
    raise ValueError("optim.base_batch_size is set, so make_optimizer needs the "
                     "global batch_size to scale the learning rate")
  return peak * batch_size / int(base)


def learning_rate_schedule(optim_config, total_steps: int,
                           batch_size: int | None = None) -> optax.Schedule:
  """Warmup, cosine to a floor, then (optionally) a constant cooldown.

  With P the peak (`peak_learning_rate`), W warmup steps, C cooldown steps,
  I = warmup_init_learning_rate and E = end_learning_rate, step t gets
    t < W:             I + (P - I) t / W
    W <= t < T - C:    E + (P - E) (1 + cos(pi (t - W) / (T - C - W))) / 2
    t >= T - C:        E
  (W = 0: no warmup, the first step trains at P.)
  """
  peak = peak_learning_rate(optim_config, batch_size)
  warmup = int(optim_config.get("warmup_steps") or 0)
  cooldown = int(optim_config.get("cooldown_steps", 0) or 0)
  init = float(optim_config.get("warmup_init_learning_rate", 0.0) or 0.0)
  end = float(optim_config.get("end_learning_rate", 0.0))
  if cooldown < 0:
    raise ValueError(f"optim.cooldown_steps={cooldown} must be >= 0")
  if warmup + cooldown >= total_steps:
    raise ValueError(f"optim.warmup_steps={warmup} plus optim.cooldown_steps="
                     f"{cooldown} must be smaller than the total number of "
                     f"steps ({total_steps})")
  decay_steps = total_steps - cooldown
  schedule = optax.warmup_cosine_decay_schedule(
      init_value=init, peak_value=peak, warmup_steps=warmup,
      decay_steps=decay_steps, end_value=end)
  if cooldown:
    schedule = optax.join_schedules(
        [schedule, optax.constant_schedule(end)], [decay_steps])
  return schedule


def make_optimizer(optim_config, total_steps: int, *,
                   batch_size: int | None = None
                   ) -> tuple[optax.GradientTransformation, Callable[[int], Any]]:
  """Returns (optax transformation, learning-rate schedule).

  Args:
    optim_config: `config.optim` (fields in the module docstring).
    total_steps: optimizer steps of the whole run.
    batch_size: the global batch size; needed when base_batch_size is set.
  """
  name = optim_config.name
  for unit in ("warmup", "cooldown"):
    if optim_config.get(f"{unit}_epochs") is not None:
      raise ValueError(
          f"optim.{unit}_epochs={optim_config[f'{unit}_epochs']} is in epochs: "
          "convert the config with vit_spectral.training.durations.resolve first")
  schedule = learning_rate_schedule(optim_config, total_steps, batch_size)
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
