"""`config.model` <-> the model: the one place the config becomes specs.

`model.variant` picks the class: no variant is the `ViT`; a registered name
("S/16", "Swin-T", "CaiT-S24", "LipsFormer-CSwin-T", ...; the families
register them beside their architecture, `models.backbone.register_models`)
is its class, with that name's fields in config form. `config.model` is flat
and the same for every class; `model_kwargs` turns it into the class's own
fields plus one `BlockSpec` ("block") and one `EncoderSpec` ("encoder"),
once, where the run starts (`build_model`):

  <model field>    the class's own fields (patch_size, hidden_size, depth,
                   pooling, depths, window_size, ...), same names
  num_heads, mlp_dim, norm, dropout_rate, attention_dropout_rate,
  kernel_init, dtype, param_dtype
                   `BlockSpec` fields at the top level (`cls.TOP_LEVEL_BLOCK_FIELDS`;
                   a hierarchical backbone's num_heads is its per-stage field)
  attention        a dict: `name` picks the registered variant
                   (BlockSpec.attention), every other key is that attention
                   class's option (BlockSpec.attention_kwargs)
  block            a dict of the other `BlockSpec` fields (block options
                   added by the papers), less those the model sets itself
  encoder_mode, encoder_unroll, encoder_residuals, remat, drop_path_rate
                   the `EncoderSpec` (mode, unroll, residuals, remat,
                   drop_path_rate)
  dtype, param_dtype  names ("float32", "bfloat16", "float16")
  variant          a registered name: fills its fields (a ViT name's shape:
                   hidden_size, depth, num_heads, mlp_dim, patch_size); any
                   of those set explicitly overrides it

`config.model.layer_overrides` (isotropic models) is a sequence of
per-layer-range changes of the block spec (`models.segments`).
`model_config` writes the section from the class's defaults; `model_kwargs`
converts it back, rejecting unknown keys with the valid ones listed.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Mapping

from ml_collections import config_dict

from vit_spectral import backends
from vit_spectral.models.backbone import model_entry
# Writing and checking config.model needs no JAX (`model_config`); re-exported.
from vit_spectral.models import model_settings
from vit_spectral.models.model_settings import ModelPlan, check_known, model_plan  # noqa: F401
from vit_spectral.models.segments import layer_specs
from vit_spectral.models.specs import DTYPES, LIVE_FACTS, BlockSpec, EncoderSpec
from vit_spectral.models.vit import ViT
from vit_spectral.settings import plain

_DTYPES = DTYPES
DTYPE_NAMES = tuple(DTYPES)
# Module fields that are not config keys: the caller supplies num_classes,
# flax owns parent and name, and the specs are spelled out (`config_keys`).
_NOT_CONFIG = ("parent", "name", "num_classes", "block", "encoder")
_BLOCK_HINTS = typing.get_type_hints(BlockSpec)
# The section at the class's defaults, from `models.catalog` (JAX-free, re-exported).
model_config = model_settings.model_config


def model_class(variant: str | None) -> type:
  """The model class `model.variant` names: ViT for None, else the
  registered name's class (raises ValueError for an unknown name, listing all)."""
  return ViT if variant is None else model_entry(variant)[0]


def _model_fields(cls: type) -> list[dataclasses.Field]:
  return [f for f in dataclasses.fields(cls) if f.name not in _NOT_CONFIG]


def config_keys(cls: type) -> dict[str, tuple[str, str]]:
  """config.model key -> (where, field): where is "model" (the class's own
  field), "block" (a BlockSpec field) or "encoder" (an EncoderSpec field);
  "attention" and "block" (the dicts) and "variant" are not listed."""
  keys = {f.name: ("model", f.name) for f in _model_fields(cls)}
  keys.update({name: ("block", name) for name in cls.TOP_LEVEL_BLOCK_FIELDS
               if name not in keys})
  keys.update({key: ("encoder", field) for field, key in EncoderSpec.CONFIG_KEYS.items()})
  return keys


def block_options(cls: type = ViT) -> list[str]:
  """The `BlockSpec` fields `model.block` may set: all but the attention (its
  own dict), those spelled at the top level and those the model sets itself."""
  excluded = {"attention", "attention_kwargs", *BlockSpec.SET_BY_RUN, *cls.TOP_LEVEL_BLOCK_FIELDS,
              *cls.BLOCK_FIELDS_SET_BY_MODEL, *config_keys(cls)}
  return [f.name for f in dataclasses.fields(BlockSpec) if f.name not in excluded]


def dtype_name(dtype: Any) -> str:
  """"float32" for jnp.float32, ... (the config's name of a dtype)."""
  return next(name for name, value in _DTYPES.items() if value == dtype)


def parse_dtype(name: str, field: str):
  try:
    return _DTYPES[name]
  except KeyError:
    raise ValueError(f"{field}={name!r}; choose one of {list(_DTYPES)}") from None


