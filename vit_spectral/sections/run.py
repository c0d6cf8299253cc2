"""The trainer's own settings, and every training section read at once.

A config holds sections (`input`, `model`, `optim`, `mixup`, `robustness`,
`init_from`, `mesh`, `diagnostics`, `logging`), each declared in this package
(`config.model` in `models.build`), beside top-level fields that the trainer
reads. `RunSettings` is the one definition of those: fields,
defaults and checks. Each duration may be given in steps or in epochs, never
both (`vit_spectral.training.durations` converts epochs to steps).
`training_settings(config)` converts the top level and every section once
(an unknown top-level key raises); `config.model` becomes a
`models.build.ModelSpec` there, the one conversion of a run (reading the live
registries, no JAX backend started): `main` makes it once
(`config_checks.check_config`) and hands it down typed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vit_spectral import settings as settings_lib
from vit_spectral.models.build import ModelSpec, model_spec
from vit_spectral.names import did_you_mean
from vit_spectral.sections.diagnostics import DiagnosticsSettings
from vit_spectral.sections.init_from import InitFromSettings
from vit_spectral.sections.input import InputSettings, input_settings
from vit_spectral.sections.logging import LoggingSettings
from vit_spectral.sections.mesh import MeshSettings
from vit_spectral.sections.mix import MixSettings
from vit_spectral.sections.optim import OptimSettings
from vit_spectral.sections.robustness import RobustnessSettings


ON_NONFINITE = ("stop", "rollback")  # config.on_nonfinite


@dataclasses.dataclass(frozen=True)
class RunSettings:
  """The top-level fields of a training config.

  Attributes:
    seed: seeds parameter init, dropout, Mixup/CutMix and the input order.
    num_seeds: K: trains seeds seed ... seed + K - 1 as one program, a leading
      replica axis on the state and the batch (`training.replicas`); each
      final metric is then a list of K values in seed order. 1 = no axis.
    total_steps: optimizer steps of the run; or
    num_epochs: the run's length in epochs (exactly one of the two; the other
      None or 0).
    log_every: write train metrics every this many steps.
    eval_every: evaluate every this many steps; or
    eval_every_epochs: every this many (possibly fractional) epochs (0 = unset,
      like None).
    checkpoint_every: checkpoint every this many steps; or
    checkpoint_every_epochs: every this many epochs (0 = unset, like None).
    keep_checkpoints: how many of the latest checkpoints to keep.
    async_checkpointing: write checkpoints in a background thread.
    label_smoothing: ε of the smoothed cross-entropy (DeiT: 0.1).
    ema_decay: decay of the parameter EMA (`training.ema`); 0 = no EMA
      (DeiT: 0.99996).
    sharding_rules: (regex on the parameter path, partition spec of the
      trailing dimensions) pairs (`training.sharding`); None (default) =
      `sharding.tensor_parallel_rules()`, derived from the registered
      attention variants' declarations when the shardings are made.
    on_nonfinite: what a non-finite training loss or gradient norm does:
      "stop" (the run stops with one message; a rerun resumes from the last
      checkpoint) or "rollback" (the run restores the newest checkpoint,
      skips batches of the stream and goes on; `trainer`).
    rollback_skip_batches: with "rollback", the global batches skipped after
      the restored checkpoint: at least this many, and always through the
      batch of the step that failed (PaLM, Chowdhery et al. 2022, §5.1,
      skipped 200-500 batches).
    max_rollbacks: with "rollback", the run gives up (stops as with "stop")
      at the non-finite step after this many rollbacks.
    allow_batch_size_change: a resume with another `input.batch_size` than
      the checkpoint's goes on at the first example not yet seen (the
      stream's position converted in examples) instead of being refused.
  """

  SECTION = "config"

  seed: int = 0
  num_seeds: int = 1
  total_steps: int | None = None
  num_epochs: float | None = None
  log_every: int = 100
  eval_every: int | None = 1000
  eval_every_epochs: float | None = None
  checkpoint_every: int | None = 1000
  checkpoint_every_epochs: float | None = None
  keep_checkpoints: int = 3
  async_checkpointing: bool = True
  label_smoothing: float = 0.0
  ema_decay: float = 0.0
  sharding_rules: tuple[tuple[str, tuple[str | None, ...]], ...] | None = None
  on_nonfinite: str = "stop"
  rollback_skip_batches: int = 100
  max_rollbacks: int = 3
  allow_batch_size_change: bool = False

  def __post_init__(self):
    # 0 unsets an epochs cadence: a flag cannot write None into a float field,
    # so `--config.eval_every=500 --config.eval_every_epochs=0` switches to steps.
    for field in ("eval_every_epochs", "checkpoint_every_epochs"):
      if getattr(self, field) == 0:
        object.__setattr__(self, field, None)
    both = bool(self.total_steps) and bool(self.num_epochs)
    settings_lib.require(
        bool(self.total_steps) != bool(self.num_epochs),
        f"set exactly one of config.total_steps and config.num_epochs (got "
        f"{self.total_steps} and {self.num_epochs}); on the command line, "
        + ("unset the other: add --config.num_epochs=None (or "
           "--config.total_steps=None)" if both else
           "e.g. --config.total_steps=1000 or --config.num_epochs=10"))
    for field in ("eval_every", "checkpoint_every"):
      steps, epochs = getattr(self, field), getattr(self, f"{field}_epochs")
      settings_lib.require(steps is None or epochs is None,
                           f"set only one of config.{field}={steps} and "
                           f"config.{field}_epochs={epochs}")
      settings_lib.require(steps is not None or epochs is not None,
                           f"set config.{field} (steps) or config.{field}_epochs")
    for field in ("total_steps", "num_epochs", "log_every", "eval_every",
                  "eval_every_epochs", "checkpoint_every", "checkpoint_every_epochs",
                  "keep_checkpoints"):
      value = getattr(self, field)
      # 0 unsets the run's length, so a flag can switch steps <-> epochs.
      unset = value is None or (value == 0 and field in ("total_steps", "num_epochs"))
      settings_lib.require(unset or value > 0, f"config.{field}={value} must be positive")
    settings_lib.require(self.sharding_rules is None or bool(self.sharding_rules),
                         f"config.sharding_rules={self.sharding_rules!r} must list "
                         "(parameter-path regex, partition spec) rules; the default "
                         "(None) is sharding.tensor_parallel_rules(), ((\".*\", ()),) "
                         "replicates all")
    settings_lib.require(
        isinstance(self.num_seeds, int) and not isinstance(self.num_seeds, bool)
        and self.num_seeds >= 1,
        f"config.num_seeds={self.num_seeds!r} must be an int >= 1 (1 = one seed, "
        "config.seed; K trains seeds seed ... seed + K - 1 in one program)")
    settings_lib.check_range(self.label_smoothing, "config.label_smoothing", 0, 1,
                             high_open=True)
    settings_lib.check_range(self.ema_decay, "config.ema_decay", 0, 1, high_open=True)
    settings_lib.check_choice(self.on_nonfinite, ON_NONFINITE, "config.on_nonfinite")
    settings_lib.require(self.rollback_skip_batches >= 1, "config.rollback_skip_batches="
                         f"{self.rollback_skip_batches} must be at least 1")
    settings_lib.require(self.max_rollbacks >= 1, f"config.max_rollbacks="
                         f"{self.max_rollbacks} must be at least 1")

  @property
  def uses_ema(self) -> bool:
    return self.ema_decay > 0

  @property
  def seeds(self) -> tuple[int, ...]:
    """The seeds trained: seed ... seed + num_seeds - 1."""
    return tuple(range(self.seed, self.seed + self.num_seeds))


def run_settings(config: Any) -> RunSettings:
  """RunSettings from a whole config's top-level fields (the sections are
  left to their owners)."""
  names = settings_lib.field_names(RunSettings)
  return settings_lib.from_config(RunSettings, {k: config[k] for k in names if k in config})


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
  """The typed sections of one config, converted once (`training_settings`);
  `config` is the ConfigDict they came from, which the workdir records
  (`resume.record_config`) and a dry run's variants copy."""

  model: ModelSpec
  run: RunSettings
  input: InputSettings
  optim: OptimSettings
  mixup: MixSettings
  robustness: RobustnessSettings
  init_from: InitFromSettings
  mesh: MeshSettings
  diagnostics: DiagnosticsSettings
  logging: LoggingSettings
  config: Any = dataclasses.field(default=None, compare=False, repr=False)


# The sections a config may leave out (their defaults then), each at its SECTION.
OPTIONAL_SECTIONS = (OptimSettings, MixSettings, RobustnessSettings, InitFromSettings,
                     MeshSettings, DiagnosticsSettings, LoggingSettings)


def training_settings(config: Any) -> TrainingSettings:
  """Converts (and so checks) the top level and every training section of
  `config`; an absent section takes its defaults; `config.model` becomes a
  `models.build.ModelSpec`."""
  known = {*settings_lib.field_names(RunSettings), "input", "model",
           *(cls.SECTION for cls in OPTIONAL_SECTIONS)}
  unknown = sorted(set(config.keys()) - known)
  settings_lib.require(not unknown, f"config has unknown fields {unknown}"
                       f"{did_you_mean(unknown[0], known) if unknown else ''}; the fields "
                       f"are {sorted(known)}")
  settings_lib.require("input" in config, "config.input is missing")
  sections = {cls.SECTION: settings_lib.from_config(cls, config.get(cls.SECTION))
              for cls in OPTIONAL_SECTIONS}
  settings_lib.require("model" in config, "config.model is missing")
  return TrainingSettings(model=model_spec(config.model), run=run_settings(config),
                          input=input_settings(config.input), config=config, **sections)
