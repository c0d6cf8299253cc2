"""Where a run's training stream stands: saved with every checkpoint, so a
resume continues with the examples an uninterrupted run would have seen.

The global batch of a step is drawn from `shards` shard streams, `batch_size
/ shards` examples from each (`data.create_train_dataset`), so the stream's
position is one number: `examples`, the examples consumed from each shard
stream after the checkpoint's step. A run that skipped batches (a rollback
after a non-finite loss, `config.on_nonfinite = "rollback"`) has consumed more
examples than `step · batch_size / shards`; the skips are listed in
`rollbacks`, so a resumed run skips the same batches and stays reproducible.

Elastic resume: the position does not depend on the process or device count,
so a run moves between them freely (`shards` stays that of the run that
started the workdir). A change of the global batch changes what a step
means: it is refused (`errors.ConfigMismatchError`) unless
`config.allow_batch_size_change`, and then the position carries over in
examples (the next batch starts at the first example not yet seen).

Checkpoints written before the stream was saved (no `stream` item) are read
as a run with `shards` = this run's process count at `step · batch / shards`
examples: how those runs read their data.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from vit_spectral import errors


@dataclasses.dataclass(frozen=True)
class Rollback:
  """One rollback after a non-finite loss.

  Attributes:
    step: the step whose loss or gradient norm was non-finite.
    restored_step: the checkpoint (step) the run went back to; 0 = the
      initialisation.
    first_batch: the first skipped global batch of the stream, counted from 1
      (batch k is what step k trains on in a run without skips).
    batches: how many global batches were skipped.
  """

  step: int
  restored_step: int
  first_batch: int
  batches: int


@dataclasses.dataclass(frozen=True)
class StreamState:
  """The training stream's position after a checkpoint's step.

  Attributes:
    shards: S, the shard streams each global batch is drawn from (fixed for
      the life of a workdir).
    batch_size: the global batch the run trains with (B; B / S per shard).
    examples: examples consumed from each shard stream.
    rollbacks: the rollbacks so far, oldest first.
  """

  shards: int
  batch_size: int
  examples: int
  rollbacks: tuple[Rollback, ...] = ()

  def __post_init__(self):
    if self.shards < 1 or self.batch_size % self.shards:
      raise ValueError(f"stream of {self.shards} shards cannot form batches of "
                       f"{self.batch_size} examples")
    if self.examples < 0:
      raise ValueError(f"stream position {self.examples} must be >= 0")

  @property
  def per_shard(self) -> int:
    """Examples each shard stream gives to one global batch."""
    return self.batch_size // self.shards

  @property
  def batches(self) -> float:
    """The position in global batches (whole unless the batch size changed)."""
    return self.examples / self.per_shard

  def advanced(self, steps: int) -> "StreamState":
    """The position after `steps` more global batches."""
    return dataclasses.replace(self, examples=self.examples + steps * self.per_shard)

  def skipping(self, batches: int, *, step: int, restored_step: int) -> "StreamState":
    """This position (that of the checkpoint at `restored_step`) with the
    next `batches` global batches skipped, the rollback recorded."""
    first = self.examples // self.per_shard + 1
    rollback = Rollback(step=step, restored_step=restored_step, first_batch=first,
                        batches=batches)
    return dataclasses.replace(self, examples=self.examples + batches * self.per_shard,
                               rollbacks=self.rollbacks + (rollback,))

  def to_json(self) -> dict[str, Any]:
    return {"shards": self.shards, "batch_size": self.batch_size, "examples": self.examples,
            "rollbacks": [dataclasses.asdict(r) for r in self.rollbacks]}

  @classmethod
  def from_json(cls, tree: dict[str, Any]) -> "StreamState":
    """Raises ValueError for a tree that is not a stream state (damage)."""
    try:
      return cls(shards=int(tree["shards"]), batch_size=int(tree["batch_size"]),
                 examples=int(tree["examples"]),
                 rollbacks=tuple(Rollback(**{k: int(v) for k, v in r.items()})
                                 for r in tree.get("rollbacks", ())))
    except (KeyError, TypeError, AttributeError) as e:
      raise ValueError(f"not a stream state: {tree!r:.200}") from e


def fresh(*, batch_size: int, shards: int) -> StreamState:
  """The stream of a run starting at step 0."""
  return StreamState(shards=shards, batch_size=batch_size, examples=0)


def resumed(stored: StreamState | None, *, step: int, batch_size: int,
            process_count: int, allow_batch_size_change: bool) -> StreamState:
  """The stream position a run resuming at `step` continues from.

  Args:
    stored: the checkpoint's stream state (None: a checkpoint from before it
      was saved; see the module docstring).
    step: the checkpoint's step.
    batch_size: this run's `config.input.batch_size`.
    process_count: this run's process count (for stored None).
    allow_batch_size_change: `config.allow_batch_size_change`.

  Raises:
    errors.ConfigMismatchError: the global batch differs from the
      checkpoint's and no flag allows it, or the new batch does not split
      over the stream's shards.
  """
  if stored is None:  # (set_up has checked that the batch splits over the processes)
    return StreamState(shards=process_count, batch_size=batch_size,
                       examples=step * (batch_size // process_count))
  if batch_size == stored.batch_size:
    return stored
  seen = stored.examples * stored.shards
  if not allow_batch_size_change:
    raise errors.ConfigMismatchError(
        f"config.input.batch_size={batch_size}, but the checkpoint at step {step} was "
        f"trained with batch_size={stored.batch_size} ({seen} examples seen): a step "
        f"would mean another thing. Resume with --config.input.batch_size="
        f"{stored.batch_size}, or add --config.allow_batch_size_change=True to go on "
        f"at example {seen} with the new batch")
  if batch_size % stored.shards:
    raise errors.ConfigMismatchError(
        f"config.input.batch_size={batch_size} must be a multiple of the {stored.shards} "
        f"stream shards this workdir's stream was started with")
  return dataclasses.replace(stored, batch_size=batch_size)


def process_rows(batch_sharding: Any, batch_size: int) -> tuple[int, int]:
  """The [start, stop) rows of the global batch that this process's devices
  hold under `batch_sharding` (what it must read).

  Raises:
    ValueError: the rows are not one contiguous range (a mesh that
      interleaves processes along the batch).
  """
  indices = batch_sharding.addressable_devices_indices_map((batch_size,)).values()
  covered = np.zeros(batch_size, bool)
  for (rows,) in indices:
    covered[rows] = True
  held = np.flatnonzero(covered)
  start, stop = int(held[0]), int(held[-1]) + 1
  if len(held) != stop - start:
    raise ValueError(f"this process's devices hold rows {held.tolist()} of the global "
                     "batch, not one contiguous range; order the mesh's devices by process")
  return start, stop


def shards_of(rows: tuple[int, int], stream: StreamState) -> range:
  """The shard streams whose part of the global batch `rows` touches (what a
  process reading `rows` reads records of)."""
  return range(rows[0] // stream.per_shard, -(-rows[1] // stream.per_shard))
