"""The encoder's parameter layouts, and one walker over its per-layer trees.

The encoder stores its blocks in one of three layouts:

* scan: one subtree `encoder/encoderblock` whose leaves carry a leading depth
  axis (L, ...);
* segmented scan (layers that differ, `models.segments`): one stack per
  segment, `encoder/encoderblock_segment{k}`, leaves (L_k, ...), segments in
  layer order;
* loop: one subtree per block, `encoder/encoderblock_{i}`, leaves (...).

A *layout* is written `tuple[int, ...] | None`: the number of layers of each
scanned stack in order ((L,) for one stack), or None for the loop layout.

Everything that reads the encoder layer by layer goes through `layer_trees`,
and everything that writes it back through `with_layer_trees`. Both work on any
tree with an "encoder" key shaped like the parameters: the params, EMA params,
optimizer moments, the sown "intermediates" collection, or abstract trees of
`jax.ShapeDtypeStruct` (from `jax.eval_shape`). Keys of the encoder other than
its blocks (e.g. "encoder_norm") and keys outside the encoder pass through.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from vit_spectral.models.segments import BLOCK_NAME, layer_specs, scan_name, scanned_stacks, segments
from vit_spectral.models.specs import BlockSpec
from vit_spectral.models.vit import Encoder

__all__ = ["Layout", "layer_fields", "layer_specs_of", "layer_trees", "loop_to_scan",
           "model_layout", "scan_to_loop", "to_layout", "tree_layout", "with_layer_trees"]

# Layers per scanned stack, in layer order; None = the loop layout.
Layout = tuple[int, ...] | None

_LOOP_RE = re.compile(rf"{BLOCK_NAME}_(\d+)")
_SCAN_RE = re.compile(rf"{BLOCK_NAME}(_segment\d+)?")


def _encoder_of(tree: Mapping[str, Any]) -> Mapping[str, Any]:
  if not isinstance(tree, Mapping) or "encoder" not in tree:
    keys = list(tree) if isinstance(tree, Mapping) else type(tree).__name__
    if isinstance(tree, Mapping) and any(str(k).startswith("stage_") for k in tree):
      raise KeyError(f"no 'encoder' subtree in the tree (keys: {keys}): a backbone of "
                     "stages (e.g. Swin) has one encoder per stage; pass tree['stage_<k>']")
    raise KeyError(f"no 'encoder' subtree in the tree (keys: {keys}); pass a whole "
                   "collection of the ViT, e.g. variables['params']")
  return tree["encoder"]


def _is_block(key: str) -> bool:
  return bool(_SCAN_RE.fullmatch(key) or _LOOP_RE.fullmatch(key))


def holds_blocks(tree: Any) -> bool:
  """Whether `tree` has an "encoder" whose keys name library blocks
  ("encoderblock_<i>", "encoderblock", "encoderblock_segment<k>"): what
  `layer_trees` reads."""
  encoder = tree.get("encoder") if isinstance(tree, Mapping) else None
  return isinstance(encoder, Mapping) and any(_is_block(str(k)) for k in encoder)


def _loop_indices(encoder: Mapping[str, Any]) -> list[int]:
  return sorted(int(m.group(1)) for k in encoder if (m := _LOOP_RE.fullmatch(k)))


def _stack_length(stack: Any, name: str) -> int:
  lengths = {np.shape(leaf)[0] if np.ndim(leaf) else None
             for leaf in jax.tree_util.tree_leaves(stack)}
  if len(lengths) != 1 or None in lengths:
    raise ValueError(f"encoder/{name} is not a scanned stack: its leaves' leading "
                     f"axes are {sorted(lengths, key=str)}")
  return lengths.pop()


def tree_layout(tree: Mapping[str, Any]) -> Layout:
  """The layout of `tree`'s encoder: layers per scanned stack, or None (loop).

  Raises:
    KeyError: no "encoder" key, or an encoder without blocks.
    ValueError: scanned and looped blocks mixed, missing loop indices, or a
      stack whose leaves disagree on the depth axis.
  """
  encoder = _encoder_of(tree)
  stacks, indices = scanned_stacks(encoder), _loop_indices(encoder)
  if stacks and indices:
    raise ValueError(f"the encoder mixes scanned stacks {stacks} and looped blocks "
                     f"{[f'{BLOCK_NAME}_{i}' for i in indices]}")
  if indices:
    if indices != list(range(len(indices))):
      raise ValueError(f"the looped blocks are numbered {indices}, not 0..{len(indices) - 1}")
    return None
  if not stacks:
    raise KeyError(f"no '{BLOCK_NAME}' blocks in the encoder (keys: {list(encoder)})")
  return tuple(_stack_length(encoder[name], name) for name in stacks)


def _take(leaf: Any, i: int) -> Any:
  if isinstance(leaf, jax.ShapeDtypeStruct):
    return jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype)
  return leaf[i]


def _stack(*leaves: Any) -> Any:
  first = leaves[0]
  if isinstance(first, jax.ShapeDtypeStruct):
    return jax.ShapeDtypeStruct((len(leaves), *first.shape), first.dtype)
  if all(isinstance(leaf, np.ndarray) for leaf in leaves):
    return np.stack(leaves)                 # host arrays stay on the host
  return jnp.stack(leaves)


def layer_trees(tree: Mapping[str, Any]) -> list[Any]:
  """Each layer's subtree of `tree`'s encoder, in layer order, in any layout.

  Args:
    tree: a collection with an "encoder" key (params, EMA params, optimizer
      moments, intermediates, ...), in the scan, segmented-scan or loop layout.

  Returns:
    A list of length depth; entry i is layer i's subtree in the loop layout
    (the `encoderblock_{i}` tree: a scanned leaf (L_k, ...) gives (...)).
    Looped subtrees are returned as stored, not copied.
  """
  encoder = _encoder_of(tree)
  layout = tree_layout(tree)
  if layout is None:
    return [encoder[f"{BLOCK_NAME}_{i}"] for i in range(len(_loop_indices(encoder)))]
  layers = []
  for name, length in zip(scanned_stacks(encoder), layout):
    layers += [jax.tree_util.tree_map(lambda a, i=i: _take(a, i), encoder[name])
               for i in range(length)]
  return layers


def with_layer_trees(tree: Mapping[str, Any], layers: Sequence[Any],
                     layout: Layout) -> dict[str, Any]:
  """`tree` with its encoder blocks replaced by `layers`, stored in `layout`.

  The inverse of `layer_trees`: `with_layer_trees(t, layer_trees(t),
  tree_layout(t))` equals `t`.

  Args:
    tree: a collection with an "encoder" key (its blocks, in any layout, are
      dropped; its other keys are kept).
    layers: one loop-layout subtree per layer, in layer order.
    layout: layers per scanned stack (e.g. `model_layout(model)`), or None
      for the loop layout.

  Returns:
    A new dict; leaves are shared with `layers` (loop) or stacked (scan).
  """
  encoder = {k: v for k, v in _encoder_of(tree).items() if not _is_block(k)}
  if layout is None:
    encoder.update({f"{BLOCK_NAME}_{i}": layer for i, layer in enumerate(layers)})
    return dict(tree, encoder=encoder)
  lengths = [int(n) for n in layout]
  if not lengths or min(lengths) < 1 or sum(lengths) != len(layers):
    raise ValueError(f"segment_lengths={lengths} must be positive and sum to the "
                     f"{len(layers)} layers")
  start = 0
  for k, length in enumerate(lengths):
    encoder[scan_name(k, len(lengths))] = jax.tree_util.tree_map(
        _stack, *layers[start:start + length])
    start += length
  return dict(tree, encoder=encoder)


def to_layout(tree: Mapping[str, Any], layout: Layout) -> dict[str, Any]:
  """`tree` with its encoder blocks re-stored in `layout` (from any layout)."""
  return with_layer_trees(tree, layer_trees(tree), layout)


def scan_to_loop(tree: Mapping[str, Any]) -> dict[str, Any]:
  """{'encoder': {'encoderblock'[_segment{k}]: stacked}} -> {'encoder': {'encoderblock_i': ...}}."""
  return to_layout(tree, None)


def loop_to_scan(tree: Mapping[str, Any],
                 segment_lengths: Sequence[int] | None = None) -> dict[str, Any]:
  """{'encoder': {'encoderblock_i': ...}} -> {'encoder': {'encoderblock': stacked}}.

  Args:
    tree: variables with a looped (or scanned) encoder.
    segment_lengths: the layers of each segment, in order (e.g.
      `model_layout(model)`); None = one stack of all the layers.

  Returns:
    The same variables with one stack per segment.
  """
  layers = layer_trees(tree)
  return with_layer_trees(tree, layers, tuple(segment_lengths or (len(layers),)))


def layer_specs_of(model) -> list[BlockSpec]:
  """Each layer's `BlockSpec`, in layer order (length depth), of an isotropic
  model (`ViT`, `CaiT`: its encoder block after its `layer_overrides`) or an
  `Encoder`."""
  if isinstance(model, Encoder):
    return layer_specs(model.depth, model.block, model.layer_overrides)
  if not hasattr(model, "encoder_block"):
    raise ValueError(f"{type(model).__name__} has stages of different token counts and "
                     "widths, not one encoder of model.depth blocks; read each stage's "
                     "encoder (models.intermediates.per_stage)")
  return layer_specs(model.depth, model.encoder_block(), model.layer_overrides)


def layer_fields(model) -> list[dict[str, Any]]:
  """Each layer's `BlockSpec` fields as a dict (`BlockSpec.as_dict`), in
  layer order (length depth), of a `ViT`, a `CaiT` or an `Encoder`."""
  return [spec.as_dict() for spec in layer_specs_of(model)]


def model_layout(model) -> Layout:
  """The layout a `ViT` or `CaiT` (or `Encoder`) stores its blocks in: None
  in loop mode, else the length of each segment (`models.segments`)."""
  if isinstance(model, Encoder):
    return None if model.spec.mode == "loop" else tuple(
        s.length for s in model.layer_segments())
  if model.encoder.mode == "loop":
    return None
  return tuple(s.length for s in segments(layer_specs_of(model)))
