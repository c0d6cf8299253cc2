"""device_prefetch: the host iterator's batches, in order, as "data"-sharded global
arrays, read ahead by `size`; errors and the end of the stream pass through."""

import jax
import numpy as np
import pytest

from vit_spectral.sections.input import input_settings
from vit_spectral.training import device_prefetch, sharding


@pytest.fixture(scope="module")
def mesh():
  return sharding.make_mesh({"data": 4, "model": 2}, jax.devices())


def host_batches(count, log=None):
  """`count` host batches (B=8), batch n filled with n; `log` records each read."""
  for n in range(count):
    if log is not None:
      log.append(n)
    yield {"image": np.full((8, 2, 2, 1), n, np.float32), "label": np.full((8,), n, np.int32)}


@pytest.mark.parametrize("size", [0, 2])
def test_order_sharding_and_end(mesh, size):
  reads = []
  batches = device_prefetch.prefetch_to_device(host_batches(5, reads), mesh, size)
  assert reads == []   # nothing is read before the first next()
  first = next(batches)
  assert reads == list(range(size + 1))   # the one returned and `size` in flight
  seen = [first] + list(batches)           # list() ends on StopIteration
  assert [int(b["label"][0]) for b in seen] == [0, 1, 2, 3, 4]   # none lost or reordered
  for n, b in enumerate(seen):
    assert isinstance(b["image"], jax.Array)
    assert b["image"].sharding.is_equivalent_to(sharding.batch_sharding(mesh), 4)
    np.testing.assert_array_equal(np.asarray(b["image"]), np.full((8, 2, 2, 1), n))
  with pytest.raises(StopIteration):
    next(batches)


def test_error_surfaces_after_the_batches_before_it(mesh):
  def failing():
    yield from host_batches(2)
    raise FileNotFoundError("TFDS data set 'x' is not prepared in data_dir '/d'")

  batches = device_prefetch.prefetch_to_device(failing(), mesh, size=2)
  assert int(next(batches)["label"][0]) == 0   # the failure is already read here
  assert int(next(batches)["label"][0]) == 1
  with pytest.raises(FileNotFoundError, match="is not prepared in data_dir '/d'"):
    next(batches)
  with pytest.raises(StopIteration):   # a broken host iterator is not read again
    next(batches)


def test_size_is_checked(mesh):
  with pytest.raises(ValueError, match=r"size=-1 must be an int >= 0"):
    device_prefetch.prefetch_to_device(host_batches(1), mesh, size=-1)
  with pytest.raises(ValueError, match=r"input\.device_prefetch=-1 must be in \[0, inf\)"):
    input_settings(dict(dataset="digits", image_size=8, batch_size=8, device_prefetch=-1))
  with pytest.raises(ValueError, match=r"input\.device_prefetch=1\.5 must be an int"):
    input_settings(dict(dataset="digits", image_size=8, batch_size=8, device_prefetch=1.5))
  assert input_settings(dict(dataset="digits", image_size=8,
                             batch_size=8)).device_prefetch == device_prefetch.DEFAULT_SIZE
