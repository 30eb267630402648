"""Greedy pivoted Cholesky factorisation of a kernel Gram matrix, matrix-free (memory O(n m)).

Shared by the JDL bases, the Nystrom landmarks of kernel Bayes filters and compression: the factor touches the
diagonal of K = k(X, X) and m of its columns, never the whole matrix.
"""

from typing import NamedTuple

from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

from .._config import require_x64
from .._validation import check_count
from ..kernels.base import Kernel
from ..sharding import AXIS, RowShards

__all__ = ["PivotedCholesky", "pivoted_cholesky"]


class PivotedCholesky(NamedTuple):
    """K ~ L L^T from m greedy pivots: column j of L is the Schur complement's column at the j-th pivot,
    scaled by the square root of its pivot entry (the pivot is the largest remaining diagonal entry).

    Attributes:
        L: (n, m) the factor.
        B_tilde: (m, m) upper triangular, the compact bi-orthogonal factor (B = P B_tilde, B^T L = I, K B = L).
        pivots: (m,) distinct row indices, in the order chosen.
        residual: (n,) diag(K - L L^T) >= 0.
        rank: m, the number of pivots.
    """

    L: jax.Array
    B_tilde: jax.Array
    pivots: jax.Array
    residual: jax.Array

    @property
    def rank(self) -> int:
        """m, the number of pivots (columns of L)."""
        return self.L.shape[1]


def pivoted_cholesky(kernel: Kernel, X, *, tol: float = 1e-6, max_rank: int | None = None) -> PivotedCholesky:
    """Greedy pivoted Cholesky of K = k(X, X) (X: (n, d)) touching only diag(K) and m columns: memory O(n m).

    Stops when trace(K - L L^T) <= tol * trace(K) (relative tolerance, tol in [0, 1)) or at ``max_rank``
    (default n). Pivot ties go to the smallest index. A compiled ``lax.while_loop`` fills buffers that start
    64 columns wide and double when full; the result is cut to the rank reached.

    X may be a :class:`~bayeskern.sharding.RowShards`: each device then holds its rows of L and of the residual
    (zero on padded rows, which are never pivots), and each step exchanges only the candidate pivot rows; pivot
    indices refer to the padded global rows.

    Args:
        kernel: the kernel k.
        X: (n, d) points (or what ``kernel.prepare`` takes), or a RowShards.
        tol: relative trace tolerance in [0, 1).
        max_rank: the largest number of pivots m, in [1, n] (default n).

    Returns:
        PivotedCholesky: the factor L (n, m), B_tilde, the pivots and the residual diagonal.

    Raises:
        TypeError: for data that are not real numbers, or max_rank not an integer.
        ValueError: for non-finite points, tol outside [0, 1) or max_rank outside [1, n].
        RuntimeError: when float64 is off.
    """
    require_x64("pivoted_cholesky")
    sharded = isinstance(X, RowShards)
    mask, mesh, real = (X.mask, X.mesh, X.num_rows) if sharded else (None, None, None)
    X = kernel.prepare(X.values if sharded else X, "X")
    n = X.shape[0]
    if not (isinstance(tol, (int, float)) and 0 <= tol < 1):
        raise ValueError(f"tol must lie in [0, 1), got {tol}")
    real = n if real is None else real
    max_rank = real if max_rank is None else check_count(max_rank, "max_rank")
    if not 1 <= max_rank <= real:
        raise ValueError(f"max_rank must lie in [1, n = {real}], got {max_rank}")
    factorise = partial(_factorise_rows, mesh=mesh, mask=mask) if sharded else _factorise
    width = min(max_rank, 64)
    state, threshold, floor = _start(kernel, X, mask, tol, width)
    while True:  # buffers double when full, so memory stays O(n m) for the rank m reached
        state = factorise(kernel, X, threshold, floor, state)
        m = int(state[4])
        if m < width or width == max_rank:
            break
        grow = min(2 * width, max_rank) - width
        L, Bt, pivots, d, _ = state
        state = (jnp.pad(L, ((0, 0), (0, grow))), jnp.pad(Bt, ((0, grow), (0, grow))), jnp.pad(pivots, (0, grow)),
                 d, state[4])
        width += grow
    return PivotedCholesky(*_trimmed(*state[:3], m), state[3])


