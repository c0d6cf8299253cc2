r"""The command line: `python train.py` in a checkout, `vit-spectral-train` installed.

  python train.py --config=configs/cifar10_vit.py --workdir=DIR
  vit-spectral-train --config=digits_vit:depth=8 --workdir=DIR

The config, in three forms (with no --config: the embedded default, digits_vit,
which trains on the CPU):
  --config=NAME[:arg=value,...]     a shipped recipe by name (listed below);
                                    `:arg=value,...` are its arguments (its
                                    docstring lists them)
  --config=file.py[:arg=value,...]  a config file of your own (get_config(arg))
  --config.a.b=value                one field, after the config is built, e.g.
                                    --config.optim.learning_rate=1e-3,
                                    --config.input.data_dir=/data/tfds;
                                    `=None` unsets a field that may be None
                                    (e.g. --config.num_epochs=None
                                    --config.total_steps=1000). Every field
                                    of every section, the attention's and the
                                    block's options included:
                                    --config.model.block.feat_scale=True,
                                    --config.model.attention.name=hopfield
                                    --config.model.attention.alpha=0.5
  --print_config                    checks the resolved config (every check a
                                    run makes but those that need the devices)
                                    and prints it

A rerun with the same --workdir resumes from its latest checkpoint. `--dry_run`
checks the config and compiles the sharded train step on the devices present,
without data or writes.

Multi-host (TPU pod slices, multi-node GPU): pass `--distributed` on every host;
`--coordinator_address`, `--num_processes` and `--process_id` name the cluster
where no cluster manager (Cloud TPU, SLURM, Open MPI, Kubernetes) is detected.

Failures: a mistake on the command line or in the config (missing config
file, unknown field, a value of the wrong type or out of its range, a name
that is not registered) is one line, exit code 2, before JAX or TensorFlow is
imported; a run that fails for a reason it can name (`errors.RunError`: a data
set not prepared, a workdir in use, ...) is `error: <message>`, exit code 1,
with the traceback in the workdir's log file once the run holds the workdir.

Stops: SIGTERM (preemption, maintenance) or SIGINT (Ctrl-C) during training
finishes the step in flight, saves it (all processes agree on the step) and
exits with code 75 (`durability.preemption.PREEMPTED_EXIT_CODE`) after one line,
"stopped at step N on SIGTERM: its checkpoint is saved; resume with the same
command"; the launchers rerun the command on that code.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging as std_logging
import os
import sys
import textwrap
from typing import Any, NamedTuple, Sequence

from absl import app, flags, logging
from ml_collections import config_flags

from vit_spectral import config_overrides
from vit_spectral import configs as recipes
from vit_spectral import errors
from vit_spectral.names import did_you_mean

DEFAULT_RECIPE = "digits_vit"
USAGE_EXIT_CODE = errors.USAGE_EXIT_CODE
FAILURE_EXIT_CODE = errors.FAILURE_EXIT_CODE
HELP_FLAGS = ("-h", "-?", "--help", "--helpshort")


class CommandLineError(Exception):
  """A mistake on the command line; the message is one line naming it."""


class CommandLine(NamedTuple):
  """The flags of the command line (absl FlagHolders)."""

  config: Any
  workdir: Any
  print_config: Any
  dry_run: Any
  target: Any
  dry_run_json: Any
  distributed: Any
  coordinator_address: Any
  num_processes: Any
  process_id: Any


def define_flags(flag_values: flags.FlagValues = flags.FLAGS,
                 sys_argv: Sequence[str] | None = None) -> CommandLine:
  """Defines the command line's flags in `flag_values`. `sys_argv` is the argv
  config_flags reads the `--config.a.b` overrides from (None: `sys.argv`, read
  when --config is parsed); it must be the argv that is parsed."""
  define = dict(flag_values=flag_values)
  return CommandLine(
      # No default here: loading a config imports JAX and TensorFlow, which
      # `--help` and a missing file must not wait for (`prepare_argv` adds it).
      config=config_flags.DEFINE_config_file(
          "config", None, f"Training config: a shipped recipe's name or a config "
          f"file, with `:arg=value,...` (default: {DEFAULT_RECIPE}); "
          "--config.a.b=value overrides one field.", lock_config=True,
          sys_argv=None if sys_argv is None else list(sys_argv), **define),
      workdir=flags.DEFINE_string(
          "workdir", None, "Checkpoints, metrics, train.log and config.json go here "
          "(default: workdir/<config name>). Local path or gs://.", **define),
      print_config=flags.DEFINE_bool(
          "print_config", False, "Print the resolved config (file, arguments and "
          "overrides) and exit, without training or touching the workdir.", **define),
      dry_run=flags.DEFINE_bool(
          "dry_run", False, "Validate the config, build the mesh, compile the sharded "
          "train step on abstract inputs, print the parameter count, FLOPs and memory "
          "per device, and exit (no data set needed, nothing written).", **define),
      target=flags.DEFINE_string(
          "target", None, "With --dry_run: compile for this Cloud TPU slice instead, "
          "named as gcloud's accelerator type (v4-8, v4-32, v5p-8, v5litepod-16 or "
          "v5e-16, v6e-8, ...; 2xv5litepod-256 for two slices), with the TPU "
          "compiler (needs libtpu: the [tpu] extra), or for GPU hosts (a3-highgpu-8g, "
          "a2-highgpu-8g, h100-8, ...; needs jax's CUDA plugin: the [cuda12] extra); "
          "prints memory per chip, FLOPs, an estimated step time, images/s, an MFU "
          "ceiling and the collectives. Exit 1 with one line if the step does not "
          "fit.", **define),
      dry_run_json=flags.DEFINE_string(
          "dry_run_json", None, "With --dry_run: also write the report as JSON to "
          "this path (with --target, a refusal too).", **define),
      distributed=flags.DEFINE_bool(
          "distributed", False, "Call jax.distributed.initialize() (multi-host runs).",
          **define),
      coordinator_address=flags.DEFINE_string(
          "coordinator_address", None, "host:port of process 0's coordinator "
          "(implies --distributed; auto-detected when omitted).", **define),
      num_processes=flags.DEFINE_integer(
          "num_processes", None, "Number of processes (implies --distributed; "
          "auto-detected when omitted).", **define),
      process_id=flags.DEFINE_integer(
          "process_id", None, "This process's index in [0, num_processes) "
          "(implies --distributed; auto-detected when omitted).", **define))


_FLAGS = define_flags()


# --- Before any flag is parsed: names, the default, `=None`, the file -------------

def _config_arguments(argv: Sequence[str]) -> list[tuple[int, str, str]]:
  """(index, prefix, value) of each --config in `argv`: `--config=X` or
  `-config=X` (the index of that argument, prefix "--config=" or "-config="),
  or `--config X` / `-config X` (the index of X, prefix "")."""
  found = []
  for i, arg in enumerate(argv):
    for flag in ("--config", "-config"):
      if arg.startswith(flag + "="):
        found.append((i, flag + "=", arg[len(flag) + 1:]))
      elif arg == flag and i + 1 < len(argv):
        found.append((i + 1, "", argv[i + 1]))
  return found


def resolve_recipe_names(argv: list[str]) -> list[str]:
  """`--config=NAME[:arg]` (or `--config NAME[:arg]`) with NAME a shipped recipe
  -> its file path."""
  resolved = list(argv)
  for i, prefix, value in _config_arguments(argv):
    name, colon, rest = value.partition(":")
    if name in recipes.recipe_names() and not os.path.exists(name):
      resolved[i] = f"{prefix}{recipes.recipe_path(name)}{colon}{rest}"
  return resolved


def config_value(argv: Sequence[str]) -> str | None:
  """The value of --config in `argv` (`--config=X` or `--config X`), or None."""
  found = _config_arguments(argv)
  return found[0][2] if found else None


def prepare_argv(argv: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
  """The argv to parse, and the `--config.a.b=value` overrides taken out of
  it ((path, text) in order: `config_overrides` applies them after parsing).

  Recipe names become their files and the default recipe is added when there
  is no --config.

  Raises:
    CommandLineError: the config file does not exist (checked here, before
      JAX or TensorFlow is imported).
  """
  argv = resolve_recipe_names(list(argv))
  if config_value(argv) is None:
    argv.insert(1, f"--config={recipes.recipe_path(DEFAULT_RECIPE)}")
  value = config_value(argv)
  path = value.split(":", 1)[0]
  if not os.path.isfile(path):
    name = os.path.splitext(os.path.basename(path))[0]
    raise CommandLineError(
        f"--config={value}: no config file {path!r}{did_you_mean(name, recipes.recipe_names())}; "
        f"pass a config file or a shipped recipe's name: {', '.join(recipes.recipe_names())}")
  return config_overrides.split_overrides(argv)


# --- Parsing, and one line for what went wrong ---------------------------------

def load_config(value: str):
  """`file.py[:arg]` -> the file's get_config(arg), as config_flags loads it."""
  path, colon, arg = value.partition(":")
  spec = importlib.util.spec_from_file_location("config_config", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg) if colon else module.get_config()


