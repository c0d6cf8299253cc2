"""The claims ledger: one entry per checkable claim of papers 000–004.

`benchmarks/results/claims.json` is a JSON list of entries, each a dict with

  id                    "<paper>-<where>", e.g. "004-table8"
  paper                 "000" … "004"
  where, claim          from the claim's criterion (`criteria.py`)
  kind                  theorem / identity / by_construction / at_init / training_effect
  criterion             the test: {"words", "function"}
  criterion_fingerprint the hash of the criterion the verdict was judged by
  paper_values          the paper's numbers behind the claim, verbatim, with where
  resolution            the smallest effect the setup resolves, beside the claimed one;
                        for a training effect also interval [low, high], sesoi,
                        claimed, seeds and direction (`criteria.Effect`)
  setup                 what was run here and how it differs from the paper
  command               one line that regenerates the entry from a clean checkout
  measured              numbers, every seed's value where there are seeds
  verdict               one of criteria.VERDICTS, the criterion applied to `measured`
  why                   for every verdict but "reproduced": the cause as far as known
  figure                (optional) the PNG drawn for it, relative to the repository root
  history               (optional) earlier criteria and verdicts, each with the reason
                        it changed, oldest first

Experiments (`benchmarks/claims/paper00N.py`) register with `@experiment` and
only measure; each paper file declares its claims' criteria apart from them
(`criteria.declare`). One experiment may produce several entries (one training
run feeds several claims). `benchmarks/reproduce_claims.py` runs them, judges
their measurements and merges the entries into the ledger;
`benchmarks/render_claims.py` renders it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable

import numpy as np

from benchmarks.claims import criteria

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LEDGER_PATH = os.path.join(REPO, "benchmarks", "results", "claims.json")
FIGURES_DIR = os.path.join(REPO, "benchmarks", "results", "claims")
SCRIPT = "benchmarks/reproduce_claims.py"

PAPERS = ("000", "001", "002", "003", "004")
VERDICTS = criteria.VERDICTS
KINDS = criteria.KINDS
KEYS = ("id", "paper", "where", "claim", "kind", "criterion", "criterion_fingerprint",
        "paper_values", "resolution", "setup", "command", "measured", "verdict", "why")
OPTIONAL_KEYS = ("figure", "history", "headline")
HISTORY_KEYS = ("criterion", "criterion_fingerprint", "verdict", "reason", "date")


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
    min_seeds: the fewest seeds its committed entries may hold (3 for training
      experiments; fewer only for a grid whose cells replicate each other,
      `min_seeds_reason` saying so and the entry's why naming the seeds).
  """
  name: str
  paper: str
  claims: tuple[str, ...]
  run: Callable[[list[int], bool], list[dict[str, Any]]]
  trains: bool
  min_seeds: int = 3
  min_seeds_reason: str = ""


EXPERIMENTS: dict[str, Experiment] = {}


def experiment(name: str, paper: str, claims: tuple[str, ...], trains: bool = False,
               min_seeds: int = 3, min_seeds_reason: str = ""):
  """Registers `fn(seeds, small) -> entries` as experiment `name`."""
  if paper not in PAPERS:
    raise ValueError(f"paper={paper!r}; choose one of {list(PAPERS)}")
  if min_seeds < 3 and not min_seeds_reason:
    raise ValueError(f"experiment {name!r}: min_seeds={min_seeds} needs a min_seeds_reason")

  def register(fn):
    if name in EXPERIMENTS:
      raise ValueError(f"experiment {name!r} registered twice")
    EXPERIMENTS[name] = Experiment(name, paper, tuple(claims), fn, trains, min_seeds,
                                   min_seeds_reason)
    return fn

  return register


def entry(paper: str, claim_id: str, setup: str, measured: dict, why: str | dict = "",
          figure=None) -> dict[str, Any]:
  """What an experiment measured for one claim (the runner judges it: `judged`).
  `why` is the cause of any verdict but "reproduced", or {verdict: cause};
  `figure` (a matplotlib Figure) is saved by the runner."""
  if not claim_id.startswith(paper + "-"):
    raise ValueError(f"claim {claim_id}: the id must start with its paper, {paper}-")
  out = dict(id=claim_id, paper=paper, setup=setup, measured=measured, _why=why)
  if figure is not None:
    out["_figure"] = figure
  return out


