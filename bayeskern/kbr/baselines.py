"""Baselines for the kernel Bayes filter: EKF and Kalman filter, and the static
regression E[z | x] from a joint distribution (JDL) fit, a filter that ignores the dynamics."""

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_matrix, as_points, check_count, check_covariance, check_same_length
from ..jdl import fit_jdl, select_hyperparameters
from ..kernels.heuristics import median_heuristic
from ..kernels.stationary import RBF

__all__ = ["ekf_filter", "kalman_filter", "jdl_regression"]


def ekf_filter(X, f, jacobian, Q, R, m0, P0):
    """Extended Kalman filter for z_{t+1} = f(z_t) + N(0, Q), x_t = z_t + N(0, R).

    Update then predict: K = P (P + R)^{-1}, m <- m + K (x - m), P <- (I - K) P (symmetrised);
    then m <- f(m), P <- J P J^T + Q with J the Jacobian of f at the filtered mean.

    Args:
        X: (T, d) observations.
        f: the transition, (d,) -> (d,) (traceable).
        jacobian: its Jacobian, (d,) -> (d, d).
        Q: (d, d) transition noise covariance (PSD).
        R: (d, d) observation noise covariance (PSD; P0 + R positive definite).
        m0: (d,) initial mean.
        P0: (d, d) initial covariance (PSD).

    Returns:
        (T, d) filtered means.

    Raises:
        TypeError: for f or jacobian that is not callable, or data that are not real numbers.
        ValueError: for non-finite data, covariances that are not symmetric PSD or of the wrong shape, or m0 of
            the wrong shape.
    """
    X = as_points(X, "X")
    d = X.shape[1]
    Q, R, P0 = (check_covariance(C, name, d) for C, name in ((Q, "Q"), (R, "R"), (P0, "P0")))
    m0 = as_matrix(m0, "m0", (d,))
    if not (callable(f) and callable(jacobian)):
        raise TypeError("f and jacobian must be functions of the state (d,)")
    eye = jnp.eye(d, dtype=Q.dtype)

    def step(state, x):
        m, P = state
        K = jnp.linalg.solve(P + R, P).T  # P (P + R)^{-1}, both symmetric
        m = m + K @ (x - m)
        P = (eye - K) @ P
        P = 0.5 * (P + P.T)
        J = jacobian(m)
        return (f(m), J @ P @ J.T + Q), m

    _, means = jax.lax.scan(step, (m0, P0), X)
    return means


def kalman_filter(X, A, Q, R, m0, P0):
    """Kalman filter for z_{t+1} = A z_t + N(0, Q), x_t = z_t + N(0, R): the exact filter of a linear-Gaussian model.

    Args:
        X: (T, d) observations.
        A: (d, d) transition matrix.
        Q: (d, d) transition noise covariance.
        R: (d, d) observation noise covariance.
        m0: (d,) prior mean of z_1.
        P0: (d, d) prior covariance of z_1.

    Returns:
        (T, d) filtered means.

    Raises:
        ValueError: for a non-finite or misshapen argument, or Q, R, P0 that are not symmetric positive
            semidefinite covariances.
    """
    A = as_matrix(A, "A", (as_points(X, "X").shape[1],) * 2)
    return ekf_filter(X, lambda z: A @ z, lambda z: A, Q, R, m0, P0)


def jdl_regression(X, Z, *, n_val: int = 200, scales=(0.5, 1.0, 2.0), lams=(1e-6, 1e-4, 1e-2), tol: float = 1e-3):
    """A normalised JDL model of the pairs (x_t, z_t), X (T, d_x), Z (T, d_z): the static reference
    E[z_t | x_t] (``model.conditional_expectation(X_test).mean``) that a filter using the dynamics should beat.

    Bandwidths (``scales`` x median, both sides) and lam minimise the validation MSE of E[z | x] on the last
    V = min(n_val, T // 2) pairs; the model is refitted on all T pairs. Cost O(T m) per fit (low-rank bases).

    Args:
        X: (T, d_x) observations.
        Z: (T, d_z) latents, paired with X.
        n_val: the most validation pairs.
        scales: bandwidth multipliers of the median distance, tried on both sides.
        lams: ridges tried.
        tol: relative trace tolerance of the low-rank bases.

    Returns:
        JointDistributionModel: the normalised model refitted on all pairs.

    Raises:
        TypeError: for data that are not real numbers or n_val not an integer.
        ValueError: for non-finite or unpaired data, fewer than 4 pairs, or invalid scales or ridges.
        RuntimeError: when float64 is off.
    """
    X, Z = as_points(X, "X"), as_points(Z, "Z")
    check_same_length(X, Z, "X and Z")
    T = X.shape[0]
    V = min(check_count(n_val, "n_val"), T // 2)
    if T - V < 2 or V < 1:
        raise ValueError(f"jdl_regression needs at least 4 pairs for a validation split, got {T}")
    fit_x, fit_z, val_x, val_z = X[: T - V], Z[: T - V], X[T - V:], Z[T - V:]

    def validation_mse(model):
        mean = np.asarray(model.conditional_expectation(val_x).mean)
        return np.mean(np.sum((mean - np.asarray(val_z)) ** 2, axis=1))

    (sx, sz, lam), _ = select_hyperparameters(fit_x, fit_z, validation_mse, scales=scales, lams=lams, tol=tol)
    return fit_jdl(X, Z, RBF(sx * median_heuristic(X)), RBF(sz * median_heuristic(Z)), lam, constraint="normalised",
                   tol=tol)
