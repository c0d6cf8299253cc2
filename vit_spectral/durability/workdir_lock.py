"""One run per workdir: `<workdir>/run.lock`, naming the run that holds it.

Two runs writing one workdir would interleave their checkpoints (orbax fails
the loser at its first save, after its first steps; sometimes after a
five-minute barrier timeout). The trainer therefore holds the lock for the
whole run, taken after its config checks (a config that fails leaves no
workdir behind) and before anything is written:

  with workdir_lock.hold(workdir):
    ...  # restore, train, save

The lock file is JSON: the holder's host, PID, process start time and boot id
(so a reused PID is not mistaken for the holder), the time it was taken and
its command line. A second run exits at once with `errors.WorkdirLockedError`
naming the holder. A lock left by a run that is gone (same host, its process
no longer running: SIGKILL, OOM, a reboot) is taken over with a warning; a
lock held from another host cannot be checked from here and is never taken
over: the message says how to remove it by hand.

Local workdirs take the lock atomically (O_CREAT | O_EXCL). On object stores
(gs://) there is no atomic create: the lock is written after checking that it
is absent, which catches runs started one after the other, not ones started
within the same second.

Multi-host: the lock is the primary process's (process 0); the others wait for
its outcome and stop with it if it could not take the lock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import os
import socket
import sys
import time
from typing import Iterator

import jax
import numpy as np
from absl import logging
from etils import epath

from vit_spectral import errors

LOCK_NAME = "run.lock"


@dataclasses.dataclass(frozen=True)
class Holder:
  """Who holds a workdir's lock.

  Attributes:
    host: `socket.gethostname()` of the holder.
    pid: its process id.
    boot_id: the host's boot id (Linux), None elsewhere.
    start_ticks: its process start time in clock ticks since boot (Linux).
    since: when the lock was taken (UTC, ISO 8601).
    command: its command line.
  """

  host: str
  pid: int
  boot_id: str | None = None
  start_ticks: int | None = None
  since: str = ""
  command: str = ""

  def describe(self) -> str:
    return f"PID {self.pid} on host {self.host}, since {self.since or 'unknown'}"


def _read_text(path: str) -> str | None:
  try:
    with open(path, encoding="utf-8") as f:
      return f.read()
  except FileNotFoundError:
    return None


def _boot_id() -> str | None:
  text = _read_text("/proc/sys/kernel/random/boot_id")
  return text.strip() if text else None


def _start_ticks(pid: int) -> int | None:
  """Field 22 of /proc/<pid>/stat: the process start time (Linux)."""
  text = _read_text(f"/proc/{pid}/stat")
  if not text:
    return None
  # The command name (field 2) is in parentheses and may hold spaces.
  fields = text.rsplit(")", 1)[-1].split()
  return int(fields[19])


def this_process() -> Holder:
  """The Holder record of the calling process."""
  pid = os.getpid()
  return Holder(host=socket.gethostname(), pid=pid, boot_id=_boot_id(),
                start_ticks=_start_ticks(pid),
                since=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                command=" ".join(sys.argv)[:500])


def is_running(holder: Holder) -> bool | None:
  """Whether `holder`'s process still runs: None when that cannot be known
  from here (another host)."""
  if holder.host != socket.gethostname():
    return None
  if holder.pid <= 0:
    return False  # an unreadable lock file (os.kill(-1, 0) would signal everyone)
  if holder.boot_id and _boot_id() and holder.boot_id != _boot_id():
    return False  # the host rebooted since
  try:
    os.kill(holder.pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    pass  # it exists, under another user
  if holder.start_ticks is not None:
    ticks = _start_ticks(holder.pid)
    if ticks is not None and ticks != holder.start_ticks:
      return False  # the PID was reused by another process
  return True


def _parse_holder(text: str) -> Holder:
  """A lock file's text -> its Holder. Text that cannot be parsed (a run
  killed while writing it, a full disk) reads as a holder with pid -1 on this
  host: not running, so it is taken over."""
  try:
    fields = json.loads(text)
    return Holder(**{f.name: fields[f.name] for f in dataclasses.fields(Holder)
                     if f.name in fields})
  except (ValueError, TypeError, KeyError):
    return Holder(host=socket.gethostname(), pid=-1, since="(unreadable lock file)")


def read_holder(workdir: str, name: str = LOCK_NAME) -> Holder | None:
  """The holder recorded in `workdir`'s lock (or in its file `name`); None
  without one."""
  try:
    return _parse_holder((epath.Path(workdir) / name).read_text())
  except FileNotFoundError:
    return None


def _is_local(workdir: str) -> bool:
  return "://" not in workdir


def _create(path: epath.Path, holder: Holder) -> bool:
  """Writes the lock if absent; False if it exists."""
  text = json.dumps(dataclasses.asdict(holder), indent=2)
  if _is_local(os.fspath(path)):
    try:
      fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
      return False
    try:
      with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    except BaseException:
      path.unlink()  # never leave an empty lock (e.g. on a full disk)
      raise
    return True
  if path.exists():
    return False
  path.write_text(text)
  return True


def _locked_message(workdir: str, holder: Holder, running: bool | None) -> str:
  where = os.path.join(workdir, LOCK_NAME)
  if running is None:
    return (f"workdir {workdir} is in use by {holder.describe()} (`{holder.command}`); "
            f"that host cannot be checked from here: if that run is gone, delete {where}, "
            "or pass another --workdir")
  return (f"workdir {workdir} is in use by {holder.describe()} (`{holder.command}`); "
          "wait for it to finish or stop it (it resumes from its checkpoints), "
          "or pass another --workdir")


def acquire(workdir: str) -> Holder:
  """Takes `workdir`'s lock for this process (creating `workdir`).

  Raises:
    errors.WorkdirLockedError: another live run holds it, or one on another host.
  """
  epath.Path(workdir).mkdir(parents=True, exist_ok=True)
  path = epath.Path(workdir) / LOCK_NAME
  me = this_process()
  for _ in range(50):  # a lost race with another taker retries
    if _create(path, me):
      return me
    holder = read_holder(workdir)
    if holder is None:
      continue  # released meanwhile
    running = is_running(holder)
    if running is not False:
      raise errors.WorkdirLockedError(_locked_message(workdir, holder, running))
    if not _move_dead_lock_aside(workdir, holder, me):
      time.sleep(0.1)
  raise errors.WorkdirLockedError(
      f"workdir {workdir}: could not take {LOCK_NAME}; other runs keep taking it")


def _move_dead_lock_aside(workdir: str, dead: Holder, me: Holder) -> bool:
  """Renames the lock of `dead` (a holder no longer running) to
  `run.lock.stale-<pid>`, under the `run.lock.takeover` mutex: without it, a
  second taker that also judged `dead` gone could move aside the lock the
  first taker has just written. False if another taker is at it, or the lock
  is no longer `dead`'s."""
  mutex = epath.Path(workdir) / f"{LOCK_NAME}.takeover"
  if not _create(mutex, me):
    other = read_holder(workdir, mutex.name)
    if other is not None and is_running(other) is False:
      with contextlib.suppress(FileNotFoundError):
        mutex.unlink()  # a taker that died while taking over
    return False
  try:
    if read_holder(workdir) != dead:
      return False  # someone took over meanwhile: the caller looks again
    stale = epath.Path(workdir) / f"{LOCK_NAME}.stale-{dead.pid}"
    (epath.Path(workdir) / LOCK_NAME).rename(stale)
  finally:
    mutex.unlink()
  logging.warning("taking over the lock of %s in %s: that process is no longer "
                  "running (its lock is kept as %s)", dead.describe(), workdir, stale.name)
  return True


