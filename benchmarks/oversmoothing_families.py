r"""Per-layer oversmoothing curves of every converted pretrained family, in one figure.

  python benchmarks/oversmoothing_families.py [--num_images=16] [--image_size=224]
      [--weights deit3_small_patch16_224=deit3_s.safetensors ...]
      [--out=benchmarks/results/oversmoothing_families.json] [--replot]

For each family `load_timm` converts (ViT/AugReg, DeiT, distilled DeiT,
DeiT-III, DINOv2, DINOv2 with registers, MAE, the CLIP image tower, CaiT,
Swin), the model of the timm name in FAMILIES is built with the library's own
initialisation (seed 0) and diagnosed (`analysis.diagnose`) on the first
`num_images` built-in digits, read raw and preprocessed as that timm model
was trained (`timm_preprocessing(name)`, at `image_size`). With
`--weights NAME=PATH` (a timm `.safetensors` / `.pth` of that name; this
machine has no internet, so none is downloaded) the trained model is
diagnosed on the same images and drawn solid beside the dashed init curve.

The figure: HC/DC of the block outputs (paper 000, Def. 1), token cosine
similarity (eq. 76) and the rank-collapse residual (paper 004, eq. 61) over
the relative depth (layer / depth, so 12- and 24-layer models line up; Swin's
layers run over its four stages). JSON: per family its name, depth and the
three curves (init, and trained when given).

Measured 2026-11-26 (16 digits at 224², seed 0, no trained weights here:
this machine cannot download them), HC/DC of the first -> last block at
initialisation:

  ViT (AugReg) 2.158 -> 0.589   DeiT 3.146 -> 1.194   DeiT distilled 3.153 -> 1.196
  MAE 3.279 -> 1.163            CLIP 2.920 -> 0.822   Swin 3.128 -> 0.654
  DeiT-III 3.872 -> 3.872       DINOv2 2.688 -> 2.688 DINOv2 + registers 2.711 -> 2.711
  CaiT 2.710 -> 2.710

The plain pre-norm families lose the high frequencies block by block at
initialisation, as Theorem 1 of paper 000 says softmax attention does (and
their rank residual falls with them, paper 004); the families with
LayerScale (DeiT-III, DINOv2, CaiT: γ starts at 1e-6 to 1e-5 of each
branch) keep the embedding's HC/DC to four digits through every block: each
block starts as nearly the identity, so their oversmoothing, if any, is
learnt. What the trained checkpoints do is the --weights run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from vit_spectral import analysis  # noqa: E402
from vit_spectral.data.analysis_images import EvalTransform, dataset_images  # noqa: E402
from vit_spectral.models import build_model  # noqa: E402
from vit_spectral.pretrained import loading as pretrained, timm_preprocessing  # noqa: E402
from vit_spectral.pretrained import cait_timm, swin_timm  # noqa: E402
from benchmarks.figures import (  # noqa: E402
    add_results_flags, new_figure, read_results, save_next_to, write_results)

FAMILIES = {
    "ViT (AugReg)": "vit_base_patch16_224",
    "DeiT": "deit_small_patch16_224",
    "DeiT distilled": "deit_small_distilled_patch16_224",
    "DeiT-III": "deit3_small_patch16_224",
    "DINOv2": "vit_small_patch14_dinov2",
    "DINOv2 + registers": "vit_small_patch14_reg4_dinov2",
    "MAE": "vit_base_patch16_224.mae",
    "CLIP": "vit_base_patch16_clip_224.openai",
    "CaiT": "cait_xxs24_224",
    "Swin": "swin_tiny_patch4_window7_224",
}
METRICS = ("hc_dc_ratio", "token_cosine_similarity", "rank_residual_ratio")
LABELS = {"hc_dc_ratio": "‖HC‖/‖DC‖ of the block output (000 Def. 1)",
          "token_cosine_similarity": "token cosine (000 eq. 76)",
          "rank_residual_ratio": "rank residual ‖Res‖/‖X‖ (004 eq. 61)"}


def architecture(name: str):
  """The model of a timm name, with the library's initialisation (no weights)."""
  arch = name.split(".")[0]
  if arch in cait_timm.TIMM_NAMES:
    return build_model({"variant": cait_timm.TIMM_NAMES[arch]}, 1000)
  if arch in swin_timm.TIMM_NAMES:
    variant, fields = swin_timm.TIMM_NAMES[arch]
    return build_model({"variant": variant, **fields}, 1000)
  return build_model(pretrained.timm_model_config(name), 1000)


