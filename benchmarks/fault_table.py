r"""The fault table of issue 31: each fault run through `python train.py`, as a user meets it.

  python benchmarks/fault_table.py [--seed=31] [--data_dir=DIR] [--only=1,5]
      [--out=benchmarks/results/fault_table.json]

Writes --out (the rows, the command, the environment, the date) and the
Markdown table beside it (`fault_table.md`). Every run is the small digits run

  JAX_PLATFORMS=cpu TF_CPP_MIN_LOG_LEVEL=3 python train.py \
      --config=digits_vit:depth=1,width=32,heads=2,steps=600 \
      --config.input.batch_size=32 --config.checkpoint_every=100 \
      --config.log_every=50 --config.eval_every=600 \
      --config.input.data_dir=DIR --workdir=<fresh folder>

on digits prepared once (`data.get_builder("digits", data_dir=DIR)`), each
fault in a fresh workdir under a temporary folder, one run at a time (the
seconds are not shared with another run). `log_every=50` puts a logged step
between two checkpoints: the SIGKILL is sent when such a step's line appears.
Faults that need code in the process (a NaN batch, a full disk) run through an
entry script that patches the library and calls `vit_spectral.main.run()`, the
command line train.py runs; the random moments come from `random.Random(seed)`.
In the results, paths under the temporary folder are written `<tmp>`.

Made 2026-11-26 by `python benchmarks/fault_table.py` (seed 31) in 570 s on a
2-core x86_64 CPU: benchmarks/results/fault_table.md and .json.

The columns:
  what the user sees  the terminal (stdout and stderr, one pipe) from the fault
                      on. Lines that are not ours are skipped: TF/XLA's C++
                      startup lines ("WARNING: All log messages before
                      absl::InitializeLog() ...", lines starting "I0000",
                      "W0000" or "E0000") and any line naming cuda. First: the
                      first of our lines at or after the fault that is not an INFO
                      log line (the fault's own report), else the first line;
                      last: the run's last line. Log lines are shown without
                      absl's date, time and thread ("W preemption.py:87] ...").
                      The JSON keeps the raw lines.
  s to exit           from the fault (the signal sent; the poisoned batch or
                      the failing write reached, as the entry script records;
                      the process start for a fault present from the start) to
                      the process's exit.
  what was lost       the step the fault hit minus the step the rerun resumed
                      from ("resumed from the checkpoint at step N" in its
                      output); a refusal: the workdir listed (path, size,
                      mtime) before and after the refused run, "nothing: no file
                      written" or what changed.
  rerun               the same command again in the same workdir (what differs,
                      where something must, is said), and its exit code.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.figures import RESULTS_DIR, write_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOTAL, EVERY, LOG_EVERY, BATCH = 600, 100, 50, 32
FLAGS = [
    f"--config=digits_vit:depth=1,width=32,heads=2,steps={TOTAL}",
    f"--config.input.batch_size={BATCH}",
    f"--config.checkpoint_every={EVERY}",
    f"--config.log_every={LOG_EVERY}",
    f"--config.eval_every={TOTAL}",
]
ENV = {"JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}
POISONED_BATCH = 250  # a NaN batch between the checkpoints at 200 and 300
RUN_TIMEOUT_S = 600

# --- Entry scripts: the command line with one thing patched ----------------------
# Each records when its fault is reached (time.time(), and the step) in the
# file named by $FAULT_TABLE_MARK, then runs `vit_spectral.main.run()`.

NAN_ENTRY = f'''\
"""train.py with NaN pixels in global batch {POISONED_BATCH} of the training stream."""
import os
import time

import numpy as np

from vit_spectral import main
from vit_spectral.data import input_pipeline

POISONED = {POISONED_BATCH}
create = input_pipeline.create_train_dataset


def poisoned(cfg, *, seed, start_example=0, stream_shards=1, **kwargs):
  dataset = create(cfg, seed=seed, start_example=start_example,
                   stream_shards=stream_shards, **kwargs)
  first = start_example // (cfg.batch_size // stream_shards) + 1  # global batch number

  class Stream:
    def as_numpy_iterator(self):
      for number, batch in enumerate(dataset.as_numpy_iterator(), start=first):
        if number == POISONED:
          with open(os.environ["FAULT_TABLE_MARK"], "a") as f:
            f.write(f"{{time.time()}} {{number}}\\n")
          batch = dict(batch, image=np.full_like(batch["image"], np.nan))
        yield batch

  return Stream()


input_pipeline.create_train_dataset = poisoned
main.run()
'''

FULL_DISK_ENTRY = f'''\
"""train.py on a disk that is full from the second checkpoint on: orbax's file
writes (`async_path.write_text`) raise ENOSPC for every step after {EVERY}."""
import errno
import os
import re
import time

from orbax.checkpoint._src.path import async_path

from vit_spectral import main

write_text = async_path.write_text


async def write_text_or_fail(path, text):
  match = re.search(r"checkpoints/(\\d+)", str(path))
  if match and int(match.group(1)) > {EVERY}:
    with open(os.environ["FAULT_TABLE_MARK"], "a") as f:
      f.write(f"{{time.time()}} {{match.group(1)}}\\n")
    raise OSError(errno.ENOSPC, "No space left on device", str(path))
  return await write_text(path, text)


async_path.write_text = write_text_or_fail
main.run()
'''


# --- Running the command line and reading what it printed ------------------------

class Run:
  """One trainer process; its output read line by line as it comes, each
  line stamped with the time it arrived.

  Attributes:
    proc: the Popen.
    started: time.time() just before the process was started.
    ended: time.time() when its exit was seen (None while it runs).
    lines: [(arrival time, line)], stdout and stderr together.
  """

  def __init__(self, args: list[str], workdir: str, data_dir: str, *, entry: str | None = None,
               mark: str | None = None):
    program = entry or os.path.join(ROOT, "train.py")
    self.command = [sys.executable, program, *FLAGS, f"--config.input.data_dir={data_dir}",
                    *args, f"--workdir={workdir}"]
    env = dict(os.environ, **ENV, PYTHONPATH=ROOT)
    if mark:
      env["FAULT_TABLE_MARK"] = mark
    self.lines: list[tuple[float, str]] = []
    self.ended: float | None = None
    self.started = time.time()
    self.proc = subprocess.Popen(self.command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, bufsize=1)
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()
    RUNNING.append(self)

  def _read(self):
    for line in self.proc.stdout:
      self.lines.append((time.time(), line.rstrip("\n")))

  def running(self) -> bool:
    return self.proc.poll() is None

  def wait(self, timeout: float = RUN_TIMEOUT_S) -> int:
    """Waits for the exit; returns the exit code (negative: killed by that signal)."""
    code = self.proc.wait(timeout=timeout)
    self.ended = self.ended or time.time()
    self._reader.join(timeout=30)
    if self in RUNNING:
      RUNNING.remove(self)
    return code

  def signal(self, number: int) -> float:
    """Sends signal `number`; returns when (time.time())."""
    at = time.time()
    self.proc.send_signal(number)
    return at

  def text(self) -> str:
    return "\n".join(line for _, line in self.lines)


RUNNING: list[Run] = []  # ended at exit if something fails part-way


def wait_for(condition: Callable[[], bool], run: Run, poll: float = 0.01,
             timeout: float = 300) -> None:
  deadline = time.time() + timeout
  while not condition():
    if not run.running():
      raise RuntimeError(f"the run ended before the fault; its output:\n{run.text()[-3000:]}")
    if time.time() > deadline:
      raise RuntimeError("timed out waiting for the moment of the fault")
    time.sleep(poll)


_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog|[IWEF]0000 )")
_ABSL = re.compile(r"^(?P<level>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ (?P<where>[^\]]+)\] "
                   r"(?P<message>.*)$")


def is_ours(line: str) -> bool:
  """Not TF/XLA's C++ startup noise (see the module docstring); not blank."""
  return bool(line.strip()) and not _NOISE.match(line) and "cuda" not in line.lower()


