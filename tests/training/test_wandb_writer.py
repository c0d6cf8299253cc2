"""The W&B writer (`config.logging.wandb`), in W&B's offline mode: no account,
no network. What it wrote is read back from the run's `.wandb` file
(`wandb_records`) and compared with what was written, and with the
TensorBoard event files the default writer wrote beside it."""

from __future__ import annotations

import numpy as np
import pytest

from vit_spectral import errors
from vit_spectral.config_overrides import apply_overrides
from vit_spectral.configs import digits_vit
from vit_spectral.sections.logging import LoggingSettings
from vit_spectral.training import event_files, trainer, wandb_writer

wandb = pytest.importorskip("wandb")  # a guard only: CI installs the wandb extra

from tests.training import wandb_records  # noqa: E402  (needs wandb's protos)

OFFLINE = LoggingSettings(wandb="vit_spectral_tests", wandb_mode="offline",
                          wandb_tags=("test",))


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
  """W&B offline, its folders in tmp_path, quiet, and no way to reach a server
  or log in: no key, an unreachable base URL, and `wandb.login` raising."""
  home = tmp_path / "wandb_home"
  for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
    monkeypatch.setenv(name, str(home / name.lower()))
  monkeypatch.setenv("WANDB_MODE", "offline")
  monkeypatch.setenv("WANDB_SILENT", "true")
  monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
  monkeypatch.delenv("WANDB_API_KEY", raising=False)
  monkeypatch.delenv("WANDB_DIR", raising=False)  # the writer's default: the workdir

  def no_login(*args, **kwargs):
    raise AssertionError("an offline run tried to log in to W&B")

  monkeypatch.setattr(wandb, "login", no_login)


def _only_run_file(workdir) -> str:
  (path,) = wandb_records.run_files(str(workdir))
  return path


def test_the_writer_writes_each_kind_at_its_step_and_tensorboard_holds_the_same_scalars(tmp_path):
  workdir = tmp_path / "run_a"
  scalars = {1: {"train_loss": 2.5, "train_accuracy": np.float32(0.25)},
             4: {"train_loss": 1.25, "steps_per_sec": np.float64(17.0)}}
  eval_at_4 = {"eval_accuracy": 0.625}
  histogram = np.array([0.0, 0.1, 0.2, 0.9, 1.0, 1.0])
  with wandb_writer.run_writer(OFFLINE, str(workdir)) as writer:
    writer.write_hparams({"num_params": 1234, "total_steps": 4})
    writer.write_scalars(1, scalars[1])
    writer.write_texts(2, {"note": "hello"})
    writer.write_histograms(2, {"weights": histogram}, {"weights": 4})
    writer.write_images(3, {"samples": np.random.default_rng(0).random((2, 5, 6, 3))})
    writer.write_scalars(4, scalars[4])
    writer.write_scalars(4, eval_at_4)  # a second write at a step: the same row
  with wandb_writer.run_writer(OFFLINE, str(tmp_path / "replayed")) as writer:
    for step in (1, 2, 1):  # W&B keeps steps increasing: the replayed step 1 is dropped
      writer.write_scalars(step, {"train_loss": float(step)})
  assert wandb_records.history(_only_run_file(tmp_path / "replayed")) == {
      1: {"train_loss": 1.0}, 2: {"train_loss": 2.0}}

  path = _only_run_file(workdir)
  rows = wandb_records.history(path)
  assert sorted(rows) == [1, 2, 3, 4]
  assert rows[1] == {k: float(v) for k, v in scalars[1].items()}
  assert rows[4] == {**{k: float(v) for k, v in scalars[4].items()}, **eval_at_4}
  assert rows[2]["note"] == "hello"
  counts, edges = np.histogram(histogram, bins=4)
  assert rows[2]["weights.values"] == counts.tolist()
  np.testing.assert_allclose(rows[2]["weights.bins"], edges)
  assert (rows[3]["samples.count"], rows[3]["samples.height"], rows[3]["samples.width"]) == (
      2, 5, 6)
  config = wandb_records.config(path)
  assert (config["num_params"], config["total_steps"]) == (1234, 4)
  (run,) = wandb_records.of_type(path, "run")
  assert (run.project, run.display_name, list(run.tags)) == (
      OFFLINE.wandb, "run_a", list(OFFLINE.wandb_tags))
  assert run.run_id == (workdir / wandb_writer.RUN_ID_FILE).read_text().strip()
  assert [e.exit_code for e in wandb_records.of_type(path, "exit")] == [0]

  # The default writer beside it wrote the same scalars (float32 in TensorBoard).
  board = event_files.read_scalars(str(workdir))
  written = {(step, k): float(v) for step, values in [*scalars.items(), (4, eval_at_4)]
             for k, v in values.items()}
  assert {(int(s), tag) for tag, (steps, _) in board.items() for s in steps} == set(written)
  for tag, (steps, values) in board.items():
    for step, value in zip(steps, values):
      np.testing.assert_allclose(rows[int(step)][tag], value, rtol=1e-6)
      np.testing.assert_allclose(value, written[(int(step), tag)], rtol=1e-6)


