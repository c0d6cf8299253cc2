r"""Train-step cost of paper 003's eigen value/output projections over the standard ones.

Issue 40: `value_output="minus"` (W_V = V_H, W_proj = Λ_H V_Hᵀ, V_H = Q of QR(Θ))
and the other eigen modes should cost at most 10 % over the standard step. This
script times the library's real train step (`steps.train_step`: forward,
backward, AdamW; `featscale_attnscale_overhead.jitted_train_step`) of one small
ViT with every mode asked for, interleaved round by round in a shuffled order in
one process, and reports per mode and dtype the median step time and the median
of the per-round ratios to the standard step of the same round. A mode named
MODE:reference is MODE with the kernels built as before issue 40
(`reference_kernels`: `jnp.linalg.qr`, `jnp.linalg.inv`, once per projection),
so before and after share the run and its load. It also records
what no other load can disturb: the solver calls (LAPACK custom calls) in the
compiled step (a scanned encoder's loop bodies appear once each) and XLA's
flops and bytes.

  python benchmarks/eigen_overhead.py                     # CPU, the defaults below
  python benchmarks/eigen_overhead.py --gpu_target=a3-highgpu-1g   # + GPU compile

The per-layer D×D factorisation (QR of Θ, or LU for V_H⁻¹) is ~0.1 % of the
step's FLOPs; what it costs is latency. On the CPU, jax's LAPACK kernels run on
scipy's OpenBLAS, whose worker threads (one per core by default) compete with
XLA's own thread pool and with other processes: on the shared 2-core machine a
192×192 QR took ~20x longer with them than on one thread (scipy alone, load 8:
124 ms against 7 ms). `--blas_threads=default,1` times each configuration both
ways, switching OpenBLAS's thread count in the process (threadpoolctl) between
runs, so that the two conditions share the load.

`--gpu_target` compiles DeiT-S (configs/imagenet_deit.py, batch 256, bf16) for
the named GPU host with jax's CUDA plugin (.ci/cuda; `--cuda_path` adds more)
in a child process per mode, as `train.py --dry_run --target` does, and records
the compiler's roofline estimate and the cuSOLVER/cuBLAS calls in the step. The
roofline has no term for a serial solver call's latency, so it hardly moves;
the calls are the evidence.

Results go to --out (JSON: the command, date, machine, versions, every time).

Measured 2026-11-27 on the shared 2-core CPU (other jobs running, load 4-8;
per-round ratios spread by ±10-30 %), jax 0.10.2, scipy's OpenBLAS 0.3.30.
Median of the per-round ratios eigen step / standard step (MODE:reference =
before issue 40), width 192, depth 4, 65 tokens, batch 64:

  the committed run (`--gpu_target=a3-highgpu-1g`, float32, 5 rounds, load 4-5):
    OpenBLAS default threads: minus 1.90 (reference 4.63), minus_ns 1.23 (1.42)
    OpenBLAS 1 thread:        minus 1.01 (reference 0.98), minus_ns 0.94 (0.98)
  `--rounds=4 --dtypes=float32,bfloat16`, all five --gpu_modes (17 min, load 6-8):
    default threads, float32:  minus 2.38 (5.65), minus_ns 1.24 (1.51)
    default threads, bfloat16: minus 2.01 (4.44), minus_ns 1.14 (1.40)
    1 thread, float32:         minus 1.04 (1.02), minus_ns 1.10 (1.04)
    1 thread, bfloat16:        minus 0.93 (0.99), minus_ns 0.96 (0.99)
  LAPACK calls per step (the scan's forward and backward bodies, one layer
  each): minus 1 geqrf + 2 trsm (reference 2 geqrf + 2 orgqr + 2 trsm),
  minus_ns 1 getrf + 2 trsm (reference 2 getrf + 6 trsm).

So on the CPU the eigen step costs what the standard one does once OpenBLAS
runs on one thread; with its default threads the remaining LAPACK calls still
cost 1.2-2.4x. DeiT-S on one H100 (a3-highgpu-1g, batch 256, bf16, 12 layers,
the GPU defaults of the day: unrolled scan, "dots" residuals), per step:
minus 12 geqrf + 24 trsm (reference 24 geqrf + 24 orgqr + 24 trsm), minus_ns
12 getrf + 24 trsm (reference 24 getrf + 72 trsm); the roofline estimate is
13.7 ms for every mode (x1.013 minus, x1.005 its reference: HBM bytes, where
XLA counts each added 384x384 matmul's cuBLAS workspace).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import json
import os
import platform
import random
import re
import shlex
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Run from a checkout without installing: the repo root, as train.py sees it.
sys.path.insert(0, ROOT)

DEFAULT_OUT = os.path.join(ROOT, "benchmarks", "results", "eigen_overhead.json")
STANDARD = "standard"
# Custom calls that are a solver or BLAS routine rather than XLA's own code.
_SOLVER_CALL = re.compile(
    r'custom_call_target="((?:lapack|cusolver|cu_lu)\w*|__cublas\$triangularSolve)"')


# A mode with this suffix builds the kernels as before issue 40, in the same run.
REFERENCE = ":reference"


@contextlib.contextmanager
def reference_kernels():
  """While tracing: the eigen kernels as the library built them before issue 40
  (`jnp.linalg.qr`'s Q and `jnp.linalg.inv` with their own gradient rules,
  built once per use: for the value and for the output projection)."""
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from vit_spectral.attention import base, value_output  # pylint: disable=import-outside-toplevel
  kernels = base.Attention._eigen_kernels  # pylint: disable=protected-access
  saved = value_output._householder_q, value_output._inverse  # pylint: disable=protected-access

  def per_use(self, width):
    self.__dict__.pop("_eigen_memo", None)
    return kernels(self, width)

  value_output._householder_q = lambda x: jnp.linalg.qr(x)[0]
  value_output._inverse = jnp.linalg.inv
  base.Attention._eigen_kernels = per_use
  try:
    yield
  finally:
    value_output._householder_q, value_output._inverse = saved
    base.Attention._eigen_kernels = kernels


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--width", type=int, default=192)
  parser.add_argument("--heads", type=int, default=3)
  parser.add_argument("--depth", type=int, default=4)
  parser.add_argument("--image", type=int, default=32)
  parser.add_argument("--patch", type=int, default=4)
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--dtypes", default="float32", help="compute dtypes, e.g. "
                      "float32,bfloat16 (bfloat16 doubles the run)")
  parser.add_argument("--modes", default="standard,minus,minus_ns,minus:reference,"
                      "minus_ns:reference",
                      help="value_output modes, 'standard' (the baseline, always run) and "
                      "the eigen ones; MODE:reference = MODE as built before issue 40")
  parser.add_argument("--blas_threads", default="default,1",
                      help="OpenBLAS thread counts to time ('default' = as the process starts)")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--steps", type=int, default=1, help="steps per configuration per round")
  parser.add_argument("--gpu_target", help="also compile DeiT-S for this GPU host, e.g. "
                      "a3-highgpu-1g (needs jax's CUDA plugin in .ci/cuda)")
  parser.add_argument("--gpu_modes", default="standard,minus,minus:reference",
                      help="modes compiled for --gpu_target, one compile of DeiT-S each")
  parser.add_argument("--cuda_path", default="", help="more PYTHONPATH for the GPU compile "
                      "(.ci/cuda holds the plugin and cuDNN)")
  parser.add_argument("--out", default=DEFAULT_OUT)
  parser.add_argument("--_gpu_child", help=argparse.SUPPRESS)
  return parser.parse_args(argv)


# --- CPU: the real train step, interleaved --------------------------------------

def build(args, mode: str, dtype: str, batch):
  """(jitted train step, its initial state) of the small ViT with `mode`."""
  from benchmarks.featscale_attnscale_overhead import jitted_train_step
  from vit_spectral.models import build_model
  attention = dict(name="dot_product")
  if mode != STANDARD:
    attention["value_output"] = mode.removesuffix(REFERENCE)
  model = build_model(dict(patch_size=args.patch, hidden_size=args.width, depth=args.depth,
                           num_heads=args.heads, mlp_dim=4 * args.width, dtype=dtype,
                           attention=attention), num_classes=10)
  return jitted_train_step(model, batch)


def compile_step(step, state, batch):
  """(the compiled step, which the timing calls too; XLA's flops and bytes of it
  (one scanned block counted once) and its solver custom calls by target)."""
  compiled = step.lower(state, batch).compile()
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  calls = collections.Counter(_SOLVER_CALL.findall(compiled.as_text()))
  return compiled, dict(flops=float(cost.get("flops", float("nan"))),
                        bytes_accessed=float(cost.get("bytes accessed", float("nan"))),
                        solver_calls=dict(sorted(calls.items())))


class BlasThreads:
  """Sets OpenBLAS's thread count in this process ('default' = the count it started with)."""

  def __init__(self):
    try:
      import threadpoolctl  # pylint: disable=import-outside-toplevel
    except ImportError:
      self.controller = None
      return
    # jaxlib calls the LAPACK of scipy's OpenBLAS (scipy.linalg.cython_lapack), a
    # library of its own beside numpy's: loaded first, so the controller sees it.
    import scipy.linalg.cython_lapack  # pylint: disable=import-outside-toplevel,unused-import
    self.controller = threadpoolctl.ThreadpoolController()
    self.default = {lib.filepath: lib.num_threads for lib in self.controller.lib_controllers
                    if lib.user_api == "blas"}

  def info(self) -> list[dict]:
    if self.controller is None:
      return []
    return [dict(library=os.path.basename(lib.filepath), version=lib.version,
                 num_threads=lib.num_threads, internal_api=lib.internal_api)
            for lib in self.controller.lib_controllers if lib.user_api == "blas"]

  def set(self, threads: str) -> None:
    if threads == "default":
      if self.controller is not None:
        for lib in self.controller.lib_controllers:
          if lib.filepath in self.default:
            lib.set_num_threads(self.default[lib.filepath])
      return
    if self.controller is None:
      raise SystemExit("--blas_threads other than 'default' needs threadpoolctl installed")
    self.controller.limit(limits=int(threads), user_api="blas")


