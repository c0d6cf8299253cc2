"""Reads what the blocks `sow` into the "intermediates" collection, per layer.

Run a model with `mutable=["intermediates"]`; then
`per_layer(variables["intermediates"])` returns one dict per block, e.g.
`{"attention/attention_weights": (B, H, T, T), "block_output": (B, T, D)}`, in
layer order, for scanned and looped encoders alike (several scanned segments,
`models.segments`, are concatenated in layer order).
"""

from __future__ import annotations

from typing import Any, Mapping

import jax

from vit_spectral.models.layouts import layer_trees

__all__ = ["per_layer"]


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
  """Nested dict -> {"a/b/c": leaf}; sown values are 1-tuples, unwrapped here."""
  out = {}
  for key, value in tree.items():
    path = f"{prefix}/{key}" if prefix else key
    if isinstance(value, Mapping):
      out.update(_flatten(value, path))
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
  return [_flatten(layer) for layer in layer_trees(intermediates)]
