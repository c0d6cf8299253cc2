"""Builds a `ViT` from `config.model`.

`config.model.variant` (e.g. "Ti/16") fills hidden_size, depth, num_heads, mlp_dim
and patch_size; any of those set explicitly in the config overrides the variant.
`config.model.attention` is a dict: `name` picks the registered variant, every
other key is handed to that attention class. `config.model.block` is a dict of
extra `Block` fields (block options added by the papers).
`config.model.layer_overrides` (optional) is a sequence of per-layer-range
changes of those settings (`models.segments`).
"""

from __future__ import annotations

from typing import Any, Mapping

import jax.numpy as jnp

from vit_spectral.models.variants import variant_fields
from vit_spectral.models.vit import ViT

SHAPE_FIELDS = ("hidden_size", "depth", "num_heads", "mlp_dim", "patch_size")
_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}
_PASSTHROUGH = ("stem", "pooling", "posemb", "dropout_rate", "attention_dropout_rate",
                "drop_path_rate", "norm", "encoder_mode", "remat", "kernel_init")


def _plain(value: Any) -> Any:
  if hasattr(value, "to_dict"):
    return value.to_dict()
  return dict(value) if isinstance(value, Mapping) else value


def parse_dtype(name: str, field: str):
  try:
    return _DTYPES[name]
  except KeyError:
    raise ValueError(f"{field}={name!r}; choose one of {list(_DTYPES)}") from None


def model_kwargs(model_config: Mapping[str, Any]) -> dict[str, Any]:
  """The `ViT` fields (except num_classes) that `model_config` describes."""
  cfg = dict(_plain(model_config))
  fields: dict[str, Any] = {}
  if cfg.get("variant"):
    fields.update(variant_fields(cfg["variant"]))
  for key in SHAPE_FIELDS:
    if cfg.get(key) is not None:
      fields[key] = int(cfg[key])
  missing = [k for k in SHAPE_FIELDS if k not in fields]
  if missing:
    raise ValueError(f"model config needs model.variant or explicit {missing}")
  for key in _PASSTHROUGH:
    if cfg.get(key) is not None:
      fields[key] = cfg[key]
  attention = dict(_plain(cfg.get("attention") or {"name": "dot_product"}))
  fields["attention"] = attention.pop("name", "dot_product")
  fields["attention_kwargs"] = attention
  block = dict(_plain(cfg.get("block") or {}))
  if block:
    fields["block_options"] = block
  if cfg.get("layer_overrides"):
    fields["layer_overrides"] = tuple(_plain(o) for o in cfg["layer_overrides"])
  fields["dtype"] = parse_dtype(cfg.get("dtype", "float32"), "model.dtype")
  fields["param_dtype"] = parse_dtype(cfg.get("param_dtype", "float32"), "model.param_dtype")
  return fields


def build_model(model_config: Mapping[str, Any], num_classes: int) -> ViT:
  """The ViT described by `config.model`, with a `num_classes` head."""
  return ViT(num_classes=num_classes, **model_kwargs(model_config))
