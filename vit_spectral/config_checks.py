"""Rejects invalid configs before anything is compiled, naming the field.

The model is checked by building its fields (`models.model_kwargs`) and testing
every constraint the ViT will meet at trace time (patch size vs. image size,
heads vs. width, registered names), so a bad value fails in milliseconds.
"""

from __future__ import annotations

import dataclasses

import jax

from vit_spectral.attention import get_attention
from vit_spectral.layers.initializers import get_initializer
from vit_spectral.layers.norms import get_norm
from vit_spectral.models.build import model_kwargs
from vit_spectral.models.posemb import POSEMB_CHOICES
from vit_spectral.models.vit import BLOCK_ORDERS, ENCODER_MODES, POOLINGS, Block
from vit_spectral.optim import OPTIMIZERS

TRAIN_AUGMENTS = ("none", "pad_crop", "random_resized_crop")
EVAL_RESIZES = ("none", "resize", "resize_center_crop")


def _require(condition: bool, message: str) -> None:
  if not condition:
    raise ValueError(message)


def _choice(value, choices, field: str) -> None:
  _require(value in choices, f"{field}={value!r}; choose one of {list(choices)}")


def _rate(value, field: str) -> None:
  _require(0.0 <= float(value) < 1.0, f"{field}={value} must be in [0, 1)")


def _known_fields(module_cls, options, field: str) -> None:
  """Every key of `options` must be a dataclass field of `module_cls`."""
  valid = {f.name for f in dataclasses.fields(module_cls)} - {"parent", "name"}
  unknown = sorted(set(options) - valid)
  _require(not unknown, f"{field} has unknown options {unknown}; "
           f"{module_cls.__name__} accepts {sorted(valid)}")


def validate_model(model_config, image_size: int) -> None:
  """Checks `config.model` against an input of `image_size`² pixels."""
  fields = model_kwargs(model_config)
  for key in ("hidden_size", "depth", "num_heads", "mlp_dim", "patch_size"):
    _require(fields[key] > 0, f"model.{key}={fields[key]} must be positive")
  _require(image_size % fields["patch_size"] == 0,
           f"model.patch_size={fields['patch_size']} does not divide "
           f"input.image_size={image_size}")
  if not fields["attention_kwargs"].get("head_dim"):
    _require(fields["hidden_size"] % fields["num_heads"] == 0,
             f"model.num_heads={fields['num_heads']} does not divide "
             f"model.hidden_size={fields['hidden_size']}")
  attention_cls = get_attention(fields["attention"])
  _known_fields(attention_cls, fields["attention_kwargs"], "model.attention")
  block = fields.get("block_options") or {}
  _known_fields(Block, block, "model.block")
  _choice(block.get("block_order", "pre_norm"), BLOCK_ORDERS, "model.block.block_order")
  if block.get("block_order") == "lipsformer":
    _require(block.get("residual_alpha") is not None,
             "model.block.block_order='lipsformer' needs model.block.residual_alpha")
  get_norm(fields.get("norm", "layer_norm"))
  get_initializer(fields.get("kernel_init", "xavier_uniform"))
  _choice(fields.get("pooling", "cls"), POOLINGS, "model.pooling")
  _choice(fields.get("posemb", "learned"), POSEMB_CHOICES, "model.posemb")
  _choice(fields.get("encoder_mode", "scan"), ENCODER_MODES, "model.encoder_mode")
  for key in ("dropout_rate", "attention_dropout_rate", "drop_path_rate"):
    _rate(fields.get(key, 0.0), f"model.{key}")


def validate_input(input_config, num_data_shards: int) -> None:
  cfg = input_config
  _require(isinstance(cfg.dataset, str) and cfg.dataset, "input.dataset must be a TFDS name")
  _require(cfg.image_size > 0, f"input.image_size={cfg.image_size} must be positive")
  for key in ("batch_size", "eval_batch_size"):
    value = cfg[key]
    _require(value > 0, f"input.{key}={value} must be positive")
    _require(value % num_data_shards == 0,
             f"input.{key}={value} must be divisible by the {num_data_shards} "
             "data-parallel devices (config.mesh.data)")
    _require(value % jax.process_count() == 0,
             f"input.{key}={value} must be divisible by the {jax.process_count()} processes")
  _choice(cfg.train_augment, TRAIN_AUGMENTS, "input.train_augment")
  _choice(cfg.eval_resize, EVAL_RESIZES, "input.eval_resize")
  _require(len(cfg.mean) == len(cfg.std), "input.mean and input.std differ in length")


def validate_config(config) -> None:
  """Raises ValueError naming the first invalid field of a training config."""
  for key in ("seed", "input", "model", "optim", "mesh", "log_every",
              "eval_every", "checkpoint_every"):
    _require(key in config, f"config.{key} is missing")
  _require(bool(config.get("total_steps")) != bool(config.get("num_epochs")),
           "set exactly one of config.total_steps and config.num_epochs")
  for key in ("total_steps", "num_epochs", "log_every", "eval_every", "checkpoint_every"):
    if config.get(key) is not None:
      _require(config[key] > 0 or (key in ("total_steps", "num_epochs") and not config[key]),
               f"config.{key}={config[key]} must be positive")
  _rate(config.get("label_smoothing", 0.0), "config.label_smoothing")
  _choice(config.optim.name, OPTIMIZERS, "optim.name")
  _require(config.optim.learning_rate > 0,
           f"optim.learning_rate={config.optim.learning_rate} must be positive")
  _require(config.optim.get("warmup_steps", 0) >= 0,
           f"optim.warmup_steps={config.optim.get('warmup_steps')} must be >= 0")
  data_axis = int(config.mesh.get("data", -1))
  num_data = jax.device_count() // max(int(config.mesh.get("model", 1)), 1) if data_axis == -1 else data_axis
  validate_input(config.input, max(num_data, 1))
  validate_model(config.model, config.input.image_size)
