"""The checkpoint fingerprint: equal to an independent NumPy computation,
the same on any sharding, and changed by any one changed element (every
weight is odd) and by a swap of two rows (weights depend on position; not
every swap: x and y at positions whose weights differ by 2³¹ cancel when
y - x is even)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from vit_spectral.durability import state_fingerprint


def numpy_fingerprint(x: np.ndarray) -> int:
  """f(x) = Σ bits_i · ((i·2654435761 + 0x9E3779B9) | 1) mod 2³², in Python ints."""
  bits = x.reshape(-1).view({1: np.uint8, 2: np.uint16, 4: np.uint32}[x.itemsize])
  total = 0
  for i, b in enumerate(bits.tolist()):
    weight = ((i * 2654435761 + 0x9E3779B9) % 2**32) | 1
    total = (total + b * weight) % 2**32
  return total


@pytest.fixture(scope="module")
def tree():
  rng = np.random.default_rng(0)
  return {"w": rng.standard_normal((16, 12)).astype(np.float32),
          "b": {"x": rng.standard_normal((5,)).astype(jnp.bfloat16)},
          "count": np.array(7, np.int32)}


def test_matches_an_independent_computation(tree):
  got = state_fingerprint.fingerprint(tree)
  assert got == {"w": numpy_fingerprint(tree["w"]), "b/x": numpy_fingerprint(tree["b"]["x"]),
                 "count": numpy_fingerprint(tree["count"])}


def test_the_same_on_any_sharding(tree):
  mesh = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("data", "model"))
  sharded = dict(tree, w=jax.device_put(tree["w"], NamedSharding(mesh, P("data", "model"))))
  assert state_fingerprint.fingerprint(sharded) == state_fingerprint.fingerprint(tree)


def test_any_flipped_bit_and_a_swap_of_rows_change_it(tree):
  expected = state_fingerprint.fingerprint(tree)
  assert state_fingerprint.mismatches(expected, tree) == []
  rng = np.random.default_rng(1)
  bits = tree["w"].view(np.uint32)
  for _ in range(20):
    damaged = bits.copy()
    index = tuple(rng.integers(0, n) for n in damaged.shape)
    damaged[index] ^= np.uint32(1) << np.uint32(rng.integers(0, 32))
    assert state_fingerprint.mismatches(expected, dict(tree, w=damaged.view(np.float32))) == ["w"]
  swapped = tree["w"].copy()
  swapped[[0, 1]] = swapped[[1, 0]]
  assert state_fingerprint.mismatches(expected, dict(tree, w=swapped)) == ["w"]
  assert state_fingerprint.mismatches(expected, {"w": tree["w"], "b": tree["b"]}) == ["count"]