def check_not_held(workdir: str) -> None:
  """Raises WorkdirLockedError at once if a running process (or another host)
  holds `workdir`: lets a second run stop before its setup, not after. Takes
  nothing; `hold` still decides. With several processes it does nothing
  (processes on other hosts cannot check this host's PIDs; `hold` has
  process 0 decide for all)."""
  if jax.process_count() > 1:
    return  # only process 0 may look: `hold` tells the others what it found
  holder = read_holder(workdir)
  if holder is not None:
    running = is_running(holder)
    if running is not False:
      raise errors.WorkdirLockedError(_locked_message(workdir, holder, running))


def release(workdir: str, me: Holder) -> None:
  """Removes `workdir`'s lock if it is still `me`'s."""
  holder = read_holder(workdir)
  if holder is not None and (holder.host, holder.pid) == (me.host, me.pid):
    (epath.Path(workdir) / LOCK_NAME).unlink()


def _agree(ok: bool) -> bool:
  """Process 0's `ok`, on every process (the others wait for it)."""
  if jax.process_count() == 1:
    return ok
  from jax.experimental import multihost_utils  # pylint: disable=import-outside-toplevel
  return bool(multihost_utils.broadcast_one_to_all(np.int32(ok)))


@contextlib.contextmanager
def hold(workdir: str) -> Iterator[Holder | None]:
  """Holds `workdir`'s lock for the body (process 0 takes it; every process
  waits for the outcome). Yields the Holder on process 0, None elsewhere.

  Raises:
    errors.WorkdirLockedError: another run holds the workdir (on every process).
  """
  primary = jax.process_index() == 0
  me, failure = None, None
  if primary:
    try:
      me = acquire(workdir)
    except Exception as e:  # pylint: disable=broad-except
      failure = e  # raised below, after the others have heard of it
  if not _agree(failure is None):
    raise failure or errors.WorkdirLockedError(
        f"workdir {workdir}: process 0 could not take its lock (see process 0's output)")
  try:
    yield me
  finally:
    if me is not None:
      release(workdir, me)
