"""`config.init_from`: fine-tuning's settings (`InitFromSettings`), without JAX.

`training.init_from` loads the weights and re-exports these names.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_collections

from vit_spectral import settings as settings_lib
from vit_spectral.pretrained.formats import FORMATS, SUFFIXES



@dataclasses.dataclass(frozen=True)
class InitFromSettings:
  """`config.init_from`.

  Attributes:
    path: the pretrained weights (see the module docstring per format); None
      (or "") = train from the initialisation (off).
    format: one of `pretrained.FORMATS`: "timm", "big_vision",
      "vit_spectral" (a trainer workdir).
    reinit_head: start the head from its initialisation instead of the
      source's (a new task; needed when the class count differs).
    step: "vit_spectral" only: the source workdir's checkpoint step (None =
      its latest).
    use_ema: "vit_spectral" only: load its EMA parameters (the recipe must
      have kept them, config.ema_decay > 0).
  """

  SECTION = "init_from"

  path: str | None = None
  format: str = "vit_spectral"
  reinit_head: bool = True
  step: int | None = None
  use_ema: bool = False

  def __post_init__(self):
    if self.path == "":
      object.__setattr__(self, "path", None)
    settings_lib.check_choice(self.format, FORMATS, "init_from.format")
    if self.format != "vit_spectral":
      for field in ("step", "use_ema"):
        settings_lib.require(
            not getattr(self, field),
            f"init_from.{field}={getattr(self, field)!r} is for init_from.format="
            f"'vit_spectral' (a trainer workdir); init_from.format={self.format!r} "
            "reads a file")
    if self.step is not None:
      settings_lib.check_range(self.step, "init_from.step", 0, low_open=True)
    if self.enabled and self.format in SUFFIXES:
      settings_lib.require(
          self.path.lower().endswith(SUFFIXES[self.format]),
          f"init_from.path={self.path!r}: a {self.format!r} checkpoint is a "
          f"{' / '.join(SUFFIXES[self.format])} file")

  @property
  def enabled(self) -> bool:
    return self.path is not None


def init_from_config(path: str | None = None, **fields: Any) -> ml_collections.ConfigDict:
  """The `config.init_from` block (path None = off); `fields` are other
  InitFromSettings fields."""
  return settings_lib.to_config(InitFromSettings, path=path, **fields)
