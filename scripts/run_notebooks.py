r"""Executes the notebooks in `colabs/` top to bottom, each in a fresh kernel.

  python scripts/run_notebooks.py --smoke                  # CI: every notebook, SMOKE=1
  python scripts/run_notebooks.py --write colabs/001_lipsformer.ipynb   # full run, saved
  python scripts/run_notebooks.py --stamp                  # badges and setup cell only

`--smoke` sets VIT_SPECTRAL_SMOKE=1 (each notebook's `SMOKE` switch: a few steps
per training run) and leaves the files untouched. Without it the notebook runs in
full; `--write` then saves it with its outputs (the committed figures) and its
wall time in the notebook metadata (`metadata.vit_spectral.full_run_seconds`).
The kernel starts in `colabs/`, so the setup cell finds the checkout around it.

The repository's address is written once, as pyproject.toml's `[project.urls]`
Repository. `--write` and `--stamp` write it into `colabs/setup_cell.py`
(`REPO_URL`, which a fresh Colab runtime clones before anything is installed)
and into each notebook of `colabs/`: its setup cell (that file verbatim) and the
"Open in Colab" badge under the title of its first cell.

Exits non-zero if any cell of any notebook fails, naming the notebook and cell,
or if a saved notebook's outputs carry a warning or log line, or an absolute
path of this machine (`output_problems`; the notebook is saved all the same).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys
import tempfile
import time
import tomllib
import uuid

import nbclient
import nbformat
from jupyter_client.manager import AsyncKernelManager

ROOT = pathlib.Path(__file__).resolve().parent.parent
COLABS = ROOT / "colabs"
SETUP_CELL = COLABS / "setup_cell.py"

_GITHUB = re.compile(r"https://github\.com/(?P<path>[\w.-]+/[\w.-]+)")
_REPO_URL_LINE = re.compile(r'^REPO_URL = "[^"\n]*"$', re.MULTILINE)
_BADGE = re.compile(r"\[!\[Open In Colab\]\([^)\s]*\)\]\([^)\s]*\)")

# Output lines that must not be committed: a library's warning or log line
# (Python's `WARNING:absl:...`, absl/glog's `I0000 00:00:...`, `W1124 10:...`),
# and absolute paths of the machine that ran the notebook.
_LOG_LINE = re.compile(r"WARNING|^[IWEF]\d{4} \d\d:\d\d:\d\d")
_MACHINE_PATH = re.compile(r"(?<![\w.~/-])/(?:work|tmp|home|root|Users|content|private|var/folders)/")
# Where an output's text is: stream text, error fields, rich outputs' text.
_TEXT_TYPES = ("text/plain", "text/markdown")


class _LocalKernelManager(AsyncKernelManager):
  """nbclient's kernel manager, talking to the kernel over local sockets (IPC)
  where the system has them: over TCP, ipykernel warns on every start that the
  traffic is not encrypted."""

  def __init__(self, **kwargs):
    if os.name == "posix":  # an absolute socket path: the kernel runs in the notebook's folder
      kwargs.setdefault("transport", "ipc")
      kwargs.setdefault("ip", os.path.join(tempfile.gettempdir(), f"nbclient-{uuid.uuid4().hex}"))
    super().__init__(**kwargs)


def repository_url() -> str:
  """pyproject.toml's `[project.urls]` Repository (`https://github.com/<owner>/<repo>`).

  Raises:
    ValueError: it is missing or not a GitHub repository's address.
  """
  pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
  url = pyproject.get("project", {}).get("urls", {}).get("Repository", "")
  if not _GITHUB.fullmatch(url):
    raise ValueError(f"pyproject.toml [project.urls] Repository={url!r}: expected "
                     "https://github.com/<owner>/<repo>")
  return url


def colab_badge(repository: str, name: str) -> str:
  """The markdown "Open in Colab" badge of notebook `colabs/<name>.ipynb`."""
  path = _GITHUB.fullmatch(repository)["path"]
  return ("[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
          f"(https://colab.research.google.com/github/{path}/blob/main/colabs/{name}.ipynb)")


def setup_cell_source(repository: str) -> str:
  """`colabs/setup_cell.py` with `REPO_URL = "<repository>"`."""
  text = SETUP_CELL.read_text()
  if len(_REPO_URL_LINE.findall(text)) != 1:
    raise ValueError(f"{SETUP_CELL} must hold exactly one line `REPO_URL = \"...\"`")
  return _REPO_URL_LINE.sub(f'REPO_URL = "{repository}"', text)


def stamp(notebook: nbformat.NotebookNode, name: str, repository: str) -> None:
  """Writes the badge under the title of `notebook`'s first (markdown) cell,
  replacing one already there, and the setup cell as its first code cell.

  Raises:
    ValueError: the notebook does not open with a markdown cell and a code cell.
  """
  cells = notebook.cells
  if len(cells) < 2 or cells[0].cell_type != "markdown" or cells[1].cell_type != "code":
    raise ValueError(f"{name}: expected a markdown cell, then the setup code cell")
  badge = colab_badge(repository, name)
  intro = cells[0].source
  if _BADGE.search(intro):
    intro = _BADGE.sub(lambda _: badge, intro, count=1)
  else:
    title, _, rest = intro.partition("\n")
    intro = f"{title}\n\n{badge}\n\n{rest.lstrip(chr(10))}".rstrip("\n")
  cells[0].source = intro
  cells[1].source = setup_cell_source(repository).rstrip("\n")


def stamp_files(paths) -> None:
  """`stamp` on each of `paths` that lies in `colabs/`, and REPO_URL into
  `colabs/setup_cell.py` (each file written only where it changes)."""
  repository = repository_url()
  source = setup_cell_source(repository)
  if SETUP_CELL.read_text() != source:
    SETUP_CELL.write_text(source)
  for path in paths:
    if path.resolve().parent != COLABS:
      continue
    notebook = nbformat.read(path, as_version=4)
    before = nbformat.writes(notebook)
    stamp(notebook, path.stem, repository)
    if nbformat.writes(notebook) != before:
      nbformat.write(notebook, path)


def _output_texts(output: nbformat.NotebookNode):
  if output.output_type == "stream":
    yield output.name, output.text
  elif output.output_type == "error":
    yield "error", "\n".join([output.ename, output.evalue, *output.traceback])
  for kind in _TEXT_TYPES:
    if kind in output.get("data", {}):
      yield kind, output.data[kind]


def output_problems(notebook: nbformat.NotebookNode, checkout: str | os.PathLike | None = None
                    ) -> list[str]:
  """The output lines of `notebook` that carry a library's warning or log line,
  or an absolute path of the machine (under /work/, /tmp/, /home/, /root/,
  /Users/, /content/, ..., or `checkout`, the folder the notebook ran in),
  each as `cell <i> <stream or type>: <line>`."""
  roots = {str(checkout), str(pathlib.Path(checkout).resolve())} if checkout else set()
  problems = []
  for index, cell in enumerate(notebook.cells):
    for output in cell.get("outputs", []):
      for where, text in _output_texts(output):
        for line in text.splitlines():
          if (_LOG_LINE.search(line) or _MACHINE_PATH.search(line)
              or any(root in line for root in roots)):
            problems.append(f"cell {index} {where}: {line[:200]}")
  return problems


def run_notebook(path: pathlib.Path, *, smoke: bool, timeout: int) -> tuple[nbformat.NotebookNode, float]:
  """Executes `path` in a fresh python3 kernel started in its folder.

  Returns:
    The executed notebook and its wall time in seconds.

  Raises:
    nbclient.exceptions.CellExecutionError: a cell failed (its traceback inside).
  """
  notebook = nbformat.read(path, as_version=4)
  os.environ["VIT_SPECTRAL_SMOKE"] = "1" if smoke else "0"
  client = nbclient.NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                                   kernel_manager_class=_LocalKernelManager,
                                   resources={"metadata": {"path": str(path.parent)}})
  start = time.perf_counter()
  client.execute()
  return notebook, time.perf_counter() - start


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("notebooks", nargs="*", type=pathlib.Path,
                      help="notebooks to run (default: every colabs/*.ipynb)")
  parser.add_argument("--smoke", action="store_true", help="VIT_SPECTRAL_SMOKE=1, files untouched")
  parser.add_argument("--write", action="store_true",
                      help="save the executed notebook (full runs only)")
  parser.add_argument("--stamp", action="store_true",
                      help="only write the badges and setup cell (pyproject's Repository)")
  parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
  args = parser.parse_args(argv)
  if args.smoke and (args.write or args.stamp):
    parser.error("--smoke leaves the files untouched: drop --write and --stamp")
  paths = args.notebooks or sorted(COLABS.glob("*.ipynb"))
  if not paths:
    parser.error(f"no notebooks under {COLABS}")
  if args.write or args.stamp:
    stamp_files(paths)
  if args.stamp:
    return 0
  failed = []
  for path in paths:
    try:
      notebook, seconds = run_notebook(path, smoke=args.smoke, timeout=args.timeout)
    except nbclient.exceptions.CellExecutionError as error:
      print(f"[notebooks] FAILED {path}:\n{error}", flush=True)
      failed.append(path)
      continue
    print(f"[notebooks] {path.name}: {seconds:.0f} s ({'smoke' if args.smoke else 'full'})",
          flush=True)
    if args.write:
      notebook.metadata.setdefault("vit_spectral", {})["full_run_seconds"] = round(seconds)
      nbformat.write(notebook, path)
      problems = output_problems(notebook, ROOT)
      if problems:
        print(f"[notebooks] {path.name}: {len(problems)} output lines carry a warning, a log "
              "line or a path of this machine:\n  " + "\n  ".join(problems), flush=True)
        failed.append(path)
  if failed:
    print(f"[notebooks] {len(failed)} of {len(paths)} failed: {', '.join(map(str, failed))}")
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
