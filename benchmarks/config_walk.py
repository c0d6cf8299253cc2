"""The `config` walk of a training run: which files a run's configuration enters.

Runs `trainer.train_and_evaluate` on a tiny digits config (2 steps) under
`sys.setprofile` and records every call into a `vit_spectral` function that
receives configuration: a ConfigDict (the config or a section), or an instance
of one of the package's settings classes (a dataclass named `*Settings`,
`*Spec` or `*Plan`: the typed sections, the model spec), `self` included. The
walk is the sequence of those calls' files, in call order. It reports

  files      distinct files entered;
  climbs     steps of the walk into a higher wing (`tests/test_import_graph.py`'s
             order: e.g. from `models/` back up into `training/`);
  returns    steps into a file the walk had already left.

Runs on any tree that has `vit_spectral.training.trainer` (issue 42 measured
c216d6e against its own tree):

  PYTHONPATH=/path/to/tree python benchmarks/config_walk.py --out=walk.json
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import sys
import tempfile


def _import_graph_wings() -> tuple[tuple[str, ...], ...]:
  """The wings, lowest first, as this checkout's import-graph test declares
  them (read by path: the tree measured may be another one)."""
  path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "tests", "test_import_graph.py")
  spec = importlib.util.spec_from_file_location("_import_graph", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.WINGS


# A module of an older tree falls in the wing of its folder or its own name.
WINGS = _import_graph_wings()


def wing_rank(relpath: str) -> int:
  """The rank of `vit_spectral/<relpath>`'s wing (a top-level module not in
  WINGS ranks with the base)."""
  first = relpath.split(os.sep)[0].removesuffix(".py")
  for rank, names in enumerate(WINGS):
    if first in names:
      return rank
  return 0


def is_configuration(value) -> bool:
  """A ConfigDict, or an instance of the package's settings classes."""
  import ml_collections  # noqa: PLC0415
  if isinstance(value, ml_collections.ConfigDict):
    return True
  kind = type(value)
  return (dataclasses.is_dataclass(value) and not isinstance(value, type)
          and kind.__module__.startswith("vit_spectral")
          and kind.__name__.endswith(("Settings", "Spec", "Plan")))


def walk_summary(files: list[str], ranks: dict[str, int]) -> dict:
  """files / climbs / returns of a walk (a list of files, in call order)."""
  steps = [f for i, f in enumerate(files) if i == 0 or f != files[i - 1]]
  left, climbs, returns = set(), 0, 0
  for previous, current in zip(steps, steps[1:]):
    left.add(previous)
    climbs += ranks[current] > ranks[previous]
    returns += current in left
  return {"files": len(set(files)), "climbs": climbs, "returns": returns,
          "steps": len(steps) - 1, "walk": steps}


def measure() -> dict:
  import vit_spectral  # noqa: PLC0415
  from vit_spectral.configs import digits_vit  # noqa: PLC0415
  from vit_spectral.training import trainer  # noqa: PLC0415
  package = os.path.dirname(os.path.abspath(vit_spectral.__file__))
  config = digits_vit.get_config("depth=1,width=16,heads=2,steps=2")
  config.log_every = config.eval_every = config.checkpoint_every = 2
  config.optim.warmup_steps = 1
  config.async_checkpointing = False
  files: list[str] = []

  def profile(frame, event, arg):
    if event != "call":
      return
    path = frame.f_code.co_filename
    if not path.startswith(package):
      return
    code = frame.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    if any(is_configuration(frame.f_locals.get(n)) for n in names):
      files.append(os.path.relpath(path, package))

  with tempfile.TemporaryDirectory() as workdir:
    sys.setprofile(profile)
    try:
      trainer.train_and_evaluate(config, workdir)
    finally:
      sys.setprofile(None)
  ranks = {f: wing_rank(f) for f in files}
  return walk_summary(files, ranks)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", required=True, help="the JSON file to write")
  args = parser.parse_args(argv)
  result = measure()
  with open(args.out, "w") as f:
    json.dump(result, f, indent=1)
  print({k: v for k, v in result.items() if k != "walk"})
  return 0


if __name__ == "__main__":
  sys.exit(main())
