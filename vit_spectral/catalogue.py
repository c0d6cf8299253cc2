r"""vit-spectral-list: what can be built, read from the live registries.

  vit-spectral-list                    everything below
  vit-spectral-list attention          the attention variants and their options
  vit-spectral-list models backbones   several sections
  vit-spectral-list attention --import=my_variants   with a module of one's own
  python -m vit_spectral.catalogue ...   (the same command)

Sections (nothing here is kept by hand: each is read from where its names are
declared, so a variant or backbone of one's own shows once its module is
imported):
  models     the registered model names (`config.model.variant`,
             `models.backbone.registered_model_names`) with their class and fields
  attention  the attention variants (`config.model.attention.name`,
             `attention.registered_attentions`): the class's summary and its own
             options with their defaults; the options every variant shares once
  backbones  the model classes behind the names, with their summary
  recipes    the shipped recipes (`--config=NAME`, `configs.recipe_names`) with
             the first paragraph of their docstring

An unknown section or a module that cannot be imported is one line and exit
code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import sys
import textwrap
from typing import Any, Callable, Sequence

from vit_spectral import errors
from vit_spectral.names import did_you_mean

__all__ = ["SECTIONS", "attention_entries", "backbone_entries", "catalogue", "main",
           "model_entries", "recipe_entries", "run"]

PROG = "vit-spectral-list"
WIDTH = 78


@dataclasses.dataclass(frozen=True)
class Entry:
  """One listed name: its one-line description and, for attention variants,
  its options as "name=default" texts."""

  name: str
  description: str
  options: tuple[str, ...] = ()


def summary(obj: Any) -> str:
  """The first paragraph of `obj`'s docstring, as one line ("" without one)."""
  return " ".join((inspect.getdoc(obj) or "").split("\n\n")[0].split())


def _default(field: dataclasses.Field) -> str:
  if field.default is not dataclasses.MISSING:
    value = field.default
  elif field.default_factory is not dataclasses.MISSING:
    value = field.default_factory()
  else:
    return "(required)"
  return getattr(value, "__name__", None) or repr(value)   # jnp.float32 -> float32


def _options(cls: type) -> dict[str, dataclasses.Field]:
  """The config options of an attention class (`Attention.config_options`)
  -> their dataclass fields."""
  fields = {f.name: f for f in dataclasses.fields(cls)}
  return {name: fields[name] for name in cls.config_options()}


def _own_options(cls: type, shared: dict[str, dataclasses.Field]) -> tuple[str, ...]:
  """`cls`'s options that are not the shared ones, or differ from them in default."""
  return tuple(f"{name}={_default(field)}" for name, field in _options(cls).items()
               if name not in shared or _default(field) != _default(shared[name]))


def shared_attention_options() -> tuple[str, ...]:
  """The options every variant takes (the base `Attention`'s), "name=default"."""
  from vit_spectral.attention.base import Attention  # pylint: disable=import-outside-toplevel
  return tuple(f"{name}={_default(field)}" for name, field in _options(Attention).items())


def attention_entries() -> list[Entry]:
  """Every registered attention variant: its class's summary and own options."""
  from vit_spectral.attention import get_attention, registered_attentions  # pylint: disable=import-outside-toplevel
  from vit_spectral.attention.base import Attention  # pylint: disable=import-outside-toplevel
  shared = _options(Attention)
  return [Entry(name, f"{summary(cls)} ({cls.__module__})",
                _own_options(cls, shared))
          for name, cls in ((n, get_attention(n)) for n in registered_attentions())]


def model_entries() -> list[Entry]:
  """Every registered model name: its class and fields."""
  from vit_spectral import registries  # pylint: disable=import-outside-toplevel
  return [Entry(name, f"{cls}: {fields}") for name, cls, fields in registries.model_rows()]


