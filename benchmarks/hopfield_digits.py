r"""Digits: Hopfield ViT (α = α' = 0.5) vs the baseline, and token cosines per layer.

Trains the default digits recipe (`configs/digits_vit.py`) twice, with
attention=dot_product and attention=hopfield (α = α' = 0.5, inner placement),
then runs both trained models on the 360 test digits and prints, per layer, the
distribution of all pairwise token cosines (`analysis.token_cosine_values`, the
violin plots of paper 004 Fig. 2 / App. H) with the normalized residual
(`rank_residual_ratio`, eq. 61) and the mean attention entropy (App. I).

  nice -n 10 python benchmarks/hopfield_digits.py [--steps=2000] [--workdir=workdir/hopfield_digits]
  # or train the two in parallel, then rerun the line above to print the comparison:
  nice -n 10 python benchmarks/hopfield_digits.py --attentions=hopfield &
  nice -n 10 python benchmarks/hopfield_digits.py --attentions=dot_product

A workdir that already holds a finished run is only evaluated (the trainer resumes).
Target: the Hopfield model reaches >= 97% test accuracy.
Measured (1 CPU device, seed 0): hopfield 98.89%, dot_product 96.11%; last-layer
token cosines: median 0.27 vs 0.65, 95th percentile 0.81 vs 0.96, mean 0.28 vs
0.57 (layer by layer the Hopfield model's cosines stay lower).
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

from vit_spectral.configs import digits_vit  # noqa: E402
from vit_spectral.training import checkpointing, trainer  # noqa: E402
from vit_spectral.analysis import attention_entropy, rank_residual_ratio, token_cosine_values  # noqa: E402
from vit_spectral.data import input_pipeline  # noqa: E402
from vit_spectral.models import build_model, per_layer  # noqa: E402

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def restore_params(config, workdir: str):
  """The model and the parameters of the latest checkpoint in `workdir`."""
  meta = input_pipeline.dataset_meta(config.input)
  return build_model(config.model, meta.num_classes), checkpointing.latest_params(workdir)[0]


def layer_statistics(config, model, params):
  """Per layer: cosine quantiles, mean, share of pairs above 0.99, residual ratio, entropy."""
  dataset, _ = input_pipeline.create_eval_dataset(config.input)
  apply = jax.jit(lambda p, x: model.apply({"params": p}, x, mutable=["intermediates"]))
  cosines, ratios, entropies = {}, {}, {}
  for batch in dataset.as_numpy_iterator():
    keep = batch["mask"]
    _, variables = apply(params, batch["image"])
    for i, layer in enumerate(per_layer(variables["intermediates"])):
      tokens = layer["block_output"][keep]                          # (b, T, D)
      cosines.setdefault(i, []).append(np.asarray(token_cosine_values(tokens)).ravel())
      ratios.setdefault(i, []).append(np.asarray(rank_residual_ratio(tokens)))
      weights = layer["attention/attention_weights"][keep]          # (b, H, T, T)
      entropies.setdefault(i, []).append(np.asarray(attention_entropy(weights)).ravel())
  rows = []
  for i in sorted(cosines):
    c = np.concatenate(cosines[i])
    rows.append(dict(layer=i + 1, mean=float(c.mean()),
                     quantiles=[float(q) for q in np.quantile(c, QUANTILES)],
                     above_0_99=float((c > 0.99).mean()),
                     residual_ratio=float(np.concatenate(ratios[i]).mean()),
                     entropy=float(np.concatenate(entropies[i]).mean())))
  return rows


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=2000)
  parser.add_argument("--workdir", default="workdir/hopfield_digits")
  parser.add_argument("--attentions", default="dot_product,hopfield",
                      help="comma-separated; e.g. one per process to train in parallel, "
                           "then all of them again to print the comparison")
  args = parser.parse_args()

  results = {}
  for attention in args.attentions.split(","):
    config = digits_vit.get_config(f"attention={attention},steps={args.steps}")
    workdir = os.path.join(args.workdir, attention)
    metrics = trainer.train_and_evaluate(config, workdir)
    model, params = restore_params(config, workdir)
    results[attention] = dict(eval_accuracy=metrics["eval_accuracy"],
                              layers=layer_statistics(config, model, params))

  print(f"\ndigits, {args.steps} steps, default recipe (depth 4, width 64)")
  for attention, result in results.items():
    print(f"{attention}: test accuracy {100 * result['eval_accuracy']:.2f}%")
  print("\ntoken cosines per layer (all token pairs of the 360 test images)")
  print("| model | layer | mean | q05 | q25 | median | q75 | q95 | >0.99 | Res ratio | entropy |")
  print("|---|---|---|---|---|---|---|---|---|---|---|")
  for attention, result in results.items():
    for row in result["layers"]:
      q = " | ".join(f"{v:.3f}" for v in row["quantiles"])
      print(f"| {attention} | {row['layer']} | {row['mean']:.3f} | {q} | "
            f"{100 * row['above_0_99']:.1f}% | {row['residual_ratio']:.3f} | {row['entropy']:.3f} |")
  with open(os.path.join(args.workdir, "results.json"), "w") as f:
    json.dump(results, f, indent=2)


if __name__ == "__main__":
  main()
