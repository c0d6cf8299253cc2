"""Windows on a token grid (`layers.windows`): partition / merge / roll are
inverses and match direct index loops; the relative position index is Swin's."""

import jax.numpy as jnp
import numpy as np
import pytest

from vit_spectral.layers import windows

GRID, WINDOW = (4, 6), (2, 3)


def tokens(batch=2, width=5):
  return jnp.asarray(np.random.default_rng(0).standard_normal(
      (batch, GRID[0] * GRID[1], width)), jnp.float32)


def test_partition_puts_each_window_together_row_major():
  x = tokens()
  parts = np.asarray(windows.partition(x, GRID, WINDOW))
  n_cols = GRID[1] // WINDOW[1]
  assert parts.shape == (2 * 4, 6, 5)
  for b in range(2):
    for w in range(4):
      for i in range(6):
        r = (w // n_cols) * WINDOW[0] + i // WINDOW[1]
        c = (w % n_cols) * WINDOW[1] + i % WINDOW[1]
        np.testing.assert_array_equal(parts[b * 4 + w, i], np.asarray(x)[b, r * GRID[1] + c])


def test_merge_inverts_partition_and_roll_inverts_itself():
  x = tokens()
  np.testing.assert_array_equal(windows.merge(windows.partition(x, GRID, WINDOW), GRID, WINDOW), x)
  rolled = windows.roll(x, GRID, (-1, -2))
  assert not np.array_equal(rolled, x)
  np.testing.assert_array_equal(windows.roll(rolled, GRID, (1, 2)), x)
  # token (i, j) moves to (i - 1, j - 2) mod the grid
  grid = np.asarray(x).reshape(2, *GRID, 5)
  np.testing.assert_array_equal(np.asarray(rolled).reshape(2, *GRID, 5)[:, 0, 0], grid[:, 1, 2])


@pytest.mark.parametrize("window", [(2, 2), (3, 2), (1, 4)])
def test_relative_position_index_is_swins_offset_table(window):
  wh, ww = window
  index = windows.relative_position_index(window)
  coords = [(r, c) for r in range(wh) for c in range(ww)]
  for i, (ri, ci) in enumerate(coords):
    for j, (rj, cj) in enumerate(coords):
      assert index[i, j] == (ri - rj + wh - 1) * (2 * ww - 1) + (ci - cj + ww - 1)
  # every offset has its own row of the table, and every row is used
  assert sorted(set(index.ravel())) == list(range((2 * wh - 1) * (2 * ww - 1)))


def test_shifted_window_mask_without_shift_allows_all():
  assert windows.shifted_window_mask((4, 4), (2, 2), (0, 0)).all()
