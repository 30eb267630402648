"""Generated data for the KBR/KBF experiments (spec kbr.md §8): never downloaded."""

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["PosteriorTask", "gaussian_posterior_task", "Sequence", "circle_transition", "circle_dynamics",
           "linear_gaussian_sequence", "CIRCLE_SETTINGS"]


class PosteriorTask(NamedTuple):
    """Spec §8.1: training pairs X, Z (n, d), prior samples U (m, d), conditioning points X_cond (q, d),
    the exact posterior means E_Q[Z | X_cond] (q, d), and the joint covariance V (2d, 2d) of (X, Z)."""

    X: jax.Array
    Z: jax.Array
    U: jax.Array
    X_cond: jax.Array
    truth: jax.Array
    V: jax.Array


def gaussian_posterior_task(d: int, key, *, n: int = 200, m: int = 200, n_cond: int = 200) -> PosteriorTask:
    """P(X, Z) = N((1, 0), V), V = A^T A / (2d) + 2 I; prior N(0, V_ZZ / 2); X_cond ~ N(0, V_XX).

    Ground truth E_Q[Z | x] = V_ZX / 2 (V_XX - V_XZ V_ZZ^{-1} V_ZX / 2)^{-1} (x - 1), by Gaussian conditioning.
    """
    if d < 1:
        raise ValueError(f"d must be at least 1, got {d}")
    kA, kP, kU, kC = jax.random.split(key, 4)
    A = jax.random.normal(kA, (2 * d, 2 * d))
    V = A.T @ A / (2 * d) + 2.0 * jnp.eye(2 * d)
    Vxx, Vxz, Vzz = V[:d, :d], V[:d, d:], V[d:, d:]
    mean = jnp.concatenate([jnp.ones(d), jnp.zeros(d)])
    XZ = jax.random.multivariate_normal(kP, mean, V, (n,))
    U = jax.random.multivariate_normal(kU, jnp.zeros(d), Vzz / 2, (m,))
    X_cond = jax.random.multivariate_normal(kC, jnp.zeros(d), Vxx, (n_cond,))
    cov_x = Vxx - 0.5 * Vxz @ jnp.linalg.solve(Vzz, Vxz.T)
    truth = 0.5 * (Vxz.T @ jnp.linalg.solve(cov_x, (X_cond - 1.0).T)).T
    return PosteriorTask(XZ[:, :d], XZ[:, d:], U, X_cond, truth, V)


class Sequence(NamedTuple):
    """A training trajectory (X, Z) (T, .) and its continuation (X_test, Z_test) (T~, .)."""

    X: jax.Array
    Z: jax.Array
    X_test: jax.Array
    Z_test: jax.Array


CIRCLE_SETTINGS = {"rotation": dict(omega=0.3, beta=0.0, M=8), "oscillatory": dict(omega=0.4, beta=0.4, M=8)}


def circle_transition(setting: str = "rotation", amp_phase: str = "current"):
    """(f, jacobian) of z -> (1 + beta sin(M phi)) (cos(theta + omega), sin(theta + omega)) (spec §8.2).

    phi = theta (``amp_phase="current"``, eq. (5) as printed) or theta + omega (``"next"``).
    """
    if setting not in CIRCLE_SETTINGS:
        raise ValueError(f"setting must be one of {sorted(CIRCLE_SETTINGS)}, got {setting!r}")
    if amp_phase not in ("current", "next"):
        raise ValueError(f"amp_phase must be 'current' or 'next', got {amp_phase!r}")
    omega, beta, M = (CIRCLE_SETTINGS[setting][k] for k in ("omega", "beta", "M"))
    shift = omega if amp_phase == "next" else 0.0

    def f(z):
        theta = jnp.arctan2(z[1], z[0])
        a = 1.0 + beta * jnp.sin(M * (theta + shift))
        return a * jnp.stack([jnp.cos(theta + omega), jnp.sin(theta + omega)])

    def jacobian(z):
        u, v = z[0], z[1]
        theta = jnp.arctan2(v, u)
        r2 = jnp.maximum(u**2 + v**2, 1e-12)
        a = 1.0 + beta * jnp.sin(M * (theta + shift))
        da = beta * M * jnp.cos(M * (theta + shift))
        df = da * jnp.stack([jnp.cos(theta + omega), jnp.sin(theta + omega)]) + \
            a * jnp.stack([-jnp.sin(theta + omega), jnp.cos(theta + omega)])
        return jnp.outer(df, jnp.stack([-v / r2, u / r2]))

    return f, jacobian


def circle_dynamics(T: int, key, *, T_test: int = 200, setting: str = "rotation", amp_phase: str = "current",
                    sigma_x: float = 0.2, sigma_z: float = 0.2) -> Sequence:
    """z_{t+1} = f(z_t) + N(0, sigma_z^2 I), x_t = z_t + N(0, sigma_x^2 I), z_0 = (1, 0) (spec §8.2).

    Steps 1..T are the training trajectory, T+1..T+T_test its continuation (the test sequence).
    """
    f, _ = circle_transition(setting, amp_phase)
    kz, kx = jax.random.split(key)
    noise_z = sigma_z * jax.random.normal(kz, (T + T_test, 2))

    def step(z, e):
        z = f(z) + e
        return z, z

    _, Z = jax.lax.scan(step, jnp.array([1.0, 0.0]), noise_z)
    X = Z + sigma_x * jax.random.normal(kx, Z.shape)
    return Sequence(X[:T], Z[:T], X[T:], Z[T:])


def linear_gaussian_sequence(T: int, key, *, T_test: int = 200, a: float = 0.9, q: float = 0.3,
                             r: float = 0.5) -> Sequence:
    """z_{t+1} = a z_t + N(0, q^2), x_t = z_t + N(0, r^2), z_1 from the stationary N(0, q^2 / (1 - a^2)) (§10.13)."""
    k1, kz, kx = jax.random.split(key, 3)
    z1 = jax.random.normal(k1, (1,)) * q / jnp.sqrt(1 - a**2)

    def step(z, e):
        return a * z + e, z

    _, Z = jax.lax.scan(step, z1, q * jax.random.normal(kz, (T + T_test, 1)))
    X = Z + r * jax.random.normal(kx, Z.shape)
    return Sequence(X[:T], Z[:T], X[T:], Z[T:])
