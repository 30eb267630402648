"""Rows of one sample spread over devices and processes: :class:`RowShards`, built by :func:`shard_rows`.

Every process passes only the rows it holds; the global sample is their concatenation in process order. Rows are
padded to equal shards (one per device of a 1-D mesh with axis ``"rows"``) and a mask marks the real ones, so any
row counts work. The row-scaled computations (kernel sums, MMD, HSIC, the BKE pseudolikelihood, JDL) accept a
:class:`RowShards` wherever they take an (n, d) sample and return the single-process answer: results that are
small (statistics, parameters) come back replicated on every process, n-sized ones stay sharded.
"""

import zlib
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["row_mesh", "shard_rows", "RowShards", "load_rows", "local_rows", "gather_rows"]

AXIS = "rows"


def row_mesh(devices=None) -> Mesh:
    """A 1-D mesh with axis "rows" over ``devices``.

    Args:
        devices: the devices to spread rows over (default: every device of every process).

    Returns:
        Mesh: the 1-D "rows" mesh.

    Raises:
        ValueError: for an empty list of devices.
    """
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("devices is empty: give at least one device (default: jax.devices())")
    return Mesh(np.asarray(devices), (AXIS,))


@jax.tree_util.register_pytree_node_class
class RowShards:
    """One sample of ``num_rows`` rows split over the devices of a 1-D mesh, padded to equal shards.

    Padded rows repeat a real row of their process (finite values), and every computation that takes a RowShards
    gives them zero weight. A pytree (``counts`` and ``mesh`` static), so it passes through ``jit``, ``grad`` and
    NUTS. Build it with :func:`shard_rows` or :func:`load_rows`; ``rows[:, columns]`` selects columns.

    Attributes:
        values: (N, ...) global ``jax.Array`` sharded by rows (N >= num_rows, a multiple of the device count).
        mask: (N,) bool, True on real rows.
        counts: the real rows of each process (they come first in its N / P padded rows).
        mesh: the 1-D "rows" mesh.
        num_rows: n, the real rows of the sample.
        shape: (n, ...), the shape of the sample the shards hold.
        dtype: the dtype of the values.
    """

    def __init__(self, values, mask, counts: tuple, mesh: Mesh):
        self.values, self.mask, self.counts, self.mesh = values, mask, tuple(int(c) for c in counts), mesh

    @property
    def dtype(self):
        """The dtype of the values."""
        return self.values.dtype

    @property
    def num_rows(self) -> int:
        """n, the real rows of the sample."""
        return sum(self.counts)

    def tree_flatten(self):
        return (self.values, self.mask), (self.counts, self.mesh)

    @classmethod
    def tree_unflatten(cls, static, leaves):
        return cls(*leaves, *static)

    @property
    def shape(self) -> tuple:
        """(num_rows, ...): the shape of the sample the shards hold."""
        return (self.num_rows,) + tuple(self.values.shape[1:])

    def with_values(self, values) -> "RowShards":
        """The same rows and mask with other per-row values.

        Args:
            values: (N, ...) array of per-row values, sharded by rows like ``self.values``.

        Returns:
            RowShards: ``values`` with this mask, counts and mesh.

        Raises:
            Nothing is checked: a computation on the shards decides what the values mean.
        """
        return RowShards(values, self.mask, self.counts, self.mesh)

    def padded_index(self, index):
        """Positions in ``values`` of real rows (traceable).

        Args:
            index: integer array of real-row indices in [0, n), the rows in process order.

        Returns:
            Integer array of the same shape: their positions among the N padded rows.

        Raises:
            Nothing is checked (traceable): indices outside [0, n) give positions of other rows.
        """
        width = self.values.shape[0] // len(self.counts)
        starts = np.cumsum((0,) + self.counts[:-1])
        process = jnp.searchsorted(jnp.asarray(starts[1:]), index, side="right")
        return index + process * width - jnp.asarray(starts)[process]

    def take(self, index):
        """Chosen real rows gathered into one small replicated array (traceable).

        Args:
            index: (k,) integer indices of real rows in [0, n).

        Returns:
            (k, ...) array of those rows, on every process.

        Raises:
            Nothing is checked (traceable): indices outside [0, n) give other rows.
        """
        return self.values[self.padded_index(index)]

    def __getitem__(self, index) -> "RowShards":
        """Columns of every row, still split by rows: ``rows[:, :1]``, ``rows[:, [0, 2]]``, ``rows[:, 1]``.

        The row axis takes only ``:`` (all rows): a sample's rows stay where they are, and
        :meth:`take` gathers chosen rows into one array. Every process must make the same call (the selection
        runs on the global array).

        Args:
            index: ``(slice(None), *column_index)``: ``:`` for the rows, then any NumPy index of the trailing
                axes (slices, integers, integer arrays).

        Returns:
            RowShards: the same rows and mask with values ``values[:, *column_index]`` (N, ...).

        Raises:
            TypeError: for an index of the row axis other than ``:``.
        """
        index = index if isinstance(index, tuple) else (index,)
        if not index or not (isinstance(index[0], slice) and index[0] == slice(None)):
            raise TypeError(f"RowShards can be indexed on its columns only, as rows[:, columns] (got index {index!r}); "
                            "rows.take(row_index) gathers chosen rows into one array")
        values = self.values[(slice(None),) + index[1:]]  # the row axis stays first and whole
        sharding = NamedSharding(self.mesh, PartitionSpec(AXIS, *([None] * (values.ndim - 1))))
        return self.with_values(jax.device_put(values, sharding))

    def __repr__(self):
        return (f"RowShards(num_rows={self.num_rows}, padded_shape={tuple(self.values.shape)}, "
                f"devices={self.mesh.size})")


