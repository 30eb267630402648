"""The log-volume term of the BKE pseudolikelihood: log sqrt(det J^T J) (m > D) or log sqrt(det J J^T) (m <= D) of
the Jacobian J of x -> phi_z(x), with the rows' weights kept apart from their directions."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_points
from ..kernels.base import Kernel
from ..kernels.stationary import se_scale_tril
from ..linalg.dense import whiten_unchecked

__all__ = ["log_volume"]

# jaxlib (0.10) splits a batched LAPACK call of more than 2e5 flops over the XLA:CPU thread pool and blocks the
# calling pool thread until the pieces finish; two such calls scheduled side by side (a value and its derivative)
# occupy both threads of a 2-core machine and never return. The per-point QRs of the log-volume for m <= D are
# therefore batched in chunks below that size, which jaxlib runs inline (m > D uses no LAPACK call).
_LAPACK_INLINE_FLOPS = 200_000
_CACHE_ENTRIES = 1 << 15   # points per chunk x m x D for the m > D pivots: each step's arrays stay in cache (256 KiB)


def _log_gamma_from_rows(log_k, V):
    """log gamma (...,) of the Jacobians J = diag(exp(log_k)) V: 0.5 log pdet(J^T J) for m > D, else
    0.5 log det(J J^T); log_k (..., m) are the log weights of the rows and V (..., m, D) their directions, of
    comparable lengths.

    The weights k(x, z_l) of the rows can differ by hundreds of orders of magnitude, more than any factorisation of
    J itself resolves (rows below about 1e-154 of the largest vanish from its dot products), so the weights are kept
    apart. For m <= D, det J J^T = prod k_l^2 det V V^T, and rows of V that are linearly dependent (a point in the
    affine hull of some inducing points) make it 0: a diagonal entry of V's QR factor within a few hundred rounding
    errors of the longest row counts as 0, and log gamma is -inf rather than the logarithm of a rounding error (the
    fused m x m form takes a pseudo-determinant instead; see :func:`wide_inputs`). For m > D, r = rank J pivot rows
    S are chosen by weighted residual length (a QR of J^T with column pivoting, computed on V and log_k; see
    :func:`_pivoted_gram_schmidt`) and completed by D - r unit vectors orthogonal to them (weight 1) to a square
    V_S; then pdet J^T J = det(J_S)^2 det(I + C^T C) with C = J_rest J_S^{-1}, entries exp(log k_r - log k_s)
    (V_rest V_S^{-1})_rs, at most of order one for these pivots. A row already in the span of the rows chosen before
    a pivot s has the coefficient 0 on s, set exactly. With r < D (every x - z_l orthogonal to some direction:
    pixels that are 0 in x and in every inducing point) J^T J is singular and its pseudo-determinant, the volume of
    the image of the span of the rows, is used, as the fused form for m <= D does. Everything is elementwise work
    and loops over the D pivots, no batched LAPACK call (see ``_LAPACK_INLINE_FLOPS``).
    """
    m, D = V.shape[-2:]
    if m <= D:
        log_r = _log_abs_diag_r(jnp.swapaxes(V, -1, -2))
        longest = 0.5 * jnp.log(jnp.max(jnp.sum(V**2, axis=-1), axis=-1))
        dependent = jnp.any(log_r <= longest[..., None] + np.log(256 * D * np.finfo(V.dtype).eps), axis=-1)
        return jnp.where(dependent, -jnp.inf, jnp.sum(log_k, axis=-1) + jnp.sum(log_r, axis=-1))
    P, P_S, log_k_S, spanned_at, completed, _ = _pivoted_gram_schmidt(log_k, V)
    W = _solve_lower_right(P, P_S)                                                      # V V_S^{-1}
    # C_rs = 0 for the chosen rows and for pivots s chosen after row r entered the span of the earlier ones
    keep = jnp.arange(D) < spanned_at[..., None]                                        # (..., m, D)
    ratio = jnp.exp(jnp.where(keep, log_k[..., :, None] - log_k_S[..., None, :], -jnp.inf))
    C = jnp.where(keep, W, 0.0) * ratio
    inner = jnp.eye(D, dtype=V.dtype) + jnp.swapaxes(C, -1, -2) @ C
    log_det_S = jnp.sum(jnp.log(jnp.abs(jnp.diagonal(P_S, axis1=-2, axis2=-1))), axis=-1)
    value = jnp.sum(log_k_S, axis=-1) + log_det_S + 0.5 * _logdet_spd(inner)
    return jnp.where(jnp.all(completed, axis=-1), -jnp.inf, value)   # rank 0: every row zero


def _pivoted_gram_schmidt(log_k, V, *, by_weight: bool = False):
    """Gram-Schmidt on the rows of V (..., m, D), m > D, in the order of column pivoting of J^T = (diag(exp(log_k))
    V)^T: each pivot is the row with the largest weighted length of its part orthogonal to the rows chosen before
    (with ``by_weight``: the heaviest row not yet in the span of those, whatever its length).
    A part shorter than a few hundred rounding errors of its row counts as zero (that row lies in the span of the
    rows chosen so far); when every row does, the remaining pivots are unit vectors completing an orthonormal basis
    Q. The pivot choices are constants for differentiation.

    Returns:
        P = V Q^T (..., m, D); P_S (..., D, D) the rows of P of the pivots in order (lower triangular; e_d for a
        completing vector); log_k_S (..., D) their log weights (0 when completing); spanned_at (..., m): how many
        pivots had been chosen when each row entered their span (D if never, 0 for pivots and zero rows);
        completed (..., D): whether pivot d is a completing vector; chosen (..., D): the pivots' rows.
    """
    m, D = V.shape[-2:]
    batch = V.shape[:-2]
    tolerance2 = (256 * D * jnp.finfo(V.dtype).eps) ** 2 * jnp.sum(V**2, axis=-1)
    tiny = jnp.finfo(V.dtype).tiny
    fixed = jax.lax.stop_gradient

    def step(d, carry):
        residual, length2, unit_residual, Q, chosen, completed, spanned_at = carry
        live = spanned_at == D
        length = 0.0 if by_weight else 0.5 * jnp.log(jnp.where(live, fixed(length2), 1.0))
        score = jnp.where(live, fixed(log_k) + length, -jnp.inf)
        pick, has_live = jnp.argmax(score, axis=-1), jnp.any(live, axis=-1)
        unit = jnp.argmax(jnp.sum(unit_residual**2, axis=-1), axis=-1)
        q = jnp.where(has_live[..., None], jnp.einsum("...m,...md->...d", jax.nn.one_hot(pick, m, dtype=V.dtype),
                                                      residual),
                      jnp.einsum("...e,...ed->...d", jax.nn.one_hot(unit, D, dtype=V.dtype), fixed(unit_residual)))
        q = q / jnp.maximum(jnp.linalg.norm(q, axis=-1, keepdims=True), tiny)
        residual = residual - jnp.einsum("...md,...d->...m", residual, q)[..., None] * q[..., None, :]
        length2 = jnp.sum(residual**2, axis=-1)   # recomputed: downdating cancels below the tolerance
        unit_residual = unit_residual - jnp.einsum("...ed,...d->...e", unit_residual, fixed(q))[..., None] \
            * fixed(q)[..., None, :]
        spanned = live & (fixed(length2) <= tolerance2)
        spanned_at = jnp.where(has_live[..., None] & (jnp.arange(m) == pick[..., None]), 0,
                               jnp.where(spanned, d + 1, spanned_at))
        return (residual, length2, unit_residual, Q.at[..., d, :].set(q), chosen.at[..., d].set(pick),
                completed.at[..., d].set(~has_live), spanned_at)

    # rows that are zero to begin with (a weight that underflowed in an autodiff Jacobian) never enter the sums
    spanned_at = jnp.where(jnp.isfinite(log_k) & (jnp.sum(V**2, axis=-1) > 0), D, 0)
    init = (V, jnp.sum(V**2, axis=-1), jnp.broadcast_to(jnp.eye(D, dtype=V.dtype), batch + (D, D)),
            jnp.zeros(batch + (D, D), V.dtype), jnp.zeros(batch + (D,), spanned_at.dtype), jnp.zeros(batch + (D,), bool),
            spanned_at)
    _, _, _, Q, chosen, completed, spanned_at = jax.lax.fori_loop(0, D, step, init)
    P = V @ jnp.swapaxes(Q, -1, -2)
    P_S = jnp.where(completed[..., None], jnp.eye(D, dtype=V.dtype), jnp.take_along_axis(P, chosen[..., None], axis=-2))
    log_k_S = jnp.where(completed, 0.0, jnp.take_along_axis(log_k, chosen, axis=-1))
    return P, P_S, log_k_S, spanned_at, completed, chosen


def _solve_lower_right(B, L):
    """X (..., m, D) with X L = B for lower-triangular L (..., D, D), by substitution over the columns (elementwise,
    not LAPACK's batched triangular solve: see ``_LAPACK_INLINE_FLOPS``)."""
    D = L.shape[-1]

    def step(i, X):
        j = D - 1 - i
        column = (B[..., j] - jnp.sum(X * L[..., None, :, j], axis=-1)) / L[..., None, j, j]
        return X.at[..., j].set(column)

    return jax.lax.fori_loop(0, D, step, jnp.zeros_like(B))


def _logdet_spd(A):
    """log det A (...,) of symmetric positive definite A (..., D, D) whose eigenvalues are at least 1 (no jitter
    needed), by an outer-product Cholesky over the D columns (elementwise, not LAPACK's batched Cholesky: see
    ``_LAPACK_INLINE_FLOPS``)."""
    D = A.shape[-1]

    def step(j, carry):
        A, total = carry
        pivot = A[..., j, j]
        column = jnp.where(jnp.arange(D) >= j, A[..., :, j], 0.0) / jnp.sqrt(pivot)[..., None]
        return A - column[..., :, None] * column[..., None, :], total + jnp.log(pivot)

    return jax.lax.fori_loop(0, D, step, (A, jnp.zeros(A.shape[:-2], A.dtype)))[1]


def _log_abs_diag_r(A):
    """log |diag R| of the thin Householder QR of A (..., m, D), m >= D; returns (..., D)."""
    return jnp.log(jnp.abs(jnp.diagonal(jnp.linalg.qr(A, mode="r"), axis1=-2, axis2=-1)))


def _se_features_and_log_gamma(X, Z, Ls):
    """K = k(X, Z) (n, m) and log gamma (n,) for an SE kernel k = exp(-d^T Sigma^{-1} d / 2), Sigma = Ls Ls^T,
    vectorised over X (n, D).

    The rows of the Jacobian are k(x, z_l) v_l with v_l = -Sigma^{-1} (x - z_l): whitened differences
    a_l = Ls^{-1} (x - z_l) give log k = -|a_l|^2 / 2 and v_l = -Ls^{-T} a_l, and :func:`_log_gamma_from_rows` keeps the
    two apart, so nothing under- or overflows however far the inducing points are.
    """
    D = X.shape[1]
    Xw, Zw = whiten_unchecked(Ls, X.T).T, whiten_unchecked(Ls, Z.T).T
    a = Xw[:, None, :] - Zw[None, :, :]  # (n, m, D)
    log_k = -0.5 * jnp.sum(a**2, axis=-1)
    back = jax.scipy.linalg.solve_triangular(Ls.T, jnp.eye(D, dtype=Ls.dtype), lower=False)  # Ls^{-T}, D x D
    return jnp.exp(log_k), _log_gamma_from_rows(log_k, a @ back.T)


def _features_and_log_volume(X, Z, kernel, volume, convention, with_volume):
    """K = k(X, Z) (n, m) and the per-point log-volume (n,) (zeros when ``with_volume`` is False)."""
    if with_volume and volume == "closed":
        Ls = se_scale_tril(kernel, X.shape[1])
        K, lv = _se_features_and_log_gamma(X, Z, Ls)
    else:
        K = kernel.evaluate(X, Z)
        lv = jax.vmap(lambda x: _log_gamma_autodiff(x, Z, kernel))(X) if with_volume else jnp.zeros(X.shape[0], K.dtype)
    return K, (2.0 * lv + jnp.log(0.5) if with_volume and convention == "stan" else lv)


def _log_gamma_autodiff(x, Z, kernel):
    """log sqrt(det J^T J) (m > D) or log sqrt(det J J^T) (m <= D) with J = d phi_z / dx by forward-mode autodiff,
    each row split into its log length and direction for :func:`_log_gamma_from_rows`."""
    J = jax.jacfwd(lambda p: kernel.evaluate(p[None, :], Z)[0])(x)  # (m, D)
    top = jnp.max(jnp.abs(J), axis=-1)    # rows of 1e-200 have squares that underflow: scale before squaring
    positive = top > 0
    direction = J / jnp.where(positive, top, 1.0)[:, None]
    norm = jnp.linalg.norm(direction, axis=-1)
    log_k = jnp.where(positive, jnp.log(jnp.where(positive, top, 1.0)) + jnp.log(jnp.where(positive, norm, 1.0)),
                      -jnp.inf)
    return _log_gamma_from_rows(log_k, direction / jnp.where(positive, norm, 1.0)[:, None])


def log_volume(X, Z, kernel: Kernel, *, method: str = "closed", convention: str = "exact"):
    """Per-point log-volume term log gamma(x_i) of the map x -> phi_z(x) from R^D to R^m, J = d phi_z / dx.

    With at least as many inducing points as dimensions (m >= D) the map is an immersion and log gamma =
    0.5 log det(J^T J), the volume of Flaxman et al. (2016, eq. 13). With fewer (m < D, high-dimensional data) J^T J
    is singular and the volume of the m x m side is used instead, log gamma = 0.5 log det(J J^T): the two agree at
    m = D, and the m x m side costs O(m^2 D) per point instead of O(m D^2). A point whose differences x - z_l are
    then linearly dependent has det(J J^T) = 0 and log gamma = -inf.

    Args:
        X: (n, D) points.
        Z: (m, D) inducing points.
        kernel: the embedding kernel.
        method: ``"closed"``: log-space closed form for SE kernels (RBF, ARD, RBFFull), stable for distant
            inducing points; ``"autodiff"``: forward-mode Jacobian and a QR factor, for any differentiable kernel.
        convention: ``"exact"``, or ``"stan"``: 2 log gamma + log(1/2) per point (the Stan program of Flaxman et al.
            2016, Appendix B; reproduction only).

    Returns:
        (n,) array.

    Raises:
        ValueError: for an unknown method or convention.
    """
    X, Z = as_points(X, "X"), as_points(Z, "Z")
    if method not in ("closed", "autodiff"):
        raise ValueError(f"method must be 'closed' or 'autodiff', got {method!r}")
    if convention not in ("exact", "stan"):
        raise ValueError(f"convention must be 'exact' or 'stan', got {convention!r}")
    return _log_volume_points(X, Z, kernel, method, convention)


@partial(jax.jit, static_argnames=("method", "convention"))
def _log_volume_points(X, Z, kernel, method, convention):
    """One compiled program per shape and kernel type: called eagerly, the pass would compile each of its ~50
    operations separately."""
    return _features_and_log_volume(X, Z, kernel, method, convention, True)[1]
