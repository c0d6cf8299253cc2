"""`planning.tpu_targets`, `planning.gpu_targets` and the arithmetic of
`planning.target_dry_run`
(slice names, topologies, the roofline, the compiler's out-of-memory line),
without libtpu or the CUDA plugin; the compiles themselves run in CI's step
(.ci/check_target_dry_runs.py) and in benchmarks/target_dry_runs.py."""

import math
import re

import pytest

from vit_spectral.planning import gpu_targets, target_dry_run, tpu_targets


@pytest.mark.parametrize("name, chips, topology, wrap", [
    ("v4-8", 4, "v4:2x2x1", (False,) * 3),
    ("v4-32", 16, "v4:2x2x4", (False,) * 3),
    ("v4-128", 64, "v4:4x4x4", (True,) * 3),
    ("v5p-8", 4, "v5:2x2x1", (False,) * 3),
    ("v5litepod-16", 16, "v5e:4x4", (False,) * 3),
    ("v5e-16", 16, "v5e:4x4", (False,) * 3),
    ("v5litepod-256", 256, "v5e:16x16", (True, True, False)),
    ("v6e-8", 8, "v6e:2x4", (False,) * 3),
    ("v6e-128", 128, "v6e:8x16", (False, True, False)),
])
def test_slice_names_give_chips_topology_and_torus(name, chips, topology, wrap):
  target = tpu_targets.parse_target(name)
  assert target.num_chips == chips and target.topology_name == topology
  assert target.wrap == wrap
  assert math.prod(target.chips_per_host) <= 8


def test_multislice_multiplies_chips():
  target = tpu_targets.parse_target("2xv5e-256")
  assert target.num_slices == 2 and target.num_chips == 512
  assert target.topology_name == "v5e:16x16"


def test_every_known_name_parses_to_its_own_size():
  for name in tpu_targets.known_targets():
    target = tpu_targets.parse_target(name)
    count = int(name.rsplit("-", 1)[1])
    per_chip = target.chip.cores_per_chip if target.chip.name_counts_cores else 1
    assert target.num_chips * per_chip == count, name


@pytest.mark.parametrize("name", ["v4-7", "v5litepod-3", "v7-8", "tpu", "v6e-512", "0xv4-8"])
def test_unknown_names_are_one_line_listing_the_known_ones(name):
  with pytest.raises(tpu_targets.UnknownTargetError) as raised:
    tpu_targets.parse_target(name)
  message = str(raised.value)
  assert "\n" not in message and f"--target={name}" in message
  assert "v5litepod-16" in message and "v4-32" in message and "v6e-8" in message


def test_without_libtpu_the_error_says_how_to_install_it(monkeypatch):
  monkeypatch.setattr(tpu_targets, "libtpu_available", lambda: False)
  with pytest.raises(tpu_targets.LibtpuMissingError, match=r"\[tpu\]"):
    tpu_targets.topology_devices(tpu_targets.parse_target("v4-8"))


def test_roofline_takes_the_slowest_resource():
  chip = tpu_targets.parse_target("v5e-1")
  line = target_dry_run.roofline(flops=197e12, bytes_accessed=819e9 / 2,
                              collective_bytes=0.0, target=chip)
  assert line.compute_seconds == pytest.approx(1.0) and line.hbm_seconds == pytest.approx(0.5)
  assert line.seconds == pytest.approx(1.0) and line.bound == "compute"
  memory_bound = target_dry_run.roofline(1e12, 819e9 * 3, 0.0, chip)
  assert memory_bound.bound == "HBM" and memory_bound.seconds == pytest.approx(3.0)


def test_the_compilers_out_of_memory_line_gives_needed_and_available():
  oom = target_dry_run._OutOfMemory(  # pylint: disable=protected-access
      "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO "
      "temporaries (22.22G) exceeds available HBM (15.75G).")
  assert oom.needed == pytest.approx(22.22 * 2**30)
  assert oom.available == pytest.approx(15.75 * 2**30)
  other = target_dry_run._OutOfMemory(  # pylint: disable=protected-access
      "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 17.39G of 15.75G hbm.")
  assert (other.needed, other.available) == (pytest.approx(17.39 * 2**30),
                                              pytest.approx(15.75 * 2**30))