def judged(measured_entry: dict[str, Any]) -> dict[str, Any]:
  """`measured_entry` (from `entry`) judged by its claim's declared criterion:
  the criterion's fields, its fingerprint, the verdict and the why for it."""
  out = dict(measured_entry)
  why = out.pop("_why", "")
  criterion = criteria.criterion_for(out["id"])
  out.update(where=criterion.where, claim=criterion.claim, kind=criterion.kind,
             criterion=criterion.as_json(), criterion_fingerprint=criterion.fingerprint(),
             paper_values=[v.as_json() for v in criterion.paper_values],
             resolution=rounded(criterion.resolve(out["measured"])))
  out["verdict"] = criterion.judge(out["measured"])
  if isinstance(why, dict):
    why = why.get(out["verdict"], "")
  if criterion.effect is not None and out["verdict"] != "reproduced":
    # The interval against the declaration first, then the experiment's cause.
    why = "; ".join(w for w in (criterion.effect.why(out["measured"], out["verdict"]), why) if w)
  out["why"] = "" if out["verdict"] == "reproduced" else why
  return out


def superseded(old: dict[str, Any], new: dict[str, Any], reason: str, date: str) -> list[dict]:
  """`new`'s history: `old`'s, plus `old`'s criterion and verdict when the
  criterion or the verdict changed (a reason is then required)."""
  history = list(old.get("history", []))
  changed = (old.get("criterion_fingerprint") != new["criterion_fingerprint"]
             or old["verdict"] != new["verdict"])
  if not changed:
    return history
  if not reason.strip():
    raise ValueError(f"claim {new['id']}: its criterion or verdict changed "
                     f"({old.get('verdict')} → {new['verdict']}); give the reason (--reason)")
  history.append({"criterion": old.get("criterion", "the verdict code before criteria were "
                                                    "declared as data"),
                  "criterion_fingerprint": old.get("criterion_fingerprint"),
                  "verdict": old["verdict"], "reason": reason, "date": date})
  return history


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
  if entry["kind"] not in KINDS:
    raise ValueError(f"claim {name}: kind={entry['kind']!r}; choose one of {list(KINDS)}")
  if set(entry["criterion"]) != {"words", "function"}:
    raise ValueError(f"claim {name}: criterion must be {{'words', 'function'}}")
  for value in entry["paper_values"]:
    if set(value) != {"where", "value"}:
      raise ValueError(f"claim {name}: each paper value is {{'where', 'value'}}, got {value}")
  if entry["kind"] == "training_effect" and entry["verdict"] != "not_testable":
    check_effect_resolution(name, entry["verdict"], entry["resolution"])
  if "headline" in entry and (entry["headline"] is not True or entry["kind"] != "training_effect"):
    raise ValueError(f"claim {name}: headline is true on a training effect, or absent")
  for record in entry.get("history", []):
    if set(record) != set(HISTORY_KEYS) or not str(record["reason"]).strip():
      raise ValueError(f"claim {name}: a history record has {list(HISTORY_KEYS)}, "
                       f"with a reason; got {sorted(record)}")


EFFECT_KEYS = ("interval", "sesoi", "claimed", "seeds", "direction")


