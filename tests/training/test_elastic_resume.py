"""Elastic resume: a run stopped at step 20 and resumed on another device or
process count sees exactly the examples of an uninterrupted run, in the same
order per global batch, and ends with its parameters to summation-order
tolerance.

The reference: 40 uninterrupted steps on 8 devices in one process, its stream
drawn from 2 shard streams (`config.input.stream_shards=2`, what a run started
on 2 processes uses by default). Two resumes are compared with it:
- 8 devices for 20 steps, then 4 devices for 20 more (one process);
- 2 processes × 4 devices for 20 steps (the command line with
  `--num_processes=2`; `stream_shards` left at its default, the process
  count), then one process with 8 devices for 20 more.
Each run records the example ids (index in the train split) of every global
batch it trains on: the stream tapped to read them (`run_control`), nothing else
changed.

Tolerance: the cross-device mean is an all-reduce whose summation order
differs with the device count (and is gloo's across processes), so float32
results differ in the last bits, and Adam carries that on. Each leaf may
differ from the reference by RTOL times its largest magnitude; the attention
key bias and its moments are exempt (its true gradient is exactly zero, so
they hold rounding noise; see test_multiprocess). The largest difference seen
is printed (-s).
"""

import json
import time

import jax
import numpy as np
import pytest

from vit_spectral import data, errors
from vit_spectral.configs import digits_vit
from vit_spectral.data import input_pipeline
from vit_spectral.durability import checkpointing, preemption
from vit_spectral.training import trainer
from tests.training.cluster import Cluster
from tests.training.run_control import recording_ids, stop_at

# End-to-end runs: .ci/run runs them as a step of their own (pyproject's markers).
pytestmark = pytest.mark.extended

TOTAL, STOP, BATCH = 40, 20, 32
RTOL = 1e-5  # seen: 1.0e-6 (8 -> 4 devices), 2.5e-6 (2 processes -> 1)
RECIPE_ARG = f"steps={TOTAL},depth=1,width=32,heads=2"
OVERRIDES = {"optim.warmup_steps": 2, "input.batch_size": BATCH, "eval_every": TOTAL,
             "checkpoint_every": 10, "log_every": 10}

# The command line on each process, recording the ids of the global-batch rows
# it reads, and stopping every process at step STOP (as a SIGTERM would).
ENTRY = r'''
import json, os
from vit_spectral import main
from vit_spectral.data import input_pipeline
from vit_spectral.durability import preemption
from tests.training.run_control import StreamTap, stop_at

out = os.environ["MULTIPROCESS_TEST_OUT"]

def record(kwargs, number, batch):
  with open(os.path.join(out, f"ids_{kwargs['rows'][0]}.jsonl"), "a") as f:
    f.write(json.dumps({"start": kwargs["start_example"], "rows": kwargs["rows"],
                        "ids": batch.pop("id").tolist()}) + "\n")
  return batch, None

input_pipeline.create_train_dataset = StreamTap(input_pipeline.create_train_dataset, record,
                                                with_ids=True)
preemption.StopSignals.should_stop = stop_at(%d)
main.run()
''' % STOP


def _config(data_dir, **fields):
  config = digits_vit.get_config(RECIPE_ARG)
  config.input.data_dir = data_dir
  for key, value in {**OVERRIDES, **fields}.items():
    section, _, field = key.rpartition(".")
    setattr(config[section] if section else config, field, value)
  return config


def _state(workdir):
  state, step = checkpointing.latest_state(str(workdir))
  assert step == TOTAL
  return state


def _largest_difference(state, reference):
  """Largest |difference| / leaf max over the state, key bias exempt; asserts
  each is within RTOL."""
  worst = 0.0
  leaves = jax.tree_util.tree_leaves_with_path(reference)
  others = jax.tree_util.tree_leaves_with_path(state)
  assert [p for p, _ in leaves] == [p for p, _ in others]
  for (path, ref), (_, got) in zip(leaves, others):
    name = jax.tree_util.keystr(path)
    if "['key']['bias']" in name:
      continue
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    scale = np.abs(ref).max()
    if scale == 0:
      np.testing.assert_array_equal(got, ref, err_msg=name)
      continue
    difference = np.abs(got - ref).max() / scale
    assert difference <= RTOL, f"{name}: {difference:.2e} of its largest magnitude"
    worst = max(worst, difference)
  return worst


@pytest.fixture(scope="module")
def digits_dir(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("tfds"))
  data.get_builder("digits", data_dir=path)
  return path


@pytest.fixture(scope="module")
def reference(digits_dir, tmp_path_factory):
  """40 uninterrupted steps on 8 devices, 2 shard streams: (state, ids per step)."""
  recorder = recording_ids(input_pipeline.create_train_dataset)
  workdir = tmp_path_factory.mktemp("reference")
  mp = pytest.MonkeyPatch()
  mp.setattr(input_pipeline, "create_train_dataset", recorder)
  try:
    trainer.train_and_evaluate(_config(digits_dir, **{"input.stream_shards": 2}), str(workdir))
  finally:
    mp.undo()
  (ids,) = recorder.calls
  assert len(ids) == TOTAL
  return _state(workdir), np.stack(ids)


