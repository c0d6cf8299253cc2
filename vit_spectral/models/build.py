"""`config.model` <-> the model: the model section's typed definition is the
model class's own fields (and `Block`'s and the attention class's for
`model.block` and `model.attention`).

`model.variant` picks the class: no variant or a ViT name ("S/16") is the
`ViT`; a name of `variants.BACKBONE_NAMES` ("Swin-T", "CaiT-S24",
"LipsFormer-CSwin-T", ...) is its family module's `MODEL`, and the module's
`VARIANTS[name]` gives that name's fields in config form (`attention` and
`block` as dicts). What follows is said of the ViT; a backbone's section
holds its own class's fields under the same rules.

`config.model` holds the ViT fields under the same names, except:

  variant          e.g. "Ti/16": fills hidden_size, depth, num_heads, mlp_dim
                   and patch_size; any of those set explicitly overrides it.
  attention        a dict: `name` picks the registered variant (ViT.attention),
                   every other key is handed to that attention class
                   (ViT.attention_kwargs).
  block            a dict of extra `Block` fields (ViT.block_options: block
                   options added by the papers).
  dtype, param_dtype  names ("float32", "bfloat16", "float16").

`config.model.layer_overrides` (optional) is a sequence of per-layer-range
changes of those settings (`models.segments`). `model_config` writes the
section from ViT's defaults; `model_kwargs` converts it back, once, rejecting
unknown keys with the valid ones listed.
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from typing import Any, Mapping

import jax.numpy as jnp
import ml_collections
from ml_collections import config_dict

from vit_spectral.attention import get_attention
from vit_spectral.settings import plain
from vit_spectral.models.segments import check_overrides
from vit_spectral.models.variants import BACKBONE_NAMES, variant_fields
from vit_spectral.models.vit import (ATTENTION_FIELDS_SET_BY_BLOCK, BLOCK_FIELDS_SET_BY_ENCODER,
                                     Block, ViT)

SHAPE_FIELDS = ("hidden_size", "depth", "num_heads", "mlp_dim", "patch_size")
_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}
# ViT fields that config.model spells differently (see the module docstring),
# and fields the caller supplies (num_classes) or flax owns.
_RENAMED = {"attention_kwargs": "attention", "block_options": "block"}
_NOT_CONFIG = ("parent", "name", "num_classes")


def _family_module(variant: str):
  family = BACKBONE_NAMES[variant]
  return importlib.import_module(f"vit_spectral.models.{family}")


def model_class(variant: str | None) -> type:
  """The model class `model.variant` names: ViT for None or a ViT name, else
  the family's `MODEL` (raises ValueError for an unknown name, listing all)."""
  if variant in BACKBONE_NAMES:
    return _family_module(variant).MODEL
  if variant is not None:
    variant_fields(variant)     # raises for an unknown name
  return ViT


def named_fields(variant: str) -> dict[str, Any]:
  """The config-form fields `variant` stands for (shapes, and for the
  LipsFormer names the LipsFormer parts): a ViT name's shape fields, or the
  family module's `VARIANTS[variant]` (a copy)."""
  if variant in BACKBONE_NAMES:
    return {k: (dict(v) if isinstance(v, Mapping) else v)
            for k, v in _family_module(variant).VARIANTS[variant].items()}
  return variant_fields(variant)


def _merge_variant(named: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, Any]:
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


def _module_fields(module_cls: type) -> list[dataclasses.Field]:
  return [f for f in dataclasses.fields(module_cls) if f.name not in _NOT_CONFIG]


def _dtype_name(dtype: Any) -> str:
  return next(name for name, value in _DTYPES.items() if value == dtype)


def parse_dtype(name: str, field: str):
  try:
    return _DTYPES[name]
  except KeyError:
    raise ValueError(f"{field}={name!r}; choose one of {list(_DTYPES)}") from None


def model_config(**fields: Any) -> ml_collections.ConfigDict:
  """The `config.model` section at the model class's defaults, then the
  fields `fields["variant"]` stands for (a backbone's; a ViT name's shapes
  stay implied by the name), then `fields`.

  Shape fields without a default (and `variant`) are typed placeholders, so
  `--config.model.depth=6` works from the command line.
  """
  variant = fields.get("variant")
  cls = model_class(variant)
  hints = typing.get_type_hints(cls)
  base: dict[str, Any] = {"variant": config_dict.placeholder(str)}
  for f in _module_fields(cls):
    if f.name == "attention":
      base["attention"] = dict(name=f.default)
    elif f.name == "block_options":
      base["block"] = dict()
    elif f.name == "layer_overrides":
      base["layer_overrides"] = ()
    elif f.name in ("dtype", "param_dtype"):
      base[f.name] = _dtype_name(f.default)
    elif f.name in _RENAMED:
      continue
    elif f.default is dataclasses.MISSING:
      base[f.name] = config_dict.placeholder(hints[f.name])
    elif f.default is None:   # `X | None`: a placeholder typed X (e.g. encoder_unroll)
      base[f.name] = config_dict.placeholder(
          next(a for a in typing.get_args(hints[f.name]) if a is not type(None)))
    else:
      base[f.name] = f.default
  check_known(fields, base, "config.model", cls.__name__)
  if variant in BACKBONE_NAMES:
    fields = _merge_variant(named_fields(variant), fields)
    if "attention" in fields and "name" not in fields["attention"]:
      fields["attention"] = dict(base["attention"], **fields["attention"])
  # None keeps a placeholder typed (overridable from the command line).
  base.update({k: v for k, v in fields.items()
               if v is not None or not isinstance(base[k], config_dict.FieldReference)})
  return ml_collections.ConfigDict(base)


