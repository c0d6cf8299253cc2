r"""Peak memory of one ViT-Ti/16 train step at 224², batch 64: Hopfield vs baseline.

Compiles (never runs) the trainer's train step (`steps.train_step`, AdamW, the
state donated as in the trainer) for abstract inputs and reads XLA's memory
analysis of the compiled executable. Total = arguments + outputs + temporaries
- aliased (donated) bytes: what the step needs at once. (XLA's own
`peak_memory_in_bytes` is printed too; the CPU backend fills it with the
argument size only.) The Hopfield encoder carries one float32 (B, heads, T, T)
score map from block to block, 64 · 3 · 197² · 4 B = 29.8 MB here. The backward
pass of h_ℓ = α'·h_{ℓ-1} + (1 - α')·s_ℓ needs no stored h (it is linear in h;
softmax's backward uses the stored weights, as the baseline does), so the
expected extra is about one such map, not one per block.

  nice -n 10 python benchmarks/hopfield_memory.py [--batch=64] [--remat]

Measured (CPU compile, no remat): baseline 5394.2 MB, Hopfield 5424.0 MB,
+29.8 MB (+0.55%), exactly one carried map.

On a CPU this only compiles (about a minute per model); on an accelerator the
numbers are that device's.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from vit_spectral.configs import common  # noqa: E402
from vit_spectral.training import optim, steps  # noqa: E402
from vit_spectral.models import build_model  # noqa: E402
from vit_spectral.training.train_state import TrainState  # noqa: E402

IMAGE, CLASSES, TOKENS = 224, 1000, (224 // 16) ** 2 + 1
MB = 1e6


def compiled_step(attention: str, batch: int, remat: bool):
  """The compiled train step of ViT-Ti/16 with `attention`."""
  model = build_model(common.model_config("Ti/16", attention=dict(name=attention),
                                          remat=remat), CLASSES)
  tx, schedule = optim.make_optimizer(common.optim_config(warmup_steps=10), 100)

  def init(rng):
    params = model.init(rng, jnp.zeros((1, IMAGE, IMAGE, 3)))["params"]
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))

  state = jax.eval_shape(init, jax.random.key(0))
  data = dict(image=jax.ShapeDtypeStruct((batch, IMAGE, IMAGE, 3), jnp.float32),
              label=jax.ShapeDtypeStruct((batch,), jnp.int32))
  step = jax.jit(functools.partial(steps.train_step, model=model, tx=tx, schedule=schedule,
                                   base_rng=jax.random.key(1)), donate_argnums=0)
  return step.lower(state, data).compile()


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--remat", action="store_true")
  args = parser.parse_args()
  rows = {}
  for attention in ("dot_product", "hopfield"):
    stats = compiled_step(attention, args.batch, args.remat).memory_analysis()
    rows[attention] = stats
  carry = args.batch * 3 * TOKENS ** 2 * 4
  print(f"\nViT-Ti/16, {IMAGE}², batch {args.batch}, remat={args.remat}, "
        f"backend {jax.default_backend()} (MB = 1e6 bytes)")
  print("| attention | total | temp | arguments | outputs | aliased | XLA peak field |")
  print("|---|---|---|---|---|---|---|")
  total = {}
  for attention, s in rows.items():
    total[attention] = (s.argument_size_in_bytes + s.output_size_in_bytes
                        + s.temp_size_in_bytes - s.alias_size_in_bytes)
    print(f"| {attention} | {total[attention] / MB:.1f} | {s.temp_size_in_bytes / MB:.1f} | "
          f"{s.argument_size_in_bytes / MB:.1f} | {s.output_size_in_bytes / MB:.1f} | "
          f"{s.alias_size_in_bytes / MB:.1f} | {s.peak_memory_in_bytes / MB:.1f} |")
  extra = total["hopfield"] - total["dot_product"]
  print(f"Hopfield - baseline: {extra / MB:.1f} MB ({100 * extra / total['dot_product']:.2f}%); "
        f"one carried map B·H·T²·4 = {carry / MB:.1f} MB")


if __name__ == "__main__":
  main()