@pytest.mark.parametrize("name, gpu, count, hosts", [
    ("a3-highgpu-8g", "H100 80GB HBM3", 8, 1),
    ("2xa3-highgpu-8g", "H100 80GB HBM3", 8, 2),
    ("a2-highgpu-1g", "A100-SXM4-40GB", 1, 1),
    ("a2-ultragpu-4g", "A100-SXM4-80GB", 4, 1),
    ("h100-2", "H100 80GB HBM3", 2, 1),
    ("a100-80gb-8", "A100-SXM4-80GB", 8, 1),
])
def test_gpu_machine_types_give_gpus_and_hosts(name, gpu, count, hosts):
  target = target_dry_run.parse_target(name)
  assert isinstance(target, gpu_targets.GpuTarget)
  assert (target.gpu.name, target.gpus_per_host, target.hosts) == (gpu, count, hosts)
  assert target.num_chips == count * hosts
  assert target.memory_bytes == int(0.75 * target.gpu.memory_bytes)   # JAX's default share


def test_gpu_target_config_describes_the_device():
  text = gpu_targets.GPUS["h100"].target_config()
  assert "cuda_compute_capability { major: 9 minor: 0 }" in text
  assert "core_count: 132" in text and 'platform_name: "CUDA"' in text
  assert "device_memory_size: 85899345920" in text
  assert "major: 8 minor: 0" in gpu_targets.GPUS["a100"].target_config()


@pytest.mark.parametrize("name", ["a3-highgpu-3g", "h200-8", "a2-megagpu-16g", "h100-16"])
def test_unknown_gpu_names_fall_through_to_one_line_listing_both(name):
  assert gpu_targets.parse_target(name) is None
  with pytest.raises(tpu_targets.UnknownTargetError) as raised:
    target_dry_run.parse_target(name)
  message = str(raised.value)
  assert "\n" not in message and "v5litepod-16" in message and "a3-highgpu-8g" in message


def test_without_the_cuda_plugin_the_error_says_how_to_install_it(monkeypatch):
  monkeypatch.setattr(gpu_targets.importlib.util, "find_spec", lambda name: None)
  with pytest.raises(gpu_targets.CudaPluginMissingError, match=r"\[cuda12\]"):
    gpu_targets.parse_target("h100-1").devices()


def test_every_target_offers_what_the_roofline_reads():
  for target in (tpu_targets.parse_target("v4-8"), gpu_targets.parse_target("a2-highgpu-8g")):
    line = target_dry_run.roofline(target.peak_flops, target.memory_bytes_per_s,
                                   target.interconnect_bytes_per_s, target)
    assert line.seconds == pytest.approx(1.0)


def _report(**changes):
  fields = dict(
      target="v5litepod-16", description="v5litepod-16: 16 TPU v5e chips (4x4)", chips=16,
      device_word="chip", peak_flops=197e12, flops_source="HLO",
      mesh_shape={"data": 16, "fsdp": 1, "model": 1}, batch_size=1024, num_params=22_000_000,
      memory={"argument": 2**30, "output": 2**29, "temp": 2**31, "alias": 2**29,
              "total": 3 * 2**30},
      hbm_bytes=16 * 2**30, flops=1.97e12, compiled_flops=0.2e12, bytes_accessed=8.19e9,
      model_flops=0.985e12, loop_iterations_added=22, uncounted_loops=0,
      roofline=target_dry_run.roofline(1.97e12, 8.19e9, 0.0, tpu_targets.parse_target("v5e-1")),
      compiler_seconds=None, collectives=(), compile_seconds=30.0)
  fields.update(changes)
  return target_dry_run.TargetReport(**fields)


def test_report_figures_follow_from_the_roofline():
  report = _report()
  assert report.step_seconds == pytest.approx(0.01)          # 1.97 TFLOP at 197 TFLOP/s
  assert report.images_per_second == pytest.approx(102_400)
  assert report.mfu_ceiling == pytest.approx(0.5)             # half the FLOPs are the model's
  assert report.fits and report.to_json()["fits"] is True
  summary = report.summary()
  assert "HBM per chip: 3.00 GiB of 16 GiB, fits" in summary
  assert "22 loop iterations added" in summary and "compiler's own estimate" not in summary
  step_line = summary.split("estimated step time:")[1].split("\n")[0]
  assert step_line.startswith(" 10.0 ms") and not re.search(r"-\d", step_line)


def test_report_on_a_gpu_speaks_of_gpus_and_jaxpr_flops():
  report = _report(device_word="GPU", flops_source="jaxpr", chips=1, target="h100-1",
                   description="h100-1: 1 NVIDIA H100")
  summary = report.summary()
  assert summary.startswith("GPU dry run") and "memory per GPU" in summary
  assert "from the step's jaxpr" in summary and "on 1 GPU " in summary
