"""Matrix-free kernel reductions: mat-vecs, row sums and totals in blocks.

Nothing here forms an n x m kernel matrix: rows and columns are cut into blocks
of at most ``block_size`` points, so memory is O(block_size^2 + n k) whatever n
is. With ``block_size >= max(n, m)`` the computation is the dense one.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._validation import as_finite_array, check_count, check_same_length, num_points
from ..sharding import RowShards, local_then_sum, ring_pass, shard_map_rows
from .base import Kernel, TensorProduct
from .stationary import _UNROLL_MAX_DIM, Stationary, _sqdist_exact, squared_distances

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "kernel_matvec",
    "kernel_row_sums",
    "kernel_sum",
    "block_row_reduce",
]

DEFAULT_BLOCK_SIZE = 1024
"""Rows per block of the blockwise reductions: memory O(block_size x n) per pass."""


def split_rows(A, size: int):
    """Cut a data pytree of n rows into blocks of ``size`` rows, padding the last block by repeating row 0.

    Args:
        A: a pytree of arrays with n leading rows.
        size: rows per block, >= 1.

    Returns:
        (blocks, mask): the pytree with leading axes (n_blocks, size), and a (n_blocks, size) bool mask that is
        True on real rows. Traceable.
    """
    n = num_points(A)
    n_blocks = -(-n // size)
    pad = n_blocks * size - n

    def cut(a):
        if pad:
            a = jnp.concatenate([a, jnp.broadcast_to(a[:1], (pad,) + a.shape[1:])])
        return a.reshape((n_blocks, size) + a.shape[1:])

    mask = (jnp.arange(n_blocks * size) < n).reshape(n_blocks, size)
    return jax.tree.map(cut, A), mask


def block_row_reduce(fn, A, B, *, block_size: int = DEFAULT_BLOCK_SIZE):
    """Row-wise sums over column blocks, out[i] = sum_J fn(A_I, B_J, mask_J)[i]: the generic blocked reduction.

    Args:
        fn: ``fn(A_block, B_block, col_mask)`` returning an array with leading dimension ``len(A_block)``; it must
            zero the contribution of padded columns (where ``col_mask`` is False).
        A: pytree of arrays with n leading rows.
        B: pytree of arrays with m leading rows.
        block_size: rows per block of A and of B.

    Returns:
        The per-row sums, leading dimension n. Traceable (use inside ``jit``); memory O(block_size^2).

    Raises:
        TypeError: for an fn that is not callable, a block_size that is not an integer, or arrays of non-real data.
        ValueError: for a block_size below 1 or pytrees whose arrays disagree in their number of rows.
    """
    check_count(block_size, "block_size")
    if not callable(fn):
        raise TypeError(f"fn must be a function fn(A_block, B_block, col_mask), got {fn!r}")
    A, B = _real_tree(A, "A"), _real_tree(B, "B")
    n, m = num_points(A), num_points(B)
    if n <= block_size and m <= block_size:   # one block: no loop to compile
        return fn(A, B, jnp.ones(m, bool))
    A_blocks, _ = split_rows(A, min(block_size, n))
    B_blocks, B_mask = split_rows(B, min(block_size, m))
    first_a = jax.tree.map(lambda a: a[0], A_blocks)
    first_b = jax.tree.map(lambda b: b[0], B_blocks)
    out_shape = jax.eval_shape(fn, first_a, first_b, B_mask[0])

    def one_row_block(a_block):
        def step(acc, inputs):
            b_block, b_mask = inputs
            return acc + fn(a_block, b_block, b_mask), None

        acc0 = jnp.zeros(out_shape.shape, out_shape.dtype)
        acc, _ = lax.scan(step, acc0, (B_blocks, B_mask))
        return acc

    out = lax.map(one_row_block, A_blocks)
    return out.reshape((-1,) + out.shape[2:])[:n]


def _real_tree(A, name):
    """Every leaf of a data pytree as a real array (finite when concrete), for the blocked reductions."""
    return jax.tree.map(lambda a: as_finite_array(a, name), A)


@partial(jax.jit, static_argnames=("block_size",))
def blocked_matvec(kernel, X, Y, V, block_size):
    """K(X, Y) @ V in row blocks, unchecked: the compiled core of :func:`kernel_matvec` for traced code.

    Args:
        kernel: the kernel.
        X: (n, d) inputs already prepared (``kernel.prepare``).
        Y: (m, d) prepared inputs.
        V: (m, k) array.
        block_size: rows per block.

    Returns:
        (n, k) array.
    """
    def fn(x_block, yv_block, mask):
        y_block, v_block = yv_block
        return kernel.evaluate(x_block, y_block) @ jnp.where(mask[:, None], v_block, 0.0)

    return block_row_reduce(fn, X, (Y, V), block_size=block_size)


def kernel_matvec(kernel: Kernel, X, Y, V, *, block_size: int = DEFAULT_BLOCK_SIZE):
    """K(X, Y) @ V without forming K(X, Y): blocks of rows, memory O(block_size^2 + (n + m) k).

    Args:
        kernel: the kernel.
        X: (n, d) points (or the input the kernel takes), or a :class:`~bayeskern.sharding.RowShards`.
        Y: (m, d) points, or a RowShards.
        V: (m,) or (m, k) real array; a RowShards laid out like Y when Y is one (``shard_rows`` of the same
            local row counts).
        block_size: rows per block.

    Returns:
        (n,) or (n, k) array, as V is 1-D or 2-D; a RowShards when X is one.

    Raises:
        ValueError: for non-finite inputs, mismatched dimensions, V of another length than Y or of rank > 2.

    Examples:
        >>> import numpy as np, bayeskern as bk
        >>> from bayeskern.kernels import kernel_matvec
        >>> rng = np.random.default_rng(0)
        >>> X, V = rng.standard_normal((500, 2)), rng.standard_normal(500)
        >>> dense = bk.RBF(1.0).gram(X) @ V
        >>> bool(np.allclose(kernel_matvec(bk.RBF(1.0), X, X, V, block_size=128), dense))
        True
    """
    check_count(block_size, "block_size")
    X, Y = prepare_pair(kernel, X, Y)
    if isinstance(Y, RowShards) != isinstance(V, RowShards):
        raise ValueError("V must be a RowShards exactly when Y is one (shard_rows of V's local rows)")
    values = V.values if isinstance(V, RowShards) else V
    values = as_finite_array(values, "V")  # a complex V is refused, never truncated
    if not jnp.issubdtype(values.dtype, jnp.floating):
        values = values.astype(jnp.result_type(float))
    if values.ndim not in (1, 2):
        raise ValueError(f"V must have shape (m,) or (m, k), got {values.shape}")
    if isinstance(V, RowShards):
        if V.num_rows != Y.num_rows or V.values.shape[0] != Y.values.shape[0]:
            raise ValueError(f"V ({V!r}) is not laid out like Y ({Y!r})")
        V = V.with_values(values.reshape(values.shape[0], -1))
    else:
        check_same_length(Y, values, "Y and V")
        V = values.reshape(values.shape[0], -1)
    out = matvec_rows(kernel, X, Y, V, block_size)
    if values.ndim == 2:
        return out
    return out.with_values(out.values[:, 0]) if isinstance(out, RowShards) else out[:, 0]


def check_kernel(kernel, name: str = "kernel"):
    """``kernel`` if it is a bayeskern :class:`Kernel`, else a ``TypeError`` naming ``name``."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"{name} must be a bayeskern kernel (e.g. bayeskern.RBF(1.0)), got {type(kernel).__name__}")
    return kernel


