"""The headline experiments' machinery: the paired test-set term, the plateau
gate, resumable pieces and the pilot's plan."""

import os

import numpy as np
import pytest
from scipy import stats

from benchmarks.claims import criteria, headline, headline_pilot, ledger, power


def _piece(correct, curve=None):
  return {"correct": headline.pack(np.asarray(correct, bool)), "test_accuracy": float(np.mean(correct)),
          "curve": curve or {"0": 0.1, "80": 0.5, "100": 0.5}, "seconds": 1.0}


def test_pack_round_trips():
  rng = np.random.default_rng(0)
  correct = rng.random(10_000) < 0.8
  np.testing.assert_array_equal(headline.unpack(headline.pack(correct), 10_000), correct)


def test_the_paired_test_term_of_one_seed_is_the_per_example_interval():
  rng = np.random.default_rng(1)
  a, b = rng.random(10_000) < 0.85, rng.random(10_000) < 0.83
  pieces = {"attn_scale": {"seed 0": _piece(a)}, "plain": {"seed 0": _piece(b)}}
  half = headline.paired_test_half_width(pieces, "attn_scale", "plain")
  assert half == pytest.approx(power.paired_accuracy_difference(a, b)["half_width"])
  # Two seeds that agree on every example: the seed mean has the same term.
  pieces = {arm: {"seed 0": p["seed 0"], "seed 1": p["seed 0"]} for arm, p in pieces.items()}
  assert headline.paired_test_half_width(pieces, "attn_scale", "plain") == pytest.approx(half)


def _measured(gains, moves):
  """A 000 measurement: plain at 0.85, attn_scale 0.85 + gain per seed; each
  arm's curve moves by `moves[arm]` over the last 20 % of the steps."""
  seeds = [f"seed {k}" for k in range(len(gains))]
  acc = {"plain": {s: 0.85 for s in seeds},
         "attn_scale": {s: 0.85 + g for s, g in zip(seeds, gains)}}
  curves = {arm: {s: {"0": 0.1, "80": acc[arm][s] - moves[arm], "100": acc[arm][s]}
                  for s in seeds} for arm in acc}
  return {"test_accuracy": acc, "curves": curves,
          "paired_test_half_width": {"000-headline-attn-scale": 0.001}}


@pytest.mark.parametrize("gains,moves,verdict", [
    ([0.02, 0.025, 0.03, 0.022, 0.028], {"plain": 0.0, "attn_scale": 0.0}, "reproduced"),
    ([0.0, 0.001, -0.001, 0.0005, -0.0005], {"plain": 0.0, "attn_scale": 0.0}, "not_reproduced"),
    ([0.0, 0.03, -0.02, 0.04, -0.01], {"plain": 0.0, "attn_scale": 0.0}, "inconclusive"),
    # Not at a plateau: the gate makes any verdict inconclusive.
    ([0.0, 0.001, -0.001, 0.0005, -0.0005], {"plain": 0.05, "attn_scale": 0.0}, "inconclusive"),
])
def test_each_verdict_of_a_headline_gain(gains, moves, verdict):
  criterion = criteria.criterion_for("000-headline-attn-scale")
  measured = _measured(gains, moves)
  assert criterion.judge(measured) == verdict
  out = criterion.effect.measure(measured)
  if moves["plain"]:
    assert isinstance(out, str) and "plateau" in out
  else:
    # Independently: the t-interval over the gains, widened to the test term.
    half = max(stats.t.ppf(0.975, len(gains) - 1) * np.std(gains, ddof=1) / np.sqrt(len(gains)),
               0.001)
    low, high = np.mean(gains) - half, np.mean(gains) + half
    assert criterion.effect.interval(measured)[0]["low"] == pytest.approx(low)
    assert power.judge_effect(low, high, 0.009, 1) == verdict


def test_an_interval_holding_the_claim_is_never_not_reproduced():
  criterion = criteria.criterion_for("000-headline-attn-scale")
  for spread in (0.001, 0.005, 0.02):
    gains = [0.009 - 2 * spread, 0.009 - spread, 0.009, 0.009 + spread, 0.009 + 2 * spread]
    assert criterion.judge(_measured(gains, {"plain": 0.0, "attn_scale": 0.0})) != "not_reproduced"


