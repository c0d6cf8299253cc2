"""What is registered, read from the registries: `python -m vit_spectral.registries`.

Prints the attention variants (`attention.registered_attentions`: name, class,
module, the first line of the class's docstring) and the model names
(`models.backbone.registered_model_names`: name, class, fields) as Markdown
tables. The docs point here instead of keeping a row per variant or backbone
by hand; a variant or backbone of one's own appears once its module is
imported (`--import=my_module`).
"""

from __future__ import annotations

import argparse
import importlib
from typing import Sequence

__all__ = ["attention_rows", "main", "model_rows", "tables"]


def _summary(cls: type) -> str:
  """The first line of `cls`'s docstring ("" without one)."""
  return next(iter((cls.__doc__ or "").strip().splitlines()), "")


def attention_rows() -> list[tuple[str, str, str, str]]:
  """(name, class, module, summary) of every registered attention variant."""
  from vit_spectral.attention import get_attention, registered_attentions  # pylint: disable=import-outside-toplevel
  classes = {name: get_attention(name) for name in registered_attentions()}
  return [(name, cls.__name__, cls.__module__, _summary(cls)) for name, cls in classes.items()]


def model_rows() -> list[tuple[str, str, str]]:
  """(name, class, fields) of every registered model name."""
  from vit_spectral.models import backbone  # pylint: disable=import-outside-toplevel
  rows = []
  for name in backbone.registered_model_names():
    cls, fields = backbone.model_entry(name)
    rows.append((name, cls.__name__, ", ".join(f"{k}={v}" for k, v in fields.items())))
  return rows


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
  lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(f"`{c}`" if i < 2 else c for i, c in enumerate(row)) + " |"
            for row in rows]
  return "\n".join(lines)


def tables() -> str:
  """Both registries as Markdown."""
  return "\n\n".join([
      "## Attention variants (`config.model.attention.name`)",
      _table(("name", "class", "module", "what"), attention_rows()),
      "## Model names (`config.model.variant`)",
      _table(("name", "class", "fields"), model_rows())])


def main(argv: Sequence[str] | None = None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--import", dest="modules", action="append", default=[],
                      help="a module of one's own that registers variants or backbones")
  args = parser.parse_args(argv)
  for module in args.modules:
    importlib.import_module(module)
  print(tables())


if __name__ == "__main__":
  main()
