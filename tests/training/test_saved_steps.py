"""`checkpointing.saved_steps` and `latest_params` read a workdir without a
read-only CheckpointManager, so orbax logs nothing about it (issue 32)."""

import logging
import os

import numpy as np

from vit_spectral.durability import checkpointing


def _workdir_with_steps(tmp_path, steps):
  directory = os.path.join(tmp_path, "checkpoints")
  with checkpointing.Checkpointer(directory, save_every=1, async_save=False) as checkpointer:
    for step in steps:
      checkpointer.save(step, {"params": {"w": np.full((2, 3), step, np.float32)},
                               "step": np.int32(step)})
  return directory


def test_saved_steps_lists_the_finished_steps_only(tmp_path):
  directory = _workdir_with_steps(tmp_path, (3, 7))
  os.rename(os.path.join(directory, "3"), os.path.join(directory, "3.unreadable"))
  os.makedirs(os.path.join(directory, "9.orbax-checkpoint-tmp-123"))   # an unfinished save
  assert checkpointing.saved_steps(directory) == [7]
  assert checkpointing.saved_steps(os.path.join(tmp_path, "absent")) == []


def test_latest_params_logs_no_warning(tmp_path, caplog):
  _workdir_with_steps(tmp_path, (1, 2))
  with caplog.at_level(logging.INFO):
    params, step = checkpointing.latest_params(str(tmp_path))
    earlier, _ = checkpointing.latest_params(str(tmp_path), step=1)
  assert step == 2
  np.testing.assert_array_equal(params["w"], np.full((2, 3), 2, np.float32))
  np.testing.assert_array_equal(earlier["w"], np.full((2, 3), 1, np.float32))
  assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
