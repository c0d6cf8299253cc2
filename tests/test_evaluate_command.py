"""vit-spectral-evaluate: a workdir's checkpoint evaluated alone gives the
metrics the trainer logged at that step (read back from its event files),
without writing to the workdir or minding its lock; a mistake is one line
naming the flag and the valid choices."""

import os
import subprocess
import sys

import numpy as np
import pytest

from vit_spectral import evaluate
from vit_spectral.configs import digits_vit
from vit_spectral.durability import checkpointing, workdir_lock
from vit_spectral.durability.resume import CONFIG_NAME
from vit_spectral.training import progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tiny_config(**over):
  config = digits_vit.get_config("depth=1,width=16,heads=2,steps=6")
  config.log_every = config.eval_every = config.checkpoint_every = 3
  config.optim.warmup_steps = 1  # < the 6 steps
  for key, value in over.items():
    config[key] = value
  return config


def _workdir(path, config, steps=(2, 4)):
  """A workdir with `config` as config.json and a toy state saved at `steps`
  (enough for the checks that run before any device work)."""
  os.makedirs(path)
  with open(os.path.join(path, CONFIG_NAME), "w", encoding="utf-8") as f:
    f.write(config.to_json_best_effort(indent=2, sort_keys=True))
  if steps:
    with checkpointing.Checkpointer(os.path.join(path, "checkpoints"), save_every=1,
                                    async_save=False) as ckpt:
      for step in steps:
        ckpt.save(step, {"params": {"x": np.full((2,), step, np.float32)}})
  return str(path)


# --- Mistakes: one line naming the flag (fast) ----------------------------------

def test_a_missing_workdir_or_one_without_config_or_checkpoint_is_named(tmp_path):
  with pytest.raises(evaluate.EvaluateError, match=r"^--workdir=\S+/nope: no such directory$"):
    evaluate.evaluate_workdir(str(tmp_path / "nope"))
  with pytest.raises(evaluate.EvaluateError, match="^--workdir is required"):
    evaluate.evaluate_workdir("")
  with pytest.raises(evaluate.EvaluateError,
                     match=r"^--workdir=\S+ is not a train.py workdir: it has no config.json"):
    evaluate.evaluate_workdir(str(tmp_path))
  bare = _workdir(tmp_path / "bare", tiny_config(), steps=())
  with pytest.raises(evaluate.EvaluateError, match=r"holds no finished checkpoint"):
    evaluate.evaluate_workdir(bare)


def test_a_step_not_saved_lists_the_saved_steps(tmp_path):
  workdir = _workdir(tmp_path / "w", tiny_config())
  assert evaluate.checkpoint_step(workdir, None) == 4
  assert evaluate.checkpoint_step(workdir, 2) == 2
  with pytest.raises(evaluate.EvaluateError) as error:
    evaluate.evaluate_workdir(workdir, step=3)
  assert str(error.value) == f"--step=3: no checkpoint at that step in {workdir}; choose one of 2, 4"


def test_ema_of_a_run_without_ema_and_an_unknown_split_name_the_choices(tmp_path):
  workdir = _workdir(tmp_path / "w", tiny_config(ema_decay=0.0))
  with pytest.raises(evaluate.EvaluateError,
                     match=r"^--params=ema: the run in \S+ keeps no EMA parameters "
                           r"\(config.ema_decay is 0\); choose one of auto, raw$"):
    evaluate.evaluate_workdir(workdir, params="ema")
  with pytest.raises(evaluate.EvaluateError, match=r"^--params=best: choose one of auto, ema, raw$"):
    evaluate.evaluate_workdir(workdir, params="best")
  with pytest.raises(evaluate.EvaluateError,
                     match=r"^--split=validation: digits has no such split; choose one of "
                           r"test, train "):
    evaluate.evaluate_workdir(workdir, split="validation")


@pytest.mark.parametrize("args,line", [
    (["--params=best"], "vit-spectral-evaluate: flag --params=best: value should be one of "
                        "<auto|ema|raw>"),
    (["--step=x"], "vit-spectral-evaluate: flag --step=x: invalid literal for int() with "
                   "base 10: 'x'"),
    (["--wrkdir=w"], "vit-spectral-evaluate: Unknown command line flag 'wrkdir'. Did you mean: "
                    "workdir ?"),
    (["w"], "vit-spectral-evaluate: unexpected arguments ['w'] (flags are --name=value)"),
    ([], "vit-spectral-evaluate: --workdir is required: a train.py workdir"),
])
def test_a_mistake_on_the_command_line_is_one_line_and_exit_code_2(capsys, args, line):
  assert evaluate.main(["vit-spectral-evaluate", *args]) == 2
  captured = capsys.readouterr()
  assert captured.out == "" and captured.err == line + "\n"