def time_cpu(args) -> dict:
  import jax  # pylint: disable=import-outside-toplevel
  from benchmarks.featscale_attnscale_overhead import time_steps
  modes = [STANDARD] + [m for m in args.modes.split(",") if m and m != STANDARD]
  dtypes = [d for d in args.dtypes.split(",") if d]
  conditions = [c for c in args.blas_threads.split(",") if c]
  blas = BlasThreads()
  blas_info = blas.info()

  key = jax.random.key(2)
  batch = {"image": jax.random.normal(key, (args.batch, args.image, args.image, 3)),
           "label": jax.random.randint(key, (args.batch,), 0, 10)}
  steps, states, static = {}, {}, {}
  for dtype in dtypes:
    for mode in modes:
      with reference_kernels() if mode.endswith(REFERENCE) else contextlib.nullcontext():
        step, state = build(args, mode, dtype, batch)
        step, static[f"{dtype}/{mode}"] = compile_step(step, state, batch)
      _, state = time_steps(step, state, batch, 1)     # warm up (compiled above)
      steps[(dtype, mode)], states[(dtype, mode)] = step, state

  configs = [(d, m, c) for d in dtypes for m in modes for c in conditions]
  times = {cfg: [] for cfg in configs}
  for _ in range(args.rounds):
    order = list(configs)
    random.shuffle(order)
    for dtype, mode, threads in order:
      blas.set(threads)
      seconds, states[(dtype, mode)] = time_steps(steps[(dtype, mode)], states[(dtype, mode)],
                                                 batch, args.steps)
      times[(dtype, mode, threads)].append(seconds)
  blas.set("default")

  rows = []
  for dtype, mode, threads in configs:
    own, base = times[(dtype, mode, threads)], times[(dtype, STANDARD, threads)]
    rows.append(dict(dtype=dtype, mode=mode, blas_threads=threads,
                     step_ms_median=1e3 * statistics.median(own),
                     step_ms=[1e3 * t for t in own],
                     ratio_to_standard=statistics.median(t / b for t, b in zip(own, base))))
  return dict(rows=rows, static=static, blas=blas_info)


