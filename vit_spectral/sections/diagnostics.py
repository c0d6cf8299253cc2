"""`config.diagnostics`: the training diagnostics' settings, without JAX.

`training.diagnostics` measures and logs them and re-exports these names. The
metric names are checked against `analysis.layer_metrics`, imported only when
`metrics` is set (or the default set is read).
"""

from __future__ import annotations

import dataclasses

from vit_spectral import errors
from vit_spectral import settings as settings_lib

LOGGED_ACTIVATION_METRICS = ("hc_dc_ratio", "hc_proportion", "token_cosine_similarity",
                             "rank_residual_ratio", "attention_cosine_similarity",
                             "attention_entropy", "attention_spectrum_hf_dc")


def logged_metrics() -> tuple[str, ...]:
  """The default set: LOGGED_ACTIVATION_METRICS and every parameter or
  declared metric (`layer_metrics.known_metric_names`, read when called, so a
  variant registered after import is included)."""
  from vit_spectral.analysis import layer_metrics  # pylint: disable=import-outside-toplevel
  activation = (*layer_metrics.TOKEN_METRICS, *layer_metrics.MAP_METRICS, layer_metrics.SPECTRUM)
  return LOGGED_ACTIVATION_METRICS + tuple(
      n for n in layer_metrics.known_metric_names() if n not in activation)


@dataclasses.dataclass(frozen=True)
class DiagnosticsSettings:
  """`config.diagnostics` (off by default).

  Attributes:
    every: log the diagnostics every this many steps, besides step 0 (of a run
      from scratch) and the last step; None = off.
    num_images: how many images of the eval split (the first ones) they are
      measured on.
    metrics: the metric names logged (`analysis.layer_metrics`); None =
      `logged_metrics()`.
  """

  SECTION = "diagnostics"

  every: int | None = None
  num_images: int = 64
  metrics: tuple[str, ...] | None = None

  def __post_init__(self):
    settings_lib.require(self.every is None or self.every > 0,
                         f"config.diagnostics.every={self.every} must be positive "
                         "(None turns the diagnostics off)")
    settings_lib.require(self.num_images > 0,
                         f"config.diagnostics.num_images={self.num_images} must be positive")
    if self.metrics is not None:
      from vit_spectral.analysis import layer_metrics  # pylint: disable=import-outside-toplevel
      try:
        object.__setattr__(self, "metrics", layer_metrics.check_metrics(self.metrics))
      except ValueError as e:
        raise errors.ConfigError(str(e).replace("diagnose metrics", "config.diagnostics.metrics"))

  @property
  def logged_metrics(self) -> tuple[str, ...]:
    """The metric names the trainer logs."""
    return logged_metrics() if self.metrics is None else self.metrics

  @property
  def enabled(self) -> bool:
    return self.every is not None

  def due(self, step: int, total_steps: int) -> bool:
    """Whether the diagnostics are logged after `step` (step 0 = before training)."""
    return self.enabled and (step % self.every == 0 or step == total_steps)
