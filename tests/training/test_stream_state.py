"""The stream position saved with each checkpoint (`durability.stream_state`):
its arithmetic, its JSON, the resume rules and the rows a process reads."""

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from vit_spectral import errors
from vit_spectral.durability import stream_state
from vit_spectral.durability.stream_state import Rollback, StreamState


def test_position_advances_and_skips_in_examples_per_shard():
  stream = stream_state.fresh(batch_size=32, shards=2).advanced(10)
  assert stream.examples == 160 and stream.batches == 10
  skipped = stream.skipping(5, step=15, restored_step=10)
  assert skipped.examples == 240  # 15 batches of 16 per shard
  assert skipped.rollbacks == (Rollback(step=15, restored_step=10, first_batch=11, batches=5),)
  assert StreamState.from_json(skipped.to_json()) == skipped


def test_a_damaged_or_impossible_state_is_refused():
  with pytest.raises(ValueError, match="not a stream state"):
    StreamState.from_json({"shards": 2})
  with pytest.raises(ValueError, match="stream of 3 shards cannot form batches of 32"):
    StreamState(shards=3, batch_size=32, examples=0)


def test_resume_keeps_the_position_and_converts_old_checkpoints():
  stored = StreamState(shards=2, batch_size=32, examples=320)
  assert stream_state.resumed(stored, step=20, batch_size=32, process_count=1,
                              allow_batch_size_change=False) == stored
  # No stream item: read as the process count's slices at step · B / P.
  assert stream_state.resumed(None, step=20, batch_size=32, process_count=4,
                              allow_batch_size_change=False) == StreamState(4, 32, 160)


def test_a_changed_batch_is_refused_unless_allowed_then_goes_on_in_examples():
  stored = StreamState(shards=2, batch_size=32, examples=320)
  with pytest.raises(errors.ConfigMismatchError, match=r"batch_size=48, but the checkpoint at "
                     r"step 20 was trained with batch_size=32 \(640 examples seen\)"):
    stream_state.resumed(stored, step=20, batch_size=48, process_count=1,
                         allow_batch_size_change=False)
  moved = stream_state.resumed(stored, step=20, batch_size=48, process_count=1,
                               allow_batch_size_change=True)
  assert (moved.examples, moved.per_shard) == (320, 24)  # the same example, new batches
  with pytest.raises(errors.ConfigMismatchError, match="multiple of the 2 stream shards"):
    stream_state.resumed(stored, step=20, batch_size=33, process_count=1,
                         allow_batch_size_change=True)


def test_process_rows_follow_the_batch_sharding():
  devices = np.array(jax.devices()[:8])
  for shape, axes in (((8,), ("data",)), ((4, 2), ("data", "model")),
                      ((2, 4), ("data", "fsdp"))):
    mesh = Mesh(devices.reshape(shape), axes)
    batch_axes = tuple(a for a in axes if a in ("data", "fsdp"))
    rows = stream_state.process_rows(NamedSharding(mesh, P(batch_axes)), 64)
    assert rows == (0, 64)  # one process holds every row


def test_shards_of_rows():
  stream = StreamState(shards=4, batch_size=64, examples=0)  # 16 rows per shard
  assert list(stream_state.shards_of((0, 64), stream)) == [0, 1, 2, 3]
  assert list(stream_state.shards_of((16, 32), stream)) == [1]
  assert list(stream_state.shards_of((10, 40), stream)) == [0, 1, 2]
