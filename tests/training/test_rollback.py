"""`config.on_nonfinite = "rollback"`: a poisoned batch (NaN pixels in global
batch 15 of the stream) makes the loss NaN at step 15; the run restores its
step-10 checkpoint, skips batches 11-15 of the stream (`rollback_skip_batches`
= 3, widened to reach the poisoned batch) and finishes. A second run from
scratch ends with the same parameters bit for bit; a run stopped after its
step-20 checkpoint (which records the skip) and resumed ends with them too,
without a second rollback. A poison that does not go away ends the run after
`max_rollbacks` rollbacks with one message.

The poison is put into the stream itself (`input_pipeline.create_train_dataset`
tapped: `tests.training.run_control.StreamTap`), by stream batch number, as bad data would be: wherever a run starts
reading, batch 15 is poisoned.
"""

import json

import jax
import numpy as np
import pytest

from vit_spectral import errors
from vit_spectral.configs import digits_vit
from vit_spectral.data import input_pipeline
from vit_spectral.durability import checkpointing, preemption
from vit_spectral.training import trainer
from tests.training.run_control import StreamTap, assert_trees_equal, stop_at

# End-to-end runs: .ci/run runs them as a step of their own (pyproject's markers).
pytestmark = pytest.mark.extended

TOTAL, EVERY, BATCH, POISONED = 30, 10, 32, 15


def _config(**fields):
  config = digits_vit.get_config(f"depth=1,width=32,heads=2,steps={TOTAL}")
  config.input.batch_size = BATCH
  config.checkpoint_every = config.log_every = EVERY
  config.eval_every = TOTAL
  config.optim.warmup_steps = 2
  config.ema_decay = 0.9
  config.on_nonfinite = "rollback"
  config.rollback_skip_batches = 3
  for key, value in fields.items():
    setattr(config, key, value)
  return config


def _poisoned(batch_numbers):
  """NaN images in the global batches whose numbers `batch_numbers` accepts."""

  def tap(kwargs, number, batch):
    if batch_numbers(number):
      batch = dict(batch, image=np.full_like(batch["image"], np.nan))
    return batch, None

  return tap


@pytest.fixture
def poison(monkeypatch):
  def install(batch_numbers):
    monkeypatch.setattr(input_pipeline, "create_train_dataset", StreamTap(
        input_pipeline.create_train_dataset, _poisoned(batch_numbers)))
  return install


def _state(workdir):
  state, step = checkpointing.latest_state(str(workdir))
  assert step == TOTAL
  return state


def _stream(workdir, step):
  return json.loads((workdir / "checkpoints" / str(step) / "stream" / "metadata").read_text())


def test_rollback_skips_the_poisoned_batch_reproducibly(tmp_path, poison, monkeypatch, caplog):
  poison(lambda number: number == POISONED)
  caplog.set_level("WARNING")
  first = tmp_path / "first"
  metrics = trainer.train_and_evaluate(_config(), str(first))
  assert np.isfinite(metrics["eval_loss"])
  rolled = [r.getMessage() for r in caplog.records if "rolled back" in r.getMessage()]
  assert rolled == [
      f"non-finite loss at step {POISONED}: rolled back to step {EVERY} and skipped the "
      f"stream's global batches {EVERY + 1}-{POISONED} ({POISONED - EVERY} batches); "
      "rollback 1 of at most 3"], rolled
  skip = {"step": POISONED, "restored_step": EVERY, "first_batch": EVERY + 1,
          "batches": POISONED - EVERY}
  per_shard = BATCH
  assert _stream(first, 2 * EVERY) == {
      "shards": 1, "batch_size": BATCH, "examples": (2 * EVERY + POISONED - EVERY) * per_shard,
      "rollbacks": [skip]}
  assert _stream(first, EVERY)["rollbacks"] == []  # saved before the rollback
  state = _state(first)
  assert all(np.isfinite(leaf).all() for leaf in jax.tree_util.tree_leaves(state))

  # From scratch again: the same rollback, the same parameters.
  second = tmp_path / "second"
  trainer.train_and_evaluate(_config(), str(second))
  assert_trees_equal(_state(second), state)

  # Stopped after the step-20 checkpoint (which records the skip), resumed.
  third = tmp_path / "third"
  caplog.clear()
  with monkeypatch.context() as stopping:
    stopping.setattr(preemption.StopSignals, "should_stop", stop_at(2 * EVERY))
    with pytest.raises(errors.RunPreempted, match=f"stopped at step {2 * EVERY}"):
      trainer.train_and_evaluate(_config(), str(third))
  assert sum("rolled back" in r.getMessage() for r in caplog.records) == 1
  caplog.clear()
  trainer.train_and_evaluate(_config(), str(third))
  assert not any("rolled back" in r.getMessage() for r in caplog.records)
  assert_trees_equal(_state(third), state)
  assert _stream(third, TOTAL) == _stream(first, TOTAL)


def test_a_poison_that_stays_gives_up_after_max_rollbacks(tmp_path, poison):
  # Every batch from 15 on: step 15 fails (batch 15), then step 11 twice
  # (batch 16, then batch 17), the second time after the last rollback.
  poison(lambda number: number >= POISONED)
  with pytest.raises(trainer.NonFiniteLossError,
                     match=r"at step 11; .* Gave up after 2 rollbacks \(config.max_rollbacks=2\) "
                           r"at steps \[15, 11\]"):
    trainer.train_and_evaluate(_config(max_rollbacks=2), str(tmp_path / "run"))


def test_stop_is_the_default_and_names_the_step(tmp_path, poison):
  poison(lambda number: number == 3)
  config = _config()
  config.on_nonfinite = "stop"
  with pytest.raises(trainer.NonFiniteLossError, match="at step 3; the last checkpoint is at "
                     "step None.*config.on_nonfinite='rollback'"):
    trainer.train_and_evaluate(config, str(tmp_path / "run"))
  assert digits_vit.get_config().on_nonfinite == "stop"


@pytest.mark.parametrize("field, value, message", [
    ("on_nonfinite", "skip", r"config.on_nonfinite='skip'; choose one of \['stop', 'rollback'\]"),
    ("rollback_skip_batches", 0, "config.rollback_skip_batches=0 must be at least 1"),
    ("max_rollbacks", 0, "config.max_rollbacks=0 must be at least 1"),
])
def test_rollback_fields_are_checked(field, value, message):
  config = _config(**{field: value})
  with pytest.raises(errors.ConfigError, match=message):
    trainer.set_up(config)