def _explain(argv: Sequence[str], error: Exception) -> str:
  """One line for a failed parse of `argv`: the config's arguments (the
  recipe's own error), else the parser's own first line."""
  value = config_value(argv)
  try:
    load_config(value)
  except Exception as e:  # pylint: disable=broad-except  # the recipe's own check
    return f"--config={value}: {_first_line(e)}"
  return _first_line(error)


def _first_line(error: BaseException) -> str:
  lines = str(error).strip().splitlines()
  return lines[0] if lines else type(error).__name__


def parse_prepared(argv: Sequence[str], overrides: Sequence[tuple[str, str]],
                   flag_values: flags.FlagValues = flags.FLAGS) -> list[str]:
  """Parses `argv` (from `prepare_argv`) into `flag_values`, then applies the
  `overrides` to the config. Returns the arguments left over.

  Raises:
    CommandLineError: one line naming the mistake.
  """
  try:
    rest = flag_values(list(argv))
  except Exception as error:  # pylint: disable=broad-except
    # flags.Error, or a recipe's ValueError about its arguments: one line.
    raise CommandLineError(_explain(argv, error)) from error
  try:
    config_overrides.apply_overrides(flag_values["config"].value, overrides)
  except config_overrides.OverrideError as e:
    raise CommandLineError(str(e)) from None
  check_no_leftovers(rest, CommandLineError)
  return rest


