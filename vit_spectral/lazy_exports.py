"""A package's names, imported from their modules when first used (PEP 562).

The command line builds and checks configs before JAX, Flax or TensorFlow is
imported (`--help`, `--print_config` and config errors answer in well under
1.5 s), so the packages whose modules import them (`vit_spectral.models`,
`vit_spectral.data`) import nothing at `import vit_spectral.models`:

  __getattr__, __dir__ = lazy_exports.exports(__name__, {"ViT": "vit", ...})

`from vit_spectral.models import ViT` then imports `vit_spectral.models.vit`.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def exports(package: str, names: Mapping[str, str]
            ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
  """(`__getattr__`, `__dir__`) for `package`: each of `names` (name ->
  submodule, relative to `package`) is that submodule's attribute, and a
  submodule's own name is the submodule."""

  def getattr_(name: str) -> Any:
    if name in names:
      return getattr(importlib.import_module(f"{package}.{names[name]}"), name)
    try:
      return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as e:
      if e.name != f"{package}.{name}":
        raise
    raise AttributeError(f"module {package!r} has no attribute {name!r}")

  def dir_() -> list[str]:
    return sorted(names)

  return getattr_, dir_
