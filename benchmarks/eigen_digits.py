r"""Paper 003 on digits: ViT, ViT⁻ and ViT⁺ with one budget; filtering and Table 1.

Trains the default digits recipe (`configs/digits_vit.py`) three times, changing
only `model.attention.value_output` ("standard", "minus", "plus"), then on the
360 test digits measures

- the test accuracy;
- ‖HFC[X_ℓ]‖/‖LFC[X_ℓ]‖ per layer (paper 003 Fig. 3: `analysis.frequency.hc_dc_ratio`
  of each block output, averaged over the images); the paper reports ⁻ above the
  baseline above ⁺ in the last layer;
- Table 1: the fraction of (layer, image) cases whose dominating eigenvalue is
  1 + λ_j^H λ_n^A (Perron root: low-pass) or 1 + λ_j^H λ_i^A, i ≠ n, with the full
  H = W_projᵀ W_Vᵀ and the head-averaged map, and per head (H_h, A_h);
- the asymmetry ‖(H − Hᵀ)/2‖ / ‖(H + Hᵀ)/2‖ of every layer's H (Fig. 2).

Run (nice'd, shared CPU; about 3-6 minutes per model at 1500 steps):

  nice -n 10 python benchmarks/eigen_digits.py --steps=1500 --workdir=/tmp/eigen_digits

Results are printed and written to `--out` (default
benchmarks/results/eigen_digits.json), with each layer's eigenvalues of H and
cond(H); the PNG beside it draws, per layer at the end of training, HFC/LFC,
the asymmetry of H and cond(H) (the paper draws these over training, Figs. 2,
4, 5), the eigenvalues of H in the complex plane (Fig. 3) and the Table 1
fractions. `--replot` redraws the PNG from the JSON without training.

Measured (2026-11-22, seed 0, `--steps=400`, shared 2-core CPU, ~7 min per model):

  model     test acc  HFC/LFC layers 1..4          Table 1 full H     per head
                                                   λ_n^A / λ_i≠n^A    λ_n^A / λ_i≠n^A
  ViT        73.3%    1.95 1.69 1.26 0.87          100% / 0%          90.6% / 9.4%
  ViT⁻       74.4%    2.53 2.65 3.08 2.46          0% / 100%          0% / 100%
  ViT⁺       73.1%    1.79 1.44 0.97 0.73          100% / 0%          100% / 0%

Last-layer HFC/LFC: ⁻ (2.46) > baseline (0.87) > ⁺ (0.73), the order of Figs. 3–4;
Table 1 for ⁺ / ⁻ is 100/0 and 0/100 as in the paper (ViT-Ti: 98.9/1.1 there).
Asymmetry of H: ≈0.95–1.0 for the baseline, 0 (to 2e-8) for ⁻ and ⁺. 400 steps is
a fifth of the default digits budget, hence the accuracies.

Same with `--steps=800` (~13 min per model on the shared CPU):

  ViT        88.3%    2.09 1.76 1.31 0.90          100% / 0%          95.6% / 4.4%
  ViT⁻       89.2%    2.95 2.78 2.93 2.09          0% / 100%          0% / 100%
  ViT⁺       91.4%    2.08 1.57 1.06 0.73          100% / 0%          100% / 0%

Re-run 2026-11-23 with `--steps=400` (benchmarks/results/eigen_digits.json and
.png): 93.3% / 93.3% / 94.4%; HFC/LFC per layer ViT 2.20 1.80 1.48 0.99,
ViT⁻ 3.14 2.99 2.78 2.63, ViT⁺ 2.24 1.53 0.98 0.66; Table 1 full H 100/0, 0/100,
100/0, per head 98.1/1.9, 0/100, 100/0.

Without the clip, trained Λ leaves the initial range: ⁻ reaches −1.45 and ⁺ 1.37 in
the last layer, with the sign kept (the paper's "−ψ²" constraint).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from vit_spectral.configs import digits_vit  # noqa: E402
from vit_spectral.durability import checkpointing  # noqa: E402
from vit_spectral.training import trainer  # noqa: E402
from vit_spectral.analysis import eigen, frequency  # noqa: E402
from vit_spectral.data import input_pipeline  # noqa: E402
from vit_spectral.models import build_model, per_layer  # noqa: E402
from benchmarks.figures import (  # noqa: E402
    add_results_flags, new_figure, read_results, save_next_to)

LABELS = {"standard": "ViT", "minus": "ViT$^-$", "plus": "ViT$^+$"}


def variant_config(value_output: str, steps: int, seed: int):
  config = digits_vit.get_config(f"steps={steps}")
  config.seed = seed
  config.model.attention = dict(name="dot_product", value_output=value_output)
  config.eval_every = steps
  config.checkpoint_every = steps
  config.async_checkpointing = False
  return config


def restore_params(config, workdir: str, num_classes: int, image_shape):
  """The model and the final parameters of a finished run."""
  del image_shape
  return build_model(config.model, num_classes), checkpointing.latest_params(workdir)[0]


def analyse(model, params, images, labels) -> dict:
  logits, state = jax.jit(lambda p, x: model.apply({"params": p}, x,
                                                   mutable=["intermediates"]))(params, images)
  return analyse_layers(model, params, logits, per_layer(state["intermediates"]), labels)


def analyse_layers(model, params, logits, layers, labels) -> dict:
  """`analyse` from a forward pass already made: its logits and per-layer sown values."""
  ratios = [float(np.mean(frequency.hc_dc_ratio(l["block_output"]))) for l in layers]
  maps = [np.asarray(l["attention/attention_weights"]) for l in layers]
  kernels = eigen.layer_kernels(model, params)
  h_full = [eigen.h_matrix(w_v, w_proj) for w_v, w_proj in kernels]
  full = eigen.dominating_counts([np.linalg.eigvals(h) for h in h_full], maps)
  heads = eigen.dominating_counts([eigen.head_h_spectra(*k) for k in kernels], maps,
                                  per_head=True)
  spectra = [np.linalg.eigvals(h) for h in h_full]
  return dict(
      accuracy=float(np.mean(np.argmax(logits, -1) == labels)),
      hfc_lfc_per_layer=ratios, hfc_lfc_last=ratios[-1],
      table1_full=dict(low_pass=full.low_pass_fraction,
                       not_low_pass=full.not_low_pass_fraction, tied=full.tied,
                       cases=full.total),
      table1_per_head=dict(low_pass=heads.low_pass_fraction,
                           not_low_pass=heads.not_low_pass_fraction, tied=heads.tied,
                           cases=heads.total),
      asymmetry_per_layer=[float(eigen.asymmetry(h)) for h in h_full],
      h_eigenvalue_real_range=[[float(s.real.min()), float(s.real.max())] for s in spectra],
      # Per layer: [real parts, imaginary parts] of the eigenvalues of H.
      h_eigenvalues_per_layer=[[s.real.tolist(), s.imag.tolist()] for s in spectra],
      h_condition_per_layer=[float(np.linalg.cond(h)) for h in h_full])


def plot_eigen(results: dict):
  """Per variant: HFC/LFC, asymmetry of H and cond(H) per layer; every layer's
  eigenvalues of H in the complex plane; the Table 1 low-pass fractions."""
  fig, axes = new_figure(6, 13.0, 7.0, columns=3)
  ratio_ax, asym_ax, cond_ax, spec_ax, table_ax, legend_ax = axes
  variants = list(results["results"])
  for k, name in enumerate(variants):
    r, color, label = results["results"][name], f"C{k}", LABELS.get(name, name)
    layers = np.arange(1, len(r["hfc_lfc_per_layer"]) + 1)
    label = f"{label} ({100 * r['accuracy']:.1f}%)"
    ratio_ax.plot(layers, r["hfc_lfc_per_layer"], "o-", color=color, label=label)
    asym_ax.plot(layers, r["asymmetry_per_layer"], "o-", color=color, label=label)
    if "h_condition_per_layer" in r:
      cond_ax.plot(layers, r["h_condition_per_layer"], "o-", color=color, label=label)
    for real, imag in r.get("h_eigenvalues_per_layer", []):
      spec_ax.plot(real, imag, ".", color=color, ms=3, alpha=0.6)
    spec_ax.plot([], [], "o", color=color, label=label)
    for j, (table, hatch) in enumerate((("table1_full", ""), ("table1_per_head", "//"))):
      table_ax.bar(2 * j + k * 0.6, r[table]["low_pass"], width=0.55, color=color,
                   hatch=hatch, edgecolor="white")
    legend_ax.plot([], [], "o-", color=color, label=label)
  for ax, ylabel in ((ratio_ax, "||HFC|| / ||LFC|| of the block output"),
                     (asym_ax, "||(H - H^T)/2|| / ||(H + H^T)/2||"),
                     (cond_ax, "cond(H)")):
    ax.set_xlabel("layer")
    ax.set_xticks(layers)
    ax.set_ylabel(ylabel)
    ax.grid(True, lw=0.3)
  cond_ax.set_yscale("log")
  spec_ax.axhline(0, color="grey", lw=0.5)
  spec_ax.axvline(0, color="grey", lw=0.5)
  spec_ax.set_xlabel("Re λ(H)")
  spec_ax.set_ylabel("Im λ(H)")
  spec_ax.set_title("eigenvalues of H = W_proj^T W_V^T, all layers", fontsize=9)
  table_ax.set_xticks([0.6 * (len(variants) - 1) / 2, 2 + 0.6 * (len(variants) - 1) / 2],
                      ["full H, mean map", "per head"])
  table_ax.set_ylim(0, 1)
  table_ax.set_ylabel("fraction dominated by 1 + λ^H λ_n^A (low-pass)")
  table_ax.set_title("Table 1", fontsize=9)
  legend_ax.axis("off")
  legend_ax.legend(loc="center", fontsize=10, title="variant (test accuracy)")
  fig.suptitle(f"digits, {results['steps']} steps, seed {results['seed']}: "
               "ViT, ViT$^-$ and ViT$^+$ at the end of training", fontsize=10)
  return fig


def print_table(results: dict):
  print(f"\n{'model':10s} {'acc':>6s} {'HFC/LFC last':>13s} "
        f"{'full: λ_n^A':>12s} {'λ_i≠n^A':>8s} {'head: λ_n^A':>12s} {'λ_i≠n^A':>8s}")
  for name, r in results["results"].items():
    print(f"{name:10s} {r['accuracy']:6.3f} {r['hfc_lfc_last']:13.4f} "
          f"{r['table1_full']['low_pass']:12.2%} {r['table1_full']['not_low_pass']:8.2%} "
          f"{r['table1_per_head']['low_pass']:12.2%} {r['table1_per_head']['not_low_pass']:8.2%}")


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=1500)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--workdir", default="/tmp/eigen_digits")
  parser.add_argument("--variants", default="standard,minus,plus")
  add_results_flags(parser, "eigen_digits")
  args = parser.parse_args(argv)
  if args.replot:
    results = read_results(args.out)
    print_table(results)
    print(f"plot {save_next_to(plot_eigen(results), args.out)}")
    return

  # The command as run: a shorter run than the default --steps says so here.
  results = dict(command=" ".join(["python", "benchmarks/eigen_digits.py", *sys.argv[1:]]),
                 steps=args.steps, default_steps=parser.get_default("steps"), seed=args.seed,
                 results={})
  os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
  for value_output in args.variants.split(","):
    config = variant_config(value_output, args.steps, args.seed)
    workdir = os.path.join(args.workdir, value_output)
    trainer.train_and_evaluate(config, workdir)
    meta = input_pipeline.dataset_meta(config.input)
    model, params = restore_params(config, workdir, meta.num_classes, meta.image_shape)
    eval_ds, _ = input_pipeline.create_eval_dataset(config.input)
    batch = next(eval_ds.as_numpy_iterator())          # all 360 test digits
    keep = batch["mask"]
    results["results"][value_output] = analyse(model, params, batch["image"][keep],
                                               batch["label"][keep])
    print(f"{value_output}: test accuracy {results['results'][value_output]['accuracy']:.4f}",
          flush=True)
    with open(args.out, "w") as f:
      json.dump(results, f, indent=1)
  print_table(results)
  print(f"plot {save_next_to(plot_eigen(results), args.out)}")


if __name__ == "__main__":
  main()
