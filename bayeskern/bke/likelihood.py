"""BKE marginal pseudolikelihood: Kronecker-structured Gaussian term and log-volume term (spec bke.md §8–9)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from .._validation import as_points, check_positive, is_concrete
from ..kernels.base import Kernel
from ..kernels.stationary import RBF, RBFFull, se_scale_tril
from ..linalg import CholeskyError, jittered_cholesky, logdet_from_cholesky, whiten
from .convolved import ConvolvedSE

__all__ = ["kron_loglik", "kron_loglik_as_printed", "log_volume", "log_pseudolikelihood", "check_inducing_points"]

_CONVENTIONS = ("exact", "stan_conventions", "stan_as_printed")


def kron_loglik(Kzx, Rzz, tau2, *, method: str = "cholesky"):
    """log N(vec K_zx; 0, 1 1^T (x) R_zz + tau2 I_mn) in O(m^3 + mn), eq. (33).

    Kzx: (m, n) features phi_z(x_i) as columns; Rzz: (m, m) prior covariance at Z.
    ``method="cholesky"`` (default; differentiable, jitter added only on failure,
    -inf if even that fails) or ``"eigh"`` (eigenvalues clipped at 0).
    """
    m, n = Kzx.shape
    mu = jnp.mean(Kzx, axis=1)
    e2 = jnp.sum((Kzx - mu[:, None]) ** 2)
    noise = tau2 / n
    if method == "cholesky":
        L, _, ok = jittered_cholesky(Rzz + noise * jnp.eye(m, dtype=Rzz.dtype))
        logdet = logdet_from_cholesky(L)
        quad = jnp.sum(whiten(L, mu) ** 2)
    elif method == "eigh":
        lam, Q = jnp.linalg.eigh(0.5 * (Rzz + Rzz.T))
        lam = jnp.maximum(lam, 0.0) + noise
        logdet = jnp.sum(jnp.log(lam))
        quad = jnp.sum((Q.T @ mu) ** 2 / lam)
        ok = True
    else:
        raise ValueError(f"method must be 'cholesky' or 'eigh', got {method!r}")
    value = -0.5 * (logdet + quad + e2 / tau2 + m * jnp.log(n) + m * (n - 1) * jnp.log(tau2) + m * n * jnp.log(2 * jnp.pi))
    return jnp.where(ok, value, -jnp.inf)


def kron_loglik_as_printed(Kzx, Rzz, tau2):
    """The seed's Appendix B ``kron_multi_normal`` emulated literally (spec §10.3c): NOT a density.

    Kzx: (m, n); Rzz: (m, m). Eigenvectors of 1 1^T in LAPACK ascending order with the
    eigenvalue n attached to the first column, and weights indexed (j - 1) n + i against a
    column-major ``to_vector``; the -mn/2 log(2 pi) constant is omitted, as in the program.
    Reproduction/diagnostics only: the mean direction is weighted by 1/tau2, and like the
    program it forms the n x n eigenbasis of 1 1^T (O(n^2) memory): keep n in the thousands.
    """
    m, n = Kzx.shape
    _, Q1 = np.linalg.eigh(np.ones((n, n)))  # data-independent basis, fixed at trace time
    e1 = np.zeros(n)
    e1[0] = n
    e2, Q2 = jnp.linalg.eigh(0.5 * (Rzz + Rzz.T))
    mv2 = jnp.ravel(Q2.T @ Kzx @ jnp.asarray(Q1), order="F")  # Stan to_vector: column-major
    e = 1.0 / (jnp.outer(e2, e1) + tau2).reshape(-1)  # e[(j-1) n + i] = 1 / (e1[i] e2[j] + tau2)
    logdet = jnp.sum(jnp.log(n * e2 + tau2)) + m * (n - 1) * jnp.log(tau2)
    return -0.5 * logdet - 0.5 * jnp.sum(mv2 * e * mv2)


def _log_abs_diag_r(A):
    """log |diag R| of the thin QR of A (m, D) by modified Gram-Schmidt, unrolled over the static D columns.

    The R factor of MGS is backward stable, and D vectorised passes over m entries are far cheaper
    than a batched LAPACK QR per point.
    """
    cols = [A[:, d] for d in range(A.shape[1])]
    out = []
    for d in range(len(cols)):
        norm = jnp.sqrt(jnp.sum(cols[d] ** 2))
        out.append(jnp.log(norm))
        q = cols[d] / jnp.where(norm > 0, norm, 1.0)
        for e in range(d + 1, len(cols)):
            cols[e] = cols[e] - jnp.dot(q, cols[e]) * q
    return jnp.stack(out)


def _se_weights(x, Z, Ls):
    """log w_l = log k(x, z_l)^2 (m,) and v_l = Sigma^{-1} (x - z_l) (m, D) for k = exp(-d^T Sigma^{-1} d / 2)."""
    a = whiten(Ls, (x - Z).T)  # (D, m): Ls^{-1} (x - z_l)
    v = jax.scipy.linalg.solve_triangular(Ls.T, a, lower=False).T
    return -jnp.sum(a**2, axis=0), v


def _log_gamma_se(x, Z, Ls):
    """(log sqrt(det J^T J), |R_DD| / |R_11|) at x by the log-space scaled QR of spec §8.5."""
    log_w, v = _se_weights(x, Z, Ls)
    if x.shape[0] == 1:  # exact 1-D form: 0.5 logsumexp(log w_l + 2 log |v_l|)
        v2 = v[:, 0] ** 2
        safe = jnp.where(v2 > 0, v2, 1.0)
        return 0.5 * logsumexp(jnp.where(v2 > 0, log_w + jnp.log(safe), -jnp.inf)), jnp.ones(())
    M = jnp.max(log_w)
    log_r = _log_abs_diag_r(jnp.exp(0.5 * (log_w - M))[:, None] * v)
    return 0.5 * x.shape[0] * M + jnp.sum(log_r), jnp.exp(log_r[-1] - log_r[0])


def _log_gamma_cauchy_binet_2d(x, Z, Ls):
    """Exact D = 2 log-volume: det G = sum_{l<l'} w_l w_l' (v_l x v_l')^2 with logsumexp, O(m^2)."""
    log_w, v = _se_weights(x, Z, Ls)
    c2 = (v[:, None, 0] * v[None, :, 1] - v[:, None, 1] * v[None, :, 0]) ** 2
    pair = jnp.triu(jnp.ones_like(c2, dtype=bool), k=1) & (c2 > 0)
    terms = jnp.where(pair, log_w[:, None] + log_w[None, :] + jnp.log(jnp.where(pair, c2, 1.0)), -jnp.inf)
    return 0.5 * logsumexp(terms)


_QR_RATIO_MIN = 1e-6  # below this |R_22| / |R_11| the D = 2 QR loses accuracy: use Cauchy-Binet


def _log_volume_se(X, Z, Ls):
    out, ratio = jax.vmap(lambda x: _log_gamma_se(x, Z, Ls))(X)
    if X.shape[1] != 2:
        return out
    bad = ratio < _QR_RATIO_MIN

    # Evaluated only for the points that need it (a sequential map with a per-point cond: O(m^2) work and
    # memory per flagged point); checkpointed so reverse mode stores no residuals for branches not taken.
    @jax.checkpoint
    def fallback(out):
        def point(args):
            x, o, b = args
            return jax.lax.cond(b, lambda: _log_gamma_cauchy_binet_2d(x, Z, Ls), lambda: o)

        return jax.lax.map(point, (X, out, bad))

    return jax.lax.cond(jnp.any(bad), fallback, lambda o: o, out)


def _log_gamma_autodiff(x, Z, kernel):
    """log sqrt(det J^T J) with J = d phi_z / dx by forward-mode autodiff and a globally scaled thin QR."""
    J = jax.jacfwd(lambda p: kernel._cross(p[None, :], Z)[0])(x)  # (m, D)
    scale = jnp.max(jnp.linalg.norm(J, axis=1))
    return jnp.sum(_log_abs_diag_r(J / scale)) + J.shape[1] * jnp.log(scale)


def log_volume(X, Z, kernel: Kernel, *, method: str = "closed", convention: str = "exact"):
    """Per-point log-volume term log gamma(x_i) = 0.5 log det(J^T J), J = d phi_z(x_i) / dx: (n,).

    ``method="closed"``: log-space closed form for SE kernels (RBF, ARD, RBFFull);
    ``"autodiff"``: forward-mode Jacobian for any differentiable kernel.
    ``convention="stan"``: 2 log gamma + log(1/2) per point (the seed's Stan program).
    """
    X, Z = as_points(X, "X"), as_points(Z, "Z")
    if method == "closed":
        out = _log_volume_se(X, Z, se_scale_tril(kernel, X.shape[1]))
    elif method == "autodiff":
        out = jax.vmap(lambda x: _log_gamma_autodiff(x, Z, kernel))(X)
    else:
        raise ValueError(f"method must be 'closed' or 'autodiff', got {method!r}")
    if convention == "stan":
        return 2.0 * out + jnp.log(0.5)
    if convention != "exact":
        raise ValueError(f"convention must be 'exact' or 'stan', got {convention!r}")
    return out


def _row_keys(A):
    """One hashable key per row (exact float equality), so membership tests cost O(n log n), not O(nm)."""
    A = np.ascontiguousarray(np.asarray(A, dtype=np.float64) + 0.0)  # + 0.0 maps -0.0 to 0.0
    return A.view(np.dtype((np.void, A.dtype.itemsize * A.shape[1]))).ravel()


def check_inducing_points(X, Z):
    """Validate inducing points Z (m, D) against the likelihood points X (n, D): m >= D, distinct, not in X."""
    X, Z = as_points(X, "X"), as_points(Z, "Z")
    if Z.shape[1] != X.shape[1]:
        raise ValueError(f"Z has dimension {Z.shape[1]} but X has dimension {X.shape[1]}")
    if Z.shape[0] < Z.shape[1]:
        raise ValueError(f"need m >= D inducing points for the log-volume term, got m = {Z.shape[0]} < D = {Z.shape[1]}")
    if is_concrete((X, Z)):
        Zn, Xn = _row_keys(Z), _row_keys(X)
        if len(np.unique(Zn)) < len(Zn):
            raise ValueError("Z contains duplicated inducing points; they must be distinct (general position)")
        if np.isin(Xn, Zn).any():
            raise ValueError("some inducing points Z are also points of X: hold them out of the likelihood (spec §12)")
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
    """Marginal pseudolikelihood (15): Kronecker Gaussian term + sum_i log gamma(x_i).

    X: (n, D) points entering the likelihood; Z: (m, D) inducing points (held out of X);
    kernel: k_theta; tau2 > 0: noise variance. ``prior_cov`` is r_theta, default
    ``ConvolvedSE(kernel)`` (Lebesgue nu; use ``ConvolvedSE(kernel, nu="gaussian", ...)``
    for other measures, or any kernel for non-SE k). ``convention="stan_conventions"``
    uses r_scale="unit" and the Stan log-volume (spec §10.3); ``"stan_as_printed"`` also
    replaces the Gaussian term by :func:`kron_loglik_as_printed` (the literal Appendix B
    program, without the 2 pi constant; reproduction only). Traceable in (kernel, tau2).
    """
    if convention not in _CONVENTIONS:
        raise ValueError(f"convention must be one of {_CONVENTIONS}, got {convention!r}")
    X, Z = check_inducing_points(X, Z)
    check_positive(tau2, "tau2")
    if prior_cov is None:
        if not isinstance(kernel, (RBF, RBFFull)):
            raise ValueError(f"prior_cov (r_theta) is required for a non-SE kernel {type(kernel).__name__}")
        prior_cov = ConvolvedSE(kernel, r_scale="exact" if convention == "exact" else "unit")
    value = _log_pseudolikelihood(kernel, prior_cov, X, Z, tau2, volume, convention, True)
    if is_concrete(value) and not np.isfinite(float(value)):
        raise CholeskyError("R_zz + tau2/n I is not positive definite even with jitter (check Z and the lengthscale)")
    return value


@partial(jax.jit, static_argnames=("volume", "convention", "with_volume"))
def _log_pseudolikelihood(kernel, prior_cov, X, Z, tau2, volume, convention, with_volume):
    Kzx, Rzz = kernel._cross(Z, X), prior_cov._cross(Z, Z)
    gaussian = kron_loglik_as_printed(Kzx, Rzz, tau2) if convention == "stan_as_printed" else kron_loglik(Kzx, Rzz, tau2)
    if not with_volume:
        return gaussian
    lv = log_volume(X, Z, kernel, method=volume, convention="exact" if convention == "exact" else "stan")
    return gaussian + jnp.sum(lv)
