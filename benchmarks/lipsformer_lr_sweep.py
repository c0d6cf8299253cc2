r"""LipsFormer's stability claim on digits: a learning-rate sweep without warmup.

  nice -n 10 python benchmarks/lipsformer_lr_sweep.py [--steps 300] [--rates 1e-2,3e-2]
      [--configs baseline,lipsformer] [--out benchmarks/results/lipsformer_lr_sweep.json]
  python benchmarks/lipsformer_lr_sweep.py --replot [--out ...]   # redraw the PNG only

For each rate (default 1e-3 to 1e-1 in half-decades) trains the baseline
(pre-norm ViT: LayerNorm, dot-product attention, Xavier init) and the
LipsFormer-ViT (`configs/lipsformer_digits.py`) at equal depth (12 blocks,
width 32), both with AdamW, no warmup, no gradient clipping, cosine decay,
and records the final test accuracy and loss, and whether training diverged
(a non-finite training loss stops the run). Results are appended to the JSON
file after every run, so an interrupted sweep keeps what it finished; the test
accuracy and loss against the rate, one curve per configuration and length
(diverged runs marked at the bottom), are saved as the PNG beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import logging  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.figures import (  # noqa: E402
    add_results_flags, new_figure, read_results, save_next_to)
from vit_spectral.configs import lipsformer_digits  # noqa: E402

RATES = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
# "lipsformer" leaves out the convolution branches: XLA:CPU's grouped-convolution
# gradient made a step ~10x slower (1.74 vs 0.19 CPU-s at batch 128), too slow for
# this shared CPU; "lipsformer_conv" is the full configuration.
CONFIGS = ("baseline", "lipsformer", "lipsformer_conv")


def run_one(name: str, rate: float, steps: int, depth: int, width: int) -> dict:
  """Trains one configuration; returns its row of the table."""
  from vit_spectral.training import trainer

  arg = (f"lr={rate},steps={steps},depth={depth},width={width},"
         f"baseline={name == 'baseline'},conv={name == 'lipsformer_conv'}")
  config = lipsformer_digits.get_config(arg)
  config.async_checkpointing = False
  start = time.time()
  row = dict(config=name, learning_rate=rate, steps=steps, depth=depth, width=width)
  with tempfile.TemporaryDirectory() as workdir:
    try:
      metrics = trainer.train_and_evaluate(config, workdir)
      row.update(diverged=False, eval_accuracy=metrics["eval_accuracy"],
                 eval_loss=metrics["eval_loss"])
    except trainer.NonFiniteLossError as error:
      row.update(diverged=True, eval_accuracy=None, eval_loss=None, error=str(error))
  row["seconds"] = round(time.time() - start, 1)
  return row


def plot_lr_sweep(rows: list[dict]):
  """Test accuracy and loss vs learning rate (log x), one curve per (config, steps);
  a diverged run is an x on the axis' bottom edge. A rate run twice shows its last row."""
  fig, (acc_ax, loss_ax) = new_figure(2, 9.0, 3.6)
  curves = {}
  for row in rows:
    curves.setdefault((row["config"], row["steps"]), {})[row["learning_rate"]] = row
  for (name, steps), by_rate in sorted(curves.items()):
    rates = sorted(by_rate)
    label = f"{name}, {steps} steps"
    for ax, field in ((acc_ax, "eval_accuracy"), (loss_ax, "eval_loss")):
      values = [np.nan if by_rate[r]["diverged"] else by_rate[r][field] for r in rates]
      line, = ax.plot(rates, values, "o-", ms=4, label=label)
      diverged = [r for r in rates if by_rate[r]["diverged"]]
      if diverged:
        ax.plot(diverged, [0.0] * len(diverged), "x", color=line.get_color(), ms=8,
                clip_on=False, label=f"{label}: diverged")
  for ax, name in ((acc_ax, "test accuracy"), (loss_ax, "test loss")):
    ax.set_xscale("log")
    ax.set_xlabel("peak learning rate (AdamW, no warmup)")
    ax.set_ylabel(name)
    ax.grid(True, which="major", lw=0.3)
  acc_ax.set_ylim(0, 1)
  loss_ax.set_ylim(bottom=0)
  acc_ax.legend(fontsize=8)
  depth, width = rows[0]["depth"], rows[0]["width"]
  fig.suptitle(f"digits, {depth} blocks of width {width}: baseline vs LipsFormer", fontsize=10)
  return fig


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=300)
  parser.add_argument("--depth", type=int, default=12)
  parser.add_argument("--width", type=int, default=32)
  parser.add_argument("--rates", default=",".join(str(r) for r in RATES))
  parser.add_argument("--configs", default="baseline,lipsformer")
  add_results_flags(parser, "lipsformer_lr_sweep")
  args = parser.parse_args(argv)
  if args.replot:
    rows = read_results(args.out)
    print(f"plot {save_next_to(plot_lr_sweep(rows), args.out)}")
    return
  from vit_spectral.data.tensorflow_import import import_tensorflow
  import_tensorflow()  # quiet, and off the GPUs (JAX's)
  logging.set_verbosity(logging.WARNING)

  os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
  rows = []
  if os.path.exists(args.out):
    with open(args.out) as f:
      rows = json.load(f)
  for rate in (float(r) for r in args.rates.split(",")):
    for name in args.configs.split(","):
      if name not in CONFIGS:
        raise ValueError(f"--configs has {name!r}; choose from {list(CONFIGS)}")
      row = run_one(name, rate, args.steps, args.depth, args.width)
      print(json.dumps(row), flush=True)
      rows.append(row)
      with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
  print(f"\n{'config':<11} {'lr':>7} {'diverged':>8} {'test acc':>8} {'test loss':>9}")
  for row in rows:
    acc = "-" if row["eval_accuracy"] is None else f"{row['eval_accuracy']:.4f}"
    loss = "-" if row["eval_loss"] is None else f"{row['eval_loss']:.3f}"
    print(f"{row['config']:<11} {row['learning_rate']:>7g} {str(row['diverged']):>8} "
          f"{acc:>8} {loss:>9}")
  print(f"plot {save_next_to(plot_lr_sweep(rows), args.out)}")


if __name__ == "__main__":
  main()
