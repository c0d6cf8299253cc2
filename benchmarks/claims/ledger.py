"""The claims ledger: one entry per checkable claim of papers 000–004.

`benchmarks/results/claims.json` is a JSON list of entries, each a dict with

  id        "<paper>-<where>", e.g. "004-table8"
  paper     "000" … "004"
  where     section / figure / table of the paper
  claim     one sentence: what the paper says
  setup     what was run here and how it differs from the paper
  command   one line that regenerates the entry from a clean checkout
  measured  numbers, every seed's value where there are seeds
  verdict   one of VERDICTS
  why       for every verdict but "reproduced": the cause as far as known
  figure    (optional) the PNG drawn for it, relative to the repository root

Experiments (`benchmarks/claims/paper00N.py`) register with `@experiment`; one
experiment may produce several entries (one training run feeds several
claims). `benchmarks/reproduce_claims.py` runs them and merges their entries
into the ledger; `benchmarks/render_claims.py` renders it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LEDGER_PATH = os.path.join(REPO, "benchmarks", "results", "claims.json")
FIGURES_DIR = os.path.join(REPO, "benchmarks", "results", "claims")
SCRIPT = "benchmarks/reproduce_claims.py"

PAPERS = ("000", "001", "002", "003", "004")
VERDICTS = ("reproduced", "direction", "not_reproduced", "not_testable")
KEYS = ("id", "paper", "where", "claim", "setup", "command", "measured", "verdict", "why")
OPTIONAL_KEYS = ("figure",)


@dataclasses.dataclass(frozen=True)
class Experiment:
  """A registered experiment.

  Attributes:
    name: the experiment's name (`--experiment=NAME`).
    paper: its paper.
    claims: the ids of the entries it produces.
    run: (seeds: list[int], small: bool) -> list of entries (dicts with KEYS
      except `command`, which the runner fills in).
    trains: whether it trains models (seeds matter) or computes at initialisation.
  """
  name: str
  paper: str
  claims: tuple[str, ...]
  run: Callable[[list[int], bool], list[dict[str, Any]]]
  trains: bool


EXPERIMENTS: dict[str, Experiment] = {}


def experiment(name: str, paper: str, claims: tuple[str, ...], trains: bool = False):
  """Registers `fn(seeds, small) -> entries` as experiment `name`."""
  if paper not in PAPERS:
    raise ValueError(f"paper={paper!r}; choose one of {list(PAPERS)}")

  def register(fn):
    if name in EXPERIMENTS:
      raise ValueError(f"experiment {name!r} registered twice")
    EXPERIMENTS[name] = Experiment(name, paper, tuple(claims), fn, trains)
    return fn

  return register


def entry(paper: str, claim_id: str, where: str, claim: str, setup: str, measured: dict,
          verdict_: str, why: str = "", figure=None) -> dict[str, Any]:
  """One ledger entry (without `command`, which the runner adds). A reproduced
  claim carries no why; `figure` (a matplotlib Figure) is saved by the runner."""
  out = dict(id=claim_id, paper=paper, where=where, claim=claim, setup=setup,
             measured=measured, verdict=verdict_, why="" if verdict_ == "reproduced" else why)
  if figure is not None:
    out["_figure"] = figure
  return out


def claim_experiments() -> dict[str, str]:
  """{claim id: experiment name} over every registered experiment."""
  out = {}
  for exp in EXPERIMENTS.values():
    for claim_id in exp.claims:
      if claim_id in out:
        raise ValueError(f"claim {claim_id!r} produced by {out[claim_id]!r} and {exp.name!r}")
      out[claim_id] = exp.name
  return out


def command_for(exp: Experiment, seeds: list[int]) -> str:
  """The one-line command that regenerates `exp`'s entries."""
  command = f"python {SCRIPT} --experiment={exp.name}"
  if exp.trains:
    command += " --seeds=" + ",".join(str(s) for s in seeds)
  return command


