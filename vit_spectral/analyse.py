r"""vit-spectral-analyse: the per-layer diagnostics of a run or a pretrained checkpoint.

  vit-spectral-analyse --workdir=workdir/digits_vit     # writes workdir/digits_vit/analysis
  vit-spectral-analyse --timm=deit_small_patch16_224 \
      --weights=deit_small_patch16_224.safetensors --images=my_images/ --out=analysis/deit_s
  vit-spectral-analyse --big_vision=B/16 --weights=ViT-B_16.npz --dataset=imagenet2012 \
      --split=validation --out=analysis/augreg_b16
  python -m vit_spectral.analyse ...        (the same command)

The model: a trainer workdir (`workdir.load_workdir`: config.json and the
newest finished checkpoint, EMA parameters when the run keeps them; a run
still training can be read), or a timm / big_vision weights file
(`models.load_timm`, `models.load_big_vision`).

The images: the run's own eval split (or --split), read and preprocessed by
the run's eval pipeline (`data.eval_images`, the default for --workdir); or --dataset (a prepared TFDS name, or the
built-in "digits", the default for a weights file) or --images (a folder),
read raw and preprocessed as the model expects: a run's eval transform, a
timm model's own (`pretrained.timm_preprocessing`), big_vision's resize to the
model's side and [-1, 1] values.

What it writes to --out (default: <workdir>/analysis, or analysis/<model>
for a weights file; it prints the per-layer table and each path written):
  diagnosis.csv    the tidy frame (model, layer, stage, head, metric, value;
                   layers numbered from 0, as the trainer's layer_00);
                   unless --nocompare_init, the same model at its
                   initialisation is the model "init", the checkpoint "trained"
  diagnosis.json   the command, the source, step and images, and per model
                   every metric per layer (per-head lists, spectra)
  layers.png       the per-layer curves (HC/DC, token and attention cosine,
                   rank residual, entropy, attention HF/DC)
  spectrum.png     each layer's attention spectrum (DC first)

Flags are absl's, as train.py's (`--name=value`; a boolean also `--name`,
`--noname`, `--name=false`). A mistake on the command line (an unknown flag
or metric, a flag of another source, a missing weights file or folder) is one
line on stderr and exit 2, before TensorFlow is imported or anything is read;
bad input found while loading (no checkpoint, weights for another model, a
folder with nothing readable, a data set that is not prepared) is one line
and exit 1.
"""

from __future__ import annotations

import json
import os
import sys
import types
from typing import Any, Sequence

import numpy as np
from absl import flags

from vit_spectral import errors
from vit_spectral.main import flags_help, parse_flags, wants_help
from vit_spectral.workdir import PARAMS_CHOICES

__all__ = ["FLAG_NAMES", "UsageError", "check_paths", "default_out", "help_text", "main",
           "parse_args", "run"]

PROG = "vit-spectral-analyse"
SOURCES = ("workdir", "timm", "big_vision")


