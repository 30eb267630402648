"""Row sharding of n-sized arrays across devices (JAX's sharding API), shared by JDL and compression.

Algorithm 1's column evaluations, the factor L and every n-sized reduction (L^T L, A_Y^T A_X, column sums and
extremes) follow the sharding of the sample: with the rows of X and Y split over the devices of a 1-D mesh, XLA
partitions the same compiled code, so one function runs on one CPU, several GPUs or several hosts' devices.
"""

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["row_mesh", "shard_rows"]


def row_mesh(devices=None) -> Mesh:
    """A 1-D mesh with axis "rows" over ``devices`` (default: all local devices)."""
    devices = jax.devices() if devices is None else list(devices)
    return Mesh(np.asarray(devices), ("rows",))


def shard_rows(X, mesh: Mesh | None = None):
    """Place X (n, ...) with its rows split across the mesh's devices; n must be a multiple of the device count."""
    mesh = row_mesh() if mesh is None else mesh
    X = np.asarray(X)
    count = mesh.devices.size
    if X.shape[0] % count:
        raise ValueError(f"X has {X.shape[0]} rows, not a multiple of the {count} devices to shard them over")
    return jax.device_put(X, NamedSharding(mesh, PartitionSpec("rows", *([None] * (X.ndim - 1)))))
