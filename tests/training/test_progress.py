"""The progress line of a terminal run: its numbers, its ETA, its fit to the
terminal's width, the bytes of a rewrite; the terminal's handlers while a run
holds it (`run_log.terminal`); and `train.py` itself under a pseudo-terminal
(one line rewritten in place, no INFO lines, train.log complete) and with
stderr to a pipe (line by line, no carriage return)."""

import fcntl
import io
import logging as std_logging
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from vit_spectral.training import progress, run_log
from tests.cpu_flags import xla_flags
from tests.training.cluster import ROOT

CLEAR = progress.CLEAR_TO_END


# --- Rendering ------------------------------------------------------------------

def test_numbers_have_four_significant_digits_and_keep_trailing_zeros():
  assert progress.significant(0.9998437762260437) == "0.9998"
  assert progress.significant(2.0862667560577393) == "2.086"
  assert progress.significant(1.0) == "1.000"
  assert progress.significant(0.95) == "0.9500"
  assert progress.significant(0.0123456) == "0.01235"
  assert progress.significant(1.23456e-5) == "1.235e-05"
  assert progress.significant(float("nan")) == "nan"
  assert progress.format_metrics({"eval_loss": 1.990543, "eval_accuracy": 0.3638888}) == (
      "eval_accuracy=0.3639, eval_loss=1.991")


def test_the_metrics_table_has_a_row_per_metric_in_order_with_four_significant_digits():
  metrics = {"eval_loss": 2.2942633628845215, "eval_accuracy": 0.1805555522441864,
             "eval_ema_accuracy": 1.0, "corrupt_fog_3_accuracy": 1.23456e-5}
  table = progress.metrics_table(metrics)
  rows = table.split("\n")
  assert [row.split()[0] for row in rows] == list(metrics)   # one row each, in order
  for row, value in zip(rows, metrics.values()):
    shown = row.split()[1]
    assert shown == progress.significant(value)
    digits = shown.split("e")[0].replace(".", "").lstrip("0")
    assert len(digits) == 4, shown                      # 4 significant digits
    assert abs(float(shown) - value) <= 5e-4 * abs(value)
    assert row.startswith("  ") and "  " in row.strip()
  # Names in one column, values right-aligned in the next.
  assert len({len(row) for row in rows}) == 1
  assert len({row.index(row.split()[1]) for row in rows}) > 1
  assert table == ("  eval_loss                   2.294\n"
                   "  eval_accuracy              0.1806\n"
                   "  eval_ema_accuracy           1.000\n"
                   "  corrupt_fog_3_accuracy  1.235e-05")
  assert progress.metrics_table({}) == ""


def test_eta_is_hours_minutes_seconds_and_the_rate_has_three_digits():
  assert progress.duration(0) == "0:00:00"
  assert progress.duration(59.6) == "0:01:00"
  assert progress.duration(3725.4) == "1:02:05"
  assert progress.duration(90061) == "25:01:01"
  assert progress.duration(-3) == "0:00:00"
  assert [progress.rate(r) for r in (512.4, 12.34, 5.678, 0.05)] == ["512", "12.3", "5.68", "0.05"]


def test_the_line_names_step_loss_accuracy_rate_and_eta():
  line = progress.render(1400, 4000, loss=0.0123456, accuracy=0.9998437762260437,
                         steps_per_s=12.34, width=200)
  # 2600 steps at 12.34 steps/s: 210.7 s.
  assert line == "step 1400/4000  loss 0.01235  accuracy 0.9998  12.3 steps/s  ETA 0:03:31"
  # Before the first logged window and before a rate: step and an unknown ETA.
  assert progress.render(0, 60, width=200) == "step 0/60  ETA -:--:--"
  assert progress.render(60, 60, steps_per_s=5.0, width=200) == (
      "step 60/60  5.00 steps/s  ETA 0:00:00")


