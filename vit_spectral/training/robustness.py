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

from vit_spectral import settings as settings_lib
from vit_spectral.sections.input import input_settings
from vit_spectral.sections.robustness import (  # noqa: F401  (re-exported)
    EXTRA_4, HENDRYCKS_15, SEVERITIES, RobustnessSettings, enabled, robustness_config, validate)


@dataclasses.dataclass(frozen=True)
class CorruptedSet:
  """One corruption at one severity: its `InputSettings` (the run's, with the
  corrupted TFDS name and split)."""

  corruption: str
  severity: int
  input_config: Any


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