def is_info(line: str) -> bool:
  match = _ABSL.match(line)
  return bool(match) and match["level"] == "I"


def shown(line: str | None) -> str | None:
  """A log line without absl's date, time and thread: "W preemption.py:87] ..."."""
  if line is None:
    return None
  match = _ABSL.match(line)
  return f"{match['level']} {match['where']}] {match['message']}" if match else line


def what_user_sees(run: Run, since: float) -> dict[str, Any]:
  """The first and last line of ours from `since` on (module docstring), and
  what else the run printed that matters: the warning and error lines after
  `since`, and whether a traceback showed."""
  ours = [(t, line) for t, line in run.lines if is_ours(line)]
  after = [line for t, line in ours if t >= since]
  reports = [line for line in after if not is_info(line)]
  first = reports[0] if reports else (after[0] if after else None)
  return {
      "first_line": first,
      "last_line": after[-1] if after else None,
      "last_line_before_fault": next((line for t, line in reversed(ours) if t < since), None),
      "reports_after_fault": reports,
      "traceback": any("Traceback" in line for _, line in run.lines),
  }


def found(pattern: str, text: str) -> int | None:
  """The first group of `pattern` in `text`, as an int, or None."""
  match = re.search(pattern, text)
  return int(match.group(1)) if match else None


