"""Fused passes of the BKE pseudolikelihood for one isotropic SE lengthscale: D = 1, m <= D and m > D, each over
data-only inputs computed once and reused by every evaluation; equal to the general pass to rounding."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from .._compile import quick_jit
from .._validation import is_concrete
from ..sharding import RowShards
from ..kernels.stationary import RBF, squared_distances
from ..linalg import jittered_cholesky
from ..linalg.dense import logdet_unchecked, whiten_unchecked
from .convolved import ConvolvedSE
from .kron import _kron_cholesky_parts, _kron_value
from .volume import _CACHE_ENTRIES, _logdet_spd, _pivoted_gram_schmidt, _solve_lower_right

__all__ = ["fused_shape", "fused_inputs", "one_dimensional_distances", "wide_inputs", "narrow_inputs"]

FUSED_ENTRIES = 1 << 22  # n x m up to which the D = 1 form holds K_zx whole (a few arrays of at most 32 MiB)
NARROW_ENTRIES = 1 << 23  # n x m x D up to which the m > D form holds its coefficients whole (64 MiB)


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


@quick_jit   # a first call's heaviest program: quick compiler options at the top level
def _narrow_inputs(X, Z):
    d2, dz2 = squared_distances(X, Z), squared_distances(Z, Z)
    n, (m, D) = X.shape[0], Z.shape
    Xp = _point_blocks(X, m * D)

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


def _point_blocks(a, entries_per_point):
    """a (n, ...) as (blocks, size, ...) with size points per block (the last block padded with copies of the first
    point; the caller drops them), size chosen so that a block of (size, m, D) arrays stays in cache."""
    n = a.shape[0]
    size = max(1, min(n, _CACHE_ENTRIES // entries_per_point))
    padded = jnp.concatenate([a, jnp.broadcast_to(a[:1], ((-n) % size,) + a.shape[1:])])
    return padded.reshape((-1, size) + a.shape[1:])


def _se_narrow_pseudolikelihood(lengthscale, d2, dz2, W, spanned_at, chosen, completed, log_det, tau2, dim):
    """L(l, tau2) for m > D from the inputs of :func:`narrow_inputs`: the Gaussian term as for m <= D and
    log gamma_i = sum_S log k_s + log |det A_S| - 2 r log l + 0.5 log det(I + C^T C), r the rank of the rows."""
    n, m, D = W.shape
    gaussian, ok = _se_gaussian_term(lengthscale, d2, dz2, tau2, dim)
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

    inputs = (d2, W, spanned_at, chosen, completed, log_det)
    volumes = jax.lax.map(block, tuple(_point_blocks(a, m * D) for a in inputs))
    return jnp.where(ok, gaussian + jnp.sum(volumes.reshape(-1)[:n]), -jnp.inf)
