"""Every ```python block of README.md and docs/*.md runs as printed.

A block runs in a fresh namespace, in one subprocess for all of them (one
import of JAX, not one per block), on the CPU, each with its own time limit;
the subprocess reports each block's outcome as one JSON line. What a block
needs the runner makes first: the run in workdir/digits_vit (the README's
`python train.py` run, trained small) and the pretrained page's downloads
(model.safetensors, my_images/, with random values). No block may be marked
`<!-- parse-only: why -->` (issue 43: every documented example runs); the mark
is still read, so a marked block fails by name. The ```bash blocks'
`python train.py` lines are tests/test_readme_commands.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

from tests import markdown_docs as md

BLOCK_SECONDS = 60        # one block's limit (they take a few seconds each)
# All blocks together, CPU seconds (XLA's threads count, so a loaded machine
# adds to it). 45 while six blocks were only parsed. With all of them running
# the same blocks measured 45.1 and 56.4 alone and 65.8 beside the other test
# worker (DeiT-S's probe and eigen analysis 11.8-13.5 of it): 60, set from the
# first figure, failed there, so 90.
BLOCKS_CPU_SECONDS = 90
RUNNER = r"""
import json, signal, sys, time, traceback

import jax

# The test suite's cheap compiles (tests/conftest.py): the blocks compile more
# than they compute.
jax.config.update("jax_disable_most_optimizations", True)


class BlockTimeout(Exception):
  pass


def on_alarm(signum, frame):
  raise BlockTimeout(f"over {limit} s")


signal.signal(signal.SIGALRM, on_alarm)
blocks, limit = json.load(open(sys.argv[1])), int(sys.argv[2])
if sys.argv[3:] == ["--with_run"]:
  # What the README's `python train.py` leaves in workdir/digits_vit, small
  # (a few steps, not timed as a block): the blocks that read a run read it.
  from vit_spectral.configs import digits_vit
  from vit_spectral.training import trainer
  config = digits_vit.get_config("depth=2,width=16,heads=2,steps=3")
  config.log_every = config.eval_every = config.checkpoint_every = 3
  config.optim.warmup_steps = 1
  config.diagnostics.every, config.diagnostics.num_images = 3, 8   # `layer_series` reads them
  trainer.train_and_evaluate(config, "workdir/digits_vit")
  # What a reader downloads for the pretrained page: DeiT-S's file (timm's
  # names and shapes, random values: tests/fixtures/pretrained) and a folder of
  # images (random RGB).
  import os
  import numpy as np
  from PIL import Image
  from safetensors.numpy import save_file
  from tests.models import pretrained_fixtures
  save_file(pretrained_fixtures.fixture_weights(
      pretrained_fixtures.read_fixture("deit_small_patch16_224")), "model.safetensors")
  os.makedirs("my_images")
  for k, pixels in enumerate(np.random.default_rng(0).integers(0, 256, (4, 96, 128, 3), np.uint8)):
    Image.fromarray(pixels).save(f"my_images/{k}.png")
for name, code in blocks:
  start, cpu = time.perf_counter(), time.process_time()
  signal.alarm(limit)
  try:
    exec(compile(code, name, "exec"), {"__name__": "__main__"})
    error = None
  except BaseException:  # the block's own failure, whatever it is
    error = traceback.format_exc(limit=-6)
  finally:
    signal.alarm(0)
  print("BLOCK " + json.dumps({"name": name, "error": error,
                               "seconds": round(time.perf_counter() - start, 2),
                               "cpu_seconds": round(time.process_time() - cpu, 2)}), flush=True)
