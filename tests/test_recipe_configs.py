"""Every CIFAR and ImageNet recipe builds, trains two steps and evaluates (clean,
EMA and corruption evaluator) on `tfds.testing.mock_data`."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import pytest  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

from configs import cifar10_vit, cifar100_vit, imagenet_deit  # noqa: E402
from vit_spectral.training import config_checks, robustness, trainer  # noqa: E402

CORRUPTIONS, SEVERITIES = ("brightness", "fog"), (1, 5)
# A narrow model: what is under test is the recipe plumbing, not the width.
NARROW = dict(hidden_size=32, num_heads=2, mlp_dim=64, depth=1)


def _shrink(config, *, image_size=None):
  """Two steps of the recipe on a CPU: small batch, one narrow block, few
  corruptions.

  Everything else (augmentation, Mixup/CutMix, EMA, decay masks, schedule
  shape) stays as the recipe has it.
  """
  config.total_steps, config.num_epochs = 2, None
  config.eval_every, config.eval_every_epochs = 2, None
  config.checkpoint_every, config.checkpoint_every_epochs = 2, None
  config.async_checkpointing = False
  config.optim.warmup_epochs, config.optim.warmup_steps = None, 1
  config.optim.cooldown_epochs, config.optim.cooldown_steps = None, 0
  config.input.batch_size = config.input.eval_batch_size = 8
  config.input.shuffle_buffer = 16
  config.input.download = True  # mock_data makes preparing a no-op
  if image_size:
    config.input.image_size = image_size
  config.model.update(NARROW)
  if robustness.enabled(config.robustness):
    config.robustness.corruptions = CORRUPTIONS
    config.robustness.severities = SEVERITIES
  return config


@pytest.mark.parametrize("module,arg,image_size", [
    (cifar10_vit, "recipe=park_kim", None),
    (cifar100_vit, "recipe=table10,corrupted=cifar10_corrupted", 32),
    (imagenet_deit, "", 32),
])
def test_recipe_trains_two_steps_and_evaluates(module, arg, image_size, tmp_path):
  config = _shrink(module.get_config(arg), image_size=image_size)
  config.input.data_dir = str(tmp_path / "tfds")
  config_checks.validate_config(config)
  with tfds.testing.mock_data(num_examples=8):
    metrics = trainer.train_and_evaluate(config, str(tmp_path / "workdir"))
  assert 0.0 <= metrics["eval_accuracy"] <= 1.0
  if config.ema_decay:
    assert 0.0 <= metrics["eval_ema_accuracy"] <= 1.0
  if robustness.enabled(config.robustness):
    per_pair = [metrics[robustness.metric_name(c, s)]
                for c in CORRUPTIONS for s in SEVERITIES]
    assert len(per_pair) == 4
    for s in SEVERITIES:
      expected = sum(metrics[robustness.metric_name(c, s)] for c in CORRUPTIONS) / 2
      assert metrics[f"corrupt_severity{s}_accuracy"] == pytest.approx(expected)
    assert metrics["corrupt_mean_accuracy"] == pytest.approx(sum(per_pair) / 4)


def test_robustness_sets_and_summary():
  from configs import common  # noqa: PLC0415
  cfg = robustness.robustness_config("cifar10_corrupted", corruptions=("fog", "snow"),
                                     severities=(2, 3))
  sets = robustness.corrupted_sets(cfg, common.input_config("cifar10", image_size=32,
                                                            batch_size=8))
  assert [(s.corruption, s.severity, s.input_config.dataset) for s in sets] == [
      ("fog", 2, "cifar10_corrupted/fog_2"), ("fog", 3, "cifar10_corrupted/fog_3"),
      ("snow", 2, "cifar10_corrupted/snow_2"), ("snow", 3, "cifar10_corrupted/snow_3")]
  assert all(s.input_config.eval_split == "test" for s in sets)
  summary = robustness.summarize({("fog", 2): 0.5, ("fog", 3): 0.25,
                                  ("snow", 2): 0.75, ("snow", 3): 0.25})
  assert summary["corrupt_severity2_accuracy"] == 0.625
  assert summary["corrupt_severity3_accuracy"] == 0.25
  assert summary["corrupt_mean_accuracy"] == 0.4375
  assert summary["corrupt_fog_3_accuracy"] == 0.25
  with pytest.raises(ValueError, match="severities"):
    robustness.validate(robustness.robustness_config("x", severities=(0,)))
  with pytest.raises(ValueError, match="unknown fields"):
    robustness.validate({"dataset": "x", "corruptions": ("a",), "severities": (1,),
                         "level": 3})


def test_prepared_corruption_set_is_read_per_severity(tmp_path):
  """A Hendrycks-style .npy set converted to TFDS is what the evaluator reads."""
  import numpy as np  # noqa: PLC0415
  from configs import common  # noqa: PLC0415
  from vit_spectral import data  # noqa: PLC0415
  from vit_spectral.data import corrupted  # noqa: PLC0415
  npy = tmp_path / "npy"
  npy.mkdir()
  rng = np.random.default_rng(0)
  labels = np.arange(20) % 3  # 4 examples per severity
  images = rng.integers(0, 256, (20, 8, 8, 3), dtype=np.uint8)
  np.save(npy / "labels.npy", labels)
  np.save(npy / "fog.npy", images)
  data_dir = str(tmp_path / "tfds")
  written = corrupted.store_corruptions(str(npy), "tiny_corrupted", data_dir, 3)
  assert written == [f"fog_{s}" for s in range(1, 6)]
  cfg = robustness.robustness_config("tiny_corrupted", corruptions=("fog",),
                                     severities=(2,))
  input_cfg = common.input_config("unused", image_size=8, batch_size=4,
                                  mean=(0.0,) * 3, std=(1.0,) * 3, data_dir=data_dir)
  (corrupted_set,) = robustness.corrupted_sets(cfg, input_cfg)
  ds, num_batches = data.create_eval_dataset(corrupted_set.input_config,
                                             process_index=0, process_count=1)
  (batch,) = list(ds.as_numpy_iterator())
  assert num_batches == 1
  np.testing.assert_array_equal(batch["label"], labels[4:8])
  np.testing.assert_allclose(batch["image"], images[4:8] / 255.0, atol=1e-6)
  with pytest.raises(ValueError, match="multiple of 5"):
    np.save(npy / "fog.npy", images[:7])
    np.save(npy / "labels.npy", labels[:7])
    corrupted.store_corruptions(str(npy), "bad_corrupted", data_dir, 3)
