"""Joins this process to a multi-process JAX run (TPU pod slices, GPU clusters).

`initialize(enabled, coordinator_address=..., num_processes=..., process_id=...)`
calls `jax.distributed.initialize` with whatever was given; what is omitted is
auto-detected by JAX (Cloud TPU metadata, SLURM, Open MPI, Kubernetes).
"""

from __future__ import annotations

import jax

__all__ = ["initialize"]


def initialize(enabled: bool, *, coordinator_address: str | None = None,
               num_processes: int | None = None, process_id: int | None = None) -> None:
  """Starts the distributed runtime when `enabled` or any cluster field is given.

  Raises:
    ValueError: a cluster field is out of range, or only some of them are given.
  """
  given = {"coordinator_address": coordinator_address, "num_processes": num_processes,
           "process_id": process_id}
  if not enabled and all(v is None for v in given.values()):
    return
  if num_processes is not None and num_processes < 1:
    raise ValueError(f"--num_processes={num_processes} must be at least 1")
  if process_id is not None and not 0 <= process_id < (num_processes or process_id + 1):
    raise ValueError(f"--process_id={process_id} must be in [0, --num_processes={num_processes})")
  jax.distributed.initialize(coordinator_address=coordinator_address,
                             num_processes=num_processes, process_id=process_id)
