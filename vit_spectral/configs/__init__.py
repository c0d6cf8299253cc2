"""The shipped recipes: one module per recipe, `get_config(arg) -> ConfigDict`.

They install with the package, so `train.py` (or the installed
`vit-spectral-train`) finds them by name: `--config=digits_vit` is
`--config=<this folder>/digits_vit.py`. In a checkout, `configs/` at the top is
a link to this folder. Modules without `get_config` (`common`, `cifar_recipes`,
`lipsformer_parts`) hold the pieces the recipes share.
"""

from __future__ import annotations

import ast
import os

__all__ = ["recipe_names", "recipe_path", "recipe_summary"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def recipe_names() -> list[str]:
  """Names of the recipe modules (the ones that define `get_config`)."""
  names = []
  for file in sorted(os.listdir(_HERE)):
    if file.endswith(".py") and not file.startswith("_"):
      with open(os.path.join(_HERE, file), encoding="utf-8") as f:
        if "\ndef get_config(" in f.read():
          names.append(file[:-3])
  return names


def recipe_path(name: str) -> str:
  """The file of recipe `name` (e.g. "digits_vit").

  Raises:
    ValueError: `name` is not a shipped recipe (the message lists them).
  """
  if name not in recipe_names():
    raise ValueError(f"unknown recipe {name!r}; the shipped recipes are "
                     f"{', '.join(recipe_names())} (or pass a config file path)")
  return os.path.join(_HERE, f"{name}.py")


def recipe_summary(name: str) -> str:
  """The first paragraph of recipe `name`'s docstring, as one line (read with
  `ast`, without importing the recipe: no JAX or TensorFlow).

  Raises:
    ValueError: `name` is not a shipped recipe (as `recipe_path`).
  """
  with open(recipe_path(name), encoding="utf-8") as f:
    docstring = ast.get_docstring(ast.parse(f.read())) or ""
  return " ".join(docstring.split("\n\n")[0].split())
