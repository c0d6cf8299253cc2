r"""K seeds as one program (`config.num_seeds=K`) against K runs one after another.

  python benchmarks/num_seeds_timing.py [--config=digits_vit] [--steps=300] [--seeds=4]
      [--targets=a3-highgpu-1g] [--cuda_folder=.ci/cuda]

Here (CPU): `python train.py` for seeds 0 ... K-1 one after another, then once
with `--config.num_seeds=K`, each in a fresh workdir, each a whole command
(start-up, data, compile, `--steps` steps, one evaluation at the end): wall
seconds per run and in all, and each run's final eval accuracy (the K-seed
run's list must equal the separate runs'). Then the train step alone, in this
process: the median of 20 steady steps of the one-seed and the K-seed program
(`trainer.set_up`, random batches), the part of the difference that is not
start-up.

On a GPU, without one: `train.py --dry_run --target=...` for one seed and for
K (`--gpu_configs`, default `--config`), compiled by the GPU compiler (jax's CUDA plugin, in `--cuda_folder` as
.ci/check_target_dry_runs.py installs it): the estimated step time (a
roofline: the compiler's estimate, not a measurement) and memory per GPU.

Writes benchmarks/results/num_seeds_timing.json with the command, the
machine's load before each run and the date.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
RESULTS = os.path.join(ROOT, "benchmarks", "results", "num_seeds_timing.json")


def train_command(config: str, steps: int, workdir: str, *flags: str) -> list[str]:
  every = f"{steps}"
  return [sys.executable, "train.py", f"--config={config}", f"--workdir={workdir}",
          f"--config.total_steps={steps}", f"--config.eval_every={every}",
          f"--config.checkpoint_every={every}", "--config.log_every=100", *flags]


def timed_run(config: str, steps: int, *flags: str) -> dict:
  """One whole `python train.py` in a fresh workdir: wall seconds, final metrics."""
  with tempfile.TemporaryDirectory(prefix="num_seeds_timing_") as workdir:
    load = os.getloadavg()[0]
    start = time.perf_counter()
    subprocess.run(train_command(config, steps, workdir, *flags), cwd=ROOT, check=True,
                   capture_output=True, text=True)
    seconds = time.perf_counter() - start
    with open(os.path.join(workdir, "final_metrics.json"), encoding="utf-8") as f:
      metrics = json.load(f)
  print(f"  {' '.join(flags) or '(one seed)'}: {seconds:.1f} s, eval_accuracy "
        f"{metrics['eval_accuracy']}", flush=True)
  return {"flags": list(flags), "wall_seconds": round(seconds, 2), "load_1min": load,
          "eval_accuracy": metrics["eval_accuracy"]}


def step_seconds(config_name: str, num_seeds: int, repeats: int = 20) -> float:
  """Median seconds of one steady train step of `config_name` with `num_seeds`."""
  import jax  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel
  import importlib  # pylint: disable=import-outside-toplevel
  from vit_spectral.training import trainer  # pylint: disable=import-outside-toplevel
  config = importlib.import_module(f"vit_spectral.configs.{config_name}").get_config()
  config.num_seeds = num_seeds
  setup = trainer.set_up(config)
  state = jax.jit(setup.steps.init, out_shardings=setup.steps.state_sharding)(
      setup.steps.init_rng)
  lead = (num_seeds,) if num_seeds > 1 else ()
  b = setup.sections.input.batch_size
  rng = np.random.default_rng(0)
  batch = jax.device_put({
      "image": rng.standard_normal((*lead, b, *setup.meta.image_shape)).astype(np.float32),
      "label": rng.integers(0, setup.meta.num_classes, (*lead, b)).astype(np.int32)},
      setup.steps.batch_sharding)
  times = []
  for i in range(repeats + 3):  # 3 to compile and warm up
    start = time.perf_counter()
    state, metrics = setup.steps.train_step(state, batch)
    jax.block_until_ready((state, metrics))
    if i >= 3:
      times.append(time.perf_counter() - start)
  return statistics.median(times)


def target_estimate(config: str, target: str, num_seeds: int, cuda_folder: str) -> dict:
  """`train.py --dry_run --target` for `num_seeds`: the report's step time and memory."""
  with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "report.json")
    env = dict(os.environ, XLA_FLAGS="", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join(filter(None, [cuda_folder,
                                                        os.environ.get("PYTHONPATH")])))
    subprocess.run([sys.executable, "train.py", f"--config={config}", "--dry_run",
                    f"--target={target}", f"--config.num_seeds={num_seeds}",
                    f"--dry_run_json={path}"], cwd=ROOT, env=env, check=True,
                   capture_output=True, text=True)
    with open(path, encoding="utf-8") as f:
      report = json.load(f)
  print(f"  {target}, num_seeds={num_seeds}: {report['step_seconds'] * 1e3:.3f} ms "
        f"({report['bound']}-bound), {report['hbm_per_chip_bytes']['total'] / 2**20:.0f} MiB",
        flush=True)
  return {"num_seeds": num_seeds, "step_seconds": report["step_seconds"],
          "bound": report["bound"], "roofline_seconds": report["roofline_seconds"],
          "memory_bytes": report["hbm_per_chip_bytes"]["total"],
          "images_per_step": report["batch_size"],
          "attention_kernels": report["attention_kernels"]}


