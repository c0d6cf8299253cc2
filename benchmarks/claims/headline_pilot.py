"""The pilot of the headline experiments (issue 56): the plan's seeds from the spread of each effect.

  python benchmarks/claims/headline_pilot.py [--small]

Trains the pilot seeds (PILOT_SEEDS, apart from the judged ones) of every arm
`headline.py` declares, at the planned steps, and for each headline effect
reads the standard deviation of its per-seed value. The plan is the fewest
seeds n ≥ MIN_SEEDS whose 95 % half-width, t(n−1)·sd/√n, or the paired test-set
term where larger, is at most the sesoi, capped at MAX_SEEDS (what two cores
hold in a session: the plan then says the cap binds). Writes
benchmarks/results/claims/headline_pilot.json; its pieces stay in the pieces
folder under their pilot seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")

from scipy import stats  # noqa: E402

from benchmarks.claims import criteria, headline  # noqa: E402

PILOT_SEEDS = (100, 101)
MIN_SEEDS, MAX_SEEDS = 5, 8
OUT = os.path.join(os.path.dirname(headline.PIECES_DIR), "headline_pilot.json")
CLAIMS = {"000-headline-attn-scale": ("plain", "attn_scale"),
          "000-headline-feat-scale": ("plain", "feat_scale"),
          "001-headline-no-warmup": ("lipsformer", "vit_no_warmup"),
          headline.HFC_ID: ("plain",),
          "004-headline-skip-free": ("sa_skip_free", "mha_skip_free")}


def planned_seeds(sd: float, test_term: float, sesoi: float) -> tuple[int, float]:
  """(n, its half-width): the fewest seeds ≥ MIN_SEEDS with half-width ≤ sesoi, or MAX_SEEDS."""
  for n in range(MIN_SEEDS, MAX_SEEDS + 1):
    half = max(stats.t.ppf(0.975, n - 1) * sd / n ** 0.5, test_term)
    if half <= sesoi:
      return n, float(half)
  return MAX_SEEDS, float(half)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--small", action="store_true", help="tiny models, a few steps (tests)")
  parser.add_argument("--out", default=OUT)
  parser.add_argument("--arms", default="", help="comma-separated arms to train only (no plan)")
  parser.add_argument("--claims", default=",".join(CLAIMS),
                      help="comma-separated claims to plan (merged into --out)")
  args = parser.parse_args(argv)
  if args.arms:
    headline.run_pieces(args.arms.split(","), PILOT_SEEDS, args.small)
    return 0
  unknown = sorted(set(args.claims.split(",")) - set(CLAIMS))
  if unknown:
    parser.error(f"--claims: unknown {unknown}; choose from {sorted(CLAIMS)}")
  plan = {}
  if os.path.exists(args.out):
    with open(args.out) as f:
      plan = json.load(f)["plan"]
  for claim_id in args.claims.split(","):
    arms = CLAIMS[claim_id]
    pieces = headline.run_pieces(arms, PILOT_SEEDS, args.small)
    measured = headline.measured_from(pieces, (claim_id,))
    effect = criteria.criterion_for(claim_id).effect
    out = effect.measure(measured)
    if isinstance(out, str):     # the pilot reads the spread, not the gate
      measured["curves"] = {a: {s: {"0": 0.0, "1": 0.0} for s in by} for a, by in
                            measured["curves"].items()}
      out = effect.measure(measured)
    values = list(out["per_seed"].values())
    sd = float(stats.tstd(values)) if len(values) > 1 else float("nan")
    n, half = planned_seeds(sd, out.get("test_term", 0.0), effect.sesoi)
    plan[claim_id] = {"pilot_per_seed": out["per_seed"], "sd": sd,
                      "test_term": out.get("test_term", 0.0), "sesoi": effect.sesoi,
                      "planned_seeds": n, "planned_half_width": half,
                      "cap_binds": half > effect.sesoi,
                      "plateau_moves": headline._plateau_moves(headline.measured_from(
                          pieces, (claim_id,)), arms)}
    print(claim_id, json.dumps(plan[claim_id]), flush=True)
  result = {"command": "python benchmarks/claims/headline_pilot.py" + (" --small" if args.small else "")
                       + " --claims=<each claim, as its pilot seeds finished>",
            "pilot_seeds": list(PILOT_SEEDS), "steps": headline.plan_steps(args.small),
            "plan": plan}
  with open(args.out, "w") as f:
    json.dump(result, f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
