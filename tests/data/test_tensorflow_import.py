"""`data.tensorflow_import`: TensorFlow without its start-up lines, off the
accelerators, and every other line written to stderr during the capture kept."""

import os
import pathlib
import subprocess
import sys

import pytest

from vit_spectral.data import tensorflow_import

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The lines issue 32 quotes (TensorFlow 2.21 on a CPU machine without a CUDA
# driver), and those of a CUDA build beside JAX's CUDA plugins.
START_UP_LINES = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795464446.604861    5644 cudart_stub.cc:31] Could not find cuda drivers on "
    "your machine, GPU will not be used.",
    "I0000 00:00:1795702274.8 349 cpu_feature_guard.cc:210] This TensorFlow binary is optimized "
    "to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow "
    "with the appropriate compiler flags.",
    "I0000 00:00:1795464446.603311    5644 port.cc:153] oneDNN custom operations are on. You may "
    "see slightly different numerical results due to floating-point round-off errors.",
    "E0000 00:00:1795464463.185960    5644 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "E0000 00:00:1732109912.5 1 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting "
    "to register factory for plugin cuDNN when one has already been registered",
)
# Lines that look alike but are not start-up lines: they must come back.
OTHER_LINES = (
    "E0000 00:00:1795464463.185960    5644 cuda_platform.cc:60] device 0 ran out of memory",
    "W0000 00:00:1795464463.1    5644 port.cc:153] something else entirely",
    "E0000 00:00:1795464463.1    5644 op_kernel.cc:1825] OP_REQUIRES failed",
    "WARNING: a warning of our own",
    "Traceback (most recent call last):",
)


def test_start_up_lines_are_told_from_others():
  assert all(tensorflow_import.is_start_up_line(line) for line in START_UP_LINES)
  assert not any(tensorflow_import.is_start_up_line(line) for line in OTHER_LINES)


def test_the_capture_writes_back_every_other_line(capfd):
  mixed = [START_UP_LINES[0], OTHER_LINES[0], START_UP_LINES[1], OTHER_LINES[2],
           START_UP_LINES[3], "plain text, no newline at the end"]
  capfd.readouterr()
  with tensorflow_import.start_up_lines_dropped():
    os.write(2, "\n".join(mixed).encode())
  err = capfd.readouterr().err
  assert err == f"{OTHER_LINES[0]}\n{OTHER_LINES[2]}\nplain text, no newline at the end"


def test_the_capture_gives_fd_2_back_when_the_body_raises(capfd):
  with pytest.raises(RuntimeError, match="body failed"):
    with tensorflow_import.start_up_lines_dropped():
      os.write(2, f"{START_UP_LINES[1]}\nstill shown\n".encode())
      raise RuntimeError("body failed")
  os.write(2, b"after\n")
  assert capfd.readouterr().err == "still shown\nafter\n"


def test_without_fd_2_the_body_runs_uncaptured(monkeypatch):
  def no_fd(fd):
    raise OSError(9, "Bad file descriptor")

  monkeypatch.setattr(tensorflow_import.os, "dup", no_fd)
  ran = []
  with tensorflow_import.start_up_lines_dropped():
    ran.append(True)
  assert ran == [True]


def test_tensorflow_is_imported_once_without_gpus_or_tpus():
  tf = tensorflow_import.import_tensorflow()
  assert tf is tensorflow_import.tf is sys.modules["tensorflow"]
  assert tensorflow_import.import_tensorflow() is tf
  assert tf.config.get_visible_devices("GPU") == []
  assert tf.config.get_visible_devices("TPU") == []
  assert tensorflow_import.tfds is sys.modules["tensorflow_datasets"]
  with pytest.raises(AttributeError, match="no attribute 'keras'"):
    tensorflow_import.keras  # noqa: B018


def test_a_fresh_import_and_a_file_read_print_nothing(tmp_path):
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
  # A TFRecord file read with a buffer size, as TFDS reads: an INFO line per file.
  code = ("import sys\n"
          "from vit_spectral.data.tensorflow_import import tf, tfds\n"
          "with tf.io.TFRecordWriter(sys.argv[1]) as writer:\n"
          "  writer.write(b'digit')\n"
          "records = list(tf.data.TFRecordDataset(sys.argv[1], buffer_size=1 << 20))\n"
          "print(tf.config.get_visible_devices('GPU'), records[0].numpy())")
  done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "one.tfrecord")], env=env,
                        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
  assert done.returncode == 0, done.stderr
  assert done.stdout == "[] b'digit'\n"
  assert done.stderr == ""
