"""Paper 002's long-run centre entries: each is its 600-step criterion under a
new id with the step count in its words, each judge gives every verdict it can
on synthetic measurements, and the experiment trains `STEPS` steps per seed into
the long ids."""

import types

import numpy as np
import pytest

from benchmarks.claims import criteria, ledger, paper002, paper002_long
from benchmarks.claims.paper002_long import LONG_IDS, STEPS

SEEDS = ("seed 0", "seed 1", "seed 2")
INIT = [2.5] * 6
NEAREST0 = [1.5] * 6


def _fig2(moved) -> dict:
  return {"layer4_mean_centre_displacement": dict(zip(SEEDS, moved)),
          "layer4_alpha_init_vs_end": {s: [0.5, 0.8] for s in SEEDS}}


def _fig3(gaps) -> dict:
  """Layers 3–6 `gap` px further from the query than layers 1–2, per seed (0 at init)."""
  return {"mean_centre_distance_per_layer": {s: [2.5, 2.5] + [2.5 + g] * 4
                                             for s, g in zip(SEEDS, gaps)},
          "at_init": {s: INIT for s in SEEDS}}


def _cover(changes) -> dict:
  nearest = {s: [1.5 + c] * 6 for s, c in zip(SEEDS, changes)}
  return {"mean_nearest_centre_distance_per_layer": nearest,
          "at_init": {s: NEAREST0 for s in SEEDS},
          "relative_growth": {s: float(np.mean(v) / 1.5 - 1) for s, v in nearest.items()}}


# One rule (power.judge_effect) on the per-seed effects, sesoi 0.5 px.
CASES = {
    "002-fig2": {"reproduced": _fig2([1.0, 1.1, 0.9]),             # beyond the 0.5 px floor
                 "not_reproduced": _fig2([0.10, 0.12, 0.08]),      # still the random start
                 "inconclusive": _fig2([0.2, 1.5, 0.6])},          # seeds too spread
    "002-fig3": {"reproduced": _fig3([1.5, 1.4, 1.6]),
                 "not_reproduced": _fig3([0.05, 0.0, 0.1]),
                 "inconclusive": _fig3([1.5, -1.0, 0.2])},
    "002-fig3-cover": {"reproduced": _cover([1.0, 0.9, 1.1]),
                       "not_reproduced": _cover([0.02, -0.01, 0.03]),
                       "inconclusive": _cover([1.0, -0.8, 0.1])},
}


@pytest.mark.parametrize("short,want", [(s, v) for s in CASES for v in CASES[s]])
def test_each_long_judge_gives_each_verdict_as_its_600_step_one(short, want):
  measured = CASES[short][want]
  assert criteria.criterion_for(LONG_IDS[short]).judge(measured) == want
  assert criteria.criterion_for(short).judge(measured) == want


@pytest.mark.parametrize("short", paper002.CENTRES_IDS)
def test_a_long_criterion_is_the_600_step_one_with_its_steps_in_the_words(short):
  base, long = criteria.criterion_for(short), criteria.criterion_for(LONG_IDS[short])
  assert (long.effect, long.claim, long.where, long.kind, long.paper_values) == (
      base.effect, base.claim, base.where, base.kind, base.paper_values)
  assert long.words.endswith(base.words)
  assert f"{STEPS} steps" in long.words and str(paper002.CENTRES_STEPS) in long.words
  assert long.fingerprint() != base.fingerprint()


def _fake_train(calls):
  """`digits_runs.train` replaced: centres drawn as the init draws them, each
  moved by one pixel at the end, α doubled."""
  def train(config, *, seed, steps, batch_size, record_every, record):
    del batch_size, record_every, record
    calls.append((seed, steps))
    rng = np.random.default_rng(seed)
    depth, heads = config.model.depth, config.model.num_heads
    start = rng.normal(0, 2, size=(depth, heads, 2))
    layers = lambda centres, alpha: [
        dict(centers=c.tolist(), precision=np.broadcast_to(2 * alpha * np.eye(2),
                                                           (heads, 2, 2)).tolist())
        for c in centres]
    records = {0: layers(start, 0.5), steps: layers(start + [0.6, 0.8], 1.0)}
    return types.SimpleNamespace(test_accuracy=0.9, records=records)
  return train


def test_the_experiment_trains_steps_per_seed_into_the_long_ids(monkeypatch):
  calls = []
  monkeypatch.setattr(paper002, "train", _fake_train(calls))
  exp = ledger.EXPERIMENTS["attention_centres_long"]
  assert exp.trains and exp.claims == tuple(LONG_IDS.values())
  entries = exp.run([0, 1, 2], False)
  assert calls == [(0, STEPS), (1, STEPS), (2, STEPS)]
  assert [e["id"] for e in entries] == list(exp.claims)
  judged = {e["id"]: ledger.judged(dict(e, command="x")) for e in entries}
  assert all(f"{STEPS} steps" in e["setup"] for e in judged.values())
  # Every centre moved by exactly 1 px and α doubled: Fig. 2's test passes.
  assert judged["002-fig2-long"]["verdict"] == "reproduced"
  assert judged["002-fig2-long"]["measured"]["layer4_mean_centre_displacement"] == {
      s: pytest.approx(1.0) for s in SEEDS}


def test_the_600_step_experiment_still_trains_600_steps_into_its_ids(monkeypatch):
  calls = []
  monkeypatch.setattr(paper002, "train", _fake_train(calls))
  entries = ledger.EXPERIMENTS["attention_centres"].run([0], False)
  assert calls == [(0, paper002.CENTRES_STEPS)] and paper002.CENTRES_STEPS == 600
  assert [e["id"] for e in entries] == list(paper002.CENTRES_IDS)
