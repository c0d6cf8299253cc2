"""`train.py --dry_run` (`planning.dry_run`): every shipped recipe compiles its
sharded train step on 1, 2, 4, 8 and 16 devices, with its own batch sizes and
mesh, without data; bad batches stop it with one line.

The dry runs go in two subprocesses (one per core) with 16 fake CPU devices
(this file run as a script), meshes on the first n of them: compiled on 16,
planned (every check that depends on the device count) on 1, 2, 4 and 8. Only depth (1 block) and image size (at
most 32²) are shrunk, for compile time; batches and meshes are the recipes'.
No shipped recipe sets a model or fsdp axis (config.mesh.model and .fsdp are 1
in all): DeiT-S is also compiled on a (data 4, fsdp 2, model 2) mesh.

The ImageNet recipes of the other backbones (Swin, CSwin, CaiT: 9-42 s each to
compile here even shrunk) are planned on every count, 16 included; their
sharded steps are compiled and run by tests/test_recipe_configs.py (two steps
on mock data, 8 devices), and `--dry_run`'s compile of a backbone is covered
by their digits recipes, compiled here on 16.
"""

import json
import logging
import os
import re
import subprocess
import sys

import pytest
from tests.cpu_flags import xla_flags

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEVICE_COUNTS = (1, 2, 4, 8, 16)
MAX_IMAGE_SIZE = 32
TENSOR_PARALLEL_RECIPE = "imagenet_deit"
# Backbone recipes planned, not compiled, on 16 devices (see the module docstring).
PLANNED_ONLY = ("imagenet_swin", "imagenet_cswin", "lipsformer_cswin_imagenet", "imagenet_cait")


def shrunk_config(name: str):
  """Recipe `name` with one block and images of at most 32² (for compile time)."""
  import importlib  # noqa: PLC0415
  config = importlib.import_module(f"vit_spectral.configs.{name}").get_config()
  if "depths" in config.model:    # a backbone of stages (Swin, CSwin): one block each
    config.model.depths = (1,) * len(config.model.depths)
    if "window_size" in config.model:   # Swin: windows that tile the 32² images' grids
      config.model.window_size = min(config.model.window_size, 4)
  else:
    config.model.depth = 1
    config.model.layer_overrides = ()
  config.input.image_size = min(config.input.image_size, MAX_IMAGE_SIZE)
  return config


def dry_run_recipes(shard: int, num_shards: int):
  """Prints one JSON line per (recipe, device count) of every num_shards-th
  recipe from `shard`: on 16 devices the full dry run (compiled), on fewer
  what depends on the device count (`dry_run.plan`: batches, mesh, parameter
  shardings; tracing and compiling cost far more and depend on it only
  through those)."""
  import jax  # noqa: PLC0415
  jax.config.update("jax_disable_most_optimizations", True)
  from vit_spectral.configs import recipe_names  # noqa: PLC0415
  from vit_spectral.planning import dry_run  # noqa: PLC0415
  for name in recipe_names()[shard::num_shards]:
    for count in DEVICE_COUNTS:
      row = dict(name=name, devices=count)
      try:
        if count == max(DEVICE_COUNTS) and name not in PLANNED_ONLY:
          report = dry_run.dry_run(shrunk_config(name), jax.devices()[:count])
          assert report.summary()
          row.update(mesh=report.mesh_shape, batch=report.batch_size,
                     eval_batch=report.eval_batch_size, params=report.num_params,
                     flops=report.flops, memory=report.memory)
        else:
          step = dry_run.plan(shrunk_config(name), jax.devices()[:count])
          row.update(mesh=dict(step.mesh.shape), batch=step.sections.input.batch_size,
                     eval_batch=step.sections.input.eval_batch_size,
                     params=step.num_params)
      except Exception as e:  # noqa: BLE001 - reported to the test, which fails
        row.update(error=repr(e))
      print(json.dumps(row), flush=True)
  if shard == 0:  # one compile with every axis: DeiT-S on a (data 4, fsdp 2, model 2) mesh
    config = shrunk_config(TENSOR_PARALLEL_RECIPE)
    config.mesh.fsdp = config.mesh.model = 2
    report = dry_run.dry_run(config, jax.devices()[:16])
    print(json.dumps(dict(name=TENSOR_PARALLEL_RECIPE, devices="16 fsdp 2 model 2",
                          mesh=report.mesh_shape, memory=report.memory)), flush=True)


def _subprocess_env(num_devices: int) -> dict[str, str]:
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu")
  env["XLA_FLAGS"] = xla_flags(num_devices)
  return env


@pytest.fixture(scope="module")
def every_recipe_report():
  """{(recipe, device count): row} from two subprocesses (one per core) with
  16 fake devices each."""
  from vit_spectral.configs import recipe_names  # noqa: PLC0415
  num_shards = 2
  runs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), str(shard),
                            str(num_shards)], cwd=ROOT, env=_subprocess_env(16),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
          for shard in range(num_shards)]
  rows = {}
  for run in runs:
    stdout, stderr = run.communicate(timeout=900)
    assert run.returncode == 0, stderr[-3000:]
    for line in stdout.splitlines():
      if line.startswith("{"):
        row = json.loads(line)
        rows[(row["name"], row["devices"])] = row
  return rows, recipe_names()


