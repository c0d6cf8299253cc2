r"""Train-step time of fused vs explicit attention (`model.attention.implementation`).

For each attention variant (default dot_product, attn_scale, cosine) this builds
the library's real train step (`steps.train_step`: forward, backward, AdamW
update) twice, with implementation="fused" (`jax.nn.dot_product_attention`)
and "explicit" (the einsum map), and times the configurations interleaved round
by round in a shuffled order in one process, so that a shared CPU slows all of
them alike. Reported per configuration: the median step time over rounds, the
median of the per-round fused/explicit time ratios, and XLA's static cost of
the compiled step (flops, bytes accessed), which no load can disturb.

  python benchmarks/fused_attention.py                 # ViT-Ti width, img 32, patch 4,
                                                       # depth 4, batch 32, float32
  python benchmarks/fused_attention.py --rounds=3 --steps=1 --depth=1 --batch=4   # smoke

Writes JSON to --out (default benchmarks/results/fused_attention.json).

Measured 2026-11-23 on the shared 2-core CPU (load average 5-10 from four other
jobs; per-round times spread ±35%, so these are noise-dominated), defaults
(ViT-Ti width, img 32, patch 4, depth 4, batch 32, float32, scan):
  7 rounds × 2 steps:  fused/explicit median paired ratio dot_product 1.185,
    attn_scale 0.864, cosine 1.080.
  11 rounds × 2 steps (the JSON): 1.022, 1.041, 1.027; medians ~1.3 s/step.
  XLA's static cost, fused vs explicit: flops −0.02%, bytes accessed −0.2% to
  −0.3% for all three. On CPU, JAX 0.10.2's `jax.nn.dot_product_attention`
  is XLA's path, the same einsums and softmax as the explicit path, so no
  speed-up is expected and none is resolved above the noise; nor is a slow-down.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

# Run from a checkout without installing: the repo root, as train.py sees it.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from benchmarks.featscale_attnscale_overhead import (  # noqa: E402
    compiled_cost, jitted_train_step, time_interleaved, time_steps)
from vit_spectral.models import build_model  # noqa: E402

IMPLEMENTATIONS = ("fused", "explicit")
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                           "fused_attention.json")


def build_step(args, variant: str, implementation: str, batch):
  """Returns (jitted train step, initial train state) for one configuration."""
  model = build_model(dict(patch_size=args.patch, hidden_size=args.width, depth=args.depth,
                           num_heads=args.heads, mlp_dim=4 * args.width,
                           attention=dict(name=variant, implementation=implementation),
                           encoder_mode=args.encoder_mode, dtype=args.dtype), num_classes=10)
  return jitted_train_step(model, batch)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--variants", default="dot_product,attn_scale,cosine",
                      help="comma-separated registered attention names with a fused path")
  parser.add_argument("--width", type=int, default=192)
  parser.add_argument("--heads", type=int, default=3)
  parser.add_argument("--depth", type=int, default=4)
  parser.add_argument("--image", type=int, default=32)
  parser.add_argument("--patch", type=int, default=4)
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
  parser.add_argument("--encoder-mode", default="scan", choices=["scan", "loop"])
  parser.add_argument("--rounds", type=int, default=9)
  parser.add_argument("--steps", type=int, default=3, help="steps per configuration per round")
  parser.add_argument("--out", default=DEFAULT_OUT)
  args = parser.parse_args()

  variants = [v for v in args.variants.split(",") if v]
  key = jax.random.key(2)
  batch = {"image": jax.random.normal(key, (args.batch, args.image, args.image, 3)),
           "label": jax.random.randint(key, (args.batch,), 0, 10)}
  configs = [(v, impl) for v in variants for impl in IMPLEMENTATIONS]
  built, costs, states, compile_s = {}, {}, {}, {}
  for config in configs:
    start = time.perf_counter()
    built[config] = build_step(args, *config, batch)
    costs[config] = compiled_cost(*built[config], batch)
    _, states[config] = time_steps(built[config][0], built[config][1], batch, 2)  # warm-up
    compile_s[config] = time.perf_counter() - start

  times = time_interleaved({config: built[config][0] for config in configs}, states, batch,
                           rounds=args.rounds, steps=args.steps)

  tokens = (args.image // args.patch) ** 2 + 1
  print(f"backend={jax.default_backend()} device={jax.devices()[0].device_kind} "
        f"width={args.width} heads={args.heads} depth={args.depth} tokens={tokens} "
        f"batch={args.batch} dtype={args.dtype} encoder={args.encoder_mode} "
        f"rounds={args.rounds} steps/round={args.steps}")
  results = []
  for variant in variants:
    fused, explicit = times[(variant, "fused")], times[(variant, "explicit")]
    ratio = statistics.median(f / e for f, e in zip(fused, explicit))
    for impl in IMPLEMENTATIONS:
      t = times[(variant, impl)]
      cost = costs[(variant, impl)]
      results.append(dict(
          variant=variant, implementation=impl, median_step_ms=1e3 * statistics.median(t),
          min_step_ms=1e3 * min(t), max_step_ms=1e3 * max(t),
          images_per_s=args.batch / statistics.median(t),
          build_and_compile_s=compile_s[(variant, impl)], **{
              k.replace(" ", "_"): v for k, v in cost.items()}))
      print(f"{variant:12s} {impl:8s} median {1e3 * statistics.median(t):8.2f} ms/step "
            f"(min {1e3 * min(t):.2f}, max {1e3 * max(t):.2f})  "
            f"flops {cost['flops']:.4g}  bytes {cost['bytes accessed']:.4g}")
    results[-2]["median_paired_ratio_fused_over_explicit"] = ratio
    print(f"{variant:12s} median paired step-time ratio fused/explicit {ratio:.4f}")

  record = dict(
      date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      machine=dict(platform=platform.platform(), processor=platform.processor(),
                   cpu_count=os.cpu_count(), backend=jax.default_backend(),
                   device_kind=jax.devices()[0].device_kind, jax=jax.__version__,
                   load_average=os.getloadavg()),
      settings=vars(args), results=results)
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  with open(args.out, "w") as f:
    json.dump(record, f, indent=2)
  print(f"wrote {args.out}")


if __name__ == "__main__":
  main()