def resumed_step(run: Run) -> int | None:
  return found(r"resumed from the checkpoint at step (\d+)", run.text())


def checkpoint_steps(workdir: str) -> list[int]:
  path = os.path.join(workdir, "checkpoints")
  return sorted(int(d) for d in (os.listdir(path) if os.path.isdir(path) else []) if d.isdigit())


def saving(workdir: str) -> bool:
  """A checkpoint is being written: orbax's temporary directory exists."""
  path = os.path.join(workdir, "checkpoints")
  return os.path.isdir(path) and any("tmp" in d for d in os.listdir(path))


def logged(run: Run, step: int) -> bool:
  """`run` has printed its training metrics of `step`."""
  return any(f"] [{step}] train_" in line for _, line in run.lines)


def training(workdir: str) -> bool:
  """The run has passed its first step (it records config.json then)."""
  return os.path.exists(os.path.join(workdir, "config.json"))


def listing(workdir: str) -> dict[str, tuple[int, int]]:
  """Every file and folder under `workdir`: relative path -> (size, mtime_ns)."""
  found_paths = {}
  for folder, dirs, files in os.walk(workdir):
    for name in dirs + files:
      path = os.path.join(folder, name)
      info = os.stat(path)
      found_paths[os.path.relpath(path, workdir)] = (info.st_size, info.st_mtime_ns)
  return found_paths


def marks(path: str) -> list[tuple[float, int]]:
  """What an entry script recorded: [(time, step or batch number)]."""
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [(float(t), int(n)) for t, n in (line.split() for line in f if line.strip())]


def finished(run: Run) -> dict[str, Any]:
  """Waits for `run` (a rerun, or a run expected to end by itself)."""
  code = run.wait()
  return {"exit_code": code, "seconds": round(run.ended - run.started, 1),
          "resumed_from": resumed_step(run), "last_line": shown(
              next((line for _, line in reversed(run.lines) if is_ours(line)), None))}


def row(number: str, fault: str, produced: str, run: Run, since: float, *, lost: str,
        rerun: str, rerun_exit_code: int | None, **details) -> dict[str, Any]:
  """One row of the table; `details` go to the JSON only."""
  seen = what_user_sees(run, since)
  return {
      "number": number, "fault": fault, "produced_by": produced,
      "command": " ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a
                          for a in run.command[1:]),
      "first_line": shown(seen["first_line"]), "last_line": shown(seen["last_line"]),
      "exit_code": run.proc.returncode, "seconds_to_exit": round(run.ended - since, 2),
      "lost": lost, "rerun": rerun, "rerun_exit_code": rerun_exit_code,
      "details": dict(details, reports_after_fault=[shown(r) for r in seen["reports_after_fault"]],
                      last_line_before_fault=shown(seen["last_line_before_fault"]),
                      traceback=seen["traceback"], raw_first_line=seen["first_line"],
                      raw_last_line=seen["last_line"]),
  }


