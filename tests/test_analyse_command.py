"""vit-spectral-analyse: a digits run and a timm weights file analysed end to end
(CSV, JSON and PNGs, values equal to diagnose on the same model and images),
load_workdir, and one line for each kind of bad input."""

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from safetensors.numpy import save_file

from tests.models import pretrained_fixtures as fx
from vit_spectral import analyse, analysis, data
from vit_spectral.configs import digits_vit
from vit_spectral.training import trainer


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("run")
  config = digits_vit.get_config("depth=2,width=16,heads=2,steps=3")
  config.log_every = config.eval_every = config.checkpoint_every = 3
  config.optim.warmup_steps = 1
  trainer.train_and_evaluate(config, str(workdir))
  return str(workdir)


@pytest.mark.extended     # trains a digits run (about 18 s)
def test_analyse_a_digits_run(digits_run, tmp_path, capsys):
  out = tmp_path / "out"
  assert analyse.main([f"--workdir={digits_run}", f"--out={out}", "--num_images=12",
                       "--batch_size=5"]) == 0
  printed = capsys.readouterr().out
  assert "step 3 (raw): digits test (the run's eval transform), 12 images" in printed
  assert sorted(os.listdir(out)) == ["diagnosis.csv", "diagnosis.json", "layers.png",
                                     "spectrum.png"]
  for png in ("layers.png", "spectrum.png"):
    with Image.open(out / png) as image:
      assert image.size[0] > 400 and image.size[1] > 300

  frame = pd.read_csv(out / "diagnosis.csv")
  assert set(frame["model"]) == {"trained", "init"}
  record = json.loads((out / "diagnosis.json").read_text())
  assert record["source"]["step"] == 3 and record["num_images"] == 12

  # The same numbers as diagnose on load_workdir's model and the run's eval images.
  model, variables, config = analysis.load_workdir(digits_run)
  assert config.model.depth == 2
  images = data.eval_images(config.input, 12)
  want = analysis.diagnose(model, variables, images).per_layer()
  got = frame[frame.model == "trained"].groupby(["layer", "metric"])["value"].mean()
  for metric in ("hc_dc_ratio", "attention_entropy", "h_cond"):
    np.testing.assert_allclose(got.xs(metric, level="metric"), want[metric], rtol=1e-5,
                               err_msg=metric)
  # Trained and init differ (the run's parameters were read, not the init's).
  init = frame[frame.model == "init"].groupby(["layer", "metric"])["value"].mean()
  assert not np.allclose(init.xs("hc_dc_ratio", level="metric"),
                         got.xs("hc_dc_ratio", level="metric"))


def test_analyse_a_timm_weights_file_on_an_image_folder(tmp_path, capsys):
  fixture = fx.read_fixture("deit_tiny_distilled_patch16_224")   # CLS + dist token
  weights = tmp_path / "deit.safetensors"
  save_file(fx.fixture_weights(fixture), str(weights))
  folder = tmp_path / "images"
  folder.mkdir()
  rng = np.random.default_rng(0)
  for k in range(2):
    Image.fromarray(rng.integers(0, 255, (40 + 10 * k, 50, 3), np.uint8)).save(folder / f"{k}.png")
  (folder / "notes.txt").write_text("not an image")
  out = tmp_path / "out"
  assert analyse.main(["--timm=deit_tiny_distilled_patch16_224", f"--weights={weights}",
                       f"--images={folder}", f"--out={out}", "--nocompare_init",
                       "--metrics=hc_dc_ratio,token_cosine_similarity,attention_spectrum"]) == 0
  assert "2 images of" in capsys.readouterr().out
  frame = pd.read_csv(out / "diagnosis.csv")
  assert set(frame["model"]) == {"trained"} and frame["layer"].nunique() == 12
  assert set(frame["metric"]) == {"hc_dc_ratio", "token_cosine_similarity"}
  record = json.loads((out / "diagnosis.json").read_text())
  assert record["image_shape"] == [224, 224, 3]
  assert len(record["models"]["trained"]["layers"][0]["attention_spectrum"][0]) == 198
  assert (out / "layers.png").stat().st_size > 0 and (out / "spectrum.png").stat().st_size > 0


@pytest.mark.parametrize("case", ["not_a_workdir", "no_checkpoint", "empty_folder",
                                  "wrong_weights", "big_vision_of_another_size",
                                  "dataset_not_prepared"])
def test_bad_input_is_one_line(case, tmp_path, capsys):
  if case == "not_a_workdir":
    argv, message = [f"--workdir={tmp_path}"], "is not a trainer workdir: it has no config.json"
  elif case == "no_checkpoint":
    (tmp_path / "config.json").write_text(json.dumps(digits_vit.get_config().to_dict()))
    argv, message = [f"--workdir={tmp_path}"], "no checkpoint under"
  elif case == "empty_folder":
    fixture = fx.read_fixture("deit_small_patch16_224")
    save_file(fx.fixture_weights(fixture), str(tmp_path / "w.safetensors"))
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "broken.png").write_bytes(b"not a png")
    argv = ["--timm=deit_small_patch16_224", f"--weights={tmp_path / 'w.safetensors'}",
            f"--images={tmp_path / 'images'}"]
    message = "has no readable image: 1 image files, none readable (broken.png)"
  elif case == "big_vision_of_another_size":
    fixture = fx.read_fixture("big_vision_scanned_ti16")     # depth 3, not Ti/16's 12
    np.savez(tmp_path / "w.npz", **fx.fixture_weights(fixture))
    argv = ["--big_vision=Ti/16", f"--weights={tmp_path / 'w.npz'}"]
    message = "w.npz is not a Ti/16 checkpoint"
  elif case == "dataset_not_prepared":   # names what this command accepts, not a config field
    fixture = fx.read_fixture("deit_small_patch16_224")
    save_file(fx.fixture_weights(fixture), str(tmp_path / "w.safetensors"))
    argv = ["--timm=deit_small_patch16_224", f"--weights={tmp_path / 'w.safetensors'}",
            "--dataset=cifar100", f"--data_dir={tmp_path / 'tfds'}"]
    message = f"run `tfds build cifar100 --data_dir={tmp_path / 'tfds'}`"
  else:
    fixture = fx.read_fixture("vit_base_patch16_224")
    save_file(fx.fixture_weights(fixture), str(tmp_path / "w.safetensors"))
    argv = ["--timm=deit_small_patch16_224", f"--weights={tmp_path / 'w.safetensors'}"]
    message = "w.safetensors is not a deit_small_patch16_224 checkpoint: pretrained weights"
  code = analyse.main([*argv, f"--out={tmp_path / 'out'}"])
  err = capsys.readouterr().err.strip()
  assert code == 1
  assert len(err.splitlines()) == 1 and err.startswith("vit-spectral-analyse: ")
  assert message in err
  assert "config.input" not in err


