"""Typed config sections: each section of a config has one owner.

`vit_spectral.sections` declares each section once (`sections.input` for
`config.input`, `sections.optim` for `config.optim`, ...) as a frozen
dataclass: its fields, their defaults (the only place a default is written)
and its checks (`__post_init__`, raising ValueError that names
`<section>.<field>`, the value and what would be valid). Everything else reads
the typed object:

  settings = from_config(OptimSettings, config.optim)   # at the edge, once
  config.optim = to_config(OptimSettings, name="sgd")   # in configs/*.py

`to_config` writes every field into a ConfigDict, so `--config.optim.x=...`
overrides keep working; a field that may be None (`X | None`, X a scalar or a tuple) is a
FieldReference typed X, so it can be overridden from the command line whether
it holds None or a value (and a recipe may set it to None and back).

A section class names itself with the class attribute `SECTION` (e.g.
"input"); error messages use it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Iterable, Mapping, TypeVar

import ml_collections
from ml_collections import config_dict

from vit_spectral.names import did_you_mean

T = TypeVar("T")


def require(condition: bool, message: str) -> None:
  """Raises ValueError(message) unless `condition`."""
  if not condition:
    raise ValueError(message)


def check_choice(value: Any, choices: Iterable[Any], field: str) -> None:
  """`field`'s value must be one of `choices`; the error names the nearest
  and lists them all."""
  choices = list(choices)
  if value not in choices:
    names = [str(c) for c in choices]
    raise ValueError(f"{field}={value!r}{did_you_mean(str(value), names)}; choose one "
                     f"of {choices}")


def check_range(value: float, field: str, low: float | None = None,
                high: float | None = None, *, low_open: bool = False,
                high_open: bool = False) -> None:
  """`low <= value <= high` (a bound that is None is not checked; `*_open`
  makes that bound strict). The error states the interval."""
  ok = True
  if low is not None:
    ok = ok and (value > low if low_open else value >= low)
  if high is not None:
    ok = ok and (value < high if high_open else value <= high)
  left = "-inf" if low is None else f"{low}"
  right = "inf" if high is None else f"{high}"
  interval = f"{'(' if low_open or low is None else '['}{left}, {right}{')' if high_open or high is None else ']'}"
  require(ok, f"{field}={value} must be in {interval}")


def section_name(cls: type) -> str:
  return getattr(cls, "SECTION", cls.__name__)


def field_names(cls: type) -> list[str]:
  return [f.name for f in dataclasses.fields(cls)]


def plain(value: Any) -> Any:
  """ConfigDicts -> dicts and lists -> tuples, recursively (frozen-friendly)."""
  if isinstance(value, (ml_collections.ConfigDict, config_dict.FrozenConfigDict)):
    value = value.to_dict()
  if isinstance(value, Mapping):
    return {k: plain(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return tuple(plain(v) for v in value)
  return value


def from_config(cls: type[T], section: Any, **extra: Any) -> T:
  """A `cls` instance from a config section (ConfigDict, Mapping or None).

  Keys the section lacks take the dataclass defaults; an unknown key raises,
  naming the section and listing its fields. `extra` adds fields that are not
  in the config (e.g. values derived by the caller).
  """
  values = {} if section is None else dict(plain(section))
  names = field_names(cls)
  unknown = sorted(set(values) - set(names))
  require(not unknown, f"config.{section_name(cls)} has unknown fields {unknown}; "
          f"the fields are {sorted(names)}")
  values.update(extra)
  missing = [f.name for f in dataclasses.fields(cls) if f.name not in values
             and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
  require(not missing, f"config.{section_name(cls)}.{missing[0] if missing else ''} is "
          "missing (it has no default)")
  return cls(**values)


def as_settings(cls: type[T], value: Any) -> T:
  """`value` if it already is a `cls`, else `from_config(cls, value)`: lets a
  function accept the typed section or its ConfigDict, converted once."""
  return value if isinstance(value, cls) else from_config(cls, value)


def value_type(hint: Any) -> Any:
  """The type a value of annotation `hint` holds: `X | None` -> X, a generic
  alias -> its origin (`tuple[int, ...]` -> tuple)."""
  args = [a for a in typing.get_args(hint) if a is not type(None)]
  if type(None) in typing.get_args(hint) and len(args) == 1:
    hint = args[0]
  return typing.get_origin(hint) or hint


def scalar_type(hint: Any) -> Any:
  """The type a config value of annotation `hint` is read as from the command
  line: int, float, bool, str or tuple (`value_type`), else Any."""
  kind = value_type(hint)
  return kind if kind in (int, float, bool, str, tuple) else Any


def _placeholder_type(annotation: Any) -> type | None:
  """`str | None` -> str (the type a None default is overridden with); None
  for an annotation that does not admit None."""
  admits_none = typing.get_origin(annotation) in (typing.Union, types.UnionType) and (
      type(None) in typing.get_args(annotation))
  return value_type(annotation) if admits_none and len(typing.get_args(annotation)) == 2 else None


def _config_of(cls: type, values: Mapping[str, Any]) -> ml_collections.ConfigDict:
  """A ConfigDict of `values` (one per field of `cls`): a field that may be
  None (`X | None`, X a scalar or a tuple) is a typed FieldReference, so it can be set to
  None and back from the command line; an int in a float field is a float (so
  the field takes floats)."""
  hints = typing.get_type_hints(cls)
  out = {}
  for name in field_names(cls):
    value = values[name]
    optional = _placeholder_type(hints[name])
    kind = optional or hints[name]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
      value = float(value)
    if optional in (str, int, float, bool, tuple):
      value = config_dict.FieldReference(value, field_type=optional)
    out[name] = value
  return ml_collections.ConfigDict(out)


def to_config(settings: Any, **overrides: Any) -> ml_collections.ConfigDict:
  """The ConfigDict of a section: every field at its value (`settings` an
  instance) or default (`settings` a class), then `overrides`, validated by
  building the dataclass once."""
  cls = settings if isinstance(settings, type) else type(settings)
  instance = cls(**overrides) if isinstance(settings, type) else dataclasses.replace(
      settings, **overrides)
  return _config_of(cls, {name: getattr(instance, name) for name in field_names(cls)})


def defaults_config(cls: type) -> ml_collections.ConfigDict:
  """The ConfigDict of `cls`'s defaults, not validated: for a section whose
  defaults leave a required choice to the recipe (e.g. the run's length)."""
  return _config_of(cls, {f.name: f.default for f in dataclasses.fields(cls)})