def backbone_entries() -> list[Entry]:
  """The classes behind the registered model names, in registration order,
  with their summary and how many names each has."""
  from vit_spectral.models import backbone  # pylint: disable=import-outside-toplevel
  names: dict[type, list[str]] = {}
  for name in backbone.registered_model_names():
    names.setdefault(backbone.model_entry(name)[0], []).append(name)
  entries = []
  for cls, found in names.items():
    listed = found[0] if len(found) == 1 else f"{found[0]} ... {found[-1]}"
    entries.append(Entry(cls.__name__, f"{summary(cls)} ({cls.__module__}; "
                         f"{len(found)} model names: {listed})"))
  return entries


def recipe_entries() -> list[Entry]:
  """Every shipped recipe with the first paragraph of its docstring."""
  from vit_spectral import configs  # pylint: disable=import-outside-toplevel
  return [Entry(name, configs.recipe_summary(name)) for name in configs.recipe_names()]


# Section -> (heading, its entries). The order is the listing's.
SECTIONS: dict[str, tuple[str, Callable[[], list[Entry]]]] = {
    "models": ("Model names (config.model.variant)", model_entries),
    "attention": ("Attention variants (config.model.attention.name; own options "
                  "with their defaults)", attention_entries),
    "backbones": ("Backbones (the classes behind the model names)", backbone_entries),
    "recipes": ("Recipes (--config=NAME)", recipe_entries),
}


def _render(entries: Sequence[Entry]) -> list[str]:
  column = max([len(e.name) for e in entries] + [0]) + 2
  lines = []
  for entry in entries:
    lines += textwrap.wrap(entry.description or "-", WIDTH, initial_indent=
                           f"  {entry.name:<{column}}", subsequent_indent=" " * (column + 2))
    if entry.options:
      lines += textwrap.wrap(", ".join(entry.options), WIDTH, initial_indent=" " * (column + 2)
                             + "options: ", subsequent_indent=" " * (column + 11))
  return lines


def catalogue(sections: Sequence[str] = tuple(SECTIONS)) -> str:
  """The listing of `sections` (names of SECTIONS), as text.

  Raises:
    ValueError: an unknown section (the message lists them).
  """
  unknown = [s for s in sections if s not in SECTIONS]
  if unknown:
    raise ValueError(f"unknown section {unknown[0]!r}{did_you_mean(unknown[0], SECTIONS)}; "
                     f"choose from {', '.join(SECTIONS)} (none = all)")
  blocks = []
  for section in sections:
    heading, entries = SECTIONS[section]
    lines = [f"{heading}:", *_render(entries())]
    if section == "attention":
      lines += textwrap.wrap(", ".join(shared_attention_options()), WIDTH,
                             initial_indent="  every variant also takes: ",
                             subsequent_indent="    ")
    blocks.append("\n".join(lines))
  return "\n\n".join(blocks)


def main(argv: Sequence[str] | None = None) -> int:
  """Prints the listing; returns the exit code (2 with one line on a mistake)."""
  parser = argparse.ArgumentParser(
      prog=PROG, description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog="\n".join(__doc__.splitlines()[1:8]))
  parser.add_argument("sections", nargs="*", metavar="SECTION",
                      help=f"any of {', '.join(SECTIONS)} (none = all)")
  parser.add_argument("--import", dest="modules", action="append", default=[],
                      metavar="MODULE",
                      help="a module of one's own that registers variants or backbones")
  args = parser.parse_args(argv)
  try:
    for module in args.modules:
      try:
        importlib.import_module(module)
      except ImportError as e:
        raise ValueError(f"--import={module}: {e}") from e
    text = catalogue(args.sections or tuple(SECTIONS))
  except ValueError as e:
    print(f"{PROG}: {e}", file=sys.stderr)
    return errors.USAGE_EXIT_CODE
  print(text)
  return 0


def run() -> None:
  """The `vit-spectral-list` entry point."""
  sys.exit(main())


if __name__ == "__main__":
  run()