def test_the_hfc_lfc_change_is_trained_minus_init_rise():
  criterion = criteria.criterion_for(headline.HFC_ID)
  init = {f"seed {k}": [1.0, 0.9, 0.8] for k in range(5)}
  trained = {f"seed {k}": [1.0, 1.2 + 0.01 * k, 1.5 + 0.01 * k] for k in range(5)}
  measured = {"hfc_lfc_per_layer": {"init": init, "trained": trained},
              "curves": {"plain": {s: {"0": 0.1, "80": 0.8, "100": 0.8} for s in init}}}
  per_seed = criterion.effect.measure(measured)["per_seed"]
  assert per_seed == pytest.approx({f"seed {k}": (0.5 + 0.01 * k) - (-0.2) for k in range(5)})
  assert criterion.judge(measured) == "reproduced"


def test_headline_entries_are_marked_and_checked():
  bad = {"headline": "yes", "kind": "training_effect"}
  with pytest.raises(ValueError, match="headline"):
    ledger.check_entry({**{k: "x" for k in ledger.KEYS}, **bad, "paper": "000", "id": "000-x",
                        "verdict": "reproduced", "measured": {"a": 1}, "kind": "training_effect",
                        "criterion": {"words": "w", "function": "f"}, "paper_values": [],
                        "resolution": {"interval": [0.1, 0.2], "sesoi": 0.01, "claimed": None,
                                       "seeds": 5, "direction": 1}})


def test_the_plan_is_the_fewest_seeds_whose_half_width_reaches_the_sesoi():
  sd = 0.01
  n, half = headline_pilot.planned_seeds(sd, 0.0, 0.012)
  assert n >= headline_pilot.MIN_SEEDS and half <= 0.012
  if n > headline_pilot.MIN_SEEDS:
    assert stats.t.ppf(0.975, n - 2) * sd / np.sqrt(n - 1) > 0.012
  n, half = headline_pilot.planned_seeds(1.0, 0.0, 0.01)   # unreachable: the cap binds
  assert n == headline_pilot.MAX_SEEDS and half > 0.01


@pytest.mark.extended
@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"),
                    reason="needs `apt-get install dataset-fashion-mnist` (.ci/run installs it)")
def test_a_piece_is_saved_once_and_read_back(tmp_path, monkeypatch):
  piece = headline.run_piece("sa_skip_free", 0, True, pieces_dir=str(tmp_path))
  assert os.path.exists(headline.piece_path("sa_skip_free", 0, True, str(tmp_path)))
  assert 0.0 <= piece["test_accuracy"] <= 1.0 and len(piece["curve"]) >= 2

  def no_training(*args, **kwargs):
    raise AssertionError("a saved piece is read, not trained again")
  monkeypatch.setattr(headline, "train", no_training)
  assert headline.run_piece("sa_skip_free", 0, True, pieces_dir=str(tmp_path)) == piece


@pytest.mark.extended
@pytest.mark.skipif(not os.path.isdir("/usr/share/datasets/fashion-mnist"),
                    reason="needs `apt-get install dataset-fashion-mnist` (.ci/run installs it)")
def test_run_on_gpu_script_at_tiny_size(tmp_path):
  """benchmarks/claims/run_on_gpu.sh --small: seeds as one program, pieces and
  the log in $OUT/headline_gpu, no TensorFlow on the way (headline.main checks)."""
  import subprocess  # noqa: PLC0415
  import sys  # noqa: PLC0415
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = dict(os.environ, OUT=str(tmp_path), PATH=os.path.dirname(sys.executable) + ":" +
             os.environ.get("PATH", ""))
  done = subprocess.run(["bash", "benchmarks/claims/run_on_gpu.sh", "--small"], cwd=root,
                        env=env, capture_output=True, text=True, timeout=900)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  out = tmp_path / "headline_gpu"
  names = sorted(p.name for p in out.iterdir())
  assert names == ["headline_gpu.log"] + [f"small-{arm}-seed{s}.json" for arm in
                                          ("mha_skip_free", "sa_skip_free") for s in (0, 1)]
  assert "imported TensorFlow" not in (out / "headline_gpu.log").read_text()
