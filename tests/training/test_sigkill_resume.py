"""End to end through `python train.py`: a run killed with SIGKILL part-way and
restarted ends with exactly the state of an uninterrupted run (params,
optimizer moments, EMA params, step), with the whole recipe on: augmentation
seeded per example, Mixup/CutMix and dropout/drop-path from fold_in(step), EMA
in the checkpointed TrainState.

One uninterrupted reference run (alongside, in its own workdir) serves both
scenarios, played on one workdir:
killed as soon as the first checkpoint exists (synchronous checkpoints), then
resumed and killed again half-way through (asynchronous checkpoints, the
default), then resumed to the end. Only when checkpoints are written differs
between the runs, which does not change the numbers.
"""

import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from vit_spectral import data
from vit_spectral.durability.checkpointing import latest_params
from tests.cpu_flags import xla_flags

# End-to-end runs: .ci/run runs them as a step of their own (pyproject's markers).
pytestmark = pytest.mark.extended

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOTAL, EVERY = 24, 4
# A tiny model, so four processes fit the test budget; the recipe itself is
# configs/digits_deit.py (erasing, repeated augmentation, Mixup/CutMix, label
# smoothing, drop-path, EMA, decay masks), with RandAugment and dropout added.
FLAGS = [
    f"--config={ROOT}/configs/digits_deit.py:steps={TOTAL},width=16,heads=2,depth=2",
    "--config.input.randaugment_layers=2",
    "--config.input.randaugment_magnitude=5.0",
    "--config.input.batch_size=32",
    "--config.input.eval_batch_size=120",
    "--config.model.dropout_rate=0.1",
    f"--config.checkpoint_every={EVERY}",
    f"--config.eval_every={TOTAL}",
    f"--config.log_every={EVERY}",
    "--config.ema_decay=0.9",
]


def _command(workdir, async_checkpointing=False):
  return [sys.executable, os.path.join(ROOT, "train.py"), *FLAGS,
          f"--config.async_checkpointing={async_checkpointing}", f"--workdir={workdir}"]


def _env(data_dir):
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
             TFDS_DATA_DIR=data_dir)
  # One CPU device and cheap compiles (as conftest does for in-process tests):
  # the guarantee under test is about the data, RNG, mixing and EMA streams.
  env["XLA_FLAGS"] = xla_flags(1)
  env["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"
  return env


def _checkpoints(workdir):
  path = os.path.join(workdir, "checkpoints")
  return sorted(int(d) for d in (os.listdir(path) if os.path.isdir(path) else [])
                if d.isdigit())


def _final_state(workdir):
  manager = ocp.CheckpointManager(os.path.abspath(os.path.join(workdir, "checkpoints")))
  step = manager.latest_step()
  state = manager.restore(step)
  manager.close()
  return step, state


def _kill_after(workdir, env, kill_after, async_checkpointing):
  """Runs train.py in `workdir` and SIGKILLs it once a checkpoint at step >=
  `kill_after` exists; returns the checkpoint steps at the kill."""
  proc = subprocess.Popen(_command(workdir, async_checkpointing), env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  deadline = time.time() + 300
  while time.time() < deadline and proc.poll() is None:
    done = _checkpoints(workdir)
    if done and done[-1] >= kill_after:
      proc.send_signal(signal.SIGKILL)
      break
    time.sleep(0.02)
  proc.wait()
  assert proc.returncode == -signal.SIGKILL, "the run ended before it was killed"
  assert not os.path.exists(os.path.join(workdir, "final_metrics.json"))
  at_kill = _checkpoints(workdir)
  assert at_kill and kill_after <= at_kill[-1] < TOTAL, f"not killed part-way: {at_kill}"
  return at_kill


def test_sigkill_and_resume_is_bit_identical(tmp_path):
  # Prepare digits here, so that no run prepares it itself: a process that
  # prepared digits trained differently from ones that read it, which is not
  # what is under test.
  data.get_builder("digits", data_dir=str(tmp_path / "tfds"))
  env = _env(str(tmp_path / "tfds"))
  whole, killed = str(tmp_path / "whole"), str(tmp_path / "killed")
  # The reference run goes alongside the kill chain (it shares no file with it).
  reference = subprocess.Popen(_command(whole), env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
  first = _kill_after(killed, env, EVERY, async_checkpointing=False)
  # The second run resumes from the first kill's checkpoint, then is killed too.
  second = _kill_after(killed, env, max(TOTAL // 2, first[-1] + EVERY),
                       async_checkpointing=True)
  assert second[-1] > first[-1]
  resumed = subprocess.run(_command(killed, async_checkpointing=True), env=env,
                           capture_output=True, text=True, timeout=600)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"resumed from the checkpoint at step {second[-1]}" in resumed.stderr

  _, reference_err = reference.communicate(timeout=600)
  assert reference.returncode == 0, reference_err[-3000:]
  step_a, state_a = _final_state(whole)
  step_b, state_b = _final_state(killed)
  assert step_a == step_b == TOTAL == int(state_b["step"])
  leaves_a = jax.tree_util.tree_leaves_with_path(state_a)
  leaves_b = jax.tree_util.tree_leaves_with_path(state_b)
  assert [p for p, _ in leaves_a] == [p for p, _ in leaves_b]
  for (path, a), (_, b) in zip(leaves_a, leaves_b):  # params, moments, EMA, step
    np.testing.assert_array_equal(a, b, err_msg=jax.tree_util.keystr(path))
  params, step = latest_params(killed)
  assert step == TOTAL
  jax.tree_util.tree_map(np.testing.assert_array_equal, params, state_b["params"])
  # The runs trained (the head starts at zero) and the EMA trails the params:
  # otherwise the comparison would pass vacuously.
  assert np.abs(np.asarray(state_a["params"]["head"]["kernel"])).max() > 0
  ema_leaf = jax.tree_util.tree_leaves(state_a["ema_params"])[0]
  param_leaf = jax.tree_util.tree_leaves(state_a["params"])[0]
  assert not np.array_equal(ema_leaf, param_leaf)
