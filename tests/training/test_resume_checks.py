"""A rerun in a used workdir: a config that does not fit the checkpoints stops
before anything is written, one that fits resumes and is recorded, and a config
that fails its checks leaves no workdir behind."""

import json
import os
import shutil

import jax
import pytest

from vit_spectral import errors
from vit_spectral.configs import cifar10_vit, digits_vit
from vit_spectral.durability import resume


from vit_spectral.training import trainer


def tiny_config(arg="depth=1,width=16,heads=2,steps=6"):
  config = digits_vit.get_config(arg)
  config.log_every = config.eval_every = config.checkpoint_every = 3
  config.optim.warmup_steps = 1
  return config


def _snapshot(workdir):
  """Every file under workdir except the log and event files, with contents."""
  files = {}
  for folder, _, names in os.walk(workdir):
    for name in names:
      if name == "train.log" or name.startswith("events.out"):
        continue
      path = os.path.join(folder, name)
      with open(path, "rb") as f:
        files[os.path.relpath(path, workdir)] = f.read()
  return files


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """A workdir that trained tiny_config() for 6 steps, and its files."""
  workdir = str(tmp_path_factory.mktemp("resume") / "w")
  trainer.train_and_evaluate(tiny_config(), workdir)
  return workdir


@pytest.mark.extended
def test_a_config_that_changes_shapes_stops_and_writes_nothing(trained):
  before = _snapshot(trained)
  with pytest.raises(errors.ConfigMismatchError) as raised:
    trainer.train_and_evaluate(tiny_config("depth=2,width=16,heads=2,steps=6"), trained)
  message = str(raised.value)
  assert "step 6" in message and "model.depth 1 -> 2" in message
  # The first tensor named is a parameter, with both shapes.
  assert "Tensors: params/encoder/" in message and "stored (1, " in message
  assert "this config (2, " in message
  assert _snapshot(trained) == before  # config.json, history, checkpoints untouched
  assert raised.value.log_path == os.path.join(trained, "train.log")
  with open(raised.value.log_path) as f:
    assert "ConfigMismatchError" in f.read()  # the traceback went to the log file


@pytest.mark.extended
def test_a_config_that_fits_resumes_and_is_recorded(trained, tmp_path):
  trained = str(shutil.copytree(trained, tmp_path / "w"))  # the fixture stays as trained
  config = tiny_config("depth=1,width=16,heads=2,steps=9")
  config.optim.learning_rate = 1e-3
  trainer.train_and_evaluate(config, trained)
  with open(os.path.join(trained, "final_metrics.json")) as f:
    assert json.load(f)["step"] == 9
  history = sorted(os.listdir(os.path.join(trained, resume.HISTORY_DIR)))
  assert history == ["run-000.json", "run-001.json"]
  with open(os.path.join(trained, resume.HISTORY_DIR, "run-001.json")) as f:
    entry = json.load(f)
  assert entry["started_at_step"] == 6
  assert entry["changed"] == {"optim.learning_rate": [0.002, 0.001], "total_steps": [6, 9]}
  with open(os.path.join(trained, resume.HISTORY_DIR, "run-000.json")) as f:
    assert json.load(f)["config"]["optim"]["learning_rate"] == 0.002
  with open(os.path.join(trained, "config.json")) as f:
    assert json.load(f)["optim"]["learning_rate"] == 0.001


def test_structure_differences_name_each_tensor():
  stored = {"params": {"a": jax.ShapeDtypeStruct((4, 16), "float32"),
                       "b": jax.ShapeDtypeStruct((2,), "float32")}}
  same = {"params": {"a": jax.ShapeDtypeStruct((4, 16), "float32"),
                     "b": jax.ShapeDtypeStruct((2,), "float32")}}
  assert resume.structure_differences(stored, same) == []
  other = {"params": {"a": jax.ShapeDtypeStruct((6, 16), "float32"),
                      "c": jax.ShapeDtypeStruct((2,), "bfloat16")}}
  assert resume.structure_differences(stored, other) == [
      "params/a: stored (4, 16) float32, this config (6, 16) float32",
      "params/b: stored (2,) float32, this config absent",
      "params/c: stored absent, this config (2,) bfloat16",
  ]


def test_changed_fields_lists_each_leaf():
  before = {"optim": {"lr": 1, "name": "adamw"}, "seed": 0}
  now = {"optim": {"lr": 2, "name": "adamw"}, "seed": 0, "new": [1, 2]}
  assert resume.changed_fields(before, now) == {"new": ("(absent)", [1, 2]),
                                                "optim.lr": (1, 2)}


def test_an_unreadable_config_json_is_kept_aside_when_the_run_starts(tmp_path):
  (tmp_path / "config.json").write_text('{"seed": ')
  assert resume.previous_config(str(tmp_path)) is None
  assert (tmp_path / "config.json").read_text() == '{"seed": '  # untouched while checking
  resume.record_config(tiny_config(), str(tmp_path), None, start_step=0)
  assert (tmp_path / "config.json.unreadable").read_text() == '{"seed": '
  with open(tmp_path / "config.json") as f:
    assert json.load(f)["total_steps"] == 6


def test_invalid_configs_leave_no_workdir(tmp_path):
  workdir = tmp_path / "w"
  config = tiny_config()
  config.optim.warmup_steps = 6  # >= total_steps: found by the durations check
  with pytest.raises(errors.ConfigError, match="warmup_steps=6"):
    trainer.train_and_evaluate(config, str(workdir))
  config = cifar10_vit.get_config()
  config.input.data_dir = str(tmp_path / "no_tfds_here")
  with pytest.raises(errors.RunError, match="not prepared"):
    trainer.train_and_evaluate(config, str(workdir))
  assert not workdir.exists()
