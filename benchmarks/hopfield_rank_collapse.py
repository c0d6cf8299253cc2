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

Measured (3 seeds): self-attention 0.81, 0.42, 0.073, 2.5e-3, 8.7e-6, then the
float32 floor ~1.2e-7 from depth 6; MHA α = α' = 0.5 (inner) 1.01 ... 0.76 (depth
3) ... 0.045 (depth 12); "replace" 0.94 ... 4.2e-4 (depth 12); α = 0, α' = 0.5
collapses like self-attention (0.55, 0.13, 0.010, 5e-4, 1.4e-5, floor from depth 7).

The paper (CIFAR-10, Table 8): self-attention 0.49, 0.077, 8e-4, then ~1.8e-6
from depth 4 on; MHA(α = 0.5) 0.88 at depth 1 down to 0.40 at depth 12.
"""

from __future__ import annotations

import argparse
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


def ratios_at_init(attention, block, max_depth: int, images, seeds: int) -> np.ndarray:
  """(max_depth, seeds): per depth and seed, the mean over images of eq. (61).

  The depth-L network is the first L blocks of one `max_depth`-block network:
  blocks are initialised independently of each other, so its first L blocks
  are a default-initialised depth-L network (one compile per column instead of
  one per depth).
  """
  model = build_model(dict(hidden_size=192, num_heads=3, mlp_dim=768, patch_size=2,
                           depth=max_depth, attention=attention, block=block),
                      num_classes=0)

  @jax.jit
  def ratios(key):
    params = model.init(key, images[:1])["params"]
    _, state = model.apply({"params": params}, images, mutable=["intermediates"])
    return [rank_residual_ratio(layer["block_output"]).mean()        # (N, T, D) -> ()
            for layer in per_layer(state["intermediates"])]

  return np.array([[float(r) for r in ratios(jax.random.key(s))] for s in range(seeds)]).T


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seeds", type=int, default=3)
  parser.add_argument("--max_depth", type=int, default=12)
  args = parser.parse_args()
  images = test_images()
  table = {name: ratios_at_init(*spec, args.max_depth, images, args.seeds)
           for name, spec in COLUMNS.items()}
  print(f"\nnormalized residual (eq. 61) at init, digits test images ({len(images)}), "
        f"mean over {args.seeds} seeds [min, max]")
  print("| depth | " + " | ".join(COLUMNS) + " |")
  print("|---" * (len(COLUMNS) + 1) + "|")
  for d in range(args.max_depth):
    cells = [f"{v.mean():.3g} [{v.min():.2g}, {v.max():.2g}]"
             for v in (table[name][d] for name in COLUMNS)]
    print(f"| {d + 1} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
  main()
