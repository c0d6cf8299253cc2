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

import ml_collections
from ml_collections import config_dict

from vit_spectral import backends
from vit_spectral.attention import get_attention
from vit_spectral.models.backbone import model_entry
from vit_spectral.models.segments import check_overrides, layer_specs
from vit_spectral.models.specs import DTYPES, BlockSpec, EncoderSpec, check_attention_options
from vit_spectral.models.variants import MODEL_NAMES
from vit_spectral.models.vit import ViT
from vit_spectral.names import did_you_mean
from vit_spectral.settings import check_choice, plain, value_type

__all__ = ["ModelSpec", "block_options", "build_model", "check_known", "config_keys",
           "dtype_name", "merge_variant", "model_class", "model_config", "model_defaults",
           "model_kwargs", "model_spec"]

DTYPE_NAMES = tuple(DTYPES)
# Module fields that are not config keys: the caller supplies num_classes,
# flax owns parent and name, and the specs are spelled out (`config_keys`).
_NOT_CONFIG = ("parent", "name", "num_classes", "block", "encoder")
_BLOCK_HINTS = typing.get_type_hints(BlockSpec)


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
  return next(name for name, value in DTYPES.items() if value == dtype)


def _placeholder(hint: Any):
  """A typed placeholder for a field of type `hint` (`settings.value_type`)."""
  return config_dict.placeholder(value_type(hint))


def _field(cls: type, name: str) -> dataclasses.Field:
  return next(f for f in dataclasses.fields(cls) if f.name == name)


def _block_defaults(cls: type) -> dict[str, Any]:
  """Every `BlockSpec` field a config may set, at its default for `cls`
  (`cls.BLOCK_DEFAULTS` over BlockSpec's; dtypes by name)."""
  block = {f.name: (f.default_factory() if f.default is dataclasses.MISSING else f.default)
           for f in dataclasses.fields(BlockSpec) if f.name not in BlockSpec.SET_BY_RUN}
  block.update(getattr(cls, "BLOCK_DEFAULTS", {}))
  for field in ("dtype", "param_dtype"):
    block[field] = dtype_name(block[field])
  return block


def model_defaults(cls: type) -> dict[str, Any]:
  """Every config.model key of `cls` at its default (typed placeholders where
  it has none, so `--config.model.depth=6` works from the command line)."""
  hints = typing.get_type_hints(cls)
  block = _block_defaults(cls)
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
    if default is dataclasses.MISSING or default is None:
      base[key] = _placeholder(hint)
    else:
      base[key] = default
  return base


def _required_keys(cls: type) -> list[str]:
  """The config.model keys of `cls` without a default: a variant or the
  config must set them."""
  return [k for k, (where, field) in config_keys(cls).items()
          if (where == "model" and _field(cls, field).default is dataclasses.MISSING)
          or (where == "block" and field in ("num_heads", "mlp_dim"))]


def check_known(options: Mapping[str, Any], valid: Any, field: str,
                owner: str = "") -> None:
  """Every key of `options` must be in `valid`; the error names the nearest
  and lists them."""
  unknown = sorted(set(options) - set(valid))
  if unknown:
    raise ValueError(f"{field} has unknown options {unknown}"
                     f"{did_you_mean(unknown[0], set(valid))}; "
                     f"{owner or field} accepts {sorted(set(valid))}")


def merge_variant(named: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, Any]:
  """`cfg` over the variant's `named` fields; the dict-valued "block" merges
  key by key, "attention" too unless `cfg` names another variant."""
  merged = {**named, **cfg}
  if "block" in named and "block" in cfg:
    merged["block"] = {**named["block"], **cfg["block"]}
  if "attention" in named and "attention" in cfg:
    other = cfg["attention"].get("name", named["attention"].get("name"))
    if other == named["attention"].get("name"):
      merged["attention"] = {**named["attention"], **cfg["attention"]}
  return merged