def steps_lost(fault_step: int | None, resumed: int | None, *, at_least: bool = False) -> str:
  if fault_step is None or resumed is None:
    return f"unknown (fault at step {fault_step}, rerun resumed from {resumed})"
  return (f"{'≥ ' if at_least else ''}{fault_step - resumed} steps (fault at step "
          f"{'≥ ' if at_least else ''}{fault_step}, rerun resumed from {resumed})")


def rerun_text(result: dict[str, Any], what: str = "same command") -> str:
  resumed = result["resumed_from"]
  where = f"resumed from {resumed}" if resumed is not None else "started from scratch"
  return f"{what}: exit {result['exit_code']} ({where}, {result['seconds']} s)"


# --- The faults: one function each -----------------------------------------------

class Faults:
  """The faults, each in a fresh workdir under `tmp`; `rng` draws the moments."""

  def __init__(self, tmp: str, data_dir: str, rng: random.Random):
    self.tmp, self.data_dir, self.rng = tmp, data_dir, rng
    self._stopped: str | None = None

  def workdir(self, name: str) -> str:
    return os.path.join(self.tmp, name)

  def run(self, workdir: str, *args: str, **kwargs) -> Run:
    return Run(list(args), workdir, self.data_dir, **kwargs)

  def entry(self, name: str, source: str) -> tuple[str, str]:
    """Writes an entry script; returns (its path, its mark file's path)."""
    path = os.path.join(self.tmp, f"{name}_entry.py")
    with open(path, "w") as f:
      f.write(source)
    return path, os.path.join(self.tmp, f"{name}_mark.txt")

  def _stop_with(self, number: str, fault: str, name: str, signals: list[int],
                 wait: Callable[[str, Run], None], produced: str) -> dict[str, Any]:
    """Runs, waits (`wait`), sends `signals` 50 ms apart, reruns."""
    workdir = self.workdir(name)
    run = self.run(workdir)
    wait(workdir, run)
    save_in_progress = saving(workdir)
    since = run.signal(signals[0])
    for later in signals[1:]:
      time.sleep(0.05)
      run.signal(later)
    run.wait()
    stopped = found(r"stopped at step (\d+) on SIG", run.text())
    checkpoints = checkpoint_steps(workdir)
    again = finished(self.run(workdir))
    return row(number, fault, produced, run, since,
               lost=steps_lost(stopped, again["resumed_from"]), rerun=rerun_text(again),
               rerun_exit_code=again["exit_code"], stopped_at=stopped,
               checkpoints_after_stop=checkpoints, save_in_progress=save_in_progress,
               signal_again_logged=" again: " in run.text(), rerun_result=again)

  def _in_steady_training(self):
    """A wait for `_stop_with`: the first logged step (the compiles and the
    first steps are over), then a seeded random delay; returns (wait, delay)."""
    delay = self.rng.uniform(0.2, 4.0)

    def wait(workdir, run):
      wait_for(lambda: logged(run, LOG_EVERY), run)
      time.sleep(delay)

    return wait, delay

  def sigterm_during_training(self):
    wait, delay = self._in_steady_training()
    return self._stop_with("1", "SIGTERM during training", "sigterm", [signal.SIGTERM], wait,
                           f"`kill -TERM` {delay:.2f} s after step {LOG_EVERY}'s line (seeded)")

  def sigterm_during_async_save(self):
    def wait(workdir, run):
      wait_for(lambda: saving(workdir), run, poll=0.001)

    return self._stop_with(
        "2", "SIGTERM during an asynchronous checkpoint save, and again 50 ms later",
        "sigterm_save", [signal.SIGTERM, signal.SIGTERM], wait,
        "`kill -TERM` once a `*tmp*` folder exists under checkpoints/, again 50 ms later")

  def sigint(self):
    wait, delay = self._in_steady_training()
    return self._stop_with("3", "SIGINT (Ctrl-C) during training", "sigint", [signal.SIGINT],
                           wait, f"`kill -INT` {delay:.2f} s after step {LOG_EVERY}'s line (seeded)")

  def sigkill(self):
    """Killed when a logged step between two checkpoints appears: the step
    is known to be at least that one (the writer thread logs it a little
    after the loop has passed it)."""
    target = self.rng.choice(range(EVERY + LOG_EVERY, TOTAL - EVERY, EVERY))  # 150 ... 450
    workdir = self.workdir("sigkill")
    run = self.run(workdir)
    wait_for(lambda: logged(run, target), run, poll=0.001)
    since = run.signal(signal.SIGKILL)
    run.wait()
    checkpoints = checkpoint_steps(workdir)
    again = finished(self.run(workdir))
    return row("4", "SIGKILL during training", f"`kill -KILL` as the line of step {target} "
               f"(between two checkpoints) appears", run, since,
               lost=steps_lost(target, again["resumed_from"], at_least=True),
               rerun=rerun_text(again), rerun_exit_code=again["exit_code"],
               killed_at_logged_step=target, checkpoints_after_kill=checkpoints,
               rerun_result=again)

  def nan_stop(self):
    entry, mark = self.entry("nan_stop", NAN_ENTRY)
    workdir = self.workdir("nan_stop")
    run = self.run(workdir, entry=entry, mark=mark)
    run.wait()
    (since, _), *_ = marks(mark)
    failed = found(r"error: .*?at step (\d+)", run.text())
    checkpoints = checkpoint_steps(workdir)
    same = finished(self.run(workdir, entry=entry, mark=mark))
    rollback = finished(self.run(workdir, "--config.on_nonfinite=rollback", entry=entry,
                                 mark=mark))
    return row("5", "NaN loss, on_nonfinite=stop (the default)",
               f"entry script: NaN pixels in global batch {POISONED_BATCH} of the stream "
               "(`input_pipeline.create_train_dataset` wrapped)", run, since,
               lost=steps_lost(failed, rollback["resumed_from"]),
               rerun=(f"{rerun_text(same)} (the poison is still there); "
                      f"{rerun_text(rollback, 'with `--config.on_nonfinite=rollback`')}"),
               rerun_exit_code=rollback["exit_code"], failed_at=failed,
               checkpoints_after_stop=checkpoints, same_command_result=same,
               rollback_result=rollback)

  def nan_rollback(self):
    entry, mark = self.entry("nan_rollback", NAN_ENTRY)
    workdir = self.workdir("nan_rollback")
    run = self.run(workdir, "--config.on_nonfinite=rollback", entry=entry, mark=mark)
    run.wait()
    (since, _), *_ = marks(mark)
    text = run.text()
    failed = found(r"non-finite loss at step (\d+): rolled back", text)
    restored = found(r"rolled back to step (\d+)", text)
    skipped = re.search(r"skipped the stream's global batches (\d+-\d+) \((\d+) batches\)", text)
    again = finished(self.run(workdir, "--config.on_nonfinite=rollback", entry=entry,
                              mark=mark))
    lost = (f"{failed - restored} steps redone (NaN at step {failed}, rolled back to "
            f"{restored}); stream batches {skipped.group(1)} skipped"
            " (config.rollback_skip_batches=100, the default)"
            if failed is not None and restored is not None and skipped else "no rollback seen")
    return row("6", "NaN loss, on_nonfinite=rollback",
               "the entry script of row 5, with `--config.on_nonfinite=rollback`", run, since,
               lost=lost, rerun=rerun_text(again), rerun_exit_code=again["exit_code"],
               failed_at=failed, rolled_back_to=restored, rerun_result=again)

  def stopped_workdir(self) -> str:
    """A workdir stopped with SIGTERM between two checkpoints (made once;
    the faults that need one copy it)."""
    if self._stopped is None:
      delay = self.rng.uniform(0.3, 4.0)
      workdir = self.workdir("stopped_original")
      run = self.run(workdir)
      wait_for(lambda: bool(checkpoint_steps(workdir)), run)
      time.sleep(delay)
      run.signal(signal.SIGTERM)
      if run.wait() != 75:
        raise RuntimeError(f"the SIGTERM did not stop the run: {run.text()[-3000:]}")
      self._stopped = workdir
    return self._stopped

  def copy_of_stopped(self, name: str) -> tuple[str, int]:
    workdir = self.workdir(name)
    shutil.copytree(self.stopped_workdir(), workdir)
    return workdir, checkpoint_steps(workdir)[-1]

  def damaged_checkpoint(self):
    workdir, newest = self.copy_of_stopped("damaged")
    folder = os.path.join(workdir, "checkpoints", str(newest), "default")
    files = [os.path.join(d, f) for d, _, names in os.walk(folder) for f in names]
    largest = max(files, key=os.path.getsize)
    damaged = f"{os.path.relpath(largest, folder)}, {os.path.getsize(largest)} bytes"
    with open(largest, "r+b") as f:
      f.write(self.rng.randbytes(min(4096, os.path.getsize(largest))))
    run = self.run(workdir)
    run.wait()
    resumed = resumed_step(run)
    moved = os.path.isdir(os.path.join(workdir, "checkpoints", f"{newest}.unreadable"))
    return row("7", "damaged newest checkpoint",
               f"4096 random bytes over the start of the largest file under "
               f"checkpoints/{newest}/default/ ({damaged}) of a run stopped with SIGTERM; "
               "then the same command", run, run.started,
               lost=steps_lost(newest, resumed),
               rerun=f"this run is the rerun: exit {run.proc.returncode}",
               rerun_exit_code=run.proc.returncode, damaged_step=newest,
               damaged_file=damaged, moved_aside=moved)

  def full_disk(self):
    entry, mark = self.entry("full_disk", FULL_DISK_ENTRY)
    workdir = self.workdir("full_disk")
    run = self.run(workdir, entry=entry, mark=mark)
    run.wait()
    (since, failed_step), *_ = marks(mark)
    checkpoints = checkpoint_steps(workdir)
    again = finished(self.run(workdir))
    return row("8", "full disk during a checkpoint save",
               f"entry script: orbax's `async_path.write_text` raises OSError(ENOSPC) for every "
               f"step after {EVERY} (the second save on)", run, since,
               lost=steps_lost(failed_step, again["resumed_from"]),
               rerun=rerun_text(again, "train.py, same flags (disk freed)"),
               rerun_exit_code=again["exit_code"], failed_save_step=failed_step,
               checkpoints_after_failure=checkpoints, rerun_result=again)

  def second_run(self):
    """The first run is paused (SIGSTOP) while the second starts, so the
    listing before and after shows only what the second wrote."""
    workdir = self.workdir("second_run")
    first = self.run(workdir)
    wait_for(lambda: training(workdir), first)
    first.signal(signal.SIGSTOP)
    try:
      before = listing(workdir)
      second = self.run(workdir)
      second.wait()
      after = listing(workdir)
    finally:
      first.signal(signal.SIGCONT)
    first_result = finished(first)
    again = finished(self.run(workdir))
    return row("9", "a second run on the same workdir while the first runs",
               "the same command started while the first run trains (the first paused "
               "with SIGSTOP meanwhile, for the listing)", second, second.started,
               lost=_nothing_written(before, after),
               rerun=(f"the first run: exit {first_result['exit_code']}; the second's command "
                      f"after it: exit {again['exit_code']} (resumed from "
                      f"{again['resumed_from']})"),
               rerun_exit_code=again["exit_code"], changed=_changes(before, after),
               first_run_result=first_result, rerun_result=again)

  def batch_size_change(self):
    """Two rows: the refusal, and the same resume allowed."""
    workdir, newest = self.copy_of_stopped("batch_size")
    before = listing(workdir)
    refused = self.run(workdir, f"--config.input.batch_size={2 * BATCH}")
    refused.wait()
    after = listing(workdir)
    allowed = self.run(workdir, f"--config.input.batch_size={2 * BATCH}",
                       "--config.allow_batch_size_change=True")
    allowed.wait()
    resumed = resumed_step(allowed)
    return [
        row("10a", f"resume with a changed global batch size ({BATCH} -> {2 * BATCH})",
            f"a copy of the run that row 7 damages (stopped with SIGTERM at step {newest}), "
            f"resumed with "
            f"`--config.input.batch_size={2 * BATCH}`", refused, refused.started,
            lost=_nothing_written(before, after),
            rerun=f"with `--config.allow_batch_size_change=True`: exit "
                  f"{allowed.proc.returncode} (row 10b)",
            rerun_exit_code=allowed.proc.returncode, changed=_changes(before, after)),
        row("10b", "the same resume with --config.allow_batch_size_change=True",
            "the same, plus `--config.allow_batch_size_change=True`", allowed, allowed.started,
            lost=steps_lost(newest, resumed), rerun="this run is the rerun",
            rerun_exit_code=allowed.proc.returncode, stopped_at=newest),
    ]


