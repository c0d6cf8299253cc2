"""The run's log file: the traceback of a failure goes there, the noise a
failed save leaves behind goes only there, and a log file that cannot be
written (a full disk) says so once."""

import logging as std_logging
import os
import sys
import types

import pytest

from vit_spectral.training import run_log


def _unraisable(error):
  return types.SimpleNamespace(exc_type=type(error), exc_value=error,
                               exc_traceback=error.__traceback__, object="a callback")


def test_a_failure_leaves_its_traceback_in_the_file_and_names_it(tmp_path):
  with pytest.raises(KeyError) as raised:
    with run_log.to_file(str(tmp_path)) as path:
      std_logging.getLogger("absl").warning("a line the terminal also shows")
      raise KeyError("boom")
  assert path == os.path.join(tmp_path, "train.log") == raised.value.log_path
  text = open(path).read()
  assert "a line the terminal also shows" in text
  assert "the run stopped: KeyError" in text and "Traceback" in text


def test_teardown_noise_goes_only_to_the_file(tmp_path):
  path = str(tmp_path / "train.log")
  passed_on = []
  hook = run_log._unraisable_to_file(path, passed_on.append)
  hook(_unraisable(RuntimeError("Event loop is closed")))
  other = _unraisable(ValueError("worth seeing"))
  hook(other)
  assert passed_on == [other]  # only the noise is kept off the terminal
  text = open(path).read()
  assert "Event loop is closed" in text and "worth seeing" in text


def test_a_log_file_that_cannot_be_written_says_so_once(tmp_path, capsys):
  handler = run_log._LogFileHandler(str(tmp_path / "train.log"))
  handler.stream.close()  # every write now fails, as on a full disk
  for message in ("one", "two", "three"):
    handler.emit(std_logging.LogRecord("x", std_logging.INFO, __file__, 0, message, (), None))
  err = capsys.readouterr().err
  assert err.count("cannot write the run log") == 1 and "Traceback" not in err
