"""Planning a run without running it: compile-only dry runs on the devices
present or for a TPU slice or GPU host, and what the compiled step costs.

  dry_run          the trainer's own set-up, its sharded train step compiled (--dry_run)
  target_dry_run   the same step compiled for a named TPU slice or GPU host (--target)
  tpu_targets      TPU slices: topologies from libtpu, memory, peak rates
  gpu_targets      GPU hosts: the CUDA plugin's compile-only devices, memory, peak rates
  hlo_costs        FLOPs, bytes and collectives read from the compiled HLO
  jaxpr_costs      matrix FLOPs read from the traced jaxpr (remat included)

Submodules are imported on use (`from vit_spectral.planning import dry_run`).
"""

__all__ = ["dry_run", "gpu_targets", "hlo_costs", "jaxpr_costs", "target_dry_run",
           "tpu_targets"]
