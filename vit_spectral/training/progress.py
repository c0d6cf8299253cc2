r"""A training run's progress line on a terminal: rendered and drawn here.

Process 0, when its stderr is a terminal (`run_log.terminal` decides and
routes the terminal's other writers), shows one line that rewrites itself:

  step 1400/4000  loss 0.01234  accuracy 0.9998  12.3 steps/s  ETA 0:03:31

Each draw is "\r", the text fitted to the terminal's width and "\x1b[K"
(clear to the end of the line), so a shorter line leaves nothing of a longer
one behind. Whatever is written to the terminal meanwhile (`LinesAbove`:
warnings, eval results, `TrainProgress.note`) clears the line, appears as a
normal line and has the progress line drawn again below it. When the run
ends the last state stays as a normal line.

Numbers: loss and accuracy with 4 significant digits, trailing zeros kept
(`1.000`, `0.9500`, `0.01234`): the train metrics of the last `log_every`
window, the same numbers the log's metrics line has. steps/s over the steps of
the last `RATE_WINDOW_S` seconds (the compile before the first step is not
counted; an eval pause ages out), the ETA from that rate, as h:mm:ss.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from typing import Callable, Mapping, Sequence, TextIO

CLEAR_TO_END = "\x1b[K"  # ANSI "erase in line", from the cursor to the end
SEPARATOR = "  "
FALLBACK_COLUMNS = 80  # when the terminal does not say (a pty of size 0)
REDRAW_EVERY_S = 0.1  # at most ten draws a second
RATE_WINDOW_S = 20.0


def significant(value: float, digits: int = 4) -> str:
  """`value` with `digits` significant digits, trailing zeros kept."""
  return f"{value:#.{digits}g}"


def duration(seconds: float) -> str:
  """h:mm:ss (hours unbounded)."""
  hours, rest = divmod(max(0, round(seconds)), 3600)
  minutes, secs = divmod(rest, 60)
  return f"{hours}:{minutes:02d}:{secs:02d}"


def rate(steps_per_s: float) -> str:
  """Steps per second with three digits or fewer: 512, 12.3, 0.05."""
  if steps_per_s >= 100:
    return f"{steps_per_s:.0f}"
  return f"{steps_per_s:.1f}" if steps_per_s >= 10 else f"{steps_per_s:.2f}"


def shown_value(value: float | Sequence[float]) -> str:
  """A metric with 4 significant digits; one per seed, `[a, b]`, for a list
  (`config.num_seeds`)."""
  if isinstance(value, (list, tuple)):
    return "[" + ", ".join(significant(float(v)) for v in value) + "]"
  return significant(float(value))


def format_metrics(metrics: Mapping[str, float | Sequence[float]]) -> str:
  """`name=value, ...` by name, 4 significant digits (`shown_value`)."""
  return ", ".join(f"{name}={shown_value(value)}"
                   for name, value in sorted(metrics.items()))


def metrics_table(metrics: Mapping[str, float], indent: int = 2) -> str:
  """One `name  value` row per metric, in the mapping's order, names padded
  to one column and values (4 significant digits, `significant`) right-aligned
  in the next: a run's final metrics (`main`) and `vit-spectral-evaluate`'s."""
  if not metrics:
    return ""
  names = [str(name) for name in metrics]
  values = [shown_value(value) for value in metrics.values()]
  name_width, value_width = max(map(len, names)), max(map(len, values))
  return "\n".join(f"{' ' * indent}{name:<{name_width}}  {value:>{value_width}}"
                   for name, value in zip(names, values))


def fit(fields: Sequence[tuple[int, str]], width: int) -> str:
  """The fields' texts joined in order, the least important dropped until
  the line fits in `width` columns (the first field is kept, cut if it must
  be). `fields`: (importance, text); the lowest importance goes first."""
  kept = list(fields)
  while len(kept) > 1 and len(SEPARATOR.join(text for _, text in kept)) > width:
    kept.remove(min(kept[1:], key=lambda field: field[0]))
  return SEPARATOR.join(text for _, text in kept)[:max(width, 0)]


def render(step: int, total_steps: int, *, loss: float | None = None,
           accuracy: float | None = None, steps_per_s: float | None = None,
           width: int = FALLBACK_COLUMNS - 1) -> str:
  """The progress line's text in at most `width` columns. Dropped first
  when it is too wide: steps/s, then accuracy, loss and ETA."""
  fields = [(5, f"step {step}/{total_steps}")]
  if loss is not None:
    fields.append((2, f"loss {significant(loss)}"))
  if accuracy is not None:
    fields.append((1, f"accuracy {significant(accuracy)}"))
  if steps_per_s:
    fields.append((0, f"{rate(steps_per_s)} steps/s"))
  eta = duration((total_steps - step) / steps_per_s) if steps_per_s else "-:--:--"
  fields.append((3, f"ETA {eta}"))
  return fit(fields, width)


def columns(stream: TextIO) -> int:
  """The width of the terminal `stream` writes to: $COLUMNS where set, else
  the terminal's own, else FALLBACK_COLUMNS."""
  try:
    return int(os.environ["COLUMNS"])
  except (KeyError, ValueError):
    pass
  try:
    width = os.get_terminal_size(stream.fileno()).columns
  except (AttributeError, OSError, ValueError):
    width = 0
  return width if width > 0 else FALLBACK_COLUMNS