def prepare_rows(kernel: Kernel, X, name: str):
    """``kernel.prepare(X, name)`` for an input that may be a :class:`~bayeskern.sharding.RowShards`."""
    check_kernel(kernel, "kernel" if name in ("X", "Y") else f"the kernel of {name}")
    if isinstance(X, RowShards):
        return X.with_values(kernel.prepare(X.values, name))
    return kernel.prepare(X, name)


def prepare_pair(kernel: Kernel, X, Y):
    """``kernel.prepare_pair`` for inputs that may be :class:`~bayeskern.sharding.RowShards` (their values are
    prepared; the result keeps the RowShards)."""
    check_kernel(kernel)
    x, y = (A.values if isinstance(A, RowShards) else A for A in (X, Y))
    x, y = kernel.prepare_pair(x, y)
    return (X.with_values(x) if isinstance(X, RowShards) else x, Y.with_values(y) if isinstance(Y, RowShards) else y)


@partial(jax.jit, static_argnames=("block_size",))
def matvec_rows(kernel, X, Y, V, block_size):
    """K(X, Y) @ V (V (m, k)) for prepared inputs, each plain or a RowShards (V then a RowShards like Y):
    a ring of shards when both are sharded, one local pass otherwise. Unchecked, traceable; a RowShards out when
    X is one (zero on padded rows)."""
    if not isinstance(Y, RowShards):
        if not isinstance(X, RowShards):
            return blocked_matvec(kernel, X, Y, V, block_size)
        out = shard_map_rows(lambda x, k, y, v: blocked_matvec(k, x, y, v, block_size), 1, X.mesh, True)(
            X.values, kernel, Y, V)
        return X.with_values(out * X.mask[:, None])
    v = V.values * Y.mask[:, None]
    if not isinstance(X, RowShards):
        return local_then_sum(lambda yv, k, x: blocked_matvec(k, x, yv[0], yv[1], block_size), (Y.values, v), Y.mesh,
                              kernel, X)
    out = ring_pass(lambda x, yv, k: blocked_matvec(k, x, yv[0], yv[1], block_size), X.values, (Y.values, v), X.mesh,
                    kernel)
    return X.with_values(out * X.mask[:, None])


