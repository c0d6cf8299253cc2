r"""Our ViT train step and inference against timm's, eager and torch.compile, on one GPU.

ViT-Ti/16, S/16 and B/16 at 224x224, batch 256, bfloat16 compute with float32
parameters, 1000 classes, one process. For each model the arms are:

  ours <variant>   the library's real train step (`training.steps.train_step`,
                   AdamW from `training.optim`, the state donated), jitted as
                   `benchmarks/throughput.build_step` jits it, for the
                   dot_product baseline and every variant of --variants
                   (throughput.SWEEP_VARIANTS: attn_scale, cosine (LipsFormer),
                   hopfield, feat_scale, eigen = value_output "minus"); the
                   encoder in the library's default mode. Inference: the
                   model's `apply(train=False)`, jitted.
  timm eager       `timm.create_model("vit_<size>_patch16_224", num_classes=1000)`,
                   float32 parameters under `torch.autocast(bfloat16)`; one
                   train step = forward, cross-entropy, backward,
                   `torch.optim.AdamW(fused=True)` step. Inference: eval mode
                   under `torch.inference_mode()`.
  timm compiled    the same module through `torch.compile` (mode "default"),
                   a separate model and optimizer (--no_compile skips it).

Every arm is built, compiled and warmed up first: ours, the dot_product
baseline alone, so that XLA's autotuner times its matmuls on an idle GPU,
then the variants (mostly the same matmuls, which XLA's in-process
autotuning results should then hold) compiling on --compile_threads threads
to fit the time budget; then timm's arms, one by one. Then --rounds
rounds each run --steps steps of every arm, in a freshly shuffled order per
round. Reported per arm: the median step time over rounds, img/s, MFU (the
model FLOPs of `throughput.matmul_flops_per_image`: the jaxpr's matmuls,
counted once, no remat; timm's arms use our baseline's count, the same
architecture; the peak from `throughput.PEAKS`), throughput against timm eager
and timm compiled (median over rounds of the paired ratio timm step time /
arm step time), each variant's step time over our baseline (paired likewise),
and memory per arm: ours from the compiled executable's `memory_analysis()`
(argument + output + temp - alias; `peak_bytes_in_use` of the device is the
whole process's and is reported once per model), timm's from
`torch.cuda.max_memory_allocated` over one step, reset per arm, less what was
allocated before the arm was built.

Nothing on this path imports TensorFlow (checked after the imports and after
each model's arms are built: a lent GPU machine has none, and it would take
GPU memory). XLA is told not to preallocate 75% of the GPU (torch shares it).

On a lent GPU machine (its image has jax, flax, optax, orbax, chex, torch and
timm, but no TensorFlow, clu or ml_collections): here, once, fetch the two
pure-Python wheels at the versions constraints.txt pins (.whl/ is git-ignored):

  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform any -d .whl \
      $(grep -E '^(clu|ml-collections)==' constraints.txt)

then run, there, with .whl carried and $OUT the folder that comes back
(JSON, markdown table and log; benchmarks/results without $OUT):

  bash benchmarks/run_vs_timm_gpu.sh                  # Ti, S, B (meant to fit 8 min)
  bash benchmarks/run_vs_timm_gpu.sh --models=S --variants=dot_product,hopfield

Anywhere with jax, torch and timm (a CPU smoke run at tiny shapes):

  PYTHONPATH=. /work/torchenv/bin/python benchmarks/vs_timm_gpu.py --models=Ti \
      --image=32 --patch=8 --depth=2 --batch=8 --dtype=float32 --rounds=2 --steps=2 \
      --out=/tmp/vs_timm_gpu_smoke.json

Results: --out (default benchmarks/results/vs_timm_gpu.json) and the markdown
table beside it (.md), rewritten after each model, so a run cut short keeps
the models it finished.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import functools
import gc
import importlib.metadata
import json
import os
import statistics
import sys
import time
from typing import Any, Callable, Sequence

# Before jax starts its GPU client: torch allocates on the same GPU.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from benchmarks import throughput  # noqa: E402
from benchmarks.vs_timm import shuffled_rounds  # noqa: E402
from vit_spectral.planning import jaxpr_costs  # noqa: E402

# --models key -> (our registered name, timm's model name).
MODELS = {"Ti": ("Ti/16", "vit_tiny_patch16_224"), "S": ("S/16", "vit_small_patch16_224"),
          "B": ("B/16", "vit_base_patch16_224")}
BASELINE = "dot_product"
# The variants of throughput.SWEEP_VARIANTS timed here by default (quadratic is
# the one left out: no Q/K projections, not a drop-in for timm's block).
VARIANTS = (BASELINE, "attn_scale", "cosine", "hopfield", "feat_scale", "eigen")
TASKS = ("train", "infer")
OURS = "ours "           # + the variant: an arm's name
TIMM_EAGER, TIMM_COMPILED = "timm eager", "timm compiled"
LEARNING_RATE, WEIGHT_DECAY = 1e-3, 0.05     # timm's AdamW, as our OptimSettings' defaults
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "vs_timm_gpu.json")


def check_no_tensorflow(where: str) -> None:
  """SystemExit with one line if anything imported TensorFlow by `where` (a
  None entry in sys.modules is a blocked import, not an import)."""
  if sys.modules.get("tensorflow") is not None:
    raise SystemExit(f"error: tensorflow was imported ({where}); nothing on "
                     "benchmarks/vs_timm_gpu.py's path may import it (a lent GPU machine "
                     "has none, and it would take GPU memory)")


# ---------------------------------------------------------------------------
# Arms, rounds and ratios (no torch: tested with fakes).
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Arm:
  """One thing timed.

  Attributes:
    task: "train" (one optimizer step) or "infer" (one forward pass).
    name: "ours <variant>", TIMM_EAGER or TIMM_COMPILED.
    run: `run(n)` does n steps and returns when the device has finished them.
    setup_s: build, compile and warm-up, wall seconds.
    num_params: the model's parameter count.
    flops_per_image: model FLOPs of one step per image (None: not counted).
    memory_bytes: the arm's own device memory (None: not measured, e.g. CPU torch).
    memory_source: how memory_bytes was measured.
  """
  task: str
  name: str
  run: Callable[[int], None]
  setup_s: float
  num_params: int
  flops_per_image: float | None = None
  memory_bytes: int | None = None
  memory_source: str = ""

  @property
  def key(self) -> str:
    return f"{self.task}/{self.name}"


def time_rounds(arms: Sequence[Arm], rounds: int, steps: int, seed: int = 0,
                clock: Callable[[], float] = time.perf_counter,
                log: Callable[[str], None] = print) -> dict[str, list[float]]:
  """Seconds per step of every arm (by `Arm.key`) in each of `rounds` rounds:
  each round runs `steps` steps of every arm, in a freshly shuffled order."""
  by_key = {arm.key: arm for arm in arms}
  times: dict[str, list[float]] = {key: [] for key in by_key}
  for i, order in enumerate(shuffled_rounds(list(by_key), rounds, seed)):
    for key in order:
      start = clock()
      by_key[key].run(steps)
      times[key].append((clock() - start) / steps)
    log(f"  round {i + 1}/{rounds}: " + ", ".join(
        f"{key} {1e3 * times[key][-1]:.1f}" for key in by_key) + " ms")
  return times


def median_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float:
  """Median over rounds of numerators[r] / denominators[r] (paired rounds)."""
  return statistics.median(n / d for n, d in zip(numerators, denominators, strict=True))


def summarise(arms: Sequence[Arm], times: dict[str, list[float]], batch: int,
              peak_tflops: float | None) -> list[dict[str, Any]]:
  """One row per arm: step time, img/s, MFU, throughput against timm's arms
  of the same task and step time against our baseline of the same task."""
  rows = []
  for arm in arms:
    series = times[arm.key]
    step_s = statistics.median(series)
    against = {name: times.get(f"{arm.task}/{name}")
               for name in (TIMM_EAGER, TIMM_COMPILED, OURS + BASELINE)}
    base = against[OURS + BASELINE]
    rows.append(dict(
        task=arm.task, arm=arm.name, setup_s=arm.setup_s, num_params=arm.num_params,
        step_ms=1e3 * step_s, step_ms_min=1e3 * min(series), step_ms_max=1e3 * max(series),
        images_per_s=batch / step_s, flops_per_image=arm.flops_per_image,
        mfu=None if arm.flops_per_image is None else
        throughput.mfu(arm.flops_per_image, batch / step_s, 1, peak_tflops),
        throughput_vs_timm_eager=None if against[TIMM_EAGER] is None else
        median_ratio(against[TIMM_EAGER], series),
        throughput_vs_timm_compiled=None if against[TIMM_COMPILED] is None else
        median_ratio(against[TIMM_COMPILED], series),
        step_time_vs_dot_product=median_ratio(series, base)
        if arm.name.startswith(OURS) and base is not None else None,
        memory_bytes=arm.memory_bytes, memory_source=arm.memory_source,
        times_s=list(series)))
  return rows


COLUMNS = ("model", "task", "arm", "setup s", "step ms", "min–max", "img/s", "MFU",
           "× timm compiled", "× timm eager", "step / dot_product", "GiB", "params")


def _cell(value, spec: str, scale: float = 1.0, suffix: str = "") -> str:
  return "" if value is None else format(value * scale, spec) + suffix


def table_line(model: str, row: dict[str, Any]) -> str:
  cells = [model, row["task"], row["arm"], f"{row['setup_s']:.1f}", f"{row['step_ms']:.2f}",
           f"{row['step_ms_min']:.2f}–{row['step_ms_max']:.2f}", f"{row['images_per_s']:.1f}",
           _cell(row["mfu"], ".1f", 100, "%"), _cell(row["throughput_vs_timm_compiled"], ".3f"),
           _cell(row["throughput_vs_timm_eager"], ".3f"),
           _cell(row["step_time_vs_dot_product"], ".3f"),
           _cell(row["memory_bytes"], ".2f", 2.0 ** -30), f"{row['num_params']:,}"]
  return "| " + " | ".join(cells) + " |"


def markdown(result: dict[str, Any]) -> str:
  """The results as a markdown table, with a heading saying what ran where."""
  machine, settings = result["machine"], result["settings"]
  lines = [f"# Ours against timm: {machine['card']}, {machine['date']}", "",
           f"batch {settings['batch']}, {settings['image']}x{settings['image']}, "
           f"{settings['dtype']} compute, float32 parameters, AdamW; {settings['rounds']} "
           f"rounds x {settings['steps']} steps per arm, shuffled; peak "
           f"{result.get('peak_tflops') or 'unknown'} TFLOP/s; "
           + ", ".join(f"{k} {v}" for k, v in result["versions"].items()) + ".", "",
           "| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
  for model, entry in result["models"].items():
    lines += [table_line(model, row) for row in entry["rows"]]
  lines += ["", "step ms: median over rounds. × timm compiled / eager: throughput against "
            "timm's arm of the same task (median over rounds of the paired ratio of step "
            "times; > 1: faster than timm). step / dot_product: the variant's step time over "
            "our baseline's, paired likewise. MFU: the jaxpr's matmul FLOPs (timm's arms: our "
            "baseline's count) against the peak above (throughput.PEAKS or --peak_tflops). "
            "GiB: ours, the compiled executable's argument + output + temp - alias; timm's, "
            "torch.cuda.max_memory_allocated over one step less what was allocated before "
            "the arm.", ""]
  return "\n".join(lines)


# ---------------------------------------------------------------------------
# Our arms.
# ---------------------------------------------------------------------------


def our_spec(model: str, variant: str, args) -> throughput.Spec:
  """The throughput.Spec of our arm: a registered ViT, shape overrides from
  --patch/--depth, the variant's fields; the encoder mode left to the library."""
  return throughput.Spec(model=MODELS[model][0], image=args.image, patch=args.patch,
                         depth=args.depth, dtype=args.dtype, batch=args.batch,
                         **throughput.SWEEP_VARIANTS[variant])


