"""Data generators for the experiments of Filipović et al. (2021), with their exact conditional moments."""

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import check_count, check_key

__all__ = [
    "archakov_hansen_correlation",
    "random_correlation",
    "gaussian_pairs",
    "gaussian_second_moment",
    "uniform_cumulative",
    "uniform_moments",
    "cauchy_cumulative",
    "ff_synthetic",
    "lagged_sum_task",
]


def archakov_hansen_correlation(gamma, p: int, *, max_iter: int = 10_000) -> np.ndarray:
    """The unique correlation matrix C (p, p) whose matrix logarithm has strictly lower triangle gamma
    (length p (p - 1) / 2, row-major ``tril_indices(p, -1)``), by the diagonal fixed point of Archakov & Hansen."""
    gamma = np.asarray(gamma, np.float64)
    if gamma.shape != (p * (p - 1) // 2,):
        raise ValueError(f"gamma must have length p (p - 1) / 2 = {p * (p - 1) // 2}, got shape {gamma.shape}")
    A = np.zeros((p, p))
    A[np.tril_indices(p, -1)] = gamma
    A = A + A.T
    x = np.zeros(p)
    for _ in range(max_iter):
        A[np.diag_indices(p)] = x
        w, U = np.linalg.eigh(A)
        step = np.log((U * U) @ np.exp(w))
        x = x - step
        if np.linalg.norm(step) <= np.sqrt(p) * 1e-13:
            break
    else:
        raise RuntimeError("archakov_hansen_correlation: the fixed point did not converge")
    A[np.diag_indices(p)] = x
    w, U = np.linalg.eigh(A)
    C = (U * np.exp(w)) @ U.T
    C = 0.5 * (C + C.T)
    C[np.diag_indices(p)] = 1.0
    return C


def random_correlation(key, p: int) -> np.ndarray:
    """Archakov-Hansen correlation matrix with gamma_k ~ U(-1, 1) iid."""
    check_key(key)
    p = check_count(p, "p")
    gamma = jax.random.uniform(key, (p * (p - 1) // 2,), minval=-1.0, maxval=1.0, dtype=jnp.float64)
    return archakov_hansen_correlation(np.asarray(gamma), p)


def gaussian_pairs(key, C, n: int):
    """z ~ N(0, C) in R^{2d}: X = z[:, :d], Y = z[:, d:] (each (n, d))."""
    check_key(key)
    n = check_count(n, "n")
    C = np.asarray(C)
    d = C.shape[0] // 2
    z = jax.random.multivariate_normal(key, jnp.zeros(2 * d), jnp.asarray(C), (n,), method="eigh")
    return z[:, :d], z[:, d:]


def gaussian_second_moment(C, X):
    """E[Y Y^T | X = x] = Sigma_{Y|X} + B x x^T B^T with B = C_YX C_XX^{-1}: (q, d, d) for X (q, d)."""
    C = np.asarray(C)
    d = C.shape[0] // 2
    B = np.linalg.solve(C[:d, :d], C[:d, d:]).T
    cov = C[d:, d:] - B @ C[:d, d:]
    mean = np.asarray(X) @ B.T
    return cov[None] + mean[:, :, None] * mean[:, None, :]


def _cumulative_averages(u, d):
    z = jnp.cumsum(u, axis=1) / jnp.arange(1, 2 * d + 1)
    return z[:, :d], z[:, d:]


def uniform_cumulative(key, n: int, d: int):
    """Cumulative averages z_k = (u_1 + ... + u_k) / k of u ~ U(0, 1)^{2d}: X = z_{1..d}, Y = z_{d+1..2d}."""
    check_key(key)
    n = check_count(n, "n")
    d = check_count(d, "d")
    return _cumulative_averages(jax.random.uniform(key, (n, 2 * d), dtype=jnp.float64), d)


def uniform_moments(X):
    """Exact E[Y | X] (q, d) and E[Y Y^T | X] (q, d, d) for :func:`uniform_cumulative`."""
    X = np.asarray(X)
    d = X.shape[1]
    k = np.arange(1, d + 1)
    s = d * X[:, -1:]
    centre = s + k / 2
    mean = centre / (d + k)
    second = (centre[:, :, None] * centre[:, None, :] + np.minimum.outer(k, k) / 12) / np.outer(d + k, d + k)
    return mean, second


def cauchy_cumulative(key, n: int, d: int, scale: float = 0.1):
    """As :func:`uniform_cumulative` with u_k iid Cauchy(0, scale): no conditional moments exist."""
    check_key(key)
    n = check_count(n, "n")
    d = check_count(d, "d")
    return _cumulative_averages(scale * jax.random.cauchy(key, (n, 2 * d), dtype=jnp.float64), d)


def ff_synthetic(key, T: int = 26_000, series: int = 25, burn_in: int = 1000):
    """Fama-French stand-in: z (T, series) = beta_i f_t + e_ti with an AR(1)-GARCH(1,1) factor and
    GARCH(1,1) idiosyncratic terms, Student-t innovations (df 4 and 5, unit variance)."""
    check_key(key)
    T = check_count(T, "T")
    phi, alpha, beta, s_f, s_e = 0.05, 0.08, 0.90, 0.01, 0.006
    omega_f, omega_e = (1 - alpha - beta) * s_f**2, (1 - alpha - beta) * s_e**2
    loadings = 0.7 + 0.6 * jnp.arange(series) / (series - 1)
    k_f, k_e = jax.random.split(key)
    eps = jax.random.t(k_f, 4.0, (T + burn_in,), dtype=jnp.float64) / jnp.sqrt(2.0)
    eta = jax.random.t(k_e, 5.0, (T + burn_in, series), dtype=jnp.float64) / jnp.sqrt(5.0 / 3.0)

    def step(carry, shocks):
        f, u, h, e, g = carry
        h = omega_f + alpha * u**2 + beta * h
        u = jnp.sqrt(h) * shocks[0]
        f = phi * f + u
        g = omega_e + alpha * e**2 + beta * g
        e = jnp.sqrt(g) * shocks[1]
        return (f, u, h, e, g), loadings * f + e

    zeros = jnp.zeros(series)
    init = (0.0, 0.0, s_f**2, zeros, jnp.full(series, s_e**2))
    _, z = jax.lax.scan(step, init, (eps, eta))
    return z[burn_in:]


def lagged_sum_task(z, d: int):
    """Classification inputs (Filipović et al. 2021, Section 5.2): x_t = (z_{t-1,1..d}) (T-1, d) and y_t = sum_{i<=d} z_{t,i} (T-1,)."""
    z = jnp.asarray(z)
    if not 1 <= d <= z.shape[1]:
        raise ValueError(f"d must lie in [1, {z.shape[1]}], got {d}")
    return z[:-1, :d], z[1:, :d].sum(axis=1)
