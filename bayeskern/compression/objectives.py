"""Objectives of the compression algorithms, streamed over the data in blocks.

Data enter as :class:`DataBlocks` (rows padded to whole blocks, with a mask), so no function here forms an
n x n or even an m x n matrix: each block contributes m x m (or m x C) sums, and reverse-mode autodiff
recomputes a block's kernel columns (``jax.checkpoint``), keeping memory at O(m * block_size + m^2).
All functions are pure and traceable; the compressed set is ``(cx (m, d_x), cy (m, d_y) or (m,))``.
"""

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .._validation import as_finite_array, check_count, check_positive, check_same_length
from ..kernels.base import Kernel
from ..kernels.blockwise import split_rows
from ..linalg import jittered_cholesky
from ..linalg.dense import cho_solve_unchecked
from ..sharding import AXIS, RowShards
from ._inputs import onehot

__all__ = ["DataBlocks", "data_blocks", "stream", "jkip_objective", "ackip_objective", "herding_score",
           "herding_terms", "class_score_terms", "class_scores", "label_sweep", "JITTER"]

JITTER = 1e-10  # added to the compressed Gram matrix on top of the ridge m lam_C


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class DataBlocks:
    """Data cut into blocks: x (B, b, d_x), y (B, b, d_y) or (B, b), mask (B, b) marks real rows; n real rows."""

    x: jax.Array
    y: jax.Array
    mask: jax.Array
    n: int = field(metadata={"static": True})