def _infer(model, params, images):
  return model.apply({"params": params}, images, train=False)


def forward_flops_per_image(spec: throughput.Spec) -> float:
  """Model FLOPs of one forward pass per image (the jaxpr's matmuls of
  `throughput.counted_spec(spec)`'s model in eval mode)."""
  model = throughput.build_model(throughput.counted_spec(spec).model_config(),
                                 throughput.NUM_CLASSES)
  images = jax.ShapeDtypeStruct((spec.batch, spec.image, spec.image, 3), jnp.float32)
  params = jax.eval_shape(lambda x: model.init({"params": jax.random.key(0)}, x,
                                              train=False)["params"], images)
  jaxpr = jaxpr_costs.trace(functools.partial(_infer, model), params, images)
  return jaxpr_costs.matmul_flops(jaxpr) / spec.batch


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
  start = time.perf_counter()
  return fn(), time.perf_counter() - start


def prepare_ours(spec: throughput.Spec, variant: str, task: str, mesh, warmup: int,
                 pool: concurrent.futures.Executor | None) -> Callable[[], Arm]:
  """Builds, counts and lowers our arm of `variant` now and compiles it in
  `pool` (here when None); the callable returned waits for the compile,
  initialises the state, warms up and gives the Arm."""
  start = time.perf_counter()
  model, step, init, state_spec, batch_spec = throughput.build_step(spec, mesh)
  if task == "train":
    lowered = step.lower(state_spec, batch_spec)
    flops = throughput.matmul_flops_per_image(spec, mesh)
  else:
    lowered = jax.jit(functools.partial(_infer, model)).lower(state_spec.params,
                                                              batch_spec["image"])
    flops = forward_flops_per_image(spec)
  compiling = pool.submit(_timed, lowered.compile) if pool else None
  compiled_now = None if pool else _timed(lowered.compile)
  prepare_s = time.perf_counter() - start

  def finish() -> Arm:
    compiled, compile_s = compiling.result() if compiling else compiled_now
    start = time.perf_counter()
    state = init(jax.random.key(0))
    num_params = int(sum(x.size for x in jax.tree_util.tree_leaves(state.params)))
    batch = throughput.synthetic_batch(batch_spec)
    # Inference keeps the parameters only; a train step replaces the (donated) state.
    holder = {"state": state} if task == "train" else {"params": state.params}
    del state

    def run(n: int) -> None:
      if task == "infer":
        for _ in range(n):
          logits = compiled(holder["params"], batch["image"])
        jax.block_until_ready(logits)
        return
      state = holder["state"]
      for _ in range(n):
        state, metrics = compiled(state, batch)
      jax.block_until_ready((state, metrics))
      holder["state"] = state

    run(max(warmup, 1))
    memory = throughput.memory_per_device(compiled)
    return Arm(task, OURS + variant, run,
               setup_s=prepare_s + compile_s + time.perf_counter() - start,
               num_params=num_params,
               flops_per_image=flops, memory_bytes=None if memory is None else memory["total"],
               memory_source="memory_analysis: argument + output + temp - alias")

  return finish


