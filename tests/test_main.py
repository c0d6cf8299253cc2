"""The command line: recipes by name, one line per mistake, --help, --print_config,
`=None` for fields that may be None, and `error:` lines for failed runs."""

import json
import os
import subprocess
import sys
import textwrap
import types

import pytest

from vit_spectral import configs, errors, main
from vit_spectral.main import CommandLineError, resolve_recipe_names
from vit_spectral.sections.run import training_settings
from vit_spectral.training import durations, trainer
from vit_spectral.planning import target_dry_run, tpu_targets
from vit_spectral.training.optim import check_schedule_length

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3", XLA_FLAGS="")


def test_recipe_names_become_the_packaged_files_with_their_arguments():
  digits = configs.recipe_path("digits_vit")
  assert os.path.isfile(digits) and digits.endswith(os.path.join("configs", "digits_vit.py"))
  argv = ["train.py", "--config", "digits_vit:depth=2", "--workdir", "digits_vit"]
  assert resolve_recipe_names(argv) == ["train.py", "--config", f"{digits}:depth=2",
                                        "--workdir", "digits_vit"]
  assert resolve_recipe_names(["x", "--config=cifar10_vit"]) == [
      "x", f"--config={configs.recipe_path('cifar10_vit')}"]


def test_paths_and_unknown_names_pass_through_unchanged():
  argv = ["x", "--config=configs/digits_vit.py:depth=2", "--config.total_steps=3"]
  assert resolve_recipe_names(argv) == argv
  assert resolve_recipe_names(["x", "--config=no_such_recipe"]) == ["x", "--config=no_such_recipe"]


def test_an_unknown_recipe_name_lists_the_shipped_ones():
  with pytest.raises(ValueError, match="unknown recipe 'nope'; the shipped recipes are .*digits_vit"):
    configs.recipe_path("nope")
  assert {"digits_vit", "cifar10_vit", "imagenet_deit"} <= set(configs.recipe_names())
  assert "common" not in configs.recipe_names()


@pytest.mark.parametrize("flag", ["--config=configs/nope.py", "--config=nope",
                                  "--config=nope.py:x=1"])
def test_a_missing_config_file_is_named_with_the_recipes(flag):
  path = flag.split("=", 1)[1].split(":")[0]
  with pytest.raises(CommandLineError, match=rf"no config file '{path}'; .*digits_vit"):
    main.prepare_argv(["train.py", flag])


@pytest.mark.parametrize("flag,message", [
    ("--config.nonexistent=1",
     r"^--config.nonexistent: config has no field 'nonexistent'; its fields: .*total_steps"),
    ("--config.optim.learnig_rate=1",
     r"config.optim has no field 'learnig_rate' \(did you mean 'learning_rate'\?\); "
     r"its fields: .*weight_decay"),
    ("--config.model.attention.nme=x",
     r"config.model.attention has no field 'nme' \(did you mean 'name'\?\); its fields "
     r"\(name, and the options of DotProductAttention\): .*\bname, .*qkv_bias"),
    ("--config.model.block.featscale=1",
     r"config.model.block has no field 'featscale' \(did you mean 'feat_scale'\?\); its fields "
     r"\(the block options of the ViT\): .*residual_alpha"),
    ("--config.total_steps=abc",
     r"^--config.total_steps=abc: config.total_steps takes an int, not 'abc'$"),
    ("--config.input.flip=maybe", r"config.input.flip takes true or false, not 'maybe'"),
    ("--config.log_every=None", r"config.log_every cannot be None; it takes an int"),
    ("--config=digits_vit:depht=2", r"unknown config argument 'depht'"),
    ("--wrkdir=x", r"Unknown command line flag 'wrkdir'"),
])
def test_a_mistake_on_the_command_line_is_one_line_naming_it(flag, message):
  with pytest.raises(CommandLineError, match=message) as caught:
    main.parse_command_line(["train.py", flag])
  assert "\n" not in str(caught.value)


