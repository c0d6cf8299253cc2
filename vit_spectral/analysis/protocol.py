"""The sow protocol: what a Flax model sows so that `analysis.diagnose` can read it.

Any Flax module is diagnosable when one call

    model.apply(variables, images, mutable=["intermediates"], **apply_kwargs)

sows, into its "intermediates" collection:

1. **Each Transformer block's output tokens**, (B, T, D), under the name
   "block_output" in the block's own scope. One line does it: decorate the
   block's `__call__` with `@diagnosable` (below `@nn.compact`); it sows what
   the call returns (the first element when it returns a tuple).
2. **Each block's attention maps**, (B', H, N, N) with rows that sum to one,
   under a name that ends in "attention_weights", anywhere inside the block:
   flax's `nn.MultiHeadDotProductAttention` does it when called with
   `sow_weights=True`; a hand-written attention calls
   `sow_attention(self, weights)`. B' = B for global attention; windowed
   attention sows B·nW maps (row b·nW + w = window w of image b). A block may
   sow several groups (CSwin's "attention_rows" and "attention_cols"): each
   is read as its own group of heads.

Where the blocks are: a block is any scope holding "block_output"; blocks
that share a parent scope form one stage (one encoder), blocks are ordered by
the natural order of their names (block_2 before block_10), stages by their
paths. A block under `nn.scan` sows with a leading layer axis ((L, B, T, D))
and counts as L blocks.

The library's models follow the protocol (`models.vit.Block` sows both); they
are read through the layout walker (`models.intermediates.per_stage`), which
also knows their scanned segments.

    class MyBlock(nn.Module):
      @nn.compact
      @diagnosable
      def __call__(self, x):
        y = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=4)(y, sow_weights=True)
        return x + MyMlp()(nn.LayerNorm()(x))
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax

from vit_spectral.models.intermediates import flatten_sown, natural_key

OUTPUT_KEY = "block_output"
MAP_NAME = "attention_weights"
ATTENTION_KEY = f"attention/{MAP_NAME}"   # the library block's map: its "attention" module

__all__ = ["ATTENTION_KEY", "MAP_NAME", "OUTPUT_KEY", "default_apply_kwargs", "diagnosable",
           "map_groups", "protocol_blocks", "sow_attention"]
# Inference-mode arguments `default_apply_kwargs` recognises, in order.
_INFERENCE_ARGUMENTS = (("train", False), ("training", False), ("deterministic", True))


def diagnosable(call: Callable) -> Callable:
  """Decorates a block's `__call__` (below `@nn.compact`): sows its output
  tokens (the returned array, or the first element of a returned tuple) as
  "block_output" in the block's scope."""

  @functools.wraps(call)
  def sowing_call(module: nn.Module, *args, **kwargs):
    out = call(module, *args, **kwargs)
    tokens = out[0] if isinstance(out, tuple) else out
    module.sow("intermediates", OUTPUT_KEY, tokens)
    return out

  return sowing_call


def sow_attention(module: nn.Module, weights: jax.Array, name: str = MAP_NAME) -> None:
  """Sows attention maps (B', H, N, N) from inside a module's call, under
  `name` (it must end in "attention_weights")."""
  if not name.endswith(MAP_NAME):
    raise ValueError(f"sow_attention name={name!r} must end in {MAP_NAME!r}: diagnose "
                     "reads the maps by that suffix")
  module.sow("intermediates", name, weights)


def default_apply_kwargs(model: nn.Module) -> dict[str, Any]:
  """The inference-mode argument `model.__call__` takes: {"train": False},
  {"training": False} or {"deterministic": True}, whichever it names first;
  {} when it names none."""
  try:
    parameters = inspect.signature(type(model).__call__).parameters
  except (TypeError, ValueError):
    return {}
  for name, value in _INFERENCE_ARGUMENTS:
    if name in parameters:
      return {name: value}
  return {}


def _natural(path: tuple[str, ...]) -> list:
  return [natural_key(part) for part in path]


def _block_scopes(tree: Mapping[str, Any], path: tuple[str, ...] = ()
                  ) -> list[tuple[tuple[str, ...], Mapping[str, Any]]]:
  """Every scope of `tree` that holds OUTPUT_KEY (not searched below it)."""
  if OUTPUT_KEY in tree:
    return [(path, tree)]
  found = []
  for key, value in tree.items():
    if isinstance(value, Mapping):
      found += _block_scopes(value, path + (str(key),))
  return found


def map_groups(layer: Mapping[str, Any]) -> dict[str, Any]:
  """A block's flattened sown dict -> {group: maps} for every key ending in
  "attention_weights" (group = the key without "/attention_weights"; a map
  sown in the block's own scope is the group "attention")."""
  groups = {}
  for key, value in layer.items():
    if key == MAP_NAME:
      groups["attention"] = value
    elif key.endswith("/" + MAP_NAME):
      groups[key[:-len(MAP_NAME) - 1]] = value
  return groups


def protocol_blocks(intermediates: Mapping[str, Any]
                    ) -> list[tuple[str, list[dict[str, Any]]]]:
  """[(stage path, [one flattened sown dict per block])] of any model that
  follows the protocol, stages and blocks in order.

  Raises:
    KeyError: nothing in the tree sowed "block_output" (names what was sown
      and how to follow the protocol).
  """
  scopes = _block_scopes(intermediates)
  if not scopes:
    sown = sorted(flatten_sown(intermediates))
    raise KeyError(
        f"no block sowed {OUTPUT_KEY!r} (the model sowed {sown[:8]}"
        f"{' ...' if len(sown) > 8 else ''}): decorate each Transformer block's __call__ "
        "with vit_spectral.analysis.diagnosable, and sow its attention maps "
        "(nn.MultiHeadDotProductAttention(...)(x, sow_weights=True) or "
        "analysis.sow_attention); see vit_spectral.analysis.protocol")
  stages: dict[tuple[str, ...], list[tuple[tuple[str, ...], dict]]] = {}
  for path, scope in scopes:
    stages.setdefault(path[:-1], []).append((path, flatten_sown(scope)))
  out = []
  for parent in sorted(stages, key=_natural):
    blocks = []
    for _, layer in sorted(stages[parent], key=lambda item: _natural(item[0])):
      tokens = layer[OUTPUT_KEY]
      if getattr(tokens, "ndim", 0) == 4:     # nn.scan: (L, B, T, D)
        blocks += [jax.tree_util.tree_map(lambda leaf, i=i: leaf[i], layer)
                   for i in range(tokens.shape[0])]
      else:
        blocks.append(layer)
    out.append(("/".join(parent), blocks))
  return out