def verdict(condition_per_seed: list[bool], direction_per_seed: list[bool] | None = None) -> str:
  """"reproduced" when the claim holds in every seed; "direction" when the
  weaker `direction_per_seed` (same sign or order, other magnitude) holds in
  every seed; otherwise "not_reproduced". An effect seen in some seeds only is
  not reproduced."""
  if condition_per_seed and all(condition_per_seed):
    return "reproduced"
  if direction_per_seed and all(direction_per_seed):
    return "direction"
  return "not_reproduced"


def check_entry(entry: dict[str, Any]) -> None:
  """Raises ValueError naming what is wrong with `entry`'s shape."""
  name = entry.get("id", "<no id>")
  missing = [k for k in KEYS if k not in entry]
  if missing:
    raise ValueError(f"claim {name}: missing keys {missing}")
  unknown = sorted(set(entry) - set(KEYS) - set(OPTIONAL_KEYS))
  if unknown:
    raise ValueError(f"claim {name}: unknown keys {unknown}; valid: {list(KEYS + OPTIONAL_KEYS)}")
  if entry["paper"] not in PAPERS:
    raise ValueError(f"claim {name}: paper={entry['paper']!r}; choose one of {list(PAPERS)}")
  if not str(entry["id"]).startswith(entry["paper"] + "-"):
    raise ValueError(f"claim {name}: the id must start with its paper, {entry['paper']}-")
  if entry["verdict"] not in VERDICTS:
    raise ValueError(f"claim {name}: verdict={entry['verdict']!r}; choose one of {list(VERDICTS)}")
  for key in ("where", "claim", "setup", "command"):
    if not isinstance(entry[key], str) or not entry[key].strip():
      raise ValueError(f"claim {name}: {key} must be a non-empty string")
  if entry["verdict"] != "reproduced" and not str(entry["why"]).strip():
    raise ValueError(f"claim {name}: verdict {entry['verdict']!r} needs a why")
  if not isinstance(entry["measured"], dict) or not entry["measured"]:
    raise ValueError(f"claim {name}: measured must be a non-empty dict of numbers")


def read(path: str = LEDGER_PATH) -> list[dict[str, Any]]:
  """The ledger's entries (an empty list when the file does not exist yet)."""
  if not os.path.exists(path):
    return []
  with open(path) as f:
    entries = json.load(f)
  for entry in entries:
    check_entry(entry)
  return entries


def sort_key(entry: dict[str, Any]):
  return entry["paper"], entry["id"]


def merge(entries: list[dict[str, Any]], path: str = LEDGER_PATH) -> list[dict[str, Any]]:
  """Writes `entries` into the ledger at `path`, replacing those with the same id."""
  import fcntl  # noqa: PLC0415
  for entry in entries:
    check_entry(entry)
  new = {e["id"]: e for e in entries}
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  # Two experiments may finish at once: one writer at a time.
  with open(path + ".lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    kept = [e for e in read(path) if e["id"] not in new]
    merged = sorted(kept + list(new.values()), key=sort_key)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
      json.dump(merged, f, indent=1, ensure_ascii=False)
      f.write("\n")
    os.replace(tmp, path)
  return merged


def figure_path(claim_id: str, figures_dir: str = FIGURES_DIR) -> str:
  """Where the PNG of `claim_id` goes."""
  return os.path.join(figures_dir, f"{claim_id}.png")


def rounded(value, digits: int = 4):
  """Floats (also inside lists and dicts) to `digits` significant digits, for JSON."""
  if isinstance(value, dict):
    return {k: rounded(v, digits) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [rounded(v, digits) for v in value]
  if isinstance(value, np.ndarray):
    return rounded(value.tolist(), digits)
  if isinstance(value, np.generic):
    value = value.item()
  if isinstance(value, float):
    if value != value or value in (float("inf"), float("-inf")):
      return str(value)
    return float(f"{value:.{digits}g}")
  return value
