r"""vit-spectral-evaluate: a train.py workdir's checkpoint, evaluated as the trainer does.

  vit-spectral-evaluate --workdir=workdir/digits_vit
  vit-spectral-evaluate --workdir=DIR --step=3000 --params=raw --split=train
  python -m vit_spectral.evaluate ...        (the same command)

The run's config is its workdir's `config.json` (the config of its latest
run, `durability.resume`); the checkpoint is the newest finished step, or
--step, read on the host and checked against its fingerprint
(`checkpointing.latest_state`) and laid out on the devices as the config
shards it. The evaluation is the trainer's own (`trainer.set_up`'s eval step,
`trainer.evaluate_all`, `trainer.evaluate_corruptions`): the same metrics,
padding and masking as the trainer's final evaluation, and the corruption
sets when `config.robustness` names a data set.

--params: "auto" is the trainer's final evaluation (the parameters as
`eval_*`, the EMA copy beside them as `eval_ema_*` when the run keeps one;
the corruption sets with `robustness.use_ema`'s parameters); "raw" only the
parameters, "ema" only the EMA copy (both for the corruption sets too).
--split replaces the clean evaluation's split (`config.input.eval_split`).

Read-only: nothing is written to the workdir and its lock is not taken, so a
run still training there goes on undisturbed (only its finished steps are
listed). Mistakes (no workdir, no checkpoint, a step that is not there, EMA
asked of a run without it, an unknown split) are one line naming the flag and
the valid choices, exit code 2; a failure the run would report (a data set not
prepared, a damaged checkpoint) is `error: <message>`, exit code 1.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import Any, NamedTuple, Sequence

from absl import flags, logging

from vit_spectral import errors
from vit_spectral.durability.resume import CONFIG_NAME
from vit_spectral.main import flags_help, parse_flags
from vit_spectral.training import progress
from vit_spectral.workdir import PARAMS_CHOICES

__all__ = ["CommandLine", "EvaluateError", "Evaluation", "FLAG_VALUES", "define_flags",
           "evaluate_workdir", "main", "parse", "run"]

PROG = "vit-spectral-evaluate"


class EvaluateError(Exception):
  """A mistake on the command line; the message is one line naming the flag."""


class CommandLine(NamedTuple):
  """The flags of the command line (absl FlagHolders)."""

  workdir: Any
  step: Any
  params: Any
  split: Any


def define_flags(flag_values: flags.FlagValues) -> CommandLine:
  """Defines the command's flags in `flag_values`."""
  define = dict(flag_values=flag_values)
  return CommandLine(
      workdir=flags.DEFINE_string(
          "workdir", None, "The train.py workdir (finished or still training).", **define),
      step=flags.DEFINE_integer(
          "step", None, "The checkpoint step (default: the newest finished one).", **define),
      params=flags.DEFINE_enum(
          "params", "auto", PARAMS_CHOICES, "auto: as the trainer's final evaluation "
          "(the parameters, and the EMA copy beside them when the run keeps one); raw: "
          "the parameters only; ema: the EMA copy only.", **define),
      split=flags.DEFINE_string(
          "split", None, "The split of the clean evaluation (default: the run's "
          "config.input.eval_split).", **define))


@dataclasses.dataclass(frozen=True)
class Evaluation:
  """What `evaluate_workdir` measured.

  Attributes:
    metrics: {name: value} as the trainer's final evaluation names them
      ("eval_loss", "eval_accuracy", "eval_ema_*", "corrupt_*").
    step: the checkpoint's step.
    params: "auto", "raw" or "ema" (as asked).
    split: the clean evaluation's split.
    dataset: the run's data set.
  """

  metrics: dict[str, float]
  step: int
  params: str
  split: str
  dataset: str


# --- The checks that need no device ---------------------------------------------

def read_config(workdir: str):
  """The workdir's `config.json` as a ConfigDict.

  Raises:
    EvaluateError: no such directory, or no readable config.json in it.
  """
  import ml_collections  # pylint: disable=import-outside-toplevel
  if not workdir:
    raise EvaluateError("--workdir is required: a train.py workdir")
  if not os.path.isdir(workdir):
    raise EvaluateError(f"--workdir={workdir}: no such directory")
  path = os.path.join(workdir, CONFIG_NAME)
  if not os.path.exists(path):
    raise EvaluateError(f"--workdir={workdir} is not a train.py workdir: it has no "
                        f"{CONFIG_NAME} (train.py writes it once the run's first step has run)")
  try:
    with open(path, encoding="utf-8") as f:
      return ml_collections.ConfigDict(json.load(f))
  except ValueError as e:
    raise EvaluateError(f"--workdir={workdir}: {CONFIG_NAME} is unreadable ({e})") from e


