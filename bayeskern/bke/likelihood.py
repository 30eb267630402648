"""BKE marginal pseudolikelihood: Kronecker-structured Gaussian term and log-volume term."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero
from jax.flatten_util import ravel_pytree

from .._config import require_x64
from .._validation import as_matrix, as_points, check_positive, is_concrete, num_points, row_keys
from ..sharding import RowShards, any_process, local_rows, shard_map_rows
from ..kernels.base import Kernel
from ..kernels.stationary import RBF, RBFFull, se_scale_tril, squared_distances
from ..linalg import CholeskyError, jittered_cholesky
from ..linalg.dense import logdet_unchecked, whiten_unchecked
from .convolved import ConvolvedSE

__all__ = ["kron_loglik", "kron_loglik_as_printed", "log_volume", "log_pseudolikelihood", "check_inducing_points"]

_CONVENTIONS = ("exact", "stan_conventions", "stan_as_printed")


def kron_loglik(Kzx, Rzz, tau2, *, method: str = "cholesky"):
    """The Gaussian term of the BKE pseudolikelihood, log N(vec K_zx; 0, 1 1^T (x) R_zz + tau2 I_mn), in O(m^3 + mn).

    Evaluated from the feature mean and the centred sum of squares with one Cholesky factor of
    R_zz + (tau2 / n) I (Flaxman et al. 2016, eq. 33); the mn x mn covariance is never formed.

    Args:
        Kzx: (m, n) features phi_z(x_i) as columns.
        Rzz: (m, m) prior covariance at the inducing points.
        tau2: noise variance > 0.
        method: ``"cholesky"`` (default; differentiable, jitter added only on failure, -inf if even that fails)
            or ``"eigh"`` (eigenvalues clipped at 0).

    Returns:
        Scalar array.

    Raises:
        RuntimeError: when float64 is off.
    """
    require_x64("kron_loglik")
    Kzx, Rzz = _kron_inputs(Kzx, Rzz, tau2)
    if method not in ("cholesky", "eigh"):
        raise ValueError(f"method must be 'cholesky' or 'eigh', got {method!r}")
    mu = jnp.mean(Kzx, axis=1)
    return _kron_loglik_from_stats(mu, jnp.sum((Kzx - mu[:, None]) ** 2), Kzx.shape[1], Rzz, tau2, method)


def _kron_inputs(Kzx, Rzz, tau2):
    """Checked (Kzx (m, n), Rzz (m, m)) of the Kronecker term, with tau2 > 0."""
    Kzx = as_matrix(Kzx, "Kzx")
    Rzz = as_matrix(Rzz, "Rzz", (Kzx.shape[0], Kzx.shape[0]))
    check_positive(tau2, "tau2")
    return Kzx, Rzz


def _kron_loglik_from_stats(mu, e2, n, Rzz, tau2, method="cholesky"):
    """Eq. (33) from its sufficient statistics: the feature mean mu (m,) and the centred sum of squares e2."""
    if method == "cholesky":
        return _kron_cholesky_parts(mu, e2, n, Rzz, tau2)[0]
    if method != "eigh":
        raise ValueError(f"method must be 'cholesky' or 'eigh', got {method!r}")
    lam, Q = jnp.linalg.eigh(0.5 * (Rzz + Rzz.T))
    lam = jnp.maximum(lam, 0.0) + tau2 / n
    return _kron_value(jnp.sum(jnp.log(lam)), jnp.sum((Q.T @ mu) ** 2 / lam), e2, mu.shape[0], n, tau2)


def _kron_cholesky_parts(mu, e2, n, Rzz, tau2):
    """(eq. (33), L, L^{-1} mu, ok) with L the jittered Cholesky factor of Rzz + (tau2 / n) I (-inf where it fails)."""
    m = mu.shape[0]
    L, _, ok = jittered_cholesky(Rzz + (tau2 / n) * jnp.eye(m, dtype=Rzz.dtype))
    w = whiten_unchecked(L, mu)
    value = _kron_value(logdet_unchecked(L), jnp.sum(w**2), e2, m, n, tau2)
    return jnp.where(ok, value, -jnp.inf), L, w, ok


def _kron_value(logdet, quad, e2, m, n, tau2):
    return -0.5 * (logdet + quad + e2 / tau2 + m * jnp.log(n) + m * (n - 1) * jnp.log(tau2) + m * n * jnp.log(2 * jnp.pi))


def kron_loglik_as_printed(Kzx, Rzz, tau2):
    """Flaxman et al. (2016), Appendix B ``kron_multi_normal`` emulated literally: NOT a density.

    Kzx: (m, n); Rzz: (m, m). Eigenvectors of 1 1^T in LAPACK ascending order with the
    eigenvalue n attached to the first column, and weights indexed (j - 1) n + i against a
    column-major ``to_vector``; the -mn/2 log(2 pi) constant is omitted, as in the program.
    Reproduction/diagnostics only: the mean direction is weighted by 1/tau2, and like the
    program it forms the n x n eigenbasis of 1 1^T (O(n^2) memory): keep n in the thousands.

    Args:
        Kzx: (m, n) cross-kernel between inducing points and data.
        Rzz: (m, m) prior covariance at the inducing points.
        tau2: noise variance > 0.

    Returns:
        () array, the program's value.

    Raises:
        ValueError: for non-finite or mismatched inputs or tau2 not positive.
    """
    Kzx, Rzz = _kron_inputs(Kzx, Rzz, tau2)
    m, n = Kzx.shape
    _, Q1 = np.linalg.eigh(np.ones((n, n)))  # data-independent basis, fixed at trace time
    e1 = np.zeros(n)
    e1[0] = n
    e2, Q2 = jnp.linalg.eigh(0.5 * (Rzz + Rzz.T))
    mv2 = jnp.ravel(Q2.T @ Kzx @ jnp.asarray(Q1), order="F")  # Stan to_vector: column-major
    e = 1.0 / (jnp.outer(e2, e1) + tau2).reshape(-1)  # e[(j-1) n + i] = 1 / (e1[i] e2[j] + tau2)
    logdet = jnp.sum(jnp.log(n * e2 + tau2)) + m * (n - 1) * jnp.log(tau2)
    return -0.5 * logdet - 0.5 * jnp.sum(mv2 * e * mv2)


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


def _log_volume_points(X, Z, kernel, method, convention):
    return _features_and_log_volume(X, Z, kernel, method, convention, True)[1]


def check_inducing_points(X, Z):
    """Validate inducing points against the likelihood points: distinct, none of them in X.

    Args:
        X: (n, D) likelihood points, or a :class:`~bayeskern.sharding.RowShards` (each process checks its own rows).
        Z: (m, D) inducing points.

    Returns:
        (X, Z) as float arrays (X stays a RowShards).

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for non-finite points, dimensions that differ, duplicated inducing points or inducing points
            that are points of X.
    """
    sharded = isinstance(X, RowShards)
    X = X.with_values(as_points(X.values, "X")) if sharded else as_points(X, "X")
    Z = as_points(Z, "Z")
    dim = X.values.shape[1] if sharded else X.shape[1]
    if Z.shape[1] != dim:
        raise ValueError(f"Z has dimension {Z.shape[1]} but X has dimension {dim}")
    if is_concrete((X, Z)):
        Zn = row_keys(Z)
        if len(np.unique(Zn)) < len(Zn):
            raise ValueError("Z contains duplicated inducing points; they must be distinct (general position)")
        shared = np.isin(row_keys(local_rows(X) if sharded else X), Zn).any()
        if any_process(shared) if sharded else shared:
            raise ValueError("some inducing points Z are also points of X: hold them out of the likelihood")
    return X, Z


def log_pseudolikelihood(
    X,
    Z,
    kernel: Kernel,
    tau2=1.0,
    *,
    prior_cov: Kernel | None = None,
    volume: str = "closed",
    convention: str = "exact",
):
    """The BKE marginal pseudolikelihood L(theta, tau2) (Flaxman et al. 2016, eq. 15, corrected).

    L = log N(vec K_zx; 0, 11^T (x) R_zz + tau2 I) + sum_i log gamma(x_i): the Kronecker Gaussian term in
    O(m^3 + n m) and the log-volume term sum_i (1/2) log det(J(x_i)^T J(x_i)). X is streamed in chunks (memory
    O(chunk x m), never m x n); derivatives in the kernel hyperparameters come from forward mode inside that
    pass, so gradients and Hessians are cheap. For one isotropic SE lengthscale with n m <= 2^22 (and the exact
    convention) a fused pass is used instead, equal to rounding (the forms of
    :class:`~bayeskern.bke.SEPseudolikelihood`: D = 1, m <= D and m > D). Traceable in (kernel, tau2).

    Args:
        X: (n, D) points entering the likelihood; or a :class:`~bayeskern.sharding.RowShards` (rows spread over
            devices and processes: each streams its own rows, and the sufficient statistics are merged).
        Z: (m, D) inducing points, m >= D, distinct and none of them in X.
        kernel: the embedding kernel k_theta.
        tau2: noise variance tau^2 > 0.
        prior_cov: the prior covariance r_theta (default ``ConvolvedSE(kernel)`` with Lebesgue measure; required
            for kernels other than the squared exponential).
        volume: ``"closed"`` (SE kernels, log-space closed form) or ``"autodiff"`` (any differentiable kernel).
        convention: ``"exact"`` (default); ``"stan_conventions"`` (unit-scale r and the volume term of the
            paper's Stan program) or ``"stan_as_printed"`` (also the literal Appendix B likelihood,
            :func:`kron_loglik_as_printed`; 1-D, reproduction only).

    Returns:
        Scalar array, the log pseudolikelihood.

    Raises:
        ValueError: for an unknown convention, invalid inducing points, tau2 <= 0, a non-SE kernel without
            ``prior_cov``, or points of X whose volume term is -inf (differences to Z linearly dependent).
        CholeskyError: when R_zz + (tau2 / n) I cannot be factorised even with jitter.
        RuntimeError: when float64 is off.
    """
    require_x64("log_pseudolikelihood")
    if convention not in _CONVENTIONS:
        raise ValueError(f"convention must be one of {_CONVENTIONS}, got {convention!r}")
    X, Z = check_inducing_points(X, Z)
    if isinstance(X, RowShards) and convention == "stan_as_printed":
        raise ValueError("convention='stan_as_printed' forms K_zx whole: pass X on one process, not a RowShards")
    check_positive(tau2, "tau2")
    if prior_cov is None:
        if not isinstance(kernel, (RBF, RBFFull)):
            raise ValueError(f"prior_cov (r_theta) is required for a non-SE kernel {type(kernel).__name__}")
        prior_cov = ConvolvedSE(kernel, r_scale="exact" if convention == "exact" else "unit")
    value = _log_pseudolikelihood(kernel, prior_cov, X, Z, tau2, volume, convention, True)
    if is_concrete(value) and not np.isfinite(float(value)):
        if not isinstance(X, RowShards):
            flat = ~np.isfinite(np.asarray(_log_volume_points(X, Z, kernel, volume, "exact")))
            if flat.any():
                raise ValueError(f"{int(flat.sum())} points of X (the first: row {int(np.argmax(flat))}) have a volume "
                                 "term of -inf: their differences to the inducing points Z are linearly dependent, "
                                 "so det(J J^T) = 0; hold them out of X, choose other inducing points, or use "
                                 "SEPseudolikelihood with an isotropic lengthscale (its m x m form takes a "
                                 "pseudo-determinant)")
        raise CholeskyError("R_zz + tau2/n I is not positive definite even with jitter (check Z and the lengthscale)")
    return value


_CHUNK_ENTRIES = 1 << 18  # points per chunk x m: a chunk of K_zx is at most 2 MiB in float64
# jaxlib (0.10) splits a batched LAPACK call of more than 2e5 flops over the XLA:CPU thread pool and blocks the
# calling pool thread until the pieces finish; two such calls scheduled side by side (a value and its derivative)
# occupy both threads of a 2-core machine and never return. The per-point QRs of the log-volume for m <= D are
# therefore batched in chunks below that size, which jaxlib runs inline (m > D uses no LAPACK call).
_LAPACK_INLINE_FLOPS = 200_000
_CACHE_ENTRIES = 1 << 15   # points per chunk x m x D for the m > D pivots: each step's arrays stay in cache (256 KiB)
FUSED_ENTRIES = 1 << 22  # n x m up to which the D = 1 form holds K_zx whole (a few arrays of at most 32 MiB)
NARROW_ENTRIES = 1 << 23  # n x m x D up to which the m > D form holds its coefficients whole (64 MiB)


@partial(jax.custom_jvp, nondiff_argnums=(3, 4, 5))
def _streamed_statistics(kernel, X, Z, volume, volume_convention, with_volume):
    """One pass over X in chunks: feature mean mu (m,), centred sum of squares e2, sum_i log gamma(x_i).

    Only a (chunk, m) block of K_zx exists at a time; chunk means and centred sums of squares are merged
    by Chan's parallel formula, which stays accurate where sum k^2 - n |mu|^2 would cancel. Derivatives
    in the kernel hyperparameters (a handful of numbers) are taken by forward mode inside the same pass,
    so reverse mode stores an (m + 2) x p Jacobian instead of recomputing or storing the chunks.
    """
    return _stream(kernel, X, Z, volume, volume_convention, with_volume)


def _streamed_statistics_jvp(volume, volume_convention, with_volume, primals, tangents):
    kernel, X, Z = primals
    t_kernel, t_X, t_Z = tangents
    stream = partial(_stream, volume=volume, volume_convention=volume_convention, with_volume=with_volume)

    def zero(t):
        return all(isinstance(leaf, SymbolicZero) for leaf in jax.tree.leaves(t, is_leaf=_is_zero))

    if not (zero(t_X) and zero(t_Z)):  # the data move too: plain JVP
        def dense(t):
            return jax.tree.map(lambda t: jnp.zeros(t.shape, t.dtype) if _is_zero(t) else t, t, is_leaf=_is_zero)

        return jax.jvp(stream, (kernel, X, Z), (dense(t_kernel), dense(t_X), dense(t_Z)))
    theta, unravel = ravel_pytree(kernel)
    t_leaves = jax.tree.leaves(t_kernel, is_leaf=lambda t: isinstance(t, SymbolicZero))
    t_theta = jnp.concatenate([jnp.zeros(t.shape, t.dtype).ravel() if isinstance(t, SymbolicZero) else jnp.ravel(t)
                               for t in t_leaves]) if t_leaves else jnp.zeros(0, theta.dtype)
    out, jacobian = jax.vmap(lambda d: jax.jvp(lambda th: stream(unravel(th), X, Z), (theta,), (d,)),
                             out_axes=(None, -1))(jnp.eye(theta.size, dtype=theta.dtype))
    return out, jax.tree.map(lambda J: J @ t_theta, jacobian)


_streamed_statistics.defjvp(_streamed_statistics_jvp, symbolic_zeros=True)


def _is_zero(t):
    return isinstance(t, SymbolicZero)


def _stream(kernel, X, Z, volume, volume_convention, with_volume):
    """(mu, e2, sum log gamma) over the real rows of X (plain or RowShards): chunk statistics merged by Chan's
    formula; a RowShards streams each shard on its device and merges the chunks of all shards."""
    if isinstance(X, RowShards):
        def local(x, keep, k, z):
            return _chunk_statistics(k, x, keep, z, volume, volume_convention, with_volume)

        chunks = shard_map_rows(local, 2, X.mesh, True)(X.values, X.mask, kernel, Z)
    else:
        chunks = _chunk_statistics(kernel, X, jnp.ones(X.shape[0], bool), Z, volume, volume_convention, with_volume)
    counts, means, m2s, lvs = chunks
    n = num_points(X)
    mu = (counts @ means) / n
    e2 = jnp.sum(m2s) + jnp.sum(counts * jnp.sum((means - mu) ** 2, axis=1))
    return mu, e2, jnp.sum(lvs)


def _chunk_size(n, m, dim, with_volume):
    """Rows of X per chunk: the (size, m, D) differences stay small, and with the log-volume of the m x m side
    (m <= D) the batched QRs stay under jaxlib's inline size."""
    size = max(1, min(n, _CHUNK_ENTRIES // (m * max(1, dim // 16))))
    if with_volume and 1 < m <= dim:   # the QR of the m x m side (m > D takes no LAPACK call)
        size = max(1, min(size, _LAPACK_INLINE_FLOPS // (2 * dim * m * m)))
    elif with_volume and dim > 1:
        size = max(1, min(size, _CACHE_ENTRIES // (m * dim)))
    return size


def _chunk_statistics(kernel, X, keep, Z, volume, volume_convention, with_volume):
    """Per chunk of rows of X (where ``keep``): counts, feature means (chunks, m), centred sums of squares and
    log-volume sums."""
    n, dim = X.shape
    size = _chunk_size(n, Z.shape[0], dim, with_volume)
    chunks = -(-n // size)
    padded = jnp.concatenate([X, jnp.broadcast_to(X[:1], (chunks * size - n, dim))])
    valid = jnp.concatenate([keep, jnp.zeros(chunks * size - n, bool)]).reshape(chunks, size)

    @jax.checkpoint  # matters only when X or Z are differentiated (reverse mode through the plain pass)
    def chunk(args):
        Xc, keep = args
        w = keep.astype(X.dtype)
        K, lv = _features_and_log_volume(Xc, Z, kernel, volume, volume_convention, with_volume)  # (size, m), (size,)
        count = jnp.sum(w)
        mean = (w @ K) / jnp.maximum(count, 1.0)
        m2 = jnp.sum(w[:, None] * (K - mean) ** 2)
        return count, mean, m2, jnp.sum(jnp.where(keep, lv, 0.0))

    return jax.lax.map(chunk, (padded.reshape(chunks, size, dim), valid))


def _fused_form(kernel, prior_cov, X, Z, volume, convention, with_volume):
    """Which fused form applies, if any: ``"one_dimensional"`` (D = 1), ``"wide"`` (m <= D) or ``"narrow"`` (m > D),
    for one isotropic SE lengthscale, the exact model with its closed-form volume and Lebesgue measure, all rows on
    one device, and K_zx (and for m > D the n x m x D coefficients) small enough to hold whole; else None (the
    streamed pass)."""
    if not (isinstance(kernel, RBF) and jnp.size(kernel.lengthscale) == 1 and not isinstance(X, RowShards)
            and volume == "closed" and with_volume and convention == "exact"
            and isinstance(prior_cov, ConvolvedSE) and prior_cov.base is kernel and prior_cov.nu == "lebesgue"
            and prior_cov.r_scale == "exact"):
        return None
    return fused_shape(X, Z)


def fused_shape(X, Z):
    """``"one_dimensional"``, ``"wide"``, ``"narrow"`` or None: the fused form the shapes of X (n, D) and Z (m, D)
    allow (``"narrow"``: m > D with the n x m x D coefficients of :func:`narrow_inputs` held whole)."""
    n, dim = X.shape
    m = Z.shape[0]
    if n * m > FUSED_ENTRIES:
        return None
    if dim == 1:
        return "one_dimensional"
    return "wide" if m <= dim else "narrow" if n * m * dim <= NARROW_ENTRIES else None


def fused_inputs(X, Z):
    """The data-only inputs of the fused form of X and Z (computed once and reused by every evaluation), or None."""
    form = fused_shape(X, Z)
    inputs = {"one_dimensional": one_dimensional_distances, "wide": wide_inputs, "narrow": narrow_inputs}
    return None if form is None else inputs[form](X, Z)


def one_dimensional_distances(X, Z):
    """(d2 (m, n), d2min (n,)): squared distances (z_l - x_i)^2 with the inducing points along rows, and each
    point's distance to its nearest inducing point; data-only inputs of the fused D = 1 pseudolikelihood, computed
    once (NumPy on concrete data) instead of at every evaluation."""
    xp = np if is_concrete((X, Z)) else jnp
    d2 = (xp.asarray(Z)[:, :1] - xp.asarray(X)[:, 0][None, :]) ** 2
    return d2, xp.min(d2, axis=0)


def _se_1d_parts(lengthscale, d2, d2min, z, tau2):
    """The D = 1 pseudolikelihood in one pass over the (m, n) squared distances, with what its derivative reuses.

    With s = 1 / l^2, P = exp(-s (d2 - d2min) / 2) lies in (0, 1] (the nearest inducing point gives 1, so the
    volume sum cannot underflow), K = exp(-s d2min / 2) P = K_zx, and
    log gamma_i = -s d2min_i / 2 + log(sum_l P_li^2 d2_li) / 2 - 2 log l.
    """
    n = d2.shape[1]
    s = 1.0 / lengthscale**2
    P = jnp.exp(-0.5 * s * (d2 - d2min))
    K = jnp.exp(-0.5 * s * d2min) * P
    mu = jnp.mean(K, axis=1)
    centred = K - mu[:, None]
    e2 = jnp.sum(centred**2)
    P2d2 = P**2 * d2
    volume_sum = jnp.sum(P2d2, axis=0)
    log_volume = -0.5 * s * jnp.sum(d2min) + 0.5 * jnp.sum(jnp.log(volume_sum)) - 2.0 * n * jnp.log(lengthscale)
    R = ConvolvedSE(RBF(lengthscale)).evaluate(z[:, None], z[:, None])
    gaussian, L, w, ok = _kron_cholesky_parts(mu, e2, n, R, tau2)
    value = jnp.where(ok, gaussian + log_volume, -jnp.inf)
    return value, (s, K, centred, P2d2, volume_sum, R, L, w, ok)


@jax.custom_jvp
def _se_1d_pseudolikelihood(lengthscale, d2, d2min, z, tau2):
    """L(l, tau2) from the distances of :func:`one_dimensional_distances` and z (m,); its derivative in l reuses
    the primal's exponentials (other derivatives: plain autodiff)."""
    return _se_1d_parts(lengthscale, d2, d2min, z, tau2)[0]


def _se_1d_pseudolikelihood_jvp(primals, tangents):
    lengthscale, d2, d2min, z, tau2 = primals
    if any(not isinstance(t, SymbolicZero) for t in tangents[1:]):
        return jax.jvp(lambda *a: _se_1d_parts(*a)[0], primals, tuple(
            jnp.zeros(jnp.shape(p), jnp.result_type(p)) if isinstance(t, SymbolicZero) else t
            for p, t in zip(primals, tangents)))
    value, (s, K, centred, P2d2, volume_sum, R, L, w, ok) = _se_1d_parts(*primals)
    n = d2.shape[1]
    # d/dl with ds/dl = -2 s / l:  dK = K d2 s / l;  d log gamma_i = (s / l) sum_l P^2 d2^2 / sum_l P^2 d2 - 2 / l
    rate = s / lengthscale
    dK = K * d2 * rate
    d_mu = jnp.mean(dK, axis=1)
    d_e2 = 2.0 * jnp.sum(centred * dK)
    d_volume = rate * jnp.sum(jnp.sum(P2d2 * d2, axis=0) / volume_sum) - 2.0 * n / lengthscale
    dR = R * (1.0 / lengthscale + 0.5 * rate * (z[:, None] - z[None, :]) ** 2)   # R = sqrt(pi) l exp(-s dz^2 / 4)
    # G = log det A + mu^T A^{-1} mu, A = R + tau2/n I:  dG = tr(A^{-1} dR) + 2 mu^T A^{-1} d_mu - mu^T A^{-1} dR A^{-1} mu
    V = whiten_unchecked(L, whiten_unchecked(L, dR).T)   # L^{-1} dR L^{-T}
    dG = jnp.trace(V) + 2.0 * w @ whiten_unchecked(L, d_mu) - w @ V @ w
    slope = -0.5 * (dG + d_e2 / tau2) + d_volume
    return value, jnp.where(ok, slope, 0.0) * tangents[0]


_se_1d_pseudolikelihood.defjvp(_se_1d_pseudolikelihood_jvp, symbolic_zeros=True)


def wide_inputs(X, Z):
    """(d2 (n, m), dz2 (m, m), c): squared distances from the points to the inducing points and among the inducing
    points, and c = sum_i 0.5 log det(A_i A_i^T) with rows x_i - z_l of A_i: the data-only inputs of the fused m <= D
    pseudolikelihood.

    A point whose differences x_i - z_l are linearly dependent (lattice or repeated values) has volume 0 at every
    lengthscale; its term of c is the log pseudo-determinant (the eigenvalues above NumPy's rank tolerance). That is
    the limit of the same data with a vanishing amount of noise added, up to a constant free of the lengthscale: its
    dependence on the lengthscale is that of points in general position, where the pass over the Jacobians (the
    streamed form) says -inf.
    """
    return _wide_inputs(X, Z)


_WIDE_BATCH = 256   # points per batch of the m x m log-determinants of the volume constant


@jax.jit
def _wide_inputs(X, Z):
    d2, dz2 = squared_distances(X, Z), squared_distances(Z, Z)
    m = Z.shape[0]

    def gram(row):   # (x - z_l).(x - z_l') from distances: (|x - z_l|^2 + |x - z_l'|^2 - |z_l - z_l'|^2) / 2
        return 0.5 * (row[:, None] + row[None, :] - dz2)

    def half_log_pdet(row):
        eigenvalues = jnp.linalg.eigvalsh(gram(row))
        kept = eigenvalues > m * jnp.finfo(eigenvalues.dtype).eps * eigenvalues[-1]
        return 0.5 * jnp.sum(jnp.where(kept, jnp.log(jnp.where(kept, eigenvalues, 1.0)), 0.0))

    def half_logdet(rows):   # Cholesky factors for the points in general position
        return jnp.sum(jnp.log(jnp.diagonal(jnp.linalg.cholesky(jax.vmap(gram)(rows)), axis1=-2, axis2=-1)), axis=-1)

    # batches of points as a map over explicit chunks: lax.map(..., batch_size=...) around the batched Cholesky
    # deadlocks XLA:CPU (jax 0.10.2) after a few calls
    n = d2.shape[0]
    size = min(n, _WIDE_BATCH)
    padded = jnp.concatenate([d2, jnp.broadcast_to(d2[:1], ((-n) % size, m))])
    values = jax.lax.map(half_logdet, padded.reshape(-1, size, m)).reshape(-1)[:n]
    # the eigenvalues of the degenerate ones only (a sequential map: the cond is not turned into a select)
    values = jax.lax.map(lambda a: jax.lax.cond(jnp.isfinite(a[1]), lambda: a[1], lambda: half_log_pdet(a[0])),
                         (d2, values))
    return d2, dz2, jnp.sum(values)


def _se_wide_pseudolikelihood(lengthscale, d2, dz2, constant, tau2, dim):
    """L(l, tau2) for m <= D from the inputs of :func:`wide_inputs`, in O(n m + m^3) per evaluation.

    The log-volume of the m x m side is closed-form for an isotropic SE kernel: J J^T = diag(k) A A^T diag(k) / l^4,
    so log gamma_i = -sum_l d2_il / (2 l^2) - 2 m log l + 0.5 log det(A_i A_i^T), the last term free of l. The prior
    covariance r = (pi l^2)^(D/2) exp(-dz2 / (4 l^2)) over- or underflows in high dimension, so R + (tau2 / n) I is
    factorised as e^t (e^(log c - t) R~ + e^(log s - t) I) with t the larger of log c and log s = log(tau2 / n).
    """
    n, m = d2.shape
    gaussian, ok = _se_gaussian_term(lengthscale, d2, dz2, tau2, dim)
    volume = -0.5 * jnp.sum(d2) / lengthscale**2 - 2.0 * m * n * jnp.log(lengthscale) + constant
    return jnp.where(ok, gaussian + volume, -jnp.inf)


def _se_gaussian_term(lengthscale, d2, dz2, tau2, dim):
    """(the Kronecker Gaussian term of L, whether R + (tau2 / n) I factorised) for an isotropic SE kernel from the
    squared distances d2 (n, m) and dz2 (m, m); R is factorised with its scale pulled out (see the m <= D form)."""
    n, m = d2.shape
    s = 1.0 / lengthscale**2
    K = jnp.exp(-0.5 * s * d2)
    mu = jnp.mean(K, axis=0)
    e2 = jnp.sum((K - mu) ** 2)
    log_c = 0.5 * dim * jnp.log(jnp.pi) + dim * jnp.log(lengthscale)
    log_s = jnp.log(tau2 / n)
    top = jnp.maximum(log_c, log_s)
    M = jnp.exp(log_c - top) * jnp.exp(-0.25 * s * dz2) + jnp.exp(log_s - top) * jnp.eye(m, dtype=d2.dtype)
    L, _, ok = jittered_cholesky(M)
    w = whiten_unchecked(L, mu)
    return _kron_value(m * top + logdet_unchecked(L), jnp.exp(-top) * jnp.sum(w**2), e2, m, n, tau2), ok


def narrow_inputs(X, Z):
    """The data-only inputs of the fused m > D pseudolikelihood (isotropic SE kernel), computed once.

    The rows of the Jacobian at x are k(x, z_l) (z_l - x) / l^2: their directions a_l = x - z_l do not depend on the
    lengthscale, and the weights log k = -|a_l|^2 / (2 l^2) keep their order (nearest first) at every lengthscale.
    So the basis of :func:`_log_gamma_from_rows` is chosen once per point, by weight alone (the nearest row not in
    the span of those before it), and with it W = A A_S^{-1} and log |det A_S|; an evaluation then needs
    C = diag(k_rest) W diag(k_S)^{-1}, whose ratios are at most 1 for this order, and det(I + C^T C).

    Returns:
        (d2 (n, m), dz2 (m, m), W (n, m, D), spanned_at (n, m), chosen (n, D), completed (n, D), log_det (n,)).
    """
    return _narrow_inputs(X, Z)


@jax.jit
def _narrow_inputs(X, Z):
    d2, dz2 = squared_distances(X, Z), squared_distances(Z, Z)
    n, (m, D) = X.shape[0], Z.shape
    size = max(1, min(n, _CACHE_ENTRIES // (m * D)))
    pad = (-n) % size
    Xp = jnp.concatenate([X, jnp.broadcast_to(X[:1], (pad, D))]).reshape(-1, size, D)

    def block(Xb):
        A = Xb[:, None, :] - Z[None, :, :]                                              # (size, m, D)
        P, P_S, _, spanned_at, completed, chosen = _pivoted_gram_schmidt(-jnp.sum(A**2, axis=-1), A, by_weight=True)
        keep = jnp.arange(D) < spanned_at[..., None]
        W = jnp.where(keep, _solve_lower_right(P, P_S), 0.0)
        log_det = jnp.sum(jnp.where(completed, 0.0, jnp.log(jnp.abs(jnp.diagonal(P_S, axis1=-2, axis2=-1)))), -1)
        return W, spanned_at, chosen, completed, log_det

    parts = jax.lax.map(block, Xp)
    W, spanned_at, chosen, completed, log_det = (p.reshape((-1,) + p.shape[2:])[:n] for p in parts)
    return d2, dz2, W, spanned_at, chosen, completed, log_det


def _se_narrow_pseudolikelihood(lengthscale, d2, dz2, W, spanned_at, chosen, completed, log_det, tau2, dim):
    """L(l, tau2) for m > D from the inputs of :func:`narrow_inputs`: the Gaussian term as for m <= D and
    log gamma_i = sum_S log k_s + log |det A_S| - 2 r log l + 0.5 log det(I + C^T C), r the rank of the rows."""
    n, m, D = W.shape
    gaussian, ok = _se_gaussian_term(lengthscale, d2, dz2, tau2, dim)
    size = max(1, min(n, _CACHE_ENTRIES // (m * D)))
    pad = (-n) % size

    def blocked(a):
        return jnp.concatenate([a, jnp.broadcast_to(a[:1], (pad,) + a.shape[1:])]).reshape((-1, size) + a.shape[1:])

    def block(args):
        d2b, Wb, spanned_b, chosen_b, completed_b, log_det_b = args
        log_k = -0.5 * d2b / lengthscale**2
        log_k_S = jnp.where(completed_b, 0.0, jnp.take_along_axis(log_k, chosen_b, axis=-1))
        keep = jnp.arange(D) < spanned_b[..., None]
        ratio = jnp.exp(jnp.where(keep, log_k[..., :, None] - log_k_S[..., None, :], -jnp.inf))
        C = Wb * ratio
        inner = jnp.eye(D, dtype=Wb.dtype) + jnp.swapaxes(C, -1, -2) @ C
        rank = jnp.sum(~completed_b, axis=-1)
        return (jnp.sum(log_k_S, axis=-1) + log_det_b - 2.0 * rank * jnp.log(lengthscale)
                + 0.5 * _logdet_spd(inner))

    volumes = jax.lax.map(block, tuple(blocked(a) for a in (d2, W, spanned_at, chosen, completed, log_det)))
    return jnp.where(ok, gaussian + jnp.sum(volumes.reshape(-1)[:n]), -jnp.inf)


def _log_pseudolikelihood(kernel, prior_cov, X, Z, tau2, volume, convention, with_volume, distances=None):
    """L for checked inputs; a fused form where it applies (decided here, where the prior covariance is known to be
    built on this very kernel: inside the compiled function the two are separate copies)."""
    fused = _fused_form(kernel, prior_cov, X, Z, volume, convention, with_volume)
    return _compiled_log_pseudolikelihood(kernel, prior_cov, X, Z, tau2, volume, convention, with_volume, fused,
                                          distances)


@partial(jax.jit, static_argnames=("volume", "convention", "with_volume", "fused"))
def _compiled_log_pseudolikelihood(kernel, prior_cov, X, Z, tau2, volume, convention, with_volume, fused, distances):
    lengthscale = jnp.reshape(kernel.lengthscale, ()) if fused else None
    if fused == "one_dimensional":
        d2, d2min = one_dimensional_distances(X, Z) if distances is None else distances
        return _se_1d_pseudolikelihood(lengthscale, d2, d2min, Z[:, 0], jnp.asarray(tau2))
    if fused == "wide":
        d2, dz2, constant = _wide_inputs(X, Z) if distances is None else distances
        return _se_wide_pseudolikelihood(lengthscale, d2, dz2, constant, jnp.asarray(tau2), X.shape[1])
    if fused == "narrow":
        inputs = _narrow_inputs(X, Z) if distances is None else distances
        return _se_narrow_pseudolikelihood(lengthscale, *inputs, jnp.asarray(tau2), X.shape[1])
    Rzz = prior_cov.evaluate(Z, Z)
    volume_convention = "exact" if convention == "exact" else "stan"
    if convention == "stan_as_printed":
        gaussian = kron_loglik_as_printed(kernel.evaluate(Z, X), Rzz, tau2)
        lv = jnp.sum(_log_volume_points(X, Z, kernel, volume, volume_convention)) if with_volume else 0.0
        return gaussian + lv
    mu, e2, lv = _streamed_statistics(kernel, X, Z, volume, volume_convention, with_volume)
    return _kron_loglik_from_stats(mu, e2, num_points(X), Rzz, tau2) + lv