def images_for(name: str, size: int, count: int) -> np.ndarray:
  pre = timm_preprocessing(name)
  raw, _ = dataset_images("digits", "test", count)
  return EvalTransform(size=size, crop_fraction=pre.crop_pct, method=pre.interpolation,
                       mean=tuple(pre.mean), std=tuple(pre.std))(raw)


def curves(d) -> dict[str, list[float]]:
  return {m: d.values(m).round(5).tolist() for m in METRICS}


def measure(label: str, name: str, args, weights: dict[str, str]) -> dict:
  start = time.perf_counter()
  images = images_for(name, args.image_size, args.num_images)
  model = architecture(name)
  variables = jax.jit(model.init)(jax.random.key(0), images[:1])
  init = analysis.diagnose(model, variables, images, metrics=METRICS,
                           batch_size=args.batch_size, name=label)
  out = {"timm_name": name, "layers": init.num_layers, "stage": init.stage.tolist(),
         "init": curves(init), "trained": None}
  if name in weights:
    trained_model, trained = pretrained.load_timm(weights[name], name,
                                                  image_size=args.image_size)
    out["trained"] = curves(analysis.diagnose(trained_model, trained, images, metrics=METRICS,
                                              batch_size=args.batch_size, name=label))
    out["weights"] = weights[name]
  out["seconds"] = round(time.perf_counter() - start, 1)
  print(f"{label:20s} {name:36s} {init.num_layers:3d} layers  hc/dc init "
        f"{out['init']['hc_dc_ratio'][0]:.3f} -> {out['init']['hc_dc_ratio'][-1]:.3f}  "
        f"({out['seconds']} s)", flush=True)
  return out


def plot(results: dict):
  fig, axes = new_figure(len(METRICS), 14.0, 4.2)
  for k, (label, family) in enumerate(results["families"].items()):
    depth = np.arange(1, family["layers"] + 1) / family["layers"]
    for ax, metric in zip(axes, METRICS):
      ax.plot(depth, family["init"][metric], "--", lw=1.1, color=f"C{k % 10}",
              label=f"{label} (init)")
      if family["trained"]:
        ax.plot(depth, family["trained"][metric], "-", lw=1.4, color=f"C{k % 10}",
                label=f"{label} (trained)")
  for ax, metric in zip(axes, METRICS):
    ax.set_title(LABELS[metric], fontsize=9)
    ax.set_xlabel("relative depth (layer / depth)")
    ax.grid(True, lw=0.3)
  axes[1].set_ylim(0, 1.02)
  axes[-1].legend(fontsize=6, ncol=2)
  trained = [l for l, f in results["families"].items() if f["trained"]]
  fig.suptitle(f"every converted family at the library's initialisation (dashed)"
               f"{'; trained (solid): ' + ', '.join(trained) if trained else ''} — "
               f"{results['num_images']} digits at {results['image_size']}², each model's "
               "timm preprocessing", fontsize=9)
  return fig


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--num_images", type=int, default=16)
  parser.add_argument("--image_size", type=int, default=224)
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--weights", nargs="*", default=[], metavar="NAME=PATH",
                      help="trained weights of a FAMILIES timm name")
  add_results_flags(parser, "oversmoothing_families")
  args = parser.parse_args(argv)
  if args.replot:
    print(f"plot {save_next_to(plot(read_results(args.out)), args.out)}")
    return
  weights = dict(w.split("=", 1) for w in args.weights)
  unknown = sorted(set(weights) - set(FAMILIES.values()))
  if unknown:
    parser.error(f"--weights for {unknown}: not among {sorted(FAMILIES.values())}")
  results = {"command": " ".join(["python", "benchmarks/oversmoothing_families.py",
                                  *sys.argv[1:]]),
             "num_images": args.num_images, "image_size": args.image_size,
             "families": {label: measure(label, name, args, weights)
                          for label, name in FAMILIES.items()}}
  write_results(results, args.out)
  print(f"plot {save_next_to(plot(results), args.out)}")


if __name__ == "__main__":
  main()
