"""Pruning degenerate Gaussian attention heads (paper 002, App. A.1).

A "gaussian" head is degenerate when its precision Σ⁻¹ = S Sᵀ is close to 0 (it
attends to every pixel uniformly: largest eigenvalue < 1e-5) or close to singular
(it attends to a thin stripe: condition number λ_max / λ_min > 1e5). The paper
prunes those heads ([2, 4, 1, 2, 6, 0] of 9 in its 6 layers) and keeps the accuracy.

Heads meet only in the output projection: a layer's attention output is
Σ_h mixed_h W_out^(h) + b with W_out^(h) = out/kernel[h] (Dh, D) (eq. 4; also
with `shared_value`). Pruning zeroes the pruned heads' W_out^(h), which removes
their terms from that sum exactly, so the model carries no pruning-only state:
run the pruned model with `model.apply(prune_heads(variables, heads), images)`.

The zeroed slices are ordinary parameters: training them again lets the heads
regrow. The paper continues training the pruned model (Fig. 8) and counts the
saved parameters and FLOPs; `remove_heads` gives that model: each layer keeps
only its kept heads (per-layer `num_heads` through `layer_overrides`), with
the kept heads' parameters, and computes the same function as `prune_heads`.
Variants that carry per-head state across layers (e.g. "hopfield") cannot be
pruned this way: a pruned head's scores would still steer the next layer
(`remove_heads` refuses them; `prune_heads` reads parameters only and cannot
tell, so do not use it on them).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import jax
import numpy as np

from vit_spectral.analysis.attention_centres import gaussian_heads
from vit_spectral.attention import get_attention
from vit_spectral.models.layouts import (layer_fields, layer_trees, model_layout, tree_layout,
                                         with_layer_trees)

__all__ = ["degenerate_heads", "prune_heads", "remove_heads"]


def degenerate_heads(params: Mapping[str, Any], *, min_largest_eigenvalue: float = 1e-5,
                     max_condition_number: float = 1e5) -> list[np.ndarray]:
  """Heads whose Σ⁻¹ has largest eigenvalue < `min_largest_eigenvalue` or
  condition number > `max_condition_number`, per layer.

  Args:
    params: a ViT's params with "gaussian" (or "quadratic") attention.
    min_largest_eigenvalue: App. A.1's threshold on a head's largest eigenvalue.
    max_condition_number: App. A.1's threshold on its condition number.

  Returns:
    One sorted int array of head indices per layer.
  """
  result = []
  for layer in gaussian_heads(params):
    eig = np.linalg.eigvalsh(layer["precision"])           # (H, 2), ascending
    largest, smallest = eig[:, 1], eig[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
      condition = np.where(smallest > 0, largest / smallest, np.inf)
    result.append(np.flatnonzero((largest < min_largest_eigenvalue)
                                 | (condition > max_condition_number)))
  return result


def prune_heads(variables: Mapping[str, Any], heads: Sequence[Sequence[int]]) -> dict:
  """`variables` whose parameters make `heads` contribute nothing.

  Args:
    variables: a ViT's variables ({"params": ...}), in any encoder layout,
      whose attention has the standard output projection `out` (kernel
      (H, Dh, D)); every variant does unless `value_output` is an eigen mode.
    heads: per layer, the indices of the heads to remove (e.g. the output of
      `degenerate_heads`).

  Returns:
    A new variables dict, same structure and layout, with out/kernel[h] = 0
    for every removed head h; apply the same model to it.
  """
  params = variables["params"]
  layers = layer_trees(params)
  for layer, tree in enumerate(layers):
    if "out" not in tree["attention"]:
      raise ValueError(
          f"layer {layer}: the attention has no output projection 'out' (an eigen "
          "model.attention.value_output builds W_proj from one V_H shared by the "
          "heads); prune_heads needs value_output='standard'")
  kept = _kept(heads, [tree["attention"]["out"]["kernel"].shape[0] for tree in layers])
  pruned = []
  for tree, keep in zip(layers, kept):
    attention = tree["attention"]
    kernel = attention["out"]["kernel"]                       # (H, Dh, D)
    flags = np.zeros(kernel.shape[0], bool)
    flags[keep] = True
    kernel = kernel * flags[:, None, None].astype(kernel.dtype)
    out = dict(attention["out"], kernel=kernel)
    pruned.append(dict(tree, attention=dict(attention, out=out)))
  return dict(variables, params=with_layer_trees(params, pruned, tree_layout(params)))


def _check_stateless(model) -> None:
  for layer, fields in enumerate(layer_fields(model)):
    if get_attention(fields["attention"]).initial_state(1, 1, fields["num_heads"]) is not None:
      raise ValueError(
          f"model.attention={fields['attention']!r} (layer {layer}) carries per-head "
          "state to the next layer: a pruned head would still act through it; "
          "prune a stateless variant")


def _kept(heads: Sequence[Sequence[int]], num_heads: Sequence[int]) -> list[list[int]]:
  if len(heads) != len(num_heads):
    raise ValueError(f"heads lists {len(heads)} layers; the model has {len(num_heads)}")
  kept = []
  for layer, (removed, count) in enumerate(zip(heads, num_heads)):
    removed = np.asarray(removed, int).reshape(-1)
    if removed.size and (removed.min() < 0 or removed.max() >= count):
      raise ValueError(f"layer {layer}: head indices {removed.tolist()} out of "
                       f"range [0, {count})")
    keep = [h for h in range(count) if h not in set(removed.tolist())]
    if not keep:
      raise ValueError(f"layer {layer}: every head would be removed")
    kept.append(keep)
  return kept


def _slice_heads(leaf, target_shape, num_heads: int, keep: Sequence[int], path: str):
  """`leaf` cut to `keep` along its head axis: the one axis where the full
  layer has `num_heads` and the smaller one len(keep) entries."""
  if tuple(leaf.shape) == tuple(target_shape):
    return leaf
  axes = [i for i, (a, b) in enumerate(zip(leaf.shape, target_shape))
          if a != b and (a, b) == (num_heads, len(keep))]
  if len(leaf.shape) != len(target_shape) or len(axes) != 1 or sum(
      a != b for a, b in zip(leaf.shape, target_shape)) != 1:
    raise ValueError(f"{path}: cannot find the head axis between {tuple(leaf.shape)} "
                     f"and {tuple(target_shape)}")
  return np.take(np.asarray(leaf), keep, axis=axes[0])


def remove_heads(model, variables: Mapping[str, Any], heads: Sequence[Sequence[int]],
                 image_shape: Sequence[int]):
  """The smaller model without `heads`, and its variables (paper 002, App. A.1).

  Each layer keeps only its other heads: `layer_overrides` gain one override
  per layer setting its `num_heads`, and every parameter with a head axis is
  cut to the kept heads (the axis is found from the smaller model's shapes).
  The result computes what `prune_heads` computes, with fewer parameters and
  FLOPs, and can be trained further (Fig. 8).

  Args:
    model: the `ViT` the variables belong to.
    variables: its variables ({"params": ...}), in the model's layout.
    heads: per layer, the indices of the heads to remove.
    image_shape: (H, W, C) of the model's input images (the smaller model's
      parameter shapes are read from an abstract init on it).

  Returns:
    (model, variables): the smaller ViT (same layout mode; a scanned encoder
    gets one segment per run of equal layers) and its variables.
  """
  _check_stateless(model)
  fields = layer_fields(model)
  kept = _kept(heads, [f["num_heads"] for f in fields])
  overrides = tuple(model.layer_overrides or ()) + tuple(
      {"start": layer, "stop": layer + 1, "block": {"num_heads": len(keep)}}
      for layer, keep in enumerate(kept))
  smaller = model.clone(layer_overrides=overrides)
  params = variables["params"]
  images = jax.ShapeDtypeStruct((1, *image_shape), np.float32)
  target = jax.eval_shape(smaller.init, jax.random.key(0), images)["params"]
  layers = []
  for layer, (tree, goal, keep, field) in enumerate(
      zip(layer_trees(params), layer_trees(target), kept, fields)):
    layers.append(jax.tree_util.tree_map_with_path(
        lambda path, leaf, goal_leaf, keep=keep, count=field["num_heads"], layer=layer:
        _slice_heads(leaf, goal_leaf.shape, count, keep,
                     f"layer {layer} {jax.tree_util.keystr(path)}"),
        tree, goal))
  params = with_layer_trees(params, layers, model_layout(smaller))
  return smaller, dict(variables, params=params)
