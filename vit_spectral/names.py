"""Looking up a name among valid ones: the nearest match for an error message.

Every lookup by name (recipe, recipe argument, config field, model variant,
attention, block option, norm, timm architecture, ...) that fails says what
was asked, the nearest valid name when one is close, and the valid names:

  raise ValueError(f"model.attention.name={name!r} is not registered"
                   f"{did_you_mean(name, names)}; choose one of {names}")

This module imports nothing heavy: the command line uses it before JAX.
"""

from __future__ import annotations

import difflib
from typing import Iterable

__all__ = ["did_you_mean", "nearest"]


def nearest(name: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
  """The choice closest to `name` (difflib's ratio, case-insensitive, at
  least `cutoff`), or None when none is that close."""
  choices = [str(c) for c in choices]
  lowered = {c.lower(): c for c in choices}
  match = difflib.get_close_matches(str(name).lower(), list(lowered), n=1, cutoff=cutoff)
  return lowered[match[0]] if match else None


def did_you_mean(name: str, choices: Iterable[str], cutoff: float = 0.6) -> str:
  """" (did you mean 'x'?)" for the nearest choice, or "" when none is close."""
  match = nearest(name, choices, cutoff)
  return f" (did you mean {match!r}?)" if match is not None else ""
