"""Checks the installed vit_spectral, run from outside the checkout.

  VENV/bin/python check_installed.py CHECKOUT_DIR

Imports every public module of the installed package (a name with no part
starting with "_"), loads every shipped recipe's config, and builds every
registered model name (`vit_spectral.models.MODEL_NAMES`) with `jax.eval_shape`
of its init (shapes only: no parameters are computed). Fails when the package
is imported from CHECKOUT_DIR instead of the installation.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys


def check_not_from_checkout(checkout: str) -> str:
  import vit_spectral  # pylint: disable=import-outside-toplevel
  installed = os.path.dirname(os.path.realpath(vit_spectral.__file__))
  if installed.startswith(os.path.realpath(checkout) + os.sep):
    raise SystemExit(f"vit_spectral was imported from the checkout ({installed}), "
                     "not from the installed wheel")
  return installed


def import_public_modules() -> list[str]:
  """Imports vit_spectral and every public submodule; returns their names."""
  import vit_spectral  # pylint: disable=import-outside-toplevel
  names = ["vit_spectral"]
  for info in pkgutil.walk_packages(vit_spectral.__path__, "vit_spectral.",
                                    onerror=lambda name: sys.exit(f"cannot import {name}")):
    if not any(part.startswith("_") for part in info.name.split(".")):
      importlib.import_module(info.name)
      names.append(info.name)
  return names


def load_recipes() -> list[str]:
  """get_config() of every shipped recipe, through its installed file."""
  from vit_spectral import configs  # pylint: disable=import-outside-toplevel
  names = configs.recipe_names()
  for name in names:
    module = importlib.import_module(f"vit_spectral.configs.{name}")
    if not os.path.samefile(module.__file__, configs.recipe_path(name)):
      raise SystemExit(f"recipe {name}: recipe_path gives {configs.recipe_path(name)}, "
                       f"the module is {module.__file__}")
    module.get_config()
  return names


def build_registered_models() -> dict[str, int]:
  """{model name: parameter count} for every registered name, shapes only."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from vit_spectral.configs import common  # pylint: disable=import-outside-toplevel
  from vit_spectral.models import MODEL_NAMES, build_model  # pylint: disable=import-outside-toplevel
  from vit_spectral.training import trainer  # pylint: disable=import-outside-toplevel
  counts = {}
  for name in MODEL_NAMES:
    model = build_model(common.model_config(variant=name), num_classes=10)
    side = 2 * model.patch_size  # 4 patches: enough to build every layer.
    images = jax.ShapeDtypeStruct((1, side, side, 3), jnp.float32)
    shapes = jax.eval_shape(model.init, jax.random.key(0), images)
    counts[name] = trainer.count_params(shapes["params"])
  return counts


def main(argv: list[str]) -> None:
  if len(argv) != 2:
    raise SystemExit("usage: check_installed.py CHECKOUT_DIR")
  installed = check_not_from_checkout(argv[1])
  modules = import_public_modules()
  recipes = load_recipes()
  counts = build_registered_models()
  print(f"installed package: {installed}")
  print(f"imported {len(modules)} public modules; loaded {len(recipes)} recipes")
  print(f"built {len(counts)} registered models: " +
        ", ".join(f"{name} {count / 1e6:.1f}M" for name, count in counts.items()))


if __name__ == "__main__":
  main(sys.argv)
