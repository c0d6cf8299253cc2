"""One run per workdir: the lock names its holder, refuses a live one, takes
over from a dead one, and two real runs started together end as one run."""

import json
import os
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from vit_spectral import errors
from vit_spectral.durability import checkpointing, workdir_lock
from tests.cpu_flags import xla_flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _write_lock(workdir, **fields):
  os.makedirs(workdir, exist_ok=True)
  holder = dict(host=socket.gethostname(), pid=os.getpid(), since="then", command="x")
  holder.update(fields)
  with open(os.path.join(workdir, workdir_lock.LOCK_NAME), "w") as f:
    json.dump(holder, f)


def _dead_pid() -> int:
  child = subprocess.Popen([sys.executable, "-c", "pass"])
  child.wait()
  return child.pid


def test_hold_writes_the_holder_and_releases_it(tmp_path):
  workdir = str(tmp_path / "w")
  with workdir_lock.hold(workdir) as me:
    holder = workdir_lock.read_holder(workdir)
    assert (holder.host, holder.pid) == (socket.gethostname(), os.getpid()) == (me.host, me.pid)
    assert workdir_lock.is_running(holder)
  assert workdir_lock.read_holder(workdir) is None


def test_a_live_holder_is_refused_by_name_and_keeps_its_lock(tmp_path):
  workdir = str(tmp_path)
  live = os.getppid()  # pytest's parent: running, and not us
  _write_lock(workdir, pid=live, command="python train.py --workdir=w")
  with pytest.raises(errors.WorkdirLockedError,
                     match=rf"in use by PID {live} on host {socket.gethostname()}.*train.py"):
    with workdir_lock.hold(workdir):
      pass
  with pytest.raises(errors.WorkdirLockedError, match=f"in use by PID {live}"):
    workdir_lock.check_not_held(workdir)  # the early check, before a run's setup
  assert workdir_lock.read_holder(workdir).pid == live


def test_a_dead_holder_is_taken_over_with_a_warning(tmp_path, caplog):
  workdir = str(tmp_path)
  dead = _dead_pid()
  _write_lock(workdir, pid=dead)
  workdir_lock.check_not_held(workdir)  # a dead holder does not stop a run
  with workdir_lock.hold(workdir):
    assert workdir_lock.read_holder(workdir).pid == os.getpid()
  assert "no longer running" in caplog.text and str(dead) in caplog.text
  assert os.path.exists(os.path.join(workdir, f"run.lock.stale-{dead}"))


@pytest.mark.parametrize("text", ["", '{"host": '])
def test_an_empty_or_half_written_lock_is_taken_over(tmp_path, text):
  # What a run killed (or out of disk) while writing its lock leaves behind.
  (tmp_path / workdir_lock.LOCK_NAME).write_text(text)
  assert workdir_lock.is_running(workdir_lock.read_holder(str(tmp_path))) is False
  workdir_lock.check_not_held(str(tmp_path))
  with workdir_lock.hold(str(tmp_path)):
    assert workdir_lock.read_holder(str(tmp_path)).pid == os.getpid()


def test_a_takeover_never_moves_a_fresh_lock(tmp_path, monkeypatch):
  """Two runs judged the same dead holder gone; the first has taken over.
  The second's takeover must see that and stop, not move the new lock."""
  workdir = str(tmp_path)
  dead = _dead_pid()
  _write_lock(workdir, pid=dead)
  dead_holder = workdir_lock.read_holder(workdir)
  with workdir_lock.hold(workdir):  # the first taker
    me = workdir_lock.this_process()
    assert not workdir_lock._move_dead_lock_aside(workdir, dead_holder, me)  # the second
    assert workdir_lock.read_holder(workdir).pid == os.getpid()
    assert not os.path.exists(os.path.join(workdir, "run.lock.takeover"))


def test_a_reused_pid_is_not_the_holder(tmp_path):
  # Our own PID, but recorded with another process start time: the holder is gone.
  me = workdir_lock.this_process()
  if me.start_ticks is None:
    pytest.skip("no /proc: process start times unknown")
  _write_lock(str(tmp_path), start_ticks=me.start_ticks + 1)
  assert workdir_lock.is_running(workdir_lock.read_holder(str(tmp_path))) is False
  assert workdir_lock.is_running(me) is True


def test_another_hosts_lock_is_never_taken_over(tmp_path):
  _write_lock(str(tmp_path), host="some-other-host", pid=_dead_pid())
  with pytest.raises(errors.WorkdirLockedError, match="cannot be checked from here.*delete"):
    workdir_lock.acquire(str(tmp_path))


@pytest.mark.extended
def test_two_runs_started_together_end_as_one_run(tmp_path):
  """Two `train.py` processes on one workdir: one trains to the end, the other
  exits non-zero as soon as it finds the lock, naming the holder, and long
  before the winner ends; the workdir holds one run's checkpoints and history."""
  workdir = str(tmp_path / "w")
  command = [sys.executable, "train.py", "--config=digits_vit:depth=1,width=16,heads=2,steps=60",
             "--config.optim.warmup_steps=1", "--config.checkpoint_every=20",
             "--config.eval_every=60", "--config.log_every=20", f"--workdir={workdir}"]
  env = dict(os.environ, XLA_FLAGS=xla_flags(1), JAX_PLATFORMS="cpu",
             JAX_DISABLE_MOST_OPTIMIZATIONS="1")   # cheap compiles: the lock is under test
  started = time.time()
  logs = [open(tmp_path / f"run{i}.txt", "w+") for i in range(2)]
  runs = [subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
          for log in logs]
  seconds = [None, None]
  while None in seconds:  # note when each one ends
    for i, run in enumerate(runs):
      if seconds[i] is None and run.poll() is not None:
        seconds[i] = time.time() - started
    assert time.time() - started < 400, "the runs did not end"
    time.sleep(0.2)
  outputs = []
  for log in logs:
    log.seek(0)
    outputs.append(log.read())
    log.close()
  codes = [run.returncode for run in runs]
  assert sorted(codes)[0] == 0 and sorted(codes)[1] != 0, (codes, outputs)
  winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
  assert f"in use by PID {runs[winner].pid}" in outputs[loser], outputs[loser][-2000:]
  assert "Traceback" not in outputs[loser], outputs[loser][-3000:]
  assert "train_loss" not in outputs[loser]  # it stopped at the lock
  assert seconds[loser] < seconds[winner], seconds
  directory = os.path.join(workdir, "checkpoints")
  assert sorted(int(d) for d in os.listdir(directory) if d.isdigit()) == [20, 40, 60]
  assert sorted(os.listdir(os.path.join(workdir, "config_history"))) == ["run-000.json"]
  assert not os.path.exists(os.path.join(workdir, workdir_lock.LOCK_NAME))
  params, step = checkpointing.latest_params(workdir)
  assert step == 60 and all(np.isfinite(x).all() for x in jax.tree_util.tree_leaves(params))
