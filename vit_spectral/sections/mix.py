"""`config.mixup`: Mixup / CutMix settings (`MixSettings`), without JAX.

`training.mixing` mixes the batches and re-exports `MixSettings`.
"""

from __future__ import annotations

import dataclasses

from vit_spectral import settings as settings_lib


@dataclasses.dataclass(frozen=True)
class MixSettings:
  """What `mix_batch` does: `config.mixup` (the defaults are "off").

  Attributes:
    mixup_alpha: Beta parameter of Mixup; 0 disables Mixup (DeiT: 0.8).
    cutmix_alpha: Beta parameter of CutMix; 0 disables CutMix (DeiT: 1.0).
    prob: probability that a batch is mixed at all (DeiT: 1.0).
    switch_prob: probability of CutMix when both are enabled (DeiT: 0.5).
  """

  SECTION = "mixup"

  mixup_alpha: float = 0.0
  cutmix_alpha: float = 0.0
  prob: float = 1.0
  switch_prob: float = 0.5

  def __post_init__(self):
    for name in ("mixup_alpha", "cutmix_alpha"):
      settings_lib.check_range(getattr(self, name), f"mixup.{name}", 0)
    for name in ("prob", "switch_prob"):
      settings_lib.check_range(getattr(self, name), f"mixup.{name}", 0, 1)

  @property
  def enabled(self) -> bool:
    return self.prob > 0 and (self.mixup_alpha > 0 or self.cutmix_alpha > 0)