class ProgressLine:
  """One line on a terminal that rewrites itself, with normal lines written
  above it (`write_above`). Thread-safe: a warning may come from a writer
  thread while the loop draws.

  Attributes:
    stream: the terminal (the real stderr).
  """

  def __init__(self, stream: TextIO, width: Callable[[], int] | None = None):
    self.stream = stream
    # Never the last column: a terminal that wraps there would put the next
    # "\r" on the wrapped row and leave the line behind.
    self._width = width or (lambda: columns(stream) - 1)
    self._lock = threading.RLock()
    self._text = ""
    self._shown = False  # the progress line is on the screen, cursor on it
    self._at_line_start = True  # no partial line written above is pending
    self._closed = False

  def width(self) -> int:
    return self._width()

  def draw(self, text: str) -> None:
    """Shows `text` (already fitted, `render`) as the progress line."""
    with self._lock:
      if self._closed or (self._shown and text == self._text):
        return
      self._text = text
      if not self._at_line_start:  # a partial line above: end it first
        self.stream.write("\n")
        self._at_line_start = True
      self._show()
      self.stream.flush()

  def write_above(self, text: str) -> None:
    """Writes `text` as normal output; the progress line follows it once
    the text ends a line."""
    with self._lock:
      if not text:
        return
      if self._shown:
        self.stream.write("\r" + CLEAR_TO_END)
        self._shown = False
      self.stream.write(text)
      self._at_line_start = text.endswith("\n")
      if self._at_line_start and self._text and not self._closed:
        self._show()
      self.stream.flush()

  def close(self) -> None:
    """Leaves the last state of the line as a normal line; later writes
    pass straight through. Idempotent."""
    with self._lock:
      if self._shown:
        self.stream.write("\n")
        self.stream.flush()
        self._shown = False
      self._closed = True

  def _show(self) -> None:
    self.stream.write("\r" + self._text[:max(self.width(), 0)] + CLEAR_TO_END)
    self._shown = True


class LinesAbove:
  """A text stream for the terminal of a `ProgressLine`: what is written to
  it appears above the line. What it does not define (encoding, buffer, ...)
  is the terminal stream's."""

  def __init__(self, line: ProgressLine):
    self.line = line

  def write(self, text: str) -> int:
    self.line.write_above(text)
    return len(text)

  def flush(self) -> None:
    self.line.stream.flush()

  def isatty(self) -> bool:
    return self.line.stream.isatty()

  def fileno(self) -> int:
    return self.line.stream.fileno()

  def __getattr__(self, name):
    return getattr(self.line.stream, name)


class TrainProgress:
  """The trainer's side of the progress line: `show` once the run knows its
  first step (the line stands while the first step compiles), `step` after
  every train step, `metrics` after each logged window, `note`/`results` for
  lines above, `close` when the loop ends. With no line (not a terminal, or a
  process other than 0) every call does nothing: the log's lines are the
  output then."""

  def __init__(self, line: ProgressLine | None, total_steps: int, start_step: int, *,
               clock: Callable[[], float] = time.monotonic):
    self._line = line
    self._total = total_steps
    self._step = start_step
    self._clock = clock
    self._samples: collections.deque[tuple[float, int]] = collections.deque()
    self._loss: float | None = None
    self._accuracy: float | None = None
    self._drawn_at = -float("inf")

  def steps_per_s(self) -> float | None:
    """Steps per second over the recent steps; None before two steps."""
    if len(self._samples) < 2:
      return None
    (t0, s0), (t1, s1) = self._samples[0], self._samples[-1]
    return (s1 - s0) / (t1 - t0) if t1 > t0 else None

  def show(self) -> None:
    """Draws the line as it stands."""
    self._draw()

  def step(self, step: int) -> None:
    """Step `step` is done; redraws at most every REDRAW_EVERY_S and at the
    last step."""
    if self._line is None:
      return
    now = self._clock()
    if step < self._step:  # a rollback: the rate starts again
      self._samples.clear()
    self._samples.append((now, step))
    while len(self._samples) > 2 and now - self._samples[0][0] > RATE_WINDOW_S:
      self._samples.popleft()
    self._step = step
    if step == self._total or now - self._drawn_at >= REDRAW_EVERY_S:
      self._draw()

  def metrics(self, *, loss: float, accuracy: float) -> None:
    """The train metrics of the window that ended at the last step."""
    self._loss, self._accuracy = loss, accuracy
    self._draw()

  def note(self, text: str) -> None:
    """A normal line above the progress line."""
    if self._line is not None:
      self._line.write_above(text + "\n")

  def results(self, step: int, metrics: Mapping[str, float]) -> None:
    """Evaluation results at `step`, as a line above."""
    self.note(f"step {step}/{self._total}: {format_metrics(metrics)}")

  def close(self) -> None:
    """The progress line's last state stays as a normal line."""
    if self._line is not None:
      self._draw()
      self._line.close()

  def _draw(self) -> None:
    if self._line is None:
      return
    self._drawn_at = self._clock()
    self._line.draw(render(self._step, self._total, loss=self._loss,
                           accuracy=self._accuracy, steps_per_s=self.steps_per_s(),
                           width=self._line.width()))