def our_arms(model: str, variants: Sequence[str], tasks: Sequence[str], args) -> list[Arm]:
  """Our arms of `model`: the baseline compiled alone first (XLA autotunes its
  matmuls on an idle device), then the variants on --compile_threads threads."""
  mesh = throughput.sharding.make_mesh(throughput.sharding.MeshSettings(), jax.devices()[:1])
  arms = [prepare_ours(our_spec(model, BASELINE, args), BASELINE, task, mesh, args.warmup,
                       None)() for task in tasks]
  others = [v for v in variants if v != BASELINE]
  threads = max(1, args.compile_threads)
  with concurrent.futures.ThreadPoolExecutor(threads) as pool:
    pending = [prepare_ours(our_spec(model, v, args), v, task, mesh, args.warmup,
                            pool if threads > 1 else None)
               for v in others for task in tasks]
    arms += [finish() for finish in pending]
  return arms


# ---------------------------------------------------------------------------
# timm's arms.
# ---------------------------------------------------------------------------


def import_torch():
  """(torch, timm), or SystemExit with one line when either is missing."""
  try:
    import timm
    import torch
  except ImportError as error:
    raise SystemExit(f"error: benchmarks/vs_timm_gpu.py needs torch and timm ({error}); run "
                     "it with a Python that has them (module docstring)") from None
  return torch, timm