def _changes(before: dict, after: dict) -> list[str]:
  return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def _nothing_written(before: dict, after: dict) -> str:
  """What a refused run changed in the workdir, from the two listings."""
  changed = _changes(before, after)
  if not changed:
    return f"nothing: no file written ({len(before)} paths, same sizes and times before and after)"
  grown = [f"{p} (+{after[p][0] - before[p][0]} bytes)" for p in changed
           if p in before and p in after and after[p][0] > before[p][0]]
  others = [p for p in changed if not (p in before and p in after and after[p][0] > before[p][0])]
  text = f"appended to: {', '.join(grown)}" if grown else ""
  if others:
    text += f"{'; ' if text else ''}changed: {', '.join(others)}"
  return f"no checkpoint lost; {text}" if not others else text


# --- The table ---------------------------------------------------------------------

def _cell(text: str | None) -> str:
  """A Markdown table cell holding a terminal line as code."""
  if text is None:
    return "(none)"
  text = text if len(text) <= 400 else text[:397] + "..."
  fence = "``" if "`" in text else "`"
  return f"{fence}{text.replace('|', '&#124;')}{fence}"


def _plain(text: str) -> str:
  return text.replace("|", "\\|")


def exit_text(code: int) -> str:
  if code < 0:
    return f"killed by {signal.Signals(-code).name} (shell: {128 - code})"
  return str(code)