def shard_rows(local_rows, mesh: Mesh | None = None) -> RowShards:
    """Build the global row-sharded sample from this process's rows (call it on every process).

    Args:
        local_rows: (n_p, ...) array, the rows this process holds (n_p may differ between processes; a process
            may hold none if another holds some).
        mesh: a 1-D mesh with axis ``"rows"`` (default :func:`row_mesh`, every device of every process).

    Returns:
        RowShards with ``num_rows = sum_p n_p``; each process pads its rows to ``k`` x (its device count) rows,
        ``k`` the same for all, so no process ever holds another's rows.

    Raises:
        ValueError: for a mesh that is not 1-D over "rows", rows of different trailing shape or dtype across
            processes, or no rows at all.
    """
    mesh = row_mesh() if mesh is None else mesh
    if mesh.axis_names != (AXIS,):
        raise ValueError(f"mesh must be 1-D with axis 'rows' (bayeskern.sharding.row_mesh), got {mesh.axis_names}")
    local = np.asarray(local_rows)
    if local.dtype.kind not in "biuf":  # the checks of bayeskern._validation, which builds on this module
        raise TypeError(f"local_rows must hold real numbers, got dtype {local.dtype}")
    if local.dtype.kind == "f" and not np.all(np.isfinite(local)):
        raise ValueError("local_rows contains NaN or inf")
    if local.ndim == 0:
        raise ValueError("local_rows must have a leading row axis, got a scalar")
    counts = _all_processes(np.array([local.shape[0]], np.int64))[:, 0]
    layout = zlib.crc32(repr((local.shape[1:], local.dtype.str)).encode())
    if np.ptp(_all_processes(np.array([layout], np.int64))):
        raise ValueError(f"local_rows must have the same trailing shape and dtype on every process; this process "
                         f"has {local.shape[1:]} and {local.dtype}")
    if counts.sum() == 0:
        raise ValueError("local_rows is empty on every process: the sample has no rows")
    local_devices = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
    per_device = max(1, -(-int(counts.max()) // len(local_devices)))
    width = per_device * len(local_devices)
    filler = local[:1] if len(local) else np.zeros((1,) + local.shape[1:], local.dtype)
    padded = np.concatenate([local, np.broadcast_to(filler, (width - len(local),) + local.shape[1:])])
    mask = np.arange(width) < len(local)
    global_rows = width * jax.process_count()

    def place(a):
        sharding = NamedSharding(mesh, PartitionSpec(AXIS, *([None] * (a.ndim - 1))))
        return jax.make_array_from_process_local_data(sharding, a, (global_rows,) + a.shape[1:])

    return RowShards(place(padded), place(mask), tuple(counts.tolist()), mesh)


def check_same_layout(A, B, names: str):
    """Raise ``ValueError`` unless A and B are RowShards with the same real rows on every device (paired rows)."""
    if not (isinstance(A, RowShards) and isinstance(B, RowShards)):
        raise ValueError(f"{names} must both be RowShards (shard_rows) or both plain arrays")
    with jax.ensure_compile_time_eval():
        paired = A.values.shape[0] == B.values.shape[0] and A.mesh == B.mesh and bool(_same_mask(A.mask, B.mask))
    if not paired:
        raise ValueError(f"{names} are not paired row by row: each process must pass the same number of rows "
                         f"for both to shard_rows")


@jax.jit
def _same_mask(a, b):
    return jnp.all(a == b)


def reject_row_shards(function: str, **arrays):
    """Raise ``TypeError`` if an argument is a RowShards: ``function`` needs its data on one process."""
    for name, value in arrays.items():
        if isinstance(value, RowShards):
            raise TypeError(f"{function} takes {name} on one process, got a RowShards; the statistics "
                            f"(mmd2_*, hsic_*, kernel sums) take rows spread over processes")


def any_process(flag: bool) -> bool:
    """True on every process when ``flag`` is True on any (one small collective; the flag itself in one process)."""
    return bool(_all_processes(np.array([bool(flag)])).any())


def _all_processes(x: np.ndarray) -> np.ndarray:
    """Stack a small host array from every process (leading axis: process index); no collective in one process.
    Safe inside a ``grad`` trace (unlike ``multihost_utils.process_allgather``)."""
    count = jax.process_count()
    if count == 1:
        return x[None]
    firsts = {}
    for device in jax.devices():
        firsts.setdefault(device.process_index, device)
    mesh = Mesh(np.asarray([firsts[p] for p in range(count)]), ("process",))
    stacked = jax.make_array_from_process_local_data(NamedSharding(mesh, PartitionSpec("process")), x[None],
                                                     (count,) + x.shape)
    with jax.ensure_compile_time_eval():  # also when called while a model is being traced
        return np.asarray(jax.jit(lambda a: a, out_shardings=NamedSharding(mesh, PartitionSpec()))(stacked))


def load_rows(path, mesh: Mesh | None = None, *, start: int = 0, stop: int | None = None) -> RowShards:
    """Read this process's share of rows [start, stop) of an ``.npy`` file and :func:`shard_rows` them.

    The file is memory-mapped, so a process reads only its own rows: process p of P takes rows
    [start + p k / P, start + (p + 1) k / P) of the k = stop - start selected ones (default: the whole file).

    Args:
        path: the ``.npy`` file, (n, ...) rows.
        mesh: a 1-D "rows" mesh (default :func:`row_mesh`).
        start: the first row to read.
        stop: one past the last row (default n).

    Returns:
        RowShards of the k selected rows.

    Raises:
        FileNotFoundError: when the file does not exist.
        TypeError: for start or stop that are not integers, or rows that are not real numbers.
        ValueError: for a scalar file, 0 <= start < stop <= n violated, or non-finite rows.
    """
    data = np.load(path, mmap_mode="r")
    if data.ndim == 0:
        raise ValueError(f"{path} holds a scalar, not rows")
    for name, value in (("start", start), ("stop", stop)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
            raise TypeError(f"{name} must be an integer row index, got {value!r}")
    stop = data.shape[0] if stop is None else stop
    if not 0 <= start < stop <= data.shape[0]:
        raise ValueError(f"need 0 <= start < stop <= {data.shape[0]} (the rows of {path}), got start={start}, "
                         f"stop={stop}")
    k, p, count = stop - start, jax.process_index(), jax.process_count()
    return shard_rows(np.array(data[start + p * k // count:start + (p + 1) * k // count]), mesh)


def local_rows(rows: RowShards) -> np.ndarray:
    """The real rows this process holds (its part of the sample, in order).

    Args:
        rows: a RowShards.

    Returns:
        (n_p, ...) NumPy array.

    Raises:
        TypeError: when rows is not a RowShards.
    """
    if not isinstance(rows, RowShards):
        raise TypeError(f"rows must be a RowShards (shard_rows), got {type(rows).__name__}")
    shards = sorted(rows.values.addressable_shards, key=lambda s: s.index[0].start or 0)
    masks = {(s.index[0].start or 0): np.asarray(s.data) for s in rows.mask.addressable_shards}
    return np.concatenate([np.asarray(s.data)[masks[s.index[0].start or 0]] for s in shards])


def gather_rows(rows: RowShards) -> np.ndarray:
    """Every real row of the sample, in process order, on every process (a collective: call it on every process).

    For computations whose cost is linear in the rows but which need rows from all processes together (the
    random-feature tests lay rows out at random); the values cross the network once.

    Args:
        rows: a RowShards.

    Returns:
        (n, ...) NumPy array, the whole sample.

    Raises:
        TypeError: when rows is not a RowShards.
    """
    if not isinstance(rows, RowShards):
        raise TypeError(f"rows must be a RowShards (shard_rows), got {type(rows).__name__}")
    replicated = NamedSharding(rows.mesh, PartitionSpec())
    values, mask = jax.jit(lambda v, m: (v, m), out_shardings=(replicated, replicated))(rows.values, rows.mask)
    return np.asarray(values)[np.asarray(mask)]


def shard_map_rows(fn, rows_args: int, mesh: Mesh, out_sharded: bool):
    """``jax.shard_map`` of ``fn(*row_args, *replicated_args)`` over the "rows" axis: the first ``rows_args``
    arguments (pytrees) are split by rows, the rest replicated; the output is split by rows or replicated."""
    def wrapped(*args):
        specs = tuple(PartitionSpec(AXIS) if i < rows_args else PartitionSpec() for i in range(len(args)))
        out = PartitionSpec(AXIS) if out_sharded else PartitionSpec()
        return jax.shard_map(fn, mesh=mesh, in_specs=specs, out_specs=out, check_vma=False)(*args)

    return wrapped


def ring_pass(fn, rows_a, rows_b, mesh: Mesh, *replicated):
    """sum over shards q of ``fn(a_p, b_q, *replicated)`` on each shard p of ``rows_a``: the shards of ``rows_b``
    travel once around the ring of devices (``ppermute``), so every pair of shards meets and each device holds
    two shards at a time. Call inside ``jit``; returns an array split by rows like ``rows_a``."""
    size = mesh.shape[AXIS]
    perm = [(i, (i + 1) % size) for i in range(size)]

    def local(a, b, *rep):
        def step(carry, _):
            acc, b = carry
            return (acc + fn(a, b, *rep), jax.lax.ppermute(b, AXIS, perm)), None

        shape = jax.eval_shape(fn, a, b, *rep)
        init = jnp.zeros(shape.shape, shape.dtype)
        (acc, _), _ = jax.lax.scan(step, (init, b), None, length=size)
        return acc

    return shard_map_rows(local, 2, mesh, True)(rows_a, rows_b, *replicated)


def local_then_sum(fn, rows_a, mesh: Mesh, *replicated):
    """sum over shards p of ``fn(a_p, *replicated)`` (a pytree of small arrays), replicated on every process."""
    def local(a, *rep):
        return jax.tree.map(partial(jax.lax.psum, axis_name=AXIS), fn(a, *rep))

    return shard_map_rows(local, 1, mesh, False)(rows_a, *replicated)
