"""How a block's tokens lie and which tokens each attention head group sees.

A backbone hands its `Block`s one token layout per layer; the Block runs its
attention through it and knows nothing of windows or stripes:

  TokenLayout(grid, prefix)          global attention over all T tokens (ViT,
                                     CaiT), one head group "attention"
  WindowLayout(grid, window, shift)  Swin's (shifted) windows (§3.2): a cyclic
                                     shift by −shift, attention within each
                                     window with the mask that keeps tokens
                                     the roll brought together apart, the
                                     windows merged and the shift undone
  StripeLayout(grid, width)          CSwin's cross-shaped windows (§3.2): the
                                     first half of the heads within horizontal
                                     stripes of `width` rows ("attention_rows"),
                                     the second half within vertical ones
                                     ("attention_cols"), outputs added

Within a window the attention sees the window as its own image (its
`grid_size` is the window), so AttnScale's DC and a relative position table
are the window's and the recorded maps are per window, (B·nW, H, N, N).
Windows need tokens on a grid with no prefix token, a stateless attention
variant, attention_residual="add" and no mask (`check`).

Two stripe groups stand for CSwin's one output projection of the concatenated
groups (W [x1; x2] + b = W1 x1 + W2 x2 + b): the column group's projection has
no bias, so the parameters match the reference's one by one. A stripe as wide
as the grid is one window: one group of all heads ("attention").
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Sequence

import jax.numpy as jnp

from vit_spectral.layers import windows as windows_lib

__all__ = ["ATTENTION_MODULE", "HeadGroup", "StripeLayout", "TokenLayout", "WindowLayout"]

# The attention submodule of a block whose heads form one group (global
# attention, Swin's windows, a stripe as wide as the grid); the diagnostics
# and the sharding rules find the attention parameters and sown values under it.
ATTENTION_MODULE = "attention"


class HeadGroup(NamedTuple):
  """Heads that attend over the same windows.

  Attributes:
    name: the attention submodule's name.
    num_heads: the group's heads.
    grid_size: the grid the attention sees (the window; the whole grid, or
      None, for global attention).
    num_prefix_tokens: prefix tokens the attention sees.
    window: (rows, cols) of the windows; None = global attention.
    shift: (rows, cols) cyclic shift of the windows.
    out_bias: the group's output projection has a bias.
  """
  name: str
  num_heads: int
  grid_size: tuple[int, int] | None
  num_prefix_tokens: int
  window: tuple[int, int] | None = None
  shift: tuple[int, int] = (0, 0)
  out_bias: bool = True


@dataclasses.dataclass(frozen=True)
class TokenLayout:
  """Global attention: T = num_prefix_tokens + rows·cols tokens, one group.

  Attributes:
    grid_size: (rows, cols) of the patch grid; None = tokens on no grid.
    num_prefix_tokens: tokens before the grid (1 with a CLS token).
  """
  grid_size: tuple[int, int] | None = None
  num_prefix_tokens: int = 0

  @property
  def windowed(self) -> bool:
    return False

  def head_groups(self, num_heads: int) -> tuple[HeadGroup, ...]:
    return (HeadGroup(ATTENTION_MODULE, num_heads, self.grid_size, self.num_prefix_tokens),)

  def check(self, spec, mask) -> None:
    """Raises ValueError for a block spec (`BlockSpec`) this layout cannot run."""
    del spec, mask

  def attend(self, attentions: Sequence[Callable], groups: Sequence[HeadGroup], y, state,
             mask, skip=None) -> tuple[Any, Any]:
    """y (B, T, D) through the one attention module -> (y, new state)."""
    del groups
    if skip is not None:
      return attentions[0](y, state, mask, skip=skip)
    return attentions[0](y, state, mask)


@dataclasses.dataclass(frozen=True)
class _Windowed(TokenLayout):
  """Attention within windows of the grid (no prefix tokens, no state)."""

  @property
  def windowed(self) -> bool:
    return True

  def _grid(self) -> tuple[int, int]:
    if self.grid_size is None or self.num_prefix_tokens:
      raise ValueError("windowed attention (window_size / stripe_width) needs patch tokens "
                       f"on a grid and no prefix token (got grid_size={self.grid_size}, "
                       f"num_prefix_tokens={self.num_prefix_tokens})")
    return tuple(self.grid_size)

  def check(self, spec, mask) -> None:
    if spec.stateful:
      raise ValueError(
          f"attention {spec.attention!r} carries a state from layer to layer over the "
          "whole token sequence; windowed attention (window_size / stripe_width) splits "
          "the tokens into windows whose count and size change between stages, so the "
          "state cannot be carried: use a stateless variant")
    if spec.attention_residual != "add" or mask is not None:
      raise ValueError("windowed attention (window_size / stripe_width) needs "
                       "model.block.attention_residual='add' and no attention mask")

  def attend(self, attentions, groups, y, state, mask, skip=None):
    """Each head group within its windows, outputs summed: (B, T, D) -> (B, T, D)."""
    del mask, skip
    grid, total = self._grid(), None
    for module, group in zip(attentions, groups):
      shift = group.shift
      z = windows_lib.roll(y, grid, (-shift[0], -shift[1])) if any(shift) else y
      window_mask = None
      if any(shift):
        window_mask = jnp.asarray(windows_lib.shifted_window_mask(grid, group.window, shift))
        window_mask = jnp.tile(window_mask[:, None], (y.shape[0], 1, 1, 1))
      z, _ = module(windows_lib.partition(z, grid, group.window), None, window_mask)
      z = windows_lib.merge(z, grid, group.window)
      z = windows_lib.roll(z, grid, shift) if any(shift) else z
      total = z if total is None else total + z
    return total, state


@dataclasses.dataclass(frozen=True)
class WindowLayout(_Windowed):
  """Swin's windows: `window` (rows, cols) tiles the grid; `shift` (rows,
  cols) in [0, window) is the cyclic shift ((0, 0) = regular windows)."""
  window: tuple[int, int] = (7, 7)
  shift: tuple[int, int] = (0, 0)

  def head_groups(self, num_heads: int) -> tuple[HeadGroup, ...]:
    grid, window, shift = self._grid(), tuple(self.window), tuple(self.shift)
    windows_lib.check_window(grid, window, "model.window_size")
    if any(not 0 <= s < w for s, w in zip(shift, window)):
      raise ValueError(f"window_shift={shift} must be in [0, window) on each side "
                       f"(window_size={window})")
    return (HeadGroup(ATTENTION_MODULE, num_heads, window, 0, window, shift),)


@dataclasses.dataclass(frozen=True)
class StripeLayout(_Windowed):
  """CSwin's cross-shaped windows of stripes `width` wide (module docstring)."""
  width: int = 7

  def head_groups(self, num_heads: int) -> tuple[HeadGroup, ...]:
    grid = self._grid()
    if self.width >= max(grid):
      return (HeadGroup(ATTENTION_MODULE, num_heads, grid, 0, grid),)
    windows_lib.check_window(grid, (self.width, self.width), "model.stripe_widths")
    if num_heads % 2:
      raise ValueError(f"model.stripe_widths needs an even number of heads (half per "
                       f"stripe direction), got num_heads={num_heads}")
    half = num_heads // 2
    rows, cols = (self.width, grid[1]), (grid[0], self.width)
    return (HeadGroup("attention_rows", half, rows, 0, rows),
            HeadGroup("attention_cols", half, cols, 0, cols, out_bias=False))

  def check(self, spec, mask) -> None:
    super().check(spec, mask)
    groups = self.head_groups(spec.num_heads)
    if len(groups) > 1 and spec.attention_kwargs.get("value_output", "standard") != "standard":
      raise ValueError(
          f"model.attention.value_output={spec.attention_kwargs['value_output']!r} with "
          "stripe_width: each stripe group has half the heads, so its heads*head_dim is half "
          "the width and there is no width x width W_V W_proj to eigen-reparameterize; "
          "use 'standard'")