def model_config(**fields: Any) -> ml_collections.ConfigDict:
  """The `config.model` section at the model class's defaults, then the
  fields `fields["variant"]` stands for (a backbone's; a ViT name's shapes
  stay implied by the name), then `fields`.

  Shape fields without a default (and `variant`) are typed placeholders, so
  `--config.model.depth=6` works from the command line.
  """
  variant = fields.get("variant")
  cls = model_class(variant)
  base = model_defaults(cls)
  check_known(fields, base, "config.model", cls.__name__)
  if variant is not None and variant not in MODEL_NAMES:
    fields = merge_variant(model_entry(variant)[1], fields)
    if "attention" in fields and "name" not in fields["attention"]:
      fields["attention"] = dict(base["attention"], **fields["attention"])
  # None keeps a placeholder typed (overridable from the command line).
  base.update({k: v for k, v in fields.items()
               if v is not None or not isinstance(base[k], config_dict.FieldReference)})
  return ml_collections.ConfigDict(base)


def model_kwargs(model_config: Mapping[str, Any]) -> dict[str, Any]:
  """The fields (except num_classes) of the model class `model_config`
  describes (`model_class(model.variant)`): its own fields, "block" (a
  `BlockSpec`) and "encoder" (an `EncoderSpec`). Keys it lacks (or sets to
  None) keep the variant's fields, then the defaults.

  Raises:
    ValueError: an unknown key in `model`, `model.attention`, `model.block`
      or a layer override (the error names the nearest and lists the valid
      ones), an unknown variant, shape fields neither set nor given by a
      variant, or a value the specs refuse (`BlockSpec`, `EncoderSpec`).
  """
  cfg = {k: v for k, v in dict(plain(model_config)).items() if v is not None}
  variant = cfg.pop("variant", None)
  cls = model_class(variant)
  keys = config_keys(cls)
  check_known(cfg, ["variant", "attention", "block", *keys], "config.model", cls.__name__)
  if variant is not None:
    cfg = merge_variant(model_entry(variant)[1], cfg)
  attention = dict(plain(cfg.pop("attention", {})))
  block = _block_defaults(cls)
  block["attention"] = attention.pop("name", block["attention"])
  block["attention_kwargs"] = attention
  options = dict(plain(cfg.pop("block", {})))
  check_known(options, block_options(cls), "model.block",
              f"BlockSpec (the other fields are set by the {cls.__name__} itself)")
  block.update(options)
  overrides = tuple(plain(o) for o in cfg.pop("layer_overrides", ()))
  values: dict[str, dict[str, Any]] = {"model": {}, "encoder": {}, "block": block}
  for key, value in cfg.items():
    where, field = keys[key]
    values[where][field] = value
  missing = [k for k in _required_keys(cls) if k not in cfg]
  if missing:
    raise ValueError(f"model config needs model.variant or explicit {missing}")
  for field in ("dtype", "param_dtype"):
    check_choice(block[field], DTYPE_NAMES, f"model.{field}")
    block[field] = DTYPES[block[field]]
  fields = dict(values["model"], block=BlockSpec(**block), encoder=EncoderSpec(**values["encoder"]))
  if overrides:
    _check_overrides(overrides, fields.get("depth"), fields["block"])
    fields["layer_overrides"] = overrides
    layer_specs(fields["depth"], fields["block"], overrides)
  return fields


def _check_overrides(overrides, depth: int | None, block: BlockSpec) -> None:
  """Each override's keys, layer range, attention options and block keys."""
  if depth is not None:
    check_overrides(overrides, depth)
  valid = [f.name for f in dataclasses.fields(BlockSpec)
           if f.name not in ("attention", "attention_kwargs", *BlockSpec.SET_BY_RUN)]
  for n, override in enumerate(overrides):
    attention = dict(plain(override.get("attention") or {}))
    name = attention.pop("name", block.attention)
    check_attention_options(get_attention(name), attention,
                            f"model.layer_overrides[{n}].attention")
    check_known(plain(override.get("block") or {}), valid, f"model.layer_overrides[{n}].block",
                "BlockSpec (the attention goes in the override's 'attention' dict)")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  """`config.model`, converted: the model class and its fields (its own, the
  `BlockSpec` "block" and the `EncoderSpec` "encoder"), checked. A run makes
  it once, where it starts (`sections.run.training_settings`), and
  builds its model from it (`build`), with the data set's classes."""
  model_class: type
  fields: Mapping[str, Any]

  def check(self, height: int, width: int) -> None:
    """The model class's own checks on a height × width image
    (`Backbone.check_options`), on the unbound module: no JAX backend starts."""
    model = self.model_class(num_classes=1, **self.fields)
    if hasattr(model, "check_options"):
      model.check_options(height, width)

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