def check_effect_resolution(name: str, verdict: str, resolution: dict) -> None:
  """Raises ValueError unless a judged training effect's resolution holds its
  interval ([low, high], numbers; None only for an inconclusive entry whose
  measurements give none), sesoi (a number), claimed (a number or None),
  seeds and direction, and the verdict is the rule's on them."""
  from benchmarks.claims import power  # noqa: PLC0415
  missing = [k for k in EFFECT_KEYS if k not in resolution]
  if missing:
    raise ValueError(f"claim {name}: a training effect's resolution lacks {missing}")
  sesoi, interval = resolution["sesoi"], resolution["interval"]
  if not isinstance(sesoi, (int, float)) or isinstance(sesoi, bool) or not sesoi > 0:
    raise ValueError(f"claim {name}: resolution.sesoi={sesoi!r} must be a positive number")
  claimed = resolution["claimed"]
  if claimed is not None and not isinstance(claimed, (int, float)):
    raise ValueError(f"claim {name}: resolution.claimed={claimed!r} must be a number or null")
  if interval is None:
    if verdict != "inconclusive":
      raise ValueError(f"claim {name}: no interval, so the verdict is inconclusive, not {verdict}")
    return
  if (not isinstance(interval, list) or len(interval) != 2
      or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in interval)):
    raise ValueError(f"claim {name}: resolution.interval={interval!r} must be [low, high], numbers")
  direction = resolution["direction"]
  rule = (power.judge_no_effect(*interval, sesoi) if direction == 0
          else power.judge_effect(*interval, sesoi, direction))
  if rule != verdict:
    raise ValueError(f"claim {name}: verdict {verdict} but the rule gives {rule} on "
                     f"{interval} with sesoi {sesoi}")


def read(path: str = LEDGER_PATH) -> list[dict[str, Any]]:
  """The ledger's entries (an empty list when the file does not exist yet)."""
  if not os.path.exists(path):
    return []
  entries = read_raw(path)
  for entry in entries:
    check_entry(entry)
  return entries


def sort_key(entry: dict[str, Any]):
  return entry["paper"], entry["id"]


def merge(entries: list[dict[str, Any]], path: str = LEDGER_PATH, reason: str = "",
          date: str = "") -> list[dict[str, Any]]:
  """Writes judged `entries` into the ledger at `path`, replacing those with the
  same id; an entry whose criterion or verdict changed keeps the old one in
  its history, with `reason` (required then: ValueError without it)."""
  import fcntl  # noqa: PLC0415
  for entry in entries:
    check_entry(entry)
  new = {e["id"]: e for e in entries}
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  # Two experiments may finish at once: one writer at a time.
  with open(path + ".lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    current = {e["id"]: e for e in read(path)}
    for claim_id, entry in new.items():
      if claim_id in current:
        history = superseded(current[claim_id], entry, reason, date)
        entry.pop("history", None)
        if history:
          entry["history"] = history
    kept = [e for e in current.values() if e["id"] not in new]
    merged = sorted(kept + list(new.values()), key=sort_key)
    write(merged, path)
  return merged


def rejudged(old: dict[str, Any], reason: str, date: str, why: str | None = None) -> dict:
  """`old` judged again from its stored measurements by its current criterion,
  the earlier criterion and verdict kept in its history when either changed.
  `why` replaces the stored cause (needed when the verdict changed to one
  that is not "reproduced")."""
  measured = {k: old[k] for k in ("id", "paper", "setup", "measured", "command")}
  for key in ("figure", "headline"):
    if key in old:
      measured[key] = old[key]
  effect = criteria.criterion_for(old["id"]).effect is not None
  if why is None and effect:   # its why comes from the interval; the stored one may be another rule's
    why = ""
  new = judged(dict(measured, _why=old.get("why", "") if why is None else why))
  if new["verdict"] != old["verdict"] and new["verdict"] != "reproduced" and why is None:
    raise ValueError(f"claim {old['id']}: the verdict changed to {new['verdict']}; "
                     "give its cause (--why)")
  history = superseded(old, new, reason, date)
  if history:
    new["history"] = history
  check_entry(new)
  return new


def read_raw(path: str = LEDGER_PATH) -> list[dict[str, Any]]:
  """The ledger's entries as stored, unchecked (for re-judging older ones)."""
  with open(path) as f:
    return json.load(f)


def write(entries: list[dict[str, Any]], path: str = LEDGER_PATH) -> None:
  """Replaces the ledger at `path` with `entries` (each checked), sorted."""
  for entry in entries:
    check_entry(entry)
  tmp = path + ".tmp"
  with open(tmp, "w") as f:
    json.dump(sorted(entries, key=sort_key), f, indent=1, ensure_ascii=False)
    f.write("\n")
  os.replace(tmp, path)


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
