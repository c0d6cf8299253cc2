r"""The command line: `python train.py` in a checkout, `vit-spectral-train` installed.

  python train.py --config=configs/cifar10_vit.py --workdir=DIR
  vit-spectral-train --config=digits_vit:depth=8 --workdir=DIR

`--config` takes a config file (`path.py` or `path.py:arg`) or the name of a
shipped recipe (`vit_spectral.configs.recipe_names()`); with no flags it trains
the embedded default, `digits_vit`, on the CPU. A rerun with the same --workdir
resumes from its latest checkpoint. `--dry_run` checks the config and compiles
the sharded train step on the devices present, without data or writes.

Multi-host (TPU pod slices, multi-node GPU): pass `--distributed` on every host;
`--coordinator_address`, `--num_processes` and `--process_id` name the cluster
where no cluster manager (Cloud TPU, SLURM, Open MPI, Kubernetes) is detected.
"""

from __future__ import annotations

import logging as std_logging
import os
import sys

from absl import app, flags, logging
from ml_collections import config_flags

from vit_spectral import configs as recipes

DEFAULT_RECIPE = "digits_vit"

_CONFIG = config_flags.DEFINE_config_file(
    "config", recipes.recipe_path(DEFAULT_RECIPE),
    "Training config: a file (`path.py` or `path.py:arg`) or a shipped recipe's "
    f"name ({', '.join(recipes.recipe_names())}).", lock_config=True)
_WORKDIR = flags.DEFINE_string(
    "workdir", None, "Checkpoints, metrics and config.json go here "
    "(default: workdir/<config name>). Local path or gs://.")
_DISTRIBUTED = flags.DEFINE_bool(
    "distributed", False, "Call jax.distributed.initialize() (multi-host runs).")
_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None, "host:port of process 0's coordinator "
    "(implies --distributed; auto-detected when omitted).")
_NUM_PROCESSES = flags.DEFINE_integer(
    "num_processes", None, "Number of processes (implies --distributed; "
    "auto-detected when omitted).")
_PROCESS_ID = flags.DEFINE_integer(
    "process_id", None, "This process's index in [0, num_processes) "
    "(implies --distributed; auto-detected when omitted).")
_DRY_RUN = flags.DEFINE_bool(
    "dry_run", False, "Validate the config, build the mesh, compile the sharded "
    "train step on abstract inputs, print the parameter count, FLOPs and memory "
    "per device, and exit (no data set needed, nothing written).")


class _QuietLibraries(std_logging.Filter):
  """Drops INFO chatter of orbax and TF's dataset ops; warnings still pass."""

  def filter(self, record):
    noisy = "/orbax/" in record.pathname or "/tensorflow" in record.pathname
    return record.levelno >= std_logging.WARNING or not noisy


def resolve_recipe_names(argv: list[str]) -> list[str]:
  """`--config=NAME[:arg]` (or `--config NAME[:arg]`) with NAME a shipped recipe
  -> its file path."""

  def resolve(value: str) -> str:
    name, colon, rest = value.partition(":")
    if name in recipes.recipe_names() and not os.path.exists(name):
      return f"{recipes.recipe_path(name)}{colon}{rest}"
    return value

  resolved = list(argv)
  for i, arg in enumerate(argv):
    if arg.startswith("--config="):
      resolved[i] = "--config=" + resolve(arg[len("--config="):])
    elif arg == "--config" and i + 1 < len(argv):
      resolved[i + 1] = resolve(argv[i + 1])
  return resolved


def config_name() -> str:
  """The config file's name without folder and extension (for the workdir)."""
  path = flags.FLAGS["config"].config_filename
  return os.path.splitext(os.path.basename(path.split(":")[0]))[0]


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  for handler in std_logging.getLogger().handlers:
    handler.addFilter(_QuietLibraries())
  # TensorFlow is only the input pipeline: keep it off the accelerators.
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.set_visible_devices([], "GPU")

  import jax  # pylint: disable=import-outside-toplevel
  from vit_spectral.training import distributed  # pylint: disable=import-outside-toplevel
  try:
    distributed.initialize(_DISTRIBUTED.value, coordinator_address=_COORDINATOR.value,
                           num_processes=_NUM_PROCESSES.value, process_id=_PROCESS_ID.value)
  except ValueError as e:  # inconsistent cluster flags
    sys.exit(str(e))
  logging.info("JAX process %d of %d, %d local devices: %s", jax.process_index(),
               jax.process_count(), jax.local_device_count(), jax.devices())
  if _DRY_RUN.value:
    from vit_spectral.training import dry_run  # pylint: disable=import-outside-toplevel
    try:
      print(dry_run.dry_run(_CONFIG.value).summary())
    except (ValueError, FileNotFoundError) as e:  # invalid field, data set unknown
      sys.exit(f"dry run failed: {e}")
    return
  from vit_spectral.training import trainer  # pylint: disable=import-outside-toplevel
  workdir = _WORKDIR.value or os.path.join("workdir", config_name())
  metrics = trainer.train_and_evaluate(_CONFIG.value, workdir)
  logging.info("final: %s", metrics)


def run() -> None:
  """The console script's entry point (and `train.py`'s)."""
  logging.set_verbosity(logging.INFO)
  sys.argv = resolve_recipe_names(sys.argv)
  app.run(main)


if __name__ == "__main__":
  run()