def _define_flags(flag_values: flags.FlagValues) -> None:
  """The command's flags (absl, as train.py's: `--name=value`, a boolean also
  `--name` / `--noname` / `--name=false`)."""
  define = dict(flag_values=flag_values)
  flags.DEFINE_string("workdir", None, "A train.py workdir (finished or running).", **define)
  flags.DEFINE_string("timm", None, "A timm model name; needs --weights.", **define)
  flags.DEFINE_string("big_vision", None, "A ViT variant, e.g. B/16; needs --weights (.npz).",
                      **define)
  flags.DEFINE_string("weights", None, "The weights file of --timm / --big_vision.", **define)
  flags.DEFINE_enum("params", "auto", PARAMS_CHOICES,
                    "--workdir: EMA or raw parameters (auto: EMA when the run keeps them).",
                    **define)
  flags.DEFINE_integer("step", None, "--workdir: the checkpoint step (default: the newest).",
                       lower_bound=0, **define)
  flags.DEFINE_integer("image_size", None, "--timm / --big_vision: the input side (default: "
                       "the model's).", lower_bound=1, **define)
  flags.DEFINE_string("dataset", None, "A prepared TFDS name, or digits (default: the run's "
                      "eval split for --workdir, digits for a weights file).", **define)
  flags.DEFINE_string("images", None, "A folder of images (instead of --dataset).", **define)
  flags.DEFINE_string("split", None, "The split of --dataset, or of the run's data set for "
                      "--workdir (default: the run's eval split; test, or validation for "
                      "imagenet2012).", **define)
  flags.DEFINE_string("data_dir", None, "TFDS data_dir of --dataset.", **define)
  flags.DEFINE_integer("num_images", 64, "How many images to diagnose on.", lower_bound=1,
                       **define)
  flags.DEFINE_integer("batch_size", 8, "Images per forward pass (memory grows with it).",
                       lower_bound=1, **define)
  flags.DEFINE_list("metrics", None, "Comma-separated metric names (default: all).", **define)
  flags.DEFINE_bool("compare_init", True, "Also diagnose the model at its initialisation "
                    "(--nocompare_init or --compare_init=false: only the checkpoint).", **define)
  flags.DEFINE_string("out", None, "The output folder (default: <workdir>/analysis for "
                      "--workdir, analysis/<model> for --timm / --big_vision).", **define)


def _flag_names() -> tuple[str, ...]:
  flag_values = flags.FlagValues()
  _define_flags(flag_values)
  return tuple(flag_values)


FLAG_NAMES = _flag_names()


def help_text() -> str:
  """The module docstring and the command's flags (what --help prints)."""
  flag_values = flags.FlagValues()
  _define_flags(flag_values)
  return "\n".join([__doc__.strip(), "", *flags_help(flag_values, FLAG_NAMES)])


def default_out(args) -> str:
  """Where the command writes without --out: `<workdir>/analysis`, or
  `analysis/<timm name>` / `analysis/big_vision_<variant>` ("/" as "-")."""
  if args.workdir:
    return os.path.join(args.workdir, "analysis")
  name = args.timm or f"big_vision_{args.big_vision}"
  return os.path.join("analysis", name.replace("/", "-"))


class UsageError(ValueError):
  """A mistake on the command line; the message is one line naming it."""


def _check(args) -> None:
  """Every check of the flags that needs no JAX and no file read.

  Raises:
    UsageError: one line naming the flag and what would be valid.
  """
  given = [f"--{name}" for name in SOURCES if getattr(args, name)]
  if len(given) != 1:
    raise UsageError(f"give one model source of --workdir, --timm, --big_vision "
                     f"(got {', '.join(given) or 'none'})")
  if args.images and args.dataset:
    raise UsageError("--images and --dataset are two sources of images; give one")
  if args.workdir:
    for name in ("weights", "image_size"):
      if name in args.given:
        raise UsageError(f"--{name} goes with --timm or --big_vision, not --workdir")
  else:
    if not args.weights:
      raise UsageError(f"--{'timm' if args.timm else 'big_vision'} needs --weights=PATH")
    for name in ("params", "step"):
      if name in args.given:
        raise UsageError(f"--{name} goes with --workdir, not --timm / --big_vision")
  if args.images:
    if args.split or args.data_dir:
      raise UsageError(f"--{'split' if args.split else 'data_dir'} goes with --dataset or "
                       "--workdir, not --images")
  if args.data_dir and not args.dataset:
    raise UsageError("--data_dir goes with --dataset (a run reads its own data_dir)")


def check_paths(args) -> None:
  """The files the flags name exist (a printed command parses without them).

  Raises:
    UsageError: one line naming the flag.
  """
  if args.weights and not os.path.isfile(args.weights):
    raise UsageError(f"--weights={args.weights} is not a file")
  if args.images and not os.path.isdir(args.images):
    raise UsageError(f"--images={args.images} is not a directory")


