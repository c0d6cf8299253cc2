"""The interval an option's value must lie in, declared once as text.

A class declares `OPTION_RANGES = {"alpha": "[0, 1]", "epsilon": "(0, inf)"}`;
the class checks its fields with `check_ranges` when called, and the config
checks read the same declaration (`Attention.option_ranges`) for
`config.model.attention`, before a JAX backend starts.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

__all__ = ["check_ranges", "in_interval"]


def _bounds(interval: str) -> tuple[float, float]:
  if interval[:1] not in "[(" or interval[-1:] not in "])" or interval.count(",") != 1:
    raise ValueError(f"interval {interval!r} must read like '[0, 1]' or '(0, inf)'")
  low, high = (float(v) for v in interval[1:-1].split(","))
  return low, high


def in_interval(value: float, interval: str) -> bool:
  """Whether `value` lies in `interval` ("[a, b]", "(a, b)", "[a, b)", ...;
  a bound may be inf)."""
  low, high = _bounds(interval)
  if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
    return False
  above = value >= low if interval[0] == "[" else value > low
  below = value <= high if interval[-1] == "]" else value < high
  return above and below


def check_ranges(ranges: Mapping[str, str], options: Mapping[str, Any],
                 field: str = "model.attention") -> None:
  """Raises ValueError naming the first option of `options` outside its
  interval in `ranges` (options `ranges` does not name pass)."""
  for name, interval in ranges.items():
    if name in options and not in_interval(options[name], interval):
      raise ValueError(f"{field}.{name}={options[name]!r} must be in {interval}")
