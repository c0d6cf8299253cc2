"""`config.model` <-> `ViT`: the model section's typed definition is the ViT
module's own fields (and `Block`'s and the attention class's for
`model.block` and `model.attention`).

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
import typing
from typing import Any, Mapping

import jax.numpy as jnp
import ml_collections
from ml_collections import config_dict

from vit_spectral.attention import get_attention
from vit_spectral.settings import plain
from vit_spectral.models.segments import check_overrides
from vit_spectral.models.variants import variant_fields
from vit_spectral.models.vit import (ATTENTION_FIELDS_SET_BY_BLOCK, BLOCK_FIELDS_SET_BY_ENCODER,
                                     Block, ViT)

SHAPE_FIELDS = ("hidden_size", "depth", "num_heads", "mlp_dim", "patch_size")
_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}
# ViT fields that config.model spells differently (see the module docstring),
# and fields the caller supplies (num_classes) or flax owns.
_RENAMED = {"attention_kwargs": "attention", "block_options": "block"}
_NOT_CONFIG = ("parent", "name", "num_classes")


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
  """The `config.model` section at ViT's defaults, then `fields`.

  Shape fields without a default (and `variant`) are typed placeholders, so
  `--config.model.depth=6` works from the command line.
  """
  hints = typing.get_type_hints(ViT)
  base: dict[str, Any] = {"variant": config_dict.placeholder(str)}
  for f in _module_fields(ViT):
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
  check_known(fields, base, "config.model")
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


def block_options() -> list[str]:
  """The `Block` fields `model.block` may set: every field the ViT does not
  set itself (its shared fields, the token layout and `deterministic`)."""
  vit = {f.name for f in dataclasses.fields(ViT)}
  set_by_vit = vit | {"grid_size", "num_prefix_tokens", "deterministic", "parent", "name"}
  return [f.name for f in dataclasses.fields(Block) if f.name not in set_by_vit]


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
  """The `ViT` fields (except num_classes) that `model_config` describes.

  Keys `model_config` lacks (or sets to None) keep ViT's defaults.

  Raises:
    ValueError: an unknown key in `model`, `model.attention`, `model.block`
      or a layer override (the error lists the valid ones), an unknown
      variant or dtype, or shape fields neither set nor given by a variant.
  """
  cfg = {k: v for k, v in dict(plain(model_config)).items() if v is not None}
  vit_fields = [f.name for f in _module_fields(ViT)]
  config_keys = ["variant"] + [_RENAMED.get(n, n) for n in vit_fields]
  check_known(cfg, config_keys, "config.model")
  fields: dict[str, Any] = {}
  if "variant" in cfg:
    fields.update(variant_fields(cfg.pop("variant")))
  missing = [k for k in SHAPE_FIELDS if k not in fields and k not in cfg]
  if missing:
    raise ValueError(f"model config needs model.variant or explicit {missing}")
  attention = dict(plain(cfg.pop("attention", {})))
  fields["attention"] = attention.pop("name", _field_default("attention"))
  _check_attention_options(fields["attention"], attention, "model.attention")
  fields["attention_kwargs"] = attention
  block = dict(plain(cfg.pop("block", {})))
  check_known(block, block_options(), "model.block",
              "Block (the other Block fields are set by the ViT itself)")
  if block:
    fields["block_options"] = block
  overrides = tuple(plain(o) for o in cfg.pop("layer_overrides", ()))
  for key in ("dtype", "param_dtype"):
    if key in cfg:
      fields[key] = parse_dtype(cfg.pop(key), f"model.{key}")
  fields.update(cfg)
  if overrides:
    fields["layer_overrides"] = overrides
    _check_overrides(overrides, fields)
  return fields


def _field_default(name: str) -> Any:
  return next(f.default for f in dataclasses.fields(ViT) if f.name == name)


def build_model(model_config: Mapping[str, Any], num_classes: int) -> ViT:
  """The ViT described by `config.model`, with a `num_classes` head."""
  return ViT(num_classes=num_classes, **model_kwargs(model_config))