def check_no_leftovers(rest: Sequence[str], error: type[Exception]) -> None:
  """Raises `error` (one line) for arguments left after the flags (`rest[0]`
  is the program)."""
  if len(rest) > 1:
    raise error(f"unexpected arguments {list(rest[1:])} (flags are --name=value)")


def parse_flags(flag_values: flags.FlagValues, argv: Sequence[str],
                error: type[Exception]) -> list[str]:
  """Parses `argv` (`argv[0]` the program) into `flag_values` for a command
  without a config (`vit-spectral-evaluate`, `vit-spectral-analyse`): an
  unknown flag, a bad value or a leftover argument raises `error` with one line."""
  try:
    rest = flag_values(list(argv))
  except flags.Error as e:
    raise error(_first_line(e)) from None
  check_no_leftovers(rest, error)
  return rest


def parse_command_line(argv: Sequence[str]) -> CommandLine:
  """Parses a command line (`argv[0]` the program) with this module's flags
  into fresh FlagValues, as `run` does into absl's: for tests and tools.

  Raises:
    CommandLineError: one line naming the mistake.
  """
  argv, overrides = prepare_argv(argv)
  flag_values = flags.FlagValues()
  command_line = define_flags(flag_values, sys_argv=argv)
  parse_prepared(argv, overrides, flag_values)
  return command_line


# --- --help ---------------------------------------------------------------------

def flags_help(flag_values: flags.FlagValues, names: Sequence[str]) -> list[str]:
  """"Flags:" and each of `names`, `--[no]name` for a boolean, its help and
  default wrapped at 78 columns (the commands' --help lists)."""
  lines = ["Flags:"]
  for name in names:
    flag = flag_values[name]
    label = f"--[no]{name}" if flag.boolean else f"--{name}"
    default = "" if flag.default is None else f" (default: {flag.default_as_str})"
    lines.append(f"  {label}")
    lines.extend(textwrap.wrap(flag.help + default, 78, initial_indent="      ",
                               subsequent_indent="      "))
  return lines


def help_text(flag_values: flags.FlagValues = flags.FLAGS) -> str:
  """The module docstring, the command line's flags and the recipes."""
  lines = [__doc__.strip(), "", *flags_help(flag_values, CommandLine._fields)]
  lines += ["", "Recipes (--config=NAME; `python train.py --config=NAME --print_config` "
            "shows every field):"]
  names = recipes.recipe_names()
  column = max(25, max(len(name) for name in names) + 1)   # a space after the longest name
  for name in names:
    lines.extend(textwrap.wrap(recipes.recipe_summary(name), 78,
                               initial_indent=f"  {name:{column}}",
                               subsequent_indent=" " * (column + 2)))
  lines += ["", "--helpfull lists every flag, the libraries' too."]
  return "\n".join(lines)


