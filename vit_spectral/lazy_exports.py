"""A package's names, imported from their modules when first used (PEP 562).

The command line builds and checks configs before JAX, Flax or TensorFlow is
imported (`--help`, `--print_config` and config errors answer in well under
1.5 s), so the packages whose modules import them (`vit_spectral.models`,
`vit_spectral.data`) import nothing at `import vit_spectral.models`:

  __getattr__, __dir__ = lazy_exports.exports(__name__, {"ViT": "vit", ...})

`from vit_spectral.models import ViT` then imports `vit_spectral.models.vit`.
`alias_modules` keeps a module that moved importable at its old path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from typing import Any, Callable, Mapping


class _Package(types.ModuleType):
  """A package whose exported name is also a submodule's name
  (`pretrained.timm_preprocessing`, the function, in the module of that name;
  `data.input_settings`, a moved module's old path): when the import system
  sets the module as the package's attribute (on its first import, from
  anywhere), the exported name keeps its meaning."""

  def __setattr__(self, name: str, value: Any) -> None:
    exports = self.__dict__.get("_lazy_exports", {})
    if isinstance(value, types.ModuleType) and name in exports:
      value = getattr(importlib.import_module(_module_path(self.__name__, exports[name])), name)
    super().__setattr__(name, value)


def _module_path(package: str, module: str) -> str:
  """A submodule of `package` by its relative name, or a module of another
  wing by its full name ("vit_spectral...": a name that moved, kept where
  users import it)."""
  return module if module.startswith("vit_spectral.") else f"{package}.{module}"


def exports(package: str, names: Mapping[str, str]
            ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
  """(`__getattr__`, `__dir__`) for `package`: each of `names` (name ->
  submodule, relative to `package`, or a full module name) is that module's attribute, and a
  submodule's own name is the submodule (unless it is also an exported name:
  then the export)."""
  module = sys.modules[package]
  module.__class__ = _Package
  module.__dict__["_lazy_exports"] = dict(names)

  def getattr_(name: str) -> Any:
    if name in names:
      value = getattr(importlib.import_module(_module_path(package, names[name])), name)
      setattr(module, name, value)
      return value
    try:
      return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as e:
      if e.name != f"{package}.{name}":
        raise
    raise AttributeError(f"module {package!r} has no attribute {name!r}")

  def dir_() -> list[str]:
    return sorted(names)

  return getattr_, dir_


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Finds a moved module's old path (old -> new full names) and gives the new
  module under it, with a DeprecationWarning naming the new path."""

  def __init__(self, moved: Mapping[str, str]):
    self.moved = dict(moved)

  def find_spec(self, fullname, path=None, target=None):  # pylint: disable=unused-argument
    if fullname not in self.moved:
      return None
    return importlib.util.spec_from_loader(fullname, self)

  def create_module(self, spec):
    # The warning points at the line that imported the old path: `warnings`
    # skips the import system's bootstrap frames, not `importlib.import_module`.
    level, frame = 2, sys._getframe(1)  # pylint: disable=protected-access
    while frame is not None and "importlib" in frame.f_code.co_filename:
      level += "_bootstrap" not in frame.f_code.co_filename
      frame = frame.f_back
    warnings.warn(f"{spec.name} moved to {self.moved[spec.name]}; import it from there",
                  DeprecationWarning, stacklevel=level)
    return importlib.import_module(self.moved[spec.name])

  def exec_module(self, module):
    pass


def alias_modules(moved: Mapping[str, str]) -> None:
  """Makes each old module path (key) import the module now at its value."""
  sys.meta_path.append(_MovedModules(moved))
