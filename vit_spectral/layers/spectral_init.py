"""Spectral initialization (LipsFormer, paper 001, §4.1.4, eq. 5).

    W_si = W / σ_max(W),   W ~ Xavier-normal

so every affine map starts 1-Lipschitz in the 2-norm. The Xavier scale cancels
in the ratio; it only fixes the random direction. σ_max must be the norm of the
map the layer computes, so it is taken two ways:

* `spectral` (registered as the initializer "spectral", `model.kernel_init =
  "spectral"`): the exact largest singular value of the kernel read as the
  matrix (fan_in, out). That is the operator norm of a Dense layer (flax's
  DenseGeneral hands the initializer the flattened (in, out) shape) and of a
  convolution whose windows do not overlap (stride = kernel size: every patch
  goes through the same matrix), i.e. the patch embedding.
* `grid_conv_spectral(grid_size, depthwise)`: a convolution on the token grid
  with zero ("SAME") padding, whose overlapping windows make its operator norm
  differ from its kernel matrix's. A depth-wise conv acts on each channel c by
  the (R·C, R·C) doubly-Toeplitz matrix T_c of its k×k kernel, so σ_max =
  max_c σ_max(T_c): an SVD of every T_c (exact) on grids of up to
  EXACT_MAX_TOKENS tokens, else POWER_ITERATIONS steps of power iteration on
  TᵀT (a lower bound). A 1×1 conv's norm is the kernel matrix's σ_max; a full
  k×k conv with k > 1 is refused (no Block uses one). `conv_initializer`
  picks this initializer for `GridConv` when the name is "spectral".
  Measurements: docs/design.md#layersspectral_initpy

Which layers get it with `model.kernel_init = "spectral"` (the paper: "all
convolutions and feed-forward connections"): the attention's query, key,
value and output projections, the MLP's fc1 and fc2, the convolution branch's
depth-wise and point-wise convolutions (grid operator norm) and the patch
embedding (both stems). Not the zero-initialised head (0-Lipschitz at init),
and not the eigen-reparameterised value/output of paper 003 (its own init).
Biases start at zero or near it and do not change a Lipschitz constant.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from vit_spectral.layers.initializers import Initializer, get_initializer, register_initializer


def kernel_matrix(kernel: jax.Array) -> jax.Array:
  """(..., out) kernel -> (prod(...), out) matrix: every axis but the last is fan-in."""
  if kernel.ndim < 2:
    raise ValueError(f"spectral init needs a kernel of rank >= 2, got shape {kernel.shape}")
  return kernel.reshape(-1, kernel.shape[-1])


def spectral_norm(kernel: jax.Array) -> jax.Array:
  """Exact largest singular value of `kernel_matrix(kernel)`, in float32."""
  matrix = kernel_matrix(kernel).astype(jnp.float32)
  return jnp.linalg.svd(matrix, compute_uv=False)[0]


def spectral(in_axis: int = -2, out_axis: int = -1):
  """Initializer: Xavier-normal, then divided by its exact σ_max (eq. 5)."""
  xavier = jax.nn.initializers.xavier_normal(in_axis=in_axis, out_axis=out_axis)

  def init(key, shape, dtype=jnp.float32):
    kernel = xavier(key, shape, jnp.float32)
    return (kernel / spectral_norm(kernel)).astype(dtype)

  return init


def _band(size: int, k: int) -> tuple[jax.Array, jax.Array]:
  """Kernel index i = r' − r + lo of output r and input r' of a SAME k-tap
  convolution over `size` positions, (size, size), and where it is in [0, k)."""
  lo = (k - 1) // 2
  index = jnp.arange(size)[None, :] - jnp.arange(size)[:, None] + lo
  return jnp.clip(index, 0, k - 1), (index >= 0) & (index < k)


def depthwise_grid_matrix(kernel: jax.Array, grid_size: tuple[int, int]) -> jax.Array:
  """The matrix T of one channel's SAME k×k convolution on a rows×cols grid.

  out[r, c] = Σ_{i,j} K[i, j]·x[r + i − lo, c + j − lo] (zero outside the
  grid, lo = (k − 1) // 2), the convention of `grid_conv.DepthwiseConv`.

  Args:
    kernel: K, (k, k).
    grid_size: (rows, cols).

  Returns:
    T, (rows·cols, rows·cols): out.ravel() = T @ x.ravel().
  """
  rows, cols = grid_size
  k = kernel.shape[0]
  row_index, row_ok = _band(rows, k)                     # (R, R')
  col_index, col_ok = _band(cols, k)                     # (C, C')
  t = kernel[row_index[:, None, :, None], col_index[None, :, None, :]]   # (R, C, R', C')
  t = jnp.where(row_ok[:, None, :, None] & col_ok[None, :, None, :], t, 0.0)
  return t.reshape(rows * cols, rows * cols)


# Grids up to this many tokens get the exact SVD; larger ones power iteration.
EXACT_MAX_TOKENS = 256
POWER_ITERATIONS = 500


def depthwise_power_norm(kernel: jax.Array, grid_size: tuple[int, int],
                         iterations: int = POWER_ITERATIONS) -> jax.Array:
  """max_c σ_max(T_c) by power iteration on T_cᵀT_c, every channel at once.

  The map is the depth-wise SAME convolution itself (`lax.conv_general_dilated`,
  as `grid_conv` computes it) and Tᵀ its exact linear transpose, so no
  (rows·cols)² matrix is formed. Returns a float32 lower bound of the norm.
  """
  width = kernel.shape[-1]
  kernel = kernel.astype(jnp.float32)

  def conv(x):
    return jax.lax.conv_general_dilated(x, kernel, (1, 1), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        feature_group_count=width)

  x = jax.random.normal(jax.random.key(0), (1, *grid_size, width), jnp.float32)
  transpose = jax.linear_transpose(conv, x)
  unit = lambda v: v / jnp.sqrt(jnp.sum(v * v, axis=(0, 1, 2), keepdims=True))  # noqa: E731
  x = jax.lax.fori_loop(0, iterations, lambda _, v: unit(transpose(conv(v))[0]), unit(x))
  return jnp.sqrt(jnp.max(jnp.sum(conv(x) ** 2, axis=(0, 1, 2))))


def depthwise_operator_norm(kernel: jax.Array, grid_size: tuple[int, int]) -> jax.Array:
  """2-norm of a depth-wise SAME convolution on the grid: max_c σ_max(T_c).

  Args:
    kernel: (k, k, 1, D), one k×k filter per channel (flax's layout).
    grid_size: (rows, cols).

  Returns:
    The operator norm, a float32 scalar. Up to EXACT_MAX_TOKENS tokens: one
    SVD per channel (exact), run one channel at a time so memory stays at one
    (rows·cols)² matrix (times any vmap, e.g. the scanned layers'
    initialisation); above: `depthwise_power_norm`.
  """
  if kernel.ndim != 4 or kernel.shape[0] != kernel.shape[1] or kernel.shape[2] != 1:
    raise ValueError(f"a depth-wise kernel is (k, k, 1, D), got shape {kernel.shape}")
  if grid_size[0] * grid_size[1] > EXACT_MAX_TOKENS:
    return depthwise_power_norm(kernel, tuple(grid_size))
  filters = jnp.moveaxis(kernel[:, :, 0].astype(jnp.float32), -1, 0)    # (D, k, k)
  sigma = jax.lax.map(
      lambda f: jnp.linalg.svd(depthwise_grid_matrix(f, grid_size), compute_uv=False)[0],
      filters)
  return jnp.max(sigma)


def grid_conv_operator_norm(kernel: jax.Array, grid_size: tuple[int, int],
                            depthwise: bool) -> jax.Array:
  """2-norm of a SAME convolution on the token grid (see the module docstring).

  Args:
    kernel: (k, k, in/groups, out).
    grid_size: (rows, cols).
    depthwise: one filter per channel (feature_group_count = width).
  """
  if depthwise:
    return depthwise_operator_norm(kernel, grid_size)
  if kernel.shape[:2] == (1, 1):        # the same matrix on every token
    return spectral_norm(kernel)
  raise ValueError(
      f"model.kernel_init='spectral' supports depth-wise and 1x1 grid convolutions; "
      f"a full {kernel.shape[0]}x{kernel.shape[1]} convolution has no exact grid norm here")


def grid_conv_spectral(grid_size: tuple[int, int], depthwise: bool) -> Initializer:
  """Initializer of a grid convolution's kernel: Xavier-normal divided by its
  exact operator norm on the `grid_size` grid, so the convolution the layer
  computes (not its kernel matrix) is 1-Lipschitz at init (eq. 5)."""
  xavier = jax.nn.initializers.xavier_normal()

  def init(key, shape, dtype=jnp.float32):
    kernel = xavier(key, shape, jnp.float32)
    return (kernel / grid_conv_operator_norm(kernel, grid_size, depthwise)).astype(dtype)

  return init


def conv_initializer(name: str, grid_size: tuple[int, int], depthwise: bool) -> Initializer:
  """The kernel initializer of a convolution on the token grid.

  "spectral" normalises by the grid operator norm (`grid_conv_spectral`);
  every other name is the registered initializer.
  """
  if name == "spectral":
    return grid_conv_spectral(tuple(grid_size), depthwise)
  return get_initializer(name)


register_initializer("spectral", spectral)
