"""Position embeddings added to the patch tokens."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

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
