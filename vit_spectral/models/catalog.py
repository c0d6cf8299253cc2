"""What the registries know, as data: read by the command line without JAX.

`config.model` is written (`models.model_settings.model_config`, every recipe) and
checked (`model_config.model_plan`, `--print_config` and every run) from facts
that live in Flax modules: each model class's fields and defaults, each
registered model name's fields, each attention variant's options and their
types, the registered norms and initializers. Importing those modules imports
JAX and Flax (about a second), so the facts are also kept here as JSON
(`catalog.json`, next to this file), which the command line reads in a
millisecond.

`live()` computes the same facts from the registries; `tests/models/
test_catalog.py` fails when the two differ, and

  python -m vit_spectral.models.catalog

rewrites the file (after adding a model, an attention variant, an option).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any, Mapping

from ml_collections import config_dict

from vit_spectral.models.spec_checks import AttentionFacts
from vit_spectral.names import did_you_mean

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalog.json")
_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "tuple": tuple}


# --- JSON form of config values --------------------------------------------------

def encode(value: Any) -> Any:
  """A config value as JSON: a tuple as {"tuple": [...]}, a typed None
  placeholder as {"placeholder": "<type>"}, dicts member by member."""
  if isinstance(value, config_dict.FieldReference):
    return {"placeholder": value.get_type().__name__}
  if isinstance(value, tuple):
    return {"tuple": [encode(v) for v in value]}
  if isinstance(value, Mapping):
    return {"dict": {k: encode(v) for k, v in value.items()}}
  return value


def decode(value: Any) -> Any:
  """`encode`'s inverse (placeholders become fresh typed FieldReferences)."""
  if isinstance(value, dict):
    (kind, inner), = value.items()
    if kind == "placeholder":
      return config_dict.placeholder(_TYPES[inner])
    if kind == "tuple":
      return tuple(decode(v) for v in inner)
    return {k: decode(v) for k, v in inner.items()}
  return value


# --- The facts ------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
  with open(PATH, encoding="utf-8") as f:
    return json.load(f)


def facts() -> dict[str, Any]:
  """The committed facts (`catalog.json`), as `live()` computes them."""
  return _load()


def model_class_name(variant: str | None) -> str:
  """The model class a `model.variant` names: "ViT" for None.

  Raises:
    ValueError: not a registered name (the nearest and all are named).
  """
  if variant is None:
    return "ViT"
  return variant_entry(variant)[0]


def _loaded(module: str) -> bool:
  """Whether the live registry `module` is imported (a config file of one's
  own that registers a model or an attention variant imports it): names the
  catalog lacks are then looked up there."""
  return module in sys.modules


def variant_entry(name: str) -> tuple[str, dict[str, Any]]:
  """(class name, config-form fields) of a registered model name."""
  variants = _load()["variants"]
  if name not in variants and _loaded("vit_spectral.models.backbone"):
    from vit_spectral.models import backbone  # pylint: disable=import-outside-toplevel
    if name in backbone.registered_model_names():
      cls, fields = backbone.model_entry(name)
      return cls.__name__, fields
  if name not in variants:
    raise ValueError(f"model.variant={name!r} is not a registered model name"
                     f"{did_you_mean(name, variants)}; choose one of {sorted(variants)}")
  entry = variants[name]
  return entry["class"], decode(entry["fields"])


def model_facts(class_name: str) -> dict[str, Any]:
  """A model class's config facts: "defaults" (encoded), "config_keys",
  "block_options", "required", "block_defaults"."""
  models = _load()["models"]
  if class_name not in models:   # a class registered by the user's own code
    return _class_facts(_live_class(class_name))
  return models[class_name]


def _live_class(class_name: str) -> type:
  from vit_spectral.models import backbone  # pylint: disable=import-outside-toplevel
  for name in backbone.registered_model_names():
    cls = backbone.model_entry(name)[0]
    if cls.__name__ == class_name:
      return cls
  raise ValueError(f"no registered model class {class_name!r}")


def _class_facts(cls: type) -> dict[str, Any]:
  from vit_spectral.models import build  # pylint: disable=import-outside-toplevel
  return {"defaults": encode(build.live_defaults(cls)),
          "config_keys": {k: list(v) for k, v in build.config_keys(cls).items()},
          "block_options": build.block_options(cls),
          "required": build.required_keys(cls),
          "block_defaults": encode(dict(getattr(cls, "BLOCK_DEFAULTS", {})))}


def model_defaults(class_name: str) -> dict[str, Any]:
  """Every `config.model` key of the class at its default (placeholders fresh)."""
  return decode(model_facts(class_name)["defaults"])


