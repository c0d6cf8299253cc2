"""NVIDIA GPU hosts by Google Cloud machine type, and their devices for an
ahead-of-time compile on a machine without a GPU.

  target = parse_target("a3-highgpu-8g")    # 8 H100; also "h100-8", "2xa3-highgpu-8g"
  devices = target.devices()                 # 8 abstract H100 devices

jax's CUDA plugin (the `cuda12` extra, or only jax-cuda12-plugin and
jax-cuda12-pjrt) makes a compile-only topology from a GPU target description
(`target_config`: XLA's GpuTargetConfig, a text proto of the device's
properties), as MaxText does for its A3 hosts; the GPU compiler then compiles
for it with no GPU present (it needs `ptxas` on PATH, as any GPU compile).
The description is written here from each GPU's published properties
(`GpuSpec`; NVIDIA's H100 and A100 datasheets and CUDA's occupancy tables).

Names: Google Cloud's A3 (`a3-highgpu-Ng`, N H100 80GB) and A2 machine types
(`a2-highgpu-Ng`: A100 40GB; `a2-ultragpu-Ng`: A100 80GB), N in 1, 2, 4, 8,
or the shorthand `h100-N`, `a100-N`, `a100-80gb-N`; `KxNAME` is K such hosts
(K processes). An unknown name is one line listing the known ones.

Memory: JAX preallocates 75 % of a GPU's memory by default
(XLA_PYTHON_CLIENT_MEM_FRACTION=.75), so a step fits when it needs at most
that (`GpuTarget.memory_bytes`).

Compile option: Triton GEMM fusions are off (`COMPILER_OPTIONS`); without a
GPU to autotune on, XLA 0.10.2's Triton tiling fails on some of the step's
matmuls ("Couldn't find output tile sizes"), so they compile as cuBLAS calls,
which changes fusion, not what is computed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from typing import Sequence

from vit_spectral import errors

GIB = 2**30
JAX_MEMORY_FRACTION = 0.75
COMPILER_OPTIONS = {"xla_gpu_enable_triton_gemm": False}


class CudaPluginMissingError(errors.RunError):
  """A GPU compile was asked for but jax's CUDA plugin is not importable."""


@dataclasses.dataclass(frozen=True)
class GpuSpec:
  """One GPU model's published properties.

  Attributes:
    name: "H100 80GB", ...
    compute_capability: (major, minor).
    sm_count: streaming multiprocessors.
    fp32_cores_per_sm: FP32 cores per SM.
    clock_ghz: boost clock.
    l2_bytes: L2 cache size.
    memory_bytes: HBM size.
    shared_memory_per_sm: shared memory per SM, bytes.
    shared_memory_per_block_optin: the most shared memory one block may opt into, bytes.
    peak_bf16_flops: dense bf16 tensor-core FLOP/s.
    memory_bytes_per_s: HBM bandwidth.
    nvlink_bytes_per_s: NVLink bandwidth per GPU, one way.
  """

  name: str
  compute_capability: tuple[int, int]
  sm_count: int
  fp32_cores_per_sm: int
  clock_ghz: float
  l2_bytes: int
  memory_bytes: int
  shared_memory_per_sm: int
  shared_memory_per_block_optin: int
  peak_bf16_flops: float
  memory_bytes_per_s: float
  nvlink_bytes_per_s: float

  def target_config(self) -> str:
    """XLA's GpuTargetConfig for this GPU, as a text proto."""
    major, minor = self.compute_capability
    device = {
        "threads_per_block_limit": 1024, "threads_per_warp": 32,
        "shared_memory_per_block": 48 * 1024,
        "shared_memory_per_core": self.shared_memory_per_sm,
        "threads_per_core_limit": 2048, "core_count": self.sm_count,
        "fpus_per_core": self.fp32_cores_per_sm,
        "block_dim_limit_x": 2**31 - 1, "block_dim_limit_y": 65535, "block_dim_limit_z": 65535,
        "memory_bandwidth": int(self.memory_bytes_per_s), "l2_cache_size": self.l2_bytes,
        "clock_rate_ghz": self.clock_ghz, "device_memory_size": self.memory_bytes,
        "shared_memory_per_block_optin": self.shared_memory_per_block_optin,
        "registers_per_core_limit": 65536, "registers_per_block_limit": 65536,
    }
    lines = ["gpu_device_info {"]
    lines += [f"  {key}: {value}" for key, value in device.items()]
    lines += [f"  cuda_compute_capability {{ major: {major} minor: {minor} }}", "}",
              'platform_name: "CUDA"', "dnn_version_info { major: 9 minor: 1 patch: 0 }",
              f'device_description_str: "NVIDIA {self.name}"']
    return "\n".join(lines) + "\n"