def checkpoint_step(workdir: str, step: int | None) -> int:
  """`step`, or the newest finished checkpoint step, checked to be present.

  Raises:
    EvaluateError: no finished checkpoint, or none at `step` (listing those there).
  """
  from vit_spectral.durability import checkpointing  # pylint: disable=import-outside-toplevel
  directory = os.path.join(workdir, "checkpoints")
  steps = checkpointing.saved_steps(directory) if os.path.isdir(directory) else []
  if not steps:
    raise EvaluateError(f"--workdir={workdir} holds no finished checkpoint (none under "
                        f"{directory}): the run has not saved a step yet")
  if step is None:
    return steps[-1]
  if step not in steps:
    raise EvaluateError(f"--step={step}: no checkpoint at that step in {workdir}; "
                        f"choose one of {', '.join(map(str, steps))}")
  return step


def check_params(params: str, uses_ema: bool, workdir: str) -> None:
  """Raises EvaluateError for --params=ema of a run without EMA parameters."""
  if params == "ema" and not uses_ema:
    choices = [p for p in PARAMS_CHOICES if p != "ema"]
    raise EvaluateError(f"--params=ema: the run in {workdir} keeps no EMA parameters "
                        f"(config.ema_decay is 0); choose one of {', '.join(choices)}")


def with_split(sections, split: str | None):
  """`sections` (TrainingSettings) with the eval split replaced by `split`
  (None: unchanged), checked against the data set's splits.

  Raises:
    EvaluateError: the data set has no such split (listing its splits).
  """
  if split is None:
    return sections
  from vit_spectral.data import input_pipeline  # pylint: disable=import-outside-toplevel
  cfg = sections.input
  available = sorted(input_pipeline.get_builder(cfg.dataset, cfg.data_dir, cfg.download)
                     .info.splits)
  # TFDS split syntax: "test", "train[:10%]", "train+test".
  names = [part.split("[")[0].strip() for part in split.split("+")]
  if not all(names) or any(name not in available for name in names):
    raise EvaluateError(f"--split={split}: {cfg.dataset} has no such split; choose one of "
                        f"{', '.join(available)} (TFDS slices such as train[:10%] too)")
  return dataclasses.replace(sections, input=dataclasses.replace(cfg, eval_split=split))


# --- The evaluation -------------------------------------------------------------

