"""A rerun in a used workdir: does the config fit its checkpoints, and what changed.

The workdir's `config.json` is the config of its latest run, and
`config_history/run-NNN.json` keeps every run's (its start step, time, host,
the fields it changed and the whole config). Both are written only after the
run's checks have passed and its first step has run (`record_config`), so a
config that fails never replaces them.

A change is allowed when the checkpoint still fits it: the same tree of
parameters and optimizer state, with the same shapes and dtypes
(`check_structure`, called on the stored tree before any array is read).
Steps, learning rate, cadences, data dir, dtype of compute: allowed, and
logged. Depth, width, heads, patch size, the optimizer, EMA on/off: stopped at
once, with the differing config fields and the first tensor that does not fit.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from typing import Any

import jax
from absl import logging
from etils import epath

from vit_spectral import errors
from vit_spectral.durability.checkpointing import unreadable_name
from vit_spectral.durability.state_fingerprint import leaf_name

CONFIG_NAME = "config.json"
HISTORY_DIR = "config_history"
_MAX_LISTED = 12  # differing fields and tensors shown in a message


def config_dict(config: Any) -> dict:
  """A ConfigDict as the plain JSON tree `config.json` holds."""
  return json.loads(config.to_json_best_effort(sort_keys=True))


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
  """{"a": {"b": 1}} -> {"a.b": 1}; lists and other values are leaves."""
  if isinstance(tree, dict) and tree:
    out = {}
    for key, value in tree.items():
      out.update(flatten(value, f"{prefix}{key}."))
    return out
  return {prefix[:-1]: tree}


def changed_fields(previous: dict, current: dict) -> dict[str, tuple[Any, Any]]:
  """Field -> (before, now) for every leaf that differs ("(absent)" for a
  field only one side has)."""
  before, now = flatten(previous), flatten(current)
  absent = "(absent)"
  return {key: (before.get(key, absent), now.get(key, absent))
          for key in sorted(set(before) | set(now)) if before.get(key, absent) != now.get(key, absent)}


def describe_changes(changes: dict[str, tuple[Any, Any]]) -> str:
  items = [f"{key} {before!r} -> {now!r}" for key, (before, now) in changes.items()]
  if len(items) > _MAX_LISTED:
    items = items[:_MAX_LISTED] + [f"... ({len(items) - _MAX_LISTED} more)"]
  return ", ".join(items)


def previous_config(workdir: str) -> dict | None:
  """The workdir's `config.json` as a dict; None if it has none.

  An unreadable one (damaged) reads as None, with a warning; `record_config`
  moves it aside before writing the new one.
  """
  path = epath.Path(workdir) / CONFIG_NAME
  if not path.exists():
    return None
  try:
    return json.loads(path.read_text())
  except ValueError as e:
    logging.warning("%s is unreadable (%s); it is kept as %s.unreadable once this run "
                    "has started", path, e, CONFIG_NAME)
    return None


def _leaf_paths(tree: Any) -> dict[str, tuple[tuple[int, ...], str]]:
  """path -> (shape, dtype) of every array leaf; paths as "params/encoder/...",
  the same for a TrainState and the dict orbax stores it as."""
  leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
  return {leaf_name(path): (tuple(leaf.shape), str(leaf.dtype)) for path, leaf in leaves}


def structure_differences(stored: Any, expected: Any) -> list[str]:
  """What differs between two trees of arrays or ShapeDtypeStructs, as lines
  ("params/x: stored (4, 16) float32, this config (6, 16) float32"); empty
  when they fit."""
  have, want = _leaf_paths(stored), _leaf_paths(expected)
  lines = []
  # Parameters first: they say most plainly what changed.
  for path in sorted(set(have) | set(want), key=lambda p: (not p.startswith("params/"), p)):
    if have.get(path) == want.get(path):
      continue
    show = lambda spec: "absent" if spec is None else f"{spec[0]} {spec[1]}"  # noqa: E731
    lines.append(f"{path}: stored {show(have.get(path))}, this config {show(want.get(path))}")
  return lines


def check_structure(step: int, stored: Any, *, abstract_state: Any, config: Any,
                    previous_config: dict | None) -> None:
  """Stops a resume whose config does not fit the checkpoint of `step`.

  Args:
    step: the checkpoint's step.
    stored: its tree as stored (ShapeDtypeStructs, from the metadata).
    abstract_state: the TrainState this config builds (ShapeDtypeStructs).
    config: the new config (ConfigDict).
    previous_config: the workdir's `config.json` (None if it has none).

  Raises:
    errors.ConfigMismatchError: the trees differ; lists the config fields that
      changed against config.json and the first tensors that do not fit.
  """
  differences = structure_differences(stored, abstract_state)
  if not differences:
    return
  if previous_config is None:
    fields = "the workdir has no config.json to compare with"
  else:
    changes = changed_fields(previous_config, config_dict(config))
    fields = ("changed fields: " + describe_changes(changes)) if changes else (
        "no field differs from config.json, so the checkpoint was written by other code")
  tensors = "; ".join(differences[:3]) + (
      f"; ... ({len(differences) - 3} more)" if len(differences) > 3 else "")
  raise errors.ConfigMismatchError(
      f"this config does not fit the checkpoint at step {step}, so it cannot resume there: "
      f"{fields}. Tensors: {tensors}. Rerun with the workdir's config (drop those "
      "overrides) or pass a new --workdir; step {step} and config.json are untouched.")


def _history_files(workdir: str) -> list[epath.Path]:
  folder = epath.Path(workdir) / HISTORY_DIR
  if not folder.exists():
    return []
  return sorted(p for p in folder.iterdir() if p.name.startswith("run-") and p.name.endswith(".json"))


def _write_atomically(path: epath.Path, text: str) -> None:
  """Writes `text` to a sibling temporary file, then renames it over `path`
  (local files: never half written)."""
  if "://" in os.fspath(path):
    path.write_text(text)
    return
  temporary = path.parent / f".{path.name}.tmp-{os.getpid()}"
  temporary.write_text(text)
  os.replace(temporary, path)


def record_config(config: Any, workdir: str, previous: dict | None, *,
                  start_step: int) -> None:
  """Writes `config` as the workdir's `config.json` and adds it to
  `config_history/` (process 0), logging what changed on a resume.

  Call it once the run's checks have passed and it has run a step. A
  `config.json` that could not be read (`previous` None) is first moved aside
  to `config.json.unreadable` (`.1`, ... where taken).
  """
  current = config_dict(config)
  changes = changed_fields(previous, current) if previous is not None else {}
  if jax.process_index() != 0:
    return
  config_path = epath.Path(workdir) / CONFIG_NAME
  if previous is None and config_path.exists():  # unreadable: kept, never overwritten
    config_path.rename(unreadable_name(config_path))
  history = _history_files(workdir)
  folder = epath.Path(workdir) / HISTORY_DIR
  folder.mkdir(parents=True, exist_ok=True)
  if previous is not None and not history:
    # A workdir from before histories: its config.json becomes run-000.
    _write_atomically(folder / "run-000.json", json.dumps(
        {"started_at_step": None, "config": previous}, indent=2, sort_keys=True))
    history = _history_files(workdir)
  number = len(history)
  entry = {
      "started_at_step": start_step,
      "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "host": socket.gethostname(),
      "changed": {key: list(pair) for key, pair in changes.items()},
      "config": current,
  }
  entry_path = folder / f"run-{number:03d}.json"
  _write_atomically(entry_path, json.dumps(entry, indent=2, sort_keys=True))
  _write_atomically(config_path, config.to_json_best_effort(indent=2, sort_keys=True))
  if changes:
    logging.warning("resuming at step %d with a changed config: %s (recorded in %s)",
                    start_step, describe_changes(changes), os.path.join(HISTORY_DIR, entry_path.name))
