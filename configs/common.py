"""Pieces every recipe shares, and the `file.py:key=value,...` argument syntax.

A config file's `get_config(arg)` receives the text after the colon of
`--config=configs/x.py:variant=S/16,depth=24` and reads it with `parse_arg`;
single fields are overridden with `--config.optim.learning_rate=1e-3`.
"""

from __future__ import annotations

from typing import Any

import ml_collections


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


def input_config(dataset: str, *, image_size: int, batch_size: int,
                 eval_batch_size: int | None = None, train_split: str = "train",
                 eval_split: str = "test", train_augment: str = "pad_crop",
                 pad_crop_padding: int = 4, flip: bool = True,
                 eval_resize: str = "none", crop_fraction: float = 0.875,
                 mean=(0.5,), std=(0.5,), shuffle_buffer: int = 10_000,
                 data_dir: str | None = None,
                 train_fraction: float = 1.0) -> ml_collections.ConfigDict:
  """The `config.input` block read by `vit_spectral.data`.

  `train_fraction` trains on the first fraction of `train_split` (a TFDS
  percent slice, `data.input_pipeline.train_split`).
  """
  return ml_collections.ConfigDict(dict(
      dataset=dataset, data_dir=data_dir, download=False,
      train_split=train_split, eval_split=eval_split, image_size=image_size,
      batch_size=batch_size, eval_batch_size=eval_batch_size or batch_size,
      shuffle_buffer=shuffle_buffer, train_augment=train_augment,
      pad_crop_padding=pad_crop_padding, flip=flip, eval_resize=eval_resize,
      crop_fraction=crop_fraction, mean=tuple(mean), std=tuple(std),
      train_fraction=train_fraction))


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
  """The `config.optim` block read by `vit_spectral.optim`."""
  base = dict(name=name, learning_rate=1e-3, warmup_steps=0, end_learning_rate=0.0,
              weight_decay=0.05, no_decay_patterns=(), b1=0.9, b2=0.999, eps=1e-8,
              momentum=0.9, nesterov=False, grad_clip_norm=None)
  base.update(fields)
  return ml_collections.ConfigDict(base)


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
  config.label_smoothing = 0.0
  config.mesh = ml_collections.ConfigDict(dict(data=-1, model=1))
  config.sharding_rules = None  # None = sharding.TENSOR_PARALLEL_RULES
  return config


CIFAR_MEAN = {"cifar10": (0.4914, 0.4822, 0.4465), "cifar100": (0.5071, 0.4865, 0.4409)}
CIFAR_STD = {"cifar10": (0.2470, 0.2435, 0.2616), "cifar100": (0.2673, 0.2564, 0.2762)}


def cifar_vit(dataset: str, arg: str | None) -> ml_collections.ConfigDict:
  """The ViT-Ti CIFAR recipe of papers 003/004 (DeiT-style AdamW, cosine, 300 epochs).

  Arguments: variant (default "Ti/4": 64 tokens of 4×4 on 32² images),
  image_size (32; 224 with variant=Ti/16 is paper 004's resized setting),
  batch (128), epochs (300), attention.
  """
  args = parse_arg(arg, variant="Ti/4", image_size=32, batch=128, epochs=300,
                   attention="dot_product")
  config = base_config()
  config.num_epochs = args.epochs
  steps_per_epoch = 50_000 // args.batch
  config.log_every = 100
  config.eval_every = 5 * steps_per_epoch
  config.checkpoint_every = steps_per_epoch
  resized = args.image_size != 32
  config.input = input_config(
      dataset, image_size=args.image_size, batch_size=args.batch,
      eval_batch_size=500 if not resized else 200,
      train_augment="random_resized_crop" if resized else "pad_crop",
      pad_crop_padding=4, flip=True, eval_resize="resize" if resized else "none",
      mean=CIFAR_MEAN[dataset], std=CIFAR_STD[dataset])
  config.model = model_config(args.variant, drop_path_rate=0.1,
                              attention=dict(name=args.attention))
  # DeiT: lr 5e-4 per 512 examples, weight decay 0.05, 5 warmup epochs.
  config.optim = optim_config("adamw", learning_rate=5e-4 * args.batch / 512,
                              warmup_steps=5 * steps_per_epoch, end_learning_rate=1e-6,
                              weight_decay=0.05)
  config.label_smoothing = 0.1
  return config
