"""Start bayeskern on several processes or hosts (JAX's multi-controller runtime).

Every process runs the same script: :func:`initialize` first, then each loads only its own rows
(:func:`bayeskern.sharding.load_rows` or :func:`bayeskern.sharding.shard_rows`) and calls the same functions; the
results that are small come back identical on every process. See the cluster guide in the docs.
"""

import os

import jax

__all__ = ["initialize", "CLUSTER_SIZE_VARIABLES"]

CLUSTER_SIZE_VARIABLES = ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
"""Environment variables (SLURM, Open MPI, MPICH) whose value > 1 means the launcher started several processes."""


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *, local_device_ids=None, cpu_collectives: str = "gloo",
               initialization_timeout: int = 300) -> bool:
    """Connect this process to the others (``jax.distributed.initialize``); a no-op for a single process.

    Call it at the top of the script, before any JAX computation. Three ways to launch:

    - manual: pass ``coordinator_address`` (``"host:port"`` of process 0), ``num_processes`` and ``process_id``;
    - SLURM (``srun``) or Open MPI / MPICH (``mpirun``): pass nothing; JAX reads the launcher's environment;
    - one plain process (no arguments, no launcher, or ``num_processes=1``): nothing happens.

    Args:
        coordinator_address: ``"host:port"`` reachable from every process, served by process 0.
        num_processes: total number of processes.
        process_id: this process's index in [0, num_processes).
        local_device_ids: the local devices this process uses (e.g. one GPU per process); default all.
        cpu_collectives: the CPU collectives implementation, ``"gloo"`` (default) or ``"mpi"``.
        initialization_timeout: seconds to wait for every process to connect.

    Returns:
        True when this process joined a multi-process run, False for the single-process no-op.

    Raises:
        ValueError: for a process_id outside [0, num_processes), num_processes < 1, only some of the manual
            arguments, or an unknown ``cpu_collectives``.
        RuntimeError: (from JAX) when a JAX computation already ran in this process.
    """
    if cpu_collectives not in ("gloo", "mpi"):
        raise ValueError(f"cpu_collectives must be 'gloo' or 'mpi', got {cpu_collectives!r}")
    manual = (coordinator_address, num_processes, process_id)
    if num_processes is not None and (int(num_processes) != num_processes or num_processes < 1):
        raise ValueError(f"num_processes must be a positive integer, got {num_processes!r}")
    if num_processes == 1:
        return False
    if any(a is not None for a in manual) and any(a is None for a in manual):
        raise ValueError("pass coordinator_address, num_processes and process_id together (manual launch), or none "
                         f"of them (SLURM, mpirun); got {coordinator_address!r}, {num_processes!r}, {process_id!r}")
    if process_id is not None and not (int(process_id) == process_id and 0 <= process_id < num_processes):
        raise ValueError(f"process_id must be an integer in [0, {num_processes}), got {process_id!r}")
    if coordinator_address is None and not _launched_as_many():
        return False
    if jax.distributed.is_initialized():
        return True
    jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    jax.distributed.initialize(coordinator_address, num_processes, process_id, local_device_ids=local_device_ids,
                               initialization_timeout=initialization_timeout)
    return True


def _launched_as_many() -> bool:
    """True when a cluster launcher's environment says more than one process was started."""
    for name in CLUSTER_SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 1:
            return True
    return False
