"""The README's promises and its shape: the layout table (docs/reference.md)
lists every module of the package but the registered variants' and families'
(listed by `python -m vit_spectral.registries`); the README names every shipped recipe; its
table of contents links every section; the five papers come in order, each
section opening with a runnable snippet and linking its notebook and its
entries of the claims ledger; every link between the documents resolves."""

import json
import os
import re

import pytest

from benchmarks import render_claims
from benchmarks.claims import ledger
from tests import markdown_docs as md
from vit_spectral.configs import recipe_names

ROOT = md.ROOT
RECIPES = recipe_names()
PAPERS = ledger.PAPERS


def _layout_block() -> str:
  text = md.read("docs/reference.md")
  match = re.search(r"## Layout\n.*?```\n(.*?)```", text, re.S)
  assert match, "docs/reference.md has no '## Layout' section with a code block"
  return match.group(1)


def _plugin_modules() -> set[str]:
  """The files of the registered attention variants and model families: the
  docs list those by reading the registries (`python -m vit_spectral.registries`),
  so a new one needs no row by hand."""
  from vit_spectral import registries  # pylint: disable=import-outside-toplevel
  from vit_spectral.models import backbone  # pylint: disable=import-outside-toplevel
  modules = {row[2] for row in registries.attention_rows()}
  modules |= {backbone.model_entry(name)[0].__module__
              for name in backbone.registered_model_names()}
  return {m.replace(".", "/") + ".py" for m in modules}


def _modules() -> list[str]:
  found = []
  for folder, _, files in os.walk(os.path.join(ROOT, "vit_spectral")):
    for name in files:
      if name.endswith(".py") and name != "__init__.py" and name[:-3] not in RECIPES:
        found.append(os.path.relpath(os.path.join(folder, name), ROOT))
  return sorted(set(found) - _plugin_modules())


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
  assert not missing, f"docs/reference.md's layout table does not list {missing}"


def test_every_recipe_is_named_with_its_path():
  text = md.read("README.md")
  missing = [name for name in RECIPES if f"configs/{name}.py" not in text]
  assert not missing, f"README.md does not name the recipes {missing}"


def _links(text: str) -> list[str]:
  return re.findall(r"\]\(([^)\s]+)\)", md.without_code(text))


def test_contents_link_every_section_in_order():
  """Every '##' section, in order; a '###' section may follow its own."""
  contents = md.section("README.md", "Contents")
  linked = [link[1:] for link in _links(contents)]
  readme = [h for h in md.headings("README.md") if h.title != "Contents"]
  sections = [h.anchor for h in readme if h.level == 2]
  assert [a for a in linked if a in sections] == sections, (
      "README's '## Contents' must link every '##' section, in order")
  order = {h.anchor: k for k, h in enumerate(readme)}
  for anchor in linked:
    assert anchor in order, f"'## Contents' links #{anchor}, no section of the README"
  for before, after in zip(linked, linked[1:]):
    assert order[before] < order[after], f"'## Contents' links #{after} after #{before}"


@pytest.mark.parametrize("path", md.paths())
def test_every_link_resolves(path):
  """Relative links name a file that exists and, after '#', one of its headings."""
  broken = []
  for link in _links(md.read(path)):
    if re.match(r"[a-z]+:", link):  # https:, mailto:
      continue
    target, _, anchor = link.partition("#")
    target_path = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
    if not os.path.exists(os.path.join(ROOT, target_path)):
      broken.append(f"{link} (no file {target_path})")
    elif anchor and (not target_path.endswith(".md")
                     or anchor not in {h.anchor for h in md.headings(target_path)}):
      broken.append(f"{link} (no heading #{anchor} in {target_path})")
  assert not broken, f"{path}: broken links {broken}"


def _paper_sections() -> list[tuple[str, str]]:
  """(paper, anchor) of the README's paper sections, in the order they come."""
  return [(re.match(r"Paper (\d{3})", h.title).group(1), h.anchor)
          for h in md.headings("README.md") if h.level == 2 and h.title.startswith("Paper ")]


def test_papers_come_in_order_and_the_papers_table_links_each():
  sections = _paper_sections()
  assert [paper for paper, _ in sections] == list(PAPERS)
  top = md.read("README.md").split("\n## ", 1)[0]
  for paper, anchor in sections:
    assert f"| [{paper}](#{anchor}) |" in top, f"the papers table does not link paper {paper}"


@pytest.mark.parametrize("paper", PAPERS)
def test_a_paper_section_opens_with_a_runnable_snippet(paper):
  heading = next(h for h in md.headings("README.md") if h.title.startswith(f"Paper {paper}"))
  first = next(b for b in md.blocks("README.md") if b.line > heading.line)
  assert first.lang == "python" and first.parse_only is None, (
      f"paper {paper}'s section must open with a runnable ```python block")
  assert first.line - heading.line <= 6, f"paper {paper}'s snippet comes after more than a lead-in"
  assert "vit_spectral" in first.code and "assert" in first.code


@pytest.mark.parametrize("paper", PAPERS)
def test_a_paper_section_links_its_notebook_and_its_ledger_entries(paper):
  text = md.section("README.md", f"Paper {paper}")
  notebook = render_claims.NOTEBOOKS[paper]
  assert f"]({notebook})" in text, f"paper {paper}'s section does not link {notebook}"
  paragraph = next((p for p in text.split("\n\n") if p.startswith("**Claims**")), None)
  assert paragraph, f"paper {paper}'s section has no '**Claims**' paragraph"
  assert "(#what-reproduces-the-claims-ledger)" in paragraph
  assert f"--paper={paper}" in paragraph
  listed = {}
  for group in paragraph.split(";"):
    verdict = next((v for v, mark in render_claims.MARKS.items() if mark in group), None)
    for claim in re.findall(rf"`({paper}-[\w-]+)`", group):
      listed[claim] = verdict
  entries = {e["id"]: e["verdict"] for e in ledger.read() if e["paper"] == paper}
  assert listed == entries, (
      f"paper {paper}'s '**Claims**' paragraph is not the ledger's: listed {listed}, "
      f"ledger {entries}")
  figures = {e["id"]: e["figure"] for e in ledger.read() if e["paper"] == paper and e.get("figure")}
  for claim, figure in figures.items():
    assert f"[`{claim}`]({figure})" in paragraph, f"{claim} does not link its figure {figure}"


def test_the_notebooks_table_gives_each_notebooks_committed_run_time():
  """The 'full run' column is each committed notebook's own record
  (metadata.vit_spectral.full_run_seconds): a re-run notebook updates it."""
  rows = [line.split("|")[1:-1] for line in md.section("README.md", "Notebooks").split("\n")
          if line.startswith("| `")]
  assert len(rows) == 6, rows
  for cells in rows:
    name = cells[0].strip().strip("`")
    with open(os.path.join(ROOT, "colabs", f"{name}.ipynb"), encoding="utf-8") as f:
      seconds = json.load(f)["metadata"]["vit_spectral"]["full_run_seconds"]
    assert cells[3].strip() == f"{seconds} s", (
        f"README's notebook table gives {name} a full run of {cells[3].strip()}; "
        f"its metadata says {seconds} s")
