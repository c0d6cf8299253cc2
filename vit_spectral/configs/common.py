"""Pieces every recipe shares, and the `file.py:key=value,...` argument syntax.

Recipes import neither JAX nor TensorFlow (the command line builds and checks
them before either is imported): only the sections' settings modules.

A config file's `get_config(arg)` receives the text after the colon of
`--config=configs/x.py:variant=S/16,depth=24` and reads it with `parse_arg`;
single fields are overridden with `--config.optim.learning_rate=1e-3`.
"""

from __future__ import annotations

from typing import Any

import ml_collections

from vit_spectral import settings
from vit_spectral.names import did_you_mean
from vit_spectral.sections import augment as randaugment_lib
from vit_spectral.data.statistics import dataset_statistics
from vit_spectral.sections.input import InputSettings
from vit_spectral.models import build
from vit_spectral.sections.init_from import init_from_config
from vit_spectral.sections.mix import MixSettings
from vit_spectral.sections.optim import OptimSettings
from vit_spectral.sections.robustness import robustness_config
from vit_spectral.sections.diagnostics import DiagnosticsSettings
from vit_spectral.sections.logging import LoggingSettings
from vit_spectral.sections.run import RunSettings
from vit_spectral.sections.mesh import MeshSettings


# `model.dtype` of the recipes meant for accelerators (CIFAR, ImageNet): bf16
# compute with float32 parameters, softmax, norm statistics and logits (the
# policy: `vit_spectral.models.vit.ViT`). Such a recipe takes it as its `dtype`
# argument (`:dtype=float32` switches mixed precision off); the digits recipes
# keep the model's float32 default (bf16 is slow on CPUs).
ACCELERATOR_DTYPE = "bfloat16"


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
      raise ValueError(f"unknown config argument {key!r}{did_you_mean(key, defaults)}; "
                       f"the arguments are {sorted(defaults)}")
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


def cifar_input(dataset: str, **fields) -> ml_collections.ConfigDict:
  """`input_config` of the CIFAR recipes: 32² images, 4-pixel pad-and-crop,
  flips, the data set's mean/std; `fields` add to or override these."""
  stats = dataset_statistics(dataset)
  return input_config(dataset, **{
      "image_size": 32, "train_augment": "pad_crop", "pad_crop_padding": 4, "flip": True,
      "mean": stats.mean, "std": stats.std, **fields})


def epoch_cadences(config: ml_collections.ConfigDict, epochs: float, *,
                   eval_every_epochs: float, checkpoint_every_epochs: float = 1) -> None:
  """Sets a run of `epochs` epochs that evaluates and checkpoints every so many
  epochs (the step-valued cadences unset) and logs every 100 steps."""
  config.num_epochs = epochs
  config.log_every = 100
  config.eval_every, config.eval_every_epochs = None, eval_every_epochs
  config.checkpoint_every, config.checkpoint_every_epochs = None, checkpoint_every_epochs


def model_config(variant: str | None = None, **fields) -> ml_collections.ConfigDict:
  """The `config.model` block read by `vit_spectral.models.build_model`, at
  the model class's defaults (`vit_spectral.models.build.model_config`)."""
  return build.model_config(variant=variant, **fields)


def optim_config(name: str = "adamw", **fields) -> ml_collections.ConfigDict:
  """The `config.optim` block (`vit_spectral.training.optim.OptimSettings`)."""
  # A recipe in epochs sets warmup_epochs/cooldown_epochs; the step fields
  # then step aside (OptimSettings allows one of each pair).
  for unit in ("warmup", "cooldown"):
    if fields.get(f"{unit}_epochs") is not None and f"{unit}_steps" not in fields:
      fields[f"{unit}_steps"] = None
  return settings.to_config(OptimSettings, name=name, **fields)


def mixup_config(**fields) -> ml_collections.ConfigDict:
  """The `config.mixup` block (`vit_spectral.training.mixing.MixSettings`);
  alphas 0 (the defaults) = off."""
  return settings.to_config(MixSettings, **fields)


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
  """Trainer fields shared by every recipe (`vit_spectral.sections.run.
  RunSettings`; durations in steps) and the training sections at their
  defaults (Mixup/CutMix, corruption evaluation, init_from, the training
  diagnostics and W&B logging off)."""
  config = settings.defaults_config(RunSettings)  # the recipe sets its length
  config.mixup = mixup_config()
  config.robustness = robustness_config()
  config.init_from = init_from_config()
  config.mesh = settings.to_config(MeshSettings)
  config.diagnostics = settings.to_config(DiagnosticsSettings)
  config.logging = settings.to_config(LoggingSettings)
  return config
