"""benchmarks/vs_timm_gpu.py: no TensorFlow on its path, our arms at a tiny
shape (their FLOP counts and memory), the rounds, ratios and table with fake
arms, its one-line errors; timm's arms only where torch and timm are
installed (they are not test dependencies)."""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from benchmarks import throughput, vs_timm_gpu

# The GPU harness on CPU: the `extended` step runs it (the GPU run is its use).
pytestmark = pytest.mark.extended

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Ti/16's width, one block, 16x16 images in 8x8 patches (5 tokens).
TINY = ["--models=Ti", "--image=16", "--patch=8", "--depth=1", "--batch=8", "--dtype=float32",
        "--warmup=1"]


def run_without_tensorflow(body: str) -> str:
  """Run `body` in a fresh interpreter where TensorFlow cannot be imported, as
  on a lent GPU machine; its stdout. torch and timm are imported only this
  way: importing timm (torchvision, torch._dynamo) imports triton, whose LLVM
  crashes the process (SIGSEGV) when TensorFlow's libraries are already
  loaded, as they are in a test worker that ran the input-pipeline tests (seen
  in CI with torch 2.14.1, triton 3.8.0, tensorflow 2.21.0)."""
  script = textwrap.dedent("""
      import sys
      # Absent, as importlib sees it: `import tensorflow` raises
      # ModuleNotFoundError and importlib.util.find_spec answers None.
      sys.modules.update(tensorflow=None, tensorflow_datasets=None)
      """) + textwrap.dedent(body)
  env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
  env.update(PYTHONPATH=ROOT, JAX_DISABLE_MOST_OPTIMIZATIONS="1")
  done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                        capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  return done.stdout


def test_its_path_imports_no_tensorflow():
  """With TensorFlow unimportable (as on a lent GPU machine), the module
  imports, and our train and inference arms build and run, without it."""
  out = run_without_tensorflow(f"""
      from benchmarks import vs_timm_gpu
      assert "torch" not in sys.modules
      args = vs_timm_gpu.parse_args({TINY!r})
      for arm in vs_timm_gpu.our_arms("Ti", ["dot_product"], ["train", "infer"], args):
        arm.run(1)
      vs_timm_gpu.check_no_tensorflow("the test")
      print("no tensorflow")
      """)
  assert "no tensorflow" in out


def test_a_tensorflow_import_stops_the_run(monkeypatch):
  monkeypatch.setitem(sys.modules, "tensorflow", None)      # blocked, not imported
  vs_timm_gpu.check_no_tensorflow("a test")
  monkeypatch.setitem(sys.modules, "tensorflow", object())
  with pytest.raises(SystemExit, match="tensorflow was imported"):
    vs_timm_gpu.check_no_tensorflow("a test")


@pytest.fixture(scope="module")
def our_arms():
  args = vs_timm_gpu.parse_args(TINY + ["--compile_threads=2"])
  return args, vs_timm_gpu.our_arms("Ti", ["dot_product", "feat_scale"], ["train", "infer"],
                                    args)


def test_our_arms_count_their_flops_and_memory(our_arms):
  args, arms = our_arms
  assert [a.key for a in arms] == ["train/ours dot_product", "infer/ours dot_product",
                                   "train/ours feat_scale", "infer/ours feat_scale"]
  train, infer = arms[0], arms[1]
  # The train step's jaxpr matmuls are the plain ViT's analytic count; the
  # forward pass is a third of it, but for the patch embedding's gradient
  # with respect to the images, which is never formed.
  analytic = throughput.analytic_flops_per_image(16, 8, 192, 1, 768)
  assert train.flops_per_image == pytest.approx(analytic, rel=1e-9)
  embedding = 2 * 4 * 8 * 8 * 3 * 192
  assert 3 * infer.flops_per_image - embedding == pytest.approx(analytic, rel=1e-9)
  assert train.num_params == infer.num_params < arms[2].num_params   # FeatScale's scales
  for arm in arms:
    assert arm.memory_bytes > 0 and "memory_analysis" in arm.memory_source
    arm.run(1)


class FakeClock:
  """Time that passes only when a fake arm runs."""

  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


def fake_arms(clock, step_s: dict[str, float], slowdown):
  """Arms whose step takes step_s[key] x slowdown() of the clock."""
  arms = []
  for key, seconds in step_s.items():
    task, name = key.split("/")

    def run(n, seconds=seconds):
      clock.now += n * seconds * slowdown()
    arms.append(vs_timm_gpu.Arm(task, name, run, setup_s=1.0, num_params=10,
                                flops_per_image=None if name.startswith("timm") else 1e9,
                                memory_bytes=2**30, memory_source="fake"))
  return arms


