"""Fine-tuning with `config.init_from`: a digits model trained and saved, then
fine-tuned at twice the resolution (the position embedding resampled) with a
new 2-class head on `digits_parity`; it starts from the loaded weights, learns
the new task, and a rerun resumes its own checkpoint instead of the source.
Plus the errors: bad format, missing path, a head that does not fit."""

import importlib
import json
import os

import jax
import numpy as np
import pytest

from vit_spectral import errors
from vit_spectral.configs import digits_vit
from vit_spectral.models import posemb
from vit_spectral.configs import transfer_linear_probe
from vit_spectral.durability import checkpointing

from vit_spectral.training import config_checks, init_from, trainer

from vit_spectral.planning import dry_run

SOURCE_STEPS, FINETUNE_STEPS = 150, 40


def tiny(steps: int, **input_fields):
  """A 1-block width-32 digits ViT (patch 2), no dropout or smoothing: few
  steps learn something."""
  config = digits_vit.get_config(f"depth=1,width=32,heads=2,steps={steps}")
  config.log_every = config.eval_every = config.checkpoint_every = steps
  config.async_checkpointing = False
  config.model.dropout_rate = 0.0
  config.label_smoothing = 0.0
  config.optim.warmup_steps = 5
  config.optim.learning_rate = 5e-3
  config.input.update(input_fields)
  return config


def finetune_config(source: str, steps: int = FINETUNE_STEPS):
  """Parity at 16×16: the 8×8 digits resized (train and eval), 8×8 patch grid
  instead of 4×4, a new 2-class head."""
  config = tiny(steps, dataset="digits_parity", image_size=16, train_augment="resize",
                eval_resize="resize")
  config.optim.learning_rate = 3e-3
  config.init_from.path = source
  return config


@pytest.fixture(scope="module")
def source(tmp_path_factory):
  """A digits (10-class) run of SOURCE_STEPS steps: its workdir."""
  workdir = str(tmp_path_factory.mktemp("source"))
  metrics = trainer.train_and_evaluate(tiny(SOURCE_STEPS), workdir)
  assert metrics["eval_accuracy"] > 0.6   # measured 0.758
  return workdir


