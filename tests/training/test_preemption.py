"""SIGTERM and SIGINT through `python train.py`: the run finishes its step,
saves it, exits with code 75 within 10 s, and the rerun of the same command
ends with exactly the state of an uninterrupted run (params, Adam moments,
EMA, step), bit for bit.

One process: one workdir is stopped three times, then run to its end:
SIGTERM at a random moment of training with synchronous checkpoints; SIGTERM
while an asynchronous checkpoint is being written (its temporary directory
exists), followed by a second SIGTERM 50 ms later, during the stop's own save;
SIGINT at a random moment of training (after the resumed run's first
step: a signal during the start-up compile waits for it and that step).
The random moments come from a seeded generator.

Two processes (4 fake devices each): SIGTERM to process 1 only; jax's
preemption service tells process 0, both save the same step and exit 75; the
same two-process command resumes to the end, equal bit for bit to an
uninterrupted two-process run.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from vit_spectral import data
from vit_spectral.durability import checkpointing, preemption, resume
from tests.cpu_flags import xla_flags
from tests.training.cluster import ROOT, Cluster
from tests.training.run_control import assert_trees_equal

# End-to-end runs: .ci/run runs them as a step of their own (pyproject's markers).
pytestmark = pytest.mark.extended

TOTAL, EVERY = 800, 100
EXIT_WITHIN_S = 10
FLAGS = [
    f"--config=digits_vit:depth=1,width=32,heads=2,steps={TOTAL}",
    "--config.input.batch_size=32",
    "--config.optim.warmup_steps=10",
    f"--config.checkpoint_every={EVERY}",
    f"--config.eval_every={TOTAL}",
    f"--config.log_every={EVERY}",
    "--config.ema_decay=0.9",
]
STOPPED = "its checkpoint is saved; resume with the same command"


def _env(data_dir):
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
             TFDS_DATA_DIR=data_dir, XLA_FLAGS=xla_flags(1),
             JAX_DISABLE_MOST_OPTIMIZATIONS="1")
  return env


def _command(workdir, *extra):
  return [sys.executable, os.path.join(ROOT, "train.py"), *FLAGS, *extra,
          f"--workdir={workdir}"]


def _steps(workdir):
  path = os.path.join(workdir, "checkpoints")
  return sorted(int(d) for d in (os.listdir(path) if os.path.isdir(path) else [])
                if d.isdigit())


def _saving(workdir) -> bool:
  """Whether a checkpoint is being written (orbax's temporary directory)."""
  path = os.path.join(workdir, "checkpoints")
  return os.path.isdir(path) and any("tmp" in d for d in os.listdir(path))


def _training(workdir) -> bool:
  """The run has passed its first step (it records config.json then)."""
  return os.path.exists(os.path.join(workdir, "config.json"))


def _runs_trained(workdir) -> int:
  """How many runs have passed their first step in the workdir (each adds its
  entry to the config history then): a signal after it lands in training,
  not in the start-up compile, which no signal can cut short."""
  path = os.path.join(workdir, resume.HISTORY_DIR)
  return len(os.listdir(path)) if os.path.isdir(path) else 0


def _wait_for(condition, proc, timeout=300, poll=0.005):
  deadline = time.time() + timeout
  while not condition():
    assert proc.poll() is None, "the run ended before the signal"
    assert time.time() < deadline, "timed out waiting"
    time.sleep(poll)


def _stop(proc, signals, *, gap=0.05):
  """Sends `signals` to `proc` (`gap` s apart); returns (exit code, seconds
  from the first signal to the exit, stderr)."""
  start = time.time()
  for i, number in enumerate(signals):
    if i:
      time.sleep(gap)
    proc.send_signal(number)
  _, err = proc.communicate(timeout=120)
  return proc.returncode, time.time() - start, err


def _assert_stopped(code, seconds, err, workdir, name, after):
  """Exit 75 within EXIT_WITHIN_S, the one line naming the step and signal,
  that step saved as the newest checkpoint; returns the step."""
  assert code == preemption.PREEMPTED_EXIT_CODE, err[-3000:]
  assert seconds < EXIT_WITHIN_S, f"exited {seconds:.1f} s after the signal"
  last = err.strip().splitlines()[-1]
  assert last.startswith("stopped at step ") and f"on {name}: {STOPPED}" in last, last
  step = int(last.split()[3])
  assert after < step < TOTAL and _steps(workdir)[-1] == step, (step, _steps(workdir))
  assert not os.path.exists(os.path.join(workdir, "final_metrics.json"))
  return step


def _assert_same_state(workdir_a, workdir_b):
  state_a, step_a = checkpointing.latest_state(workdir_a)
  state_b, step_b = checkpointing.latest_state(workdir_b)
  assert step_a == step_b == int(state_b["step"])
  assert_trees_equal(state_a, state_b)  # params, moments, EMA, step
  # Trained (the head starts at zero), and the EMA trails the params.
  assert np.abs(state_a["params"]["head"]["kernel"]).max() > 0
  assert not np.array_equal(state_a["ema_params"]["head"]["kernel"],
                            state_a["params"]["head"]["kernel"])


def test_signals_stop_at_a_saved_step_and_the_rerun_is_bit_identical(tmp_path):
  data.get_builder("digits", data_dir=str(tmp_path / "tfds"))  # prepared once, here
  env = _env(str(tmp_path / "tfds"))
  whole, stopped = str(tmp_path / "whole"), str(tmp_path / "stopped")
  reference = subprocess.Popen(_command(whole), env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
  rng = random.Random(31)
  done = 0

  # SIGTERM at a random moment, synchronous checkpoints.
  proc = subprocess.Popen(_command(stopped, "--config.async_checkpointing=False"), env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  _wait_for(lambda: _training(stopped), proc)
  time.sleep(rng.uniform(0.2, 1.5))
  done = _assert_stopped(*_stop(proc, [signal.SIGTERM]), stopped, "SIGTERM", done)

  # SIGTERM during an asynchronous save, and again during the stop's save.
  proc = subprocess.Popen(_command(stopped), env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
  _wait_for(lambda: _saving(stopped), proc, poll=0.001)
  saving = _saving(stopped)
  code, seconds, err = _stop(proc, [signal.SIGTERM, signal.SIGTERM])
  assert saving
  previous = done
  done = _assert_stopped(code, seconds, err, stopped, "SIGTERM", done)
  assert f"resumed from the checkpoint at step {previous}" in err
  assert "SIGTERM again" in err  # the second signal was seen, and ignored

  # SIGINT (Ctrl-C) at a random moment of training.
  proc = subprocess.Popen(_command(stopped), env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
  _wait_for(lambda: _runs_trained(stopped) == 3, proc)
  time.sleep(rng.uniform(0.2, 1.0))
  done = _assert_stopped(*_stop(proc, [signal.SIGINT]), stopped, "SIGINT", done)

  final = subprocess.run(_command(stopped), env=env, capture_output=True, text=True,
                         timeout=600)
  assert final.returncode == 0, final.stderr[-3000:]
  assert f"resumed from the checkpoint at step {done}" in final.stderr
  _, reference_err = reference.communicate(timeout=600)
  assert reference.returncode == 0, reference_err[-3000:]
  _assert_same_state(whole, stopped)


TWO_TOTAL, TWO_EVERY = 40, 10
TWO_FLAGS = [
    f"--config=digits_vit:depth=1,width=32,heads=2,steps={TWO_TOTAL}",
    "--config.input.batch_size=32",
    "--config.optim.warmup_steps=10",
    f"--config.checkpoint_every={TWO_EVERY}",
    f"--config.eval_every={TWO_TOTAL}",
    f"--config.log_every={TWO_EVERY}",
    "--config.ema_decay=0.9",
]


def test_sigterm_to_one_of_two_processes_stops_both_at_one_saved_step(tmp_path):
  data_dir = str(tmp_path / "tfds")
  data.get_builder("digits", data_dir=data_dir)
  args = lambda workdir: [*TWO_FLAGS, f"--config.input.data_dir={data_dir}",  # noqa: E731
                          f"--workdir={workdir}"]
  whole, stopped = tmp_path / "whole", tmp_path / "stopped"
  deadline = time.time() + 900
  # One cluster at a time: the 10 s are measured on a machine not shared
  # with another run.
  clusters = [Cluster(tmp_path, args(stopped), name="stopped")]
  try:
    stopping = clusters[0]
    while not _steps(stopped):  # in steady training: after the first checkpoint
      assert all(c is None for c in stopping.codes()), stopping.tails()
      assert time.time() < deadline, stopping.tails()
      time.sleep(0.01)
    time.sleep(random.Random(7).uniform(0.1, 1.0))
    start = time.time()
    stopping.procs[1].send_signal(signal.SIGTERM)  # process 1 only
    codes = stopping.wait(deadline, codes=(preemption.PREEMPTED_EXIT_CODE,))
    seconds = time.time() - start
    assert codes == [preemption.PREEMPTED_EXIT_CODE] * 2
    assert seconds < EXIT_WITHIN_S, f"exited {seconds:.1f} s after the signal"
    lines = [stopping.output(i).strip().splitlines()[-1] for i in range(2)]
    step = int(lines[0].split()[3])
    assert lines == [f"stopped at step {step} on SIGTERM to one of the processes: "
                     f"{STOPPED}"] * 2, lines
    assert TWO_EVERY < step < TWO_TOTAL and _steps(stopped)[-1] == step, step
    stream = json.loads((stopped / "checkpoints" / str(step) / "stream" / "metadata"
                         ).read_text())
    assert stream["shards"] == 2 and stream["examples"] == step * 16, stream

    # The resume and the uninterrupted reference, side by side.
    clusters += [Cluster(tmp_path, args(stopped), name="resumed"),
                 Cluster(tmp_path, args(whole), name="whole")]
    for cluster in clusters[1:]:
      cluster.wait(deadline)
    assert f"resumed from the checkpoint at step {step}" in clusters[1].output(0)
  finally:
    for cluster in clusters:
      cluster.kill()
  _assert_same_state(str(whole), str(stopped))


def test_stop_signals_record_the_first_signal_and_restore_the_handlers(caplog):
  caplog.set_level("WARNING")
  before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
  with preemption.StopSignals() as signals:
    assert not signals.should_stop(1)
    os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt: recorded
    os.kill(os.getpid(), signal.SIGTERM)
    assert signals.received == "SIGINT" and signals.should_stop(2)
    assert signals.should_stop(3)  # once agreed, it stays so
  assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
  messages = [r.getMessage() for r in caplog.records]
  assert messages == ["SIGINT received: the run stops after this step's checkpoint",
                      "SIGTERM again: still finishing the step and its checkpoint, then the "
                      "run exits (the save is not interrupted)"], messages


def test_stop_signals_outside_the_main_thread_watch_nothing(caplog):
  import threading  # pylint: disable=import-outside-toplevel
  seen = []

  def enter():
    with preemption.StopSignals() as signals:
      seen.append(signals.should_stop(1))

  thread = threading.Thread(target=enter)
  thread.start()
  thread.join()
  assert seen == [False]
  assert any("not the main thread" in r.getMessage() for r in caplog.records)
