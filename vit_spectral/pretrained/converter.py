"""What a backbone family's timm converter is (`TimmConverter`), and the
parameter-path helpers the converters share.

`pretrained.loading` hands a timm name to the family whose prefix it starts
with; its table `FAMILY_CONVERTERS` names each family's module, which
defines `CONVERTER`. A converter module imports this one, never the loader,
so the two never import each other.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np

__all__ = ["TimmConverter", "flat_paths", "nest_paths"]


@dataclasses.dataclass(frozen=True)
class TimmConverter:
  """One family's timm checkpoints in.

  Attributes:
    load_timm: `load_timm(weights, name, ...)` for the family's names.
    names: the timm architecture names it reads (`known_timm_names`).
    model_class: the model class `load_into` (`config.init_from`) may fit
      with `timm_params(weights, num_heads)`; None = `load_timm` only.
    timm_params: see model_class.
  """
  load_timm: Callable[..., Any]
  names: tuple[str, ...]
  model_class: type | None = None
  timm_params: Callable[..., Any] | None = None


def nest_paths(flat: Mapping[str, np.ndarray]) -> dict[str, Any]:
  """{"a/b/c": leaf} -> nested dicts (the inverse of `flat_paths`)."""
  tree: dict[str, Any] = {}
  for path, value in flat.items():
    node = tree
    *parents, leaf = path.split("/")
    for key in parents:
      node = node.setdefault(key, {})
    node[leaf] = value
  return tree


def flat_paths(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
  """Nested dicts -> {"a/b/c": leaf}: the parameter paths the converters use."""
  flat = {}
  for key, value in tree.items():
    path = f"{prefix}{key}"
    if isinstance(value, Mapping):
      flat.update(flat_paths(value, path + "/"))
    else:
      flat[path] = value
  return flat