def kernel_row_sums(kernel: Kernel, X, Y=None, *, block_size: int = DEFAULT_BLOCK_SIZE):
    """Row sums sum_j k(x_i, y_j) of K(X, Y) (Y defaults to X), matrix-free.

    Args:
        kernel: the kernel.
        X: (n, d) points, or a :class:`~bayeskern.sharding.RowShards`.
        Y: optional (m, d) points, or a RowShards.
        block_size: rows per block.

    Returns:
        (n,) array; a RowShards when X is one.

    Raises:
        TypeError: for a kernel that is not a Kernel or data that are not real numbers.
        ValueError: for non-finite inputs, mismatched dimensions or a block_size below 1.
    """
    check_count(block_size, "block_size")
    Y = X if Y is None else Y
    X, Y = prepare_pair(kernel, X, Y)
    sums = _row_sums_program(kernel, X, Y, block_size)
    return X.with_values(sums) if isinstance(X, RowShards) else sums


def kernel_sum(kernel: Kernel, X, Y=None, *, block_size: int = DEFAULT_BLOCK_SIZE):
    """Total sum_{i,j} k(x_i, y_j) of K(X, Y) (Y defaults to X), matrix-free: no block of K is stored, and for
    Y = X only the blocks on and above the diagonal are evaluated.

    Args:
        kernel: the kernel.
        X: (n, d) points, or a :class:`~bayeskern.sharding.RowShards`.
        Y: optional (m, d) points, or a RowShards.
        block_size: rows per block.

    Returns:
        () array (replicated on every process for RowShards).

    Raises:
        TypeError: for a kernel that is not a Kernel or data that are not real numbers.
        ValueError: for non-finite inputs, mismatched dimensions or a block_size below 1.
    """
    check_count(block_size, "block_size")
    symmetric = Y is None or Y is X
    X, Y = prepare_pair(kernel, X, X if symmetric else Y)
    return _total_program(kernel, X, None if symmetric else Y, block_size)


def _ones(Y):
    """A column of ones over the rows of Y (plain or RowShards), the V of a row sum."""
    if isinstance(Y, RowShards):
        return Y.with_values(Y.mask[:, None].astype(jnp.result_type(float)))
    return jnp.ones((num_points(Y), 1), jnp.result_type(float))


def pair_sum(kernel, X, Y, block_size: int = DEFAULT_BLOCK_SIZE):
    """sum_{i,j} k(x_i, y_j) over the real rows of prepared X and Y (plain or RowShards). Unchecked, traceable.

    On one process the sum is fused into each block's kernel evaluation (no block of K is stored) and, when X is Y,
    only the blocks on and above the diagonal are evaluated: K is symmetric, so those above count twice."""
    if isinstance(X, RowShards) or isinstance(Y, RowShards):
        return jnp.sum(row_sums(kernel, X, Y, block_size))
    return _block_total(kernel, X, Y, block_size, X is Y)