def parse_args(argv: Sequence[str] | None = None) -> types.SimpleNamespace:
  """The command's flags (`argv` without the program name; None: sys.argv's),
  checked (`_check`), with --out defaulted (`default_out`). --help prints
  `help_text` and exits 0; a mistake is one line on stderr and exit 2."""
  argv = list(sys.argv[1:] if argv is None else argv)
  if wants_help([PROG, *argv]):
    print(help_text())
    sys.exit(0)
  flag_values = flags.FlagValues()
  _define_flags(flag_values)
  try:
    try:
      parse_flags(flag_values, [PROG, *argv], UsageError)
    except UsageError:
      argparse_style = [a.split("=")[0] for a in argv if a.startswith("--no-")]
      if argparse_style:    # the spelling of this command before it took absl flags
        name = argparse_style[0][len("--no-"):]
        raise UsageError(f"{argparse_style[0]}: write --no{name} or --{name}=false") from None
      raise
    args = types.SimpleNamespace(**{name: flag_values[name].value for name in FLAG_NAMES})
    args.given = {name for name in FLAG_NAMES if flag_values[name].present}
    _check(args)
  except UsageError as e:
    print(f"{PROG}: error: {e}", file=sys.stderr)
    sys.exit(errors.USAGE_EXIT_CODE)
  args.out = args.out or default_out(args)
  return args


def _default_split(dataset: str) -> str:
  return "validation" if dataset.split(":")[0] == "imagenet2012" else "test"


def _images(args, transform, config=None) -> tuple[np.ndarray, str]:
  """(N, H, W, C) model inputs and what they are: a folder, a data set, or a
  run's own eval images (`config`: the run's, for --workdir)."""
  from vit_spectral.data import analysis_images
  if args.images:
    raw = analysis_images.folder_images(args.images, args.num_images)
    return transform(raw), f"{len(raw)} images of {args.images}"
  if args.dataset is None and config is not None:
    split = args.split or config.input.eval_split
    return (analysis_images.eval_images(config.input, args.num_images, split=split),
            f"{config.input.dataset} {split} (the run's eval transform)")
  dataset = args.dataset or "digits"
  split = args.split or _default_split(dataset)
  raw, _ = analysis_images.dataset_images(dataset, split, args.num_images, args.data_dir)
  return transform(raw), f"{dataset} {split}"


def _load(args) -> dict[str, Any]:
  """The model, variables, images and what they are."""
  if args.workdir:
    from vit_spectral.workdir import read_workdir
    run = read_workdir(args.workdir, params=args.params, step=args.step)
    from vit_spectral.data.analysis_images import eval_transform
    images, described = _images(args, eval_transform(run.config.input), run.config)
    return dict(model=run.model, variables=run.variables, images=images, images_from=described,
                seed=int(run.config.get("seed", 0)),
                source={"workdir": os.path.abspath(args.workdir), "step": run.step,
                        "params": run.params})
  from vit_spectral.data import analysis_images
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
    transform = analysis_images.timm_transform(args.timm, args.image_size)
    source = {"timm": args.timm, "weights": os.path.abspath(args.weights)}
  else:
    transform = analysis_images.big_vision_transform(args.image_size or 224)
    source = {"big_vision": args.big_vision, "weights": os.path.abspath(args.weights)}
  images, described = _images(args, transform)
  return dict(model=model, variables=variables, images=images, images_from=described, seed=0,
              source=source)


def _diagnoses(loaded: dict[str, Any], args) -> dict[str, Any]:
  import jax

  from vit_spectral import analysis
  metrics = args.metrics or None
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
  # Before anything is read or loaded: the metric names need the attention
  # registry, so JAX, but not TensorFlow, a checkpoint or a model.
  try:
    check_paths(args)
    if args.metrics:
      from vit_spectral.analysis.layer_metrics import check_metrics
      try:
        check_metrics(args.metrics)
      except ValueError as e:
        raise UsageError(f"--metrics: {str(e).removeprefix('diagnose metrics: ')}") from None
  except UsageError as e:
    print(f"{PROG}: error: {e}", file=sys.stderr)
    return errors.USAGE_EXIT_CODE
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
