r"""Renders the claims ledger (benchmarks/results/claims.json) as Markdown.

  python benchmarks/render_claims.py            # rewrite the ledger page's table, the
                                                # README's summary, the paper pages'
                                                # **Claims** lines and the notebooks'
                                                # "What came out" outputs
  python benchmarks/render_claims.py --check    # exit 1 if any is stale
  python benchmarks/render_claims.py --paper=003  # print one paper's section

docs/claims.md holds the table between the lines `<!-- claims:begin -->` and
`<!-- claims:end -->`, the README the summary by kind between
`<!-- claims-summary:begin -->` and `<!-- claims-summary:end -->`; the notebooks
call `paper_markdown(paper)` for their "What came out" cell, so the pages, the
notebooks and the ledger never disagree.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.claims import ledger  # noqa: E402

# Each paper's page (docs/), which holds its '**Claims**' line.
PAPER_PAGES = {"000": "docs/paper-000-fourier.md", "001": "docs/paper-001-lipsformer.md",
               "002": "docs/paper-002-convolution.md", "003": "docs/paper-003-eigenvalues.md",
               "004": "docs/paper-004-hopfield.md"}
NOTEBOOKS = {"000": "colabs/000_fourier_antioversmoothing.ipynb",
             "001": "colabs/001_lipsformer.ipynb",
             "002": "colabs/002_attention_as_convolution.ipynb",
             "003": "colabs/003_eigen_reparameterization.ipynb",
             "004": "colabs/004_hopfield_attention.ipynb"}
# The last code cell of each paper notebook: its output is the ledger's section.
NOTEBOOK_CELL = """# What came out, from the claims ledger (benchmarks/results/claims.json): the same
# entries as the ledger page's table (docs/claims.md). Regenerate an entry with its command, then
# `python benchmarks/render_claims.py` (which also refreshes this cell's output).
from IPython.display import Markdown
from benchmarks.render_claims import paper_markdown

Markdown(paper_markdown("{paper}"))"""
BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"
SUMMARY_BEGIN, SUMMARY_END = "<!-- claims-summary:begin -->", "<!-- claims-summary:end -->"
MARKS = {"reproduced": "✅ reproduced", "direction": "↗ direction",
         "not_reproduced": "✗ not reproduced", "inconclusive": "? inconclusive",
         "not_testable": "— not testable"}
# The summary's lines: what each kind of entry shows, so nobody reads a
# theorem check as a reproduction of a paper's experiment.
KIND_LINES = (("checks", ("theorem", "identity"),
               "theorem and identity checks (the maths and the modules' invariants)"),
              ("by construction", ("by_construction",),
               "checks that cannot fail (they hold for any input; counted apart from reproductions)"),
              ("at init", ("at_init",), "properties of untrained networks"),
              ("training", ("training_effect",), "training effects (what the papers' experiments show)"))


def _cell(text: str) -> str:
  return str(text).replace("|", "\\|").replace("\n", " ")


def _text_cell(text: str) -> str:
  """A cell of prose: `](` (as in "DC[X](diag(s)+I)") escaped, or Markdown reads a link."""
  return _cell(text).replace("](", "]\\(")


def _verdicts(entries) -> dict[str, int]:
  """{verdict: count} over `entries`, every verdict present (zeros included)."""
  counts = collections.Counter(e["verdict"] for e in entries)
  return {v: counts[v] for v in ledger.VERDICTS}


def verdict_counts(entries) -> dict[str, dict[str, int]]:
  """{paper: {verdict: count}}."""
  return {p: _verdicts([e for e in entries if e["paper"] == p]) for p in ledger.PAPERS}


def kind_counts(entries) -> dict[str, dict[str, int]]:
  """{summary line: {verdict: count}} over KIND_LINES."""
  return {name: _verdicts([e for e in entries if e["kind"] in kinds])
          for name, kinds, _ in KIND_LINES}


def kind_summary(entries) -> str:
  """One line per kind of entry, with its verdict counts."""
  lines = []
  for (name, _, words), counts in zip(KIND_LINES, kind_counts(entries).values()):
    shown = ", ".join(f"{n} {MARKS[v]}" for v, n in counts.items() if n)
    lines.append(f"- **{sum(counts.values())} {words}**: {shown or 'none'}")
  return "\n".join(lines)


def summary_table(entries) -> str:
  """One row per paper: how many claims got each verdict."""
  lines = ["| paper | " + " | ".join(MARKS[v] for v in ledger.VERDICTS) + " | claims |",
           "|---" * (len(ledger.VERDICTS) + 2) + "|"]
  for paper, counts in verdict_counts(entries).items():
    lines.append(f"| {paper} | " + " | ".join(str(counts[v]) for v in ledger.VERDICTS)
                 + f" | {sum(counts.values())} |")
  return "\n".join(lines)


def _from_docs(path: str) -> str:
  """A repository path as a link from a page in docs/."""
  return "../" + path


def claims_table(entries, paper: str | None = None, with_setup: bool = False) -> str:
  """The entries (of one paper, or all) as a Markdown table, for a page in docs/."""
  rows = [e for e in entries if paper in (None, e["paper"])]
  head = "| id | kind | where | claim | verdict | why |"
  lines = [head + (" setup |" if with_setup else ""),
           "|---|---|---|---|---|---|" + ("---|" if with_setup else "")]
  for e in rows:
    claim_id = f"[{e['id']}]({_from_docs(e['figure'])})" if e.get("figure") else e["id"]
    prose = [e["kind"].replace("_", " "), e["where"], e["claim"], MARKS[e["verdict"]],
             e["why"] or ""] + ([e["setup"]] if with_setup else [])
    lines.append("| " + " | ".join([_cell(claim_id)] + [_text_cell(c) for c in prose]) + " |")
  return "\n".join(lines)


def ledger_block(entries) -> str:
  """What goes between the ledger page's markers."""
  return "\n".join([
      BEGIN,
      "<!-- generated by `python benchmarks/render_claims.py` from benchmarks/results/claims.json; "
      "do not edit by hand -->",
      "",
      kind_summary(entries),
      "",
      summary_table(entries),
      "",
      claims_table(entries),
      "",
      "Each entry's `command`, `setup` and every seed's numbers are in "
      "[benchmarks/results/claims.json](../benchmarks/results/claims.json); ids link to their figure.",
      END])


