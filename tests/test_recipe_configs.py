"""Every CIFAR and ImageNet recipe builds, trains two steps and evaluates (clean,
EMA and corruption evaluator) on `tfds.testing.mock_data`."""

import importlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import pytest  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

from vit_spectral.configs import (cifar10_vit, cifar100_vit, imagenet_cait,  # noqa: E402
                                  imagenet_deit)
from vit_spectral.configs import digits_swin, imagenet_swin  # noqa: E402
from vit_spectral.training import config_checks, robustness, trainer  # noqa: E402

# End-to-end runs: .ci/run runs them as a step of their own (pyproject's markers).
pytestmark = pytest.mark.extended

CORRUPTIONS, SEVERITIES = ("brightness", "fog"), (1, 5)
# A narrow model: what is under test is the recipe plumbing, not the width.
NARROW = dict(hidden_size=32, num_heads=2, mlp_dim=64, depth=1)


def _shrink(config, *, image_size=None, narrow=NARROW):
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
  config.model.update(narrow)
  if "class_depth" in config.model:     # CaiT: one class-attention block
    config.model.class_depth = 1
  if robustness.enabled(config.robustness):
    config.robustness.corruptions = CORRUPTIONS
    config.robustness.severities = SEVERITIES
  return config


@pytest.mark.parametrize("module,arg,image_size", [
    (cifar10_vit, "recipe=park_kim", None),
    (cifar100_vit, "recipe=table10,corrupted=cifar10_corrupted", 32),
    (imagenet_deit, "", 32),
    (imagenet_cait, "attn_scale", 32),
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
  from vit_spectral.configs import common  # noqa: PLC0415
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
  from vit_spectral.configs import common  # noqa: PLC0415
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


# Paper 004 App. G Table 10, read from the paper (not from the recipe code).
TABLE10 = dict(drop_path={"Ti": 0.1, "S": 0.2, "B": 0.2, "L": 0.3},
               batch={"Ti": 256, "S": 256, "B": 128, "L": 32},
               epochs=300, cooldown=10, warmup=20, lr=6.25e-5, floor=1e-6, eps=1e-8)


@pytest.mark.parametrize("size,dataset", [("Ti", "cifar10"), ("B", "cifar100"),
                                          ("L", "cifar10")])
def test_table10_has_one_source(size, dataset):
  """hopfield_vit.py (attention=dot_product) and cifarXX_vit.py:recipe=table10
  build the same Table-10 run, and it is the paper's."""
  from vit_spectral.configs import hopfield_vit  # noqa: PLC0415
  cifar = {"cifar10": cifar10_vit, "cifar100": cifar100_vit}[dataset]
  a = hopfield_vit.get_config(f"size={size},dataset={dataset},attention=dot_product")
  b = cifar.get_config(f"recipe=table10,size={size},corrupted=")
  for section in ("input", "optim", "mixup", "model"):
    assert a[section].to_dict() == b[section].to_dict(), section
  for field in ("num_epochs", "label_smoothing", "ema_decay", "eval_every_epochs",
                "checkpoint_every_epochs"):
    assert a[field] == b[field], field
  assert a.num_epochs == TABLE10["epochs"] + TABLE10["cooldown"]
  assert a.optim.cooldown_epochs == TABLE10["cooldown"]
  assert a.optim.warmup_epochs == TABLE10["warmup"]
  assert a.optim.warmup_init_learning_rate == TABLE10["floor"]
  assert a.optim.end_learning_rate == TABLE10["floor"]
  assert (a.optim.learning_rate, a.optim.eps) == (TABLE10["lr"], TABLE10["eps"])
  assert a.model.drop_path_rate == TABLE10["drop_path"][size]
  assert a.input.batch_size == TABLE10["batch"][size]
  assert (a.input.image_size, a.model.variant) == (224, f"{size}/16")
  assert (a.input.randaugment_magnitude, a.input.randaugment_magnitude_std) == (9, 0.5)
  assert a.input.randaugment_layers > 0 and a.input.random_erasing == 0.25
  assert (a.mixup.mixup_alpha, a.mixup.cutmix_alpha, a.label_smoothing) == (0.8, 1.0, 0.1)


# timm train.py: lr = lr_base · (global batch / lr_base_size)^k with --lr-base-size
# 256 and, --lr-base-scale unset, k = 1/2 for optimizers whose name holds "ada"
# or "lamb" (AdamW here), k = 1 otherwise.
TIMM_LR_BASE_SIZE = 256
SCALING_EXPONENT = {"none": 0.0, "linear": 1.0, "sqrt": 0.5}


@pytest.mark.parametrize("scaling", [None, "none", "linear", "sqrt"])
@pytest.mark.parametrize("size", ["Ti", "S", "B", "L"])
def test_table10_learning_rate_is_the_base_rate_scaled_by_batch(size, scaling):
  """Table 10's "base learning rate" 6.25e-5 read as timm's --lr-base, scaled
  to each size's batch; the default is timm's AdamW rule (sqrt)."""
  from vit_spectral.configs import hopfield_vit  # noqa: PLC0415
  from vit_spectral.training import optim  # noqa: PLC0415
  arg = f"size={size}" + ("" if scaling is None else f",lr_scaling={scaling}")
  exponent = SCALING_EXPONENT[scaling or "sqrt"]
  batch = TABLE10["batch"][size]
  expected = TABLE10["lr"] * (batch / TIMM_LR_BASE_SIZE) ** exponent
  for config in (hopfield_vit.get_config(arg),
                 cifar10_vit.get_config(f"recipe=table10,{arg},corrupted=")):
    assert config.input.batch_size == batch
    peak = optim.peak_learning_rate(config.optim, config.input.batch_size)
    assert peak == pytest.approx(expected, rel=1e-12)
    # A batch set on the command line is scaled by the same rule, as timm does.
    peak = optim.peak_learning_rate(config.optim, 4 * batch)
    assert peak == pytest.approx(
        TABLE10["lr"] * (4 * batch / TIMM_LR_BASE_SIZE) ** exponent, rel=1e-12)


def test_table10_unknown_lr_scaling_raises():
  from vit_spectral.configs import hopfield_attention_only, hopfield_vit  # noqa: PLC0415
  message = r"lr_scaling='cubic'; choose one of \['none', 'linear', 'sqrt'\]"
  for get_config in (hopfield_vit.get_config, hopfield_attention_only.get_config,
                     lambda arg: cifar10_vit.get_config(f"recipe=table10,{arg}")):
    with pytest.raises(ValueError, match=message):
      get_config("lr_scaling=cubic")
  with pytest.raises(ValueError, match="lr_scaling.*recipe=table10"):
    cifar10_vit.get_config("recipe=park_kim,lr_scaling=sqrt")


def test_statistics_have_one_source():
  """Every recipe normalises a data set with the same statistics."""
  from vit_spectral.configs import (cifar10_quadratic, cifar100_eigen,  # noqa: PLC0415
                       cifar100_vit_ti_fourier, imagenet_deit_s_fourier,
                       lipsformer_cifar, lipsformer_imagenet)
  from vit_spectral.data import DATASET_STATISTICS  # noqa: PLC0415
  by_dataset = {}
  for config in (cifar10_vit.get_config(), cifar100_vit.get_config(),
                 cifar100_eigen.get_config(), cifar100_vit_ti_fourier.get_config(),
                 lipsformer_cifar.get_config(), lipsformer_cifar.get_config("dataset=cifar100"),
                 cifar10_quadratic.get_config(), imagenet_deit.get_config(),
                 imagenet_deit_s_fourier.get_config(), lipsformer_imagenet.get_config()):
    by_dataset.setdefault(config.input.dataset, set()).add(
        (tuple(config.input.mean), tuple(config.input.std)))
  assert sorted(by_dataset) == ["cifar10", "cifar100", "imagenet2012"]
  for dataset, stats in by_dataset.items():
    assert stats == {tuple(DATASET_STATISTICS[dataset])}, dataset


def test_paper_003_recipes_are_park_and_kims():
  """cifar100_eigen.py and cifar100_vit_ti_fourier.py train with the recipe of
  cifar100_vit.py:recipe=park_kim (paper 003 §5), augmentations included."""
  from vit_spectral.configs import cifar100_eigen, cifar100_vit_ti_fourier  # noqa: PLC0415
  reference = cifar100_vit.get_config("recipe=park_kim,corrupted=")
  for config in (cifar100_eigen.get_config(), cifar100_vit_ti_fourier.get_config()):
    for section in ("input", "optim", "mixup"):
      assert config[section].to_dict() == reference[section].to_dict(), section
    assert config.label_smoothing == reference.label_smoothing == 0.1
    assert config.input.randaugment_layers > 0 and config.mixup.mixup_alpha > 0


# The CSwin recipes' narrow shape: two one-block stages of widths 8 and 16
# (grids 8 and 4 on 32² images: stripes, then global attention).
NARROW_CSWIN = dict(hidden_size=8, depths=(1, 1), num_heads=(2, 4), stripe_widths=(1, 4))


@pytest.mark.parametrize("name", ["imagenet_cswin", "lipsformer_cswin_imagenet"])
def test_cswin_recipes_train_two_steps_and_evaluate(name, tmp_path):
  module = importlib.import_module(f"vit_spectral.configs.{name}")
  config = _shrink(module.get_config("size=T"), image_size=32, narrow=NARROW_CSWIN)
  config.input.data_dir = str(tmp_path / "tfds")
  config_checks.validate_config(config)
  with tfds.testing.mock_data(num_examples=8):
    metrics = trainer.train_and_evaluate(config, str(tmp_path / "workdir"))
  assert 0.0 <= metrics["eval_accuracy"] <= 1.0
  assert 0.0 <= metrics["eval_ema_accuracy"] <= 1.0


# The Swin recipes' narrow shape: two one-block stages (8² tokens in shifted 4²
# windows, then 4² in one window), looped.
NARROW_SWIN = dict(embed_dim=16, depths=(1, 1), num_heads=(1, 2), window_size=4,
                   encoder_mode="loop")


@pytest.mark.parametrize("arg", ["row=swin_s_attn_scale", "row=lipsformer_swin_t"])
def test_swin_recipes_train_two_steps_and_evaluate(arg, tmp_path):
  config = _shrink(imagenet_swin.get_config(arg), image_size=32, narrow=NARROW_SWIN)
  config.input.data_dir = str(tmp_path / "tfds")
  config_checks.validate_config(config)
  with tfds.testing.mock_data(num_examples=8):
    metrics = trainer.train_and_evaluate(config, str(tmp_path / "workdir"))
  assert 0.0 <= metrics["eval_accuracy"] <= 1.0
  if config.ema_decay:    # LipsFormer's recipe; Swin's has no EMA
    assert 0.0 <= metrics["eval_ema_accuracy"] <= 1.0


def test_digits_swin_trains_two_steps(tmp_path):
  config = digits_swin.get_config("model=LipsFormer-Swin-T,attention=attn_scale")
  config.total_steps = config.eval_every = config.checkpoint_every = 2
  config.optim.warmup_steps = 1
  config.model.depths = (1, 1)
  metrics = trainer.train_and_evaluate(config, str(tmp_path / "workdir"))
  assert 0.0 <= metrics["eval_accuracy"] <= 1.0
