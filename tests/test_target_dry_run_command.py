"""`train.py --dry_run --target=SLICE` on the command line (the compile itself
needs libtpu and runs in CI's TPU step, .ci/check_target_dry_runs.py) and the
docs/running.md's table of every recipe on its slice (benchmarks/target_dry_runs.py)."""

import json
import os
import subprocess
import sys

import pytest

from benchmarks import target_dry_runs
from vit_spectral import configs
from vit_spectral.planning import target_dry_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("args, expected", [
    (["--dry_run", "--target=v9-8"], "--target=v9-8: not a known TPU slice or GPU host; TPU slices: v4-8"),
    (["--target=v4-8"], "--target is a --dry_run option"),
])
def test_command_line_mistakes_are_one_line_exit_2(args, expected):
  result = subprocess.run([sys.executable, "train.py", "--config=digits_vit", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ, JAX_PLATFORMS="cpu"))
  errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
  assert result.returncode == 2, result.stderr[-2000:]
  assert len(errors) == 1 and expected in errors[0], errors


def test_every_imagenet_and_cifar_recipe_has_a_row():
  rowed = {row.config.split(":")[0] for row in target_dry_runs.ROWS}
  # The digits and Fashion-MNIST recipes train on a CPU in minutes.
  cpu_recipes = {"lipsformer_digits", "fashion_mnist_vit"}
  meant_for_accelerators = {name for name in configs.recipe_names()
                            if not name.startswith("digits_") and name not in cpu_recipes}
  assert meant_for_accelerators <= rowed, meant_for_accelerators - rowed
  for row in target_dry_runs.ROWS:
    target_dry_run.parse_target(row.target)


def test_readme_table_is_rendered_from_the_results():
  assert target_dry_runs.render(check=True), (
      "docs/running.md's TPU dry-run table is stale: python benchmarks/target_dry_runs.py --render")
  results = json.load(open(target_dry_runs.RESULTS, encoding="utf-8"))["rows"]
  assert [r["label"] for r in results] == [row.label for row in target_dry_runs.ROWS]
  for result in results:
    refused = "refused" in result["label"]
    assert result["exit_code"] == (1 if refused else 0), result["label"]
    assert result["report"]["fits"] is (not refused)
