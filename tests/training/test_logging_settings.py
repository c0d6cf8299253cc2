"""`config.logging` (`sections.logging.LoggingSettings`): its fields from the
command line on every recipe, one line per bad field, and the one line when
W&B is asked for but wandb is not installed (simulated). None of it needs
wandb; the writer itself is tested in test_wandb_writer.py."""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys

import pytest

from vit_spectral import errors
from vit_spectral.config_overrides import apply_overrides
from vit_spectral.configs import digits_vit, recipe_names
from vit_spectral.sections.logging import LoggingSettings
from vit_spectral.sections.run import training_settings
from vit_spectral.training import trainer, wandb_writer


def _tiny_config(*overrides: tuple[str, str]):
  config = digits_vit.get_config("depth=1,width=16,heads=2,steps=4")
  config.optim.warmup_steps = 1
  apply_overrides(config, overrides)
  return config


@pytest.mark.parametrize("recipe", recipe_names())
def test_every_recipe_takes_the_w_and_b_fields_from_the_command_line(recipe):
  config = importlib.import_module(f"vit_spectral.configs.{recipe}").get_config()
  apply_overrides(config, [("logging.wandb", "my_project"), ("logging.wandb_mode", "offline"),
                           ("logging.wandb_tags", "('a', 'b')")])
  assert training_settings(config).logging == LoggingSettings(
      wandb="my_project", wandb_mode="offline", wandb_tags=("a", "b"))


def test_enabled_without_wandb_installed_is_one_line_before_the_workdir_is_touched(
    monkeypatch, tmp_path):
  monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
  settings = LoggingSettings(wandb="my_project")
  with pytest.raises(errors.ConfigError) as raised:
    wandb_writer.import_wandb(settings)
  message = str(raised.value)
  assert "\n" not in message and 'pip install "vit_spectral[wandb]"' in message
  assert "config.logging.wandb='my_project'" in message
  wandb_writer.check_installed(LoggingSettings())  # off: wandb never imported
  workdir = tmp_path / "untouched"
  with pytest.raises(errors.ConfigError, match=r'pip install "vit_spectral\[wandb\]"'):
    trainer.train_and_evaluate(_tiny_config(("logging.wandb", "my_project")), str(workdir))
  assert not workdir.exists()


@pytest.mark.parametrize("field,value,match", [
    ("wandb", "", r"logging.wandb='' must name a W&B project \(None turns W&B off\)"),
    ("wandb_mode", "ofline", r"logging.wandb_mode='ofline'.*'offline'.*choose one of "
                             r"\['online', 'offline'\]"),
    ("wandb_tags", ("ok", ""), r"logging.wandb_tags=\('ok', ''\) must be a tuple of non-empty"),
    ("wandb_tags", ("x" * 65,), r"at most 64 characters"),
])
def test_a_bad_field_is_one_line_naming_it(field, value, match):
  config = _tiny_config(("logging.wandb", "p"))
  config.logging[field] = value
  with pytest.raises(ValueError, match=match) as raised:
    training_settings(config)
  assert "\n" not in str(raised.value)


@pytest.mark.parametrize("flag,text", [("wandb_mode", "offline"), ("wandb_entity", "team"),
                                       ("wandb_run_name", "x"), ("wandb_tags", "('a',)")])
def test_a_w_and_b_option_without_a_project_is_refused_not_ignored(flag, text):
  config = _tiny_config((f"logging.{flag}", text))
  with pytest.raises(ValueError, match=rf"logging.{flag}=.* is set but logging.wandb is None "
                                       r"\(W&B off\).*--config.logging.wandb=PROJECT"):
    training_settings(config)


def test_the_section_takes_its_fields_from_the_command_line():
  config = _tiny_config(("logging.wandb", "proj"), ("logging.wandb_mode", "online"),
                        ("logging.wandb_entity", "team"), ("logging.wandb_tags", "('a', 'b')"))
  assert training_settings(config).logging == dataclasses.replace(
      LoggingSettings(), wandb="proj", wandb_mode="online", wandb_entity="team",
      wandb_tags=("a", "b"))
  # The run name defaults to the workdir's base name.
  assert LoggingSettings(wandb="p").run_name(os.path.join("a", "b", "digits_vit/")) == "digits_vit"
