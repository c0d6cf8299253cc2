"""Local attention windows on a token grid: partition, merge, cyclic shift and
the shifted-window mask (Swin, Liu et al. 2021, §3.2; CSwin's stripes are
windows of one full side).

Tokens are row-major on a (rows, cols) grid, (B, rows·cols, D). A window of
(wh, ww) tokens must tile the grid; the windows are ordered row-major too, and
the partitioned batch is image-major: row b·nW + w is window w of image b.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np


def check_window(grid: tuple[int, int], window: tuple[int, int], field: str) -> None:
  """Raises ValueError unless `window` tiles `grid` (the message names `field`)."""
  if any(w < 1 or g % w for g, w in zip(grid, window)):
    raise ValueError(f"{field}={tuple(window)} must tile the {grid[0]}x{grid[1]} token grid "
                     "(each side a positive divisor of the grid's)")


def partition(x, grid: tuple[int, int], window: tuple[int, int]):
  """x: (B, rows·cols, D) -> (B·nW, wh·ww, D), nW = (rows/wh)·(cols/ww)."""
  (rows, cols), (wh, ww) = grid, window
  b, _, d = x.shape
  x = x.reshape(b, rows // wh, wh, cols // ww, ww, d).transpose(0, 1, 3, 2, 4, 5)
  return x.reshape(b * (rows // wh) * (cols // ww), wh * ww, d)


def merge(windows, grid: tuple[int, int], window: tuple[int, int]):
  """The inverse of `partition`: (B·nW, wh·ww, D) -> (B, rows·cols, D)."""
  (rows, cols), (wh, ww) = grid, window
  d = windows.shape[-1]
  x = windows.reshape(-1, rows // wh, cols // ww, wh, ww, d).transpose(0, 1, 3, 2, 4, 5)
  return x.reshape(-1, rows * cols, d)


def roll(x, grid: tuple[int, int], shift: tuple[int, int]):
  """Cyclic shift of the grid tokens by `shift` (rows, cols): token (i, j)
  moves to (i + shift[0], j + shift[1]) mod the grid. (B, rows·cols, D)."""
  b, _, d = x.shape
  x = jnp.roll(x.reshape(b, *grid, d), shift, axis=(1, 2))
  return x.reshape(b, grid[0] * grid[1], d)


def shifted_window_mask(grid: tuple[int, int], window: tuple[int, int],
                        shift: tuple[int, int]) -> np.ndarray:
  """Which tokens of a window may attend to which after the grid was rolled by
  −shift (Swin's cyclic shift): (nW, wh·ww, wh·ww) bool, True = same region.

  Rolling brings tokens from the far border into the last window row/column;
  they were not neighbours in the image, so each side is cut into the regions
  [0, side − window), [side − window, side − shift), [side − shift, side) and
  a token attends only to tokens of its own region. shift (0, 0): all True.
  """
  labels = np.zeros(grid, np.int32)
  region = 0
  cuts = []
  for side, w, s in zip(grid, window, shift):
    cuts.append([slice(0, side - w), slice(side - w, side - s), slice(side - s, side)]
                if s else [slice(0, side)])
  for rows in cuts[0]:
    for cols in cuts[1]:
      labels[rows, cols] = region
      region += 1
  windows = partition(labels.reshape(1, -1, 1), grid, window)[..., 0]   # (nW, N)
  return np.asarray(windows[:, :, None] == windows[:, None, :])
