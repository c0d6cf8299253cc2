"""The benchmarks' figures: a new pyplot-free Figure, and its PNG saved beside a JSON.

Pyplot-free (`matplotlib.figure.Figure`, as `analysis.plot_attention_centres`
draws): no backend is switched, so a notebook that imports a `plot_*` function
keeps its own, and a headless machine renders the PNG with Agg.

  fig = new_figure(2, 8.0, 3.0)          # two panels side by side
  ...
  save_next_to(fig, "benchmarks/results/x.json")   # -> "benchmarks/results/x.png"
"""

from __future__ import annotations

import os

from matplotlib.figure import Figure

__all__ = ["DPI", "new_figure", "png_path", "save_next_to"]

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
