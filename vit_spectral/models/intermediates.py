"""Reads what the blocks `sow` into the "intermediates" collection, per layer.

Run a model with `mutable=["intermediates"]`; then
`per_layer(variables["intermediates"])` returns one dict per block, e.g.
`{"attention/attention_weights": (B, H, T, T), "block_output": (B, T, D)}`, in
layer order, for scanned and looped encoders alike (several scanned segments,
`models.segments`, are concatenated in layer order).

Hierarchical backbones (Swin, CSwin) hold one encoder per stage, each in a
child module with an "encoder" key; `stage_names` finds them in stage order
and `per_stage` reads each. CaiT's self-attention stage is the top-level
"encoder" (read as a ViT's); its class stage's maps (B, H, 1, T), sown under
"class_stage", are not read per layer.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import jax

from vit_spectral.models.layouts import layer_trees

__all__ = ["flatten_sown", "natural_key", "per_layer", "per_stage", "stage_names"]

_NUMBER = re.compile(r"(\d+)")


def flatten_sown(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
  """Nested dict -> {"a/b/c": leaf}; sown values are 1-tuples, unwrapped here."""
  out = {}
  for key, value in tree.items():
    path = f"{prefix}/{key}" if prefix else str(key)
    if isinstance(value, Mapping):
      out.update(flatten_sown(value, path))
    elif isinstance(value, tuple):
      out[path] = value[0] if len(value) == 1 else value
    else:
      out[path] = value
  return out


def per_layer(intermediates: Mapping[str, Any]) -> list[dict[str, jax.Array]]:
  """Per-block sown values, in layer order.

  Args:
    intermediates: the "intermediates" collection of a ViT (the whole model's,
      i.e. with the top-level "encoder" key), in any encoder layout.

  Returns:
    A list with one dict per block; keys are paths inside the block, e.g.
    "attention/attention_weights" (B, H, T, T), "block_output" (B, T, D).
  """
  if "encoder" not in intermediates:
    raise KeyError("no 'encoder' in the intermediates: run the model with "
                   "mutable=['intermediates']")
  return [flatten_sown(layer) for layer in layer_trees(intermediates)]


def natural_key(key: str) -> list:
  """Sort key that orders the numbers inside names numerically (block_2 before
  block_10)."""
  return [int(part) if part.isdigit() else part for part in _NUMBER.split(str(key))]


def stage_names(tree: Mapping[str, Any]) -> list[str | None]:
  """The stages of a model's tree (params or intermediates), in stage order:
  [None] when the tree itself holds the "encoder" (the ViT), else the names of
  its children that hold one ("stage_0", "stage_1", ..., numbers in numeric
  order).

  Raises:
    KeyError: no encoder anywhere (not a library model's tree, or the
      intermediates were not collected).
  """
  if "encoder" in tree:
    return [None]
  names = sorted((k for k, v in tree.items() if isinstance(v, Mapping) and "encoder" in v),
                 key=natural_key)
  if not names:
    raise KeyError(f"no 'encoder' in the tree nor in any of its children {sorted(tree)}: "
                   "run the model with mutable=['intermediates'] and pass that collection")
  return names


def per_stage(intermediates: Mapping[str, Any]) -> list[tuple[str | None, list[dict]]]:
  """[(stage name, `per_layer` of that stage's encoder)] in stage order (one
  entry, name None, for the ViT)."""
  return [(name, per_layer(intermediates if name is None else intermediates[name]))
          for name in stage_names(intermediates)]