def test_a_narrow_terminal_drops_whole_fields_least_important_first():
  full = progress.render(1400, 4000, loss=0.5, accuracy=0.75, steps_per_s=12.34, width=200)
  seen = []
  for width in range(len(full), -1, -1):
    line = progress.render(1400, 4000, loss=0.5, accuracy=0.75, steps_per_s=12.34, width=width)
    assert len(line) <= width, (width, line)
    if line not in seen:
      seen.append(line)
  assert seen[:5] == [
      "step 1400/4000  loss 0.5000  accuracy 0.7500  12.3 steps/s  ETA 0:03:31",
      "step 1400/4000  loss 0.5000  accuracy 0.7500  ETA 0:03:31",
      "step 1400/4000  loss 0.5000  ETA 0:03:31",
      "step 1400/4000  ETA 0:03:31",
      "step 1400/4000",
  ]
  assert seen[5] == "step 1400/400" and seen[-1] == ""  # then the step itself is cut


def test_the_width_is_the_terminals_or_columns_or_80(monkeypatch):
  monkeypatch.setenv("COLUMNS", "132")
  assert progress.columns(io.StringIO()) == 132
  monkeypatch.delenv("COLUMNS")
  assert progress.columns(io.StringIO()) == progress.FALLBACK_COLUMNS  # no fileno
  primary, secondary = pty.openpty()
  try:
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 57, 0, 0))
    with open(secondary, "w", closefd=False) as tty:
      assert progress.columns(tty) == 57
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
    with open(secondary, "w", closefd=False) as tty:  # a pty nobody sized
      assert progress.columns(tty) == progress.FALLBACK_COLUMNS
  finally:
    os.close(primary)
    os.close(secondary)


# --- Drawing --------------------------------------------------------------------

def test_a_rewrite_is_carriage_return_text_clear_and_lines_go_above():
  out = io.StringIO()
  line = progress.ProgressLine(out, width=lambda: 10)
  line.draw("step 1/60")
  line.draw("step 2/60 with more text than fits")
  line.draw("step 2/60 with more text than fits")  # unchanged: nothing written
  line.write_above("W a warning\n")
  above = progress.LinesAbove(line)
  print("partial", end="", file=above)  # print() writes text and newline apart
  print(" line", file=above)
  line.close()
  line.close()
  line.draw("step 3/60")  # closed: nothing
  line.write_above("after\n")
  assert out.getvalue() == (
      f"\rstep 1/60{CLEAR}"
      f"\rstep 2/60 {CLEAR}"  # cut to the width
      f"\r{CLEAR}W a warning\n\rstep 2/60 {CLEAR}"
      f"\r{CLEAR}partial line\n\rstep 2/60 {CLEAR}"
      "\n"  # close: the last state stays as a line
      "after\n")


def test_a_draw_after_a_partial_line_ends_that_line_first():
  out = io.StringIO()
  line = progress.ProgressLine(out, width=lambda: 40)
  line.write_above("no newline yet")
  line.draw("step 1/2")
  assert out.getvalue() == f"no newline yet\n\rstep 1/2{CLEAR}"


class _Clock:
  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


def test_train_progress_measures_the_rate_redraws_at_most_ten_times_a_second():
  out, clock = io.StringIO(), _Clock()
  line = progress.ProgressLine(out, width=lambda: 200)
  shown = progress.TrainProgress(line, total_steps=100, start_step=40, clock=clock)
  shown.note("log: somewhere/train.log")
  shown.show()
  clock.now += 30.0  # the first step compiles: not counted in the rate
  shown.step(41)
  for step in range(42, 52):  # 4 steps/s
    clock.now += 0.25
    shown.step(step)
  assert shown.steps_per_s() == pytest.approx(4.0)
  shown.metrics(loss=0.25, accuracy=0.875)
  draws_before = out.getvalue().count("\rstep")
  clock.now += 0.01
  shown.step(52)  # 10 ms after the last draw: not drawn
  assert out.getvalue().count("\rstep") == draws_before
  shown.results(52, {"eval_accuracy": 0.9, "eval_loss": 0.3})
  shown.close()
  lines = out.getvalue()
  assert lines.startswith(f"log: somewhere/train.log\n\rstep 40/100  ETA -:--:--{CLEAR}")
  assert f"\rstep 51/100  loss 0.2500  accuracy 0.8750  4.00 steps/s  ETA 0:00:12{CLEAR}" in lines
  # The line above, the line as it was, then its last state (11 steps in
  # 2.51 s: 4.38 steps/s) left as a normal line.
  assert lines.endswith(
      f"\r{CLEAR}step 52/100: eval_accuracy=0.9000, eval_loss=0.3000\n"
      f"\rstep 51/100  loss 0.2500  accuracy 0.8750  4.00 steps/s  ETA 0:00:12{CLEAR}"
      f"\rstep 52/100  loss 0.2500  accuracy 0.8750  4.38 steps/s  ETA 0:00:11{CLEAR}\n")


