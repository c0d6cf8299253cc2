"""How small an effect a training experiment can resolve: 95 % intervals from
the seeds and the test-set size, for the criteria's `resolution`.

A difference between two arms is resolved when its 95 % interval excludes 0;
the smallest resolvable difference is the larger of (a) the half-width of the
paired t-interval over seeds and (b) the 95 % half-width of a difference of
two accuracies on one test set of `n` examples (binomial, normal approximation).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

Z95 = 1.959963984540054


def t_half_width(values: Sequence[float]) -> float:
  """Half-width of the 95 % t-interval of the mean of `values` (nan for < 2)."""
  values = np.asarray(values, float)
  if values.size < 2:
    return float("nan")
  return float(stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))


def paired_interval(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
  """Mean of the per-seed differences a − b and its 95 % t-interval."""
  diff = np.asarray(a, float) - np.asarray(b, float)
  half = t_half_width(diff)
  mean = float(diff.mean())
  return {"mean_difference": mean, "low": mean - half, "high": mean + half, "half_width": half}


def accuracy_half_width(accuracy: float, n: int) -> float:
  """95 % half-width of one accuracy measured on `n` test examples."""
  return Z95 * math.sqrt(max(accuracy * (1 - accuracy), 1e-12) / n)


def difference_half_width(accuracy: float, n: int) -> float:
  """95 % half-width of the difference of two accuracies near `accuracy`,
  each on the same `n` examples, counted as independent (conservative)."""
  return math.sqrt(2) * accuracy_half_width(accuracy, n)


def accuracy_difference_resolution(a: Sequence[float], b: Sequence[float], n: int,
                                   claimed: str) -> dict:
  """The resolution entry of an accuracy difference a − b over paired seeds."""
  interval = paired_interval(a, b)
  binomial = difference_half_width(float(np.mean([*a, *b])), n)
  return {"smallest_resolvable": max(interval["half_width"], binomial),
          "claimed_effect": claimed,
          "basis": f"95 % paired t-interval over {len(a)} seeds (±{interval['half_width']:.4f}) "
                   f"and the binomial half-width of a difference on {n} test examples "
                   f"(±{binomial:.4f}); the larger",
          "difference": interval}


def resolved(interval: dict[str, float]) -> bool:
  """Whether a difference's 95 % interval excludes 0."""
  return interval["low"] > 0 or interval["high"] < 0


# The verdicts of `judge_effect`, one rule for every training effect (issue 56).
EFFECT_VERDICTS = ("reproduced", "not_reproduced", "inconclusive")


def judge_effect(low: float, high: float, sesoi: float, direction: int) -> str:
  """The verdict of a training effect from its paired 95 % interval [low, high]
  over seeds, its smallest effect of interest `sesoi` (> 0, in the measure's
  units) and the claimed `direction` (+1: the effect is > 0; -1: < 0).

  reproduced: the interval excludes 0 on the claimed side; not_reproduced: it
  excludes every effect of at least `sesoi` on the claimed side; otherwise
  inconclusive. An interval that holds the claimed effect (≥ sesoi) is never
  not_reproduced.
  """
  if direction not in (1, -1):
    raise ValueError(f"direction={direction!r}; choose 1 (effect > 0) or -1 (effect < 0)")
  if not sesoi > 0:
    raise ValueError(f"sesoi={sesoi!r} must be a positive number")
  if not low <= high:
    raise ValueError(f"interval [{low}, {high}] must have low <= high")
  low, high = (low, high) if direction == 1 else (-high, -low)
  if low > 0:
    return "reproduced"
  if high < sesoi:
    return "not_reproduced"
  return "inconclusive"


def judge_no_effect(low: float, high: float, sesoi: float) -> str:
  """The verdict of a claimed absence of effect ("MHA does not change the
  entropy") from its paired 95 % interval: `judge_effect` mirrored. reproduced:
  the interval excludes every effect of at least `sesoi` either way (it lies
  inside (−sesoi, sesoi)); not_reproduced: it excludes 0 (an effect was
  found); otherwise inconclusive. An interval that holds 0 is never
  not_reproduced."""
  if not sesoi > 0:
    raise ValueError(f"sesoi={sesoi!r} must be a positive number")
  if not low <= high:
    raise ValueError(f"interval [{low}, {high}] must have low <= high")
  if -sesoi < low and high < sesoi:
    return "reproduced"
  if low > 0 or high < 0:
    return "not_reproduced"
  return "inconclusive"


def seed_interval(per_seed: Sequence[float], floor: float = 0.0) -> dict[str, float]:
  """The 95 % interval of the mean of per-seed effects (each already a paired
  difference, or a change from a start of 0): mean ± max(t half-width, `floor`).
  `floor` is a half-width that the seeds cannot see, e.g. the test-set term
  (`difference_half_width`) when every seed is scored on the same examples."""
  values = np.asarray(per_seed, float)
  half = max(t_half_width(values), floor)
  mean = float(values.mean())
  return {"mean_difference": mean, "low": mean - half, "high": mean + half,
          "half_width": half}


def paired_accuracy_difference(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> dict:
  """The accuracy difference a − b of two arms scored on the same test examples,
  from their per-example correctness (paired: the same example in both), and its
  95 % interval (normal approximation to the mean of the per-example
  differences, each −1, 0 or +1). Narrower than `difference_half_width`, which
  counts the arms as independent: examples both arms get right or both get
  wrong add nothing to the variance."""
  a = np.asarray(correct_a, float)
  b = np.asarray(correct_b, float)
  if a.shape != b.shape or a.ndim != 1 or a.size < 2:
    raise ValueError(f"correctness arrays of one shape (n,), n >= 2; got {a.shape} and {b.shape}")
  if not np.all(np.isin(a, (0, 1))) or not np.all(np.isin(b, (0, 1))):
    raise ValueError("correctness arrays hold 0/1 (or booleans) only")
  diff = a - b
  mean = float(diff.mean())
  half = Z95 * float(diff.std(ddof=1)) / math.sqrt(diff.size)
  return {"mean_difference": mean, "low": mean - half, "high": mean + half, "half_width": half,
          "examples": int(diff.size), "only_a": int((diff > 0).sum()), "only_b": int((diff < 0).sum())}
