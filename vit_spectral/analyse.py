r"""vit-spectral-analyse: the per-layer diagnostics of a run or a pretrained checkpoint.

  vit-spectral-analyse --workdir=workdir/digits_vit --out=analysis/digits_vit
  vit-spectral-analyse --timm=deit_small_patch16_224 \
      --weights=deit_small_patch16_224.safetensors --images=my_images/ --out=analysis/deit_s
  vit-spectral-analyse --big_vision=B/16 --weights=ViT-B_16.npz --dataset=imagenet2012 \
      --split=validation --out=analysis/augreg_b16
  python -m vit_spectral.analyse ...        (the same command)

The model: a trainer workdir (`workdir.load_workdir`: config.json and the
newest finished checkpoint, EMA parameters when the run keeps them; a run
still training can be read), or a timm / big_vision weights file
(`models.load_timm`, `models.load_big_vision`).

The images: the run's own eval split, preprocessed as the run evaluates
(the default for --workdir); or --dataset (a prepared TFDS name, or the
built-in "digits", the default for a weights file) or --images (a folder),
read raw and preprocessed as the model expects: a run's eval transform, a
timm model's own (`pretrained.timm_preprocessing`), big_vision's resize to the
model's side and [-1, 1] values.

What it writes to --out (and prints the per-layer table):
  diagnosis.csv    the tidy frame (model, layer, stage, head, metric, value);
                   with --compare_init (on by default) the same model at its
                   initialisation is the model "init", the checkpoint "trained"
  diagnosis.json   the command, the source, step and images, and per model
                   every metric per layer (per-head lists, spectra)
  layers.png       the per-layer curves (HC/DC, token and attention cosine,
                   rank residual, entropy, attention HF/DC)
  spectrum.png     each layer's attention spectrum (DC first)

Bad input (no checkpoint, weights for another model, a folder with nothing
readable, a data set that is not prepared) is one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

import numpy as np

__all__ = ["main", "parse_args", "run"]

PROG = "vit-spectral-analyse"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(
      prog=PROG, description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter,
      epilog="\n".join(__doc__.splitlines()[2:7]))
  source = parser.add_mutually_exclusive_group(required=True)
  source.add_argument("--workdir", help="a train.py workdir (finished or running)")
  source.add_argument("--timm", metavar="NAME", help="a timm model name; needs --weights")
  source.add_argument("--big_vision", metavar="VARIANT",
                      help="a ViT variant, e.g. B/16; needs --weights (.npz)")
  parser.add_argument("--weights", help="the weights file of --timm / --big_vision")
  parser.add_argument("--params", default="auto", choices=("auto", "ema", "raw"),
                      help="--workdir: EMA or raw parameters (auto: EMA when kept)")
  parser.add_argument("--step", type=int, help="--workdir: the checkpoint step (newest)")
  parser.add_argument("--image_size", type=int,
                      help="--timm / --big_vision: the input side (default: the model's)")
  images = parser.add_mutually_exclusive_group()
  images.add_argument("--dataset", help="a prepared TFDS name, or digits")
  images.add_argument("--images", metavar="DIR", help="a folder of images")
  parser.add_argument("--split", default=None,
                      help="--dataset split (default: test, or validation for imagenet2012)")
  parser.add_argument("--data_dir", default=None, help="TFDS data_dir")
  parser.add_argument("--num_images", type=int, default=64)
  parser.add_argument("--batch_size", type=int, default=8,
                      help="images per forward pass (memory grows with it)")
  parser.add_argument("--metrics", default=None,
                      help="comma-separated metric names (default: all)")
  parser.add_argument("--compare_init", action=argparse.BooleanOptionalAction, default=True,
                      help="also diagnose the model at its initialisation")
  parser.add_argument("--out", required=True, help="the output folder")
  args = parser.parse_args(argv)
  if (args.timm or args.big_vision) and not args.weights:
    parser.error(f"--{'timm' if args.timm else 'big_vision'} needs --weights=PATH")
  if args.workdir and args.weights:
    parser.error("--weights goes with --timm or --big_vision, not --workdir")
  if args.num_images <= 0 or args.batch_size <= 0:
    parser.error("--num_images and --batch_size must be positive")
  return args


def _default_split(dataset: str) -> str:
  return "validation" if dataset.split(":")[0] == "imagenet2012" else "test"


def _workdir_transform(config):
  from vit_spectral.data.analysis_images import EvalTransform
  cfg = config.input
  crop = cfg.crop_fraction if cfg.eval_resize == "resize_center_crop" else None
  return EvalTransform(size=int(cfg.image_size), crop_fraction=crop,
                       method=cfg.eval_resize_method, mean=tuple(cfg.mean), std=tuple(cfg.std),
                       channels=len(cfg.mean))


def _timm_transform(name: str, image_size: int | None):
  from vit_spectral.data.analysis_images import EvalTransform
  from vit_spectral.pretrained import timm_preprocessing
  pre = timm_preprocessing(name)
  if pre.interpolation not in ("bilinear", "bicubic"):
    raise ValueError(f"{name} was evaluated with {pre.interpolation!r} resizing; the "
                     "input pipeline has bilinear and bicubic")
  return EvalTransform(size=image_size or int(pre.input_size[0]), crop_fraction=pre.crop_pct,
                       method=pre.interpolation, mean=tuple(pre.mean), std=tuple(pre.std))


def _big_vision_transform(size: int):
  from vit_spectral.data.analysis_images import EvalTransform
  # big_vision's ViT evaluation: value_range(-1, 1) after a resize to the side.
  return EvalTransform(size=size, crop_fraction=None, method="bilinear", mean=(0.5,),
                       std=(0.5,))


def _run_eval_images(config, count: int) -> tuple[np.ndarray, str]:
  """The first `count` images of the run's eval split, as the run evaluates."""
  from vit_spectral.data import input_pipeline
  dataset, num_batches = input_pipeline.create_eval_dataset(config.input, process_index=0,
                                                            process_count=1)
  images = []
  for batch in dataset.take(num_batches).as_numpy_iterator():
    images.append(batch["image"][batch["mask"]])
    if sum(map(len, images)) >= count:
      break
  return (np.concatenate(images)[:count],
          f"{config.input.dataset} {config.input.eval_split} (the run's eval transform)")


