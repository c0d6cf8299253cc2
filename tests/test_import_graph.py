"""The package's import graph: no circle between modules, and no import that
runs back up from a lower wing to a higher one.

Every `import` / `from ... import` of a `vit_spectral` module counts, at
module level or inside a function, and so does every module a package's
`lazy_exports` table names, read from the source (no module is imported). A wing is a subpackage or a top-level module; `WINGS` orders them,
lowest first, and a wing may import its own modules and those of the wings
before it. The one exception is `MOVED_NAMES`: names that moved up a wing and
stay importable where users import them (resolved on attribute access).
"""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "vit_spectral")

WINGS = (
    ("vit_spectral", "names", "errors", "option_ranges", "lazy_exports", "settings", "backends"),
    ("layers",),
    ("attention",),
    ("models",),
    ("pretrained",),
    ("analysis",),
    ("sections",),
    ("data",),
    ("durability",),
    ("training",),
    ("planning",),
    ("configs",),
    ("config_overrides", "registries", "catalogue", "workdir", "analyse", "evaluate",
     "main"),
)
# (module, the higher module it names lazily): a name kept where users import it.
MOVED_NAMES = {
    ("vit_spectral.analysis", "vit_spectral.workdir"),   # analysis.load_workdir
    # models.load_timm, load_big_vision, load_into, LoadReport
    ("vit_spectral.models", "vit_spectral.pretrained.loading"),
    # models.timm_preprocessing, TimmPreprocessing
    ("vit_spectral.models", "vit_spectral.pretrained.timm_preprocessing"),
}


def _modules() -> dict[str, str]:
  found = {}
  for folder, _, files in os.walk(PACKAGE):
    for name in files:
      if name.endswith(".py"):
        path = os.path.join(folder, name)
        module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
        found[module.removesuffix(".__init__")] = path
  return found


def _imports(module: str, path: str, known: set[str]) -> set[str]:
  """The `vit_spectral` modules `module` imports (a `from pkg import name`
  counts as pkg.name where that is a module, else as pkg)."""
  is_package = path.endswith("__init__.py")
  package = module if is_package else module.rpartition(".")[0]
  found = set()
  for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
    if isinstance(node, ast.Import):
      found.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom):
      if node.level:
        parts = package.split(".")[:len(package.split(".")) - node.level + 1]
        source = ".".join(parts + ([node.module] if node.module else []))
      else:
        source = node.module or ""
      for alias in node.names:
        found.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source)
    elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
          and any(getattr(t, "id", None) == "_EXPORTS" for t in node.targets)):
      # `lazy_exports` tables: name -> submodule (relative) or a full module name.
      for value in node.value.values:
        target = value.value
        found.add(target if target.startswith("vit_spectral.") else f"{module}.{target}")
  return {m for m in found if m in known and m != module}


def _graph() -> dict[str, set[str]]:
  modules = _modules()
  return {m: _imports(m, path, set(modules)) for m, path in modules.items()}


def _wing(module: str) -> str:
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else parts[0]


def _rank(module: str) -> int:
  wing = _wing(module)
  for rank, wings in enumerate(WINGS):
    if wing in wings:
      return rank
  raise AssertionError(f"{module}: wing {wing!r} is not placed in WINGS")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """The strongly connected components of more than one module (Tarjan)."""
  index, low, stack, on_stack, found = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in sorted(graph[v]):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = []
      while True:
        w = stack.pop()
        on_stack.discard(w)
        component.append(w)
        if w == v:
          break
      if len(component) > 1:
        found.append(sorted(component))

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return found


def _upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
  return sorted((m, d) for m, deps in graph.items() for d in deps
                if _rank(d) > _rank(m) and (m, d) not in MOVED_NAMES)


def test_no_import_circle():
  assert _cycles(_graph()) == []


def test_every_module_has_a_wing_and_no_import_runs_back_up():
  assert _upward(_graph()) == []


@pytest.mark.parametrize("lower,higher", [("vit_spectral.models.build", "vit_spectral.training"),
                                          ("vit_spectral.durability.resume",
                                           "vit_spectral.training.trainer")])
def test_the_checks_see_an_upward_import_and_a_circle(lower, higher):
  graph = _graph()
  graph[lower] = graph[lower] | {higher}
  assert (lower, higher) in _upward(graph)
  graph[higher] = graph[higher] | {lower}
  assert any(lower in c and higher in c for c in _cycles(graph))


def test_the_graph_reads_imports_inside_functions_and_relative_ones(tmp_path):
  source = tmp_path / "m.py"
  source.write_text("def f():\n  from vit_spectral.training import trainer\n"
                    "from .names import did_you_mean\n")
  known = {"vit_spectral.training", "vit_spectral.training.trainer", "vit_spectral.names"}
  assert _imports("vit_spectral.m", str(source), known) == {
      "vit_spectral.training.trainer", "vit_spectral.names"}


def _imported_names(path: str) -> set[str]:
  names = set()
  for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
    if isinstance(node, ast.Import):
      names.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      names.add(node.module)
      names.update(f"{node.module}.{a.name}" for a in node.names)
  return names


def test_moved_modules_are_gone_from_their_old_place_and_nothing_imports_them():
  """`vit_spectral.MOVED_MODULES` keeps old paths importable for users; the
  library, its tests and benchmarks import the new ones."""
  import vit_spectral  # pylint: disable=import-outside-toplevel
  modules = _modules()
  for old, new in vit_spectral.MOVED_MODULES.items():
    assert old not in modules and new in modules, (old, new)
  users = []
  for top in ("vit_spectral", "tests", "benchmarks"):
    for folder, _, files in os.walk(os.path.join(ROOT, top)):
      users += [os.path.join(folder, n) for n in files if n.endswith(".py")]
  this_file = os.path.abspath(__file__)
  found = sorted((os.path.relpath(p, ROOT), name) for p in users if p != this_file
                 and os.path.basename(p) != "test_public_api.py"
                 for name in _imported_names(p) & set(vit_spectral.MOVED_MODULES))
  assert found == []