def data_blocks(x, y, block_size: int = 1024, mesh: Mesh | None = None) -> DataBlocks:
    """Cut prepared data x (n, d_x), y (n, ...) into blocks of at most ``block_size`` rows.

    With a 1-D ``mesh`` (:func:`bayeskern.sharding.row_mesh`) the rows of every block are split over its
    devices (block size rounded up to a multiple of the device count): each device evaluates its share of the
    kernel columns and XLA adds the m x m partial sums across devices, in the same compiled code.

    x and y may be :class:`~bayeskern.sharding.RowShards` of the same layout (rows spread over processes): each
    device cuts its own rows into blocks, block t being the t-th block of every device side by side (split by
    rows as with ``mesh``), so nothing moves between processes but the partial sums.

    Args:
        x: (n, d_x) standardised features, or a RowShards.
        y: (n, d_y) standardised responses or (n,) labels, paired with x; a RowShards when x is one.
        block_size: the most rows per block.
        mesh: optional 1-D "rows" mesh to split every block's rows over.

    Returns:
        DataBlocks: x (B, b, d_x), y (B, b, ...), mask (B, b) of real rows, and n.

    Raises:
        TypeError: for data that are not real numbers or block_size not an integer.
        ValueError: for non-finite or unpaired data or block_size below 1.
    """
    block_size = check_count(block_size, "block_size")
    if isinstance(x, RowShards):
        return _local_blocks(x, y, block_size)
    x, y = _rows(x, "x"), _rows(y, "y")
    check_same_length(x, y, "x and y")
    n = x.shape[0]
    size = min(block_size, n)
    if mesh is not None:
        size = -(-size // mesh.devices.size) * mesh.devices.size
    (xb, yb), mask = split_rows((x, y), size)
    if mesh is not None:
        def place(a):
            return jax.device_put(a, NamedSharding(mesh, PartitionSpec(None, "rows", *([None] * (a.ndim - 2)))))

        xb, yb, mask = place(xb), place(yb), place(mask)
    return DataBlocks(xb, yb, mask, n)


def _local_blocks(x: RowShards, y: RowShards, block_size: int) -> DataBlocks:
    """Each device cuts its rows into blocks of at most ``block_size / devices`` rows; global block t (B, b, ...)
    holds the t-th block of every device, split by rows over the mesh."""
    devices = x.mesh.size
    size = max(1, min(block_size // devices, x.values.shape[0] // devices))

    def local(xv, yv, keep):
        (xb, yb, kb), mask = split_rows((xv, yv, keep), size)
        return xb, yb, mask & kb

    spec = PartitionSpec(None, AXIS)
    xb, yb, mask = jax.shard_map(local, mesh=x.mesh, in_specs=PartitionSpec(AXIS), out_specs=spec,
                                 check_vma=False)(x.values, y.values, x.mask)
    return DataBlocks(xb, yb, mask, x.num_rows)


def stream(data: DataBlocks, block_fn, init):
    """Sum ``block_fn(x_b, y_b, mask_b)`` (a pytree like ``init``) over the data blocks in one ``lax.scan``.

    ``block_fn`` must zero padded rows (mask False). The body is checkpointed: reverse-mode autodiff recomputes a
    block's kernel columns instead of storing them, so memory stays O(block work + size of ``init``).
    """
    @jax.checkpoint
    def body(carry, blk):
        return jax.tree.map(jnp.add, carry, block_fn(*blk)), None

    total, _ = lax.scan(body, init, (data.x, data.y, data.mask))
    return total


def _masked_columns(kernel_x: Kernel, cx, xb, mb, row_mask):
    """K = k(cx, x_b) (m, b) with padded data columns and unused compressed rows (row_mask False) zeroed."""
    K = kernel_x.evaluate(cx, xb) * mb[None, :]
    return K if row_mask is None else K * row_mask[:, None]


def compressed_factor(kernel_x: Kernel, cx, ridge, row_mask=None):
    """Cholesky factor of K_CC + (ridge + JITTER) I; unused slots (row_mask False) become identity rows."""
    m = cx.shape[0]
    K = kernel_x.evaluate(cx, cx)
    if row_mask is not None:
        K = K * (row_mask[:, None] * row_mask[None, :])
        ridge = jnp.where(row_mask, ridge, 1.0 - JITTER)
    L, _, ok = jittered_cholesky(K + jnp.diag(jnp.broadcast_to(ridge + JITTER, (m,))))
    return L, ok


def _cross_sum(data: DataBlocks, kernel_x: Kernel, kernel_y: Kernel, cx, cy, row_mask=None):
    """sum_i sum_j k(cx_j, x_i) l(cy_j, y_i) over the data: O(n m) work, no m x m products."""
    def block(xb, yb, mb):
        return jnp.sum(_masked_columns(kernel_x, cx, xb, mb, row_mask) * kernel_y.evaluate(cy, yb))

    return stream(data, block, jnp.zeros((), jnp.result_type(float)))


def jkip_objective(cx, cy, data: DataBlocks, kernel_x: Kernel, kernel_y: Kernel):
    """J(C): JMMD^2(D, C) minus the data-data constant, streamed over the data blocks (traceable).

    Args:
        cx: (m, d_x) compressed features.
        cy: (m, d_y) compressed responses, or (m,) labels.
        data: the data blocks (:func:`data_blocks`).
        kernel_x: kernel on features.
        kernel_y: kernel on responses.

    Returns:
        () array.

    Raises:
        TypeError: for a set that is not real numbers.
        ValueError: for a set whose points differ in shape from the data's, or unpaired cx and cy.
    """
    cx, cy = _compressed_set(cx, cy, data)
    m = cx.shape[0]
    self_term = jnp.sum(kernel_x.evaluate(cx, cx) * kernel_y.evaluate(cy, cy))
    return self_term / m**2 - 2.0 * _cross_sum(data, kernel_x, kernel_y, cx, cy) / (data.n * m)


def _gram_sums(data: DataBlocks, kernel_x: Kernel, cx, response, row_mask=None):
    """S = K_CX K_XC (m, m) and T = K_CX R^T (m, r) with R = response(y) (r, n), streamed over the blocks."""
    m = cx.shape[0]

    def block(xb, yb, mb):
        K = _masked_columns(kernel_x, cx, xb, mb, row_mask)
        return K @ K.T, K @ response(yb).T

    dtype = jnp.result_type(float)
    r = jax.eval_shape(response, data.y[0]).shape[0]
    return stream(data, block, (jnp.zeros((m, m), dtype), jnp.zeros((m, r), dtype)))


def ackip_objective(cx, cy, data: DataBlocks, kernel_x: Kernel, kernel_y: Kernel, lam_c, row_mask=None):
    """F(C): the in-sample tower KCD^2 minus its constant c_hat, with W = (K_CC + m lam_C I)^{-1}.

    F = (tr(L_CC W S W) - 2 tr(W T)) / n with the streamed S = K_CX K_XC and T = K_CX L_YC (traceable).

    Args:
        cx: (m, d_x) compressed features.
        cy: (m, d_y) compressed responses, or (m,) labels.
        data: the data blocks (:func:`data_blocks`).
        kernel_x: kernel on features.
        kernel_y: kernel on responses.
        lam_c: ridge lam_C > 0.
        row_mask: optional (m,) bool: restrict C to the marked slots (the ridge is then (number marked) lam_C).

    Returns:
        () array.

    Raises:
        TypeError: for a set that is not real numbers.
        ValueError: for a set whose points differ in shape from the data's, unpaired cx and cy, or lam_c not
            positive.
    """
    cx, cy = _compressed_set(cx, cy, data)
    check_positive(lam_c, "lam_c")
    m = cx.shape[0] if row_mask is None else jnp.sum(row_mask)
    S, T = _gram_sums(data, kernel_x, cx, lambda yb: kernel_y.evaluate(cy, yb), row_mask)
    L, _ = compressed_factor(kernel_x, cx, m * lam_c, row_mask)
    WS = cho_solve_unchecked(L, S)
    WSW = cho_solve_unchecked(L, WS.T)
    L_cc = kernel_y.evaluate(cy, cy)
    return (jnp.sum(L_cc * WSW) - 2.0 * jnp.trace(cho_solve_unchecked(L, T))) / data.n


def herding_terms(x, y, data: DataBlocks, kernel_x: Kernel, kernel_y: Kernel, cx, cy, row_mask):
    """For one candidate z = (x, y): (kappa_bar(z), sum over chosen s of kappa(z, z_s), kappa(z, z))."""
    xz, yz = x[None], y[None]
    mean_embedding = _cross_sum(data, kernel_x, kernel_y, xz, yz)
    chosen = jnp.sum(kernel_x.evaluate(xz, cx)[0] * kernel_y.evaluate(yz, cy)[0] * row_mask)
    return mean_embedding / data.n, chosen, kernel_x.evaluate_paired(xz, xz)[0] * kernel_y.evaluate_paired(yz, yz)[0]


def herding_score(x, y, data: DataBlocks, kernel_x: Kernel, kernel_y: Kernel, cx, cy, row_mask):
    """The greedy JMMD score s_t(z) for one candidate z = (x, y) given the chosen pairs (cx, cy)[row_mask]."""
    mean_embedding, chosen, self_term = herding_terms(x, y, data, kernel_x, kernel_y, cx, cy, row_mask)
    return mean_embedding - (chosen + 0.5 * self_term) / (jnp.sum(row_mask) + 1)


# --- discrete responses: class scores with the features fixed ----------------------------------------
def class_score_terms(method: str, cx, data: DataBlocks, kernel_x: Kernel, lam_c, n_classes: int):
    """(M, R, a, b) with s_j(c) = a [sum_{b != j} M_jb 1[y_b = c]] - b R_jc for JKIP or ACKIP (features fixed).

    ACKIP: M = A A^T, R = A E_Y (A = W K_CX), a = b = 2/n. JKIP: M = K_CC, R = K_CX E_Y, a = 2/m^2, b = 2/(nm).
    """
    m = cx.shape[0]
    if method == "jkip":  # only K_CX E_Y: no m x m data sum
        P = stream(data, lambda xb, yb, mb: _masked_columns(kernel_x, cx, xb, mb, None) @ onehot(yb, n_classes),
                   jnp.zeros((m, n_classes), jnp.result_type(float)))
        return kernel_x.evaluate(cx, cx), P, 2.0 / m**2, 2.0 / (data.n * m)
    S, P = _gram_sums(data, kernel_x, cx, lambda yb: onehot(yb, n_classes).T)
    L, _ = compressed_factor(kernel_x, cx, m * lam_c)
    WS = cho_solve_unchecked(L, S)
    return cho_solve_unchecked(L, WS.T), cho_solve_unchecked(L, P), 2.0 / data.n, 2.0 / data.n


def class_scores(terms, labels, n_classes: int):
    """s_j(c) for every slot j and class c with the other labels held fixed: (m, C)."""
    M, R, a, b = terms
    E = onehot(labels, n_classes)
    return a * (M @ E - jnp.diag(M)[:, None] * E) - b * R


def label_sweep(terms, labels, n_classes: int):
    """One greedy coordinate-descent sweep j = 1..m over the labels; each change strictly lowers the objective."""
    M, R, a, b = terms
    E = onehot(labels, n_classes)

    def visit(j, state):
        labels, ME = state
        current = labels[j]
        score = a * (ME[j] - M[j, j] * (jnp.arange(n_classes) == current)) - b * R[j]
        best = jnp.argmin(score)
        change = score[best] < score[current]
        new = jnp.where(change, best, current).astype(labels.dtype)
        ME = ME.at[:, current].add(-M[:, j]).at[:, new].add(M[:, j])
        return labels.at[j].set(new), ME

    labels, _ = lax.fori_loop(0, labels.shape[0], visit, (labels, M @ E))
    return labels


def _rows(a, name):
    """A real, finite (when concrete) array of rows, (n, ...), for the data blocks."""
    a = as_finite_array(a, name)
    if a.ndim == 0 or a.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one row, got shape {a.shape}")
    return a


def _compressed_set(cx, cy, data: DataBlocks):
    """(cx, cy) checked against the data blocks: real, finite when concrete, of the data's point shapes."""
    cx, cy = _rows(cx, "cx"), _rows(cy, "cy")
    for name, c, block in (("cx", cx, data.x), ("cy", cy, data.y)):
        if c.shape[1:] != block.shape[2:]:
            raise ValueError(f"{name} must have points of shape {block.shape[2:]} like the data, got {c.shape[1:]}")
    check_same_length(cx, cy, "cx and cy")
    return cx, cy