def _placeholder(hint: Any):
  """A typed placeholder for a field of type `hint` (`X | None` -> X)."""
  args = [a for a in typing.get_args(hint) if a is not type(None)]
  if type(None) in typing.get_args(hint) and args:
    hint = args[0]
  return config_dict.placeholder(typing.get_origin(hint) or hint)


def live_defaults(cls: type) -> dict[str, Any]:
  """Every config.model key of `cls` at its default (placeholders where none),
  from the class itself (`models.catalog` keeps them for `model_config`)."""
  hints = typing.get_type_hints(cls)
  block = dict({f.name: f.default for f in dataclasses.fields(BlockSpec)
                if f.default is not dataclasses.MISSING},
               **getattr(cls, "BLOCK_DEFAULTS", {}))
  encoder = EncoderSpec()
  base: dict[str, Any] = {"variant": config_dict.placeholder(str),
                          "attention": dict(name=block["attention"]), "block": dict()}
  for key, (where, field) in config_keys(cls).items():
    if where == "model":
      default, hint = _field(cls, field).default, hints[field]
      if field == "layer_overrides":
        base[key] = ()
        continue
    elif where == "block":
      default, hint = block.get(field), _BLOCK_HINTS[field]
    else:
      default, hint = getattr(encoder, field), typing.get_type_hints(EncoderSpec)[field]
    if field in ("dtype", "param_dtype"):
      base[key] = dtype_name(default)
    elif default is dataclasses.MISSING or default is None:
      base[key] = _placeholder(hint)
    else:
      base[key] = default
  return base


def required_keys(cls: type) -> list[str]:
  """The config.model keys of `cls` without a default: a variant or the
  config must set them."""
  return [k for k, (where, field) in config_keys(cls).items()
          if (where == "model" and _field(cls, field).default is dataclasses.MISSING)
          or (where == "block" and field in ("num_heads", "mlp_dim"))]


def model_kwargs(model_config: Mapping[str, Any]) -> dict[str, Any]:
  """The fields (except num_classes) of the model class `model_config`
  describes (`model_class(model.variant)`): its own fields, "block" (a
  `BlockSpec`) and "encoder" (an `EncoderSpec`).

  The config is checked and sorted by `model_plan` (the checks the command
  line makes too), then the specs are made from the live registries, which
  check the block again, and each layer override's spec is made.

  Raises:
    ValueError: as `model_plan`, or a layer override's spec.
  """
  plan = model_plan(model_config, facts=LIVE_FACTS)
  block = dict(plan.block)
  for field in ("dtype", "param_dtype"):
    block[field] = parse_dtype(block[field], f"model.{field}")
  fields = dict(plan.model, block=BlockSpec(**block), encoder=plan.encoder)
  if plan.layer_overrides:
    fields["layer_overrides"] = plan.layer_overrides
    layer_specs(fields["depth"], fields["block"], plan.layer_overrides)
  return fields


def _field(cls: type, name: str) -> dataclasses.Field:
  return next(f for f in dataclasses.fields(cls) if f.name == name)


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  """`config.model`, converted: the model class and its fields (its own, the
  `BlockSpec` "block" and the `EncoderSpec` "encoder"), checked. A run makes
  it once, where it starts (`training.run_settings.training_settings`), and
  builds its model from it (`build`), with the data set's classes."""
  model_class: type
  fields: Mapping[str, Any]

  def build(self, num_classes: int, backend: backends.Backend | None = None) -> Any:
    """The model, compiled for `backend` (`vit_spectral.backends`: a run's
    devices or a dry run's target); None = this process's backend."""
    return self.model_class(num_classes=num_classes, **self.for_backend(backend))

  def for_backend(self, backend: backends.Backend | None) -> dict[str, Any]:
    """The fields with the backend's defaults written in: the blocks' platform
    (the fused attention kernel), the encoder's residuals and unroll where unset."""
    backend = backend or backends.of_process()
    fields = dict(self.fields)
    if "block" in fields:
      fields["block"] = fields["block"].replace(platform=backend.platform)
    if "encoder" in fields:
      blocks = fields.get("depth") or sum(fields.get("depths") or (1,))
      fields["encoder"] = fields["encoder"].for_backend(backend, blocks)
    return fields


def model_spec(model_config: Mapping[str, Any]) -> ModelSpec:
  """`config.model` -> `ModelSpec` (raises ValueError naming a bad field)."""
  cfg = dict(plain(model_config))
  return ModelSpec(model_class(cfg.get("variant")), model_kwargs(cfg))


def build_model(model_config: Mapping[str, Any], num_classes: int,
                backend: backends.Backend | None = None) -> Any:
  """The model described by `config.model` (the ViT, or the class
  `model.variant` names), with a `num_classes` head, for `backend`
  (`vit_spectral.backends`; None = this process's)."""
  return model_spec(model_config).build(num_classes, backend)
