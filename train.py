r"""Trains a vit_spectral config: `python train.py --config=configs/x.py --workdir=DIR`.

With no flags it trains the embedded default (configs/digits_vit.py) on the CPU.
A rerun with the same --workdir resumes from its latest checkpoint.
Multi-host (TPU pod slices, multi-node GPU): pass --distributed on every host.
"""

import logging as std_logging
import os

from absl import app, flags, logging
from ml_collections import config_flags

_HERE = os.path.dirname(os.path.abspath(__file__))
_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(_HERE, "configs", "digits_vit.py"),
    "Training config file (`path.py` or `path.py:arg`).", lock_config=True)
_WORKDIR = flags.DEFINE_string(
    "workdir", None, "Checkpoints, metrics and config.json go here "
    "(default: workdir/<config file name>). Local path or gs://.")
_DISTRIBUTED = flags.DEFINE_bool(
    "distributed", False, "Call jax.distributed.initialize() (multi-host runs).")


class _QuietLibraries(std_logging.Filter):
  """Drops INFO chatter of orbax and TF's dataset ops; warnings still pass."""

  def filter(self, record):
    noisy = "/orbax/" in record.pathname or "/tensorflow" in record.pathname
    return record.levelno >= std_logging.WARNING or not noisy


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  for handler in std_logging.getLogger().handlers:
    handler.addFilter(_QuietLibraries())
  # TensorFlow is only the input pipeline: keep it off the accelerators.
  import tensorflow as tf
  tf.config.set_visible_devices([], "GPU")

  import jax
  if _DISTRIBUTED.value:
    jax.distributed.initialize()
  from vit_spectral.training import trainer

  config_path = flags.FLAGS["config"].config_filename
  name = os.path.splitext(os.path.basename(config_path.split(":")[0]))[0]
  workdir = _WORKDIR.value or os.path.join("workdir", name)
  logging.info("JAX process %d of %d, %d local devices: %s", jax.process_index(),
               jax.process_count(), jax.local_device_count(), jax.devices())
  metrics = trainer.train_and_evaluate(_CONFIG.value, workdir)
  logging.info("final: %s", metrics)


if __name__ == "__main__":
  logging.set_verbosity(logging.INFO)
  app.run(main)
