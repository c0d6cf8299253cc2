"""The benchmarks' figures: a new pyplot-free Figure, and its PNG saved beside a JSON.

Pyplot-free (`matplotlib.figure.Figure`, as `analysis.plot_attention_centres`
draws): no backend is switched, so a notebook that imports a `plot_*` function
keeps its own, and a headless machine renders the PNG with Agg.

  fig = new_figure(2, 8.0, 3.0)          # two panels side by side
  ...
  save_next_to(fig, "benchmarks/results/x.json")   # -> "benchmarks/results/x.png"

An experiment script's command line: `add_results_flags(parser, "x")` gives it
`--out` (the JSON, default benchmarks/results/x.json) and `--replot` (redraw the
PNG from that JSON, `read_results`, without running anything).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from matplotlib.figure import Figure

__all__ = ["DPI", "RESULTS_DIR", "add_results_flags", "new_figure", "png_path",
           "read_results", "save_next_to", "write_results"]

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

# Small files: a 10 x 4 inch figure at 100 dpi is 1000 x 400 pixels, tens of KB.
DPI = 100


def new_figure(panels: int, width: float, height: float, columns: int | None = None):
  """A Figure of `panels` axes, `columns` per row (None: one row), `width` x
  `height` inches in all; the unused cells of the last row are hidden.

  Returns:
    (figure, axes): axes is a list of `panels` Axes, row by row.
  """
  if panels < 1:
    raise ValueError(f"panels must be >= 1, got {panels}")
  columns = columns or panels
  fig = Figure(figsize=(width, height))
  axes = list(fig.subplots(-(-panels // columns), columns, squeeze=False).flat)
  for ax in axes[panels:]:
    ax.set_visible(False)
  return fig, axes[:panels]


def png_path(json_path: str) -> str:
  """The PNG beside `json_path`: same folder and stem, `.png` for `.json`."""
  stem, ext = os.path.splitext(json_path)
  if ext != ".json":
    raise ValueError(f"json_path must end in .json, got {json_path!r}")
  return stem + ".png"


def save_next_to(fig, json_path: str) -> str:
  """Saves `fig` as the PNG beside `json_path` (tight layout, DPI); returns its path."""
  path = png_path(json_path)
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  fig.tight_layout()
  fig.savefig(path, dpi=DPI)
  return path


def add_results_flags(parser: argparse.ArgumentParser, name: str) -> None:
  """`--out` (the results JSON, default RESULTS_DIR/<name>.json; the PNG goes
  beside it) and `--replot` (redraw the PNG from that JSON and exit)."""
  parser.add_argument("--out", default=os.path.join(RESULTS_DIR, f"{name}.json"),
                      help="the JSON results; the PNG goes beside it")
  parser.add_argument("--replot", action="store_true",
                      help="redraw the PNG from the JSON at --out and exit")


def read_results(json_path: str) -> Any:
  """The results a script saved at `json_path` (what `--replot` draws from)."""
  with open(json_path) as f:
    return json.load(f)


def write_results(results: Any, json_path: str) -> str:
  """Writes `results` to `json_path` (its folder made if missing); returns the path."""
  os.makedirs(os.path.dirname(json_path) or ".", exist_ok=True)
  with open(json_path, "w") as f:
    json.dump(results, f, indent=1)
  return json_path