def test_none_unsets_a_field_that_may_be_none_and_fixes_steps_vs_epochs():
  """cifar10_vit runs 300 epochs: --config.total_steps alone is rejected with the
  fix, which works."""
  argv = ["train.py", "--config=cifar10_vit", "--config.total_steps=10"]
  config = main.parse_command_line(argv).config.value
  with pytest.raises(ValueError, match=r"\(got 10 and 300.0\).*--config.num_epochs=None"):
    training_settings(config)
  config = main.parse_command_line(
      argv + ["--config.num_epochs=None", "--config.input.data_dir=None"]).config.value
  assert config.num_epochs is None and config.input.data_dir is None
  sections = training_settings(config)
  assert sections.run.total_steps == 10
  # 10 steps is shorter than the recipe's 5 warmup epochs: checked at set-up
  # (`check_schedule_length`), fixed the same way.
  run, optim = durations.resolve(sections.run, sections.optim, batch_size=96,
                                 num_train_examples=50_000)
  with pytest.raises(ValueError, match=r"optim.warmup_steps=2600 plus .* config.total_steps=10"):
    check_schedule_length(optim, run.total_steps)
  config = main.parse_command_line(argv + [
      "--config.num_epochs=None", "--config.optim.warmup_epochs=None",
      "--config.optim.warmup_steps=1"]).config.value
  sections = training_settings(config)
  check_schedule_length(sections.optim, sections.run.total_steps)
  # The last override of a field wins, `=None` or not.
  config = main.parse_command_line(
      argv + ["--config.num_epochs=None", "--config.num_epochs=2.5"]).config.value
  assert config.num_epochs == 2.5


def test_help_and_a_missing_file_need_neither_jax_nor_tensorflow_and_print_config_prints():
  """One process: --help, then a missing file (each exits before `app.run`),
  then --print_config, which loads the config and exits 0 without a workdir."""
  script = textwrap.dedent("""
      import sys
      from vit_spectral import main
      def run(*args):
        sys.argv = ["train.py", *args]
        try:
          main.run()
        except SystemExit as e:
          return e.code
      assert run("--help") == 0
      assert run("--config=configs/nope.py") == 2
      heavy = [m for m in ("jax", "tensorflow") if m in sys.modules]
      print("HEAVY", heavy, flush=True)
      run("--config=digits_vit:depth=2", "--config.optim.learning_rate=0.5",
          "--config.num_epochs=None", "--print_config", "--workdir=WORKDIR")
  """).replace("WORKDIR", os.path.join(ROOT, "no_such_workdir"))
  result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=120, check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  out = result.stdout
  for form in ("--config=file.py[:arg=value,...]", "--config=NAME[:arg=value,...]",
               "--config.a.b=value", "=None", "--workdir", "--print_config", "--dry_run"):
    assert form in out
  for name in configs.recipe_names():
    assert f"  {name} " in out, name
  assert "A small ViT on scikit-learn's digits" in out
  assert "HEAVY []" in out
  error_lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
  assert error_lines == [
      f"error: --config=configs/nope.py: no config file 'configs/nope.py'; pass a config "
      f"file or a shipped recipe's name: {', '.join(configs.recipe_names())}"]
  printed = json.loads(out[out.index("\n{") + 1:])
  assert printed["model"]["depth"] == 2 and printed["optim"]["learning_rate"] == 0.5
  assert printed["num_epochs"] is None
  assert not os.path.exists(os.path.join(ROOT, "no_such_workdir"))


class _Exited(Exception):
  pass


@pytest.fixture(name="exits")
def _exits(monkeypatch):
  """main._exit_now records (message, code) instead of ending pytest."""
  seen = []

  def exit_now(message, code):
    seen.append((message, code))
    raise _Exited()

  monkeypatch.setattr(main, "_exit_now", exit_now)
  return seen


def _raising(error):
  def fail(*args, **kwargs):
    raise error
  return fail


def _with_log_path(error, path):
  error.log_path = path
  return error


