r"""Paper-000 diagnostics, layer by layer, of a trained digits model (vs. its initialisation).

  python train.py --workdir=workdir/digits_vit                  # any digits config
  python benchmarks/probe_digits.py --workdir=workdir/digits_vit
      [--out=benchmarks/results/probe_digits.json] [--replot]

Reads `config.json` and the latest checkpoint of the workdir, runs
`vit_spectral.analysis.probe` on the first eval batch (the 360 held-out digits
for the default config) and prints, per block, the means over images (and heads)
of: hc_dc_ratio and hc_proportion of the block output, token and attention
cosine similarity (eqs. 75-76), and the attention spectrum's DC response and
mean response over the other frequencies (App. F.2). The same numbers for the
model at initialisation (same seed) are printed for comparison. The numbers
and each layer's mean attention spectrum go to `--out` as JSON; the PNG beside
it draws them per layer, trained vs init (HC/DC as Fig. 4, cosines as Fig. 12,
the spectra as Figs. 2/11); `--replot` redraws the PNG from that JSON.

Measured 2026-11-22 on the default digits run (`python train.py`, 2000 steps,
96.1% test accuracy), means over the 360 test digits:

  layer  hc/dc  hc/all tok_cos attn_cos spec_DC spec_HC   (trained)
      0  2.138  0.902  0.318   0.446    1.284   0.377
      1  1.766  0.864  0.337   0.544    1.491   0.332
      2  1.316  0.783  0.405   0.629    1.285   0.229
      3  0.875  0.631  0.589   0.695    1.310   0.196

The high-frequency share of the tokens falls block by block and token similarity
rises (paper 000, Figs. 4, 12); every attention map's response is largest at DC
(Thm. 1, Fig. 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# Run from a checkout without installing: the repo root, as train.py sees it.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import ml_collections  # noqa: E402
import numpy as np  # noqa: E402

from vit_spectral.durability import checkpointing  # noqa: E402
from vit_spectral.analysis import probe  # noqa: E402
from vit_spectral.data import input_pipeline  # noqa: E402
from vit_spectral.models import build_model  # noqa: E402
from benchmarks.figures import (  # noqa: E402
    add_results_flags, new_figure, read_results, save_next_to)

COLUMNS = ("hc_dc_ratio", "hc_proportion", "token_cosine_similarity",
           "attention_cosine_similarity")


def restore_params(workdir: str):
  """The parameters of the latest checkpoint in `workdir`, and its step."""
  return checkpointing.latest_params(workdir)


def summary(result) -> np.ndarray:
  """Per-layer rows: the COLUMNS averaged over images, then DC and mean HC response."""
  spectrum = np.asarray(result["attention_spectrum"])            # (L, B, H, T)
  rows = [np.asarray(result[c]).mean(axis=1) for c in COLUMNS]
  rows += [spectrum[..., 0].mean(axis=(1, 2)), spectrum[..., 1:].mean(axis=(1, 2, 3))]
  return np.stack(rows, axis=1)


def model_results(result) -> dict:
  """The JSON of one model's probe: each COLUMN and the DC / mean HC response per
  layer, and the attention spectrum averaged over images and heads, (L, T)."""
  rows = summary(result)
  names = COLUMNS + ("spectrum_dc", "spectrum_hc")
  out = {name: rows[:, k].tolist() for k, name in enumerate(names)}
  out["attention_spectrum"] = np.asarray(result["attention_spectrum"]).mean(axis=(1, 2)).tolist()
  return out


def plot_probe(results: dict):
  """Per layer, trained (solid) vs init (dashed): HC/DC ratio (Fig. 4), token and
  attention cosine (Fig. 12); then each layer's trained attention spectrum over
  the frequency bands, DC at 0 (Figs. 2/11)."""
  fig, (ratio_ax, cos_ax, spec_ax) = new_figure(3, 13.0, 3.8)
  for name, style in (("trained", "-"), ("init", "--")):
    model = results[name]
    layers = np.arange(1, len(model["hc_dc_ratio"]) + 1)
    ratio_ax.plot(layers, model["hc_dc_ratio"], "o" + style, color="C0", label=name)
    cos_ax.plot(layers, model["token_cosine_similarity"], "o" + style, color="C1",
                label=f"token cosine, {name}")
    cos_ax.plot(layers, model["attention_cosine_similarity"], "s" + style, color="C2",
                label=f"attention cosine, {name}")
  for k, spectrum in enumerate(results["trained"]["attention_spectrum"]):
    spec_ax.plot(np.arange(len(spectrum)), spectrum, "o-", ms=3,
                 color=f"C{k % 10}", label=f"layer {k + 1}")
  ratio_ax.set_ylabel("||HFC|| / ||DC|| of the block output")
  cos_ax.set_ylabel("mean cosine similarity")
  cos_ax.set_ylim(0, 1)
  spec_ax.set_xlabel("frequency band (0 = DC)")
  spec_ax.set_ylabel("response (row norm of F A F^-1)")
  spec_ax.set_title("attention spectrum, trained", fontsize=9)
  for ax in (ratio_ax, cos_ax):
    ax.set_xlabel("layer")
    ax.set_xticks(layers)
  for ax in (ratio_ax, cos_ax, spec_ax):
    ax.grid(True, lw=0.3)
    ax.legend(fontsize=7)
  fig.suptitle(f"{results['workdir']}: step {results['step']}, {results['attention']} "
               f"attention, test accuracy {100 * results['accuracy']:.1f}% "
               f"({results['num_images']} images)", fontsize=10)
  return fig


def print_table(results: dict):
  header = ("layer", "hc/dc", "hc/all", "tok_cos", "attn_cos", "spec_DC", "spec_HC")
  names = COLUMNS + ("spectrum_dc", "spectrum_hc")
  for name in ("trained", "init"):
    print(f"\n{name}\n" + " ".join(f"{h:>9s}" for h in header))
    for layer, row in enumerate(zip(*(results[name][c] for c in names))):
      print(f"{layer:>9d} " + " ".join(f"{v:9.4f}" for v in row))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", default="workdir/digits_vit")
  add_results_flags(parser, "probe_digits")
  args = parser.parse_args(argv)
  if args.replot:
    results = read_results(args.out)
    print_table(results)
    print(f"plot {save_next_to(plot_probe(results), args.out)}")
    return

  with open(os.path.join(args.workdir, "config.json")) as f:
    config = ml_collections.ConfigDict(json.load(f))
  meta = input_pipeline.dataset_meta(config.input)
  model = build_model(config.model, meta.num_classes)
  dataset, _ = input_pipeline.create_eval_dataset(config.input, process_index=0, process_count=1)
  batch = next(iter(dataset.as_numpy_iterator()))
  images = batch["image"][batch["mask"]]

  params, step = restore_params(args.workdir)
  init = model.init(jax.random.key(config.seed), images[:1])["params"]
  accuracy = float((model.apply({"params": params}, images).argmax(-1)
                    == batch["label"][batch["mask"]]).mean())
  print(f"{args.workdir}: step {step}, attention {config.model.attention.name}, "
        f"block options {dict(config.model.block)}, {len(images)} eval images, "
        f"accuracy {accuracy:.4f}")
  results = dict(command=" ".join(["python", "benchmarks/probe_digits.py", *sys.argv[1:]]),
                 workdir=args.workdir, step=int(step), attention=config.model.attention.name,
                 accuracy=accuracy, num_images=len(images),
                 trained=model_results(probe(model, {"params": params}, images)),
                 init=model_results(probe(model, {"params": init}, images)))
  os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
  with open(args.out, "w") as f:
    json.dump(results, f, indent=1)
  print_table(results)
  print(f"plot {save_next_to(plot_probe(results), args.out)}")


if __name__ == "__main__":
  main()
