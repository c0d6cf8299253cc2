r"""Train-step overhead of AttnScale and FeatScale over the baseline (paper 000, Table 1).

The paper reports −11% (AttnScale) and −5% (FeatScale) throughput for 12-layer
DeiT-S on a GPU; we aim for under 3%. This script times the library's real
train step (`steps.train_step`: forward, backward, AdamW update) for the three
variants of one model, interleaved round by round (in a shuffled order) in one
process so that a shared or throttled CPU slows all three alike, and reports the
medians and the median of the per-round time ratios to the baseline. It also
prints XLA's static cost of each compiled step (flops, bytes accessed), which
no other load on the machine can disturb.

  python benchmarks/featscale_attnscale_overhead.py            # ViT-Ti width, 65 tokens
  python benchmarks/featscale_attnscale_overhead.py --width=384 --heads=6 \
      --image=112 --patch=8 --batch=4                            # DeiT-S layer shape

Defaults: ViT-Ti width (192, 3 heads, MLP 768), 65 tokens (64² images in 8²
patches + CLS), 2 layers, batch 8, so that 9 rounds fit a shared 2-core CPU in a
few minutes. Both techniques add O(n·d) work per layer to O(n·d² + n²·d), so
their relative cost is larger with fewer tokens and narrower layers than DeiT-S
(197 tokens, width 384): the default is the harder case. It does not depend on
the depth.

Measured 2026-11-22 on the 2-core CPU while five other engineers were using it
(load average ~20), so the wall-clock ratios are noise-dominated (per-round
times spread over ±40%); the XLA costs are exact:
  default (Ti width, 65 tokens, 15 rounds × 3 steps): median paired step-time
    ratio AttnScale 1.036, FeatScale 1.016; flops +0.09% / +0.17%, bytes
    accessed +1.97% / +2.75%.
  DeiT-S layer shape (7 rounds × 2 steps): ratio 0.945 / 0.987; flops +0.04% /
    +0.08%, bytes accessed +1.75% / +2.44%.
Re-measured 2026-11-22 05:45 UTC on the same CPU with nothing else running
(9 rounds × 4 steps; per-round spread about ±2%):
  DeiT-S layer shape: 208.2 / 208.5 / 210.3 ms per step (baseline / AttnScale /
    FeatScale): throughput −0.77% (AttnScale), −0.88% (FeatScale).
  default (Ti width, 65 tokens): 44.3 / 44.3 / 45.6 ms: −0.07% / −2.49%.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import statistics
import sys
import time

# Run from a checkout without installing: the repo root, as train.py sees it.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_collections  # noqa: E402

from vit_spectral.training import steps  # noqa: E402
from vit_spectral.models import ViT, build_model  # noqa: E402
from vit_spectral.training.optim import make_optimizer  # noqa: E402
from vit_spectral.training.train_state import TrainState  # noqa: E402

# Each variant's `config.model` fields.
VARIANTS = {
    "baseline": dict(attention=dict(name="dot_product")),
    "attn_scale": dict(attention=dict(name="attn_scale")),
    "feat_scale": dict(attention=dict(name="dot_product"), block=dict(feat_scale=True)),
}


def build_step(args, variant: dict, batch):
  """Returns (jitted train step, initial state) for one variant."""
  model = build_model(dict(patch_size=args.patch, hidden_size=args.width, depth=args.depth,
                           num_heads=args.heads, mlp_dim=4 * args.width, **variant),
                      num_classes=1000)
  return jitted_train_step(model, batch)


def jitted_train_step(model: ViT, batch):
  """(the library's train step for `model`, AdamW, jitted with the state
  donated; its initial TrainState)."""
  optim = ml_collections.ConfigDict(dict(name="adamw", learning_rate=1e-3, warmup_steps=1,
                                         weight_decay=0.05))
  tx, schedule = make_optimizer(optim, total_steps=10_000)
  params = jax.jit(model.init)(jax.random.key(0), batch["image"])["params"]
  state = TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))
  step = jax.jit(functools.partial(steps.train_step, model=model, tx=tx, schedule=schedule,
                                   base_rng=jax.random.key(1)), donate_argnums=0)
  return step, state


def compiled_cost(step, state, batch) -> dict[str, float]:
  """XLA's static cost of one compiled step: flops and bytes accessed (load-independent)."""
  cost = step.lower(state, batch).compile().cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return {k: float(cost.get(k, float("nan"))) for k in ("flops", "bytes accessed")}


def time_steps(step, state, batch, n: int):
  """Runs `n` steps; returns (seconds per step, new state)."""
  start = time.perf_counter()
  for _ in range(n):
    state, metrics = step(state, batch)
  jax.block_until_ready((state, metrics))
  return (time.perf_counter() - start) / n, state


def time_interleaved(step_fns: dict, states: dict, batch, *, rounds: int, steps: int):
  """Seconds per step of every configuration, `rounds` times, in a freshly
  shuffled order each round (so no configuration always runs first and a
  throttled CPU slows all alike). Updates `states` in place.

  Returns {name: [seconds per step, one per round]}.
  """
  times = {name: [] for name in step_fns}
  order = list(step_fns)
  for _ in range(rounds):
    random.shuffle(order)
    for name in order:
      seconds, states[name] = time_steps(step_fns[name], states[name], batch, steps)
      times[name].append(seconds)
  return times


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--width", type=int, default=192)
  parser.add_argument("--heads", type=int, default=3)
  parser.add_argument("--depth", type=int, default=2)
  parser.add_argument("--image", type=int, default=64)
  parser.add_argument("--patch", type=int, default=8)
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--rounds", type=int, default=9)
  parser.add_argument("--steps", type=int, default=4, help="steps per variant per round")
  args = parser.parse_args()

  key = jax.random.key(2)
  batch = {"image": jax.random.normal(key, (args.batch, args.image, args.image, 3)),
           "label": jax.random.randint(key, (args.batch,), 0, 1000)}
  built = {name: build_step(args, variant, batch) for name, variant in VARIANTS.items()}
  costs = {name: compiled_cost(step, state, batch) for name, (step, state) in built.items()}
  states = {}
  for name, (step, state) in built.items():  # compile and warm up
    _, states[name] = time_steps(step, state, batch, 2)

  times = time_interleaved({name: step for name, (step, _) in built.items()}, states, batch,
                           rounds=args.rounds, steps=args.steps)

  tokens = (args.image // args.patch) ** 2 + 1
  print(f"backend={jax.default_backend()} devices={jax.device_count()} width={args.width} "
        f"heads={args.heads} depth={args.depth} tokens={tokens} batch={args.batch} "
        f"rounds={args.rounds} steps/round={args.steps}")
  base = times["baseline"]
  for name in VARIANTS:
    median = statistics.median(times[name])
    paired = statistics.median(t / b for t, b in zip(times[name], base))
    print(f"{name:11s} median {1e3 * median:8.2f} ms/step  "
          f"(min {1e3 * min(times[name]):.2f}, max {1e3 * max(times[name]):.2f})  "
          f"median paired time ratio vs baseline {paired:.4f}  "
          f"throughput change {100 * (1 / paired - 1):+.2f}%")
  for name in VARIANTS:
    print(f"{name:11s} XLA cost per step: " + ", ".join(
        f"{k} {v:.4g} ({100 * (v / costs['baseline'][k] - 1):+.2f}%)"
        for k, v in costs[name].items()))


if __name__ == "__main__":
  main()
