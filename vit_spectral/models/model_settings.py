"""`config.model` written and checked without JAX: `model_config`, `model_plan`.

A recipe writes its model section with `model_config(...)`; a run (and
`--print_config`, before anything of JAX is imported) checks it with
`model_plan`, which sorts every key into the class's own fields, the block's
and the encoder's, fills in the named variant and runs every check the specs
make (`spec_checks`), from the registries' facts as `models.catalog` keeps
them. `models.build.model_kwargs` turns the plan into the real specs and
classes. What depends on the input (the patch size against the image, a
window against the token grid) is checked by the model itself, in the run's
abstract init (`training.config_checks.validate_model`).
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Mapping

import ml_collections
from ml_collections import config_dict

from vit_spectral.models import catalog, model_checks
from vit_spectral.models.segments import check_overrides
from vit_spectral.models.spec_checks import EncoderSpec, check_attention_options, check_block
from vit_spectral.models.variants import MODEL_NAMES
from vit_spectral.names import did_you_mean
from vit_spectral.settings import plain

__all__ = ["ModelPlan", "check_known", "check_model", "merge_variant", "model_config",
           "model_plan"]


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
  class_name = catalog.model_class_name(variant)
  base = catalog.model_defaults(class_name)
  check_known(fields, base, "config.model", class_name)
  if variant is not None and variant not in MODEL_NAMES:
    fields = merge_variant(catalog.variant_entry(variant)[1], fields)
    if "attention" in fields and "name" not in fields["attention"]:
      fields["attention"] = dict(base["attention"], **fields["attention"])
  # None keeps a placeholder typed (overridable from the command line).
  base.update({k: v for k, v in fields.items()
               if v is not None or not isinstance(base[k], config_dict.FieldReference)})
  return ml_collections.ConfigDict(base)


@dataclasses.dataclass(frozen=True)
class ModelPlan:
  """`config.model`, checked and sorted (`model_plan`).

  Attributes:
    class_name: the model class ("ViT", "Swin", "CaiT", "CSwin").
    model: the class's own fields.
    block: every `BlockSpec` field (dtypes by name, "float32", ...).
    encoder: the `EncoderSpec`.
    layer_overrides: `config.model.layer_overrides` (plain dicts), checked
      for their keys and options.
  """
  class_name: str
  model: Mapping[str, Any]
  block: Mapping[str, Any]
  encoder: EncoderSpec
  layer_overrides: tuple[Mapping[str, Any], ...] = ()


def _block_defaults() -> dict[str, Any]:
  return {name: catalog.decode(entry["default"])
          for name, entry in catalog.block_spec_fields().items()}


def model_plan(model_config: Mapping[str, Any], facts: Any = catalog.FACTS) -> ModelPlan:
  """Checks `config.model` and sorts it (`ModelPlan`). Keys it lacks (or
  sets to None) keep the variant's fields, then the defaults.

  Raises:
    ValueError: an unknown key in `model`, `model.attention`, `model.block`
      or a layer override (the error names the nearest and lists the valid
      ones), an unknown variant, attention, norm, initializer or dtype, shape
      fields neither set nor given by a variant, or a value out of its range
      (the specs' checks, `spec_checks`).
  """
  cfg = {k: v for k, v in dict(plain(model_config)).items() if v is not None}
  variant = cfg.pop("variant", None)
  class_name = catalog.model_class_name(variant)
  known = catalog.model_facts(class_name)
  keys = known["config_keys"]
  check_known(cfg, ["variant", "attention", "block", *keys], "config.model", class_name)
  if variant is not None:
    cfg = merge_variant(catalog.variant_entry(variant)[1], cfg)
  attention = dict(plain(cfg.pop("attention", {})))
  block = _block_defaults()
  block.update(catalog.decode(known["block_defaults"]))
  block["attention"] = attention.pop("name", block["attention"])
  block["attention_kwargs"] = attention
  options = dict(plain(cfg.pop("block", {})))
  check_known(options, known["block_options"], "model.block",
              f"BlockSpec (the other fields are set by the {class_name} itself)")
  block.update(options)
  overrides = tuple(plain(o) for o in cfg.pop("layer_overrides", ()))
  values: dict[str, dict[str, Any]] = {"model": {}, "encoder": {}, "block": block}
  for key, value in cfg.items():
    where, field = keys[key]
    if field in ("dtype", "param_dtype") and value not in facts.dtypes:
      raise ValueError(f"model.{key}={value!r}{did_you_mean(str(value), facts.dtypes)}; "
                       f"choose one of {list(facts.dtypes)}")
    values[where][field] = value
  missing = [k for k in known["required"] if k not in cfg]
  if missing:
    raise ValueError(f"model config needs model.variant or explicit {missing}")
  if block["kernel_init"] not in facts.initializers:
    raise ValueError(f"model.kernel_init={block['kernel_init']!r} is not a registered "
                     f"initializer{did_you_mean(block['kernel_init'], facts.initializers)}; "
                     f"choose one of {list(facts.initializers)}")
  check_block(block, facts)
  encoder = EncoderSpec(**values["encoder"])
  if overrides:
    _check_overrides(overrides, values["model"].get("depth"), block, facts)
  return ModelPlan(class_name, values["model"], block, encoder, overrides)


def _check_overrides(overrides, depth: int | None, block: Mapping[str, Any], facts: Any) -> None:
  """Each override's keys, layer range, attention options and block keys."""
  if depth is not None:
    check_overrides(overrides, depth)
  valid = [name for name in catalog.block_spec_fields()
           if name not in ("attention", "attention_kwargs")]
  for n, override in enumerate(overrides):
    override = plain(override)
    attention = dict(plain(override.get("attention") or {}))
    name = attention.pop("name", block["attention"])
    check_attention_options(facts.attention(name), attention,
                            f"model.layer_overrides[{n}].attention")
    check_known(plain(override.get("block") or {}), valid, f"model.layer_overrides[{n}].block",
                "BlockSpec (the attention goes in the override's 'attention' dict)")


def check_model(plan: ModelPlan, image_size: int, facts: Any = catalog.FACTS) -> None:
  """The model class's own checks (`models.model_checks`, which the class runs
  when called) on the planned fields and an image_size² image: the patch size
  against the image, windows against the token grids, the class's choices.
  A class without an entry in `model_checks.CHECKS` (one of the user's own)
  is checked by its own init."""
  check = model_checks.CHECKS.get(plan.class_name)
  if check is None:
    return
  keys = catalog.model_facts(plan.class_name)["config_keys"]
  defaults = catalog.model_defaults(plan.class_name)
  fields = {field: defaults[key] for key, (where, field) in keys.items() if where == "model"}
  fields = {k: (None if isinstance(v, config_dict.FieldReference) else v)
            for k, v in fields.items()}
  fields.update(plan.model)
  model = types.SimpleNamespace(**fields, block=types.SimpleNamespace(**plan.block))
  check(model, image_size, image_size, facts)
