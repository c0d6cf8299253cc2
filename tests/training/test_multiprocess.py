"""Two processes on localhost train as one: the same parameters as one process
with 8 devices, and a checkpoint that restores in a single process.

The two-process run is the command line itself (`vit_spectral.main.run`, what
train.py runs) with `--coordinator_address/--num_processes/--process_id`, 4 fake
CPU devices per process, gloo collectives and an (8,) "data" mesh over both. A
small entry script records two things from inside it, without changing what it
computes: where each process's local batch lands in the global batch
(`sharding.global_batch`), and the parameters each process holds when the final
checkpoint is saved.

The reference is one process with 8 devices (this pytest process, conftest's 8
fake devices and compile flags; the subprocesses get the same flags). The input
pipeline is per process (each reads its own slice with its own seeds), so a plain
one-process run would see other batches: the reference's
`create_train_dataset` is replaced by the process_count=2 streams of process 0
and 1, concatenated in that order. That order is checked, not assumed: the
recorded layout must put process 0's local batch on rows [0, B/2) and process
1's on [B/2, B), and the reference's first global batch must equal the two
processes' first local batches so placed.

Equality: to a float tolerance, not bit for bit. The devices of both runs run
the same program on the same examples, but the cross-device mean is an
all-reduce whose summation order differs: XLA's in-process reduction over 8
devices in the reference, gloo's cross-process one in the two-process run.
float32 sums taken in another order differ in the last bits, and Adam carries
that into every step. Seen after 4 steps, relative to each leaf's largest magnitude:
params <= 5e-7, Adam moments <= 1.2e-6 (the second moment of the query kernel),
eval loss 1e-7, eval accuracy and step counts exact. The tolerance is 1e-5 of
each leaf's largest magnitude (RTOL), 8x what was seen; the reference fed
with the process order swapped (tried once) is off by 3e-3 on first moments of
7e-4, i.e. by its own size. One leaf is exempt: the attention key bias, whose
gradient is exactly zero (adding q.b to every score of a query leaves its
softmax unchanged), so what it holds is rounding noise that Adam rescales
(seen: differences of 3e-6 on values of 9e-6); it and its moments are not
compared.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
import tensorflow as tf

from vit_spectral import data
from vit_spectral.configs import digits_vit
from vit_spectral.data import input_pipeline
from vit_spectral.training import checkpointing, distributed, sharding, trainer
from tests.cpu_flags import xla_flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS, BATCH, PROCESSES = 4, 32, 2
# Each leaf of the state may differ from the reference by RTOL times the leaf's
# largest magnitude (see the module docstring); seen: <= 1.2e-6.
RTOL = 1e-5
# Environment variables by which jax would detect a cluster manager.
CLUSTER_ENV = ("SLURM_JOB_ID", "OMPI_MCA_orte_hnp_uri", "KUBERNETES_SERVICE_HOST",
               "JAX_COORDINATOR_ADDRESS", "TPU_WORKER_HOSTNAMES")
TIMEOUT_S = 420  # generous: the suite shares 2 cores; quiet, a run takes ~25 s

RECIPE_ARG = f"steps={STEPS},depth=1,width=32,heads=2"
OVERRIDES = {  # config field -> value, as flags for the runs and set on the reference
    "optim.warmup_steps": 1,
    "input.batch_size": BATCH,
    "eval_every": STEPS,
    "checkpoint_every": STEPS,
    "log_every": STEPS,
}

# Runs the command line, recording the batch layout and the final params.
ENTRY = r'''
import json, os
import jax, numpy as np
from vit_spectral import main
from vit_spectral.training import checkpointing, sharding

out = os.environ["MULTIPROCESS_TEST_OUT"]
global_batch = sharding.global_batch
save = checkpointing.Checkpointer.save

def recording_global_batch(local_batch, mesh):
  batch = global_batch(local_batch, mesh)
  path = os.path.join(out, f"layout_{jax.process_index()}.json")
  if not os.path.exists(path):  # the first call: the first train batch
    rows = [s.index[0] for s in batch["label"].addressable_shards]
    json.dump({"rows": [min(r.start for r in rows), max(r.stop for r in rows)],
               "labels": np.asarray(local_batch["label"]).tolist()}, open(path, "w"))
  return batch

def recording_save(self, step, state, *, force=False):
  leaves = jax.tree_util.tree_leaves_with_path(state.params)
  np.savez(os.path.join(out, f"params_{jax.process_index()}_{step}.npz"),
           **{jax.tree_util.keystr(p): np.asarray(v) for p, v in leaves})
  return save(self, step, state, force=force)

sharding.global_batch = recording_global_batch
checkpointing.Checkpointer.save = recording_save
main.run()
'''


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _flags(data_dir):
  return ([f"--config=digits_vit:{RECIPE_ARG}", f"--config.input.data_dir={data_dir}"] +
          [f"--config.{k}={v}" for k, v in OVERRIDES.items()])


def _start_processes(tmp_path, data_dir, workdir):
  entry = tmp_path / "entry.py"
  entry.write_text(ENTRY)
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
             PYTHONPATH=ROOT, MULTIPROCESS_TEST_OUT=str(tmp_path),
             XLA_FLAGS=xla_flags(4),
             JAX_DISABLE_MOST_OPTIMIZATIONS="1")  # as conftest sets for the reference
  address = f"localhost:{_free_port()}"
  procs = []
  for i in range(PROCESSES):
    log = open(tmp_path / f"log_{i}.txt", "w")
    procs.append((subprocess.Popen(
        [sys.executable, str(entry), *_flags(data_dir), f"--workdir={workdir}",
         f"--coordinator_address={address}", f"--num_processes={PROCESSES}",
         f"--process_id={i}"],
        env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True), log))
  return procs


def _tails(tmp_path) -> str:
  return "\n".join(f"--- process {i}, last lines:\n" +
                   "\n".join((tmp_path / f"log_{i}.txt").read_text().splitlines()[-25:])
                   for i in range(PROCESSES))


def _kill(procs) -> None:
  for proc, log in procs:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    log.close()


def _wait(procs, tmp_path, deadline) -> None:
  """Waits for every process to exit 0; any failure or the deadline fails the
  test (the survivors are killed by the caller)."""
  while any(p.poll() is None for p, _ in procs):
    failed = [i for i, (p, _) in enumerate(procs) if p.poll() not in (None, 0)]
    assert not failed, f"process {failed} exited non-zero\n{_tails(tmp_path)}"
    assert time.time() < deadline, f"timed out after {TIMEOUT_S} s\n{_tails(tmp_path)}"
    time.sleep(0.2)
  codes = [p.returncode for p, _ in procs]
  assert codes == [0] * PROCESSES, f"exit codes {codes}\n{_tails(tmp_path)}"


def _reference_config(data_dir):
  config = digits_vit.get_config(RECIPE_ARG)
  config.input.data_dir = data_dir
  for key, value in OVERRIDES.items():
    section, _, field = key.rpartition(".")
    setattr(config[section] if section else config, field, value)
  return config


def _two_process_stream(create_train_dataset):
  """`create_train_dataset` as a 2-process run sees it, on one process: the
  batches of process 0 and 1 concatenated (process 0's first)."""

  def create(cfg, *, seed, start_step=0, process_index=None, process_count=None):
    del process_index, process_count  # this process plays both
    streams = [create_train_dataset(cfg, seed=seed, start_step=start_step,
                                    process_index=i, process_count=PROCESSES)
               for i in range(PROCESSES)]
    return tf.data.Dataset.zip(tuple(streams)).map(
        lambda *batches: {k: tf.concat([b[k] for b in batches], 0) for k in batches[0]})

  return create


def _restore_on_one_process(workdir):
  """The full train state of `workdir`'s latest checkpoint, restored the way the
  trainer resumes (`Checkpointer.restore` onto shardings of this process's mesh)."""
  ckpt = checkpointing.Checkpointer(os.path.join(workdir, "checkpoints"), save_every=1)
  step = ckpt.latest_step()
  abstract = checkpointing.stored_structure(
      os.path.join(workdir, "checkpoints", str(step), "default"))
  mesh = sharding.make_mesh({"data": -1, "model": 1})
  state = ckpt.restore(step, abstract, jax.tree_util.tree_map(
      lambda _: sharding.replicated(mesh), abstract))
  ckpt.close()
  return step, state


@pytest.mark.slow
def test_two_processes_train_like_one_with_8_devices(tmp_path, monkeypatch):
  # Prepared once here: two processes preparing it at once would race.
  data_dir = str(tmp_path / "tfds")
  data.get_builder("digits", data_dir=data_dir)
  two_dir, ref_dir = str(tmp_path / "two"), str(tmp_path / "one")
  deadline = time.time() + TIMEOUT_S
  procs = _start_processes(tmp_path, data_dir, two_dir)
  try:
    # The reference trains here while the two processes run.
    config = _reference_config(data_dir)
    monkeypatch.setattr(input_pipeline, "create_train_dataset",
                        _two_process_stream(input_pipeline.create_train_dataset))
    trainer.train_and_evaluate(config, ref_dir)
    first_global = next(input_pipeline.create_train_dataset(
        config.input, seed=config.seed).as_numpy_iterator())
    _wait(procs, tmp_path, deadline)
  finally:
    _kill(procs)

  # The global batch is process 0's slice, then process 1's: the reference's order.
  layouts = [json.loads((tmp_path / f"layout_{i}.json").read_text()) for i in range(PROCESSES)]
  local = BATCH // PROCESSES
  assert [l["rows"] for l in layouts] == [[i * local, (i + 1) * local] for i in range(PROCESSES)]
  np.testing.assert_array_equal(first_global["label"],
                                np.concatenate([l["labels"] for l in layouts]))

  # Both processes hold the same params; the checkpoint they wrote holds them too.
  held = [dict(np.load(tmp_path / f"params_{i}_{STEPS}.npz")) for i in range(PROCESSES)]
  step, two_state = _restore_on_one_process(two_dir)
  assert step == STEPS == int(two_state["step"])
  restored = {jax.tree_util.keystr(p): np.asarray(v)
              for p, v in jax.tree_util.tree_leaves_with_path(two_state["params"])}
  assert held[0].keys() == held[1].keys() == restored.keys()
  for name, value in restored.items():
    np.testing.assert_array_equal(held[0][name], value, err_msg=name)
    np.testing.assert_array_equal(held[1][name], value, err_msg=name)
  params, _ = checkpointing.latest_params(two_dir)
  jax.tree_util.tree_map(np.testing.assert_array_equal, params, two_state["params"])

  # The two-process state equals the one-process one to float tolerance.
  _, ref_state = _restore_on_one_process(ref_dir)
  ref_leaves = jax.tree_util.tree_leaves_with_path(ref_state)
  two_leaves = jax.tree_util.tree_leaves_with_path(two_state)
  assert [p for p, _ in ref_leaves] == [p for p, _ in two_leaves]
  skipped = []
  for (path, ref), (_, two) in zip(ref_leaves, two_leaves):  # params, moments, step
    name = jax.tree_util.keystr(path)
    ref, two = np.asarray(ref), np.asarray(two)
    if "['key']['bias']" in name:
      # Not compared: its true gradient is exactly zero (softmax ignores a
      # constant added to every score), so the leaf and its Adam moments hold
      # only rounding noise, which Adam scales up to lr per step.
      skipped.append(name)
      continue
    np.testing.assert_allclose(two, ref, rtol=0, atol=RTOL * np.abs(ref).max(), err_msg=name)
  assert len(skipped) == 3, skipped  # the bias, its first and second moments
  # Not vacuous: the head starts at zero and was trained.
  assert np.abs(restored["['head']['kernel']"]).max() > 0
  final = [json.loads((tmp_path / d / "final_metrics.json").read_text())
           for d in ("two", "one")]
  # Seen equal; params that differ in the last bits may flip one of 360 digits.
  assert abs(final[0]["eval_accuracy"] - final[1]["eval_accuracy"]) <= 1 / 360, final
  assert final[0]["eval_loss"] == pytest.approx(final[1]["eval_loss"], rel=1e-5), final


@pytest.mark.parametrize("fields, flag", [
    (dict(process_id=1), "--process_id was given without --num_processes"),
    (dict(num_processes=2), "--num_processes was given without --process_id"),
    (dict(num_processes=0, process_id=0), "--num_processes=0 must be at least 1"),
    (dict(num_processes=2, process_id=2), r"--process_id=2 must be in \[0, --num_processes=2\)"),
    (dict(coordinator_address="localhost"), "--coordinator_address='localhost' must be HOST:PORT"),
    (dict(coordinator_address="localhost:0"), "must be HOST:PORT"),
])
def test_cluster_fields_that_cannot_agree_are_refused(fields, flag):
  with pytest.raises(ValueError, match=flag) as error:
    distributed.initialize(False, **fields)  # any field implies --distributed
  assert "\n" not in str(error.value)


def test_no_coordinator_and_no_cluster_manager_names_the_missing_flag():
  env = {k: v for k, v in os.environ.items() if k not in CLUSTER_ENV}
  env["JAX_PLATFORMS"] = "cpu"
  code = ("from vit_spectral.training import distributed\n"
          "distributed.initialize(True, num_processes=2, process_id=0)")
  run = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=ROOT),
                       capture_output=True, text=True, timeout=120)
  last = run.stderr.strip().splitlines()[-1]
  assert run.returncode != 0
  assert last.startswith("ValueError: --distributed: no cluster manager"), run.stderr[-2000:]
  assert "to supply --coordinator_address;" in last