def check_known(options: Mapping[str, Any], valid: Any, field: str,
                owner: str = "") -> None:
  """Every key of `options` must be in `valid`; the error lists them."""
  unknown = sorted(set(options) - set(valid))
  if unknown:
    raise ValueError(f"{field} has unknown options {unknown}; "
                     f"{owner or field} accepts {sorted(set(valid))}")


def _check_module_options(module_cls: type, options: Mapping[str, Any], field: str,
                          set_elsewhere: tuple[str, ...] = ()) -> None:
  """Every key of `options` must be a dataclass field of `module_cls` that its
  caller does not set itself (`set_elsewhere`)."""
  valid = [f.name for f in dataclasses.fields(module_cls)
           if f.name not in ("parent", "name", *set_elsewhere)]
  owner = module_cls.__name__ + (" (the others are set by the model)" if set_elsewhere else "")
  check_known(options, valid, field, owner)


def _check_attention_options(name: str, options: Mapping[str, Any], field: str) -> None:
  _check_module_options(get_attention(name), options, field, ATTENTION_FIELDS_SET_BY_BLOCK)


def block_options(cls: type = ViT) -> list[str]:
  """The `Block` fields `model.block` may set: every field the model class
  does not set itself (its shared fields, the token layout, `deterministic`
  and the class's `BLOCK_FIELDS_SET_BY_MODEL`, e.g. Swin's window fields)."""
  own = {f.name for f in dataclasses.fields(cls)}
  set_by_model = own | {"grid_size", "num_prefix_tokens", "deterministic", "parent", "name",
                        *getattr(cls, "BLOCK_FIELDS_SET_BY_MODEL", ())}
  return [f.name for f in dataclasses.fields(Block) if f.name not in set_by_model]


def _check_overrides(overrides, fields: Mapping[str, Any]) -> None:
  """Each override's attention and block options exist on their classes."""
  check_overrides(overrides, fields["depth"])
  for n, override in enumerate(overrides):
    override = plain(override)
    attention = dict(plain(override.get("attention") or {}))
    name = attention.pop("name", fields["attention"])
    _check_attention_options(name, attention, f"model.layer_overrides[{n}].attention")
    _check_module_options(Block, plain(override.get("block") or {}),
                          f"model.layer_overrides[{n}].block",
                          ("attention", "attention_kwargs", "grid_size", "num_prefix_tokens",
                           *BLOCK_FIELDS_SET_BY_ENCODER))


def model_kwargs(model_config: Mapping[str, Any]) -> dict[str, Any]:
  """The fields (except num_classes) of the model class `model_config`
  describes (`model_class(model.variant)`: the ViT unless a backbone is named).

  Keys `model_config` lacks (or sets to None) keep the variant's fields, then
  the class's defaults.

  Raises:
    ValueError: an unknown key in `model`, `model.attention`, `model.block`
      or a layer override (the error lists the valid ones), an unknown
      variant or dtype, or shape fields neither set nor given by a variant.
  """
  cfg = {k: v for k, v in dict(plain(model_config)).items() if v is not None}
  cls = model_class(cfg.get("variant"))
  own_fields = _module_fields(cls)
  config_keys = ["variant"] + [_RENAMED.get(f.name, f.name) for f in own_fields]
  check_known(cfg, config_keys, "config.model", cls.__name__)
  fields: dict[str, Any] = {}
  if "variant" in cfg:
    variant = cfg.pop("variant")
    if cls is ViT:
      fields.update(variant_fields(variant))
    else:
      cfg = _merge_variant(named_fields(variant), cfg)
  required = SHAPE_FIELDS if cls is ViT else [
      f.name for f in own_fields
      if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
  missing = [k for k in required if k not in fields and k not in cfg]
  if missing:
    raise ValueError(f"model config needs model.variant or explicit {missing}")
  attention = dict(plain(cfg.pop("attention", {})))
  fields["attention"] = attention.pop("name", _field_default(cls, "attention"))
  _check_attention_options(fields["attention"], attention, "model.attention")
  fields["attention_kwargs"] = attention
  block = dict(plain(cfg.pop("block", {})))
  check_known(block, block_options(cls), "model.block",
              f"Block (the other Block fields are set by the {cls.__name__} itself)")
  if block:
    fields["block_options"] = block
  overrides = tuple(plain(o) for o in cfg.pop("layer_overrides", ()))
  for key in ("dtype", "param_dtype"):
    if key in cfg:
      fields[key] = parse_dtype(cfg.pop(key), f"model.{key}")
  fields.update(cfg)
  if overrides:
    fields["layer_overrides"] = overrides
    if cls is ViT:
      _check_overrides(overrides, fields)
  return fields


def _field_default(cls: type, name: str) -> Any:
  return next(f.default for f in dataclasses.fields(cls) if f.name == name)


def build_model(model_config: Mapping[str, Any], num_classes: int) -> Any:
  """The model described by `config.model` (the ViT, or the backbone
  `model.variant` names), with a `num_classes` head."""
  cfg = dict(plain(model_config))
  return model_class(cfg.get("variant"))(num_classes=num_classes, **model_kwargs(cfg))