def timm_arm(torch, timm, model: str, task: str, compiled: bool, args,
             flops_per_image: float | None) -> Arm:
  """timm's ViT of `model` in `task`, eager or through torch.compile."""
  device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
  cuda = device.type == "cuda"
  sync = torch.cuda.synchronize if cuda else (lambda: None)
  if cuda:
    sync()
    before = torch.cuda.memory_allocated()
  start = time.perf_counter()
  torch.manual_seed(0)
  shape = {k: v for k, v in dict(img_size=args.image, patch_size=args.patch,
                                 depth=args.depth).items() if v is not None}
  net = timm.create_model(MODELS[model][1], num_classes=throughput.NUM_CLASSES, **shape)
  net = net.to(device).train(task == "train")
  forward = torch.compile(net) if compiled else net
  images = torch.randn(args.batch, 3, args.image, args.image, device=device)
  labels = torch.randint(0, throughput.NUM_CLASSES, (args.batch,), device=device)
  autocast = functools.partial(torch.autocast, device.type, dtype=torch.bfloat16,
                               enabled=args.dtype == "bfloat16")
  if task == "train":
    optimizer = torch.optim.AdamW(net.parameters(), lr=LEARNING_RATE,
                                  weight_decay=WEIGHT_DECAY, fused=True)
    loss_fn = torch.nn.CrossEntropyLoss()

    def run(n: int) -> None:
      for _ in range(n):
        optimizer.zero_grad(set_to_none=True)
        with autocast():
          loss = loss_fn(forward(images), labels)
        loss.backward()
        optimizer.step()
      sync()
  else:
    def run(n: int) -> None:
      with torch.inference_mode(), autocast():
        for _ in range(n):
          forward(images)
      sync()

  # torch.compile compiles the forward on the first call, the backward on the first backward.
  run(max(args.warmup, 2 if compiled else 1))
  setup_s = time.perf_counter() - start
  memory = None
  if cuda:
    torch.cuda.reset_peak_memory_stats()
    run(1)
    memory = torch.cuda.max_memory_allocated() - before
  return Arm(task, TIMM_COMPILED if compiled else TIMM_EAGER, run, setup_s,
             num_params=sum(p.numel() for p in net.parameters()),
             flops_per_image=flops_per_image, memory_bytes=memory,
             memory_source="torch.cuda.max_memory_allocated over one step, less what "
             "was allocated before the arm" if cuda else "")


