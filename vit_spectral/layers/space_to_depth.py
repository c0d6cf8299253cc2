"""Invertible 2-D down-sampling (space-to-depth; Jacobsen et al. 2018, i-RevNet).

Used as the input stem of the fully attentional model of Cordonnier et al. 2020
(paper 002, §4.1, App. A.4: "invertible pooling width 2"). Every s×s block of
pixels becomes one pixel with s·s·C channels, ordered (block row, block column,
channel); no information is lost.
"""

from __future__ import annotations


def space_to_depth(images, block: int):
  """(B, H, W, C) -> (B, H/s, W/s, s·s·C), s = `block`.

  Output channel (i·s + j)·C + c holds input pixel (s·y + i, s·x + j, c).
  """
  batch, height, width, channels = images.shape
  if height % block or width % block:
    raise ValueError(f"space_to_depth block {block} does not divide the image "
                     f"size {height}x{width}")
  x = images.reshape(batch, height // block, block, width // block, block, channels)
  x = x.transpose(0, 1, 3, 2, 4, 5)
  return x.reshape(batch, height // block, width // block, block * block * channels)


def depth_to_space(x, block: int):
  """The inverse of `space_to_depth`: (B, h, w, s·s·C) -> (B, h·s, w·s, C)."""
  batch, rows, cols, depth = x.shape
  if depth % (block * block):
    raise ValueError(f"depth_to_space block {block}: {depth} channels are not a "
                     f"multiple of {block * block}")
  channels = depth // (block * block)
  x = x.reshape(batch, rows, cols, block, block, channels).transpose(0, 1, 3, 2, 4, 5)
  return x.reshape(batch, rows * block, cols * block, channels)