@partial(jax.jit, static_argnames="width")
def _start(kernel, X, mask, tol, width):
    """Empty buffers of ``width`` pivots, the residual diagonal (zero on padding rows), the trace threshold and the
    round-off floor of a Schur complement (any backend)."""
    d0 = kernel.evaluate_paired(X, X)
    if mask is not None:
        d0 = jnp.where(mask, d0, 0.0)
    state = (jnp.zeros((X.shape[0], width), d0.dtype), jnp.zeros((width, width), d0.dtype),
             jnp.zeros(width, jnp.int32), d0, jnp.zeros((), jnp.int32))
    return state, tol * jnp.sum(d0), 100 * jnp.finfo(d0.dtype).eps * jnp.max(d0)


@partial(jax.jit, static_argnames="m")
def _trimmed(L, Bt, pivots, m):
    return L[:, :m], Bt[:m, :m], pivots[:m]


@jax.jit
def _factorise(kernel, X, threshold, floor, state):
    """Greedy pivots until the tolerance is met, a pivot's Schur complement vanishes or the buffers are full."""
    width = state[0].shape[1]

    def more(state):
        _, _, _, d, m = state
        return (jnp.sum(d) > threshold) & (m < width) & (jnp.max(d) > floor)

    def step(state):
        L, Bt, pivots, d, m = state
        j = jnp.argmax(d)  # first index of the largest residual diagonal entry
        root = jnp.sqrt(d[j])
        column = kernel.evaluate(X, X[j][None])[:, 0]  # one column-oracle call: n kernel evaluations
        ell = (column - L @ L[j]) / root  # unused buffer columns of L are zero
        b = (-Bt @ L[j]).at[m].set(1.0) / root  # compact line 5: rows >= m of B_tilde are zero
        d = jnp.maximum(d - ell**2, 0.0).at[j].set(0.0)
        return L.at[:, m].set(ell), Bt.at[:, m].set(b), pivots.at[m].set(j.astype(jnp.int32)), d, m + 1

    return jax.lax.while_loop(more, step, state)


@partial(jax.jit, static_argnames=("mesh",))
def _factorise_rows(kernel, X, threshold, floor, state, mesh, mask):
    """:func:`_factorise` with X, L and the residual split by rows over ``mesh``: each device finds its largest
    residual, the devices exchange those candidates (value, point, row of L) and all take the first global maximum."""
    def local(X, keep, L, d, kernel, threshold, floor, Bt, pivots, m):
        width, size = L.shape[1], X.shape[0]
        offset = jax.lax.axis_index(AXIS) * size

        def more(state):
            _, _, _, d, m = state
            return (jax.lax.psum(jnp.sum(d), AXIS) > threshold) & (m < width) & (jax.lax.pmax(jnp.max(d), AXIS) > floor)

        def step(state):
            L, Bt, pivots, d, m = state
            i = jnp.argmax(d)
            values, rows_x, rows_l, starts = jax.lax.all_gather((d[i], X[i], L[i], offset + i), AXIS)
            owner = jnp.argmax(values)  # the first device holding the largest residual
            root = jnp.sqrt(values[owner])
            column = kernel.evaluate(X, rows_x[owner][None])[:, 0]
            ell = jnp.where(keep, (column - L @ rows_l[owner]) / root, 0.0)
            b = (-Bt @ rows_l[owner]).at[m].set(1.0) / root
            d = jnp.maximum(d - ell**2, 0.0)
            d = jnp.where(jnp.arange(size) + offset == starts[owner], 0.0, d)
            return L.at[:, m].set(ell), Bt.at[:, m].set(b), pivots.at[m].set(starts[owner].astype(jnp.int32)), d, m + 1

        L, Bt, pivots, d, m = jax.lax.while_loop(more, step, (L, Bt, pivots, d, m))
        return L, Bt, pivots, d, m

    L, Bt, pivots, d, m = state
    rows, rep = PartitionSpec(AXIS), PartitionSpec()
    L, Bt, pivots, d, m = jax.shard_map(local, mesh=mesh, in_specs=(rows,) * 4 + (rep,) * 6,
                                        out_specs=(rows, rep, rep, rows, rep), check_vma=False)(
        X, mask, L, d, kernel, threshold, floor, Bt, pivots, m)
    return L, Bt, pivots, d, m
