"""`--config.a.b=value`: one field of the config, set from the command line.

Every field of every section is settable, the options of the attention
variant and of the block included, although a recipe writes only those it
changes (`model.attention` is `{'name': ...}` plus the options it sets,
`model.block` the block options it sets):

  --config.optim.learning_rate=1e-3
  --config.model.block.feat_scale=True          (any `BlockSpec` block option)
  --config.model.attention.name=hopfield --config.model.attention.alpha=0.5
                                                (the options of the variant
                                                 named, after every override)
  --config.input.data_dir=None                  (a field that may be None)
  --config.model.block="{'feat_scale': True}"   (a section, whole)
  --config.model.variant=Ti/2                   (the named model: its fields
                                                 replace the recipe's, except
                                                 those set on the command line)

A value is read as the field's type (an option's type from its class:
`Attention.config_options`, `BlockSpec`'s annotations); a bare `--config.a.b` is True and `--noconfig.a.b`
False. A mistake raises `OverrideError`, one line naming the flag, the
nearest valid name and the valid ones. The last override of a field wins.

An option's type is read from the live classes (importing JAX and Flax,
about a second, when an override needs one); no JAX backend starts and no
TensorFlow is imported.
"""

from __future__ import annotations

import ast
import re
import typing
from typing import Any, Sequence

from absl import flags
from ml_collections import config_dict
from ml_collections.config_flags import tuple_parser

from vit_spectral.names import did_you_mean
from vit_spectral.settings import scalar_type

__all__ = ["OverrideError", "apply_overrides", "split_overrides"]

# `--config.a.b=value`, `--config.a.b` and `--noconfig.a.b` (booleans).
OVERRIDE = re.compile(r"^--?(?P<no>no)?config\.(?P<path>[^=]+)(?:=(?P<value>.*))?$", re.S)
_PARSERS = {int: flags.IntegerParser(), float: flags.FloatParser(),
            bool: flags.BooleanParser(), tuple: tuple_parser.TupleParser()}
TYPE_NAMES = {int: "an int", float: "a float", bool: "true or false", str: "a string",
              tuple: "a tuple, e.g. '(1, 2)'",
              config_dict.ConfigDict: "a dict, e.g. \"{'a': 1}\""}


class OverrideError(ValueError):
  """A `--config.a.b=value` that cannot be applied; the message is one line."""


