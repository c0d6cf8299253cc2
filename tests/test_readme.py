"""README promises: its layout table lists every module of the package, and it
names every shipped recipe."""

import os
import re

from vit_spectral.configs import recipe_names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPES = recipe_names()


def _layout_block() -> str:
  text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
  match = re.search(r"## Layout\n.*?```\n(.*?)```", text, re.S)
  assert match, "README.md has no '## Layout' section with a code block"
  return match.group(1)


def _modules() -> list[str]:
  found = []
  for folder, _, files in os.walk(os.path.join(ROOT, "vit_spectral")):
    for name in files:
      if name.endswith(".py") and name != "__init__.py" and name[:-3] not in RECIPES:
        found.append(os.path.relpath(os.path.join(folder, name), ROOT))
  return sorted(found)


def test_layout_lists_every_module():
  # The table is an indented tree: a module line sits under its folder's line.
  lines = _layout_block().splitlines()
  listed, stack = set(), []
  for line in lines:
    name = line.strip().split(" ")[0]
    if not name:
      continue
    depth = (len(line) - len(line.lstrip())) // 2
    stack = stack[:depth] + [name]
    listed.add("".join(stack))
  missing = [m for m in _modules() if m not in listed]
  assert not missing, f"README.md's layout table does not list {missing}"


def test_every_recipe_is_named_with_its_path():
  text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
  missing = [name for name in RECIPES if f"configs/{name}.py" not in text]
  assert not missing, f"README.md does not name the recipes {missing}"