def evaluate_workdir(workdir: str, *, step: int | None = None, params: str = "auto",
                     split: str | None = None, devices=None) -> Evaluation:
  """Evaluates a workdir's checkpoint as the trainer's final evaluation does.

  Args:
    workdir: a train.py workdir (finished or still training; read only).
    step: the checkpoint step; None = the newest finished one.
    params: one of PARAMS_CHOICES (module docstring).
    split: the clean evaluation's split; None = the run's eval split.
    devices: the devices to evaluate on (default: all).

  Raises:
    EvaluateError: a mistake in the arguments (one line naming the flag).
    errors.RunError: the config no longer fits the checkpoint, a data set
      is not prepared, the checkpoint is damaged, ...
  """
  if params not in PARAMS_CHOICES:
    raise EvaluateError(f"--params={params}: choose one of {', '.join(PARAMS_CHOICES)}")
  config = read_config(workdir)
  step = checkpoint_step(workdir, step)
  from vit_spectral.durability import checkpointing, resume  # pylint: disable=import-outside-toplevel
  from vit_spectral.training import config_checks, sharding, trainer  # pylint: disable=import-outside-toplevel
  from vit_spectral.training.train_state import TrainState  # pylint: disable=import-outside-toplevel
  try:
    sections = config_checks.check_config(config)
  except ValueError as e:
    raise errors.ConfigError(f"{os.path.join(workdir, CONFIG_NAME)}: {e}") from e
  check_params(params, sections.run.uses_ema, workdir)
  sections = with_split(sections, split)
  # The trainer's own mesh, shardings and jitted eval step; the pretrained
  # source of config.init_from is not needed to evaluate.
  setup = trainer.set_up(sections, devices, check_init_source=False)
  stored, step = checkpointing.latest_state(workdir, step)
  abstract = setup.steps.abstract_state
  differences = resume.structure_differences(stored["params"], abstract.params)
  if differences:
    raise errors.ConfigMismatchError(
        f"the checkpoint at step {step} does not fit {os.path.join(workdir, CONFIG_NAME)} "
        f"(the config of the workdir's latest run): {'; '.join(differences[:3])}")
  shardings = setup.steps.state_sharding.params
  raw = None if params == "ema" else sharding.place(stored["params"], shardings)
  keeps_ema = stored.get("ema_params") is not None
  check_params(params, keeps_ema, workdir)   # config.json may postdate the step
  ema = (sharding.place(stored["ema_params"], shardings) if keeps_ema and params != "raw"
         else None)
  state = TrainState(step=step, params=raw, opt_state=None, ema_params=ema)
  eval_step, input_config, mesh = setup.steps.eval_step, setup.sections.input, setup.mesh
  if params == "ema":
    metrics = trainer.evaluate(eval_step, ema, input_config, mesh, prefix="eval_ema_")
  else:
    metrics = trainer.evaluate_all(eval_step, state, input_config, mesh)
  robustness = setup.sections.robustness
  if robustness.enabled:
    if params != "auto":
      robustness = dataclasses.replace(robustness, use_ema=params == "ema")
    metrics.update(trainer.evaluate_corruptions(eval_step, state, robustness, input_config,
                                                mesh))
  return Evaluation(metrics, int(step), params, input_config.eval_split, input_config.dataset)


# --- The command ---------------------------------------------------------------

# Its own FlagValues: `main`'s flags (--workdir too) live in absl's global ones,
# and both modules may be imported in one process (tests, notebooks).
FLAG_VALUES = flags.FlagValues()
_FLAGS = define_flags(FLAG_VALUES)
HELP_FLAGS = ("-h", "-?", "--help", "--helpshort", "--helpfull")


def help_text() -> str:
  """The module docstring and the flags (listed as train.py's: `main.flags_help`)."""
  return "\n".join([__doc__.strip(), "", *flags_help(FLAG_VALUES, CommandLine._fields)])


def parse(argv: Sequence[str]) -> list[str]:
  """Parses `argv` (`argv[0]` the program) into FLAG_VALUES.

  Raises:
    EvaluateError: an unknown flag, a bad value or a leftover argument, in
      one line.
  """
  FLAG_VALUES.unparse_flags()   # each parse starts from the defaults
  return parse_flags(FLAG_VALUES, argv, EvaluateError)


def main(argv: Sequence[str]) -> int:
  """Runs the command on `argv`; prints the metrics and returns 0, or prints
  one line and returns 2 (a mistake) or 1 (a failure)."""
  try:
    parse(argv)
  except EvaluateError as e:
    return _fail(f"{PROG}: {e}", errors.USAGE_EXIT_CODE)
  logging.set_verbosity(logging.WARNING)   # the metrics are the output
  from vit_spectral.data import tensorflow_import  # pylint: disable=import-outside-toplevel
  tensorflow_import.import_tensorflow()   # without its start-up lines, off the accelerators
  try:
    evaluation = evaluate_workdir(_FLAGS.workdir.value, step=_FLAGS.step.value,
                                  params=_FLAGS.params.value, split=_FLAGS.split.value)
  except EvaluateError as e:
    return _fail(f"{PROG}: {e}", errors.USAGE_EXIT_CODE)
  except (errors.RunError, FileNotFoundError) as e:
    return _fail(f"error: {e}", errors.FAILURE_EXIT_CODE)
  print(f"{_FLAGS.workdir.value}: step {evaluation.step}, params {evaluation.params}, "
        f"{evaluation.dataset} {evaluation.split}")
  print(progress.metrics_table(evaluation.metrics))
  return 0


def _fail(message: str, code: int) -> int:
  print(message, file=sys.stderr, flush=True)
  return code


def run() -> None:
  """The `vit-spectral-evaluate` entry point."""
  if any(arg in HELP_FLAGS for arg in sys.argv[1:]):
    print(help_text())
    sys.exit(0)
  sys.exit(main(sys.argv))


if __name__ == "__main__":
  run()
