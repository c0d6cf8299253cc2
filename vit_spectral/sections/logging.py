"""`config.logging`: where a run's metrics go besides TensorBoard
(`LoggingSettings`), without JAX and without importing wandb.

`training.wandb_writer` acts on them: a Weights & Biases writer beside clu's
default writer when `wandb` names a project (`pip install "vit_spectral[wandb]"`).
"""

from __future__ import annotations

import dataclasses
import os

from vit_spectral import settings as settings_lib

WANDB_MODES = ("online", "offline")  # logging.wandb_mode (None: W&B's own choice)
# W&B refuses longer tags (its documented limit).
MAX_TAG_LENGTH = 64


@dataclasses.dataclass(frozen=True)
class LoggingSettings:
  """`config.logging` (W&B off by default).

  Attributes:
    wandb: the W&B project the run logs to; None = no W&B writer.
    wandb_entity: the W&B user or team owning the project (None: the
      account's default entity).
    wandb_mode: "online" (streams to the server) or "offline" (writes
      `<dir>/wandb/offline-run-*/`, no account or network; `wandb sync`
      uploads it later); None = W&B's own choice: the WANDB_MODE environment
      variable, else online.
    wandb_run_name: the run's display name (None: the workdir's base name).
    wandb_tags: tags of the run.
  """

  SECTION = "logging"

  wandb: str | None = None
  wandb_entity: str | None = None
  wandb_mode: str | None = None
  wandb_run_name: str | None = None
  wandb_tags: tuple[str, ...] = ()

  def __post_init__(self):
    settings_lib.require(self.wandb is None or (isinstance(self.wandb, str) and bool(self.wandb.strip())),
                         f"logging.wandb={self.wandb!r} must name a W&B project "
                         "(None turns W&B off)")
    if self.wandb_mode is not None:
      settings_lib.check_choice(self.wandb_mode, WANDB_MODES, "logging.wandb_mode")
    settings_lib.require(
        isinstance(self.wandb_tags, tuple) and all(
            isinstance(t, str) and 0 < len(t) <= MAX_TAG_LENGTH for t in self.wandb_tags),
        f"logging.wandb_tags={self.wandb_tags!r} must be a tuple of non-empty strings of at "
        f"most {MAX_TAG_LENGTH} characters, e.g. \"('baseline', 'digits')\"")
    if self.wandb is None:
      # A W&B option without a project would be ignored: say so instead.
      for field in ("wandb_entity", "wandb_mode", "wandb_run_name", "wandb_tags"):
        settings_lib.require(
            not getattr(self, field),
            f"logging.{field}={getattr(self, field)!r} is set but logging.wandb is None "
            "(W&B off); name the project too: --config.logging.wandb=PROJECT")

  @property
  def wandb_enabled(self) -> bool:
    return self.wandb is not None

  def run_name(self, workdir: str) -> str:
    """The W&B run's display name: `wandb_run_name`, else the workdir's base name."""
    return self.wandb_run_name or os.path.basename(os.path.normpath(os.path.abspath(workdir)))