def claims_paragraph(entries, paper: str) -> str:
  """A paper page's '**Claims**' line: its entries grouped by verdict, each
  linking its figure, and how many there are of each kind."""
  mine = [e for e in entries if e["paper"] == paper]
  kinds = collections.Counter(e["kind"] for e in mine)
  kind_text = ", ".join(f"{kinds[k]} {k.replace('_', ' ')}" for k in ledger.KINDS if kinds[k])
  groups = []
  for verdict in ledger.VERDICTS:
    ids = [f"[`{e['id']}`]({_from_docs(e['figure'])})" if e.get("figure") else f"`{e['id']}`"
           for e in mine if e["verdict"] == verdict]
    if ids:
      groups.append(f"{MARKS[verdict]}: " + ", ".join(ids))
  return (f"**Claims** ({len(mine)} in [the ledger](claims.md): "
          f"{kind_text}; `python benchmarks/render_claims.py --paper={paper}` prints each with "
          "its criterion, setup, numbers and command): " + "; ".join(groups) + ".")


def replace_paragraph(text: str, entries, paper: str) -> str:
  """A paper page's `text` with its '**Claims**' line rendered from `entries`."""
  pattern = re.compile(rf"^\*\*Claims\*\* \(.*--paper={paper}` .*$", re.M)
  if len(pattern.findall(text)) != 1:
    raise ValueError(f"{PAPER_PAGES[paper]} must hold paper {paper}'s '**Claims**' line once")
  return pattern.sub(lambda _: claims_paragraph(entries, paper), text)


def paper_markdown(paper: str, path: str = ledger.LEDGER_PATH) -> str:
  """One paper's claims as Markdown, for its notebook's "What came out" cell."""
  if paper not in ledger.PAPERS:
    raise ValueError(f"paper={paper!r}; choose one of {list(ledger.PAPERS)}")
  entries = [e for e in ledger.read(path) if e["paper"] == paper]
  if not entries:
    return (f"**The claims ledger ({os.path.relpath(path, ledger.REPO)}) has no entry for "
            f"paper {paper} yet**: run `python {ledger.SCRIPT} --paper={paper}`.")
  lines = [f"**Paper {paper}: {len(entries)} claims**", "", kind_summary(entries), ""]
  for e in entries:
    lines.append(f"- **{e['id']}** ({e['where']}, {e['kind'].replace('_', ' ')}) — "
                 f"{MARKS[e['verdict']]}. {e['claim']}")
    lines.append(f"  - *criterion:* {e['criterion']['words']}")
    lines.append(f"  - *setup:* {e['setup']}")
    lines.append(f"  - *measured:* `{_short(e['measured'])}`")
    if e["kind"] == "training_effect":
      lines.append(f"  - *resolution:* {effect_text(e['resolution'])}")
    if e["why"]:
      lines.append(f"  - *why:* {e['why']}")
    lines.append(f"  - *regenerate:* `{e['command']}`")
  return "\n".join(lines)