# --- GPU: the compiled DeiT-S step for a GPU host ---------------------------------

def gpu_child(args) -> None:
  """In the child (JAX_PLATFORMS=cpu, CUDA plugin on the path): compile DeiT-S with
  `--_gpu_child`'s mode for `--gpu_target`; prints one JSON line."""
  import importlib.util  # pylint: disable=import-outside-toplevel
  from vit_spectral.planning import dry_run, hlo_costs, target_dry_run
  spec = importlib.util.spec_from_file_location("imagenet_deit",
                                                os.path.join(ROOT, "configs", "imagenet_deit.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config()
  config.input.batch_size = 256
  mode = args._gpu_child
  if mode != STANDARD:
    config.model.attention.value_output = mode.removesuffix(REFERENCE)
  target = target_dry_run.parse_target(args.gpu_target)
  step = dry_run.plan(config, list(target.devices()))
  start = time.perf_counter()
  with reference_kernels() if mode.endswith(REFERENCE) else contextlib.nullcontext():
    traced = step.trace()
  compiled = traced.lower().compile(compiler_options=dict(target.compiler_options) or None)
  seconds = time.perf_counter() - start
  costs = hlo_costs.step_costs(compiled)
  flops = dry_run.matmul_flops(step, traced)
  line = target_dry_run.roofline(flops, costs.bytes_accessed, costs.collective_bytes, target)
  calls = collections.Counter(_SOLVER_CALL.findall(compiled.as_text()))
  print(json.dumps(dict(mode=args._gpu_child, compile_s=seconds, flops=flops,
                        bytes_accessed=costs.bytes_accessed,
                        estimated_step_ms=1e3 * line.seconds,
                        solver_calls=dict(sorted(calls.items())))))


def time_gpu_compiles(args) -> list[dict]:
  env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="")
  path = [os.path.join(ROOT, ".ci", "cuda")] + [p for p in args.cuda_path.split(":") if p]
  env["PYTHONPATH"] = ":".join(path + [env.get("PYTHONPATH", "")]).rstrip(":")
  rows = []
  for mode in args.gpu_modes.split(","):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), f"--_gpu_child={mode}",
                          f"--gpu_target={args.gpu_target}"], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    rows.append(json.loads(out.strip().splitlines()[-1]))
  base = next((r for r in rows if r["mode"] == STANDARD), None)
  for row in rows:
    if base:
      row["estimated_ratio_to_standard"] = row["estimated_step_ms"] / base["estimated_step_ms"]
  return rows


