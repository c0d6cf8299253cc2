"""`config.optim`: its fields, defaults and checks (`OptimSettings`), without JAX.

The optimizer itself is `training.optim`, which re-exports these names; the
command line checks a config with this module before JAX is imported.
"""

from __future__ import annotations

import dataclasses
import re

from vit_spectral import settings as settings_lib

OPTIMIZERS = ("adamw", "sgd")
# How the peak follows batch_size / base_batch_size: linearly (Goyal et al.,
# DeiT), or as its square root (timm train.py's rule for Adam-family and LAMB
# optimizers when --lr-base-scale is unset).
BATCH_SCALINGS = ("linear", "sqrt")

# DeiT's `no_weight_decay()`: {pos_embed, cls_token}. Ours are (1, T, D) and
# (1, 1, D), so the 1-D rule alone does not exempt them.
DEIT_NO_DECAY = (r"^pos_embedding$", r"^cls$")
# Linear probing: every parameter but the classifier head's is frozen.
FREEZE_ALL_BUT_HEAD = (r"^(?!head/)",)


@dataclasses.dataclass(frozen=True)
class OptimSettings:
  """`config.optim`.

  Attributes:
    name: "adamw" | "sgd" (SGD with momentum).
    learning_rate: peak learning rate (after warmup) at `base_batch_size`.
    base_batch_size: None = use `learning_rate` as it is; an int B0 = scale it
      to the global batch B by `batch_scaling`.
    batch_scaling: "linear" = the DeiT rule, peak = learning_rate * B / B0
      (DeiT: 5e-4 * batch / 512); "sqrt" = peak = learning_rate * (B / B0)^½,
      timm's default for AdamW (train.py: lr = lr_base * (B / lr_base_size)^½
      when the optimizer's name holds "ada" or "lamb"). Unused without
      base_batch_size.
    warmup_steps: linear warmup from `warmup_init_learning_rate` to the peak
      (0 = no warmup, as LipsFormer trains).
    warmup_epochs: the warmup in epochs instead (then warmup_steps=None;
      `vit_spectral.training.durations.resolve` converts it).
    warmup_init_learning_rate: where the warmup starts (timm's warmup_lr).
    end_learning_rate: floor reached by the cosine decay (timm's min_lr).
    cooldown_steps: steps held at the floor after the cosine ends (timm's
      cooldown epochs).
    cooldown_epochs: the cooldown in epochs instead (then cooldown_steps=None).
    weight_decay: decoupled weight decay (AdamW) or L2-style decay added to
      the gradient (SGD); not applied to the parameters `no_decay_patterns`
      matches, nor (with `exempt_vectors_and_biases`) to parameters with
      ndim <= 1 (norm scales, per-channel scales) and biases (any shape).
    no_decay_patterns: regexes on the parameter path ("encoder/encoderblock/
      ...") exempted from weight decay, besides the 1-D parameters and
      biases that `exempt_vectors_and_biases` exempts.
      DEIT_NO_DECAY adds DeiT's exemptions (position embedding and class
      token); papers add theirs (e.g. 002's attention centres and widths).
    exempt_vectors_and_biases: True = the DeiT/timm rule above (1-D
      parameters and biases are not decayed); False = decay them too, as
      torch's SGD(weight_decay=...) over all parameters does (paper 002's
      authors' code, `configs/cifar10_quadratic.py`).
    freeze_patterns: regexes on the parameter path whose parameters are
      frozen: their updates are zero, they are not weight-decayed, their
      gradients do not enter grad_clip_norm's global norm and they hold no
      optimizer state (linear probing: every path but the head's,
      `FREEZE_ALL_BUT_HEAD`).
    b1, b2, eps: Adam moments.
    momentum, nesterov: SGD.
    grad_clip_norm: clip the global gradient norm (None = no clipping).
  """

  SECTION = "optim"

  name: str = "adamw"
  learning_rate: float = 1e-3
  base_batch_size: int | None = None
  batch_scaling: str = "linear"
  warmup_steps: int | None = 0
  warmup_epochs: float | None = None
  warmup_init_learning_rate: float = 0.0
  end_learning_rate: float = 0.0
  cooldown_steps: int | None = 0
  cooldown_epochs: float | None = None
  weight_decay: float = 0.05
  no_decay_patterns: tuple[str, ...] = ()
  exempt_vectors_and_biases: bool = True
  freeze_patterns: tuple[str, ...] = ()
  b1: float = 0.9
  b2: float = 0.999
  eps: float = 1e-8
  momentum: float = 0.9
  nesterov: bool = False
  grad_clip_norm: float | None = None

  def __post_init__(self):
    settings_lib.check_choice(self.name, OPTIMIZERS, "optim.name")
    settings_lib.check_choice(self.batch_scaling, BATCH_SCALINGS, "optim.batch_scaling")
    settings_lib.require(self.learning_rate > 0,
                         f"optim.learning_rate={self.learning_rate} must be positive")
    settings_lib.require(
        self.base_batch_size is None or self.base_batch_size > 0,
        f"optim.base_batch_size={self.base_batch_size} must be positive (or None "
        "for no batch-size scaling)")
    for unit in ("warmup", "cooldown"):
      steps, epochs = getattr(self, f"{unit}_steps"), getattr(self, f"{unit}_epochs")
      settings_lib.require(
          (steps is None) != (epochs is None),
          f"set exactly one of optim.{unit}_steps={steps} and "
          f"optim.{unit}_epochs={epochs}")
      for field, value in ((f"{unit}_steps", steps), (f"{unit}_epochs", epochs)):
        if value is not None:
          settings_lib.check_range(value, f"optim.{field}", 0)
    for field in ("warmup_init_learning_rate", "end_learning_rate", "weight_decay"):
      settings_lib.check_range(getattr(self, field), f"optim.{field}", 0)
    for field in ("b1", "b2", "momentum"):
      settings_lib.check_range(getattr(self, field), f"optim.{field}", 0, 1,
                               high_open=True)
    settings_lib.check_range(self.eps, "optim.eps", 0, low_open=True)
    if self.grad_clip_norm is not None:
      settings_lib.check_range(self.grad_clip_norm, "optim.grad_clip_norm", 0,
                               low_open=True)
    for field in ("no_decay_patterns", "freeze_patterns"):
      for pattern in getattr(self, field):
        try:
          re.compile(pattern)
        except re.error as e:
          raise ValueError(f"optim.{field}: {pattern!r} is not a regex ({e})") from None


def check_schedule_length(optim: OptimSettings, total_steps: int) -> None:
  """Warmup plus cooldown (in steps) must leave the cosine at least one step."""
  settings_lib.require(
      optim.warmup_steps + optim.cooldown_steps < total_steps,
      f"optim.warmup_steps={optim.warmup_steps} plus optim.cooldown_steps="
      f"{optim.cooldown_steps} must be smaller than config.total_steps={total_steps}")
