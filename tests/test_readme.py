"""The README's promises and the docs' shape: the README stays one screen per
need (≤ 300 lines) and links every page of docs/, which the site's nav lists;
the training page names every shipped recipe; the five paper pages come in
order, each opening with a runnable snippet and linking its notebook and its
entries of the claims ledger; every link between the documents resolves."""

import json
import os
import re

import pytest
import yaml

from benchmarks import render_claims
from benchmarks.claims import ledger
from tests import markdown_docs as md
from vit_spectral.configs import recipe_names

ROOT = md.ROOT
RECIPES = recipe_names()
PAPERS = ledger.PAPERS
README_LINES = 300       # issue 43: a README of one screen per need


def test_the_readme_stays_short():
  lines = md.read("README.md").count("\n")
  assert lines <= README_LINES, f"README.md has {lines} lines; move text to docs/ (≤ {README_LINES})"


def _nav_pages(nav) -> list[str]:
  pages = []
  for item in nav:
    value = next(iter(item.values())) if isinstance(item, dict) else item
    pages += _nav_pages(value) if isinstance(value, list) else [value]
  return pages


def test_the_readme_and_the_site_nav_link_every_page():
  pages = sorted(os.path.relpath(p, "docs") for p in md.paths() if p.startswith("docs/"))
  readme_links = {link.partition("#")[0] for link in _links(md.read("README.md"))}
  unlinked = [p for p in pages if f"docs/{p}" not in readme_links]
  assert not unlinked, f"README.md's documentation map does not link {unlinked}"
  with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
    config = yaml.load(f, Loader=yaml.BaseLoader)   # no !!python tags resolved
  nav = _nav_pages(config["nav"])
  assert sorted(p for p in nav if not p.startswith("reference/")) == sorted(pages + ["index.md"]), (
      f"mkdocs.yml's nav {nav} is not docs/'s pages {pages} (+ the generated index.md)")


def test_every_recipe_is_named_with_its_path():
  text = md.read("docs/training.md")
  missing = [name for name in RECIPES if f"configs/{name}.py" not in text]
  assert not missing, f"docs/training.md does not name the recipes {missing}"


def _links(text: str) -> list[str]:
  return re.findall(r"\]\(([^)\s]+)\)", md.without_code(text))


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


def _paper_pages() -> list[tuple[str, str]]:
  """(paper, page) of the paper pages, in the order their titles number them."""
  return [(paper, path) for paper, path in render_claims.PAPER_PAGES.items()]


def test_papers_come_in_order_and_the_papers_table_links_each():
  assert [paper for paper, _ in _paper_pages()] == list(PAPERS)
  top = md.read("README.md").split("\n## ", 1)[0]
  for paper, page in _paper_pages():
    assert f"| [{paper}]({page}) |" in top, f"the papers table does not link paper {paper}'s {page}"
    title = md.headings(page)[0]
    assert title.level == 1 and title.title.startswith(f"Paper {paper}"), (page, title)


@pytest.mark.parametrize("paper", PAPERS)
def test_a_paper_page_opens_with_a_runnable_snippet(paper):
  page = render_claims.PAPER_PAGES[paper]
  heading = md.headings(page)[0]
  first = md.blocks(page)[0]
  assert first.lang == "python" and first.parse_only is None, (
      f"{page} must open with a runnable ```python block")
  assert first.line - heading.line <= 6, f"{page}'s snippet comes after more than a lead-in"
  assert "vit_spectral" in first.code and "assert" in first.code


@pytest.mark.parametrize("paper", PAPERS)
def test_a_paper_page_links_its_notebook_its_ledger_entries_and_its_bibtex(paper):
  page = render_claims.PAPER_PAGES[paper]
  text = md.read(page)
  notebook = render_claims.NOTEBOOKS[paper]
  assert f"](../{notebook})" in text, f"{page} does not link {notebook}"
  paragraph = next((p for p in text.split("\n\n") if p.startswith("**Claims**")), None)
  assert paragraph, f"{page} has no '**Claims**' paragraph"
  assert "](claims.md)" in paragraph
  assert f"--paper={paper}" in paragraph
  listed = {}
  for group in paragraph.split(";"):
    verdict = next((v for v, mark in render_claims.MARKS.items() if mark in group), None)
    for claim in re.findall(rf"`({paper}-[\w-]+)`", group):
      listed[claim] = verdict
  entries = {e["id"]: e["verdict"] for e in ledger.read() if e["paper"] == paper}
  assert listed == entries, (
      f"{page}'s '**Claims**' paragraph is not the ledger's: listed {listed}, ledger {entries}")
  figures = {e["id"]: e["figure"] for e in ledger.read() if e["paper"] == paper and e.get("figure")}
  for claim, figure in figures.items():
    assert f"[`{claim}`](../{figure})" in paragraph, f"{claim} does not link its figure {figure}"
  # Its BibTeX names the arXiv paper the README's table links.
  arxiv = re.search(rf"\| \[{paper}\]\(.*?arxiv\.org/abs/([\d.]+)\)", md.read("README.md")).group(1)
  bibtex = [b for b in md.blocks(page) if b.lang == "bibtex"]
  assert len(bibtex) == 1 and f"eprint = {{{arxiv}}}" in bibtex[0].code, (
      f"{page} must end with one BibTeX block with eprint = {{{arxiv}}}")


def test_the_notebooks_table_gives_each_notebooks_committed_run_time():
  """The 'full run' column is each committed notebook's own record
  (metadata.vit_spectral.full_run_seconds): a re-run notebook updates it."""
  rows = [line.split("|")[1:-1] for line in md.read("docs/notebooks.md").split("\n")
          if line.startswith("| `")]
  assert len(rows) == 6, rows
  for cells in rows:
    name = cells[0].strip().strip("`")
    with open(os.path.join(ROOT, "colabs", f"{name}.ipynb"), encoding="utf-8") as f:
      seconds = json.load(f)["metadata"]["vit_spectral"]["full_run_seconds"]
    assert cells[3].strip() == f"{seconds} s", (
        f"docs/notebooks.md's table gives {name} a full run of {cells[3].strip()}; "
        f"its metadata says {seconds} s")