def timm_arms(torch, timm, model: str, tasks: Sequence[str], args,
              flops: dict[str, float | None]) -> list[Arm]:
  """Eager and (unless --no_compile) compiled arms; a torch.compile that
  fails is reported and left out, never fatal."""
  arms = []
  for compiled in (False,) if args.no_compile else (False, True):
    for task in tasks:
      try:
        arms.append(timm_arm(torch, timm, model, task, compiled, args, flops.get(task)))
      except Exception as error:  # noqa: BLE001  (torch.compile's many failure types)
        if not compiled:
          raise
        print(f"  torch.compile of {model} {task} failed, left out: {type(error).__name__}: "
              f"{(str(error).splitlines() or [''])[0]}", flush=True)
  return arms


# ---------------------------------------------------------------------------
# Where it ran.
# ---------------------------------------------------------------------------


def _version(distribution: str) -> str | None:
  try:
    return importlib.metadata.version(distribution)
  except importlib.metadata.PackageNotFoundError:
    return None


def _jax_cuda() -> dict[str, Any]:
  """CUDA, cuDNN and cuBLAS versions jax's plugin reports (empty off a GPU)."""
  try:
    from jax._src.lib import cuda_versions  # jax's own version report; private
  except ImportError:
    return {}
  found = {}
  for name in ("cuda_runtime", "cuda_driver", "cudnn", "cublas"):
    getter = getattr(cuda_versions, f"{name}_get_version", None)
    try:
      found[name] = getter() if getter else None
    except Exception:  # noqa: BLE001  (no GPU, or no such library)
      found[name] = None
  return {k: v for k, v in found.items() if v is not None}


