"""Failures a run reports as a message, not a traceback.

Each is a mistake or an accident the user can act on: a config field out of
range, a data set that is not prepared, a workdir another run holds,
checkpoints that cannot be read or written. The command line
(`vit_spectral.main`) prints `error: <message>` for these, writes the
traceback to the run's log file (`<workdir>/train.log`) and exits non-zero;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

# The commands' exit codes (`main`, `evaluate`).
USAGE_EXIT_CODE = 2  # a mistake on the command line
FAILURE_EXIT_CODE = 1  # a run that failed


class RunError(Exception):
  """Base class: the message says what failed, why, and what is safe."""


class ConfigError(RunError, ValueError):
  """A config field (or a combination of fields) is invalid; the message
  names `<section>.<field>` and what would be valid."""


class ConfigMismatchError(RunError, ValueError):
  """A resume with a config whose parameters or optimizer state do not fit
  the workdir's checkpoints; the message lists the differing fields."""


class WorkdirLockedError(RunError):
  """Another run (named by host and PID) holds the workdir."""


class CheckpointReadError(RunError):
  """The workdir has checkpoints, but none of them can be read."""


class CheckpointSaveError(RunError):
  """A checkpoint could not be written (e.g. the disk is full); the message
  names the directory, the step and the newest good checkpoint."""


class WeightsMismatchError(RunError, ValueError):
  """Pretrained weights do not fit the model (`pretrained.loading`): the
  message names the first tensor whose name or shape does not fit; nothing
  was loaded."""


class RunPreempted(RunError):
  """SIGTERM or SIGINT stopped the run at a step all processes agreed on,
  after saving that step (`durability.preemption`): not a failure. The command
  line exits with `preemption.PREEMPTED_EXIT_CODE`; the same command resumes.

  Attributes:
    step: the step saved and stopped at.
  """

  def __init__(self, message: str, step: int):
    super().__init__(message)
    self.step = step
