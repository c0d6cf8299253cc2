"""power.judge_effect, the one rule for a training effect (issue 56), its
mirror for a claimed absence of effect, and the paired per-example interval."""

import itertools

import numpy as np
import pytest

from benchmarks.claims import power


@pytest.mark.parametrize("direction", [1, -1])
def test_one_verdict_per_case_in_both_directions(direction):
  s = direction
  # Excludes 0 on the claimed side.
  assert power.judge_effect(*sorted((0.01 * s, 0.5 * s)), 0.1, direction) == "reproduced"
  # Excludes every effect >= sesoi on the claimed side (holds 0).
  assert power.judge_effect(*sorted((-0.05 * s, 0.05 * s)), 0.1, direction) == "not_reproduced"
  # Wholly on the other side.
  assert power.judge_effect(*sorted((-0.5 * s, -0.2 * s)), 0.1, direction) == "not_reproduced"
  # Holds 0 and the sesoi.
  assert power.judge_effect(*sorted((-0.05 * s, 0.2 * s)), 0.1, direction) == "inconclusive"


def test_the_claimed_side_matters():
  assert power.judge_effect(0.01, 0.5, 0.1, -1) == "not_reproduced"
  assert power.judge_effect(-0.5, -0.01, 0.1, 1) == "not_reproduced"


@pytest.mark.parametrize("args", [(0.0, 1.0, 0.1, 0), (0.0, 1.0, 0.1, 2), (0.0, 1.0, 0.0, 1),
                                  (0.0, 1.0, -0.1, 1), (1.0, 0.0, 0.1, 1)])
def test_bad_input_is_refused(args):
  with pytest.raises(ValueError):
    power.judge_effect(*args)


def test_an_interval_that_holds_the_claimed_effect_is_never_not_reproduced():
  grid = np.linspace(-2, 2, 41)
  for low, high in itertools.combinations_with_replacement(grid, 2):
    for sesoi in (0.05, 0.3, 1.0):
      for direction in (1, -1):
        for claimed in np.linspace(sesoi, 2, 5) * direction:
          if low <= claimed <= high:
            assert power.judge_effect(low, high, sesoi, direction) != "not_reproduced", (
                low, high, sesoi, direction, claimed)


def test_no_effect_mirror():
  assert power.judge_no_effect(-0.05, 0.05, 0.1) == "reproduced"
  assert power.judge_no_effect(0.2, 0.5, 0.1) == "not_reproduced"
  assert power.judge_no_effect(-0.5, -0.01, 0.1) == "not_reproduced"
  assert power.judge_no_effect(-0.05, 0.3, 0.1) == "inconclusive"
  for low, high in itertools.combinations_with_replacement(np.linspace(-1, 1, 21), 2):
    if low <= 0 <= high:
      assert power.judge_no_effect(low, high, 0.1) != "not_reproduced"
  with pytest.raises(ValueError):
    power.judge_no_effect(0.0, 1.0, 0.0)


def test_seed_interval_takes_the_larger_half_width():
  narrow = power.seed_interval([0.10, 0.11, 0.12])
  assert narrow["mean_difference"] == pytest.approx(0.11)
  wide = power.seed_interval([0.10, 0.11, 0.12], floor=0.5)
  assert wide["half_width"] == 0.5 and wide["low"] == pytest.approx(-0.39)


def test_paired_accuracy_difference_is_narrower_than_counting_arms_independent():
  rng = np.random.default_rng(0)
  a = rng.random(5000) < 0.8
  b = a.copy()
  flip = rng.random(5000) < 0.05      # the arms disagree on 5 % of the examples
  b[flip] = ~b[flip]
  out = power.paired_accuracy_difference(a, b)
  assert out["mean_difference"] == pytest.approx(a.mean() - b.mean())
  assert out["low"] < out["mean_difference"] < out["high"]
  assert out["half_width"] < power.difference_half_width(0.8, 5000) / 2
  assert out["only_a"] + out["only_b"] == int(flip.sum())
  with pytest.raises(ValueError):
    power.paired_accuracy_difference(a, b[:10])
  with pytest.raises(ValueError):
    power.paired_accuracy_difference([0, 2], [1, 1])