def effect_text(r: dict) -> str:
  """A training effect's resolution in words: interval, sesoi, the paper's effect."""
  if "interval" not in r:       # not testable: no interval, no declaration
    return f"claimed {r['claimed_effect']}"
  claimed = "" if r["claimed"] is None else f", the paper's {r['claimed']:+g}"
  interval = ("no interval" if r["interval"] is None else
              f"95 % interval [{r['interval'][0]:+.4g}, {r['interval'][1]:+.4g}] over "
              f"{r['seeds']} seeds")
  return f"{interval}; sesoi {r['sesoi']:g}{claimed} ({r['claimed_effect']})"


def _short(measured, limit: int = 600) -> str:
  text = json.dumps(measured, ensure_ascii=False)
  return text if len(text) <= limit else text[:limit] + " …"


def replace_block(text: str, block: str, begin: str = BEGIN, end: str = END,
                  where: str = "docs/claims.md") -> str:
  """`text` with the lines between `begin` and `end` (markers included) replaced by `block`."""
  if text.count(begin) != 1 or text.count(end) != 1:
    raise ValueError(f"{where} must hold {begin} and {end} once each")
  start, stop = text.index(begin), text.index(end) + len(end)
  return text[:start] + block + text[stop:]


def summary_block(entries) -> str:
  """What goes between the README's summary markers: the counts by kind."""
  return "\n".join([SUMMARY_BEGIN, kind_summary(entries), SUMMARY_END])


def page_texts() -> dict[str, str]:
  """{path: its text now} of the README and every page the ledger is rendered into."""
  texts = {}
  for path in ("README.md", "docs/claims.md", *PAPER_PAGES.values()):
    with open(os.path.join(ledger.REPO, path), encoding="utf-8") as f:
      texts[path] = f.read()
  return texts


def rendered(entries, texts: dict[str, str]) -> dict[str, str]:
  """`texts` (`page_texts`) with the ledger rendered in."""
  out = {"README.md": replace_block(texts["README.md"], summary_block(entries), SUMMARY_BEGIN,
                                    SUMMARY_END, "README.md"),
         "docs/claims.md": replace_block(texts["docs/claims.md"], ledger_block(entries))}
  for paper, page in PAPER_PAGES.items():
    out[page] = replace_paragraph(texts[page], entries, paper)
  return out


def notebook_output(paper: str, path: str = ledger.LEDGER_PATH) -> dict:
  """The execute_result the notebook cell NOTEBOOK_CELL shows for `paper`."""
  text = paper_markdown(paper, path)
  return {"output_type": "execute_result", "metadata": {},
          "data": {"text/markdown": text, "text/plain": "<IPython.core.display.Markdown object>"}}


def sync_notebook(paper: str, path: str = ledger.LEDGER_PATH, check: bool = False) -> bool:
  """Makes the notebook's ledger cell show the ledger's section for `paper`.

  Returns whether the notebook already did (with check=True nothing is written).
  Raises ValueError when the notebook has no such cell."""
  import nbformat  # noqa: PLC0415
  nb_path = os.path.join(ledger.REPO, NOTEBOOKS[paper])
  notebook = nbformat.read(nb_path, as_version=4)
  source = NOTEBOOK_CELL.format(paper=paper)
  cells = [c for c in notebook.cells if c.cell_type == "code" and c.source == source]
  if len(cells) != 1:
    raise ValueError(f"{NOTEBOOKS[paper]} must hold the ledger cell once:\n{source}")
  wanted = [nbformat.from_dict(notebook_output(paper, path))]
  wanted[0]["execution_count"] = cells[0].execution_count
  current = [dict(o) for o in cells[0].outputs]
  same = current == [dict(o) for o in wanted]
  if not same and not check:
    cells[0].outputs = wanted
    nbformat.write(notebook, nb_path)
  return same


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--check", action="store_true", help="exit 1 if a page or notebook is stale")
  parser.add_argument("--paper", default=None, help="print one paper's section and exit")
  parser.add_argument("--ledger", default=ledger.LEDGER_PATH)
  args = parser.parse_args(argv)
  if args.paper:
    print(paper_markdown(args.paper, args.ledger))
    return 0
  entries = ledger.read(args.ledger)
  texts = page_texts()
  pages = rendered(entries, texts)
  changed = [path for path, new in pages.items() if new != texts[path]]
  stale = [NOTEBOOKS[p] for p in ledger.PAPERS
           if not sync_notebook(p, args.ledger, check=args.check)]
  if args.check:
    if changed or stale:
      print("stale: " + ", ".join(changed + stale) + "; run python benchmarks/render_claims.py")
      return 1
    return 0
  for path in changed:
    with open(os.path.join(ledger.REPO, path), "w", encoding="utf-8") as f:
      f.write(pages[path])
  print(f"{len(pages)} pages and {len(NOTEBOOKS)} notebooks: {len(entries)} claims rendered")
  return 0


if __name__ == "__main__":
  sys.exit(main())
