"""End to end through `python train.py`: a run killed with SIGKILL part-way and
restarted ends with exactly the parameters of an uninterrupted run."""

import os
import signal
import subprocess
import sys
import time

import chex
import numpy as np
import orbax.checkpoint as ocp
import pytest

from vit_spectral.training.checkpointing import latest_params
from vit_spectral.data import get_builder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = 240
ARGS = [
    f"--config={ROOT}/configs/digits_vit.py:depth=2,width=16,heads=2,steps={STEPS}",
    "--config.checkpoint_every=40", "--config.eval_every=120", "--config.log_every=40",
    "--config.model.dropout_rate=0.1",  # the RNG must be replayed too
]


def train_cmd(workdir):
  return [sys.executable, os.path.join(ROOT, "train.py"), *ARGS, f"--workdir={workdir}"]


def completed_steps(workdir):
  path = os.path.join(workdir, "checkpoints")
  if not os.path.isdir(path):
    return []
  return sorted(int(d) for d in os.listdir(path) if d.isdigit())


def final_params(workdir):
  path = os.path.join(workdir, "checkpoints", str(STEPS), "default")
  return ocp.StandardCheckpointer().restore(path)


@pytest.mark.slow
def test_sigkill_and_resume_gives_bit_identical_parameters(tmp_path):
  straight, killed = str(tmp_path / "straight"), str(tmp_path / "killed")
  get_builder("digits")  # prepared once up front, not by whichever run comes first
  subprocess.run(train_cmd(straight), check=True, capture_output=True, timeout=600)

  proc = subprocess.Popen(train_cmd(killed), stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
  deadline = time.time() + 300
  while time.time() < deadline and not completed_steps(killed):
    time.sleep(0.02)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert proc.returncode == -signal.SIGKILL
  at_kill = completed_steps(killed)
  assert at_kill and at_kill[-1] < STEPS, f"the run was not killed part-way: {at_kill}"

  resumed = subprocess.run(train_cmd(killed), capture_output=True, text=True, timeout=600)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"resumed from the checkpoint at step {at_kill[-1]}" in resumed.stderr

  a, b = final_params(straight), final_params(killed)
  assert int(a["step"]) == int(b["step"]) == STEPS
  chex.assert_trees_all_equal(a, b)  # bit for bit: params, optimizer moments, step
  params, step = latest_params(killed)
  assert step == STEPS
  chex.assert_trees_all_equal(params, b["params"])
  # The runs trained: parameters moved away from their initial values.
  assert np.abs(np.asarray(a["params"]["head"]["kernel"])).max() > 0
