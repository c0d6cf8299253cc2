"""`config.robustness`: corruption robustness's settings (`RobustnessSettings`),
without JAX or TensorFlow.

`training.robustness` evaluates them and re-exports these names.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_collections

from vit_spectral import settings as settings_lib

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
      TFDS format under any name with the same config naming (docs/training.md,
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
