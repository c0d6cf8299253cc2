"""Pruning degenerate Gaussian attention heads (paper 002, App. A.1).

A "gaussian" head is degenerate when its precision Σ⁻¹ = S Sᵀ is close to 0 (it
attends to every pixel uniformly: largest eigenvalue < 1e-5) or close to singular
(it attends to a thin stripe: condition number λ_max / λ_min > 1e5). The paper
prunes those heads ([2, 4, 1, 2, 6, 0] of 9 in its 6 layers) and keeps the accuracy.

Pruning here adds a `head_mask` collection to the variables: (H,) keep flags per
layer, read by every relative-position attention (`attention.relative`), which
then drops the pruned heads' contributions. Run the pruned model with
`model.apply(prune_heads(variables, heads), images)`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from vit_spectral.analysis.attention_centres import gaussian_heads
from vit_spectral.attention.relative import HEAD_MASK_COLLECTION
from vit_spectral.models.vit import BLOCK_NAME


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
  """`variables` plus the `head_mask` collection that removes `heads`.

  Args:
    variables: a ViT's variables ({"params": ...}), scanned or looped encoder.
    heads: per layer, the indices of the heads to remove (e.g. the output of
      `degenerate_heads`).

  Returns:
    A new variables dict; apply the same model to it.
  """
  layers = gaussian_heads(variables["params"])
  if len(heads) != len(layers):
    raise ValueError(f"heads lists {len(heads)} layers; the model has {len(layers)}")
  keep = np.ones((len(layers), len(layers[0]["centers"])), np.float32)
  for layer, removed in enumerate(heads):
    removed = np.asarray(removed, int)
    if removed.size and (removed.min() < 0 or removed.max() >= keep.shape[1]):
      raise ValueError(f"layer {layer}: head indices {removed.tolist()} out of "
                       f"range [0, {keep.shape[1]})")
    keep[layer, removed] = 0.0
  if BLOCK_NAME in variables["params"]["encoder"]:
    masks = {BLOCK_NAME: {"attention": {"keep": keep}}}
  else:
    masks = {f"{BLOCK_NAME}_{i}": {"attention": {"keep": k}} for i, k in enumerate(keep)}
  return dict(variables, **{HEAD_MASK_COLLECTION: {"encoder": masks}})
