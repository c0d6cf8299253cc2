"""Joins this process to a multi-process JAX run: TPU pod slices, GPU clusters,
or several processes on CPUs.

Every process runs the same command with `--distributed`; each one reads the
rows of every global batch that its devices hold (process 0's on the first
devices of the "data" axis, then process 1's...), and the trainer assembles the
global batch from them (`stream_state.process_rows`).
The workdir must be storage every process sees (gs://, NFS): orbax writes one
checkpoint from all of them.

  Cloud TPU VM pod slices: `--distributed` alone; JAX reads the slice's metadata.
  GPU clusters under SLURM (srun) or Open MPI (mpirun), Kubernetes JobSets:
    `--distributed` alone; JAX reads the launcher's environment.
  Anywhere else (hand-started processes, CPU hosts): on every process
    --coordinator_address=HOST:PORT   process 0's host and a free port, the same
                                      on every process
    --num_processes=N --process_id=I  I = 0 .. N-1, one per process
  Any of these fields implies `--distributed`; one given where a cluster manager
  is detected overrides what it says.

On CPUs, cross-process collectives go over gloo (TCP), which this jax
(`jax_cpu_collectives_implementation`, default "gloo") uses without being asked;
`JAX_CPU_COLLECTIVES_IMPLEMENTATION=mpi` picks MPI instead.
`tests/training/test_multiprocess.py` runs two CPU processes on localhost.
"""

from __future__ import annotations

import os

import jax

__all__ = ["initialize"]

# The cluster managers jax.distributed.initialize() asks when a field is omitted.
AUTO_DETECTED = "Cloud TPU, SLURM, Open MPI, Kubernetes"


def _check_coordinator(address: str) -> None:
  host, colon, port = address.rpartition(":")
  if not (colon and host and port.isdigit() and 0 < int(port) < 65536):
    raise ValueError(f"--coordinator_address={address!r} must be HOST:PORT "
                     "(process 0's host and a free port, e.g. 10.0.0.1:1234)")


def check_cluster_fields(coordinator_address: str | None, num_processes: int | None,
                         process_id: int | None) -> None:
  """Raises ValueError (one line naming the flag) for fields that cannot agree.

  `--num_processes` and `--process_id` come together (a process index means
  nothing without the count it indexes); either may be omitted only with the
  other, for a cluster manager to fill in.
  """
  if coordinator_address is not None:
    _check_coordinator(coordinator_address)
  if (num_processes is None) != (process_id is None):
    given, missing = (("--num_processes", "--process_id") if process_id is None
                      else ("--process_id", "--num_processes"))
    raise ValueError(f"{given} was given without {missing}: give both (with "
                     "--coordinator_address) or neither (auto-detected on "
                     f"{AUTO_DETECTED})")
  if num_processes is None:
    return
  if num_processes < 1:
    raise ValueError(f"--num_processes={num_processes} must be at least 1")
  if not 0 <= process_id < num_processes:
    raise ValueError(f"--process_id={process_id} must be in [0, "
                     f"--num_processes={num_processes})")


def initialize(enabled: bool, *, coordinator_address: str | None = None,
               num_processes: int | None = None, process_id: int | None = None) -> None:
  """Starts the distributed runtime when `enabled` or any cluster field is given.

  Must run before anything starts a JAX backend (any computation or
  `jax.devices()`). Omitted fields are auto-detected by JAX (see the module
  docstring); `JAX_COORDINATOR_ADDRESS` in the environment stands in for
  `coordinator_address`.

  Raises:
    ValueError: a field is malformed or out of range, the fields disagree
      (`check_cluster_fields`), or a field is missing and no cluster manager
      supplied it.
  """
  fields = {"--coordinator_address": coordinator_address,
            "--num_processes": num_processes, "--process_id": process_id}
  if not enabled and all(v is None for v in fields.values()):
    return
  check_cluster_fields(coordinator_address, num_processes, process_id)
  try:
    jax.distributed.initialize(coordinator_address=coordinator_address,
                               num_processes=num_processes, process_id=process_id)
  except ValueError as e:
    # JAX raises ValueError when a field is still unset after auto-detection.
    if os.environ.get("JAX_COORDINATOR_ADDRESS"):
      fields["--coordinator_address"] = os.environ["JAX_COORDINATOR_ADDRESS"]
    missing = [flag for flag, value in fields.items() if value is None]
    raise ValueError(
        f"--distributed: no cluster manager ({AUTO_DETECTED}) was detected to "
        f"supply {', '.join(missing) or 'the cluster'}; pass --coordinator_address="
        f"HOST:PORT, --num_processes and --process_id on every process (jax: {e})"
    ) from e
