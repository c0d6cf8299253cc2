"""The run's log file: `<workdir>/train.log`, appended to by every run.

It receives everything the terminal shows (absl, orbax, TF at INFO and above)
and, when a run fails, the full traceback, which the terminal does not show:
the command line prints the failure as one message and names this file
(`vit_spectral.main`). The exception leaving `to_file` carries the path as
its `log_path` attribute.

Process 0 writes `train.log`, process i > 0 `train.process<i>.log`. A remote
workdir (gs://) cannot be appended to: its log goes to the local temporary
directory instead, under the workdir's name, and the first line of the run's
output says where.

On a terminal (`terminal`): the INFO records go only to the log file; the
terminal shows warnings and errors, and process 0's progress line
(`progress`) with normal lines above it. Elsewhere (a pipe, a file, a
notebook) the terminal's handlers write line by line, INFO included.
"""

from __future__ import annotations

import contextlib
import logging as std_logging
import os
import sys
import tempfile
import traceback
from typing import Any, Callable, Iterator

import jax
from absl import logging

from vit_spectral import errors
from vit_spectral.training import progress


def log_path(workdir: str) -> str:
  """Where this process's log of a run in `workdir` goes."""
  index = jax.process_index()
  name = "train.log" if index == 0 else f"train.process{index}.log"
  if "://" not in workdir:
    return os.path.join(workdir, name)
  folder = os.path.join(tempfile.gettempdir(), "vit_spectral_logs",
                        workdir.split("://", 1)[1].replace("/", "_"))
  os.makedirs(folder, exist_ok=True)
  return os.path.join(folder, name)


class _LogFileHandler(std_logging.FileHandler):
  """A FileHandler that, when the file cannot be written (a full disk: the
  very failure it should record), says so once on stderr and then stays
  quiet, instead of logging's traceback per record."""

  def handleError(self, record) -> None:  # noqa: N802 (logging's name)
    if not getattr(self, "_failed", False):
      self._failed = True
      error = sys.exc_info()[1]
      sys.stderr.write(f"warning: cannot write the run log {self.baseFilename}: {error}\n")


def _is_teardown_noise(error: BaseException) -> bool:
  """What tensorstore's pending writes raise into an event loop that orbax
  has closed after a failed save (one per pending write)."""
  return isinstance(error, RuntimeError) and str(error) == "Event loop is closed"


def _unraisable_to_file(path: str, previous: Callable[[Any], None]) -> Callable[[Any], None]:
  """A `sys.unraisablehook` that appends each exception to the log file at
  `path` and passes it on to `previous` unless it is teardown noise."""

  def hook(unraisable) -> None:
    with contextlib.suppress(OSError):  # e.g. the full disk that failed the save
      with open(path, "a", encoding="utf-8") as f:
        f.write(f"unraisable exception in {unraisable.object!r}:\n")
        f.write("".join(traceback.format_exception(
            unraisable.exc_type, unraisable.exc_value, unraisable.exc_traceback)))
    if not _is_teardown_noise(unraisable.exc_value):
      previous(unraisable)

  return hook


@contextlib.contextmanager
def to_file(workdir: str) -> Iterator[str]:
  """Copies all logging to this process's log file for the body, and writes
  the traceback of an exception leaving it there (setting the exception's
  `log_path`). Yields the file's path.

  Exceptions Python cannot raise (`sys.unraisablehook`) go to the file too;
  the "Event loop is closed" ones that a failed checkpoint save leaves behind
  (dozens, while the checkpointer is left) only there.
  """
  path = log_path(workdir)
  handler = _LogFileHandler(path, encoding="utf-8")
  handler.setFormatter(logging.PythonFormatter())
  handler.setLevel(std_logging.INFO)
  root = std_logging.getLogger()
  root.addHandler(handler)
  previous_hook = sys.unraisablehook
  sys.unraisablehook = _unraisable_to_file(path, previous_hook)
  logging.info("run log: %s; command: %s", path, " ".join(sys.argv))
  try:
    yield path
  except errors.RunPreempted as e:  # a stop by signal, saved: not a failure
    logging.info("the run stopped: %s", e)
    raise
  except BaseException as e:
    # To the file only: the terminal gets the command line's one message.
    handler.handle(root.makeRecord(
        "vit_spectral", std_logging.ERROR, __file__, 0, "the run stopped: %s: %s",
        (type(e).__name__, e), sys.exc_info()))
    if not getattr(handler, "_failed", False):  # the file has the traceback
      with contextlib.suppress(AttributeError):
        e.log_path = path
    raise
  finally:
    sys.unraisablehook = previous_hook
    root.removeHandler(handler)
    handler.close()


# --- The terminal ----------------------------------------------------------------

def is_terminal(stream) -> bool:
  """Whether `stream` is an interactive terminal that can redraw a line
  (not one with TERM=dumb, e.g. an Emacs shell)."""
  try:
    return bool(stream.isatty()) and os.environ.get("TERM") != "dumb"
  except (AttributeError, ValueError):  # no isatty, or closed
    return False


class _WarningsAndAbove(std_logging.Filter):
  """Keeps INFO and below off the terminal: they go to the log file."""

  def filter(self, record):
    return record.levelno >= std_logging.WARNING


def _writer(handler: std_logging.Handler) -> std_logging.Handler:
  """The handler that holds the stream: absl's handler writes through the
  PythonHandler it wraps."""
  return getattr(handler, "python_handler", handler)


def _terminal_handlers(stream) -> list[std_logging.Handler]:
  """The handlers, of the root logger or any other, that write to `stream`."""
  loggers = [std_logging.getLogger(), *(
      logger for logger in list(std_logging.Logger.manager.loggerDict.values())
      if isinstance(logger, std_logging.Logger))]
  found = {id(h): h for logger in loggers for h in logger.handlers
           if getattr(_writer(h), "stream", None) is stream}
  return list(found.values())


def quiet_terminal() -> None:
  """From now on in this process, when stderr is a terminal, the handlers
  writing to it show WARNING and above only (the INFO records reach the run's
  log file while `to_file` holds it). For the command line, before its first
  INFO line; a run (`terminal`) does the same for its own duration."""
  if not is_terminal(sys.stderr):
    return
  for handler in _terminal_handlers(sys.stderr):
    if not any(isinstance(f, _WarningsAndAbove) for f in handler.filters):
      handler.addFilter(_WarningsAndAbove())


@contextlib.contextmanager
def terminal() -> Iterator[progress.ProgressLine | None]:
  """For a run's duration, when stderr is a terminal: the handlers writing
  to it show WARNING and above only, and process 0 gets a progress line
  (yielded; None elsewhere): stderr and those handlers then write above it
  (`progress.LinesAbove`), Python's warnings and prints to stderr included.
  Undone on leaving, the line left as a normal line. Writes below Python
  (TF's or XLA's C++ logging to fd 2) can land on the line until its next draw.
  """
  stream = sys.stderr
  if not is_terminal(stream):
    yield None
    return
  handlers = _terminal_handlers(stream)
  quiet = _WarningsAndAbove()
  line = progress.ProgressLine(stream) if jax.process_index() == 0 else None
  above = None if line is None else progress.LinesAbove(line)
  for handler in handlers:
    handler.addFilter(quiet)
    if above is not None:
      _writer(handler).setStream(above)
  if above is not None:
    sys.stderr = above
  try:
    yield line
  finally:
    if line is not None:
      line.close()
    if sys.stderr is above:
      sys.stderr = stream
    for handler in handlers:
      handler.removeFilter(quiet)
      if above is not None and _writer(handler).stream is above:
        _writer(handler).setStream(stream)