def test_train_progress_forgets_old_steps_and_restarts_after_a_rollback():
  clock = _Clock()
  shown = progress.TrainProgress(progress.ProgressLine(io.StringIO(), width=lambda: 80), 1000, 0,
                                 clock=clock)
  for step in range(1, 11):  # 1 step/s for 10 s, then 10 steps/s for 30 s
    clock.now += 1.0
    shown.step(step)
  for step in range(11, 311):
    clock.now += 0.1
    shown.step(step)
  assert shown.steps_per_s() == pytest.approx(10.0, rel=0.01)  # the slow steps aged out
  clock.now += 1.0
  shown.step(200)  # rolled back
  assert shown.steps_per_s() is None


def test_without_a_line_train_progress_writes_nothing():
  shown = progress.TrainProgress(None, 10, 0)
  shown.show()
  shown.step(1)
  shown.metrics(loss=1.0, accuracy=0.5)
  shown.note("x")
  shown.results(1, {"eval_loss": 1.0})
  shown.close()


# --- The terminal while a run holds it ----------------------------------------------

class _FakeTerminal(io.StringIO):
  def isatty(self):
    return True


def test_on_a_terminal_info_goes_elsewhere_and_warnings_go_above_the_line(monkeypatch):
  terminal = _FakeTerminal()
  monkeypatch.setattr(sys, "stderr", terminal)
  monkeypatch.setenv("TERM", "xterm")
  monkeypatch.setenv("COLUMNS", "40")
  handler = std_logging.StreamHandler(sys.stderr)
  handler.setFormatter(std_logging.Formatter("%(levelname)s %(message)s"))
  logger = std_logging.getLogger("test_progress")
  logger.addHandler(handler)
  logger.propagate = False
  logger.setLevel(std_logging.INFO)
  try:
    with run_log.terminal() as line:
      assert line is not None and sys.stderr is not terminal
      line.draw("step 1/2")
      logger.info("only for the log file")
      logger.warning("worth seeing")
      print("a print to stderr", file=sys.stderr)
    assert sys.stderr is terminal and handler.stream is terminal and not handler.filters
    logger.info("after the run")
  finally:
    logger.removeHandler(handler)
  assert terminal.getvalue() == (
      f"\rstep 1/2{CLEAR}"
      f"\r{CLEAR}WARNING worth seeing\n\rstep 1/2{CLEAR}"
      f"\r{CLEAR}a print to stderr\n\rstep 1/2{CLEAR}"
      "\n"
      "INFO after the run\n")


def test_not_a_terminal_changes_nothing(monkeypatch):
  for stream, term in ((io.StringIO(), "xterm"), (_FakeTerminal(), "dumb")):
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setenv("TERM", term)
    with run_log.terminal() as line:
      assert line is None and sys.stderr is stream
    run_log.quiet_terminal()


def test_quiet_terminal_keeps_info_off_a_terminal_for_good(monkeypatch):
  terminal = _FakeTerminal()
  monkeypatch.setattr(sys, "stderr", terminal)
  monkeypatch.setenv("TERM", "xterm")
  handler = std_logging.StreamHandler(sys.stderr)
  logger = std_logging.getLogger("test_progress_quiet")
  logger.addHandler(handler)
  logger.propagate = False
  logger.setLevel(std_logging.INFO)
  try:
    run_log.quiet_terminal()
    run_log.quiet_terminal()  # once is enough
    with run_log.terminal():
      pass
    logger.info("hidden")
    logger.warning("shown")
    assert len(handler.filters) == 1
  finally:
    logger.removeHandler(handler)
  assert terminal.getvalue() == "shown\n"


# --- train.py on a terminal and on a pipe ---------------------------------------------

COMMAND = ["train.py", "--config=digits_vit:depth=1,width=32,heads=2,steps=60",
           "--config.log_every=10", "--config.eval_every=30", "--config.optim.warmup_steps=10"]