def wants_help(argv: Sequence[str]) -> bool:
  args = list(argv[1:])
  args = args[:args.index("--")] if "--" in args else args
  return any(arg in HELP_FLAGS for arg in args)


# --- The run --------------------------------------------------------------------

class _QuietLibraries(std_logging.Filter):
  """For the terminal: drops INFO chatter of orbax, JAX's backend probing and
  TF's dataset ops (nothing a user can act on), and orbax's error records
  that carry a traceback (a failed save: the run ends with one `error:` line;
  the run's log file keeps them all). Other warnings pass."""

  def filter(self, record):
    if record.exc_info and "/orbax/" in record.pathname:
      return False
    noisy = any(part in record.pathname for part in ("/orbax/", "/tensorflow", "/jax/_src/"))
    return record.levelno >= std_logging.WARNING or not noisy


def config_name() -> str:
  """The config file's name without folder and extension (for the workdir)."""
  path = flags.FLAGS["config"].config_filename
  return os.path.splitext(os.path.basename(path.split(":")[0]))[0]


def failure_message(error: Exception) -> str | None:
  """What the terminal shows for a run that raised `error`, or None where the
  traceback must show (a bug before the run had a log file).

  `error.log_path`, where set, is the log file holding the traceback.
  """
  log_path = getattr(error, "log_path", None)
  where = f" (traceback: {log_path})" if log_path else ""
  if isinstance(error, errors.RunError):
    return f"error: {error}{where}"
  if log_path:
    return f"error: {type(error).__name__}: {_first_line(error)}{where}"
  return None


def _exit_now(message: str, code: int) -> None:
  """Prints `message`, flushes the logs and exits at once: background threads
  (e.g. an orbax save stuck after a failure) are not waited for."""
  logging.flush()
  for handler in std_logging.getLogger().handlers:
    handler.flush()
  sys.stdout.flush()
  print(message, file=sys.stderr, flush=True)
  os._exit(code)  # pylint: disable=protected-access


def _write_json(path: str | None, report: dict[str, Any]) -> None:
  if path:
    import json  # pylint: disable=import-outside-toplevel
    with open(path, "w", encoding="utf-8") as f:
      json.dump(report, f, indent=2, sort_keys=True, default=str)


def run_dry_run(settings, target: str | None = None, json_path: str | None = None) -> None:
  """`--dry_run` of the typed `settings` (`config_checks.check_config`) on the
  devices present, or with `target` for a TPU slice or GPU host
  (`planning.target_dry_run`, which converts each variant of the config it
  tries); prints the report and writes it to `json_path`.

  Raises:
    errors.RunError: as the dry runs (a refused step: `HbmExceededError`,
      after its JSON is written).
  """
  if target is None:
    from vit_spectral.planning import dry_run as dry_run_lib  # pylint: disable=import-outside-toplevel
    report = dry_run_lib.dry_run(settings)
    print(report.summary())
    _write_json(json_path, dataclasses.asdict(report))
    return
  from vit_spectral.planning import target_dry_run as tdr  # pylint: disable=import-outside-toplevel
  try:
    report = tdr.target_dry_run(settings.config, target)
  except tdr.HbmExceededError as e:
    _write_json(json_path, e.report)
    raise
  print(report.summary())
  _write_json(json_path, report.to_json())


def train(settings, workdir: str, dry_run: bool = False, target: str | None = None,
          dry_run_json: str | None = None) -> None:
  """Trains the typed `settings` (`config_checks.check_config`) in `workdir`
  (or dry-runs them, for `target` where given);
  a failure is reported by `failure_message` and exits with
  FAILURE_EXIT_CODE."""
  from vit_spectral.training import trainer  # pylint: disable=import-outside-toplevel
  try:
    if dry_run:
      run_dry_run(settings, target, dry_run_json)
      return
    metrics = trainer.train_and_evaluate(settings, workdir)
    from vit_spectral.training import progress  # pylint: disable=import-outside-toplevel
    logging.info("final metrics:\n%s", progress.metrics_table(metrics))
  except errors.RunPreempted as stop:  # saved: the launchers rerun on this code
    from vit_spectral.durability import preemption  # pylint: disable=import-outside-toplevel
    _exit_now(str(stop), preemption.PREEMPTED_EXIT_CODE)
  except Exception as error:  # pylint: disable=broad-except
    message = failure_message(error)
    if message is None:
      raise
    _exit_now(message, FAILURE_EXIT_CODE)