@pytest.mark.parametrize("argv,message", [
    (["--timm=deit_small_patch16_224"], "--timm needs --weights=PATH"),
    (["--workdir=w", "--no-compare_init"], "--no-compare_init: write --nocompare_init or "
                                           "--compare_init=false"),
    (["--workdir=w", "--params=best"], "--params=best: value should be one of <auto|ema|raw>"),
    (["--workdir=w", "--num_images=0"], "--num_images=0: 0 is not a positive integer"),
    (["--workdir=w", "--timm=x"], "give one model source of --workdir, --timm, --big_vision"),
    (["--workdir=w", "--image_size=32"], "--image_size goes with --timm or --big_vision"),
    (["--workdir=w", "--dataset=digits", "--images=."], "--images and --dataset"),
    (["--workdir=w", "extra"], "unexpected arguments ['extra']"),
])
def test_usage_errors_are_one_line_and_exit_2(argv, message, capsys):
  with pytest.raises(SystemExit) as stop:
    analyse.parse_args(argv)
  assert stop.value.code == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and err.startswith("vit-spectral-analyse: error: ")
  assert message in err


@pytest.mark.parametrize("argv,message", [
    (["--timm=x", "--weights=/no/such.safetensors"], "--weights=/no/such.safetensors is not a file"),
    (["--workdir=/no/such/run", "--images=/no/such/dir"], "--images=/no/such/dir is not a directory"),
])
def test_a_missing_file_is_one_line_before_loading(argv, message, capsys):
  assert analyse.main(argv) == 2
  err = capsys.readouterr().err.strip()
  assert err == f"vit-spectral-analyse: error: {message}"


def test_flags_are_absl_flags_as_train_py_takes_them():
  assert analyse.parse_args(["--workdir=w"]).compare_init is True
  for spelling in ("--nocompare_init", "--compare_init=false", "--compare_init=False"):
    assert analyse.parse_args(["--workdir=w", spelling]).compare_init is False, spelling
  args = analyse.parse_args(["--workdir=w", "--metrics=hc_dc_ratio,attention_entropy",
                             "--params=raw", "--step=3", "--num_images=5"])
  assert (args.metrics, args.params, args.step, args.num_images) == (
      ["hc_dc_ratio", "attention_entropy"], "raw", 3, 5)


def test_help_lists_every_flag_as_train_py_does(capsys):
  with pytest.raises(SystemExit) as stop:
    analyse.parse_args(["--help"])
  assert stop.value.code == 0
  printed = capsys.readouterr().out
  assert printed.startswith(analyse.__doc__.strip().splitlines()[0])
  for name in analyse.FLAG_NAMES:
    label = "--[no]compare_init" if name == "compare_init" else f"--{name}"
    assert f"\n  {label}\n" in printed, name


def test_the_default_out_names_the_source(tmp_path):
  weights = tmp_path / "w.npz"
  weights.write_bytes(b"")
  assert analyse.parse_args([f"--workdir={tmp_path}"]).out == str(tmp_path / "analysis")
  assert analyse.parse_args(["--timm=deit_small_patch16_224", f"--weights={weights}"]).out == (
      os.path.join("analysis", "deit_small_patch16_224"))
  assert analyse.parse_args(["--big_vision=B/16", f"--weights={weights}"]).out == (
      os.path.join("analysis", "big_vision_B-16"))
  assert analyse.parse_args([f"--workdir={tmp_path}", "--out=x"]).out == "x"


def test_a_bad_metric_is_reported_before_anything_is_loaded(tmp_path):
  """A fresh interpreter: the metric error comes before the (missing) workdir
  is read and before TensorFlow is imported."""
  code = ("import sys\nfrom vit_spectral import analyse\n"
          f"rc = analyse.main(['--workdir={tmp_path / 'missing'}', '--metrics=hc_dc_ratio,hc_dc'])\n"
          "print(rc, 'tensorflow' in sys.modules, 'vit_spectral.workdir' in sys.modules and "
          "'vit_spectral.durability.checkpointing' in sys.modules)")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, JAX_PLATFORMS="cpu"), check=False, timeout=120)
  assert result.stdout.split() == ["2", "False", "False"], result.stderr
  err = [line for line in result.stderr.splitlines() if "vit-spectral-analyse" in line]
  assert len(err) == 1
  assert "--metrics: unknown metric 'hc_dc'" in err[0] and "'hc_dc_ratio'" in err[0]
  assert "missing" not in err[0]
