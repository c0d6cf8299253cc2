"""The documentation site's hooks (scripts/mkdocs_hooks.py) and what a research
library ships beside it. The site itself is built strictly by .ci/run
(`mkdocs build --strict`); these check the pieces that build relies on against
independent readings: the generated reference covers every module the package
imports as, the home page's links point where GitHub's do, links to repository
files leave the site for the repository, and CITATION.cff carries pyproject's
version and address."""

import importlib
import os
import pkgutil
import re
import sys
import tomllib
import types

import pytest
import yaml

from tests import markdown_docs as md

sys.path.insert(0, os.path.join(md.ROOT, "scripts"))
import mkdocs_hooks  # noqa: E402  pylint: disable=wrong-import-position


def _pyproject() -> dict:
  with open(os.path.join(md.ROOT, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)


def test_the_reference_has_a_page_for_every_module_of_the_package():
  import vit_spectral  # noqa: PLC0415
  walked = {"vit_spectral"} | {m.name for m in pkgutil.walk_packages(
      vit_spectral.__path__, "vit_spectral.") if not m.name.rsplit(".", 1)[-1].startswith("_")}
  listed = {name for name, _ in mkdocs_hooks.modules()}
  assert listed == walked, (sorted(walked - listed), sorted(listed - walked))
  index = mkdocs_hooks.index_page(mkdocs_hooks.modules())
  for name in ("vit_spectral.models.build", "vit_spectral.attention.registry",
               "vit_spectral.analysis.diagnosis", "vit_spectral.pretrained.loading",
               "vit_spectral.main", "vit_spectral.training.trainer"):
    assert f"[`{name}`]({name}.md)" in index
    assert mkdocs_hooks.module_page(name).startswith(f"# `{name}`\n\n::: {name}\n")


def test_a_modules_first_docstring_line_is_its_summary():
  summaries = dict(mkdocs_hooks.modules())
  for name in ("vit_spectral.sections.run", "vit_spectral.analysis.diagnosis"):
    module = importlib.import_module(name)
    assert summaries[name] == module.__doc__.strip().split("\n")[0]


def test_the_registries_page_lists_every_registered_variant_and_model():
  from vit_spectral.attention import registry  # noqa: PLC0415
  from vit_spectral.models import backbone  # noqa: PLC0415
  page = mkdocs_hooks.registries_page()
  for name in registry.registered_attentions():
    assert f"| `{name}` |" in page
  for name in backbone.registered_model_names():
    assert f"| `{name}` |" in page


def test_the_sections_page_names_every_section_of_a_training_config():
  import dataclasses  # noqa: PLC0415
  from vit_spectral.sections import run  # noqa: PLC0415
  page = mkdocs_hooks.sections_page()
  rows = re.findall(r"^\| (.*?) \| \[`(vit_spectral\.[\w.]+)`\]", page, re.M)
  wanted = [f.name for f in dataclasses.fields(run.TrainingSettings) if f.name != "config"]
  assert [where for where, _ in rows] == [
      "top-level fields" if name == "run" else f"`config.{name}`" for name in wanted]
  for _, dotted in rows:
    module, _, qualname = dotted.rpartition(".")
    assert dataclasses.is_dataclass(getattr(importlib.import_module(module), qualname))


def test_the_home_page_is_the_readme_with_its_links_read_from_docs():
  home = mkdocs_hooks.home_page()
  readme = md.read("README.md")
  assert home.count("\n") == readme.count("\n")
  assert "](docs/" not in home
  assert "](paper-000-fourier.md)" in home and "](../LICENSE)" in home
  assert "](https://arxiv.org/abs/2203.05962)" in home          # absolute links stay
  assert md.blocks("README.md")[0].code in home                 # code is untouched


def test_links_to_repository_files_go_to_the_repository():
  config = types.SimpleNamespace(repo_url="https://example.org/r")
  page = types.SimpleNamespace(file=types.SimpleNamespace(src_uri="training.md"))
  text = ("[a](../configs/x.py) [b](speed.md#x) [c](../README.md#two-commands) "
          "[d](https://arxiv.org/abs/1) [e](reference/index.md)")
  out = mkdocs_hooks.on_page_markdown(text, page, config, None)
  assert out == ("[a](https://example.org/r/blob/main/configs/x.py) [b](speed.md#x) "
                 "[c](https://example.org/r/blob/main/README.md#two-commands) "
                 "[d](https://arxiv.org/abs/1) [e](reference/index.md)")


def test_the_site_reads_the_repository_address_from_pyproject():
  assert mkdocs_hooks.repository_url() == _pyproject()["project"]["urls"]["Repository"]
  with open(os.path.join(md.ROOT, "mkdocs.yml"), encoding="utf-8") as f:
    config = yaml.load(f, Loader=yaml.BaseLoader)
  assert "repo_url" not in config and config["strict"] == "true"


def test_citation_carries_pyprojects_version_licence_and_address():
  with open(os.path.join(md.ROOT, "CITATION.cff"), encoding="utf-8") as f:
    citation = yaml.safe_load(f)
  project = _pyproject()["project"]
  assert citation["cff-version"] == "1.2.0"
  assert citation["version"] == project["version"]
  assert citation["license"] == project["license"]["text"]
  assert citation["repository-code"] == project["urls"]["Repository"]
  with open(os.path.join(md.ROOT, "LICENSE"), encoding="utf-8") as f:
    assert "Apache License" in f.read(200) and project["license"]["text"] == "Apache-2.0"


def test_the_changelog_names_the_version_and_the_moved_modules():
  import vit_spectral  # noqa: PLC0415
  text = md.read("CHANGELOG.md")
  assert f"## {_pyproject()['project']['version']}" in text
  assert "MOVED_MODULES" in text and vit_spectral.MOVED_MODULES


@pytest.mark.parametrize("page", [p for p in md.paths() if p.startswith("docs/")])
def test_a_page_opens_with_one_title(page):
  heads = md.headings(page)
  assert heads[0].level == 1 and heads[0].line == 1, f"{page} must open with its '# ' title"
  assert [h for h in heads if h.level == 1] == heads[:1], f"{page} has more than one '# ' title"