@pytest.mark.parametrize("error,expected", [
    (errors.ConfigError("config.total_steps=0 must be positive"),
     "error: config.total_steps=0 must be positive"),
    (errors.CheckpointSaveError("could not save step 20 in /w/checkpoints: No space left "
                                "on device\nthe newest good checkpoint is step 10"),
     "error: could not save step 20 in /w/checkpoints: No space left on device\n"
     "the newest good checkpoint is step 10"),
    (_with_log_path(errors.WorkdirLockedError("held by host:1"), "/w/train.log"),
     "error: held by host:1 (traceback: /w/train.log)"),
    (_with_log_path(OSError("disk gone\nmore"), "/w/train.log"),
     "error: OSError: disk gone (traceback: /w/train.log)"),
])
def test_a_failed_run_is_one_message_and_exit_code_1(monkeypatch, exits, error, expected):
  monkeypatch.setattr(trainer, "train_and_evaluate", _raising(error))
  with pytest.raises(_Exited):
    main.train({"any": "config"}, "/w")
  assert exits == [(expected, main.FAILURE_EXIT_CODE)]


def test_the_final_metrics_are_logged_as_the_metrics_table(monkeypatch):
  from absl import logging  # noqa: PLC0415
  from vit_spectral.training import progress  # noqa: PLC0415
  metrics = {"eval_loss": 0.123456789, "eval_accuracy": 0.987654321}
  monkeypatch.setattr(trainer, "train_and_evaluate", lambda settings, workdir: metrics)
  logged = []
  monkeypatch.setattr(logging, "info", lambda message, *args: logged.append(message % args))
  main.train({"any": "config"}, "/w")
  assert logged == ["final metrics:\n" + progress.metrics_table(metrics)]
  assert "0.9877" in logged[0] and "0.987654321" not in logged[0]


def test_a_failed_dry_run_is_one_message(monkeypatch, exits):
  from vit_spectral.planning import dry_run  # noqa: PLC0415
  monkeypatch.setattr(dry_run, "dry_run", _raising(errors.ConfigError("input.batch_size=100")))
  with pytest.raises(_Exited):
    main.train({}, "/w", dry_run=True)
  assert exits == [("error: input.batch_size=100", 1)]


# What `main.train` is handed: typed settings (`config_checks.check_config`);
# a target dry run compiles variants of the ConfigDict they came from.
_SETTINGS = types.SimpleNamespace(config={})


def test_a_refused_step_is_one_line_exit_1_and_its_json_is_written(monkeypatch, exits, tmp_path):
  report = {"fits": False, "hbm_needed_bytes": 3.0, "hbm_available_bytes": 2.0}

  def refuse(config, target):
    raise target_dry_run.HbmExceededError(f"--target={target}: the train step does not fit", report)

  monkeypatch.setattr(target_dry_run, "target_dry_run", refuse)
  path = tmp_path / "report.json"
  with pytest.raises(_Exited):
    main.train(_SETTINGS, "/w", dry_run=True, target="v5litepod-16", dry_run_json=str(path))
  assert exits == [("error: --target=v5litepod-16: the train step does not fit", 1)]
  assert json.loads(path.read_text()) == report


def test_without_libtpu_the_dry_run_says_how_to_get_it(monkeypatch, exits):
  monkeypatch.setattr(tpu_targets, "libtpu_available", lambda: False)
  with pytest.raises(_Exited):
    main.train(_SETTINGS, "/w", dry_run=True, target="v4-8")
  ((message, code),) = exits
  assert code == 1 and message.startswith("error: --target=v4-8") and "[tpu]" in message


def test_a_bug_before_the_run_has_a_log_keeps_its_traceback(monkeypatch, exits):
  monkeypatch.setattr(trainer, "train_and_evaluate", _raising(KeyError("bug")))
  with pytest.raises(KeyError, match="bug"):
    main.train({}, "/w")
  assert not exits


@pytest.mark.extended
def test_an_unprepared_data_set_stops_the_run_with_one_error_line(tmp_path):
  empty, workdir = tmp_path / "tfds", tmp_path / "workdir"
  empty.mkdir()
  result = subprocess.run(
      [sys.executable, "train.py", "--config=configs/cifar10_vit.py",
       f"--config.input.data_dir={empty}", f"--workdir={workdir}"],
      cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300, check=False)
  output = result.stdout + result.stderr
  assert result.returncode == 1, output[-3000:]
  error_lines = [line for line in output.splitlines() if line.startswith("error:")]
  assert len(error_lines) == 1 and "'cifar10' is not prepared" in error_lines[0], output[-3000:]
  assert output.strip().splitlines()[-1].startswith(error_lines[0][:40])
  assert "Traceback" not in output
  assert not workdir.exists()
