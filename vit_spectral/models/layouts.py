"""Converters between the scanned and looped encoder parameter layouts.

Scan mode stores block parameters once, stacked along a leading depth axis, under
`encoder/encoderblock`; loop mode stores one subtree per block under
`encoder/encoderblock_{i}`. The converters work on any variable collection
(params, EMA params, optimizer moments with the same structure).
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp

from vit_spectral.models.vit import BLOCK_NAME


def _encoder_of(tree: Mapping[str, Any]) -> dict[str, Any]:
  if "encoder" not in tree:
    raise KeyError(f"no 'encoder' subtree in the variables (keys: {list(tree)})")
  return dict(tree["encoder"])


def scan_to_loop(tree: Mapping[str, Any]) -> dict[str, Any]:
  """{'encoder': {'encoderblock': stacked}} -> {'encoder': {'encoderblock_i': ...}}."""
  encoder = _encoder_of(tree)
  stacked = encoder.pop(BLOCK_NAME)
  depth = jax.tree_util.tree_leaves(stacked)[0].shape[0]
  for i in range(depth):
    encoder[f"{BLOCK_NAME}_{i}"] = jax.tree_util.tree_map(lambda a, i=i: a[i], stacked)
  return dict(tree, encoder=encoder)


def loop_to_scan(tree: Mapping[str, Any]) -> dict[str, Any]:
  """{'encoder': {'encoderblock_i': ...}} -> {'encoder': {'encoderblock': stacked}}."""
  encoder = _encoder_of(tree)
  depth = sum(1 for k in encoder if k.startswith(f"{BLOCK_NAME}_"))
  if not depth:
    raise KeyError(f"no '{BLOCK_NAME}_<i>' subtrees in the encoder (keys: {list(encoder)})")
  blocks = [encoder.pop(f"{BLOCK_NAME}_{i}") for i in range(depth)]
  encoder[BLOCK_NAME] = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *blocks)
  return dict(tree, encoder=encoder)
