"""vit-spectral-list: every registered name is listed, read from the registries;
the names are checked against sets found independently (the registering
decorators and calls read from the sources, the recipe files, the families'
own declarations), and a toy variant and backbone show up once registered."""

import ast
import dataclasses
import glob
import os
import subprocess
import sys

import pytest

from vit_spectral import catalogue, configs
from vit_spectral.attention import base, registry
from vit_spectral.models import backbone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "vit_spectral")


def _calls(folder: str, function: str) -> list[ast.Call]:
  """Every call of `function` (by name) in the modules of `folder`."""
  found = []
  for path in glob.glob(os.path.join(PACKAGE, folder, "*.py")):
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
      if isinstance(node, ast.Call) and getattr(node.func, "id", None) == function:
        found.append(node)
  return found


def _listed(section: str) -> list[str]:
  """The names in the printed listing of `section` (first word of each entry row)."""
  rows = catalogue.catalogue([section]).split("\n")[1:]
  return [row.split()[0] for row in rows if row.startswith("  ") and not row.startswith("   ")
          and not row.startswith("  every variant")]


def test_attention_variants_are_those_the_decorators_register():
  in_sources = {call.args[0].value for call in _calls("attention", "register_attention")}
  assert len(in_sources) >= 8
  assert set(_listed("attention")) == in_sources
  assert [entry.name for entry in catalogue.attention_entries()] == sorted(in_sources)


def test_recipes_are_the_config_files_that_define_get_config():
  in_files = set()
  for path in glob.glob(os.path.join(PACKAGE, "configs", "*.py")):
    tree = ast.parse(open(path, encoding="utf-8").read())
    if any(isinstance(n, ast.FunctionDef) and n.name == "get_config" for n in tree.body):
      in_files.add(os.path.basename(path)[:-3])
  assert {"digits_vit", "cifar10_vit"} <= in_files
  assert set(_listed("recipes")) == in_files
  digits = next(e for e in catalogue.recipe_entries() if e.name == "digits_vit")
  assert digits.description.startswith("A small ViT on scikit-learn's digits")


def test_model_names_and_backbones_are_the_families_declarations():
  from vit_spectral.models import cait, cswin, swin, variants  # noqa: PLC0415
  declared = {**{n: "ViT" for n in variants.MODEL_NAMES},
              **{n: "Swin" for n in swin.VARIANTS}, **{n: "CaiT" for n in cait.VARIANTS},
              **{n: "CSwin" for n in cswin.VARIANTS}}
  entries = catalogue.model_entries()
  assert {e.name for e in entries} == set(declared) == set(_listed("models"))
  for entry in entries:
    cls, fields = backbone.model_entry(entry.name)
    assert entry.description.startswith(f"{declared[entry.name]}: ")
    for key, value in fields.items():
      assert f"{key}={value}" in entry.description
  registering = {call.args[0].id for call in _calls("models", "register_models")
                 if isinstance(call.args[0], ast.Name)}
  assert registering == {"ViT", "Swin", "CaiT", "CSwin"}
  assert set(_listed("backbones")) == registering


def test_a_variants_own_options_are_listed_with_defaults_and_the_shared_ones_once():
  cosine = next(e for e in catalogue.attention_entries() if e.name == "cosine")
  fields = {f.name: f.default for f in dataclasses.fields(registry.get_attention("cosine"))}
  assert f"tau={fields['tau']!r}" in cosine.options
  shared = {f.name for f in dataclasses.fields(base.Attention)}
  assert not any(option.split("=")[0] in shared for option in cosine.options)
  assert not set(base.Attention.SET_BY_BLOCK) & {
      o.split("=")[0] for o in catalogue.shared_attention_options()}
  text = catalogue.catalogue(["attention"])
  assert text.count("every variant also takes:") == 1 and "qkv_bias=True" in text


@pytest.fixture(name="toy_registered")
def _toy_registered(monkeypatch):
  """A toy attention variant and a toy backbone, registered in copies of the
  registries that the test's end restores."""
  monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # pylint: disable=protected-access
  monkeypatch.setattr(backbone, "_MODELS", dict(backbone._MODELS))  # pylint: disable=protected-access

  @registry.register_attention("toy_gain")
  class ToyGainAttention(base.Attention):
    """Dot-product attention whose output is scaled by a gain (a test's toy)."""
    gain: float = 0.25

  class ToyBackbone(backbone.IsotropicBackbone):
    """A backbone of one's own (a test's toy)."""

  backbone.register_models(ToyBackbone, {"Toy-1": {"depth": 1, "hidden_size": 8}})
  return ToyGainAttention, ToyBackbone


def test_a_registered_toy_variant_and_backbone_show_up(toy_registered):
  del toy_registered
  text = catalogue.catalogue()
  assert "toy_gain" in _listed("attention") and "Toy-1" in _listed("models")
  assert "ToyBackbone" in _listed("backbones")
  toy = next(e for e in catalogue.attention_entries() if e.name == "toy_gain")
  assert toy.options == ("gain=0.25",)
  assert "scaled by a gain" in toy.description and "Toy-1" in text


def test_sections_pick_what_is_listed_and_a_wrong_one_is_one_line(capsys):
  assert catalogue.main(["recipes"]) == 0
  out = capsys.readouterr().out
  assert out.startswith("Recipes") and "Attention variants" not in out
  assert len(_listed("recipes")) == len(configs.recipe_names())
  assert catalogue.main(["modles"]) == 2
  err = capsys.readouterr().err.strip()
  assert err == ("vit-spectral-list: unknown section 'modles' (did you mean 'models'?); "
                 "choose from models, attention, backbones, recipes (none = all)")


def test_the_module_runs_as_the_command():
  result = subprocess.run([sys.executable, "-m", "vit_spectral.catalogue", "backbones"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT), check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.startswith("Backbones") and "CSwin" in result.stdout


def test_every_console_script_names_a_function_of_the_package():
  import importlib  # noqa: PLC0415
  import tomllib  # noqa: PLC0415
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    scripts = tomllib.load(f)["project"]["scripts"]
  assert {"vit-spectral-evaluate", "vit-spectral-list"} <= set(scripts)
  for name, target in scripts.items():
    module, function = target.split(":")
    assert callable(getattr(importlib.import_module(module), function)), name
