r"""Is our CPU train step slower than it was at an earlier commit? (issue 40)

Runs `benchmarks/vs_timm.py` in a git worktree of `--before` and in this tree,
alternately (before, after, then after, before, ...: `--pairs` of each), on one
machine in one session. Each run's figure for a configuration is its
throughput / timm (the median over rounds of the paired ratio in that run),
so load that changes between runs cancels with timm's step. A pair's ratio is
after / before of that figure; the verdict reads the median over pairs.

The criterion, declared before any run (`CRITERION`): "no_slower" when the
median pair ratio is >= NO_SLOWER_AT for every configuration; "slower" when it
is < SLOWER_BELOW for any; otherwise "inconclusive" (within this CPU's noise).
Before each run the busy cores are sampled from /proc/stat over
BUSY_SAMPLE_S (the previous run has exited, so this is other processes' load;
the load average would still hold the previous run's own threads); a run that
started with more than QUIET_BUSY_CORES busy is flagged, as vs_timm.py's
docstring says why that matters.

  python benchmarks/vs_timm_before_after.py --before=c216d6e    # ~15 min, 2 quiet cores
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import vs_timm  # noqa: E402  (the configurations' names)

NO_SLOWER_AT = 0.97
SLOWER_BELOW = 0.90
QUIET_BUSY_CORES = 0.5
BUSY_SAMPLE_S = 5.0
CRITERION = (
    f"per configuration, the median over pairs of (after / before) of throughput / timm: "
    f"no_slower if >= {NO_SLOWER_AT} for every configuration, slower if < {SLOWER_BELOW} "
    f"for any, else inconclusive")
DEFAULT_OURS = ("dot_product/scan", "dot_product/loop")


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--before", required=True, help="the earlier commit (any git revision)")
  parser.add_argument("--pairs", type=int, default=3)
  parser.add_argument("--rounds", type=int, default=5, help="vs_timm.py's --rounds per run")
  parser.add_argument("--ours", nargs="+", default=list(DEFAULT_OURS), choices=list(vs_timm.OURS),
                      metavar="NAME", help=f"configurations, of {list(vs_timm.OURS)}")
  parser.add_argument("--out", default=str(ROOT / "benchmarks/results/vs_timm_cpu_before_after_pairs.json"))
  args = parser.parse_args(argv)
  if args.pairs < 1 or args.rounds < 1:
    parser.error(f"--pairs and --rounds must be >= 1, got {args.pairs} and {args.rounds}")
  return args


def busy_cores(seconds: float = BUSY_SAMPLE_S) -> float | None:
  """How many cores' worth of CPU time was spent over `seconds` (/proc/stat),
  or None where there is no /proc/stat."""
  def sample():
    fields = [int(x) for x in pathlib.Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]     # idle + iowait
    return sum(fields) - idle, sum(fields)
  if not pathlib.Path("/proc/stat").exists():
    return None
  busy0, total0 = sample()
  time.sleep(seconds)
  busy1, total1 = sample()
  return (busy1 - busy0) / max(total1 - total0, 1) * os.cpu_count()


def run_once(tree: pathlib.Path, args, out: pathlib.Path) -> dict:
  """One vs_timm.py run in `tree`; its JSON, with the load before it."""
  busy = busy_cores()
  env = dict(os.environ, PYTHONPATH=str(tree))
  cmd = [sys.executable, str(tree / "benchmarks/vs_timm.py"), "--rounds", str(args.rounds),
         "--ours", *args.ours, "--out", str(out)]
  subprocess.run(cmd, cwd=tree, env=env, check=True)
  result = json.loads(out.read_text())
  return dict(busy_cores_before=busy, quiet=busy is not None and busy <= QUIET_BUSY_CORES,
              throughput_vs_timm={row["name"]: row["throughput_vs_timm"] for row in result["rows"]},
              run=result)


def verdict(pair_ratios: dict[str, list[float]]) -> str:
  medians = [statistics.median(ratios) for ratios in pair_ratios.values()]
  if all(m >= NO_SLOWER_AT for m in medians):
    return "no_slower"
  if any(m < SLOWER_BELOW for m in medians):
    return "slower"
  return "inconclusive"


def short_rev(rev: str) -> str:
  return subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, check=True,
                        capture_output=True, text=True).stdout.strip()


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  args = parse_args(argv)
  revs = {"before": short_rev(args.before), "after": short_rev("HEAD")}
  with tempfile.TemporaryDirectory() as tmp:
    worktree = pathlib.Path(tmp) / "before"
    subprocess.run(["git", "worktree", "add", "--detach", str(worktree), revs["before"]], cwd=ROOT,
                   check=True, capture_output=True)
    try:
      trees = {"before": worktree, "after": ROOT}
      runs = {"before": [], "after": []}
      for pair in range(args.pairs):
        order = ("before", "after") if pair % 2 == 0 else ("after", "before")
        for side in order:
          print(f"[pair {pair + 1}/{args.pairs}] {side} ({revs[side]})", flush=True)
          runs[side].append(run_once(trees[side], args, pathlib.Path(tmp) / f"{side}{pair}.json"))
    finally:
      subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False)
  pair_ratios = {
      name: [a["throughput_vs_timm"][name] / b["throughput_vs_timm"][name]
             for a, b in zip(runs["after"], runs["before"])]
      for name in args.ours}
  result = dict(
      command=" ".join(["python", "benchmarks/vs_timm_before_after.py", *map(shlex.quote, argv)]),
      **revs, criterion=CRITERION,
      pair_ratios=pair_ratios,
      median_pair_ratio={name: statistics.median(r) for name, r in pair_ratios.items()},
      all_runs_quiet=all(run["quiet"] for side in runs.values() for run in side),
      verdict=verdict(pair_ratios), runs=runs)
  pathlib.Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
  print(json.dumps({k: result[k] for k in ("before", "after", "median_pair_ratio", "all_runs_quiet",
                                           "verdict")}, indent=1))
  return 0


if __name__ == "__main__":
  sys.exit(main())
