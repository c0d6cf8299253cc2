"""The repository's Markdown documents as the README tests read them: README.md
and docs/*.md, their fenced code blocks (with the `<!-- parse-only: reason -->`
mark that may precede one), their headings and the anchors GitHub gives them."""

from __future__ import annotations

import dataclasses
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARSE_ONLY = re.compile(r"<!--\s*parse-only:\s*(.*?)\s*-->")


def paths() -> list[str]:
  """README.md, then docs/*.md, relative to the repository root."""
  docs = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
  return ["README.md", *docs]


def read(path: str) -> str:
  with open(os.path.join(ROOT, path), encoding="utf-8") as f:
    return f.read()


@dataclasses.dataclass(frozen=True)
class Block:
  """A fenced code block: its language tag, its text, the line of its opening
  fence (1-based) and, where the line before it marks it so, why it is only
  parsed."""
  path: str
  lang: str
  code: str
  line: int
  parse_only: str | None

  @property
  def name(self) -> str:
    return f"{self.path}:{self.line}"


def blocks(path: str) -> list[Block]:
  lines = read(path).split("\n")
  found, i = [], 0
  while i < len(lines):
    opening = re.fullmatch(r"```(\S*)\s*", lines[i])
    if not opening:
      i += 1
      continue
    end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
    if end is None:
      raise ValueError(f"{path}:{i + 1}: a code fence that is never closed")
    before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
    mark = PARSE_ONLY.fullmatch(before.strip())
    found.append(Block(path, opening.group(1), "\n".join(lines[i + 1:end]) + "\n", i + 1,
                       mark.group(1) if mark else None))
    i = end + 1
  return found


def slug(title: str) -> str:
  """The anchor GitHub gives a heading: lower case, punctuation but hyphens and
  underscores dropped, spaces as hyphens."""
  return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


@dataclasses.dataclass(frozen=True)
class Heading:
  level: int
  title: str
  anchor: str
  line: int


def headings(path: str) -> list[Heading]:
  """Every heading outside code blocks, with its anchor (a repeated anchor gets
  -1, -2, ... as on GitHub)."""
  found, seen, fenced = [], {}, False
  for number, line in enumerate(read(path).split("\n"), 1):
    if line.startswith("```"):
      fenced = not fenced
      continue
    match = re.match(r"(#{1,6}) (.+)", line)
    if fenced or not match:
      continue
    anchor = slug(match.group(2))
    count = seen.get(anchor, 0)
    seen[anchor] = count + 1
    found.append(Heading(len(match.group(1)), match.group(2), anchor + (f"-{count}" if count else ""),
                         number))
  return found


def without_code(text: str) -> str:
  """`text` with its fenced blocks blanked out (line numbers kept)."""
  return re.sub(r"(?ms)^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text)


def section(path: str, title_start: str) -> str:
  """The text of the `##` section whose title starts with `title_start`, up to
  the next `##` heading."""
  lines = read(path).split("\n")
  level_two = [h for h in headings(path) if h.level == 2]
  for k, heading in enumerate(level_two):
    if heading.title.startswith(title_start):
      stop = level_two[k + 1].line - 1 if k + 1 < len(level_two) else len(lines)
      return "\n".join(lines[heading.line - 1:stop])
  raise KeyError(f"{path} has no section '## {title_start}...'")
