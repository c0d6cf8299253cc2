r"""Digits: Hopfield ViT (α = α' = 0.5) vs the baseline, and token cosines per layer.

Trains the default digits recipe (`configs/digits_vit.py`) twice, with
attention=dot_product and attention=hopfield (α = α' = 0.5, inner placement),
then runs both trained models on the 360 test digits and prints, per layer, the
distribution of all pairwise token cosines (`analysis.token_cosine_values`, the
violin plots of paper 004 Fig. 2 / App. H) with the normalized residual
(`rank_residual_ratio`, eq. 61) and the mean attention entropy (App. I).

  nice -n 10 python benchmarks/hopfield_digits.py [--steps=2000] [--workdir=workdir/hopfield_digits]
      [--out=benchmarks/results/hopfield_digits.json]
  # or train the two in parallel, then rerun the line above to print the comparison:
  nice -n 10 python benchmarks/hopfield_digits.py --attentions=hopfield &
  nice -n 10 python benchmarks/hopfield_digits.py --attentions=dot_product

A workdir that already holds a finished run is only evaluated (the trainer resumes).
The results go to `--out` as JSON (per layer: quantiles, a histogram of the cosines
on [-1, 1], residual ratio, entropy) and as the PNG beside it: violins of the
token cosines per layer, baseline vs Hopfield, and the entropy and residual
ratio per layer; `--replot` redraws the PNG from the JSON without training.
Target: the Hopfield model reaches >= 97% test accuracy.
Measured (1 CPU device, seed 0): hopfield 98.89%, dot_product 96.11%; last-layer
token cosines: median 0.27 vs 0.65, 95th percentile 0.81 vs 0.96, mean 0.28 vs
0.57 (layer by layer the Hopfield model's cosines stay lower). Re-run 2026-11-23
(benchmarks/results/hopfield_digits.json, default settings): hopfield 98.33%,
dot_product 98.89%; last layer median 0.25 vs 0.71, mean 0.30 vs 0.55, lower in
every layer again.
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
from vit_spectral.durability import checkpointing  # noqa: E402
from vit_spectral.training import trainer  # noqa: E402
from vit_spectral.analysis import attention_entropy, rank_residual_ratio, token_cosine_values  # noqa: E402
from vit_spectral.data import input_pipeline  # noqa: E402
from vit_spectral.models import build_model, per_layer  # noqa: E402
from benchmarks.figures import (  # noqa: E402
    add_results_flags, new_figure, read_results, save_next_to)

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
HISTOGRAM_BINS = 100                   # over [-1, 1]: what the violins are drawn from


def restore_params(config, workdir: str):
  """The model and the parameters of the latest checkpoint in `workdir`."""
  meta = input_pipeline.dataset_meta(config.input)
  return build_model(config.model, meta.num_classes), checkpointing.latest_params(workdir)[0]


def layer_statistics(config, model, params):
  """Per layer (`layer_row`): cosine quantiles, mean, share of pairs above 0.99, the
  cosine histogram, residual ratio, entropy."""
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
  return [layer_row(i + 1, np.concatenate(cosines[i]), np.concatenate(ratios[i]),
                    np.concatenate(entropies[i])) for i in sorted(cosines)]


def layer_row(layer: int, cosines, ratios, entropies) -> dict:
  """One layer's JSON row from all its pairwise token cosines (n,), the images'
  residual ratios and the (image, head) entropies."""
  counts, _ = np.histogram(np.clip(cosines, -1.0, 1.0), bins=HISTOGRAM_BINS, range=(-1.0, 1.0))
  return dict(layer=layer, mean=float(cosines.mean()),
              quantiles=[float(q) for q in np.quantile(cosines, QUANTILES)],
              above_0_99=float((cosines > 0.99).mean()),
              residual_ratio=float(ratios.mean()), entropy=float(entropies.mean()),
              cosine_histogram=counts.tolist())


def plot_token_cosines(results: dict):
  """Paper 004 Fig. 2 / App. H: per layer, a violin of the pairwise token cosines
  of each model (from its histogram; bar: 25-75%, whiskers: 5-95%, dot: median),
  then the attention entropy and the residual ratio (eq. 61) per layer."""
  fig, (violin_ax, entropy_ax, ratio_ax) = new_figure(3, 13.0, 3.8)
  models = list(results["models"])
  width = 0.8 / len(models)
  for k, name in enumerate(models):
    layers = results["models"][name]["layers"]
    color = f"C{k}"
    for row in layers:
      counts = np.asarray(row["cosine_histogram"], dtype=float)
      edges = np.linspace(-1.0, 1.0, len(counts) + 1)
      centres = (edges[:-1] + edges[1:]) / 2
      half = 0.45 * width * counts / counts.max()
      x = row["layer"] + (k - (len(models) - 1) / 2) * width
      violin_ax.fill_betweenx(centres, x - half, x + half, color=color, alpha=0.4, lw=0)
      q05, q25, q50, q75, q95 = row["quantiles"]
      violin_ax.vlines(x, q05, q95, color=color, lw=0.8)
      violin_ax.vlines(x, q25, q75, color=color, lw=3)
      violin_ax.plot(x, q50, "o", color="white", ms=3, mec=color)
    violin_ax.plot([], [], "s", color=color, alpha=0.6,
                   label=f"{name} ({100 * results['models'][name]['eval_accuracy']:.1f}%)")
    depth = [row["layer"] for row in layers]
    entropy_ax.plot(depth, [row["entropy"] for row in layers], "o-", color=color, label=name)
    ratio_ax.plot(depth, [row["residual_ratio"] for row in layers], "o-", color=color, label=name)
  violin_ax.set_ylim(-1.0, 1.0)
  violin_ax.set_ylabel("cosine of token pairs")
  violin_ax.set_title("token cosines (360 test digits)", fontsize=9)
  violin_ax.legend(fontsize=8, loc="lower right")
  entropy_ax.set_ylabel("mean attention entropy (nats)")
  ratio_ax.set_ylabel("||Res(X)|| / ||X||  (eq. 61)")
  for ax in (violin_ax, entropy_ax, ratio_ax):
    ax.set_xlabel("layer")
    ax.set_xticks(depth)
    ax.grid(True, axis="y", lw=0.3)
  entropy_ax.legend(fontsize=8)
  fig.suptitle(f"digits, {results['steps']} steps, default recipe: "
               f"{' vs '.join(models)}", fontsize=10)
  return fig


def print_table(results: dict):
  print(f"\ndigits, {results['steps']} steps, default recipe (depth 4, width 64)")
  for attention, result in results["models"].items():
    print(f"{attention}: test accuracy {100 * result['eval_accuracy']:.2f}%")
  print("\ntoken cosines per layer (all token pairs of the 360 test images)")
  print("| model | layer | mean | q05 | q25 | median | q75 | q95 | >0.99 | Res ratio | entropy |")
  print("|---|---|---|---|---|---|---|---|---|---|---|")
  for attention, result in results["models"].items():
    for row in result["layers"]:
      q = " | ".join(f"{v:.3f}" for v in row["quantiles"])
      print(f"| {attention} | {row['layer']} | {row['mean']:.3f} | {q} | "
            f"{100 * row['above_0_99']:.1f}% | {row['residual_ratio']:.3f} | {row['entropy']:.3f} |")


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=2000)
  parser.add_argument("--workdir", default="workdir/hopfield_digits")
  parser.add_argument("--attentions", default="dot_product,hopfield",
                      help="comma-separated; e.g. one per process to train in parallel, "
                           "then all of them again to print the comparison")
  add_results_flags(parser, "hopfield_digits")
  args = parser.parse_args(argv)
  if args.replot:
    results = read_results(args.out)
  else:
    results = dict(command=" ".join(["python", "benchmarks/hopfield_digits.py", *sys.argv[1:]]),
                   steps=args.steps, default_steps=parser.get_default("steps"),
                   workdir=args.workdir, models={})
    for attention in args.attentions.split(","):
      config = digits_vit.get_config(f"attention={attention},steps={args.steps}")
      workdir = os.path.join(args.workdir, attention)
      metrics = trainer.train_and_evaluate(config, workdir)
      model, params = restore_params(config, workdir)
      results["models"][attention] = dict(eval_accuracy=metrics["eval_accuracy"],
                                          layers=layer_statistics(config, model, params))
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
      json.dump(results, f, indent=1)
  print_table(results)
  print(f"plot {save_next_to(plot_token_cosines(results), args.out)}")


if __name__ == "__main__":
  main()
