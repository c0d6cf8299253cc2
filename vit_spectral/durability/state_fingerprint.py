"""A fingerprint of every array in a tree, saved beside a checkpoint and
compared after a restore: bytes damaged on disk that the reader does not
notice (most array files carry no checksum) are caught instead of trained on.

Each array's fingerprint is a 32-bit position-weighted sum of its bit
patterns,

  f(x) = Σ_i bits(x_i) · w_i  mod 2³²,   w_i = (i · 2654435761 + 0x9E3779B9) | 1,

with i the element's row-major index. Every weight is odd, so changing any
single element's bits changes f (changes to several elements can cancel,
with probability about 2⁻³²); the sum is taken in modular integer
arithmetic, so it is the same whatever the sharding, device count or
reduction order. Computed on the devices (one jitted reduction per array), it
costs a read of the state per save and per restore.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

_GOLDEN = np.uint32(2654435761)  # Knuth's multiplicative hash constant
_OFFSET = np.uint32(0x9E3779B9)
_UNSIGNED = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32}


def leaf_name(path) -> str:
  """A tree path as "params/encoder/..." (dict keys, attributes, indices)."""

  def name(entry) -> str:
    for attr in ("key", "name", "idx"):
      if hasattr(entry, attr):
        return str(getattr(entry, attr))
    return str(entry)

  return "/".join(name(e) for e in path)


def _array_fingerprint(x: jax.Array) -> jax.Array:
  """f(x) above, as a uint32 scalar."""
  itemsize = jnp.dtype(x.dtype).itemsize
  if itemsize not in _UNSIGNED:
    raise ValueError(f"cannot fingerprint {x.dtype} arrays (1, 2 or 4 bytes per element)")
  bits = jax.lax.bitcast_convert_type(x, _UNSIGNED[itemsize]).astype(jnp.uint32)
  index = jnp.zeros(x.shape, jnp.uint32)
  for axis in range(x.ndim):  # row-major index, without flattening a sharded array
    index = index * np.uint32(x.shape[axis]) + jax.lax.broadcasted_iota(jnp.uint32, x.shape, axis)
  weights = (index * _GOLDEN + _OFFSET) | np.uint32(1)
  return jnp.sum(bits * weights, dtype=jnp.uint32)


@jax.jit
def _fingerprints(leaves: list[jax.Array]) -> list[jax.Array]:
  return [_array_fingerprint(jnp.asarray(x)) for x in leaves]


def _host_value(value: jax.Array) -> int:
  # Replicated; across processes only the local copy can be read.
  return int(np.asarray(value if value.is_fully_addressable else value.addressable_data(0)))


def fingerprint(tree: Any) -> dict[str, int]:
  """{leaf path: f(leaf)} for every array of `tree` (device or host arrays)."""
  paths_and_leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
  values = _fingerprints([leaf for _, leaf in paths_and_leaves])
  return {leaf_name(path): _host_value(value)
          for (path, _), value in zip(paths_and_leaves, values)}


def mismatches(expected: dict[str, int], tree: Any) -> list[str]:
  """The leaves of `tree` whose fingerprint is not `expected`'s (and names
  only one side has), sorted."""
  actual = fingerprint(tree)
  return sorted(name for name in set(expected) | set(actual)
                if expected.get(name) != actual.get(name))