def test_rounds_ratios_and_table():
  """A machine whose speed changes between rounds slows every arm alike: the
  paired ratios stay exact while the step times vary."""
  clock = FakeClock()
  rounds_seen = []
  step_s = {"train/ours dot_product": 0.02, "train/ours hopfield": 0.03,
            "train/timm eager": 0.04, "train/timm compiled": 0.01,
            "infer/ours dot_product": 0.005, "infer/timm compiled": 0.004}
  factors = iter([1.0] * 6 + [2.0] * 6 + [1.5] * 6)   # one per arm per round
  arms = fake_arms(clock, step_s, lambda: next(factors))
  times = vs_timm_gpu.time_rounds(arms, rounds=3, steps=4, clock=clock, log=rounds_seen.append)
  assert len(rounds_seen) == 3 and all(len(t) == 3 for t in times.values())
  assert times["train/timm eager"] == pytest.approx([0.04, 0.08, 0.06])
  rows = {f"{r['task']}/{r['arm']}": r
          for r in vs_timm_gpu.summarise(arms, times, batch=256, peak_tflops=100.0)}
  base = rows["train/ours dot_product"]
  assert base["step_ms"] == pytest.approx(30.0)           # median of 20, 40, 30
  assert base["images_per_s"] == pytest.approx(256 / 0.03)
  assert base["throughput_vs_timm_eager"] == pytest.approx(2.0)
  assert base["throughput_vs_timm_compiled"] == pytest.approx(0.5)
  assert base["mfu"] == pytest.approx(1e9 * 256 / 0.03 / 100e12)
  assert rows["train/ours hopfield"]["step_time_vs_dot_product"] == pytest.approx(1.5)
  assert rows["train/timm eager"]["step_time_vs_dot_product"] is None
  assert rows["train/timm eager"]["mfu"] is None
  infer = rows["infer/ours dot_product"]
  assert infer["throughput_vs_timm_compiled"] == pytest.approx(0.8)
  assert infer["throughput_vs_timm_eager"] is None   # no such arm for inference here
  result = dict(machine=dict(card="NVIDIA H200", date="today"),
                settings=dict(batch=256, image=224, dtype="bfloat16", rounds=3, steps=4),
                versions=dict(jax="0.10.2"), models={"S": dict(rows=list(rows.values()))})
  table = vs_timm_gpu.markdown(result)
  lines = [line for line in table.splitlines() if line.startswith("| S |")]
  assert len(lines) == 6
  cells = lines[0].strip("| ").split(" | ")
  assert len(cells) == len(vs_timm_gpu.COLUMNS)
  assert cells[vs_timm_gpu.COLUMNS.index("MFU")].endswith("%")
  assert cells[vs_timm_gpu.COLUMNS.index("GiB")] == "1.00"


def test_every_arm_runs_in_every_round_in_shuffled_orders():
  clock, order = FakeClock(), []
  arms = [vs_timm_gpu.Arm("train", name, lambda n, name=name: order.append(name), 0.0, 1)
          for name in ("a", "b", "c", "d")]
  vs_timm_gpu.time_rounds(arms, rounds=6, steps=1, clock=clock, log=lambda line: None)
  rounds = [order[i:i + 4] for i in range(0, 24, 4)]
  assert all(sorted(r) == ["a", "b", "c", "d"] for r in rounds)
  assert len({tuple(r) for r in rounds}) > 1


@pytest.mark.parametrize("flag, choices", [
    ("--models=XL", "'Ti'"), ("--variants=flash", "attn_scale"), ("--tasks=eval", "infer"),
    ("--dtype=float16", "bfloat16")])
def test_bad_flags_fail_with_one_line_before_anything_runs(flag, choices, capsys, tmp_path):
  out = tmp_path / "r.json"
  assert vs_timm_gpu.main([flag, f"--out={out}"]) == 2
  error = capsys.readouterr().err.strip()
  assert error.count("\n") == 0 and flag.split("=")[0] in error and choices in error
  assert not out.exists()


def test_timm_arms_match_ours(our_arms):
  """timm's ViT at the same tiny shape: our baseline's parameter count, and a
  train step and an inference pass that run (on CPU here; eager only), in a
  process without TensorFlow (run_without_tensorflow says why)."""
  missing = [name for name in ("torch", "timm") if importlib.util.find_spec(name) is None]
  if missing:          # found, never imported here (importorskip would import them)
    pytest.skip(f"{' and '.join(missing)} not installed (not test dependencies)")
  out = run_without_tensorflow(f"""
      import json
      from benchmarks import vs_timm_gpu
      args = vs_timm_gpu.parse_args({TINY + ["--no_compile"]!r})
      torch, timm = vs_timm_gpu.import_torch()
      arms = vs_timm_gpu.timm_arms(torch, timm, "Ti", ["train", "infer"], args,
                                   {{"train": 3.0, "infer": 1.0}})
      for arm in arms:
        arm.run(1)
      vs_timm_gpu.check_no_tensorflow("the test")
      print(json.dumps(dict(keys=[a.key for a in arms],
                            flops=[a.flops_per_image for a in arms],
                            params=[a.num_params for a in arms])))
      """)
  got = json.loads(out.strip().splitlines()[-1])
  assert got["keys"] == ["train/timm eager", "infer/timm eager"]
  assert got["flops"] == [3.0, 1.0]
  assert got["params"] == [our_arms[1][0].num_params] * 2


def test_results_round_trip_as_json(tmp_path):
  rows = [dict(task="train", arm="ours dot_product", setup_s=1.0, num_params=5, step_ms=2.0,
               step_ms_min=1.0, step_ms_max=3.0, images_per_s=10.0, flops_per_image=None,
               mfu=None, throughput_vs_timm_eager=None, throughput_vs_timm_compiled=None,
               step_time_vs_dot_product=1.0, memory_bytes=None, memory_source="",
               times_s=[0.002])]
  result = dict(machine=dict(card="cpu", date="today"),
                settings=dict(batch=8, image=16, dtype="float32", rounds=1, steps=1),
                versions={}, models={"Ti": dict(rows=rows)})
  table = vs_timm_gpu.write(result, str(tmp_path / "x.json"))
  assert json.loads((tmp_path / "x.json").read_text())["models"]["Ti"]["rows"] == rows
  assert table == str(tmp_path / "x.md") and "| Ti | train | ours dot_product |" in open(
      table).read()