def _images(args, transform, config=None) -> tuple[np.ndarray, str]:
  from vit_spectral.data import analysis_images
  if args.images:
    raw = analysis_images.folder_images(args.images, args.num_images)
    return transform(raw), f"{len(raw)} images of {args.images}"
  if args.dataset is None and config is not None:
    return _run_eval_images(config, args.num_images)
  dataset = args.dataset or "digits"
  split = args.split or _default_split(dataset)
  raw, _ = analysis_images.dataset_images(dataset, split, args.num_images, args.data_dir)
  return transform(raw), f"{dataset} {split}"


def _load(args) -> dict[str, Any]:
  """The model, variables, images and what they are."""
  if args.workdir:
    from vit_spectral.workdir import read_workdir
    run = read_workdir(args.workdir, params=args.params, step=args.step)
    images, described = _images(args, _workdir_transform(run.config), run.config)
    return dict(model=run.model, variables=run.variables, images=images, images_from=described,
                seed=int(run.config.get("seed", 0)),
                source={"workdir": os.path.abspath(args.workdir), "step": run.step,
                        "params": run.params})
  from vit_spectral import errors
  from vit_spectral.pretrained import loading as pretrained
  try:
    if args.timm:
      model, variables = pretrained.load_timm(args.weights, args.timm,
                                              image_size=args.image_size)
    else:
      model, variables = pretrained.load_big_vision(args.weights, args.big_vision,
                                                    image_size=args.image_size)
  except errors.WeightsMismatchError as e:
    raise errors.WeightsMismatchError(
        f"--weights={args.weights} is not a {args.timm or args.big_vision} checkpoint: "
        f"{e}") from e
  if args.timm:
    transform = _timm_transform(args.timm, args.image_size)
    source = {"timm": args.timm, "weights": os.path.abspath(args.weights)}
  else:
    transform = _big_vision_transform(args.image_size or 224)
    source = {"big_vision": args.big_vision, "weights": os.path.abspath(args.weights)}
  images, described = _images(args, transform)
  return dict(model=model, variables=variables, images=images, images_from=described, seed=0,
              source=source)


