"""Model-based baselines for the kernel Bayes filter: EKF and Kalman filter (spec kbr.md §8.2, §10.13)."""

import jax
import jax.numpy as jnp

__all__ = ["ekf_filter", "kalman_filter"]


def ekf_filter(X, f, jacobian, Q, R, m0, P0):
    """Extended Kalman filter for z_{t+1} = f(z_t) + N(0, Q), x_t = z_t + N(0, R): filtered means (T, d).

    Update then predict (spec §8.2): K = P (P + R)^{-1}, m <- m + K (x - m), P <- (I - K) P (symmetrised);
    then m <- f(m), P <- J P J^T + Q with J the Jacobian of f at the filtered mean.
    """
    eye = jnp.eye(Q.shape[0], dtype=Q.dtype)

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
    """Kalman filter for z_{t+1} = A z_t + N(0, Q), x_t = z_t + N(0, R): filtered means (T, d)."""
    return ekf_filter(X, lambda z: A @ z, lambda z: A, Q, R, m0, P0)
