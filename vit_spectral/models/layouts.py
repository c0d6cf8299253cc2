"""Converters between the scanned and looped encoder parameter layouts.

Scan mode stores block parameters once, stacked along a leading depth axis, under
`encoder/encoderblock`; loop mode stores one subtree per block under
`encoder/encoderblock_{i}`. An encoder whose layers differ (`models.segments`)
stores one stack per segment, `encoder/encoderblock_segment{k}`, in scan mode.
The converters work on any variable collection (params, EMA params, optimizer
moments with the same structure).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp

from vit_spectral.models.segments import BLOCK_NAME, scan_name, scanned_stacks


def _encoder_of(tree: Mapping[str, Any]) -> dict[str, Any]:
  if "encoder" not in tree:
    raise KeyError(f"no 'encoder' subtree in the variables (keys: {list(tree)})")
  return dict(tree["encoder"])


def scan_to_loop(tree: Mapping[str, Any]) -> dict[str, Any]:
  """{'encoder': {'encoderblock'[_segment{k}]: stacked}} -> {'encoder': {'encoderblock_i': ...}}."""
  encoder = _encoder_of(tree)
  names = scanned_stacks(encoder)
  if not names:
    raise KeyError(f"no scanned '{BLOCK_NAME}' stack in the encoder (keys: {list(encoder)})")
  offset = 0
  for name in names:
    stacked = encoder.pop(name)
    length = jax.tree_util.tree_leaves(stacked)[0].shape[0]
    for i in range(length):
      encoder[f"{BLOCK_NAME}_{offset + i}"] = jax.tree_util.tree_map(
          lambda a, i=i: a[i], stacked)
    offset += length
  return dict(tree, encoder=encoder)


def loop_to_scan(tree: Mapping[str, Any],
                 segment_lengths: Sequence[int] | None = None) -> dict[str, Any]:
  """{'encoder': {'encoderblock_i': ...}} -> {'encoder': {'encoderblock': stacked}}.

  Args:
    tree: variables with a looped encoder.
    segment_lengths: the layers of each segment, in order (e.g.
      `[s.length for s in models.segments.segments(...)]`); None = one segment
      of all the layers.

  Returns:
    The same variables with one stack per segment.
  """
  encoder = _encoder_of(tree)
  depth = sum(1 for k in encoder if k.startswith(f"{BLOCK_NAME}_"))
  if not depth:
    raise KeyError(f"no '{BLOCK_NAME}_<i>' subtrees in the encoder (keys: {list(encoder)})")
  lengths = list(segment_lengths or [depth])
  if sum(lengths) != depth or min(lengths) < 1:
    raise ValueError(f"segment_lengths={lengths} must be positive and sum to the "
                     f"{depth} looped blocks")
  blocks = [encoder.pop(f"{BLOCK_NAME}_{i}") for i in range(depth)]
  start = 0
  for k, length in enumerate(lengths):
    encoder[scan_name(k, len(lengths))] = jax.tree_util.tree_map(
        lambda *a: jnp.stack(a), *blocks[start:start + length])
    start += length
  return dict(tree, encoder=encoder)
