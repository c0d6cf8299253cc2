"""The trainer in-process: masked evaluation counts every example once; the NaN
guard stops with the step number; the workdir gets config.json."""

import functools
import json
import os

import jax
import numpy as np
import pytest

from vit_spectral.configs import digits_vit
from vit_spectral.training import config_checks, sharding, steps, trainer
from vit_spectral.data import create_eval_dataset, get_builder
from vit_spectral.models import build_model


def tiny_config(**over):
  config = digits_vit.get_config("depth=1,width=16,heads=2,steps=6")
  config.log_every = config.eval_every = config.checkpoint_every = 3
  for key, value in over.items():
    config[key] = value
  return config


# 360 test digits: 64 -> 6 batches, the last padded; 90 is rounded up to 96 on
# the 8 devices (config_checks.round_eval_batch) -> 4 batches, the last padded.
@pytest.mark.parametrize("eval_batch_size", [64, 90])
def test_masked_eval_counts_each_test_example_exactly_once(eval_batch_size):
  config = tiny_config()
  config.input.eval_batch_size = eval_batch_size
  config.optim.warmup_steps = 1  # < the 6 steps (validate_config checks it)
  input_config = config_checks.validate_config(config).input  # what the trainer uses
  assert input_config.eval_batch_size == -(-eval_batch_size // 8) * 8
  mesh = sharding.make_mesh(config.mesh)
  model = build_model(config.model, num_classes=10)
  params = model.init(jax.random.key(0), np.zeros((1, 8, 8, 1), np.float32))["params"]
  rng = np.random.default_rng(0)
  params = jax.tree_util.tree_map(lambda a: a + rng.standard_normal(a.shape).astype(a.dtype), params)
  eval_step = jax.jit(functools.partial(steps.eval_step, model=model))
  got = trainer.evaluate(eval_step, params, input_config, mesh)

  # Independent: every test image through the model, no batching or padding.
  dataset, num_batches = create_eval_dataset(input_config)
  batches = list(dataset.take(num_batches).as_numpy_iterator())
  images = np.concatenate([b["image"][b["mask"]] for b in batches])
  labels = np.concatenate([b["label"][b["mask"]] for b in batches])
  assert len(labels) == get_builder("digits").info.splits["test"].num_examples == 360
  logits = np.asarray(jax.jit(model.apply)({"params": params}, images))
  expected = float((logits.argmax(-1) == labels).mean())
  assert 0.0 < expected < 1.0
  np.testing.assert_allclose(got["eval_accuracy"], expected, rtol=1e-6)


def test_nan_guard_stops_with_the_step_number(tmp_path):
  config = tiny_config()
  config.optim.learning_rate = 1e30
  config.optim.grad_clip_norm = None
  config.optim.warmup_steps = 0
  with pytest.raises(trainer.NonFiniteLossError, match=r"at step \d+"):
    trainer.train_and_evaluate(config, str(tmp_path))
  saved = json.loads((tmp_path / "config.json").read_text())
  assert saved["optim"]["learning_rate"] == 1e30
  # Nothing non-finite was checkpointed.
  ckpts = tmp_path / "checkpoints"
  assert not ckpts.exists() or not [d for d in os.listdir(ckpts) if d.isdigit()]
