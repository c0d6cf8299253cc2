"""Keeps the next global batches already on the devices while a step runs.

  batches = device_prefetch.prefetch_to_device(host_iterator, mesh, size=2)
  for step in ...:
    state, metrics = train_step(state, next(batches))

Each host batch (a dict of numpy arrays, this process's slice) goes through
`sharding.global_batch` (the "data"-sharded global arrays the train step takes)
`size` batches before the step that consumes it.

Why in the main thread, not on a background thread: JAX transfers are
asynchronous. `global_batch` enqueues the host-to-device copies and returns, so
a batch placed `size` steps early has had `size` step times to land before its
step starts, with no thread. The host-side work left in the loop is tf.data's
dequeue (its own threads decode, augment and batch, with their own prefetch
buffer) and the call that starts the copy; it runs while the device still
executes the step dispatched before it (dispatch is asynchronous too). A thread
would add a second owner of the iterator, a queue, a shutdown protocol and
errors to carry across, and contend for the GIL with the loop's dispatch, to
overlap only that dequeue. Here order is the iterator's order, an error (a
data set that is not prepared, a failed read) is raised by `next()` at the step
that needed the batch, with its own type and message, and nothing is left
running when the loop stops.
"""

from __future__ import annotations

import collections
from typing import Any, Iterator

import jax
from jax.sharding import Mesh

from vit_spectral.sections.input import InputSettings
from vit_spectral.training import sharding

__all__ = ["DEFAULT_SIZE", "DevicePrefetch", "prefetch_to_device"]

# Global batches kept on the devices ahead of the step (config.input.device_prefetch).
DEFAULT_SIZE = InputSettings.device_prefetch


class DevicePrefetch:
  """Iterator of global batches, `size` of them transferred ahead of the one
  returned.

  The host iterator is read lazily: nothing is read before the first `next()`,
  which reads `size` + 1 batches (the one returned and `size` in flight); every
  later `next()` reads one. An exception from the host iterator is raised by the
  `next()` that reaches it, after the batches before it have been returned.
  `StopIteration` ends this iterator once the batches in flight are used up:
  no batch is lost.

  Holds `size` + 1 global batches in device memory (ImageNet at 224², batch
  1024, float32: 0.6 GB each, split over the "data" devices).

  Attributes:
    size: batches kept in flight (>= 0; 0 = transfer each batch when asked).
  """

  def __init__(self, host_iterator: Iterator[dict[str, Any]], mesh: Mesh,
               size: int = DEFAULT_SIZE, replica_axis: bool = False):
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
      raise ValueError(f"device prefetch size={size!r} must be an int >= 0")
    self.size = size
    self._host = iter(host_iterator)
    self._mesh = mesh
    self._replica_axis = replica_axis
    self._ready: collections.deque[dict[str, jax.Array]] = collections.deque()
    self._error: BaseException | None = None   # what the host iterator raised
    self._exhausted = False

  def __iter__(self) -> "DevicePrefetch":
    return self

  def _read_one(self) -> None:
    """Transfers the next host batch, or records how the host iterator ended."""
    if self._exhausted or self._error is not None:
      return
    try:
      host_batch = next(self._host)
    except StopIteration:
      self._exhausted = True
      return
    except Exception as e:  # raised, unchanged, when its turn comes (`__next__`)
      self._error = e
      return
    self._ready.append(sharding.global_batch(host_batch, self._mesh, self._replica_axis))

  def __next__(self) -> dict[str, jax.Array]:
    while len(self._ready) <= self.size and not (self._exhausted or self._error):
      self._read_one()
    if self._ready:
      return self._ready.popleft()
    if self._error is not None:
      error, self._error = self._error, None
      self._exhausted = True   # the host iterator is broken: end after raising
      raise error
    raise StopIteration


def prefetch_to_device(host_iterator: Iterator[dict[str, Any]], mesh: Mesh,
                       size: int = DEFAULT_SIZE, replica_axis: bool = False) -> DevicePrefetch:
  """`host_iterator`'s batches as global arrays on `mesh` (`sharding.global_batch`;
  stacked seeds' batches with `replica_axis`), `size` of them already
  transferred ahead of the one each `next()` returns."""
  return DevicePrefetch(host_iterator, mesh, size, replica_axis)
