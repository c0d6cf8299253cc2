r"""Digits: the fully attentional model of paper 002 and its attention centres.

Trains `configs/digits_quadratic.py` (2×2 space-to-depth stem on 8×8 -> 16
tokens, no CLS, no position embedding, mean pooling, 9 full-width quadratic heads,
SGD 0.1 + momentum, no weight decay on centres/widths), then reads the trained
variables and saves the attention-centre plot (Figs. 2/3 of the paper: each head's
centre with its 50% and 90% contours around the query pixel) and a JSON summary
(accuracy, centres, widths, degenerate heads by the App. A.1 criterion).

  nice -n 10 python benchmarks/attention_conv_digits.py \
      [--arg=attention=gaussian,steps=1000] [--workdir=workdir/attention_conv_digits]

A workdir that already holds a finished run is only evaluated (the trainer resumes).
Target: >= 95% test accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from vit_spectral.configs import digits_quadratic  # noqa: E402
from vit_spectral.durability import checkpointing  # noqa: E402
from vit_spectral.training import trainer  # noqa: E402
from vit_spectral.analysis import degenerate_heads, gaussian_heads, plot_attention_centres  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def trained_params(config, workdir: str):
  """The params of the last checkpoint in `workdir`."""
  del config
  return checkpointing.latest_params(workdir)[0]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--arg", default="",
                      help="digits_quadratic.py arguments")
  parser.add_argument("--workdir", default="workdir/attention_conv_digits")
  parser.add_argument("--out", default=os.path.join(RESULTS, "attention_conv_digits"),
                      help="path prefix of the .png and .json results")
  args = parser.parse_args()

  config = digits_quadratic.get_config(args.arg)
  metrics = trainer.train_and_evaluate(config, args.workdir)
  params = jax.tree_util.tree_map(np.asarray, trained_params(config, args.workdir))
  accuracy = metrics["eval_accuracy"]
  name = config.model.attention.name
  os.makedirs(os.path.dirname(args.out), exist_ok=True)
  plot_attention_centres(
      params, path=args.out + ".png",
      title=f"digits, {name} attention, {config.model.depth} layers × "
            f"{config.model.num_heads} heads: test accuracy {accuracy:.1%}")
  heads = gaussian_heads(params)
  summary = dict(
      config_arg=args.arg, depth=config.model.depth, width=config.model.hidden_size,
      heads=config.model.num_heads, steps=config.total_steps, attention=name, eval_accuracy=accuracy,
      eval_loss=metrics["eval_loss"],
      centers=[np.round(h["centers"], 3).tolist() for h in heads],
      # Σ⁻¹ per head (2αI for quadratic heads).
      precision=[np.round(h["precision"], 4).tolist() for h in heads],
      degenerate_heads=[d.tolist() for d in degenerate_heads(params)])
  with open(args.out + ".json", "w") as f:
    json.dump(summary, f, indent=1)
  print(f"test accuracy {accuracy:.4f}; plot {args.out}.png")


if __name__ == "__main__":
  main()
