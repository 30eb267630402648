"""The Kronecker-structured Gaussian term of the BKE pseudolikelihood: vec K_zx ~ N(0, 11^T (x) R_zz + tau2 I)."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._config import require_x64
from .._validation import as_matrix, check_positive
from ..linalg import jittered_cholesky
from ..linalg.dense import logdet_unchecked, whiten_unchecked

__all__ = ["kron_loglik", "kron_loglik_as_printed"]


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
    return _compiled_kron_loglik(Kzx, Rzz, tau2, method)


@partial(jax.jit, static_argnames="method")
def _compiled_kron_loglik(Kzx, Rzz, tau2, method):
    """One program per shape and method (called eagerly, the Gaussian term compiled ~30 operations one by one)."""
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