def main(argv: list[str] | None = None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--config", default="digits_vit")
  parser.add_argument("--steps", type=int, default=300)
  parser.add_argument("--seeds", type=int, default=4)
  parser.add_argument("--targets", default="a3-highgpu-1g",
                      help="comma-separated GPU targets; empty: none")
  parser.add_argument("--gpu_configs", default="",
                      help="comma-separated recipes for the GPU estimates (default: --config)")
  parser.add_argument("--cuda_folder", default=os.path.join(ROOT, ".ci", "cuda"))
  parser.add_argument("--skip_cpu", action="store_true", help="the GPU estimates only")
  args = parser.parse_args(argv)
  k = args.seeds
  result = {
      "command": "python benchmarks/num_seeds_timing.py " + " ".join(
          shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
      "date": datetime.date.today().isoformat(), "config": args.config,
      "steps": args.steps, "seeds": list(range(k)),
      "machine": f"{os.cpu_count()} CPU cores (shared with other jobs; load_1min per run)",
  }
  if not args.skip_cpu:
    print(f"{k} runs one after another ({args.steps} steps each):", flush=True)
    separate = [timed_run(args.config, args.steps, f"--config.seed={s}") for s in range(k)]
    print(f"{k} seeds as one program:", flush=True)
    together = timed_run(args.config, args.steps, f"--config.num_seeds={k}")
    total = sum(r["wall_seconds"] for r in separate)
    one, many = step_seconds(args.config, 1), step_seconds(args.config, k)
    result["cpu"] = {
        "separate_runs": separate, "separate_total_seconds": round(total, 2),
        "one_program": together,
        "speedup": round(total / together["wall_seconds"], 3),
        "same_accuracies": [r["eval_accuracy"] for r in separate] == together["eval_accuracy"],
        "step_seconds": {"num_seeds=1": one, f"num_seeds={k}": many},
        "step_speedup": round(k * one / many, 3),
    }
    print(f"CPU: {total:.1f} s for {k} runs, {together['wall_seconds']:.1f} s as one "
          f"program ({result['cpu']['speedup']}x); train step {one * 1e3:.1f} ms vs "
          f"{many * 1e3:.1f} ms for {k} ({result['cpu']['step_speedup']}x)", flush=True)
  result["gpu_estimates"] = {}
  targets = [(config, target) for config in (args.gpu_configs or args.config).split(",")
             for target in filter(None, args.targets.split(","))]
  for config, target in targets:
    print(f"GPU compiler's estimate, {config} on {target}:", flush=True)
    one = target_estimate(config, target, 1, args.cuda_folder)
    many = target_estimate(config, target, k, args.cuda_folder)
    result["gpu_estimates"][f"{config} on {target}"] = {
        "num_seeds=1": one, f"num_seeds={k}": many,
        "speedup": round(k * one["step_seconds"] / many["step_seconds"], 3),
        "estimates_not_measurements": True}
  with open(RESULTS, "w", encoding="utf-8") as f:
    json.dump(result, f, indent=2)
    f.write("\n")
  print(f"wrote {os.path.relpath(RESULTS, ROOT)}")
  return result


if __name__ == "__main__":
  main()
