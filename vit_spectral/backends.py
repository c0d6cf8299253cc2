"""The platform a program is compiled for, and every default that depends on it.

    backend = backends.for_devices(mesh.devices.flat)   # a run: its own devices
    backend = backends.for_devices(target.devices())    # a dry run: the target's
    backend.defaults(encoder_mode="scan")               # what it resolves to

One place decides each backend-dependent choice from a platform passed in
(`Backend`): the encoder's saved residuals (`encoder_residuals`) and the fused
attention kernel (`attention_kernel`). The trainer and the dry run hand it to
`ModelSpec.build`, which writes it into the specs, so the traced program reads
no `jax.default_backend()` and a dry run compiles what its target would run
(issue 44). A module built by hand without one takes this process's backend
(`of_process`), the only place that asks JAX. No JAX import at module level.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

__all__ = ["ATTENTION_KERNELS", "PLATFORMS", "Backend", "for_devices", "of_process",
           "resolve"]

PLATFORMS = ("cpu", "gpu", "tpu")
# The kernel a fused attention call runs (`attention.fused`): XLA's einsums and
# softmax, cuDNN's flash attention (GPU), Pallas' splash attention (TPU).
ATTENTION_KERNELS = ("xla", "cudnn", "splash")
_KERNEL_OF_PLATFORM = {"cpu": "xla", "gpu": "cudnn", "tpu": "splash"}


@dataclasses.dataclass(frozen=True)
class Backend:
  """A platform ("cpu", "gpu" or "tpu") and, where known, its device kind.

  Attributes:
    platform: one of PLATFORMS (jax's `Device.platform`).
    device_kind: jax's `Device.device_kind` ("NVIDIA H100 80GB HBM3",
      "TPU v5 lite", ...); "" when unknown.
  """
  platform: str
  device_kind: str = ""

  def __post_init__(self):
    if self.platform not in PLATFORMS:
      raise ValueError(f"backend platform={self.platform!r}; choose one of {list(PLATFORMS)}")

  def encoder_residuals(self, mode: str) -> str:
    """What a non-remat encoder saves for the backward pass, by default.

    "dots" for the scanned encoder (the Dense outputs and the fused attention
    kernel's; the element-wise work is recomputed in the backward pass, where
    it fuses): every residual written out of the loop cost the CPU ~12 % of
    its step and took a GPU step to 20.4 GiB (5.1 with "dots"); "all" for the
    loop (docs/speed.md has the figures).
    """
    del self
    return "dots" if mode == "scan" else "all"

  def unrolls_encoder(self, mode: str) -> bool:
    """Whether the scanned encoder runs every block of a segment in one loop
    iteration by default: on a GPU, where XLA fuses nothing across the loop
    body (the scan cost 1.44x the loop's step on an H200) and the unrolled
    scan compiles to the loop's program with the scan's parameter layout."""
    return mode == "scan" and self.platform == "gpu"

  @property
  def attention_kernel(self) -> str:
    """The kernel of a fused attention call here (one of ATTENTION_KERNELS);
    `attention.fused` falls back to "xla" for a call the kernel cannot take."""
    return _KERNEL_OF_PLATFORM[self.platform]

  def defaults(self, encoder_mode: str) -> dict[str, Any]:
    """Every default resolved for this backend, by name (what a dry run prints)."""
    return {"platform": self.platform, "device_kind": self.device_kind,
            "encoder_residuals": self.encoder_residuals(encoder_mode),
            "encoder_unrolled": self.unrolls_encoder(encoder_mode),
            "attention_kernel": self.attention_kernel}


def for_devices(devices: Iterable[Any]) -> Backend:
  """The backend of `devices` (jax devices, real or a compile-only target's);
  they must share one platform."""
  devices = list(devices)
  if not devices:
    raise ValueError("for_devices needs at least one device")
  platforms = {d.platform for d in devices}
  if len(platforms) != 1:
    raise ValueError(f"devices of several platforms {sorted(platforms)}; a program "
                     "compiles for one")
  return Backend(devices[0].platform, getattr(devices[0], "device_kind", "") or "")


def of_process() -> Backend:
  """This process's default backend: for a model built without one."""
  import jax  # pylint: disable=import-outside-toplevel  (asked here only)
  return for_devices(jax.devices()[:1])


def resolve(platform: str | None) -> Backend:
  """`Backend(platform)`, or this process's backend for None."""
  return of_process() if platform is None else Backend(platform)
