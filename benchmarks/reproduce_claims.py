r"""Regenerates entries of the claims ledger (benchmarks/results/claims.json).

Every checkable claim of papers 000–004 has one entry there (`benchmarks/claims/
ledger.py` describes the fields); each entry's `command` is a line of this script:

  python benchmarks/reproduce_claims.py --experiment=fourier_depth --seeds=0,1,2
  python benchmarks/reproduce_claims.py --claim=004-table8      # its experiment
  python benchmarks/reproduce_claims.py --paper=003             # all of a paper's
  python benchmarks/reproduce_claims.py --list                  # what exists

An experiment that trains runs once per seed and reports every seed's value;
one that computes at initialisation or from a theorem ignores --seeds.
`--small` runs the tiny form of each experiment (a few steps, tiny models: what
CI reruns); its entries go to --out only when --out is given, never into the
committed ledger. Figures go to benchmarks/results/claims/<id>.png (or beside
--out). Then `python benchmarks/render_claims.py` renders the README table.

Verdicts come from each claim's criterion, declared apart from the experiment
(`benchmarks/claims/criteria.py`). An entry whose criterion or verdict changes
keeps the earlier ones in its history, with the reason, which is then required:

  python benchmarks/reproduce_claims.py --claim=000-table1 --rejudge \
      --reason="why the criterion changed" [--why="the cause of the new verdict"]

`--rejudge` applies the current criteria to the stored measurements (no run).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Small models: one thread per process runs them fastest, and two experiments
# can then share two cores.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")

from benchmarks.claims import ledger  # noqa: E402
from benchmarks.claims import experiments  # noqa: E402,F401  (registers them)


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--experiment", action="append", default=[],
                      help="experiment name(s), comma-separated (see --list)")
  parser.add_argument("--claim", action="append", default=[],
                      help="claim id(s), comma-separated: runs the experiments producing them")
  parser.add_argument("--paper", action="append", default=[],
                      help="run every experiment of these papers (000 … 004)")
  parser.add_argument("--all", action="store_true", help="run every experiment")
  parser.add_argument("--seeds", default="0,1,2", help="seeds of training experiments")
  parser.add_argument("--small", action="store_true",
                      help="tiny form (CI): few steps, tiny models; needs --out")
  parser.add_argument("--out", default=None,
                      help=f"ledger to merge into (default {os.path.relpath(ledger.LEDGER_PATH, ledger.REPO)})")
  parser.add_argument("--list", action="store_true", help="list experiments and claims")
  parser.add_argument("--rejudge", action="store_true",
                      help="judge the named claims' stored measurements again (no run)")
  parser.add_argument("--reason", default="",
                      help="why a criterion changed (kept in the entry's history)")
  parser.add_argument("--why", default=None,
                      help="with --rejudge: the cause of a changed verdict")
  return parser


def _split(values: list[str]) -> list[str]:
  return [v.strip() for value in values for v in value.split(",") if v.strip()]


def selected(args) -> list[ledger.Experiment]:
  """The experiments the flags name, each once, in registration order.

  Raises:
    SystemExit: an unknown experiment, claim or paper (the valid ones listed).
  """
  names: list[str] = []
  claims = ledger.claim_experiments()
  for name in _split(args.experiment):
    if name not in ledger.EXPERIMENTS:
      raise SystemExit(f"--experiment={name!r} is not an experiment; choose from "
                       f"{sorted(ledger.EXPERIMENTS)}")
    names.append(name)
  for claim_id in _split(args.claim):
    if claim_id not in claims:
      raise SystemExit(f"--claim={claim_id!r} is not a claim; choose from {sorted(claims)}")
    names.append(claims[claim_id])
  for paper in _split(args.paper):
    if paper not in ledger.PAPERS:
      raise SystemExit(f"--paper={paper!r}; choose one of {list(ledger.PAPERS)}")
    names += [e.name for e in ledger.EXPERIMENTS.values() if e.paper == paper]
  if args.all:
    names += list(ledger.EXPERIMENTS)
  if not names:
    raise SystemExit("name what to run: --experiment, --claim, --paper or --all (--list shows them)")
  return [ledger.EXPERIMENTS[n] for n in dict.fromkeys(names)]


def parse_seeds(text: str) -> list[int]:
  try:
    seeds = [int(s) for s in text.split(",") if s.strip()]
  except ValueError:
    raise SystemExit(f"--seeds={text!r} must be comma-separated integers, e.g. 0,1,2") from None
  if not seeds:
    raise SystemExit("--seeds names no seed")
  return seeds


def save_figure(entry: dict, figures_dir: str) -> None:
  """Saves the entry's matplotlib figure ("_figure") as <figures_dir>/<id>.png."""
  fig = entry.pop("_figure", None)
  if fig is None:
    return
  os.makedirs(figures_dir, exist_ok=True)
  path = ledger.figure_path(entry["id"], figures_dir)
  fig.tight_layout()
  fig.savefig(path, dpi=80)
  entry["figure"] = os.path.relpath(path, ledger.REPO)


def rejudge(args, out: str) -> int:
  """Re-judges the stored entries of the claims the flags name."""
  claims = {c for exp in selected(args) for c in exp.claims}
  if args.claim:
    claims &= set(_split(args.claim))
  entries = ledger.read_raw(out)
  today = datetime.date.today().isoformat()
  try:
    entries = [ledger.rejudged(e, args.reason, today, args.why) if e["id"] in claims else e
               for e in entries]
  except (ValueError, KeyError) as error:
    raise SystemExit(str(error).strip("'\"")) from None
  ledger.write(entries, out)
  for e in entries:
    if e["id"] in claims:
      print(f"[claims] {e['id']}: {e['verdict']}", flush=True)
  return 0


def main(argv=None) -> int:
  args = build_parser().parse_args(argv)
  if args.list:
    for exp in ledger.EXPERIMENTS.values():
      kind = "trains" if exp.trains else "at init / theorem"
      print(f"{exp.name:28s} {exp.paper}  {kind:18s} {', '.join(exp.claims)}")
    return 0
  seeds = parse_seeds(args.seeds)
  if args.small and args.out is None:
    raise SystemExit("--small writes a tiny form: give --out (it never goes into the committed ledger)")
  out = args.out or ledger.LEDGER_PATH
  figures_dir = (ledger.FIGURES_DIR if args.out is None
                 else os.path.join(os.path.dirname(os.path.abspath(out)), "claims"))
  if args.rejudge:
    return rejudge(args, out)
  today = datetime.date.today().isoformat()
  for exp in selected(args):
    start = time.time()
    entries = exp.run(seeds, args.small)
    produced = {e["id"] for e in entries}
    if produced != set(exp.claims):
      raise RuntimeError(f"experiment {exp.name} produced {sorted(produced)}, "
                         f"registered {sorted(exp.claims)}")
    for i, entry in enumerate(entries):
      entry["command"] = ledger.command_for(exp, seeds)
      if args.small:
        entry["command"] += " --small"
      save_figure(entry, figures_dir)
      entry["measured"] = ledger.rounded(entry["measured"])
      entries[i] = ledger.judged(entry)
    try:
      ledger.merge(entries, out, reason=args.reason, date=today)
    except ValueError as error:
      raise SystemExit(str(error)) from None
    verdicts = ", ".join(f"{e['id']}: {e['verdict']}" for e in entries)
    print(f"[claims] {exp.name} ({time.time() - start:.0f} s): {verdicts}", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
