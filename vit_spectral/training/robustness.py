"""Corruption robustness: accuracy on every corruption × severity, and the
per-severity means of paper 003 Table 4 (Hendrycks & Dietterich, 2019).

`config.robustness` is `RobustnessSettings` (an empty `dataset` = off). Every
corrupted data set is read with the run's own `config.input` (image size,
eval resize, normalisation), only `dataset` and `eval_split` replaced. Metric
names: `corrupt_<corruption>_<severity>_accuracy` for each pair,
`corrupt_severity<s>_accuracy` for the mean over corruptions at severity s, and
`corrupt_mean_accuracy` over all pairs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import ml_collections

from vit_spectral import settings as settings_lib
from vit_spectral.data.input_settings import input_settings

# The 15 corruptions of Hendrycks & Dietterich (2019), in TFDS spelling.
HENDRYCKS_15 = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur",
    "frosted_glass_blur", "motion_blur", "zoom_blur", "snow", "frost", "fog",
    "brightness", "contrast", "elastic", "pixelate", "jpeg_compression")
# The 4 extra ("validation") corruptions cifar10_corrupted also has.
EXTRA_4 = ("gaussian_blur", "saturate", "spatter", "speckle_noise")
SEVERITIES = (1, 2, 3, 4, 5)


@dataclasses.dataclass(frozen=True)
class RobustnessSettings:
  """`config.robustness`.

  Attributes:
    dataset: a TFDS name whose builder configs are named
      "<corruption>_<severity>" (None or "" = no corruption evaluation) —
      `cifar10_corrupted` ships with TFDS; CIFAR-100-C does not: prepare it in
      TFDS format under any name with the same config naming (README,
      "Corruption robustness") and set that name here.
    corruptions: the corruption names (TFDS spells glass blur
      `frosted_glass_blur` and elastic transform `elastic`).
    severities: the severities, positive integers.
    split: the split to evaluate (CIFAR-10-C has only "test").
    every: evaluate every this many steps, besides the final step (None = only
      at the end: 75 passes over 10k images are not for every eval).
    use_ema: evaluate the EMA parameters instead of the raw ones.
  """

  SECTION = "robustness"

  dataset: str | None = None
  corruptions: tuple[str, ...] = HENDRYCKS_15
  severities: tuple[int, ...] = SEVERITIES
  split: str = "test"
  every: int | None = None
  use_ema: bool = False

  def __post_init__(self):
    settings_lib.require(bool(self.corruptions), "robustness.corruptions is empty")
    settings_lib.require(
        bool(self.severities) and all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 1
            for s in self.severities),
        f"robustness.severities={tuple(self.severities)} must be a non-empty "
        "list of positive integers")
    if self.every is not None:
      settings_lib.check_range(self.every, "robustness.every", 0, low_open=True)

  @property
  def enabled(self) -> bool:
    return bool(self.dataset)


@dataclasses.dataclass(frozen=True)
class CorruptedSet:
  """One corruption at one severity: its `InputSettings` (the run's, with the
  corrupted TFDS name and split)."""

  corruption: str
  severity: int
  input_config: Any


def robustness_config(dataset: str | None = None, **fields: Any
                      ) -> ml_collections.ConfigDict:
  """The `config.robustness` block (dataset None = off); `fields` are other
  RobustnessSettings fields."""
  return settings_lib.to_config(RobustnessSettings, dataset=dataset, **fields)


def enabled(robustness: RobustnessSettings | Any) -> bool:
  """Whether `robustness` (settings or `config.robustness`) names a data set."""
  return settings_lib.as_settings(RobustnessSettings, robustness).enabled


def validate(robustness: Any) -> RobustnessSettings:
  """`config.robustness` as RobustnessSettings; raises ValueError naming the
  bad field."""
  return settings_lib.as_settings(RobustnessSettings, robustness)


def corrupted_sets(robustness: RobustnessSettings | Any,
                   input_config: Any) -> list[CorruptedSet]:
  """Every (corruption, severity) pair with its copy of the input settings."""
  robustness = settings_lib.as_settings(RobustnessSettings, robustness)
  clean = input_settings(input_config)
  sets = []
  for corruption in robustness.corruptions:
    for severity in robustness.severities:
      cfg = dataclasses.replace(
          clean, dataset=f"{robustness.dataset}/{corruption}_{int(severity)}",
          eval_split=robustness.split)
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
