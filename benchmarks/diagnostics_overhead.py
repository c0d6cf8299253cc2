r"""Cost of `config.diagnostics` on the default digits run (aim: under 3%).

  nice -n 10 python benchmarks/diagnostics_overhead.py [--every=500] [--rounds=1]

Trains the default recipe (`configs/digits_vit.py`, `python train.py`: 2000
steps) through the real trainer with the diagnostics off and on
(`config.diagnostics = dict(every=--every, num_images=--num_images)`), in fresh
workdirs, alternating the order round by round in one process, and reports each
run's wall time and steps/s (total steps over the whole run: compile, evaluation
and checkpoints included, the same in both) and the overhead
1 − (steps/s on) / (steps/s off).

Because a shared machine makes whole-run times noisy, it also times the parts
directly on the same model: the diagnostics function's first call (compile +
run) and its median call, and the median train step; the estimate
(first + (calls − 1) · call) / (steps · step) is the overhead without noise
from the rest of the run. Results go to benchmarks/results/diagnostics_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
from absl import logging  # noqa: E402

from vit_spectral.configs import digits_vit  # noqa: E402
from vit_spectral.data import input_pipeline  # noqa: E402
from vit_spectral.training import diagnostics, sharding, trainer  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                       "diagnostics_overhead.json")


def timed_run(config) -> float:
  """Wall seconds of one whole `train_and_evaluate` in a fresh workdir."""
  with tempfile.TemporaryDirectory(prefix="diagnostics_overhead_") as workdir:
    start = time.perf_counter()
    trainer.train_and_evaluate(config, workdir)
    return time.perf_counter() - start


def part_times(config, repeats: int = 5) -> dict[str, float]:
  """The diagnostics call (first and median) and the train step (median), seconds."""
  setup = trainer.set_up(config)
  state = jax.jit(setup.steps.init, out_shardings=setup.steps.state_sharding)(setup.steps.init_rng)
  diagnose = diagnostics.Diagnostics(setup.sections.diagnostics, setup.steps.model,
                                     setup.sections.input, setup.steps.state_sharding.params,
                                     setup.mesh)
  start = time.perf_counter()
  diagnose(state.params)
  first = time.perf_counter() - start
  calls = []
  for _ in range(repeats):
    start = time.perf_counter()
    diagnose(state.params)
    calls.append(time.perf_counter() - start)
  batches = input_pipeline.create_train_dataset(setup.sections.input, seed=0).as_numpy_iterator()
  step_times = []
  for i in range(repeats + 3):
    batch = sharding.global_batch(next(batches), setup.mesh)
    start = time.perf_counter()
    state, metrics = setup.steps.train_step(state, batch)
    jax.block_until_ready(metrics)
    if i >= 3:  # after the compile and warm-up
      step_times.append(time.perf_counter() - start)
  return {"diagnostics_first_call_s": first, "diagnostics_call_s": statistics.median(calls),
          "train_step_s": statistics.median(step_times)}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=None,
                      help="train steps (default: the recipe's 2000); fewer only to try the script")
  parser.add_argument("--every", type=int, default=500)
  parser.add_argument("--num_images", type=int, default=64)
  parser.add_argument("--rounds", type=int, default=1, help="off/on pairs, order alternating")
  parser.add_argument("--out", default=RESULTS)
  args = parser.parse_args(argv)
  logging.set_verbosity(logging.WARNING)

  def config_with(every):
    config = digits_vit.get_config(None if args.steps is None else f"steps={args.steps}")
    config.diagnostics.every = every
    config.diagnostics.num_images = args.num_images
    return config

  steps = config_with(None).total_steps
  calls = len([s for s in range(steps + 1)
               if diagnostics.DiagnosticsSettings(every=args.every).due(s, steps)])
  parts = part_times(config_with(args.every))
  estimate = ((parts["diagnostics_first_call_s"] + (calls - 1) * parts["diagnostics_call_s"])
              / (steps * parts["train_step_s"]))
  runs = {"off": [], "on": []}
  for round_index in range(args.rounds):
    order = ("off", "on") if round_index % 2 == 0 else ("on", "off")
    for which in order:
      runs[which].append(timed_run(config_with(args.every if which == "on" else None)))
      print(f"round {round_index}: diagnostics {which}: {runs[which][-1]:.1f} s", flush=True)
  off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
  result = {
      "recipe": "configs/digits_vit.py (python train.py)", "total_steps": steps,
      "every": args.every, "num_images": args.num_images, "diagnostics_calls": calls,
      "wall_s_off": runs["off"], "wall_s_on": runs["on"],
      "steps_per_s_off": steps / off, "steps_per_s_on": steps / on,
      "overhead_whole_run": 1 - off / on, **parts, "overhead_estimate_from_parts": estimate,
      "machine": f"{os.cpu_count()} CPU cores, jax {jax.__version__}, {jax.devices()[0].platform}",
  }
  print(json.dumps(result, indent=2))
  os.makedirs(os.path.dirname(args.out), exist_ok=True)
  with open(args.out, "w") as f:
    json.dump(result, f, indent=2)
  return 0


if __name__ == "__main__":
  sys.exit(main())