# --- Report -------------------------------------------------------------------

def machine(blas_info) -> dict:
  import jax  # pylint: disable=import-outside-toplevel
  import jaxlib  # pylint: disable=import-outside-toplevel
  import flax  # pylint: disable=import-outside-toplevel
  import numpy  # pylint: disable=import-outside-toplevel
  return dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              host=platform.node(), processor=platform.processor() or platform.machine(),
              cpu_count=os.cpu_count(), load_average=list(os.getloadavg()),
              backend=jax.default_backend(), device_kind=jax.devices()[0].device_kind,
              python=platform.python_version(), jax=jax.__version__,
              jaxlib=jaxlib.__version__, flax=flax.__version__, numpy=numpy.__version__,
              blas=blas_info, xla_flags=os.environ.get("XLA_FLAGS", ""))


def main(argv=None) -> None:
  args = parse_args(argv)
  if args._gpu_child:
    gpu_child(args)
    return
  start = time.perf_counter()
  cpu = time_cpu(args)
  gpu = time_gpu_compiles(args) if args.gpu_target else None
  result = dict(command=" ".join(["python", "benchmarks/eigen_overhead.py"]
                                 + [shlex.quote(a) for a in (argv or sys.argv[1:])]),
                machine=machine(cpu.pop("blas")),
                settings={k: os.path.relpath(v, ROOT) if k == "out" else v
                          for k, v in vars(args).items() if not k.startswith("_")},
                cpu=cpu, gpu_compile=gpu, wall_s=time.perf_counter() - start)
  os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
  with open(args.out, "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1)

  print(f"{result['machine']['backend']} ({result['machine']['cpu_count']} cores, load "
        f"{result['machine']['load_average'][0]:.1f}); width {args.width}, {args.heads} heads, "
        f"depth {args.depth}, {(args.image // args.patch) ** 2 + 1} tokens, batch {args.batch}, "
        f"{args.rounds} rounds x {args.steps} steps")
  print("| dtype | mode | BLAS threads | step ms (median) | step / standard (median of rounds) |")
  print("|---|---|---|---|---|")
  for row in cpu["rows"]:
    print(f"| {row['dtype']} | {row['mode']} | {row['blas_threads']} | "
          f"{row['step_ms_median']:.1f} | {row['ratio_to_standard']:.3f} |")
  for name, cost in cpu["static"].items():
    print(f"{name}: {cost['flops'] / 1e9:.2f} GFLOP, {cost['bytes_accessed'] / 1e9:.2f} GB, "
          f"solver calls {cost['solver_calls']}")
  for row in gpu or ():
    print(f"GPU {args.gpu_target} {row['mode']}: estimated {row['estimated_step_ms']:.1f} ms "
          f"(x{row.get('estimated_ratio_to_standard', float('nan')):.3f}), solver calls "
          f"{row['solver_calls']}")
  print(f"wrote {args.out} ({result['wall_s']:.0f} s)")


if __name__ == "__main__":
  main()