def markdown(results: dict[str, Any]) -> str:
  flags_text = " ".join(FLAGS)
  env_text = " ".join(f"{k}={v}" for k, v in ENV.items())
  lines = [
      "# Fault table (issue 31)", "",
      (f"Made {results['date']} by `{results['command']}` ({results['total_seconds']:.0f} s), "
       f"on {results['environment']['machine']}."), "",
      (f"Every run: `{env_text} python train.py {flags_text} --config.input.data_dir=DIR "
       "--workdir=<fresh>`; the faults that patch the library run the same flags through "
       "an entry script that calls `vit_spectral.main.run()`. How each column is measured: "
       "the docstring of `benchmarks/fault_table.py`."), "",
      ("| fault | what the user sees (first line … last line) | exit code | s to exit | "
       "what was lost | rerun |"),
      "|---|---|---|---|---|---|",
  ]
  for r in results["rows"]:
    if r["first_line"] == r["last_line"]:
      seen = _cell(r["first_line"])
    else:
      seen = f"{_cell(r['first_line'])} … {_cell(r['last_line'])}"
    if r["first_line"] is None and r["details"].get("last_line_before_fault"):
      seen = f"nothing after the fault; last line before it: " \
             f"{_cell(r['details']['last_line_before_fault'])}"
    lines.append(
        f"| {r['number']}. {_plain(r['fault'])}<br>*{_plain(r['produced_by'])}* | {seen} | "
        f"{exit_text(r['exit_code'])} | {r['seconds_to_exit']:.1f} | {_plain(r['lost'])} | "
        f"{_plain(r['rerun'])} |")
  return "\n".join(lines) + "\n"