COLUMNS = 100
# absl's Python lines: `I1124 14:13:59.204382 140165557189504 main.py:520] ...`
_ABSL_INFO = re.compile(r"^I\d{4} [\d:.]+ +\d+ (\S+\.py):\d+\]", re.MULTILINE)


def _read_all(fd: int) -> bytes:
  chunks = []
  while True:
    try:
      chunk = os.read(fd, 65536)
    except OSError:  # EIO: the other side closed
      break
    if not chunk:
      break
    chunks.append(chunk)
  return b"".join(chunks)


@pytest.mark.extended
def test_train_py_draws_one_line_on_a_terminal_and_lines_on_a_pipe(tmp_path):
  from vit_spectral import data  # pylint: disable=import-outside-toplevel
  data.get_builder("digits", data_dir=str(tmp_path / "tfds"))
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3", TERM="xterm",
             TFDS_DATA_DIR=str(tmp_path / "tfds"), XLA_FLAGS=xla_flags(1),
             JAX_DISABLE_MOST_OPTIMIZATIONS="1")
  env.pop("COLUMNS", None)
  tty_dir, pipe_dir = tmp_path / "tty", tmp_path / "pipe"
  # Both at once: the pipe run's few KiB of stderr fit the pipe's buffer.
  piped = subprocess.Popen([sys.executable, *COMMAND, f"--workdir={pipe_dir}"], cwd=ROOT,
                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
  primary, secondary = pty.openpty()
  fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
  on_tty = subprocess.Popen([sys.executable, *COMMAND, f"--workdir={tty_dir}"], cwd=ROOT,
                            env=env, stdin=secondary, stdout=secondary, stderr=secondary)
  os.close(secondary)
  try:
    shown = _read_all(primary).decode()
  finally:
    os.close(primary)
  assert on_tty.wait(timeout=300) == 0, shown[-3000:]
  _, piped_err = piped.communicate(timeout=300)
  piped_err = piped_err.decode()
  assert piped.returncode == 0, piped_err[-3000:]

  # The terminal: the line rewritten in place, fitted to the width.
  draws = re.findall(f"\r(step [^\r\n]*?){re.escape(CLEAR)}", shown)
  assert len(set(draws)) >= 10, shown[-3000:]
  assert all(len(text) <= COLUMNS - 1 for text in draws)
  last = re.fullmatch(r"step 60/60  loss (\S+)  accuracy (\S+)  [\d.]+ steps/s  ETA 0:00:00",
                      draws[-1])
  assert last and re.fullmatch(r"\d\.\d{3}", last[1]) and re.fullmatch(r"0\.\d{4}|1\.000",
                                                                         last[2]), draws[-1]
  # Normal lines above it (the tty turns "\n" into "\r\n").
  assert re.search(f"\r{re.escape(CLEAR)}step 30/60: eval_accuracy=0\\.\\d{{4}}, "
                   r"eval_loss=\d\.\d{3}\r\n", shown), shown[-3000:]
  assert re.search(r"\r\nfinal \(step 60\): eval_accuracy=0\.\d{4}, eval_loss=\d\.\d{3}\r\n",
                   shown)
  # No absl INFO line of the run. main.py's own two (before and after the
  # run) stay until it calls run_log.quiet_terminal() (issue 32, main.py).
  lines = shown.replace("\r\n", "\n").replace("\r", "\n")
  assert not _ABSL_INFO.findall(lines), lines[-3000:]
  assert "train_accuracy=" not in shown
  # The log file has them all.
  log = (tty_dir / "train.log").read_text()
  assert "run_log.py" in log and "] [60] train_accuracy=" in log and "] [60] eval_accuracy=" in log

  # The pipe: line by line, as before, the metric lines with 6 digits at most.
  assert "\r" not in piped_err and "step 60/60" not in piped_err
  for step in range(10, 61, 10):
    metrics = re.search(rf"logging_writer\.py:\d+\] \[{step}\] (train_accuracy=.*)", piped_err)
    assert metrics, (step, piped_err[-3000:])
    for value in re.findall(r"=([^,\s]+)", metrics[1]):
      assert len(re.sub(r"e[-+]\d+$", "", value).replace(".", "").lstrip("0")) <= 6, value