GPUS = {
    "h100": GpuSpec("H100 80GB HBM3", (9, 0), 132, 128, 1.98, 50 * 2**20, 80 * GIB,
                    228 * 1024, 227 * 1024, 989.4e12, 3.35e12, 450e9),
    "a100": GpuSpec("A100-SXM4-40GB", (8, 0), 108, 64, 1.41, 40 * 2**20, 40 * GIB,
                    164 * 1024, 163 * 1024, 312e12, 1.555e12, 300e9),
    "a100-80gb": GpuSpec("A100-SXM4-80GB", (8, 0), 108, 64, 1.41, 40 * 2**20, 80 * GIB,
                         164 * 1024, 163 * 1024, 312e12, 2.039e12, 300e9),
}
MACHINE_TYPES = {"a3-highgpu": "h100", "a2-highgpu": "a100", "a2-ultragpu": "a100-80gb"}
GPU_COUNTS = (1, 2, 4, 8)
_MACHINE = re.compile(r"^(?:(?P<hosts>\d+)x)?(?P<family>a[0-9]-[a-z]+gpu)-(?P<gpus>\d+)g$")
_SHORT = re.compile(r"^(?:(?P<hosts>\d+)x)?(?P<gpu>h100|a100-80gb|a100)-(?P<gpus>\d+)$")


@dataclasses.dataclass(frozen=True)
class GpuTarget:
  """`hosts` hosts of `gpus_per_host` GPUs of one model.

  The attributes every target has (`tpu_targets.TpuTarget` too): name,
  num_chips, device_word, peak_flops, memory_bytes, memory_bytes_per_s,
  interconnect_bytes_per_s, compiler_options, describe(), devices().
  """

  name: str
  gpu: GpuSpec
  gpus_per_host: int
  hosts: int = 1
  device_word = "GPU"
  compiler_options = COMPILER_OPTIONS

  @property
  def num_chips(self) -> int:
    return self.gpus_per_host * self.hosts

  @property
  def peak_flops(self) -> float:
    return self.gpu.peak_bf16_flops

  @property
  def memory_bytes(self) -> int:
    """What JAX may use of one GPU's memory by default (75 %)."""
    return int(self.gpu.memory_bytes * JAX_MEMORY_FRACTION)

  @property
  def memory_bytes_per_s(self) -> float:
    return self.gpu.memory_bytes_per_s

  @property
  def interconnect_bytes_per_s(self) -> float:
    return self.gpu.nvlink_bytes_per_s

  def describe(self) -> str:
    hosts = f"{self.hosts} hosts of " if self.hosts > 1 else ""
    return (f"{self.name}: {hosts}{self.gpus_per_host} NVIDIA {self.gpu.name}, "
            f"{self.memory_bytes / GIB:g} GiB each for JAX (75 % of "
            f"{self.gpu.memory_bytes / GIB:g} GiB)")

  def devices(self) -> Sequence:
    """The abstract devices (module docstring).

    Raises:
      CudaPluginMissingError: jax's CUDA plugin is not installed.
    """
    if importlib.util.find_spec("jax_plugins.xla_cuda12") is None and \
       importlib.util.find_spec("jax_cuda12_plugin") is None:
      raise CudaPluginMissingError(
          f"--target={self.name} compiles with the GPU compiler, which comes with jax's "
          "CUDA plugin: pip install -c constraints.txt -e '.[cuda12]' (or only "
          "jax-cuda12-plugin and jax-cuda12-pjrt, the versions constraints.txt pins)")
    if importlib.util.find_spec("nvidia.cudnn") is None:
      raise CudaPluginMissingError(
          f"--target={self.name} compiles the step a GPU runs, whose attention is cuDNN's "
          "flash attention (attention.fused); the compile needs cuDNN's library: pip "
          "install nvidia-cudnn-cu12 (the version constraints.txt pins; the '.[cuda12]' "
          "extra brings it)")
    from jax.experimental import topologies  # pylint: disable=import-outside-toplevel
    topology = topologies.get_topology_desc(
        platform="cuda", topology_name="", target_config=self.gpu.target_config(),
        topology=f"1x{self.hosts}x{self.gpus_per_host}")
    return topology.devices


def known_targets() -> list[str]:
  names = [f"{family}-{n}g" for family in MACHINE_TYPES for n in GPU_COUNTS]
  return names + [f"{gpu}-{n}" for gpu in GPUS for n in GPU_COUNTS]


def parse_target(name: str) -> GpuTarget | None:
  """The GPU hosts `name` names, or None when it names none."""
  text = name.strip().lower()
  match = _MACHINE.match(text)
  if match and match["family"] in MACHINE_TYPES:
    gpu = MACHINE_TYPES[match["family"]]
  else:
    match = _SHORT.match(text)
    gpu = match["gpu"] if match else None
  if gpu is None or int(match["gpus"]) not in GPU_COUNTS or int(match["hosts"] or 1) < 1:
    return None
  return GpuTarget(name, GPUS[gpu], int(match["gpus"]), int(match["hosts"] or 1))