def environment(torch, timm) -> tuple[dict[str, Any], dict[str, Any]]:
  """(machine, versions): the card as both frameworks name it, and versions."""
  cuda = torch.cuda.is_available()
  machine = dict(throughput.machine(),
                 card=torch.cuda.get_device_name() if cuda else jax.devices()[0].device_kind,
                 torch_device="cuda" if cuda else "cpu",
                 torch_float32_matmul_precision=torch.get_float32_matmul_precision())
  versions = {name: _version(name) for name in ("jax", "jaxlib", "flax", "optax")}
  versions.update({p: _version(p) for p in ("jax-cuda12-plugin", "jax-cuda13-plugin")
                   if _version(p)})
  versions.update(torch=torch.__version__, timm=timm.__version__,
                  torch_cuda=torch.version.cuda,
                  torch_cudnn=torch.backends.cudnn.version() if cuda else None)
  versions.update({f"jax_{k}": v for k, v in _jax_cuda().items()})
  return machine, versions


# ---------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------


def _names(text: str) -> list[str]:
  return [n for n in text.replace(",", " ").split() if n]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--models", type=_names, default=list(MODELS),
                      help=f"comma-separated, of {list(MODELS)}")
  parser.add_argument("--variants", type=_names, default=list(VARIANTS),
                      help=f"ours, comma-separated, of {list(throughput.SWEEP_VARIANTS)} "
                      f"(default {','.join(VARIANTS)}; {BASELINE} is always timed)")
  parser.add_argument("--tasks", type=_names, default=list(TASKS), help=f"of {list(TASKS)}")
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--image", type=int, default=224)
  parser.add_argument("--patch", type=int, help="override the patch size (smoke runs)")
  parser.add_argument("--depth", type=int, help="override the depth (smoke runs)")
  parser.add_argument("--dtype", default="bfloat16", help=f"one of {list(throughput.DTYPES)}")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--steps", type=int, default=5, help="steps per arm per round")
  parser.add_argument("--warmup", type=int, default=2, help="steps after building an arm")
  parser.add_argument("--compile_threads", type=int, default=4,
                      help="threads compiling our variants (1: one after another)")
  parser.add_argument("--no_compile", action="store_true", help="no torch.compile arms")
  parser.add_argument("--peak_tflops", type=float,
                      help="peak TFLOP/s of the device, for a kind not in throughput.PEAKS")
  parser.add_argument("--seed", type=int, default=0, help="of the rounds' shuffles")
  parser.add_argument("--out", default=RESULTS, help="JSON path; the .md table beside it")
  return parser.parse_args(argv)


def check_args(args) -> None:
  """ValueError (one line naming the flag and the choices) before anything runs."""
  for flag, given, valid in (("models", args.models, MODELS),
                             ("variants", args.variants, throughput.SWEEP_VARIANTS),
                             ("tasks", args.tasks, TASKS)):
    unknown = [n for n in given if n not in valid]
    if unknown or not given:
      raise ValueError(f"--{flag} has unknown names {unknown}; choose from {list(valid)}")
  if args.dtype not in throughput.DTYPES:
    raise ValueError(f"--dtype={args.dtype!r}; choose one of {list(throughput.DTYPES)}")
  for flag in ("batch", "image", "rounds", "steps"):
    if getattr(args, flag) < 1:
      raise ValueError(f"--{flag}={getattr(args, flag)} must be >= 1")


