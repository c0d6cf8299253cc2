"""Convolution over the patch grid of a token sequence (LipsFormer §4.2.1, Table 3).

LipsFormer's convolution block is a depth-wise k×k convolution followed by a
point-wise 1×1 convolution, both applied to the tokens laid back on their
patch grid. The prefix tokens (CLS) have no grid position: they are passed
around the convolution, i.e. the branch outputs zero for them, so a residual
branch built on it leaves them unchanged.

With `kernel_init="spectral"` the kernels are normalised by the convolution's
exact operator norm on the grid (`spectral_init.grid_conv_spectral`), so each
convolution is 1-Lipschitz at init as a map of the grid tokens.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from vit_spectral.layers.spectral_init import conv_initializer


class DepthwiseConv(nn.Module):
  """Depth-wise same-padded k×k convolution written as k² shifted multiply-adds.

  Same parameters and result as `nn.Conv(width, (k, k), feature_group_count=width,
  padding="SAME")` ("kernel" (k, k, 1, width), "bias" (width,)), but XLA:CPU
  lowers the gradient of a grouped convolution to a slow loop (a LipsFormer
  step on digits was ~10x slower); on a small patch grid the k² shifted
  products are cheap on every backend. The kernel initializer sees the grid
  (the input's rows × cols), so spectral init normalises by the operator norm.
  The k² products are taken and summed in float32 (a convolution accumulates
  there too), then cast to `dtype`.
  """
  kernel_size: int
  kernel_init: str = "xavier_uniform"
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, grid):
    """grid: (B, rows, cols, D) -> (B, rows, cols, D)."""
    k, width = self.kernel_size, grid.shape[-1]
    rows, cols = grid.shape[1:3]
    init = conv_initializer(self.kernel_init, (rows, cols), depthwise=True)
    acc = jnp.promote_types(self.dtype, jnp.float32)   # the accumulator's dtype
    kernel = self.param("kernel", init, (k, k, 1, width), self.param_dtype).astype(acc)
    bias = self.param("bias", nn.initializers.zeros, (width,), self.param_dtype)
    lo = (k - 1) // 2                                # SAME padding: lo before, k-1-lo after
    padded = jnp.pad(grid.astype(acc), ((0, 0), (lo, k - 1 - lo), (lo, k - 1 - lo), (0, 0)))
    out = sum(padded[:, i:i + rows, j:j + cols] * kernel[i, j, 0]
              for i in range(k) for j in range(k))
    return (out + bias.astype(acc)).astype(self.dtype)


class GridConv(nn.Module):
  """A same-padded convolution of the grid tokens; zero output on prefix tokens.

  Attributes:
    grid_size: (rows, cols) of the patch grid.
    num_prefix_tokens: tokens before the grid tokens (1 with a CLS token).
    kernel_size: side of the square kernel (7 depth-wise, 1 point-wise in the paper).
    depthwise: one filter per channel (feature_group_count = width) if True,
      a full channel mix otherwise.
    kernel_init: initializer name (see `layers.initializers`); "spectral"
      normalises by the operator norm on this grid (`spectral_init`).
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
    if self.depthwise:
      grid = DepthwiseConv(self.kernel_size, kernel_init=self.kernel_init, dtype=self.dtype,
                           param_dtype=self.param_dtype, name="conv")(grid)
    else:
      grid = nn.Conv(width, (self.kernel_size, self.kernel_size), padding="SAME",
                     kernel_init=conv_initializer(self.kernel_init, self.grid_size,
                                                  depthwise=False), dtype=self.dtype,
                     param_dtype=self.param_dtype, name="conv")(grid)
    grid = grid.reshape(batch, rows * cols, width)
    return jnp.concatenate([jnp.zeros_like(prefix, dtype=grid.dtype), grid], axis=1)
