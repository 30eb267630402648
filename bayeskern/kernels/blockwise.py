"""Matrix-free kernel reductions: mat-vecs, row sums and totals in blocks.

Nothing here forms an n x m kernel matrix: rows and columns are cut into blocks
of at most ``block_size`` points, so memory is O(block_size^2 + n k) whatever n
is. With ``block_size >= max(n, m)`` the computation is the dense one.
"""

from functools import partial

import jax
import jax.numpy as jnp
from jax import lax

from .._validation import check_finite, check_same_length, num_points
from .base import Kernel

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "split_rows",
    "blocked_matvec",
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
    """
    n, m = num_points(A), num_points(B)
    size_a, size_b = min(block_size, n), min(block_size, m)
    A_blocks, _ = split_rows(A, size_a)
    B_blocks, B_mask = split_rows(B, size_b)
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
        X: (n, d) points (or the input the kernel takes).
        Y: (m, d) points.
        V: (m,) or (m, k) real array.
        block_size: rows per block.

    Returns:
        (n,) or (n, k) array, as V is 1-D or 2-D.

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
    X, Y = kernel.prepare_pair(X, Y)
    V = check_finite(jnp.asarray(V), "V")
    if not jnp.issubdtype(V.dtype, jnp.floating):
        V = V.astype(jnp.result_type(float))
    if V.ndim not in (1, 2):
        raise ValueError(f"V must have shape (m,) or (m, k), got {V.shape}")
    check_same_length(Y, V, "Y and V")
    out = blocked_matvec(kernel, X, Y, V.reshape(V.shape[0], -1), block_size)
    return out[:, 0] if V.ndim == 1 else out


def kernel_row_sums(kernel: Kernel, X, Y=None, *, block_size: int = DEFAULT_BLOCK_SIZE):
    """Row sums sum_j k(x_i, y_j) of K(X, Y) (Y defaults to X), matrix-free.

    Args:
        kernel: the kernel.
        X: (n, d) points.
        Y: optional (m, d) points.
        block_size: rows per block.

    Returns:
        (n,) array.

    Raises:
        ValueError: for non-finite inputs or mismatched dimensions.
    """
    Y = X if Y is None else Y
    X, Y = kernel.prepare_pair(X, Y)
    ones = jnp.ones((num_points(Y), 1), jnp.result_type(float))
    return blocked_matvec(kernel, X, Y, ones, block_size)[:, 0]


def kernel_sum(kernel: Kernel, X, Y=None, *, block_size: int = DEFAULT_BLOCK_SIZE):
    """Total sum_{i,j} k(x_i, y_j) of K(X, Y) (Y defaults to X), matrix-free: the sum of :func:`kernel_row_sums`,
    with the same arguments and errors; returns a scalar array."""
    return jnp.sum(kernel_row_sums(kernel, X, Y, block_size=block_size))