def test_8_devices_then_4_see_the_same_examples(digits_dir, reference, tmp_path, monkeypatch):
  ref_state, ref_ids = reference
  recorder = recording_ids(input_pipeline.create_train_dataset)
  monkeypatch.setattr(input_pipeline, "create_train_dataset", recorder)
  config = _config(digits_dir, **{"input.stream_shards": 2})
  with monkeypatch.context() as stopping:
    stopping.setattr(preemption.StopSignals, "should_stop", stop_at(STOP))
    with pytest.raises(errors.RunPreempted, match=f"stopped at step {STOP}"):
      trainer.train_and_evaluate(config, str(tmp_path), devices=jax.devices()[:8])
  trainer.train_and_evaluate(config, str(tmp_path), devices=jax.devices()[:4])
  first, second = recorder.calls
  seen = np.stack(first[:STOP] + second[:TOTAL - STOP])
  np.testing.assert_array_equal(seen, ref_ids)
  worst = _largest_difference(_state(tmp_path), ref_state)
  print(f"8 -> 4 devices: largest difference {worst:.2e} of a leaf's largest magnitude")


def test_2_processes_then_1_see_the_same_examples(digits_dir, reference, tmp_path, monkeypatch):
  ref_state, ref_ids = reference
  workdir = tmp_path / "run"
  args = [f"--config=digits_vit:{RECIPE_ARG}", f"--config.input.data_dir={digits_dir}",
          *[f"--config.{k}={v}" for k, v in OVERRIDES.items()], f"--workdir={workdir}"]
  cluster = Cluster(tmp_path, args, entry=ENTRY)
  try:
    cluster.wait(time.time() + 600, codes=(preemption.PREEMPTED_EXIT_CODE,))
  finally:
    cluster.kill()
  # Each process read its own rows of every global batch: process 0 rows
  # [0, 16), process 1 rows [16, 32).
  halves = []
  for first_row in (0, BATCH // 2):
    lines = [json.loads(l) for l in (tmp_path / f"ids_{first_row}.jsonl").read_text().splitlines()]
    assert {tuple(l["rows"]) for l in lines} == {(first_row, first_row + BATCH // 2)}
    halves.append([l["ids"] for l in lines[:STOP]])
  stream = json.loads((workdir / "checkpoints" / str(STOP) / "stream" / "metadata").read_text())
  assert stream == {"shards": 2, "batch_size": BATCH, "examples": STOP * BATCH // 2,
                    "rollbacks": []}

  recorder = recording_ids(input_pipeline.create_train_dataset)
  monkeypatch.setattr(input_pipeline, "create_train_dataset", recorder)
  trainer.train_and_evaluate(_config(digits_dir), str(workdir), devices=jax.devices()[:8])
  (resumed,) = recorder.calls
  seen = np.concatenate([np.concatenate(halves, axis=1), np.stack(resumed[:TOTAL - STOP])])
  np.testing.assert_array_equal(seen, ref_ids)
  worst = _largest_difference(_state(workdir), ref_state)
  print(f"2 processes -> 1: largest difference {worst:.2e} of a leaf's largest magnitude")


def test_a_changed_global_batch_is_refused_unless_allowed(digits_dir, tmp_path, monkeypatch,
                                                          caplog):
  config = _config(digits_dir)
  with monkeypatch.context() as stopping:
    stopping.setattr(preemption.StopSignals, "should_stop", stop_at(10))
    with pytest.raises(errors.RunPreempted):
      trainer.train_and_evaluate(config, str(tmp_path))
  bigger = _config(digits_dir, **{"input.batch_size": 48})
  with pytest.raises(errors.ConfigMismatchError,
                     match=r"config.input.batch_size=48, but the checkpoint at step 10 was "
                           r"trained with batch_size=32 \(320 examples seen\).*"
                           r"--config.allow_batch_size_change=True"):
    trainer.train_and_evaluate(bigger, str(tmp_path))
  recorder = recording_ids(input_pipeline.create_train_dataset)
  monkeypatch.setattr(input_pipeline, "create_train_dataset", recorder)
  bigger.allow_batch_size_change = True
  caplog.set_level("WARNING")
  trainer.train_and_evaluate(bigger, str(tmp_path))
  assert any("batch_size changed from 32 to 48" in r.getMessage() and "example 320" in
             r.getMessage() for r in caplog.records)
  # The stream goes on at example 320: what a 32-batch run would read next.
  (after,) = recorder.calls
  monkeypatch.undo()
  expected = next(input_pipeline.create_train_dataset(
      config.input, seed=config.seed, start_example=320, stream_shards=1, with_ids=True,
      process_index=0, process_count=1).as_numpy_iterator())["id"]
  np.testing.assert_array_equal(after[0][:BATCH], expected)