def _block_total(kernel, X, Y, block_size, symmetric):
    """sum_{i,j} k(x_i, y_j) for plain X, Y (pytrees of arrays).

    Whole blocks of ``block_size`` rows meet in a scan over block pairs; the rows left over (fewer than a block)
    meet everything in separate passes of their own static size. No block is padded or masked: a mask inside the
    loop stops the compiler from fusing the kernel evaluation with the sum."""
    values, X = _fused_form(kernel, X)
    Y = X if symmetric else _fused_form(kernel, Y)[1]
    if max(num_points(X), num_points(Y)) <= block_size:   # one block: no loop to compile
        return jnp.sum(values(X, Y))
    X_full, X_rest = _whole_blocks(X, block_size)
    Y_full, Y_rest = (X_full, X_rest) if symmetric else _whole_blocks(Y, block_size)

    def total(A, B):
        return jnp.sum(values(A, B))

    def against_blocks(A, blocks):   # sum_j k(a_i, b_j) over all rows of the whole blocks
        return lax.scan(lambda acc, b: (acc + total(A, b), None), jnp.zeros((), jnp.result_type(float)), blocks)[0]

    out = _pairs_of_blocks(total, X_full, Y_full, symmetric)
    if symmetric:
        return out + (2.0 * against_blocks(X_rest, X_full) + total(X_rest, X_rest) if X_rest is not None else 0.0)
    if X_rest is not None:
        out = out + against_blocks(X_rest, Y_full)
    if Y_rest is not None:
        out = out + against_blocks(Y_rest, X_full)   # k is symmetric: sum k(x, y) = sum k(y, x)
    if X_rest is not None and Y_rest is not None:
        out = out + total(X_rest, Y_rest)
    return out


