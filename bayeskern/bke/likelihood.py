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

__all__ = ["kron_loglik", "log_volume", "log_pseudolikelihood", "check_inducing_points"]

_CONVENTIONS = ("exact", "stan_conventions")


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


def _log_gamma_se(x, Z, Ls):
    """log sqrt(det J^T J) at one point x for k = exp(-d^T Sigma^{-1} d / 2), Sigma = Ls Ls^T, in log space."""
    D = x.shape[0]
    a = whiten(Ls, (x - Z).T)  # (D, m): Ls^{-1} (x - z_l)
    log_w = -jnp.sum(a**2, axis=0)  # log k(x, z_l)^2
    v = jax.scipy.linalg.solve_triangular(Ls.T, a, lower=False).T  # (m, D): Sigma^{-1} (x - z_l)
    if D == 1:
        v2 = v[:, 0] ** 2
        safe = jnp.where(v2 > 0, v2, 1.0)
        return 0.5 * logsumexp(jnp.where(v2 > 0, log_w + jnp.log(safe), -jnp.inf))
    M = jnp.max(log_w)
    Jt = jnp.exp(0.5 * (log_w - M))[:, None] * v
    R = jnp.linalg.qr(Jt, mode="r")
    r = jnp.abs(jnp.diag(R))
    log_qr = 0.5 * D * M + jnp.sum(jnp.log(r))
    if D != 2:
        return log_qr
    # Cauchy–Binet for D = 2 when QR loses accuracy: det G = sum_{l<l'} w_l w_l' (v_l x v_l')^2
    cross = v[:, None, 0] * v[None, :, 1] - v[:, None, 1] * v[None, :, 0]
    c2 = cross**2
    pair = jnp.triu(jnp.ones_like(c2, dtype=bool), k=1) & (c2 > 0)
    terms = jnp.where(pair, log_w[:, None] + log_w[None, :] + jnp.log(jnp.where(pair, c2, 1.0)), -jnp.inf)
    log_cb = 0.5 * logsumexp(terms)
    return jnp.where(r[1] < 1e-6 * r[0], log_cb, log_qr)


def _log_gamma_autodiff(x, Z, kernel):
    """log sqrt(det J^T J) with J = d phi_z / dx by forward-mode autodiff and a scaled thin QR."""
    J = jax.jacfwd(lambda p: kernel._cross(p[None, :], Z)[0])(x)  # (m, D)
    scale = jnp.max(jnp.linalg.norm(J, axis=1))
    R = jnp.linalg.qr(J / scale, mode="r")
    return jnp.sum(jnp.log(jnp.abs(jnp.diag(R)))) + J.shape[1] * jnp.log(scale)


def log_volume(X, Z, kernel: Kernel, *, method: str = "closed", convention: str = "exact"):
    """Per-point log-volume term log gamma(x_i) = 0.5 log det(J^T J), J = d phi_z(x_i) / dx: (n,).

    ``method="closed"``: log-space closed form for SE kernels (RBF, ARD, RBFFull);
    ``"autodiff"``: forward-mode Jacobian for any differentiable kernel.
    ``convention="stan"``: 2 log gamma + log(1/2) per point (the seed's Stan program).
    """
    X, Z = as_points(X, "X"), as_points(Z, "Z")
    if method == "closed":
        Ls = se_scale_tril(kernel, X.shape[1])
        out = jax.vmap(lambda x: _log_gamma_se(x, Z, Ls))(X)
    elif method == "autodiff":
        out = jax.vmap(lambda x: _log_gamma_autodiff(x, Z, kernel))(X)
    else:
        raise ValueError(f"method must be 'closed' or 'autodiff', got {method!r}")
    if convention == "stan":
        return 2.0 * out + jnp.log(0.5)
    if convention != "exact":
        raise ValueError(f"convention must be 'exact' or 'stan', got {convention!r}")
    return out


def check_inducing_points(X, Z):
    """Validate inducing points Z (m, D) against the likelihood points X (n, D): m >= D, distinct, not in X."""
    X, Z = as_points(X, "X"), as_points(Z, "Z")
    if Z.shape[1] != X.shape[1]:
        raise ValueError(f"Z has dimension {Z.shape[1]} but X has dimension {X.shape[1]}")
    if Z.shape[0] < Z.shape[1]:
        raise ValueError(f"need m >= D inducing points for the log-volume term, got m = {Z.shape[0]} < D = {Z.shape[1]}")
    if is_concrete((X, Z)):
        Zn, Xn = np.asarray(Z), np.asarray(X)
        if len(np.unique(Zn, axis=0)) < len(Zn):
            raise ValueError("Z contains duplicated inducing points; they must be distinct (general position)")
        shared = (Xn[:, None, :] == Zn[None, :, :]).all(-1).any()
        if shared:
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
    uses r_scale="unit" and the Stan log-volume (spec §10.3). Traceable in (kernel, tau2).
    """
    if convention not in _CONVENTIONS:
        raise ValueError(f"convention must be one of {_CONVENTIONS}, got {convention!r}")
    X, Z = check_inducing_points(X, Z)
    check_positive(tau2, "tau2")
    if prior_cov is None:
        if not isinstance(kernel, (RBF, RBFFull)):
            raise ValueError(f"prior_cov (r_theta) is required for a non-SE kernel {type(kernel).__name__}")
        prior_cov = ConvolvedSE(kernel, r_scale="unit" if convention == "stan_conventions" else "exact")
    value = _log_pseudolikelihood(kernel, prior_cov, X, Z, tau2, volume, convention)
    if is_concrete(value) and not np.isfinite(float(value)):
        raise CholeskyError("R_zz + tau2/n I is not positive definite even with jitter (check Z and the lengthscale)")
    return value


@partial(jax.jit, static_argnames=("volume", "convention"))
def _log_pseudolikelihood(kernel, prior_cov, X, Z, tau2, volume, convention):
    gaussian = kron_loglik(kernel._cross(Z, X), prior_cov._cross(Z, Z), tau2)
    lv = log_volume(X, Z, kernel, method=volume, convention="stan" if convention == "stan_conventions" else "exact")
    return gaussian + jnp.sum(lv)
