"""Pieces every recipe shares, and the `file.py:key=value,...` argument syntax.

A config file's `get_config(arg)` receives the text after the colon of
`--config=configs/x.py:variant=S/16,depth=24` and reads it with `parse_arg`;
single fields are overridden with `--config.optim.learning_rate=1e-3`.
"""

from __future__ import annotations

from typing import Any

import ml_collections

from vit_spectral import settings
from vit_spectral.data import randaugment as randaugment_lib
from vit_spectral.data.input_settings import InputSettings
from vit_spectral.training.robustness import robustness_config


def _convert(key: str, text: str, default: Any) -> Any:
  if isinstance(default, bool):
    if text.lower() not in ("true", "false", "1", "0"):
      raise ValueError(f"config argument {key}={text!r} must be true or false")
    return text.lower() in ("true", "1")
  if isinstance(default, int):
    return int(text)
  if isinstance(default, float):
    return float(text)
  return text


def parse_arg(arg: str | None, **defaults) -> ml_collections.ConfigDict:
  """"a=1,b=x" -> ConfigDict(a=1, b="x"), typed after `defaults`.

  Every key must be one of `defaults` (an unknown key raises, listing them).
  """
  result = dict(defaults)
  for item in filter(None, (arg or "").split(",")):
    if "=" not in item:
      raise ValueError(f"config argument {item!r} is not of the form key=value")
    key, text = item.split("=", 1)
    if key not in defaults:
      raise ValueError(f"unknown config argument {key!r}; the arguments are {sorted(defaults)}")
    result[key] = _convert(key, text, defaults[key])
  return ml_collections.ConfigDict(result)


def input_config(dataset: str, **fields) -> ml_collections.ConfigDict:
  """The `config.input` block read by `vit_spectral.data`: every field of
  `InputSettings` at its default, then `fields` (image_size and batch_size are
  required), checked by building the settings once.

  Fields whose default is None (data_dir) are typed placeholders, so
  `--config.input.data_dir=DIR` works; eval_batch_size None becomes batch_size.
  """
  unknown = sorted(set(fields) - set(settings.field_names(InputSettings)))
  if unknown:
    raise ValueError(f"unknown input fields {unknown}; the fields are "
                     f"{sorted(settings.field_names(InputSettings))}")
  return settings.to_config(InputSettings, dataset=dataset, **fields)


def model_config(variant: str | None = None, **fields) -> ml_collections.ConfigDict:
  """The `config.model` block read by `vit_spectral.models.build_model`."""
  base = dict(
      variant=variant, hidden_size=None, depth=None, num_heads=None, mlp_dim=None,
      patch_size=None, stem="patch", pooling="cls", posemb="learned", dropout_rate=0.0,
      attention_dropout_rate=0.0, drop_path_rate=0.0,
      attention=dict(name="dot_product"), block=dict(), layer_overrides=(),
      norm="layer_norm",
      encoder_mode="scan",
      remat=False, kernel_init="xavier_uniform", dtype="float32",
      param_dtype="float32")
  unknown = set(fields) - set(base)
  if unknown:
    raise ValueError(f"unknown model fields {sorted(unknown)}; the fields are {sorted(base)}")
  base.update(fields)
  return ml_collections.ConfigDict(base)


def optim_config(name: str = "adamw", **fields) -> ml_collections.ConfigDict:
  """The `config.optim` block read by `vit_spectral.training.optim`."""
  base = dict(name=name, learning_rate=1e-3, base_batch_size=None,
              warmup_steps=0, warmup_epochs=None, warmup_init_learning_rate=0.0,
              end_learning_rate=0.0, cooldown_steps=0, cooldown_epochs=None,
              weight_decay=0.05, no_decay_patterns=(), b1=0.9, b2=0.999, eps=1e-8,
              momentum=0.9, nesterov=False, grad_clip_norm=None)
  # A recipe in epochs sets warmup_epochs/cooldown_epochs; the step fields
  # then step aside (vit_spectral.training.durations allows one of each pair).
  for unit in ("warmup", "cooldown"):
    if fields.get(f"{unit}_epochs") is not None and f"{unit}_steps" not in fields:
      base[f"{unit}_steps"] = None
  base.update(fields)
  return ml_collections.ConfigDict(base)


def mixup_config(mixup_alpha: float = 0.0, cutmix_alpha: float = 0.0,
                 prob: float = 1.0, switch_prob: float = 0.5
                 ) -> ml_collections.ConfigDict:
  """The `config.mixup` block (`vit_spectral.training.mixing`); alphas 0 = off."""
  return ml_collections.ConfigDict(dict(
      mixup_alpha=mixup_alpha, cutmix_alpha=cutmix_alpha, prob=prob,
      switch_prob=switch_prob))


def deit_augmentation(config: ml_collections.ConfigDict, *,
                      randaugment: bool = True) -> ml_collections.ConfigDict:
  """Turns on DeiT's data recipe in `config` (in place; returns it).

  RandAugment m9-mstd0.5 with 2 layers on timm's "increasing" ops, random
  erasing 0.25, Mixup 0.8 / CutMix 1.0 switched with probability 0.5, label
  smoothing 0.1 (DeiT main.py defaults; paper 004 Table 10 lists the same).
  """
  if randaugment:
    config.input.randaugment_layers = randaugment_lib.NUM_LAYERS
    config.input.randaugment_magnitude = randaugment_lib.MAGNITUDE
    config.input.randaugment_magnitude_std = randaugment_lib.MAGNITUDE_STD
    config.input.randaugment_ops = randaugment_lib.OP_SET
  config.input.random_erasing = 0.25
  config.mixup = mixup_config(mixup_alpha=0.8, cutmix_alpha=1.0)
  config.label_smoothing = 0.1
  return config


def base_config() -> ml_collections.ConfigDict:
  """Trainer fields shared by every recipe (durations in steps)."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.total_steps = None
  config.num_epochs = None
  config.log_every = 100
  config.eval_every = 1000
  config.checkpoint_every = 1000
  config.keep_checkpoints = 3
  config.async_checkpointing = True
  config.eval_every_epochs = None  # instead of eval_every (vit_spectral.training.durations)
  config.checkpoint_every_epochs = None  # instead of checkpoint_every
  config.label_smoothing = 0.0
  config.ema_decay = 0.0  # 0 = no EMA (DeiT: 0.99996)
  config.mixup = mixup_config()  # off
  config.robustness = robustness_config()  # off
  config.mesh = ml_collections.ConfigDict(dict(data=-1, model=1))
  config.sharding_rules = None  # None = sharding.TENSOR_PARALLEL_RULES
  return config

