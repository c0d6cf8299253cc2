"""Position embeddings added to the patch tokens."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

# The ViT's position embeddings (ViT.posemb).
POSEMB_CHOICES = ("learned", "sincos2d", "none")


def sincos_2d(grid_size: tuple[int, int], width: int, temperature: float = 10_000.0):
  """Fixed 2-D sin-cos embedding (MoCo v3 / big_vision layout).

  Returns (1, rows * cols, width) float32: a quarter of the channels each for
  sin(y), cos(y), sin(x), cos(x) at geometric frequencies.
  """
  if width % 4:
    raise ValueError(f"model.hidden_size={width} must be divisible by 4 for "
                     "model.posemb='sincos2d'")
  rows, cols = grid_size
  y, x = np.mgrid[:rows, :cols]
  omega = 1.0 / temperature ** (np.arange(width // 4) / (width // 4 - 1 or 1))
  y = np.einsum("m,d->md", y.reshape(-1), omega)
  x = np.einsum("m,d->md", x.reshape(-1), omega)
  emb = np.concatenate([np.sin(y), np.cos(y), np.sin(x), np.cos(x)], axis=1)
  return jnp.asarray(emb[None], jnp.float32)


# How a learned position embedding is resampled to a new grid, as the anchors do:
#   "bicubic":      timm (`resample_abs_pos_embed`): bicubic, antialiased when
#                   shrinking (PyTorch's antialiased kernel, Keys a = -0.5,
#                   half-pixel centres) = `jax.image.resize(..., "bicubic")`;
#   "scipy_linear": big_vision and the original ViT code (`resample_posemb`):
#                   `scipy.ndimage.zoom(grid, zoom, order=1)`, linear
#                   interpolation that keeps the corner tokens in place.
RESAMPLE_METHODS = ("bicubic", "scipy_linear")


def grid_of(num_tokens: int, field: str = "pos_embedding") -> tuple[int, int]:
  """The square (s, s) grid of `num_tokens` = s² patch tokens."""
  side = int(round(np.sqrt(num_tokens)))
  if side * side != num_tokens:
    raise ValueError(f"{field} has {num_tokens} patch tokens, not a square grid; "
                     "pass the grid explicitly")
  return side, side


def resample(posemb, num_prefix_tokens: int, new_grid: tuple[int, int],
             old_grid: tuple[int, int] | None = None, method: str = "bicubic"):
  """A learned position embedding resampled to `new_grid`, prefix rows kept.

  Args:
    posemb: (1, P + h·w, D), P = num_prefix_tokens (the CLS row, kept as is),
      then the (h, w) grid in row-major order.
    num_prefix_tokens: P.
    new_grid: (h', w').
    old_grid: (h, w); None = the square grid of the h·w patch rows.
    method: one of RESAMPLE_METHODS (see there).

  Returns:
    (1, P + h'·w', D) NumPy float32 (the same array when the grid is unchanged).
  """
  if method not in RESAMPLE_METHODS:
    raise ValueError(f"posemb resampling method={method!r}; choose one of "
                     f"{list(RESAMPLE_METHODS)}")
  posemb = np.asarray(posemb)
  prefix, grid = posemb[:, :num_prefix_tokens], posemb[0, num_prefix_tokens:]
  rows, cols = old_grid or grid_of(grid.shape[0])
  if rows * cols != grid.shape[0]:
    raise ValueError(f"pos_embedding has {grid.shape[0]} patch tokens, not the "
                     f"{rows}x{cols} grid given")
  if (rows, cols) == tuple(new_grid):
    return posemb
  grid = grid.reshape(rows, cols, -1).astype(np.float32)
  new_rows, new_cols = new_grid
  if method == "bicubic":
    out = np.asarray(jax.image.resize(grid, (new_rows, new_cols, grid.shape[-1]),
                                      method="bicubic", antialias=True))
  else:
    from scipy import ndimage  # pylint: disable=import-outside-toplevel
    out = ndimage.zoom(grid, (new_rows / rows, new_cols / cols, 1), order=1)
  out = out.reshape(1, new_rows * new_cols, -1).astype(posemb.dtype)
  return np.concatenate([prefix, out], axis=1)