def main(argv):
  del argv  # `parse_prepared` rejects leftover arguments
  config = _FLAGS.config.value
  for name in ("target", "dry_run_json"):
    if getattr(_FLAGS, name).value and not _FLAGS.dry_run.value:
      _exit_now(f"error: --{name} is a --dry_run option; add --dry_run", USAGE_EXIT_CODE)
  if _FLAGS.target.value:
    from vit_spectral.planning import target_dry_run as tdr  # pylint: disable=import-outside-toplevel
    try:
      tdr.parse_target(_FLAGS.target.value)
    except tdr.tpu_targets.UnknownTargetError as e:
      _exit_now(f"error: {e}", USAGE_EXIT_CODE)
  # The config converted once, with every check a run makes that needs no
  # device, before a JAX backend starts: a config error is one line.
  from vit_spectral.training import config_checks  # pylint: disable=import-outside-toplevel
  try:
    settings = config_checks.check_config(config)
  except ValueError as e:
    _exit_now(f"error: {_first_line(e)}", USAGE_EXIT_CODE)
  if _FLAGS.print_config.value:  # as the workdir's config.json records it
    print(config.to_json_best_effort(indent=2, sort_keys=True))
    return
  for handler in std_logging.getLogger().handlers:
    handler.addFilter(_QuietLibraries())
  # TensorFlow is only the input pipeline: imported without its start-up lines
  # and kept off the accelerators (`data.tensorflow_import`).
  from vit_spectral.data import tensorflow_import  # pylint: disable=import-outside-toplevel
  tensorflow_import.import_tensorflow()
  if not _FLAGS.dry_run.value:   # a missing data set is one line before any JAX work
    from vit_spectral.data import input_pipeline  # pylint: disable=import-outside-toplevel
    try:
      input_pipeline.get_builder(settings.input.dataset, settings.input.data_dir,
                                 settings.input.download)
    except errors.RunError as e:
      _exit_now(f"error: {_first_line(e)}", FAILURE_EXIT_CODE)

  import jax  # pylint: disable=import-outside-toplevel
  if _FLAGS.target.value:  # compiled for the named TPU slice: no local accelerator needed
    jax.config.update("jax_platforms", "cpu")
  from vit_spectral.training import distributed  # pylint: disable=import-outside-toplevel
  try:
    distributed.initialize(_FLAGS.distributed.value,
                           coordinator_address=_FLAGS.coordinator_address.value,
                           num_processes=_FLAGS.num_processes.value,
                           process_id=_FLAGS.process_id.value)
  except ValueError as e:  # inconsistent cluster flags
    _exit_now(f"error: {e}", USAGE_EXIT_CODE)
  from vit_spectral.training import run_log  # pylint: disable=import-outside-toplevel
  run_log.quiet_terminal()   # on a terminal: INFO to train.log only, the progress line shows
  logging.info("JAX process %d of %d, %d local devices: %s", jax.process_index(),
               jax.process_count(), jax.local_device_count(), jax.devices())
  workdir = _FLAGS.workdir.value or os.path.join("workdir", config_name())
  train(settings, workdir, dry_run=_FLAGS.dry_run.value, target=_FLAGS.target.value,
        dry_run_json=_FLAGS.dry_run_json.value)


def run() -> None:
  """The console script's entry point (and `train.py`'s)."""
  if wants_help(sys.argv):
    print(help_text())
    sys.exit(0)
  try:
    argv, overrides = prepare_argv(sys.argv)
  except CommandLineError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(USAGE_EXIT_CODE)
  sys.argv = argv  # the argv absl parses, without the overrides

  def parse(args):
    try:
      return parse_prepared(args, overrides)
    except CommandLineError as e:
      print(f"error: {e}", file=sys.stderr)
      sys.exit(USAGE_EXIT_CODE)

  logging.set_verbosity(logging.INFO)
  app.run(main, flags_parser=parse)


if __name__ == "__main__":
  run()
