"""003-fig3-vit's judge: each verdict on synthetic per-layer profiles, and a
profile training did not move is never read as the paper's effect."""

import pytest

from benchmarks.claims import criteria
from benchmarks.claims.paper003_not_low_pass import CLAIM_ID

# Per seed, (first, last) block HFC/LFC at step 0 and after training.
FLAT = [(1.0, 1.0), (1.1, 1.1), (0.9, 0.9), (1.0, 1.0)]
CASES = {
    "reproduced": (FLAT, [(1.0, 1.6), (1.1, 1.5), (0.9, 1.6), (1.0, 1.4)]),
    "not_reproduced": (FLAT, [(1.3, 0.3), (1.4, 0.4), (1.5, 0.3), (1.2, 0.4)]),
    # The seeds disagree on the sign of the trained rise.
    "inconclusive": (FLAT, [(1.0, 1.8), (1.0, 0.4), (1.0, 1.9), (1.0, 0.5)]),
}


def _measured(init, trained) -> dict:
  profile = lambda pairs: {f"seed {s}": [first, (first + last) / 2, last]
                           for s, (first, last) in enumerate(pairs)}
  return {"hfc_lfc_per_layer": {"init": profile(init), "trained": profile(trained)}}


@pytest.mark.parametrize("want", sorted(CASES))
def test_the_judge_gives_each_verdict(want):
  assert criteria.criterion_for(CLAIM_ID).judge(_measured(*CASES[want])) == want


def test_a_rise_whose_sign_differs_between_seeds_is_inconclusive():
  mixed = [(1.0, 1.8), (1.0, 0.4), (1.0, 1.9), (1.0, 0.5)]
  assert criteria.criterion_for(CLAIM_ID).judge(_measured(FLAT, mixed)) == "inconclusive"


def test_the_resolution_reports_the_trained_rise_per_seed():
  resolution = criteria.criterion_for(CLAIM_ID).resolve(_measured(*CASES["reproduced"]))
  assert resolution["interval"][0] > 0 and resolution["seeds"] == 4
  _, trained = CASES["reproduced"]
  assert list(resolution["per_seed"].values()) == pytest.approx([b - a for a, b in trained])
