"""vit-spectral-analyse: a digits run and a timm weights file analysed end to end
(CSV, JSON and PNGs, values equal to diagnose on the same model and images),
load_workdir, and one line for each kind of bad input."""

import json
import os

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
                                  "wrong_weights", "big_vision_of_another_size"])
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


def test_usage_errors_exit_2(capsys):
  with pytest.raises(SystemExit) as stop:
    analyse.main(["--timm=deit_small_patch16_224", "--out=x"])
  assert stop.value.code == 2
  assert "--timm needs --weights=PATH" in capsys.readouterr().err
