r"""Paper 004 Table 8 at initialization: rank collapse of attention-only networks.

For depth L = 1..12, an attention-only ViT (no MLP, no residual around attention:
`config.model.block = dict(attention_residual="none", use_mlp=False)`) of ViT-T
width (192, 3 heads) on 2×2 patches of the digits test images (17 tokens with
CLS), freshly initialised with the library's defaults, maps the embedded images
X to AttnNet(X), the output of its last block. Printed: the normalized residual
‖Res(AttnNet(X))‖_{1,∞} / ‖AttnNet(X)‖_{1,∞} (eq. 61, `rank_residual_ratio`),
averaged over the 360 test images and over `--seeds` initialisations, for

  * self-attention (dot_product),
  * MHA α = α' = 0.5 (α mixes the block's LN(x), the "inner" placement),
  * MHA α = α' = 0.5 with the "replace" placement (α mixes x itself),
  * MHA α = 0, α' = 0.5 (the hidden state alone, Thm. 5.2).

  nice -n 10 python benchmarks/hopfield_rank_collapse.py [--seeds=3] [--max_depth=12]
      [--out=benchmarks/results/hopfield_rank_collapse.json] [--replot]

Writes the table as JSON to `--out` and its depth curves (log scale, mean over
seeds with the min-max band) as the PNG beside it; `--replot` redraws the PNG
from that JSON without running anything.

Measured (3 seeds): self-attention 0.81, 0.42, 0.073, 2.5e-3, 8.7e-6, then the
float32 floor ~1.2e-7 from depth 6; MHA α = α' = 0.5 (inner) 1.01 ... 0.76 (depth
3) ... 0.045 (depth 12); "replace" 0.94 ... 4.2e-4 (depth 12); α = 0, α' = 0.5
collapses like self-attention (0.55, 0.13, 0.010, 5e-4, 1.4e-5, floor from depth 7).

The paper (CIFAR-10, Table 8): self-attention 0.49, 0.077, 8e-4, then ~1.8e-6
from depth 4 on; MHA(α = 0.5) 0.88 at depth 1 down to 0.40 at depth 12.
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
from vit_spectral.analysis import rank_residual_ratio  # noqa: E402
from vit_spectral.data import input_pipeline  # noqa: E402
from vit_spectral.models import build_model, per_layer  # noqa: E402
from benchmarks.figures import (  # noqa: E402
    add_results_flags, new_figure, read_results, save_next_to)


ATTENTION_ONLY = dict(attention_residual="none", use_mlp=False)
COLUMNS = {
    "self-attention": (dict(name="dot_product"), ATTENTION_ONLY),
    "MHA a=a'=0.5": (dict(name="hopfield", alpha=0.5, alpha_hidden=0.5), ATTENTION_ONLY),
    "MHA a=a'=0.5 replace": (dict(name="hopfield", alpha=0.5, alpha_hidden=0.5),
                             dict(ATTENTION_ONLY, attention_residual="replace")),
    "MHA a=0 a'=0.5": (dict(name="hopfield", alpha=0.0, alpha_hidden=0.5), ATTENTION_ONLY),
}


def test_images():
  """The 360 digits test images, normalised as the default recipe does."""
  config = digits_vit.get_config()
  dataset, _ = input_pipeline.create_eval_dataset(config.input)
  batches = list(dataset.as_numpy_iterator())
  return np.concatenate([b["image"][b["mask"]] for b in batches])


def ratios_at_init(attention, block, max_depth: int, images, seeds: int, *,
                   patch_size: int = 2, kernel_init: str | None = None,
                   norm: str | None = None) -> np.ndarray:
  """(max_depth, seeds): per depth and seed, the mean over images of eq. (61).

  The depth-L network is the first L blocks of one `max_depth`-block network:
  blocks are initialised independently of each other, so its first L blocks
  are a default-initialised depth-L network (one compile per column instead of
  one per depth). `patch_size` sets the token count, `kernel_init` the kernels'
  initializer, `norm` the block's pre-norm ("none": the block reads its input
  as it is); None: the model's default.
  """
  fields = dict(hidden_size=192, num_heads=3, mlp_dim=768, patch_size=patch_size,
                depth=max_depth, attention=attention, block=block)
  if kernel_init is not None:
    fields["kernel_init"] = kernel_init
  if norm is not None:
    fields["norm"] = norm
  model = build_model(fields, num_classes=0)

  @jax.jit
  def ratios(key):
    params = model.init(key, images[:1])["params"]
    _, state = model.apply({"params": params}, images, mutable=["intermediates"])
    return [rank_residual_ratio(layer["block_output"]).mean()        # (N, T, D) -> ()
            for layer in per_layer(state["intermediates"])]

  return np.array([[float(r) for r in ratios(jax.random.key(s))] for s in range(seeds)]).T


def plot_rank_collapse(results: dict):
  """Normalized residual (eq. 61) vs depth per column, log scale: the seeds' mean
  as a line, their min-max as a band."""
  fig, (ax,) = new_figure(1, 6.0, 4.0)
  for name, per_depth in results["columns"].items():
    values = np.asarray(per_depth)                                   # (depth, seeds)
    depths = np.arange(1, len(values) + 1)
    line, = ax.plot(depths, values.mean(axis=1), "o-", ms=3, label=name)
    ax.fill_between(depths, values.min(axis=1), values.max(axis=1),
                    color=line.get_color(), alpha=0.2, lw=0)
  ax.set_yscale("log")
  ax.set_xlabel("depth L (attention-only blocks)")
  ax.set_ylabel("||Res(AttnNet(X))|| / ||AttnNet(X)||  (eq. 61)")
  ax.set_title(f"rank collapse at init, digits ({results['num_images']} test images, "
               f"{results['seeds']} seeds)", fontsize=9)
  ax.grid(True, which="major", lw=0.3)
  ax.legend(fontsize=8)
  return fig


def print_table(results: dict):
  columns = results["columns"]
  print(f"\nnormalized residual (eq. 61) at init, digits test images ({results['num_images']}), "
        f"mean over {results['seeds']} seeds [min, max]")
  print("| depth | " + " | ".join(columns) + " |")
  print("|---" * (len(columns) + 1) + "|")
  for d in range(results["max_depth"]):
    cells = [f"{v.mean():.3g} [{v.min():.2g}, {v.max():.2g}]"
             for v in (np.asarray(columns[name][d]) for name in columns)]
    print(f"| {d + 1} | " + " | ".join(cells) + " |")


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seeds", type=int, default=3)
  parser.add_argument("--max_depth", type=int, default=12)
  add_results_flags(parser, "hopfield_rank_collapse")
  args = parser.parse_args(argv)
  if args.replot:
    results = read_results(args.out)
  else:
    images = test_images()
    table = {name: ratios_at_init(*spec, args.max_depth, images, args.seeds)
             for name, spec in COLUMNS.items()}
    results = dict(command=" ".join(["python", "benchmarks/hopfield_rank_collapse.py",
                                     *sys.argv[1:]]), seeds=args.seeds, max_depth=args.max_depth, num_images=len(images),
                   columns={name: table[name].tolist() for name in COLUMNS})
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
      json.dump(results, f, indent=1)
  print_table(results)
  print(f"plot {save_next_to(plot_rank_collapse(results), args.out)}")


if __name__ == "__main__":
  main()
