"""What settling a not-testable claim costs on a TPU or GPU.

A recipe's training rate is the compiler's estimate for its target slice
(`benchmarks/target_dry_runs.py`, rows in `benchmarks/results/target_dry_runs.json`:
a roofline of the compiled step, not a measurement); the work is the recipe's
own `num_epochs` over its data set's training split
(`data.input_pipeline.SHIPPED_SPLIT_SIZES`).

  settle("lipsformer_cswin_imagenet") -> {"hours": 30.5, "chip_hours": 489, ...}
"""

from __future__ import annotations

import importlib
import json
import os

DRY_RUNS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "results", "target_dry_runs.json")


def _row(config: str) -> dict:
  with open(DRY_RUNS) as f:
    rows = json.load(f)["rows"]
  for row in rows:
    if row["config"] == config and (row.get("report") or {}).get("images_per_second"):
      return row
  raise KeyError(f"no compiled row for config {config!r} in {DRY_RUNS}; compiled: "
                 f"{sorted({r['config'] for r in rows})}")


def settle(config: str, workload: str | None = None, *, slowdown: float = 1.0,
           slowdown_reason: str = "") -> dict:
  """The estimated cost of training recipe `workload` (default: `config`) at
  the compiled rate of `config`'s row, divided by `slowdown` (e.g. 2 for twice
  the blocks of the compiled row, with `slowdown_reason` saying so).

  Both are `name[:arg]` of a recipe in `vit_spectral/configs/`.
  """
  from vit_spectral.data.input_pipeline import SHIPPED_SPLIT_SIZES  # noqa: PLC0415
  row = _row(config)
  name, _, arg = (workload or config).partition(":")
  recipe = importlib.import_module(f"vit_spectral.configs.{name}").get_config(arg or None)
  epochs = float(recipe.num_epochs)
  images = SHIPPED_SPLIT_SIZES[recipe.input.dataset]["train"]
  rate = row["report"]["images_per_second"] / slowdown
  hours = epochs * images / rate / 3600
  chips = row["report"]["chips"]
  out = {"recipe": workload or config, "command": f"python train.py --config={workload or config} "
                                                  "--workdir=WORKDIR",
         "compiled_row": row["label"], "compiled_config": config, "target": row["target"],
         "chips": chips,
         "estimated_images_per_second": rate, "epochs": epochs, "dataset": recipe.input.dataset,
         "hours": hours, "chip_hours": hours * chips,
         "basis": f"the compiler's estimate for `{row['command']}` (a roofline, not a measurement)"}
  if slowdown != 1.0:
    out["slowdown"] = {"factor": slowdown, "reason": slowdown_reason}
  return out


def sentence(cost: dict) -> str:
  """One clause for a why: the command, the target and the hours."""
  return (f"`{cost['command']}` settles it: on {cost['target']} ({cost['chips']} chips) about "
          f"{cost['hours']:.1f} h ({cost['chip_hours']:.0f} chip-hours) for {cost['epochs']:g} "
          f"epochs of {cost['dataset']} at the compiler's estimated "
          f"{cost['estimated_images_per_second']:,.0f} img/s (not a measurement)")
