"""SIGTERM and SIGINT stop a run at a step every process agrees on, after
that step's checkpoint is saved.

Spot and preemptible TPU VMs and GPU hosts get SIGTERM and about 30 s before
they go (maintenance events too); Ctrl-C is SIGINT. While `StopSignals` is
entered, the first such signal only records itself; the train loop asks
`should_stop(step)` after every step, finishes it, saves it, waits for the
save and leaves with `errors.RunPreempted`, which the command line turns into
exit code `PREEMPTED_EXIT_CODE` (the launchers rerun the same command on it).
Further signals during the save are logged and ignored: the save is never
cut short by them (SIGKILL still ends everything, and checkpoints survive
that).

Several processes (`jax.distributed`): jax's preemption service catches
SIGTERM in every process and its coordination service tells all the others;
`multihost_utils.reached_preemption_sync_point(step)` then answers True on
every process at the same step (the largest step any process had reached,
plus one), so all save the same step. A signal to one process stops them all.
SIGINT is passed to that service as a SIGTERM to this process. Where that
service is off (`jax_enable_preemption_service=False`), the processes agree
through a collective after every step instead (slower; logged once).
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import jax
import numpy as np
from absl import logging
from jax._src import distributed as jax_distributed
from jax.experimental import multihost_utils

# EX_TEMPFAIL (sysexits.h): "a temporary failure; the user is invited to
# retry". The command line exits with it after a stop by signal; the
# launchers (launch/*.sh) rerun the same command on it.
PREEMPTED_EXIT_CODE = 75
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _sync_manager() -> Any:
  """jax's preemption sync manager when jax.distributed is initialised with
  it (None otherwise: one process, no coordination service)."""
  if jax_distributed.global_state.client is None:
    return None
  return jax_distributed.global_state.preemption_sync_manager


class StopSignals:
  """Turns SIGTERM/SIGINT into a stop at an agreed step (module docstring).

  Use as a context manager around the train loop; the previous handlers come
  back on exit. Outside the main thread (where Python cannot install
  handlers) it watches nothing and says so in the log.
  """

  def __init__(self):
    self.received: str | None = None  # the first signal's name
    self._previous: dict[int, Any] = {}
    self._service = None
    self._stopping = False  # once agreed, it stays so

  def __enter__(self) -> "StopSignals":
    if threading.current_thread() is not threading.main_thread():
      logging.warning("not the main thread: SIGTERM/SIGINT will not stop the run at a "
                      "saved step")
      return self
    self._service = _sync_manager()
    if self._service is None and jax.process_count() > 1:
      logging.warning("jax's preemption service is off: the processes agree on a stop "
                      "through a collective after every step")
    # With jax's preemption service, SIGTERM is its own (it catches it in C++).
    mine = (signal.SIGINT,) if self._service is not None else SIGNALS
    for number in mine:
      self._previous[number] = signal.signal(number, self._handle)
    return self

  def __exit__(self, *exc) -> bool:
    for number, handler in self._previous.items():
      signal.signal(number, handler)
    self._previous.clear()
    return False

  def _handle(self, number: int, frame: Any) -> None:
    del frame
    name = signal.Signals(number).name
    if self.received is not None:
      logging.warning("%s again: still finishing the step and its checkpoint, then "
                      "the run exits (the save is not interrupted)", name)
      return
    self.received = name
    logging.warning("%s received: the run stops after this step's checkpoint", name)
    if self._service is not None:  # every process learns it through jax's service
      os.kill(os.getpid(), signal.SIGTERM)

  def should_stop(self, step: int) -> bool:
    """Whether to save `step` and stop. Call it after every step, on every
    process, from the first step of the run on (jax's sync point requires it).
    """
    if not self._stopping:
      if self._service is not None:
        self._stopping = multihost_utils.reached_preemption_sync_point(step)
      elif jax.process_count() > 1:
        self._stopping = bool(np.any(multihost_utils.process_allgather(
            np.asarray(self.received is not None))))
      else:
        self._stopping = self.received is not None
      if self._stopping and self.received is None:
        # jax's service caught a SIGTERM (here or elsewhere) or another
        # process was signalled: this one cannot tell which.
        self.received = ("SIGTERM to one of the processes" if self._service is not None
                         else "a signal to another process")
    return self._stopping