def _whole_blocks(A, block_size):
    """(the first rows of the pytree A cut into whole blocks (blocks, size, ...), the remaining rows or None); the
    block size is min(block_size, n), so there is at least one block, and n <= block_size leaves no rest."""
    n = num_points(A)
    size = min(block_size, n)
    whole = n // size * size
    blocks = jax.tree.map(lambda a: a[:whole].reshape((whole // size, size) + a.shape[1:]), A)
    rest = jax.tree.map(lambda a: a[whole:], A) if whole < n else None
    return blocks, rest


def _pairs_of_blocks(total, A_blocks, B_blocks, symmetric):
    """sum over block pairs of total(A_I, B_J); when symmetric (A is B) only I <= J, those off the diagonal twice."""
    na, nb = jax.tree.leaves(A_blocks)[0].shape[0], jax.tree.leaves(B_blocks)[0].shape[0]
    if symmetric:
        rows, cols = np.triu_indices(na)
        weights = np.where(rows == cols, 1.0, 2.0)
    else:
        rows, cols = np.divmod(np.arange(na * nb), nb)
        weights = np.ones(na * nb)

    def step(acc, pair):
        i, j, weight = pair
        return acc + weight * total(jax.tree.map(lambda t: t[i], A_blocks), jax.tree.map(lambda t: t[j], B_blocks)), None

    dtype = jnp.result_type(float)
    return lax.scan(step, jnp.zeros((), dtype), (rows, cols, weights.astype(dtype)))[0]


def _fused_form(kernel, X):
    """(values(A, B), X'): k(x, y) = values(x', y') in the form that fuses best with a reduction over a block.

    A stationary kernel in up to 16 dimensions: X' = X scaled by the lengthscales once (O(n)), and values from
    explicit coordinate differences (elementwise, so compiled into the reduction's loop with no distance matrix
    stored, and exact where the matrix-product expansion rounds); a tensor product: factor by factor; any other
    kernel: X itself and its ``evaluate``.
    """
    if isinstance(kernel, Stationary) and X.shape[-1] <= _UNROLL_MAX_DIM:
        return (lambda A, B: kernel.profile(_sqdist_exact(A, B))), kernel._scaled(X)
    if isinstance(kernel, TensorProduct):
        (fx, x), (fy, y) = _fused_form(kernel.k_x, X[0]), _fused_form(kernel.k_y, X[1])
        return (lambda A, B: fx(A[0], B[0]) * fy(A[1], B[1])), (x, y)
    return kernel.evaluate, X


def row_sums(kernel, X, Y, block_size: int = DEFAULT_BLOCK_SIZE):
    """sum_j k(x_i, y_j) over the real rows of Y for prepared X, Y (plain or RowShards): (n,), or (N,) with zeros
    on the padded rows of a RowShards X. Unchecked, traceable."""
    if not (isinstance(X, RowShards) or isinstance(Y, RowShards)):
        return _block_row_sums(kernel, X, Y, block_size)
    out = matvec_rows(kernel, X, Y, _ones(Y), block_size)
    return out.values[:, 0] if isinstance(out, RowShards) else out[:, 0]


def _block_row_sums(kernel, X, Y, block_size):
    """sum_j k(x_i, y_j) for plain X, Y: each block of rows of X sums its kernel values against every block of Y, each
    block's evaluation fused with its row sum (no block stored, no mask, as in :func:`_block_total`). X and Y are cut
    into as few equal blocks of at most ``block_size`` rows as possible, padded with copies of their row 0 (at most
    one per block): the sums of X's padded rows are dropped, and the p padded rows of Y are taken off afterwards
    (p k(x_i, y_0), at most one term per block: one evaluation site in the loop, which compiles fastest)."""
    values, X = _fused_form(kernel, X)
    Y = _fused_form(kernel, Y)[1]
    n, m = num_points(X), num_points(Y)
    if max(n, m) <= block_size:   # one block: no loop to compile
        return jnp.sum(values(X, Y), axis=1)
    X_blocks, _ = split_rows(X, _equal_block_size(n, block_size))
    Y_blocks, Y_mask = split_rows(Y, _equal_block_size(m, block_size))
    padded = Y_mask.size - m

    def against_Y(A):
        zero = jnp.zeros(num_points(A), jnp.result_type(float))
        return lax.scan(lambda acc, b: (acc + jnp.sum(values(A, b), axis=1), None), zero, Y_blocks)[0]

    sums = lax.map(against_Y, X_blocks).reshape(-1)[:n]
    if padded:
        sums = sums - padded * values(X, jax.tree.map(lambda y: y[:1], Y))[:, 0]
    return sums


def _equal_block_size(n, block_size):
    """The size of the fewest equal blocks of at most ``block_size`` rows that cover n rows."""
    blocks = -(-n // block_size)
    return -(-n // blocks)


@partial(jax.jit, static_argnames=("block_size",))
def _row_sums_program(kernel, X, Y, block_size):
    """:func:`row_sums` compiled as one program (for :func:`kernel_row_sums`)."""
    return row_sums(kernel, X, Y, block_size)


@partial(jax.jit, static_argnames=("block_size",))
def _total_program(kernel, X, Y, block_size):
    """:func:`pair_sum` compiled as one program (for :func:`kernel_sum`); Y None for the sum of K(X, X), which then
    uses its symmetry (inside a trace two arguments are never the same object, so this is decided outside)."""
    return pair_sum(kernel, X, X if Y is None else Y, block_size)


def diagonal_values(kernel, X):
    """k(x_i, x_i) for prepared X: (n,), or (N,) with zeros on the padded rows of a RowShards. Traceable."""
    if isinstance(X, RowShards):
        return jnp.where(X.mask, kernel.evaluate_paired(X.values, X.values), 0.0)
    return kernel.evaluate_paired(X, X)


def diagonal_sum(kernel, X):
    """sum_i k(x_i, x_i) over the real rows of prepared X (plain or RowShards). Unchecked, traceable."""
    return jnp.sum(diagonal_values(kernel, X))


def kernel_stack(kernels, X, Y):
    """(K, n, m) kernel matrices of several kernels on the same prepared points, sharing the distances (traceable).

    Isotropic stationary kernels of one distance method (the matrix-product expansion for kernels smooth in r^2,
    explicit differences for the others) share one matrix of unscaled squared distances, which in high dimension
    costs far more than applying their profiles; any other kernel is evaluated on its own.

    Args:
        kernels: a sequence of K kernels.
        X: (n, D) points.
        Y: (m, D) points.

    Returns:
        (K, n, m) array.
    """
    distances, out = {}, []
    for kernel in kernels:
        if isinstance(kernel, Stationary) and jnp.ndim(kernel.lengthscale) == 0:
            method = type(kernel)._smooth_in_r2
            if method not in distances:
                distances[method] = squared_distances(X, Y) if method else _sqdist_exact(X, Y)
            out.append(kernel.profile(distances[method] / kernel.lengthscale**2))
        else:
            out.append(kernel.evaluate(X, Y))
    return jnp.stack(out)
