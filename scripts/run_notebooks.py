r"""Executes the notebooks in `colabs/` top to bottom, each in a fresh kernel.

  python scripts/run_notebooks.py --smoke                  # CI: every notebook, SMOKE=1
  python scripts/run_notebooks.py --write colabs/001_lipsformer.ipynb   # full run, saved

`--smoke` sets VIT_SPECTRAL_SMOKE=1 (each notebook's `SMOKE` switch: a few steps
per training run) and leaves the files untouched. Without it the notebook runs in
full; `--write` then saves it with its outputs (the committed figures) and its
wall time in the notebook metadata (`metadata.vit_spectral.full_run_seconds`).
The kernel starts in `colabs/`, so the setup cell finds the checkout around it.
Exits non-zero if any cell of any notebook fails, naming the notebook and cell.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

import nbclient
import nbformat

COLABS = pathlib.Path(__file__).resolve().parent.parent / "colabs"


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
  parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
  args = parser.parse_args(argv)
  if args.smoke and args.write:
    parser.error("--write saves full runs only: drop --smoke")
  paths = args.notebooks or sorted(COLABS.glob("*.ipynb"))
  if not paths:
    parser.error(f"no notebooks under {COLABS}")
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
  if failed:
    print(f"[notebooks] {len(failed)} of {len(paths)} failed: {', '.join(map(str, failed))}")
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