def write(result: dict[str, Any], out: str) -> str:
  """The JSON at `out` and the markdown table beside it; returns the .md path."""
  os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
  with open(out, "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1)
  table = os.path.splitext(out)[0] + ".md"
  with open(table, "w", encoding="utf-8") as f:
    f.write(markdown(result))
  return table


def main(argv: Sequence[str] | None = None) -> int:
  start = time.perf_counter()
  args = parse_args(argv)
  try:
    check_args(args)
  except ValueError as error:
    print(f"error: {error}", file=sys.stderr)
    return 2
  variants = [BASELINE] + [v for v in args.variants if v != BASELINE]
  torch, timm = import_torch()
  check_no_tensorflow("by the imports")
  if torch.cuda.is_available() != (jax.default_backend() == "gpu"):
    print(f"error: jax runs on {jax.default_backend()} but torch "
          f"{'has' if torch.cuda.is_available() else 'has no'} CUDA; both must use the GPU",
          file=sys.stderr)
    return 2
  # float32 matmuls as XLA runs them by default (TF32 on Ampere and Hopper).
  torch.set_float32_matmul_precision("high")
  machine, versions = environment(torch, timm)
  peak = args.peak_tflops if args.peak_tflops is not None else throughput.peak_tflops(
      jax.devices()[0].device_kind, args.dtype, jax.config.jax_default_matmul_precision)
  print(f"{machine['card']}: peak {peak} TFLOP/s ({args.dtype}); "
        + ", ".join(f"{k} {v}" for k, v in versions.items()), flush=True)
  result = dict(machine=machine, versions=versions, settings=vars(args),
                peak_tflops=peak, models={})
  for model in args.models:
    model_start = time.perf_counter()
    print(f"{model}: building our arms ({len(variants)} variants x {len(args.tasks)} tasks)",
          flush=True)
    arms = our_arms(model, variants, args.tasks, args)
    flops = {a.task: a.flops_per_image for a in arms if a.name == OURS + BASELINE}
    built_ours = time.perf_counter()
    print(f"{model}: building timm's arms ({built_ours - model_start:.0f} s so far)", flush=True)
    arms += timm_arms(torch, timm, model, args.tasks, args, flops)
    check_no_tensorflow(f"by building {model}'s arms")
    for arm in arms:
      print(f"  built {arm.key:32s} {arm.num_params:,} parameters, setup {arm.setup_s:.1f} s",
            flush=True)
    built = time.perf_counter()
    times = time_rounds(arms, args.rounds, args.steps, args.seed,
                        log=lambda line: print(line, flush=True))
    stats = jax.devices()[0].memory_stats() or {}
    result["models"][model] = dict(
        rows=summarise(arms, times, args.batch, peak),
        jax_process_peak_bytes=stats.get("peak_bytes_in_use"),
        torch_process_peak_bytes=torch.cuda.max_memory_allocated()
        if torch.cuda.is_available() else None,
        seconds=dict(ours=built_ours - model_start, timm=built - built_ours,
                     rounds=time.perf_counter() - built))
    result["elapsed_s"] = time.perf_counter() - start
    table = write(result, args.out)
    print(f"{model} done in {time.perf_counter() - model_start:.0f} s "
          f"(ours {built_ours - model_start:.0f}, timm {built - built_ours:.0f}, rounds "
          f"{time.perf_counter() - built:.0f}); elapsed {result['elapsed_s']:.0f} s", flush=True)
    del arms
    gc.collect()
    if torch.cuda.is_available():
      torch.cuda.empty_cache()
  print("\n" + markdown(result))
  print(f"wrote {args.out} and {table}; elapsed {time.perf_counter() - start:.0f} s")
  return 0


if __name__ == "__main__":
  sys.exit(main())
