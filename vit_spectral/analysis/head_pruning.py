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
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vit_spectral.analysis.attention_centres import gaussian_heads
from vit_spectral.models.layouts import layer_trees, tree_layout, with_layer_trees

__all__ = ["degenerate_heads", "prune_heads"]


def degenerate_heads(params: Mapping[str, Any], *, min_largest_eigenvalue: float = 1e-5,
                     max_condition_number: float = 1e5) -> list[np.ndarray]:
  """Heads whose Σ⁻¹ has largest eigenvalue < `min_largest_eigenvalue` or
  condition number > `max_condition_number`, per layer.

  Args:
    params: a ViT's params with "gaussian" (or "quadratic") attention.
    min_largest_eigenvalue, max_condition_number: the App. A.1 thresholds.

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
  if len(heads) != len(layers):
    raise ValueError(f"heads lists {len(heads)} layers; the model has {len(layers)}")
  pruned = []
  for layer, (tree, removed) in enumerate(zip(layers, heads)):
    attention = tree["attention"]
    if "out" not in attention:
      raise ValueError(
          f"layer {layer}: the attention has no output projection 'out' (an eigen "
          "model.attention.value_output builds W_proj from one V_H shared by the "
          "heads); prune_heads needs value_output='standard'")
    kernel = attention["out"]["kernel"]                       # (H, Dh, D)
    removed = np.asarray(removed, int).reshape(-1)
    if removed.size and (removed.min() < 0 or removed.max() >= kernel.shape[0]):
      raise ValueError(f"layer {layer}: head indices {removed.tolist()} out of "
                       f"range [0, {kernel.shape[0]})")
    keep = np.ones(kernel.shape[0], bool)
    keep[removed] = False
    kernel = kernel * keep[:, None, None].astype(kernel.dtype)
    out = dict(attention["out"], kernel=kernel)
    pruned.append(dict(tree, attention=dict(attention, out=out)))
  return dict(variables, params=with_layer_trees(params, pruned, tree_layout(params)))