def without_folder(value: Any, folder: str) -> Any:
  """`value` (strings, lists, dicts) with the temporary `folder` written `<tmp>`."""
  if isinstance(value, str):
    return value.replace(folder, "<tmp>")
  if isinstance(value, list):
    return [without_folder(v, folder) for v in value]
  if isinstance(value, dict):
    return {k: without_folder(v, folder) for k, v in value.items()}
  return value


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--seed", type=int, default=31, help="draws the moments of the faults")
  parser.add_argument("--data_dir", default=None,
                      help="TFDS folder with digits prepared (default: prepared in the "
                           "temporary folder)")
  parser.add_argument("--only", default=None,
                      help="comma-separated fault numbers (1-10) to run; default all")
  parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
  parser.add_argument("--out", default=os.path.join(RESULTS_DIR, "fault_table.json"))
  args = parser.parse_args(argv)
  started = time.time()
  tmp = tempfile.mkdtemp(prefix="fault_table_")
  data_dir = args.data_dir or os.path.join(tmp, "tfds")
  if args.data_dir is None:
    from vit_spectral import data  # pylint: disable=import-outside-toplevel
    data.get_builder("digits", data_dir=data_dir)
  faults = Faults(tmp, data_dir, random.Random(args.seed))
  order = [faults.sigterm_during_training, faults.sigterm_during_async_save, faults.sigint,
           faults.sigkill, faults.nan_stop, faults.nan_rollback, faults.damaged_checkpoint,
           faults.full_disk, faults.second_run, faults.batch_size_change]
  chosen = (set(range(1, len(order) + 1)) if args.only is None
            else {int(n) for n in args.only.split(",")})
  rows = []
  try:
    for number, fault in enumerate(order, start=1):
      if number not in chosen:
        continue
      print(f"fault {number}: {fault.__name__} ...", flush=True)
      start = time.time()
      made = fault()
      for r in made if isinstance(made, list) else [made]:
        rows.append(r)
        print(f"  {r['number']}: exit {r['exit_code']} in {r['seconds_to_exit']:.1f} s; "
              f"{r['first_line']!r} ... {r['last_line']!r}; lost: {r['lost']}; "
              f"rerun: {r['rerun']} [{time.time() - start:.0f} s]", flush=True)
  except BaseException:
    print(f"failed; the workdirs are kept in {tmp}", flush=True)
    raise
  else:
    if not args.keep:
      shutil.rmtree(tmp, ignore_errors=True)
  finally:
    for run in RUNNING:  # left running by a failure: ended here
      run.proc.kill()
      run.proc.wait()
  import jax  # pylint: disable=import-outside-toplevel
  import orbax.checkpoint  # pylint: disable=import-outside-toplevel
  results = {
      "command": " ".join(["python", "benchmarks/fault_table.py", *(argv or sys.argv[1:])]),
      "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
      "seed": args.seed, "train_flags": FLAGS, "environment": {
          **ENV, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python "
                            f"{platform.python_version()}, jax {jax.__version__}, orbax "
                            f"{orbax.checkpoint.__version__}"},
      "total_seconds": round(time.time() - started, 1), "rows": without_folder(rows, tmp),
  }
  print(f"wrote {write_results(results, args.out)}")
  md_path = os.path.splitext(args.out)[0] + ".md"
  with open(md_path, "w") as f:
    f.write(markdown(results))
  print(f"wrote {md_path}")


if __name__ == "__main__":
  main()