def block_spec_fields() -> dict[str, dict[str, Any]]:
  """`BlockSpec`'s fields: name -> {"default": encoded, "type": type name}."""
  return _load()["block_spec"]


def _names(key: str, module: str, registered: str) -> tuple[str, ...]:
  """The catalogued names under `key`, with those the live registry `module`
  holds (its function `registered`) when it is imported."""
  names = set(_load()[key])
  if _loaded(module):
    names |= set(getattr(sys.modules[module], registered)())
  return tuple(sorted(names))


class CatalogFacts:
  """The facts `spec_checks.check_block` needs, from `catalog.json`."""

  def attention(self, name: str) -> AttentionFacts:
    catalogued = _load()["attentions"]
    if name in catalogued:
      entry = catalogued[name]
      return AttentionFacts(entry["class"], entry["options"], entry["updates_prefix_only"],
                            entry["mixes_skip"], entry["stateful"], entry["ranges"])
    names = self.attention_names
    if name in names:   # registered by the user's own code: read it live
      # pylint: disable=import-outside-toplevel
      from vit_spectral.attention import registry
      from vit_spectral.models import specs
      return specs.attention_facts(registry.get_attention(name))
    raise ValueError(
        f"model.attention.name={name!r} is not a registered attention variant"
        f"{did_you_mean(name, names)}; choose one of {list(names)}")

  @property
  def attention_names(self) -> tuple[str, ...]:
    return _names("attentions", "vit_spectral.attention.registry", "registered_attentions")

  @property
  def norms(self) -> tuple[str, ...]:
    return _names("norms", "vit_spectral.layers.norms", "registered_norms")

  @property
  def activations(self) -> tuple[str, ...]:
    return tuple(_load()["activations"])

  @property
  def feat_scale_forms(self) -> tuple[str, ...]:
    return tuple(_load()["feat_scale_forms"])

  @property
  def initializers(self) -> tuple[str, ...]:
    return _names("initializers", "vit_spectral.layers.initializers", "registered_initializers")

  @property
  def dtypes(self) -> tuple[str, ...]:
    return tuple(_load()["dtypes"])


FACTS = CatalogFacts()


def live() -> dict[str, Any]:
  """The same facts, computed from the registries (imports JAX and Flax)."""
  # pylint: disable=import-outside-toplevel
  import dataclasses
  import typing

  from vit_spectral.attention import get_attention, registered_attentions
  from vit_spectral.layers.feat_scale import FEAT_SCALE_FORMS
  from vit_spectral.layers.initializers import registered_initializers
  from vit_spectral.layers.mlp import MLP_ACTIVATIONS
  from vit_spectral.layers.norms import registered_norms
  from vit_spectral.models import backbone, build, specs
  from vit_spectral.models.vit import ViT

  classes = {"ViT": ViT}
  variants = {}
  for name in backbone.registered_model_names():
    cls, fields = backbone.model_entry(name)
    classes[cls.__name__] = cls
    variants[name] = {"class": cls.__name__, "fields": encode(fields)}
  models = {name: _class_facts(cls) for name, cls in sorted(classes.items())}
  hints = typing.get_type_hints(specs.BlockSpec)
  block_spec = {}
  for f in dataclasses.fields(specs.BlockSpec):
    if f.name in specs.BlockSpec.SET_BY_RUN:   # the run's, never the config's
      continue
    default = (f.default_factory() if f.default is dataclasses.MISSING else f.default)
    if f.name in ("dtype", "param_dtype"):
      default = build.dtype_name(default)
    block_spec[f.name] = {"default": encode(default), "type": specs.type_name(hints[f.name])}
  attentions = {}
  for name in registered_attentions():
    entry = specs.attention_facts(get_attention(name))
    attentions[name] = {"class": entry.class_name, "options": dict(entry.options),
                        "updates_prefix_only": entry.updates_prefix_only,
                        "mixes_skip": entry.mixes_skip, "stateful": entry.stateful,
                        "ranges": dict(entry.ranges)}
  return {"models": models, "variants": variants, "block_spec": block_spec,
          "attentions": attentions, "norms": list(registered_norms()),
          "activations": list(MLP_ACTIVATIONS), "feat_scale_forms": list(FEAT_SCALE_FORMS),
          "initializers": list(registered_initializers()), "dtypes": list(build.DTYPE_NAMES)}


def write(path: str = PATH) -> None:
  """Writes `live()` to `path` (the committed `catalog.json` by default)."""
  with open(path, "w", encoding="utf-8") as f:
    json.dump(live(), f, indent=1, sort_keys=True)
    f.write("\n")
  _load.cache_clear()


if __name__ == "__main__":
  write()
  print(f"wrote {PATH}")