"""


def _python_blocks() -> list[md.Block]:
  return [b for path in md.paths() for b in md.blocks(path) if b.lang == "python"]


BLOCKS = _python_blocks()
RUNNABLE = [b for b in BLOCKS if b.parse_only is None]
PARSE_ONLY = [b for b in BLOCKS if b.parse_only is not None]


def run_blocks(blocks: list[tuple[str, str]], limit: int = BLOCK_SECONDS,
               with_run: bool = False) -> dict[str, dict]:
  """Runs (name, code) pairs in one fresh interpreter, each in a fresh
  namespace; returns each name's {"error": traceback or None, "seconds",
  "cpu_seconds"}. `with_run`: a tiny digits run is trained into
  workdir/digits_vit (the cwd's) first, where `python train.py` puts it, and
  the files the pretrained page downloads are made (model.safetensors with
  DeiT-S's names and shapes, my_images/)."""
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3", MPLBACKEND="Agg",
             XLA_FLAGS="--xla_cpu_use_fusion_emitters=false",  # one device, as a reader has
             PYTHONPATH=os.pathsep.join(filter(None, [md.ROOT, os.environ.get("PYTHONPATH")])))
  with tempfile.TemporaryDirectory() as workdir:  # where a block's relative paths land
    listing = os.path.join(workdir, "blocks.json")
    with open(listing, "w", encoding="utf-8") as f:
      json.dump(blocks, f)
    result = subprocess.run(
        [sys.executable, "-c", RUNNER, listing, str(limit), *(["--with_run"] * with_run)],
        cwd=workdir, env=env, capture_output=True, text=True,
        timeout=limit * len(blocks) + 60 + 120 * with_run)
  outcomes = {}
  for line in result.stdout.splitlines():
    if line.startswith("BLOCK "):
      outcome = json.loads(line[len("BLOCK "):])
      outcomes[outcome.pop("name")] = outcome
  missing = [name for name, _ in blocks if name not in outcomes]
  assert not missing, (f"the runner stopped before {missing} (exit {result.returncode}):\n"
                       f"{result.stderr[-3000:]}")
  return outcomes


@pytest.fixture(scope="module")
def outcomes():
  return run_blocks([(b.name, b.code) for b in RUNNABLE], with_run=True)


def test_the_blocks_are_found_and_most_of_them_run():
  assert len(BLOCKS) >= 15, [b.name for b in BLOCKS]
  assert len(RUNNABLE) >= 8, [b.name for b in RUNNABLE]


def test_no_block_is_only_parsed():
  """Every documented example runs as written (issue 43): what a block needs
  (a run, a download) the runner makes first, rather than the block being marked."""
  assert not PARSE_ONLY, f"blocks marked parse-only: {[b.name for b in PARSE_ONLY]}"


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_a_block_runs_as_printed(block, outcomes):
  outcome = outcomes[block.name]
  assert outcome["error"] is None, f"{block.name} failed:\n{outcome['error']}"


def test_the_blocks_together_stay_fast(outcomes):
  # CPU seconds, not wall time: a shared machine's load does not move them much.
  cpu = {name: o["cpu_seconds"] for name, o in outcomes.items()}
  assert sum(cpu.values()) < BLOCKS_CPU_SECONDS, cpu


def test_the_runner_reports_a_failure_and_a_block_over_its_limit():
  """The runner can fail: an exception, and a block that runs too long, each
  stop only themselves; each block's namespace is fresh."""
  got = run_blocks([("raises", "raise ValueError('shown')"),
                    ("sets", "x = 1"),
                    ("fresh", "x"),                     # NameError: not the last block's x
                    ("slow", "import time\ntime.sleep(30)"),
                    ("after", "assert 1 + 1 == 2")], limit=2)
  assert "ValueError: shown" in got["raises"]["error"]
  assert got["sets"]["error"] is None
  assert "NameError" in got["fresh"]["error"]
  assert "BlockTimeout" in got["slow"]["error"] and got["slow"]["seconds"] < 10
  assert got["after"]["error"] is None


def test_a_block_without_its_mark_is_run(tmp_path):
  """The mark must be the line just before the fence; prose in between unmarks it."""
  text = ("<!-- parse-only: needs a run -->\n```python\nmissing_name\n```\n\n"
          "<!-- parse-only: needs a run -->\nsome prose\n\n```python\nmissing_name\n```\n")
  (tmp_path / "docs").mkdir()
  (tmp_path / "docs" / "x.md").write_text(text, encoding="utf-8")
  original, md.ROOT = md.ROOT, str(tmp_path)
  try:
    found = md.blocks("docs/x.md")
  finally:
    md.ROOT = original
  assert [b.parse_only for b in found] == ["needs a run", None]
