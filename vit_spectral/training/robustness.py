"""Corruption robustness: accuracy on every corruption × severity, and the
per-severity means of paper 003 Table 4 (Hendrycks & Dietterich, 2019).

`config.robustness` (None or an empty `dataset` = off):
  dataset: a TFDS name whose builder configs are named "<corruption>_<severity>"
    — `cifar10_corrupted` ships with TFDS; CIFAR-100-C does not: prepare it in
    TFDS format under any name with the same config naming (README, "Corruption
    robustness") and set that name here.
  corruptions: the corruption names; default HENDRYCKS_15 (TFDS spells glass
    blur `frosted_glass_blur` and elastic transform `elastic`).
  severities: default (1, 2, 3, 4, 5).
  split: the split to evaluate (CIFAR-10-C has only "test").
  every: evaluate every this many steps, besides the final step (None = only
    at the end: 75 passes over 10k images are not for every eval).
  use_ema: evaluate the EMA parameters instead of the raw ones.

Every corrupted data set is read with the run's own `config.input` (image size,
eval resize, normalisation), only `dataset` and `eval_split` replaced. Metric
names: `corrupt_<corruption>_<severity>_accuracy` for each pair,
`corrupt_severity<s>_accuracy` for the mean over corruptions at severity s, and
`corrupt_mean_accuracy` over all pairs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import ml_collections

# The 15 corruptions of Hendrycks & Dietterich (2019), in TFDS spelling.
HENDRYCKS_15 = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur",
    "frosted_glass_blur", "motion_blur", "zoom_blur", "snow", "frost", "fog",
    "brightness", "contrast", "elastic", "pixelate", "jpeg_compression")
# The 4 extra ("validation") corruptions cifar10_corrupted also has.
EXTRA_4 = ("gaussian_blur", "saturate", "spatter", "speckle_noise")
SEVERITIES = (1, 2, 3, 4, 5)
CONFIG_FIELDS = ("dataset", "corruptions", "severities", "split", "every", "use_ema")


@dataclasses.dataclass(frozen=True)
class CorruptedSet:
  """One corruption at one severity, as a TFDS name and the input config."""

  corruption: str
  severity: int
  input_config: Any


def robustness_config(dataset: str | None = None, *,
                      corruptions: Sequence[str] = HENDRYCKS_15,
                      severities: Sequence[int] = SEVERITIES, split: str = "test",
                      every: int | None = None, use_ema: bool = False
                      ) -> ml_collections.ConfigDict:
  """The `config.robustness` block (dataset None = off)."""
  return ml_collections.ConfigDict(dict(
      dataset=dataset, corruptions=tuple(corruptions),
      severities=tuple(severities), split=split, every=every, use_ema=use_ema))


def enabled(robustness: Any) -> bool:
  return bool(robustness and robustness.get("dataset"))


def validate(robustness: Any) -> None:
  """Raises ValueError naming the bad field of `config.robustness`."""
  if not enabled(robustness):
    return
  unknown = sorted(set(robustness.keys()) - set(CONFIG_FIELDS))
  if unknown:
    raise ValueError(f"config.robustness has unknown fields {unknown}; the "
                     f"fields are {list(CONFIG_FIELDS)}")
  if not robustness.get("corruptions"):
    raise ValueError("config.robustness.corruptions is empty")
  severities = robustness.get("severities") or ()
  if not severities or any(int(s) < 1 for s in severities):
    raise ValueError(f"config.robustness.severities={tuple(severities)} must be "
                     "a non-empty list of positive integers")
  every = robustness.get("every")
  if every is not None and every <= 0:
    raise ValueError(f"config.robustness.every={every} must be positive or None")


def corrupted_sets(robustness: Any, input_config: Any) -> list[CorruptedSet]:
  """Every (corruption, severity) pair with its `config.input` copy."""
  validate(robustness)
  sets = []
  for corruption in robustness.corruptions:
    for severity in robustness.severities:
      cfg = ml_collections.ConfigDict(input_config.to_dict())
      cfg.dataset = f"{robustness.dataset}/{corruption}_{int(severity)}"
      cfg.eval_split = robustness.get("split", "test")
      sets.append(CorruptedSet(corruption, int(severity), cfg))
  return sets


def metric_name(corruption: str, severity: int) -> str:
  return f"corrupt_{corruption}_{severity}_accuracy"


def summarize(accuracies: Mapping[tuple[str, int], float]) -> dict[str, float]:
  """Per-pair accuracies -> all metrics (per pair, per-severity mean, mean).

  Args:
    accuracies: {(corruption, severity): accuracy}.

  Returns:
    {metric name: value}, names as in the module docstring.
  """
  metrics = {metric_name(c, s): float(a) for (c, s), a in accuracies.items()}
  for severity in sorted({s for _, s in accuracies}):
    values = [a for (_, s), a in accuracies.items() if s == severity]
    metrics[f"corrupt_severity{severity}_accuracy"] = float(sum(values) / len(values))
  metrics["corrupt_mean_accuracy"] = float(
      sum(accuracies.values()) / len(accuracies))
  return metrics
