"""Every leaf field of every shipped recipe can be set from the command line
(`--config.a.b=value`, through the command line's own parser: ml_collections'
config_flags), and every field that may be None can be set back to None
(`--config.a.b=None`). One parse per recipe sets all of its fields at once."""

import importlib

import pytest
from ml_collections import config_dict

from vit_spectral import configs, main


def _leaves(config, prefix=""):
  """(path, held) of every leaf: a value, a FieldReference (a field that may be
  None) or an empty section."""
  for key, held in config.items(preserve_field_references=True):
    path = f"{prefix}{key}"
    if isinstance(held, config_dict.ConfigDict) and held.keys():
      yield from _leaves(held, f"{path}.")
    else:
      yield path, held


def _new_value(held):
  """A value of the field's type that differs from the one it holds, and its
  command-line text."""
  if isinstance(held, config_dict.FieldReference):
    kind, value = held.get_type(), held.get()
  else:
    kind, value = type(held), held
  if kind is bool:
    return (not value), str(not value).lower()
  if kind is int:
    return (value or 0) + 1, str((value or 0) + 1)
  if kind is float:
    return (value or 0.0) + 0.5, repr((value or 0.0) + 0.5)
  if kind is str:
    return f"{value or ''}x", f"{value or ''}x"
  if kind is tuple:
    new = value + value[:1] if value else (1,)
    return new, repr(new)
  if kind is config_dict.ConfigDict:  # an empty section, set whole
    return {"probe": 1}, "{'probe': 1}"
  raise AssertionError(f"no command-line value for a {kind}")


def _get(config, path):
  for name in path.split("."):
    config = config[name]
  return config


@pytest.mark.parametrize("name", configs.recipe_names())
def test_every_field_of_the_recipe_can_be_set_and_unset(name):
  path = configs.recipe_path(name)
  leaves = dict(_leaves(importlib.import_module(f"vit_spectral.configs.{name}").get_config()))
  # model.variant is no free string: it names a registered model, whose fields
  # then replace the recipe's (tests/test_quick_command_line.py sets it).
  new = {field: _new_value(held) for field, held in leaves.items() if field != "model.variant"}
  config = main.parse_command_line(
      ["train.py", f"--config={path}", *(f"--config.{field}={text}"
                                         for field, (_, text) in new.items())]).config.value
  for field, (value, _) in new.items():
    got = _get(config, field)
    got = got.to_dict() if isinstance(got, config_dict.ConfigDict) else got
    assert got == value and type(got) is type(value), (field, got, value)

  placeholders = [field for field, held in leaves.items()
                  if isinstance(held, config_dict.FieldReference)]
  assert placeholders  # every recipe has fields that may be None
  config = main.parse_command_line(
      ["train.py", f"--config={path}", *(f"--config.{field}=None"
                                         for field in placeholders)]).config.value
  assert all(_get(config, field) is None for field in placeholders)