@pytest.mark.extended
def test_every_recipe_passes_the_dry_run_on_1_to_16_devices(every_recipe_report):
  rows, names = every_recipe_report
  rows = {key: row for key, row in rows.items() if key[1] in DEVICE_COUNTS}
  assert set(rows) == {(name, n) for name in names for n in DEVICE_COUNTS}
  errors = {key: row["error"] for key, row in rows.items() if "error" in row}
  assert not errors, errors
  for (name, count), row in rows.items():
    data = row["mesh"]["data"]
    assert row["mesh"]["fsdp"] == 1  # the recipes' default
    assert data * row["mesh"]["model"] == count
    assert row["batch"] % data == 0 and row["eval_batch"] % data == 0, (name, count)
    one = rows[(name, 1)]
    assert row["params"] == one["params"] > 0 and row["batch"] == one["batch"]
    assert one["eval_batch"] <= row["eval_batch"] < one["eval_batch"] + count
  for name in set(names) - set(PLANNED_ONLY):
    compiled = rows[(name, max(DEVICE_COUNTS))]
    assert compiled["flops"] > 0, name
    # Data parallel: every device holds the float32 params (and more: the
    # optimizer state, its rows of the batch).
    assert compiled["memory"]["argument"] > 4 * compiled["params"], name
    assert compiled["memory"]["total"] >= compiled["memory"]["argument"], name


@pytest.mark.extended
def test_model_and_fsdp_axes_compile_and_split_the_parameters(every_recipe_report):
  rows, _ = every_recipe_report
  split = rows[(TENSOR_PARALLEL_RECIPE, "16 fsdp 2 model 2")]
  assert split["mesh"] == {"data": 4, "fsdp": 2, "model": 2}
  # Heads and MLP units split over "model", every parameter and its optimizer
  # state over "fsdp": under half the data-parallel state per device.
  data_parallel = rows[(TENSOR_PARALLEL_RECIPE, 16)]
  assert split["memory"]["argument"] < data_parallel["memory"]["argument"] / 2


@pytest.mark.extended
def test_the_16_device_eval_batches_are_rounded_up(every_recipe_report):
  rows, _ = every_recipe_report
  # imagenet_deit's eval batch of 1000 is not a multiple of 16: 1008 is.
  assert rows[("imagenet_deit", 16)]["eval_batch"] == 1008
  assert rows[("imagenet_deit", 8)]["eval_batch"] == 1000


def test_a_train_batch_that_does_not_split_stops_the_cli_with_one_line():
  result = subprocess.run(
      [sys.executable, "train.py", "--config=digits_vit:depth=1", "--dry_run",
       "--config.input.batch_size=100"],
      cwd=ROOT, env=_subprocess_env(8), capture_output=True, text=True, timeout=300,
      check=False)
  assert result.returncode != 0
  last = result.stderr.strip().splitlines()[-1]
  assert "input.batch_size=100 must be a multiple of 8" in last
  assert "nearest valid sizes are 96 or 104" in last


def test_planned_meta_needs_no_data(tmp_path, caplog):
  from vit_spectral.data import DatasetNotPreparedError, planned_meta  # noqa: PLC0415
  from vit_spectral.configs import imagenet_deit  # noqa: PLC0415
  config = imagenet_deit.get_config()
  config.input.data_dir = str(tmp_path)
  with caplog.at_level(logging.WARNING):
    meta = planned_meta(config.input)
  assert (meta.num_classes, meta.image_shape) == (1000, (224, 224, 3))
  assert (meta.num_train_examples, meta.num_eval_examples) == (1_281_167, 50_000)
  assert not os.listdir(tmp_path)  # nothing prepared, downloaded or written
  # TFDS is not asked whether the data set is prepared (it logs a WARNING
  # when it is not): the shipped split sizes answer.
  assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
  config.input.train_split = "train[:90%]"
  with (caplog.at_level(logging.WARNING),
        pytest.raises(DatasetNotPreparedError, match=r"input.train_split='train\[:90%\]'")):
    planned_meta(config.input)
  assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.extended
def test_the_cli_dry_run_of_an_unprepared_data_set_logs_no_tfds_warning(tmp_path):
  """A CIFAR recipe with an empty data_dir: the report, and on stderr no
  line from TFDS (its 'Variant folder ... has no dataset_info.json')."""
  import importlib.util  # noqa: PLC0415
  tfds_dir = importlib.util.find_spec("tensorflow_datasets").submodule_search_locations[0]
  tfds_files = {name for _, _, names in os.walk(tfds_dir) for name in names
                if name.endswith(".py")}
  assert "file_utils.py" in tfds_files   # where the warning came from
  result = subprocess.run(
      [sys.executable, "train.py", "--config=cifar10_vit", "--dry_run",
       f"--config.input.data_dir={tmp_path}", "--config.model.depth=1"],
      cwd=ROOT, env=_subprocess_env(1), capture_output=True, text=True, timeout=600,
      check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "data: cifar10, 10 classes, images 32x32x3" in result.stdout
  assert "in matmuls, every layer" in result.stdout
  from_tfds = []
  for line in result.stderr.splitlines():
    # absl's lines name their source: "W1126 14:11:53.73 140 file_utils.py:394] ...".
    source = re.match(r"^[WEF]\d{4} [\d:.]+\s+\d+ ([\w.]+):\d+\] ", line)
    if (source and source[1] in tfds_files) or "dataset_info.json" in line:
      from_tfds.append(line)
  assert not from_tfds, from_tfds
  assert not os.listdir(tmp_path)


if __name__ == "__main__":
  dry_run_recipes(int(sys.argv[1]), int(sys.argv[2]))