def _flat(tree):
  return {"/".join(str(k.key) for k in path): np.asarray(leaf)
          for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


@pytest.mark.extended
def test_finetune_starts_from_the_loaded_weights_learns_and_resumes_its_own(
    source, tmp_path, monkeypatch):
  started, original = [], trainer.initial_state

  def spy(settings, jitted):
    state = original(settings, jitted)
    started.append(jax.device_get(state))   # before the first update (it is donated)
    return state

  monkeypatch.setattr(trainer, "initial_state", spy)
  workdir = str(tmp_path / "parity")
  metrics = trainer.train_and_evaluate(finetune_config(source), workdir)

  # The state before the first update: the source's weights but for the head
  # (fresh, 2 classes) and the position embedding (resampled 4x4 -> 8x8 grid).
  (state,) = started
  loaded, _ = checkpointing.latest_params(source)
  want, got = _flat(loaded), _flat(state.params)
  assert set(want) == set(got)
  for path in want:
    if path.startswith("head/"):
      assert got[path].shape[-1] == 2 and want[path].shape[-1] == 10
    elif path == "pos_embedding":
      assert want[path].shape == (1, 1 + 4 * 4, 32) and got[path].shape == (1, 1 + 8 * 8, 32)
      np.testing.assert_array_equal(got[path][:, :1], want[path][:, :1])   # CLS row kept
      np.testing.assert_allclose(
          got[path], posemb.resample(want[path], 1, (8, 8), (4, 4), "bicubic"), rtol=1e-6)
    else:
      np.testing.assert_array_equal(got[path], want[path], err_msg=path)
  assert int(state.step) == 0
  assert not any(np.any(m) for m in jax.tree_util.tree_leaves(state.opt_state)
                 if np.ndim(m) > 0)        # fresh Adam moments

  # It learns the new task: 87.8% measured after 40 steps (79.7% from scratch).
  assert metrics["eval_accuracy"] >= 0.85

  # A second invocation resumes the run's own checkpoint: init_from is not read.
  def never(*args, **kwargs):
    raise AssertionError("init_from read on resume")

  monkeypatch.setattr(init_from, "load", never)
  again = trainer.train_and_evaluate(finetune_config(source), workdir)
  assert again == metrics
  assert json.loads((tmp_path / "parity" / "final_metrics.json").read_text())["step"] == \
      FINETUNE_STEPS


def test_errors_name_the_field_and_nothing_is_trained(tmp_path):
  source = str(tmp_path / "source")   # the checks below do not read it
  # A bad format, a path of the wrong kind: one line naming the field.
  config = finetune_config(source)
  config.init_from.format = "torch"
  with pytest.raises(ValueError, match=r"init_from.format='torch'; choose one of "
                     r"\['timm', 'big_vision', 'vit_spectral'\]"):
    config_checks.validate_config(config)
  config = finetune_config(str(tmp_path / "deit.npz"))
  config.init_from.format = "timm"
  with pytest.raises(ValueError, match=r"a 'timm' checkpoint is a \.safetensors"):
    config_checks.validate_config(config)
  config = finetune_config(source)
  config.init_from.use_ema = True
  config.init_from.format = "big_vision"
  with pytest.raises(ValueError, match="init_from.use_ema=True is for init_from.format="):
    config_checks.validate_config(config)

  # A path that does not exist stops before the workdir exists.
  workdir = tmp_path / "never"
  with pytest.raises(errors.ConfigError, match="init_from.path=.*is not a trainer workdir"):
    trainer.train_and_evaluate(finetune_config(str(tmp_path / "missing")), str(workdir))
  config = finetune_config(str(tmp_path / "missing.safetensors"))
  config.init_from.format = "timm"
  with pytest.raises(errors.ConfigError, match="missing.safetensors'?: no such file"):
    trainer.train_and_evaluate(config, str(workdir))
  assert not workdir.exists()


@pytest.mark.extended   # it trains the source run
def test_a_head_that_does_not_fit_is_named_and_nothing_is_saved(source, tmp_path):
  """Another class count with reinit_head=False: the head is named, nothing saved."""
  workdir = tmp_path / "never"
  config = finetune_config(source)
  config.init_from.reinit_head = False
  with pytest.raises(errors.WeightsMismatchError,
                     match=r"head/(bias|kernel) has shape \(.*10,?\), the model's "
                     r"head/\1 needs \(.*2,?\); the class "
                     r"count differs: re-initialise the head"):
    trainer.train_and_evaluate(config, str(workdir))
  assert not (workdir / "checkpoints").exists() or not [
      d for d in os.listdir(workdir / "checkpoints") if d.isdigit()]


def test_settings_defaults_are_off():
  settings = init_from.InitFromSettings()
  assert not settings.enabled and settings.format == "vit_spectral" and settings.reinit_head
  assert not init_from.InitFromSettings(path="").enabled
  with pytest.raises(ValueError, match="init_from.step=0 must be in"):
    init_from.InitFromSettings(path="w", step=0)


@pytest.mark.parametrize("recipe", ["cait_finetune_fourier", "deit_s_finetune_fourier",
                                    "transfer_linear_probe"])
def test_recipes_plan_without_the_weights_and_train_only_with_them(recipe, tmp_path):
  """`--dry_run` plans the fine-tuning recipes without the pretrained weights;
  training stops at once, naming init_from.path, before any data or workdir."""
  recipe = importlib.import_module(f"vit_spectral.configs.{recipe}")
  config = recipe.get_config(f"pretrained={tmp_path}/none" if recipe is transfer_linear_probe
                             else f"path={tmp_path}/weights.safetensors")
  config.input.batch_size = 8
  config.model.update(hidden_size=32, num_heads=2, mlp_dim=64, depth=1)
  plan = dry_run.plan(config)
  assert plan.meta.num_classes == (102 if recipe is transfer_linear_probe else 1000)
  with pytest.raises(errors.ConfigError, match=r"init_from\.path="):
    trainer.train_and_evaluate(config, str(tmp_path / "workdir"))
  assert not (tmp_path / "workdir").exists()


@pytest.mark.extended
def test_cait_finetune_recipe_trains_from_timms_cait_weights(tmp_path, monkeypatch):
  """Paper 000 App. G.1's recipe (configs/cait_finetune_fourier.py) runs from a
  timm CaiT file: two steps on mock ImageNet at 32x32, CaiT-XXS24's width
  with 2 self-attention blocks (the fixture's random weights, cut to 2).
  The first state holds the file's tensors (the 14x14 position embedding
  resampled to 2x2 bicubically, as timm does) and FeatScale's s, t at zero."""
  import tensorflow_datasets as tfds  # noqa: PLC0415
  from safetensors.numpy import save_file  # noqa: PLC0415
  from tests.models import pretrained_fixtures as fx  # noqa: PLC0415
  from vit_spectral.configs import cait_finetune_fourier  # noqa: PLC0415
  from vit_spectral.models import scan_to_loop  # noqa: PLC0415
  weights = {k: v for k, v in fx.fixture_weights(fx.read_fixture("cait_xxs24_224")).items()
             if not (k.startswith("blocks.") and int(k.split(".")[1]) >= 2)}
  path = tmp_path / "cait_xxs24_224.safetensors"
  save_file(weights, str(path))
  config = cait_finetune_fourier.get_config(
      f"variant=CaiT-XXS24,method=feat_scale,path={path},dtype=float32")
  config.model.depth = 2
  config.total_steps, config.num_epochs = 2, None
  config.eval_every, config.eval_every_epochs = 2, None
  config.checkpoint_every, config.checkpoint_every_epochs = 2, None
  config.async_checkpointing = False
  config.optim.warmup_epochs, config.optim.warmup_steps = None, 1
  config.input.update(batch_size=8, eval_batch_size=8, shuffle_buffer=16, image_size=32,
                      download=True, data_dir=str(tmp_path / "tfds"))
  config_checks.validate_config(config)

  started, original = [], trainer.initial_state

  def spy(settings, jitted):
    state = original(settings, jitted)
    started.append(jax.device_get(state))   # before the first update (it is donated)
    return state

  monkeypatch.setattr(trainer, "initial_state", spy)
  with tfds.testing.mock_data(num_examples=8):
    metrics = trainer.train_and_evaluate(config, str(tmp_path / "workdir"))
  assert 0.0 <= metrics["eval_accuracy"] <= 1.0
  (state,) = started
  got = _flat(scan_to_loop(state.params))
  np.testing.assert_array_equal(got["head/kernel"], weights["head.weight"].T)
  np.testing.assert_array_equal(got["class_stage/classblock_1/norm2/scale"],
                                weights["blocks_token_only.1.norm2.weight"])
  np.testing.assert_array_equal(got["encoder/encoderblock_1/mlp/fc1/kernel"],
                                weights["blocks.1.mlp.fc1.weight"].T)
  np.testing.assert_array_equal(got["encoder/encoderblock_0/alpha1"], weights["blocks.0.gamma_1"])
  np.testing.assert_allclose(got["pos_embedding"],
                             posemb.resample(weights["pos_embed"], 0, (2, 2), (14, 14),
                                             "bicubic"), rtol=1e-6)
  for block in range(2):
    for name in ("dc_scale", "hc_scale"):
      assert not np.any(got[f"encoder/encoderblock_{block}/feat_scale/{name}"])