def split_overrides(argv: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
  """(argv without the overrides, (path, text) of each override in order; a
  bare boolean's text is "true", `--noconfig.a.b`'s "false")."""
  rest, found = [], []
  for arg in argv:
    match = OVERRIDE.match(arg)
    if not match:
      rest.append(arg)
      continue
    text = match["value"]
    if text is None:
      text = "false" if match["no"] else "true"
    found.append((match["path"], text))
  return rest, found


def apply_overrides(config: config_dict.ConfigDict,
                    overrides: Sequence[tuple[str, str]]) -> None:
  """Sets each (path, text) of `overrides` in `config`, in order.

  Raises:
    OverrideError: a path that names no field, a value of the wrong type, a
      None for a field that cannot be None, a `model.variant` of another model
      class than the recipe's (the message names that class's recipes).
  """
  recipe_variant = config.model.get("variant") if "model" in config else None
  for path, text in overrides:
    section, field, kind = _locate(config, path, overrides)
    if text == "None":
      value = None
      if field in section and not _may_be_none(section, field):
        raise OverrideError(f"--config.{path}=None: config.{path} cannot be None; it "
                            f"takes {TYPE_NAMES.get(kind, kind)}")
    else:
      value = _parse(text, kind, path)
    with config.unlocked():
      section[field] = value
  if any(path == "model.variant" for path, _ in overrides) and config.model.variant is not None:
    _take_variant(config, recipe_variant, {path for path, _ in overrides})


def _take_variant(config: config_dict.ConfigDict, recipe_variant: str | None,
                  overridden: set[str]) -> None:
  """`--config.model.variant=NAME`: the fields NAME defines replace the
  recipe's (set to None, so the model plan fills them in from NAME), except
  those the command line sets itself; "block" and "attention" keep the
  recipe's options over NAME's (`models.build.merge_variant`)."""
  from vit_spectral.models.build import model_class, model_entry  # pylint: disable=import-outside-toplevel
  name = config.model.variant
  try:
    cls, fields = model_entry(name)
  except ValueError as e:
    raise OverrideError(str(e)) from None
  class_name, recipe_class = cls.__name__, model_class(recipe_variant).__name__
  if class_name != recipe_class:
    raise OverrideError(
        f"--config.model.variant={name}: {name} is a {class_name} and this recipe's model a "
        f"{recipe_class}, whose fields a {class_name} does not take; start from a "
        f"{class_name} recipe: {', '.join(_recipes_of(class_name)) or '(none shipped)'}")
  with config.unlocked():
    for field in fields:
      if field not in ("block", "attention") and f"model.{field}" not in overridden:
        config.model[field] = None


def _recipes_of(class_name: str) -> list[str]:
  """The shipped recipes whose model is a `class_name` (on the error path only:
  it reads every recipe, about 0.2 s)."""
  # pylint: disable=import-outside-toplevel
  import importlib

  from vit_spectral.configs import recipe_names
  from vit_spectral.models.build import model_class
  found = []
  for recipe in recipe_names():
    model = importlib.import_module(f"vit_spectral.configs.{recipe}").get_config().model
    if model_class(model.get("variant")).__name__ == class_name:
      found.append(f"--config={recipe}")
  return found


def _may_be_none(section: config_dict.ConfigDict, field: str) -> bool:
  """A typed placeholder (`settings.to_config`) or a field that holds None."""
  held = dict(section.items(preserve_field_references=True))[field]
  return isinstance(held, config_dict.FieldReference) or held is None


def _parse(text: str, kind: Any, path: str) -> Any:
  if kind is config_dict.ConfigDict or kind is dict:
    try:
      value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
      value = None
    if not isinstance(value, dict):
      raise OverrideError(f"--config.{path}={text}: config.{path} takes "
                          f"{TYPE_NAMES[config_dict.ConfigDict]}, not {text!r}")
    return value
  if kind is str or kind is None:
    return text
  parser = _PARSERS.get(kind)
  if parser is None:   # a field of another type: a Python literal
    try:
      return ast.literal_eval(text)
    except (ValueError, SyntaxError):
      return text
  try:
    return parser.parse(text)
  except (ValueError, SyntaxError):
    raise OverrideError(f"--config.{path}={text}: config.{path} takes "
                        f"{TYPE_NAMES.get(kind, kind)}, not {text!r}") from None


def _locate(config, path: str, overrides) -> tuple[Any, str, Any]:
  """(the section holding `path`, the field's name, its type). A field the
  section does not hold yet is found among the attention variant's options
  (`model.attention`) or the block options (`model.block`)."""
  parts = path.split(".")
  section = config
  for depth, part in enumerate(parts[:-1]):
    where = ".".join(["config", *parts[:depth]])
    if not isinstance(section, config_dict.ConfigDict):
      raise OverrideError(f"--config.{path}: {where} is a {type(section).__name__}, "
                          "not a section with fields")
    if part not in section:
      _unknown(path, where, part, sorted(section.keys()))
    section = section[part]
  where = "config." + ".".join(parts[:-1]) if len(parts) > 1 else "config"
  field = parts[-1]
  if not isinstance(section, config_dict.ConfigDict):
    raise OverrideError(f"--config.{path}: {where} is a {type(section).__name__}, "
                        "not a section with fields")
  if field in section:
    kind = section.get_type(field)
    if kind is type(None):
      kind = _nested_type(config, parts, overrides)
    return section, field, kind
  options = _nested_options(config, parts, overrides)
  if options is None or field not in options[1]:
    valid = sorted({*section.keys(), *(options[1] if options else ())})
    _unknown(path, where, field, valid, options[0] if options else "")
  return section, field, _kind(options[1][field])


def _unknown(path: str, where: str, part: str, fields: list[str], owner: str = "") -> None:
  if not fields:
    raise OverrideError(
        f"--config.{path}: {where} sets no fields in this config; set it whole, e.g. "
        f"--config.{where[len('config.'):]}=\"{{'{part}': ...}}\"")
  what = f"its fields ({owner})" if owner else "its fields"
  raise OverrideError(f"--config.{path}: {where} has no field {part!r}"
                      f"{did_you_mean(part, fields)}; {what}: {', '.join(fields)}")


def _final(config, path: str, overrides) -> Any:
  """The value at `path` once every override is applied (the last override
  of it, or the config's)."""
  for over, text in reversed(overrides):
    if over == path:
      return None if text == "None" else text
  value = config
  for part in path.split("."):
    if not isinstance(value, config_dict.ConfigDict) or part not in value:
      return None
    value = value[part]
  return value


def _nested_options(config, parts: list[str], overrides) -> tuple[str, dict[str, Any]] | None:
  """(owner, option -> type) that `model.attention` or `model.block` may hold
  (the attention class's `config_options`, the block options of the model
  class), or None for another section."""
  # pylint: disable=import-outside-toplevel
  from vit_spectral.attention import get_attention
  from vit_spectral.models.build import block_options, model_class
  from vit_spectral.models.specs import BlockSpec
  if parts[:-1] == ["model", "attention"]:
    name = _final(config, "model.attention.name", overrides) or "dot_product"
    try:
      cls = get_attention(name)
    except ValueError as e:
      raise OverrideError(f"--config.{'.'.join(parts)}: {e}") from None
    return f"name, and the options of {cls.__name__}", dict(cls.config_options(), name=str)
  if parts[:-1] == ["model", "block"]:
    try:
      cls = model_class(_final(config, "model.variant", overrides))
    except ValueError as e:
      raise OverrideError(f"--config.{'.'.join(parts)}: {e}") from None
    hints = typing.get_type_hints(BlockSpec)
    return (f"the block options of the {cls.__name__}",
            {name: scalar_type(hints[name]) for name in block_options(cls)})
  return None


def _kind(hint: Any) -> Any:
  """An option's type as `_parse` reads it (None: the text as it is)."""
  return None if hint is Any else hint


def _nested_type(config, parts: list[str], overrides) -> Any:
  """The type of an option that holds None (its declared type), or None."""
  options = _nested_options(config, parts, overrides)
  return _kind(options[1].get(parts[-1], Any)) if options else None
