"""Convolution over the patch grid of a token sequence (LipsFormer §4.2.1, Table 3).

LipsFormer's convolution block is a depth-wise k×k convolution and a point-wise
1×1 convolution, each applied to the tokens laid back on their patch grid. The
prefix tokens (CLS) have no grid position: they are passed around the
convolution, i.e. the branch outputs zero for them, so a residual branch built
on it leaves them unchanged.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.layers.initializers import get_initializer


class GridConv(nn.Module):
  """A same-padded convolution of the grid tokens; zero output on prefix tokens.

  Attributes:
    grid_size: (rows, cols) of the patch grid.
    num_prefix_tokens: tokens before the grid tokens (1 with a CLS token).
    kernel_size: side of the square kernel (7 depth-wise, 1 point-wise in the paper).
    depthwise: one filter per channel (feature_group_count = width) if True,
      a full channel mix otherwise.
    kernel_init: initializer name (see `layers.initializers`).
  """
  grid_size: tuple[int, int]
  num_prefix_tokens: int = 0
  kernel_size: int = 7
  depthwise: bool = True
  kernel_init: str = "xavier_uniform"
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    """x: (B, T, D), T = num_prefix_tokens + rows·cols -> (B, T, D)."""
    batch, tokens, width = x.shape
    rows, cols = self.grid_size
    if tokens != self.num_prefix_tokens + rows * cols:
      raise ValueError(f"GridConv got {tokens} tokens; grid {rows}x{cols} plus "
                       f"{self.num_prefix_tokens} prefix tokens needs "
                       f"{self.num_prefix_tokens + rows * cols}")
    prefix, grid = x[:, :self.num_prefix_tokens], x[:, self.num_prefix_tokens:]
    grid = grid.reshape(batch, rows, cols, width)
    grid = nn.Conv(width, (self.kernel_size, self.kernel_size), padding="SAME",
                   feature_group_count=width if self.depthwise else 1,
                   kernel_init=get_initializer(self.kernel_init), dtype=self.dtype,
                   param_dtype=self.param_dtype, name="conv")(grid)
    grid = grid.reshape(batch, rows * cols, width)
    return jnp.concatenate([jnp.zeros_like(prefix, dtype=grid.dtype), grid], axis=1)
