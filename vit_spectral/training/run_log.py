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
"""

from __future__ import annotations

import contextlib
import logging as std_logging
import os
import sys
import tempfile
from typing import Iterator

import jax
from absl import logging


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


@contextlib.contextmanager
def to_file(workdir: str) -> Iterator[str]:
  """Copies all logging to this process's log file for the body, and writes
  the traceback of an exception leaving it there (setting the exception's
  `log_path`). Yields the file's path."""
  path = log_path(workdir)
  handler = std_logging.FileHandler(path, encoding="utf-8")
  handler.setFormatter(logging.PythonFormatter())
  handler.setLevel(std_logging.INFO)
  root = std_logging.getLogger()
  root.addHandler(handler)
  logging.info("run log: %s; command: %s", path, " ".join(sys.argv))
  try:
    yield path
  except BaseException as e:
    # To the file only: the terminal gets the command line's one message.
    handler.handle(root.makeRecord(
        "vit_spectral", std_logging.ERROR, __file__, 0, "the run stopped: %s: %s",
        (type(e).__name__, e), sys.exc_info()))
    with contextlib.suppress(AttributeError):
      e.log_path = path
    raise
  finally:
    root.removeHandler(handler)
    handler.close()
