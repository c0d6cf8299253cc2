"""Rejects invalid configs before anything is compiled, naming the field.

The model is checked by building its fields (`models.model_kwargs`) and testing
every constraint the ViT will meet at trace time (patch size vs. image size,
heads vs. width, registered names), so a bad value fails in milliseconds.
"""

from __future__ import annotations

import dataclasses

import jax

from vit_spectral.training import durations, ema, mixing, robustness
from vit_spectral.attention import get_attention
from vit_spectral.attention.value_output import STANDARD, check_value_output
from vit_spectral.data import randaugment
from vit_spectral.layers.initializers import get_initializer
from vit_spectral.layers.norms import get_norm
from vit_spectral.models.build import model_kwargs
from vit_spectral.models.posemb import POSEMB_CHOICES
from vit_spectral.models.segments import check_overrides
from vit_spectral.models.vit import BLOCK_ORDERS, ENCODER_MODES, POOLINGS, STEMS, Block, check_attention_residual
from vit_spectral.training.optim import OPTIMIZERS

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


def _attention_options(name: str, options, fields, field: str) -> None:
  """Known fields of the variant, and a valid value_output for the model's shape."""
  _known_fields(get_attention(name), options, field)
  mode = options.get("value_output", STANDARD)
  check_value_output(mode, options.get("value_output_clip", False),
                     options.get("value_output_eps", 1e-3))
  head_dim = options.get("head_dim") or fields["hidden_size"] // fields["num_heads"]
  _require(mode == STANDARD or head_dim * fields["num_heads"] == fields["hidden_size"],
           f"{field}.value_output={mode!r} needs num_heads*head_dim == "
           f"model.hidden_size={fields['hidden_size']}")


def _layer_overrides(fields) -> None:
  overrides = fields.get("layer_overrides") or ()
  check_overrides(overrides, fields["depth"])
  for n, override in enumerate(overrides):
    attention = dict(override.get("attention") or {})
    name = attention.pop("name", fields["attention"])
    if name == fields["attention"]:
      attention = dict(fields["attention_kwargs"], **attention)
    _attention_options(name, attention, fields, f"model.layer_overrides[{n}].attention")
    _known_fields(Block, override.get("block") or {}, f"model.layer_overrides[{n}].block")


def validate_model(model_config, image_size: int) -> None:
  """Checks `config.model` against an input of `image_size`² pixels."""
  fields = model_kwargs(model_config)
  for key in ("hidden_size", "depth", "num_heads", "mlp_dim", "patch_size"):
    _require(fields[key] > 0, f"model.{key}={fields[key]} must be positive")
  _require(image_size % fields["patch_size"] == 0,
           f"model.patch_size={fields['patch_size']} does not divide "
           f"input.image_size={image_size}")
  attention_kwargs = fields["attention_kwargs"]
  if not (attention_kwargs.get("head_dim") or attention_kwargs.get("full_width_heads")):
    _require(fields["hidden_size"] % fields["num_heads"] == 0,
             f"model.num_heads={fields['num_heads']} does not divide "
             f"model.hidden_size={fields['hidden_size']}")
  _attention_options(fields["attention"], fields["attention_kwargs"], fields,
                     "model.attention")
  _layer_overrides(fields)
  _known_fields(Block, fields.get("block_options") or {}, "model.block")
  check_attention_residual((fields.get("block_options") or {}).get("attention_residual", "add"),
                           get_attention(fields["attention"]))
  block = fields.get("block_options") or {}
  _choice(block.get("block_order", "pre_norm"), BLOCK_ORDERS, "model.block.block_order")
  if block.get("block_order") == "lipsformer":
    _require(block.get("residual_alpha") is not None,
             "model.block.block_order='lipsformer' needs model.block.residual_alpha")
  get_norm(fields.get("norm", "layer_norm"))
  get_initializer(fields.get("kernel_init", "xavier_uniform"))
  _choice(fields.get("stem", "patch"), STEMS, "model.stem")
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
  fraction = cfg.get("train_fraction", 1.0)
  _require(0.0 < fraction <= 1.0, f"input.train_fraction={fraction} must be in (0, 1]")
  erasing = cfg.get("random_erasing", 0.0)
  _require(0.0 <= erasing <= 1.0, f"input.random_erasing={erasing} must be in [0, 1]")
  repeats = cfg.get("repeated_augment", 1)
  _require(repeats >= 1, f"input.repeated_augment={repeats} must be >= 1 (1 = off)")
  randaugment.check_settings(cfg.get("randaugment_layers", 0),
                             cfg.get("randaugment_magnitude", 9.0),
                             cfg.get("randaugment_magnitude_std", 0.5),
                             cfg.get("randaugment_ops", "increasing"))


def validate_recipe(config) -> None:
  """The recipe options of issue 8: EMA, Mixup/CutMix, corruption eval,
  epoch-valued cadences, the optimizer's schedule fields."""
  ema.check_decay(config.get("ema_decay", 0.0))
  mixing.settings_from_config(config.get("mixup"))
  robustness.validate(config.get("robustness"))
  for block_name, steps_field, epochs_field in durations.CADENCES:
    block = config[block_name] if block_name else config
    prefix = f"{block_name}." if block_name else ""
    _require(block.get(steps_field) is None or block.get(epochs_field) is None,
             f"set only one of config.{prefix}{steps_field} and "
             f"config.{prefix}{epochs_field}")
    for field in (steps_field, epochs_field):
      _require(block.get(field) is None or block[field] >= 0,
               f"config.{prefix}{field}={block.get(field)} must be >= 0")
  for field in ("eval_every", "checkpoint_every"):
    _require(config.get(field) or config.get(f"{field}_epochs"),
             f"set config.{field} or config.{field}_epochs")
  base = config.optim.get("base_batch_size")
  _require(base is None or base > 0,
           f"optim.base_batch_size={base} must be positive or None")


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
  data_axis = int(config.mesh.get("data", -1))
  num_data = jax.device_count() // max(int(config.mesh.get("model", 1)), 1) if data_axis == -1 else data_axis
  validate_input(config.input, max(num_data, 1))
  validate_model(config.model, config.input.image_size)
  validate_recipe(config)
