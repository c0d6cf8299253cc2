"""MkDocs hooks of the documentation site (mkdocs.yml `hooks:`).

- The API reference is generated at build time, never kept by hand: a page per
  module of the package (mkdocstrings renders its docstrings), an index of them
  (each module's first docstring line), the registries as they are when the
  package is imported (attention variants, model names), and the config
  sections read from `sections.run.TrainingSettings`' fields.
- The home page is README.md itself, its links read from docs/.
- `repo_url` is pyproject.toml's `[project.urls] Repository` (the one place the
  address is written), and a link from a page to a repository file outside
  docs/ (`../configs/x.py`, `../benchmarks/...`, `../README.md`), which GitHub
  follows in the checkout, becomes a link to that file in the repository.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import sys
import tomllib
import typing

from mkdocs.structure.files import File

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "vit_spectral"
REFERENCE = "reference"
LINK = re.compile(r"(\]\()(\.\./[^)\s#]+)(#[^)\s]*)?\)")


def repository_url() -> str:
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    return tomllib.load(f)["project"]["urls"]["Repository"]


def modules() -> list[tuple[str, str]]:
  """(dotted name, first docstring line) of every module of the package, in
  path order; read with `ast`, nothing imported."""
  found = []
  for folder, dirs, files in os.walk(os.path.join(ROOT, PACKAGE)):
    dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
    for name in sorted(files):
      if not name.endswith(".py"):
        continue
      path = os.path.join(folder, name)
      dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
      dotted = dotted.removesuffix(".__init__")
      with open(path, encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
      found.append((dotted, doc.strip().split("\n")[0]))
  return sorted(found)


def _page(dotted: str) -> str:
  return f"{REFERENCE}/{dotted}.md"


def _cell(text: str) -> str:
  return text.replace("|", "\\|")


def index_page(found: list[tuple[str, str]]) -> str:
  lines = ["# API reference", "",
           "Generated from the package at build time: every module with its docstrings "
           "(a page each), the [registries](registries.md) and the "
           "[config sections](config-sections.md). Names are importable at the paths shown; "
           "the package's top-level names (`vit_spectral.build_model`, ...) are listed in "
           "[`vit_spectral`](vit_spectral.md).", "",
           "| module | what |", "| --- | --- |"]
  for dotted, first in found:
    lines.append(f"| [`{dotted}`]({dotted}.md) | {_cell(first)} |")
  return "\n".join(lines) + "\n"


def module_page(dotted: str) -> str:
  return f"# `{dotted}`\n\n::: {dotted}\n    options:\n      show_root_heading: false\n"


def registries_page() -> str:
  from vit_spectral import registries  # noqa: PLC0415  (imports the variants)
  return ("# Registries\n\nWhat the registries hold when the package is imported "
          "(`python -m vit_spectral.registries` prints the same); a variant or family of "
          "one's own appears once its module is imported.\n\n" + registries.tables() + "\n")


def sections_page() -> str:
  from vit_spectral.sections import run  # noqa: PLC0415
  lines = ["# Config sections", "",
           "`main` converts a config once into `sections.run.TrainingSettings`; each field "
           "below is a section of the config (`run` holds the top-level fields), declared "
           "once, with its defaults and checks.", "",
           "| config | declared by |", "| --- | --- |"]
  types = typing.get_type_hints(run.TrainingSettings)
  for field in dataclasses.fields(run.TrainingSettings):
    kind = types[field.name]
    if not isinstance(kind, type) or not kind.__module__.startswith(PACKAGE):
      continue  # `config`: the ConfigDict itself
    where = "top-level fields" if field.name == "run" else f"`config.{field.name}`"
    lines.append(f"| {where} | [`{kind.__module__}.{kind.__qualname__}`]"
                 f"({kind.__module__}.md#{kind.__module__}.{kind.__qualname__}) |")
  return "\n".join(lines) + "\n"


README_LINK = re.compile(r"(\]\()(?![a-z]+:|#)([^)\s]+)\)")


def home_page() -> str:
  """README.md as the site's index.md: `docs/x.md` becomes `x.md`, any other
  repository path `../path` (which on_page_markdown points at the repository)."""
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    text = f.read()

  def from_docs(match):
    target = match.group(2)
    target = target[len("docs/"):] if target.startswith("docs/") else "../" + target
    return f"{match.group(1)}{target})"

  out, fenced = [], False
  for line in text.split("\n"):
    if line.startswith("```"):
      fenced = not fenced
    out.append(line if fenced else README_LINK.sub(from_docs, line))
  return "\n".join(out)


def on_config(config):
  config.repo_url = repository_url()
  config.edit_uri = "blob/main/docs/"
  sys.path.insert(0, ROOT)
  return config


def on_files(files, config):
  found = modules()
  generated = {"index.md": home_page(),
               f"{REFERENCE}/index.md": index_page(found),
               f"{REFERENCE}/registries.md": registries_page(),
               f"{REFERENCE}/config-sections.md": sections_page()}
  generated.update({_page(dotted): module_page(dotted) for dotted, _ in found})
  for uri, content in generated.items():
    files.append(File.generated(config, uri, content=content))
  return files


def on_page_markdown(markdown, page, config, files):
  """Links to repository files outside docs/ point at the repository."""
  here = os.path.dirname(os.path.join("docs", page.file.src_uri))
  blob = config.repo_url.rstrip("/") + "/blob/main/"

  def outside(match):
    target = os.path.normpath(os.path.join(here, match.group(2)))
    if target.startswith("docs" + os.sep) or target == "docs":
      return match.group(0)
    return f"{match.group(1)}{blob}{target}{match.group(3) or ''})"

  return LINK.sub(outside, markdown)
