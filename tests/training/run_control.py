"""Steering a training run from a test without changing what it computes: a
tap on its input stream, a stop at a chosen step, and bit-for-bit state
comparison. Used in-process and by the entry scripts of multi-process runs
(`tests.training.cluster`; PYTHONPATH is the checkout there).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np


class StreamTap:
  """`input_pipeline.create_train_dataset` with every batch passed through
  `tap(kwargs, number, batch) -> (batch, record)`.

  `kwargs` are the call's keyword arguments (with `fixed` added), `number`
  the global batch's number in the whole stream, counted from 1 (the call's
  `start_example` says where it starts). Each call appends a list to `calls`,
  which receives the batches' records in order.

  Args:
    create: the function wrapped (the real `create_train_dataset`).
    tap: what each batch goes through.
    **fixed: keyword arguments added to every call (e.g. with_ids=True).
  """

  def __init__(self, create: Callable[..., Any],
               tap: Callable[[dict, int, dict], tuple[dict, Any]], **fixed: Any):
    self.create, self.tap, self.fixed = create, tap, fixed
    self.calls: list[list[Any]] = []

  def __call__(self, cfg: Any, **kwargs: Any) -> Any:
    kwargs = {**kwargs, **self.fixed}
    dataset = self.create(cfg, **kwargs)
    per_shard = cfg.batch_size // kwargs.get("stream_shards", 1)
    first = kwargs.get("start_example", 0) // per_shard + 1
    records: list[Any] = []
    self.calls.append(records)
    tap = self.tap

    class Stream:
      def as_numpy_iterator(self):
        for number, batch in enumerate(dataset.as_numpy_iterator(), start=first):
          batch, record = tap(kwargs, number, batch)
          records.append(record)
          yield batch

    return Stream()


def recording_ids(create: Callable[..., Any]) -> StreamTap:
  """A tap that records each batch's example ids (its index in the split)
  and hands the batch on without them."""
  return StreamTap(create, lambda kwargs, number, batch: (batch, batch.pop("id")),
                   with_ids=True)


def stop_at(step: int) -> Callable[[Any, int], bool]:
  """A `preemption.StopSignals.should_stop` that stops every process at
  `step`, as a SIGTERM would."""

  def should_stop(self, at: int) -> bool:
    if at == step:
      self.received = "SIGTERM"
    return at == step

  return should_stop


def assert_trees_equal(a: Any, b: Any) -> None:
  """Two trees of arrays (e.g. whole train states) bit for bit, leaf by leaf."""
  leaves_a, leaves_b = (jax.tree_util.tree_leaves_with_path(t) for t in (a, b))
  assert [p for p, _ in leaves_a] == [p for p, _ in leaves_b]
  for (path, x), (_, y) in zip(leaves_a, leaves_b):
    np.testing.assert_array_equal(x, y, err_msg=jax.tree_util.keystr(path))