def _diagnoses(loaded: dict[str, Any], args) -> dict[str, Any]:
  import jax

  from vit_spectral import analysis
  metrics = args.metrics.split(",") if args.metrics else None
  model, images = loaded["model"], loaded["images"]
  out = {"trained": analysis.diagnose(model, loaded["variables"], images, metrics=metrics,
                                      batch_size=args.batch_size, name="trained")}
  if args.compare_init:
    init = jax.jit(model.init)(jax.random.key(loaded["seed"]), images[:1])
    out["init"] = analysis.diagnose(model, {"params": init["params"]}, images,
                                    metrics=metrics, batch_size=args.batch_size, name="init")
  return out


def _write(args, loaded, diagnoses) -> list[str]:
  from vit_spectral import analysis
  from vit_spectral.analysis.plots import plot_spectra

  os.makedirs(args.out, exist_ok=True)
  comparison = analysis.compare(diagnoses)
  paths = [comparison.to_csv(os.path.join(args.out, "diagnosis.csv"))]
  record = {"command": " ".join([PROG, *sys.argv[1:]]) if args.argv is None else
                       " ".join([PROG, *args.argv]),
            "source": loaded["source"], "images": loaded["images_from"],
            "num_images": int(len(loaded["images"])),
            "image_shape": list(loaded["images"].shape[1:]),
            "models": {label: d.to_json_dict() for label, d in diagnoses.items()}}
  path = os.path.join(args.out, "diagnosis.json")
  with open(path, "w") as f:
    json.dump(record, f, indent=1)
  paths.append(path)
  fig = comparison.plot()
  fig.suptitle(f"{_describe(loaded['source'])}: {loaded['images_from']}, "
               f"{len(loaded['images'])} images", fontsize=10)
  paths.append(os.path.join(args.out, "layers.png"))
  fig.savefig(paths[-1], dpi=110)
  if any("attention_spectrum" in layer for layer in diagnoses["trained"].layers):
    paths.append(os.path.join(args.out, "spectrum.png"))
    fig = plot_spectra(diagnoses["trained"])
    fig.axes[0].set_title(f"{_describe(loaded['source'])}: attention spectrum per layer "
                          "(000 App. F.2)", fontsize=9)
    fig.savefig(paths[-1], dpi=110)
  return paths


def _describe(source: dict[str, Any]) -> str:
  if "workdir" in source:
    return f"{os.path.basename(source['workdir'])} step {source['step']} ({source['params']})"
  return source.get("timm") or f"big_vision {source['big_vision']}"


def _table(diagnoses) -> str:
  columns = ["hc_dc_ratio", "token_cosine_similarity", "attention_cosine_similarity",
             "rank_residual_ratio", "attention_entropy"]
  lines = []
  for label, d in diagnoses.items():
    wide = d.per_layer()
    shown = [c for c in columns if c in wide.columns]
    if shown:
      lines.append(f"{label}:\n{wide[['stage', *shown]].round(4).to_string()}")
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
  """Runs the command; returns the exit code (0, or 1 with one line on stderr)."""
  args = parse_args(argv)
  args.argv = None if argv is None else list(argv)
  from vit_spectral import errors
  try:
    loaded = _load(args)
    diagnoses = _diagnoses(loaded, args)
    paths = _write(args, loaded, diagnoses)
  except (errors.RunError, FileNotFoundError, ValueError, KeyError, OSError) as e:
    message = e.args[0] if isinstance(e, KeyError) and e.args else e
    print(f"{PROG}: {message}", file=sys.stderr)
    return 1
  print(f"{_describe(loaded['source'])}: {loaded['images_from']}, {len(loaded['images'])} "
        f"images of shape {loaded['images'].shape[1:]}")
  print(_table(diagnoses))
  for path in paths:
    print(f"wrote {path}")
  return 0


def run() -> None:
  """The `vit-spectral-analyse` entry point."""
  sys.exit(main())


if __name__ == "__main__":
  run()
