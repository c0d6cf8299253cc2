"""The command line finds the shipped recipes by name, in both flag forms."""

import os

import pytest

from vit_spectral import configs
from vit_spectral.main import resolve_recipe_names


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
