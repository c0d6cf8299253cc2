"""TensorFlow imported without its start-up lines, and kept off the accelerators.

TensorFlow is only the input pipeline here; JAX owns the GPUs and TPUs. Importing
it prints, from C++ static initialisers that run before any environment variable
is read (TF_CPP_MIN_LOG_LEVEL does not stop them), lines such as

  WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
  I0000 00:00:... cudart_stub.cc:31] Could not find cuda drivers on your machine, ...
  I0000 00:00:... port.cc:153] oneDNN custom operations are on. ...

and hiding its GPUs adds `E0000 ... cuda_platform.cc:52] failed call to cuInit`
where no CUDA driver is installed. None says anything a user can act on.
`import_tensorflow` imports TensorFlow and hides its GPUs and TPUs with file
descriptor 2 redirected into a temporary file (`start_up_lines_dropped`), then
writes back every captured line that is not one of those (`is_start_up_line`),
so a real error still shows. TensorFlow's C++ INFO lines later on (e.g.
`tf_record_dataset_op.cc] The default buffer size is 262144, which is
overridden by ...` each time TFDS opens a file) are off unless
TF_CPP_MIN_LOG_LEVEL says otherwise; its warnings and errors show:

  from vit_spectral.data.tensorflow_import import tf     # TensorFlow, quiet
  from vit_spectral.data.tensorflow_import import tfds   # TFDS (it imports TF)

Where file descriptor 2 is closed, TensorFlow is imported plainly.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import tempfile
import threading
from types import ModuleType
from typing import Iterator

__all__ = ["import_tensorflow", "is_start_up_line", "start_up_lines_dropped", "tf", "tfds"]

# An absl/glog line: severity and date, time, thread id, `file.cc:line] message`.
_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ (?P<file>[\w.]+):\d+\] (?P<message>.*)$")

# (source file, how the message starts) of the lines TensorFlow prints while it
# loads and enumerates its devices: CPU builds, CUDA builds on a machine
# without a driver, and CUDA builds beside JAX's own CUDA plugins (each
# registers the same factories).
_START_UP_LOG_LINES = (
    ("cudart_stub.cc", "Could not find cuda drivers on your machine"),
    ("cpu_feature_guard.cc", "This TensorFlow binary is optimized to use available CPU"),
    ("port.cc", "oneDNN custom operations are on."),
    ("cuda_platform.cc", "failed call to cuInit"),
    ("cuda_executor.cc", "failed call to cuInit"),
    ("cuda_fft.cc", "Unable to register cuFFT factory"),
    ("cuda_dnn.cc", "Unable to register cuDNN factory"),
    ("cuda_blas.cc", "Unable to register cuBLAS factory"),
    ("computation_placer.cc", "computation placer already registered"),
)

# Lines of their own (no log prefix) that come with the ones above.
_START_UP_PLAIN_LINES = (
    re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called "
               r"are written to STDERR$"),
    re.compile(r"^To enable the following instructions: .*, in other operations, "
               r"rebuild TensorFlow with the appropriate compiler flags\.$"),
)

_LOCK = threading.Lock()
_imported: ModuleType | None = None


def is_start_up_line(line: str) -> bool:
  """Whether `line` (without its newline) is one of TensorFlow's known start-up
  lines, which `import_tensorflow` drops."""
  match = _LOG_LINE.match(line)
  if match:
    return any(match["file"] == source and match["message"].startswith(message)
               for source, message in _START_UP_LOG_LINES)
  return any(pattern.match(line) for pattern in _START_UP_PLAIN_LINES)


def _kept_lines(captured: bytes) -> bytes:
  """`captured` without the start-up lines (the rest byte for byte)."""
  lines = captured.splitlines(keepends=True)
  return b"".join(line for line in lines
                  if not is_start_up_line(line.decode("utf-8", "replace").rstrip("\r\n")))


@contextlib.contextmanager
def start_up_lines_dropped() -> Iterator[None]:
  """Runs the body with file descriptor 2 captured, then writes back to it
  whatever was written there except TensorFlow's start-up lines.

  The capture is of the process's fd 2 (where C++ writes), not of
  `sys.stderr`, so it works under pytest's capture and in a notebook kernel
  alike. Where fd 2 is closed the body runs uncaptured.
  """
  sys.stderr.flush()
  try:
    saved = os.dup(2)
  except OSError:  # no fd 2 to capture
    yield
    return
  try:
    with tempfile.TemporaryFile() as capture:
      os.dup2(capture.fileno(), 2)
      try:
        yield
      finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        capture.seek(0)
        kept = memoryview(_kept_lines(capture.read()))
        while kept:
          kept = kept[os.write(2, kept):]
  finally:
    os.close(saved)


def import_tensorflow() -> ModuleType:
  """TensorFlow, imported once with its start-up lines dropped, its C++ INFO
  lines off (where TF_CPP_MIN_LOG_LEVEL is unset) and its GPUs and TPUs
  hidden (JAX uses them)."""
  global _imported
  with _LOCK:
    if _imported is None:
      os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # INFO off, warnings on
      with start_up_lines_dropped():
        tensorflow = importlib.import_module("tensorflow")
        for kind in ("GPU", "TPU"):
          try:
            tensorflow.config.set_visible_devices([], kind)
          except RuntimeError:  # TF already ran ops on its devices: too late to hide them
            pass
      _imported = tensorflow
    return _imported


tf = import_tensorflow()


def __getattr__(name: str) -> ModuleType:
  """`tfds` on first use (TFDS imports TensorFlow, quiet by then)."""
  if name == "tfds":
    return importlib.import_module("tensorflow_datasets")
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
