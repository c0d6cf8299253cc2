r"""Our train step against timm's VisionTransformer on CPU PyTorch, one process.

What a researcher would otherwise pick: timm's `VisionTransformer` trained with
`torch.optim.AdamW` on CPU. Both at the same shape: 32x32 images in 4x4
patches (64 tokens + CLS), width 192, depth 12, 3 heads, MLP 768, 10 classes,
batch 128, float32, AdamW. Ours is the library's real train step
(`training.steps.train_step`, jitted as the trainer jits it:
`benchmarks/throughput.build_step`), for the dot_product baseline in both
encoder modes, with timm's exact (erf) GELU instead of our default tanh form,
and for the variants (AttnScale, FeatScale, cosine, Hopfield). Parameter
counts are printed for each and must agree (5,362,762 at the default shape).

Every configuration is built, compiled and warmed up first; then `--rounds`
rounds each run `--steps` steps of every configuration in a freshly shuffled
order, so a shared or throttled CPU slows all alike. Reported: the median
step time over rounds, images/s, the median over rounds of the paired ratio
ours/timm of throughput (timm step time / our step time in the same round),
and each variant's median paired step-time ratio to our dot_product baseline
in the same encoder mode (the overhead).

Threads: PyTorch runs with `torch.set_num_threads(--threads)` (2). XLA:CPU
has its own intra-op thread pool (Eigen), sized by XLA to the machine's
cores (2 here); jax has no per-process thread-count setting short of
`taskset`, so on a bigger machine pin the process (`taskset -c 0,1`) to
compare like with like. No XLA flag is set (none that changes numerics).
Measure on a quiet machine: under other load PyTorch's OpenMP threads lose
far more than XLA's pool (on the shared CPU, load 7-9, timm's step varied
13-22 s while ours in loop mode held 9.8-10.2 s), which flatters ours. On the
quiet CPU (2026-11-23, load < 0.2; docs/speed.md): timm 2811 ms, ours 3082 ms
(scan) and 3097 ms (loop) per step: 0.94x timm's throughput.

  PYTHONPATH=. /work/torchenv/bin/python benchmarks/vs_timm.py      # ~5-6 min on 2 quiet cores
  PYTHONPATH=. python benchmarks/vs_timm.py --rounds=3 --torch_compile
  PYTHONPATH=. python benchmarks/vs_timm.py --ours dot_product/scan dot_product/loop

Where XLA:CPU spends a step (jax.profiler trace of this shape at depth 2,
batch 128, encoder looped; 2026-11-23 on the shared 2-core CPU, so shares,
not times): dense matmuls (Q, K, V, out, MLP, their gradients) 57% of the op
time, the T x T score and value-mixing dots 8%, the attention's elementwise
work 10% (softmax, scaling, and the copies that move K and V from (B, T, H,
Dh) to (B, H, Dh, T) for the batched dots: XLA materialises those
transposes), other elementwise work 17% (the tanh GELU and its gradient about
6%; LayerNorm, whose broadcasts XLA:CPU emits as separate `wrapped_broadcast`
ops; the CLS concatenation; AdamW) and 8% in other YNNPACK fusions. So most
of the step is matmuls already handed to XLA's CPU GEMM (YNNPACK) and the rest
is memory-bound elementwise work; what is ours to change is the layout (one
fused QKV projection, head-major, would avoid the K/V transposes) and the
encoder mode (see below). Kernel by kernel against PyTorch
(`benchmarks/cpu_kernels_vs_torch.py`): the dense matmuls are level; XLA:CPU runs
the small batched attention dots on one core, 1.6-2.7x slower than PyTorch's.
Tried (each in its own process, alternated, Ti width, depth 4, batch 64;
noisy, load 4-9 on 2 cores): encoder_mode loop vs scan: loop's best step
0.93-1.10 s vs scan's 1.33-2.31 s, loop faster in every alternation; the cause
was the scan's zero-filled residual buffers, and the scan now keeps only the
matmul outputs on CPU (`model.encoder_residuals="dots"`, `models/vit.py`
`Encoder`), which put scan and loop level here (3082 vs 3097 ms at depth 12 on the
quiet CPU); `--xla_cpu_enable_concurrency_optimized_scheduler`:
no gain; `--xla_cpu_experimental_onednn_custom_call`: inconclusive, and a
different GEMM library changes rounding, so not set. The state is donated
(the compiled step aliases it: `memory_analysis().alias_size_in_bytes` > 0).

torch and timm are not dependencies of the library: run it with a Python
that has them (`pip install torch timm`); without them it stops with one line.
Results: benchmarks/results/vs_timm.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import statistics
import sys
import time
from typing import Any, Callable, Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SHAPE = dict(image=32, patch=4, width=192, depth=12, heads=3, mlp=768, num_classes=10)
# name -> throughput.Spec fields (on top of the shape): ours, per variant and mode.
OURS = {
    "dot_product/scan": dict(encoder_mode="scan"),
    "dot_product/loop": dict(encoder_mode="loop"),
    # timm's GELU (exact, erf); ours defaults to the tanh form (big_vision's).
    "dot_product+gelu_erf/scan": dict(mlp_activation="gelu_erf", encoder_mode="scan"),
    "attn_scale/scan": dict(attention="attn_scale", encoder_mode="scan"),
    "feat_scale/scan": dict(feat_scale=True, encoder_mode="scan"),
    "cosine/scan": dict(attention="cosine", encoder_mode="scan"),
    "hopfield/scan": dict(attention="hopfield", encoder_mode="scan"),
}
TIMM = "timm"
TIMM_COMPILED = "timm+torch.compile"
LEARNING_RATE, WEIGHT_DECAY = 1e-3, 0.05


def import_torch():
  """(torch, timm), or SystemExit with one line when either is missing."""
  try:
    import timm  # noqa: F401
    import torch
  except ImportError as error:
    raise SystemExit(f"error: benchmarks/vs_timm.py needs torch and timm ({error}); run it "
                     "with a Python that has them, e.g. PYTHONPATH=. /work/torchenv/bin/python "
                     "benchmarks/vs_timm.py (pip install torch timm)") from None
  import timm
  return torch, timm


# ---------------------------------------------------------------------------
# Pure helpers (no torch, no jax): tested in tests/test_benchmarks_throughput.py.
# ---------------------------------------------------------------------------


def paired_ratios(times: dict[str, list[float]], base: str) -> dict[str, float]:
  """Median over rounds of times[name][r] / times[base][r], for every name."""
  return {name: statistics.median(t / b for t, b in zip(series, times[base]))
          for name, series in times.items()}


def shuffled_rounds(names: Sequence[str], rounds: int, seed: int = 0) -> list[list[str]]:
  """`rounds` orders of `names`, each freshly shuffled (seeded: reproducible)."""
  rng = random.Random(seed)
  orders = []
  for _ in range(rounds):
    order = list(names)
    rng.shuffle(order)
    orders.append(order)
  return orders


def overhead_base(name: str) -> str:
  """The baseline a variant of ours is compared with: dot_product in its mode."""
  return "dot_product/" + name.split("/")[1]


# ---------------------------------------------------------------------------
# The two steps.
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Runner:
  """One configuration: `run(n)` does n train steps and returns when done."""
  name: str
  run: Callable[[int], None]
  num_params: int
  setup_s: float


def ours(name: str, fields: dict[str, Any], batch_size: int) -> Runner:
  import jax
  from benchmarks import throughput

  spec = throughput.Spec(model="Ti/4", image=SHAPE["image"], patch=SHAPE["patch"],
                         width=SHAPE["width"], depth=SHAPE["depth"], heads=SHAPE["heads"],
                         mlp=SHAPE["mlp"], dtype="float32", batch=batch_size, **fields)
  spec.check()
  start = time.perf_counter()
  mesh = throughput.sharding.make_mesh(throughput.sharding.MeshSettings(), jax.devices()[:1])
  _, step, init, state_spec, batch_spec = throughput.build_step(spec, mesh, SHAPE["num_classes"])
  compiled = step.lower(state_spec, batch_spec).compile()
  holder = {"state": init(jax.random.key(0))}
  batch = throughput.synthetic_batch(batch_spec, SHAPE["num_classes"])
  num_params = sum(x.size for x in jax.tree_util.tree_leaves(holder["state"].params))

  def run(n: int) -> None:
    state = holder["state"]
    for _ in range(n):
      state, metrics = compiled(state, batch)
    jax.block_until_ready((state, metrics))
    holder["state"] = state

  run(1)  # warm-up
  return Runner(name, run, int(num_params), time.perf_counter() - start)


def timm_runner(name: str, torch, timm, batch_size: int, compiled: bool) -> Runner:
  from timm.models.vision_transformer import VisionTransformer

  start = time.perf_counter()
  torch.manual_seed(0)
  model = VisionTransformer(
      img_size=SHAPE["image"], patch_size=SHAPE["patch"], in_chans=3,
      num_classes=SHAPE["num_classes"], embed_dim=SHAPE["width"], depth=SHAPE["depth"],
      num_heads=SHAPE["heads"], mlp_ratio=SHAPE["mlp"] / SHAPE["width"], qkv_bias=True)
  model.train()
  optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY)
  images = torch.randn(batch_size, 3, SHAPE["image"], SHAPE["image"])
  labels = torch.randint(0, SHAPE["num_classes"], (batch_size,))
  forward = torch.compile(model) if compiled else model
  loss_fn = torch.nn.CrossEntropyLoss()

  def run(n: int) -> None:
    for _ in range(n):
      optimizer.zero_grad(set_to_none=True)
      loss = loss_fn(forward(images), labels)
      loss.backward()
      optimizer.step()

  run(2 if compiled else 1)  # warm-up (torch.compile compiles forward, then backward)
  num_params = sum(p.numel() for p in model.parameters())
  return Runner(name, run, int(num_params), time.perf_counter() - start)


# ---------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch", type=int, default=128)
  parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--steps", type=int, default=1, help="steps per configuration per round")
  parser.add_argument("--ours", nargs="*", default=list(OURS), help=f"subset of {list(OURS)}")
  parser.add_argument("--torch_compile", action="store_true",
                      help="also time timm under torch.compile (reported, not the baseline)")
  parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "results", "vs_timm.json"))
  return parser.parse_args(argv)


def main(argv=None) -> int:
  args = parse_args(argv)
  unknown = [n for n in args.ours if n not in OURS]
  if unknown:
    print(f"error: --ours has unknown names {unknown}; choose from {list(OURS)}", file=sys.stderr)
    return 2
  torch, timm = import_torch()
  torch.set_num_threads(args.threads)
  import jax
  from benchmarks import throughput

  print(f"shape {SHAPE}, batch {args.batch}, float32, AdamW; torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), timm {timm.__version__}, jax {jax.__version__} "
        f"({jax.default_backend()}, {os.cpu_count()} cores)", flush=True)
  runners = [timm_runner(TIMM, torch, timm, args.batch, compiled=False)]
  if args.torch_compile:
    try:
      runners.append(timm_runner(TIMM_COMPILED, torch, timm, args.batch, compiled=True))
    except Exception as error:  # reported, never the baseline
      print(f"torch.compile did not work here: {type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}", flush=True)
  runners += [ours(name, OURS[name], args.batch) for name in args.ours]
  params = {r.name: r.num_params for r in runners}
  for r in runners:
    extra = r.num_params - params[TIMM]
    print(f"  built {r.name:26s} {r.num_params:,} parameters"
          + (f" ({extra:+,} the variant adds)" if extra else "")
          + f", setup {r.setup_s:.1f} s", flush=True)
  # The plain model must be timm's, parameter for parameter.
  differ = {n: c for n, c in params.items() if n.startswith("dot_product") and c != params[TIMM]}
  if differ:
    print(f"warning: parameter counts differ from timm's {params[TIMM]:,}: {differ}", flush=True)

  by_name = {r.name: r for r in runners}
  times: dict[str, list[float]] = {r.name: [] for r in runners}
  for i, order in enumerate(shuffled_rounds(list(by_name), args.rounds)):
    for name in order:
      start = time.perf_counter()
      by_name[name].run(args.steps)
      times[name].append((time.perf_counter() - start) / args.steps)
    print(f"  round {i + 1}/{args.rounds}: " + ", ".join(
        f"{n} {1e3 * times[n][-1]:.0f}" for n in by_name) + " ms", flush=True)

  vs_timm = {n: 1 / r for n, r in paired_ratios(times, TIMM).items()}
  ours_names = [n for n in by_name if n in OURS]
  overhead = {n: paired_ratios({n: times[n], "base": times[overhead_base(n)]}, "base")[n]
              for n in ours_names if overhead_base(n) in times}
  rows = []
  for name in by_name:
    median = statistics.median(times[name])
    rows.append(dict(name=name, params=params[name], step_ms=1e3 * median,
                     step_ms_min=1e3 * min(times[name]), step_ms_max=1e3 * max(times[name]),
                     images_per_s=args.batch / median, throughput_vs_timm=vs_timm[name],
                     step_time_vs_dot_product=overhead.get(name),
                     setup_s=by_name[name].setup_s))
  print("\n| configuration | params | step ms (median) | min–max | img/s | throughput / timm "
        "| step time / dot_product |\n|---|---|---|---|---|---|---|")
  for row in rows:
    over = row["step_time_vs_dot_product"]
    print(f"| {row['name']} | {row['params']:,} | {row['step_ms']:.0f} | "
          f"{row['step_ms_min']:.0f}–{row['step_ms_max']:.0f} | {row['images_per_s']:.1f} | "
          f"{row['throughput_vs_timm']:.3f} | {'' if over is None else f'{over:.3f}'} |")
  result = dict(machine=throughput.machine(), torch=torch.__version__, timm=timm.__version__,
                torch_threads=torch.get_num_threads(), shape=SHAPE, batch=args.batch,
                rounds=args.rounds, steps_per_round=args.steps, rows=rows,
                times_s={n: t for n, t in times.items()})
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  with open(args.out, "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1)
  print(f"\nthroughput / timm: median over rounds of the paired ratio (timm step time / "
        f"ours in the same round); step time / dot_product: the same against our baseline "
        f"in the same encoder mode.\nwrote {args.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
