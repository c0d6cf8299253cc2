"""`training.tpu_targets` and the arithmetic of `training.tpu_dry_run`
(slice names, topologies, the roofline, the compiler's out-of-memory line),
without libtpu; the TPU compiles themselves run in CI's TPU step
(.ci/tpu_dry_runs.sh) and in benchmarks/tpu_dry_runs.py."""

import math

import pytest

from vit_spectral.training import tpu_dry_run, tpu_targets


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
  chip = tpu_targets.CHIPS["v5e"]
  line = tpu_dry_run.roofline(flops=197e12, bytes_accessed=819e9 / 2,
                              collective_bytes=0.0, chip=chip)
  assert line.compute_seconds == pytest.approx(1.0) and line.hbm_seconds == pytest.approx(0.5)
  assert line.seconds == pytest.approx(1.0) and line.bound == "compute"
  memory_bound = tpu_dry_run.roofline(1e12, 819e9 * 3, 0.0, chip)
  assert memory_bound.bound == "HBM" and memory_bound.seconds == pytest.approx(3.0)


def test_the_compilers_out_of_memory_line_gives_needed_and_available():
  oom = tpu_dry_run._OutOfMemory(  # pylint: disable=protected-access
      "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO "
      "temporaries (22.22G) exceeds available HBM (15.75G).")
  assert oom.needed == pytest.approx(22.22 * 2**30)
  assert oom.available == pytest.approx(15.75 * 2**30)
  other = tpu_dry_run._OutOfMemory(  # pylint: disable=protected-access
      "RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 17.39G of 15.75G hbm.")
  assert (other.needed, other.available) == (pytest.approx(17.39 * 2**30),
                                              pytest.approx(15.75 * 2**30))