@pytest.mark.extended   # a fresh interpreter imports JAX and TensorFlow: ~10-15 s
def test_the_module_runs_as_the_command(tmp_path):
  workdir = _workdir(tmp_path / "w", tiny_config())
  result = subprocess.run(
      [sys.executable, "-m", "vit_spectral.evaluate", f"--workdir={workdir}", "--step=3"],
      cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
      env=dict(os.environ, PYTHONPATH=ROOT))
  assert result.returncode == 2 and result.stdout == ""
  assert result.stderr.strip().splitlines()[-1] == (
      f"vit-spectral-evaluate: --step=3: no checkpoint at that step in {workdir}; "
      "choose one of 2, 4")


# --- A trained run, evaluated again (extended: trains ~25 s) ---------------------

def _corrupted_digits(data_dir, name="digits_c_toy"):
  """A corruption set in the digits' shape (random images, "fog" at 5
  severities of 20 examples) stored as TFDS under `data_dir`."""
  from vit_spectral.data import corrupted  # noqa: PLC0415
  npy = os.path.join(os.path.dirname(data_dir), "npy")
  os.makedirs(npy)
  rng = np.random.default_rng(0)
  np.save(os.path.join(npy, "labels.npy"), np.arange(100) % 10)
  np.save(os.path.join(npy, "fog.npy"), rng.integers(0, 256, (100, 8, 8, 1), dtype=np.uint8))
  corrupted.store_corruptions(npy, name, data_dir, 10)
  return name


def _files(workdir):
  """(path, size, mtime) of everything under `workdir`."""
  found = set()
  for folder, _, names in os.walk(workdir):
    for name in names:
      stat = os.stat(os.path.join(folder, name))
      found.add((os.path.join(folder, name), stat.st_size, stat.st_mtime_ns))
  return found


@pytest.mark.extended
def test_a_checkpoint_evaluated_alone_gives_what_the_trainer_logged(tmp_path):
  from vit_spectral.training import event_files, robustness, trainer  # noqa: PLC0415
  data_dir = str(tmp_path / "tfds")
  config = tiny_config(ema_decay=0.9)
  config.input.data_dir = data_dir
  config.robustness = robustness.robustness_config(
      _corrupted_digits(data_dir), corruptions=("fog",), severities=(1, 3), split="test")
  workdir = str(tmp_path / "run")
  final = trainer.train_and_evaluate(config, workdir)
  logged = event_files.read_scalars(workdir)

  def logged_at(step, names):
    return {name: logged[name][1][list(logged[name][0]).index(step)] for name in names}

  # A running training holds the lock: evaluating neither waits for it nor touches it.
  holder = workdir_lock.acquire(workdir)
  before = _files(workdir)
  got = evaluate.evaluate_workdir(workdir)
  assert _files(workdir) == before
  assert workdir_lock.read_holder(workdir) == holder
  workdir_lock.release(workdir, holder)

  assert (got.step, got.params, got.split, got.dataset) == (6, "auto", "test", "digits")
  assert set(got.metrics) == set(final) == {
      "eval_loss", "eval_accuracy", "eval_ema_loss", "eval_ema_accuracy",
      "corrupt_fog_1_accuracy", "corrupt_fog_3_accuracy", "corrupt_severity1_accuracy",
      "corrupt_severity3_accuracy", "corrupt_mean_accuracy"}
  # The event files hold float32: the same numbers, to the last bit kept.
  expected = logged_at(6, got.metrics)
  assert {k: np.float32(v) for k, v in got.metrics.items()} == {
      k: np.float32(v) for k, v in expected.items()}
  assert 0 < got.metrics["eval_accuracy"] < 1

  raw = evaluate.evaluate_workdir(workdir, params="raw")
  assert set(raw.metrics) == set(got.metrics) - {"eval_ema_loss", "eval_ema_accuracy"}
  assert {k: np.float32(v) for k, v in raw.metrics.items()} == {
      k: np.float32(expected[k]) for k in raw.metrics}   # robustness.use_ema is False
  ema = evaluate.evaluate_workdir(workdir, params="ema", step=3)
  assert {k: np.float32(v) for k, v in ema.metrics.items() if k.startswith("eval_")} == {
      k: np.float32(v) for k, v in logged_at(3, ["eval_ema_loss", "eval_ema_accuracy"]).items()}

  result = subprocess.run(
      [sys.executable, "-m", "vit_spectral.evaluate", f"--workdir={workdir}", "--params=raw"],
      cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
      env=dict(os.environ, PYTHONPATH=ROOT))
  assert result.returncode == 0, result.stderr[-2000:]
  header, *rows = result.stdout.strip().split("\n")
  assert header == f"{workdir}: step 6, params raw, digits test"
  assert "\n".join(rows) == progress.metrics_table({k: expected[k] for k in raw.metrics})
