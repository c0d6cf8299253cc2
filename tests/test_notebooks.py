"""The notebooks in colabs/: one per paper plus the quickstart, each committed as
executed top to bottom by a full run (`scripts/run_notebooks.py --write`), with
its figures, the shared setup cell and the SMOKE switch CI runs it with. CI
executes them (`.ci/run`); here: what is committed, and the runner itself."""

import pathlib
import sys

import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
COLABS = ROOT / "colabs"
PAPER_NOTEBOOKS = ("000_fourier_antioversmoothing", "001_lipsformer",
                   "002_attention_as_convolution", "003_eigen_reparameterization",
                   "004_hopfield_attention")
NOTEBOOKS = (*PAPER_NOTEBOOKS, "quickstart")
MAX_BYTES = 1_500_000

sys.path.insert(0, str(ROOT / "scripts"))
import run_notebooks  # noqa: E402


def test_colabs_holds_exactly_the_notebooks():
  assert sorted(p.stem for p in COLABS.glob("*.ipynb")) == sorted(NOTEBOOKS)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_committed_as_a_full_run(name):
  path = COLABS / f"{name}.ipynb"
  assert path.stat().st_size < MAX_BYTES, f"{path.name} is {path.stat().st_size} bytes"
  notebook = nbformat.read(path, as_version=4)
  nbformat.validate(notebook)
  cells = notebook.cells
  assert cells[0].cell_type == "markdown" and cells[0].source.startswith("# ")
  if name in PAPER_NOTEBOOKS:  # opens with the paper
    assert "arxiv.org/abs/" in cells[0].source
  setup = (COLABS / "setup_cell.py").read_text().rstrip("\n")
  assert cells[1].cell_type == "code" and cells[1].source.rstrip("\n") == setup, (
      f"{path.name}: the first code cell must be colabs/setup_cell.py verbatim")
  code = [c for c in cells if c.cell_type == "code"]
  assert any("SMOKE" in c.source for c in code[1:]), f"{path.name} never reads SMOKE"
  # Executed top to bottom in one kernel, by a full run saved with --write.
  assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
  assert notebook.metadata["vit_spectral"]["full_run_seconds"] > 0
  outputs = [o for c in code for o in c.outputs]
  assert not [o for o in outputs if o.output_type == "error"]
  assert "SMOKE=False" in "".join(o.get("text", "") for o in code[0].outputs)
  images = [o for o in outputs if "image/png" in o.get("data", {})]
  assert images, f"{path.name} holds no figure"


def test_badges_and_setup_cell_carry_pyprojects_repository():
  repository = run_notebooks.repository_url()
  assert f'\nREPO_URL = "{repository}"\n' in (COLABS / "setup_cell.py").read_text()
  for name in NOTEBOOKS:
    intro = nbformat.read(COLABS / f"{name}.ipynb", as_version=4).cells[0].source
    badge = run_notebooks.colab_badge(repository, name)
    assert intro.split("\n")[2] == badge, f"{name}: no badge for {repository} under the title"
    assert intro.count("colab.research.google.com/github/") == 1


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_outputs_carry_no_warnings_or_local_paths(name):
  notebook = nbformat.read(COLABS / f"{name}.ipynb", as_version=4)
  problems = run_notebooks.output_problems(notebook, ROOT)
  assert not problems, f"{name}:\n" + "\n".join(problems)


def test_output_problems_finds_log_lines_and_machine_paths():
  out = nbformat.v4.new_output
  cell = nbformat.v4.new_code_cell("x")
  cell.outputs = [
      out("stream", name="stderr", text="I0000 00:00:1795464446.6 5644 port.cc:153] oneDNN\n"),
      out("stream", name="stderr", text="WARNING:absl:Given directory is read only=x\n"),
      out("stream", name="stdout", text="fine\nW1124 10:00:00.123 logging_writer.py:48] [1] x\n"),
      out("stream", name="stdout", text="workdir /tmp/vit_spectral_001_j8/checkpoints\n"),
      out("execute_result", data={"text/plain": f"PosixPath('{ROOT}/colabs')"},
          execution_count=1),
      out("error", ename="OSError", evalue="no file", traceback=["  /home/me/x.py line 3"]),
      out("stream", name="stdout", text="step 100/800, see https://github.com/o/r/tmp/ and a/tmp/b\n"),
      out("display_data", data={"text/markdown": "a table from /Users/me/r", "image/png": "iV"}),
  ]
  problems = run_notebooks.output_problems(nbformat.v4.new_notebook(cells=[cell]), ROOT)
  assert [p.split(":")[0] for p in problems] == [
      "cell 0 stderr", "cell 0 stderr", "cell 0 stdout", "cell 0 stdout", "cell 0 text/plain",
      "cell 0 error", "cell 0 text/markdown"]
  assert "checkpoints" in problems[3] and "/home/me" in problems[5]


def test_stamp_writes_badge_and_setup_cell_once():
  repository = "https://github.com/someone/fork_of_it"
  notebook = nbformat.v4.new_notebook(cells=[
      nbformat.v4.new_markdown_cell("# A title\n\nWhat it shows."),
      nbformat.v4.new_code_cell("REPO_URL = 'old'"), nbformat.v4.new_code_cell("SMOKE")])
  run_notebooks.stamp(notebook, "001_x", repository)
  intro = notebook.cells[0].source
  assert intro == ("# A title\n\n" + run_notebooks.colab_badge(repository, "001_x")
                   + "\n\nWhat it shows.")
  assert "colab.research.google.com/github/someone/fork_of_it/blob/main/colabs/001_x.ipynb" in intro
  assert f'\nREPO_URL = "{repository}"\n' in notebook.cells[1].source
  run_notebooks.stamp(notebook, "001_x", "https://github.com/other/one")    # replaced, not added
  assert notebook.cells[0].source.count("Open In Colab") == 1
  assert "github/other/one/blob" in notebook.cells[0].source
  assert notebook.cells[2].source == "SMOKE"


def _notebook(path, *sources):
  notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
  nbformat.write(notebook, path)
  return path


def test_runner_saves_full_runs_and_reports_failures(tmp_path, capsys):
  good = _notebook(tmp_path / "good.ipynb", "import os\nprint(os.environ['VIT_SPECTRAL_SMOKE'])")
  bad = _notebook(tmp_path / "bad.ipynb", "x = 1", "raise RuntimeError('cell two fails')")
  assert run_notebooks.main([str(good), "--write", "--timeout=120"]) == 0
  saved = nbformat.read(good, as_version=4)
  assert saved.cells[0].outputs[0].text == "0\n"                 # full run: SMOKE off
  assert saved.metadata["vit_spectral"]["full_run_seconds"] >= 0
  before = bad.read_text()
  assert run_notebooks.main([str(bad), "--smoke", "--timeout=120"]) == 1
  report = capsys.readouterr().out
  assert "FAILED" in report and "bad.ipynb" in report and "cell two fails" in report
  assert bad.read_text() == before                                   # --smoke never writes