def test_a_second_run_in_the_workdir_continues_the_w_and_b_run(tmp_path):
  """The first run stores its id; the next resumes it (offline: a second
  run file with the same id, which `wandb sync` uploads into the same run)."""
  workdir = tmp_path / "resumed"
  for step in (1, 2):
    with wandb_writer.run_writer(OFFLINE, str(workdir)) as writer:
      writer.write_scalars(step, {"train_loss": 1.0 / step})
  first, second = wandb_records.run_files(str(workdir))
  stored = wandb_writer.stored_run_id(str(workdir))
  assert len(stored) == 8
  assert [r.run_id for path in (first, second) for r in wandb_records.of_type(path, "run")] == [
      stored, stored]
  assert wandb_records.history(first) == {1: {"train_loss": 1.0}}
  assert wandb_records.history(second) == {2: {"train_loss": 0.5}}
  # Another workdir draws another id.
  with wandb_writer.run_writer(OFFLINE, str(tmp_path / "other")):
    pass
  assert wandb_writer.stored_run_id(str(tmp_path / "other")) not in (None, stored)


@pytest.mark.parametrize("raised,exit_code,preempting", [
    (RuntimeError("boom"), 1, 0),
    (errors.RunPreempted("stopped", step=3), 1, 1),
])
def test_a_run_left_by_an_exception_is_marked_failed_and_a_preemption_preempting(
    tmp_path, raised, exit_code, preempting):
  with pytest.raises(type(raised)):
    with wandb_writer.run_writer(OFFLINE, str(tmp_path)) as writer:
      writer.write_scalars(3, {"train_loss": 1.0})
      raise raised
  path = _only_run_file(tmp_path)
  assert [e.exit_code for e in wandb_records.of_type(path, "exit")] == [exit_code]
  assert len(wandb_records.of_type(path, "preempting")) == preempting
  assert wandb_records.history(path) == {3: {"train_loss": 1.0}}


def test_wandb_dir_takes_w_and_b_files_elsewhere_and_the_id_stays_in_the_workdir(
    tmp_path, monkeypatch):
  elsewhere = tmp_path / "elsewhere"
  monkeypatch.setenv("WANDB_DIR", str(elsewhere))
  with wandb_writer.run_writer(OFFLINE, str(tmp_path / "workdir")) as writer:
    writer.write_scalars(1, {"train_loss": 1.0})
  assert not (tmp_path / "workdir" / "wandb").exists()
  assert wandb_records.history(_only_run_file(elsewhere)) == {1: {"train_loss": 1.0}}
  assert wandb_writer.stored_run_id(str(tmp_path / "workdir"))


def test_without_a_project_there_is_no_w_and_b_run_and_no_id(tmp_path):
  with wandb_writer.run_writer(LoggingSettings(), str(tmp_path)) as writer:
    writer.write_scalars(1, {"train_loss": 1.0})
  assert not (tmp_path / "wandb").exists() and wandb_writer.stored_run_id(str(tmp_path)) is None
  assert set(event_files.read_scalars(str(tmp_path))) == {"train_loss"}


def _tiny_config(*overrides: tuple[str, str]):
  config = digits_vit.get_config("depth=1,width=16,heads=2,steps=4")
  config.log_every = config.eval_every = config.checkpoint_every = 2
  config.optim.warmup_steps = 1
  apply_overrides(config, overrides)
  return config


@pytest.mark.extended  # two training runs: 17-32 s on 2 shared CPU cores
def test_a_digits_run_logs_to_w_and_b_what_tensorboard_holds(tmp_path):
  """`--config.logging.wandb=...` on a recipe: every scalar of every step in
  the TensorBoard event files is in the W&B run's history, equal."""
  workdir = tmp_path / "digits"
  config = _tiny_config(("logging.wandb", "vit_spectral_tests"),
                        ("logging.wandb_run_name", "tiny digits"))
  trainer.train_and_evaluate(config, str(workdir))
  path = _only_run_file(workdir)
  rows = wandb_records.history(path)
  board = event_files.read_scalars(str(workdir))
  assert {"train_loss", "train_accuracy", "eval_accuracy", "eval_loss"} <= set(board)
  compared = 0
  for tag, (steps, values) in board.items():
    for step, value in zip(steps, values):
      np.testing.assert_allclose(rows[int(step)][tag], value, rtol=1e-6, err_msg=tag)
      compared += 1
  assert compared == sum(len(row) for row in rows.values())  # nothing only in W&B
  (run,) = wandb_records.of_type(path, "run")
  assert run.display_name == "tiny digits"
  config_seen = wandb_records.config(path)
  assert config_seen["logging"]["wandb"] == "vit_spectral_tests"
  assert config_seen["num_params"] > 0  # the trainer's hparams
  assert [e.exit_code for e in wandb_records.of_type(path, "exit")] == [0]

  # Resumed with 2 more steps: the same W&B run goes on from the checkpoint.
  longer = _tiny_config(("logging.wandb", "vit_spectral_tests"), ("total_steps", "6"))
  trainer.train_and_evaluate(longer, str(workdir))
  first, second = wandb_records.run_files(str(workdir))
  assert first == path
  assert [r.run_id for p in (first, second) for r in wandb_records.of_type(p, "run")] == [
      run.run_id] * 2
  assert sorted(wandb_records.history(second)) == [6]  # log_every=2: steps 5-6 logged at 6
  board = event_files.read_scalars(str(workdir))
  for tag, (steps, values) in board.items():
    assert steps[-1] == 6, tag
    np.testing.assert_allclose(wandb_records.history(second)[6][tag], values[-1], rtol=1e-6)
