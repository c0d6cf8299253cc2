"""Several trainer processes on localhost, as a multi-host run: the command line
(`vit_spectral.main.run`, what train.py runs) with `--coordinator_address`,
`--num_processes` and `--process_id`, fake CPU devices in each, gloo
collectives. Shared by the tests that train on several processes.

An entry script may wrap the command line (record what a process sees,
replace a function) before it calls `main.run()`; it reads
`os.environ["MULTIPROCESS_TEST_OUT"]` for where to write.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from tests.cpu_flags import xla_flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The command line itself, unwrapped.
PLAIN_ENTRY = "from vit_spectral import main\nmain.run()\n"


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def environment(out_dir, devices: int) -> dict[str, str]:
  """The processes' environment: `devices` fake CPU devices, the suite's
  compile flags (conftest sets the same for in-process references)."""
  return dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
              PYTHONPATH=ROOT, MULTIPROCESS_TEST_OUT=str(out_dir),
              XLA_FLAGS=xla_flags(devices), JAX_DISABLE_MOST_OPTIMIZATIONS="1")


class Cluster:
  """`processes` trainer processes started at once, their output in
  `out_dir/<name>_log_<i>.txt`.

  Args:
    out_dir: where the logs (and what an entry script records) go.
    args: the command line's arguments (config, overrides, --workdir).
    processes: how many.
    devices: fake CPU devices per process.
    entry: the entry script's source (default: the plain command line).
    name: a prefix for the log files (several clusters in one out_dir).
  """

  def __init__(self, out_dir, args: list[str], *, processes: int = 2, devices: int = 4,
               entry: str = PLAIN_ENTRY, name: str = "run"):
    self.out_dir, self.name = out_dir, name
    script = out_dir / f"{name}_entry.py"
    script.write_text(entry)
    address = f"localhost:{free_port()}"
    self.procs, self.logs = [], []
    for i in range(processes):
      log = open(out_dir / f"{name}_log_{i}.txt", "w")
      self.logs.append(log)
      self.procs.append(subprocess.Popen(
          [sys.executable, str(script), *args, f"--coordinator_address={address}",
           f"--num_processes={processes}", f"--process_id={i}"],
          env=environment(out_dir, devices), cwd=ROOT, stdout=log,
          stderr=subprocess.STDOUT, start_new_session=True))

  def output(self, i: int) -> str:
    return (self.out_dir / f"{self.name}_log_{i}.txt").read_text()

  def tails(self) -> str:
    return "\n".join(f"--- process {i}, last lines:\n" +
                     "\n".join(self.output(i).splitlines()[-25:])
                     for i in range(len(self.procs)))

  def wait(self, deadline: float, codes: tuple[int, ...] = (0,)) -> list[int]:
    """Waits for every process to exit with one of `codes`; another code or
    the deadline fails (the caller's `kill` ends the survivors). Returns the
    exit codes."""
    while any(p.poll() is None for p in self.procs):
      failed = [i for i, p in enumerate(self.procs) if p.poll() not in (None, *codes)]
      assert not failed, f"process {failed} exited {self.codes()}\n{self.tails()}"
      assert time.time() < deadline, f"timed out\n{self.tails()}"
      time.sleep(0.05)
    assert all(c in codes for c in self.codes()), f"exit codes {self.codes()}\n{self.tails()}"
    return self.codes()

  def codes(self) -> list[int | None]:
    return [p.poll() for p in self.procs]

  def kill(self) -> None:
    for proc, log in zip(self.procs, self.logs):
      if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
      log.close()
