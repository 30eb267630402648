"""Generated data for the KBR/KBF experiments: never downloaded."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_finite_array, check_count, check_key, check_positive

__all__ = ["PosteriorTask", "gaussian_posterior_task", "Sequence", "circle_transition", "circle_dynamics",
           "linear_gaussian_sequence", "CIRCLE_SETTINGS", "sprite_sequence", "panorama_scene", "panorama_sequence"]


class PosteriorTask(NamedTuple):
    """The posterior-mean experiment of Xu et al. (2022, Section 5.1).

    Attributes:
        X: (n, d) training observations.
        Z: (n, d) training latents, paired with X.
        U: (m, d) samples of the new prior.
        X_cond: (q, d) conditioning observations.
        truth: (q, d) the exact posterior means E_Q[Z | X_cond].
        V: (2d, 2d) the joint covariance of (X, Z).
    """

    X: jax.Array
    Z: jax.Array
    U: jax.Array
    X_cond: jax.Array
    truth: jax.Array
    V: jax.Array


def gaussian_posterior_task(d: int, key, *, n: int = 200, m: int = 200, n_cond: int = 200) -> PosteriorTask:
    """P(X, Z) = N((1, 0), V), V = A^T A / (2d) + 2 I; prior N(0, V_ZZ / 2); X_cond ~ N(0, V_XX).

    Ground truth E_Q[Z | x] = V_ZX / 2 (V_XX - V_XZ V_ZZ^{-1} V_ZX / 2)^{-1} (x - 1), by Gaussian conditioning.

    Args:
        d: the dimension of X and of Z.
        key: PRNG key.
        n: training pairs.
        m: prior samples.
        n_cond: conditioning points.

    Returns:
        PosteriorTask: the data and the exact posterior means.

    Raises:
        TypeError: for a key that is not a PRNG key or counts that are not integers.
        ValueError: for counts below 1 or scales that are not positive.
    """
    check_key(key)
    d = check_count(d, "d")
    n = check_count(n, "n")
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
    """A training trajectory and its continuation.

    Attributes:
        X: (T, ...) training observations.
        Z: (T, d_z) training latents.
        X_test: (T~, ...) observations of the continuation.
        Z_test: (T~, d_z) its latents.
    """

    X: jax.Array
    Z: jax.Array
    X_test: jax.Array
    Z_test: jax.Array


CIRCLE_SETTINGS = {"rotation": dict(omega=0.3, beta=0.0, M=8), "oscillatory": dict(omega=0.4, beta=0.4, M=8)}
"""Parameters of the circular dynamics: rotation by omega per step, radius 1 + beta sin(M phi)."""


def circle_transition(setting: str = "rotation", amp_phase: str = "current"):
    """The circular dynamics z -> (1 + beta sin(M phi)) (cos(theta + omega), sin(theta + omega)), theta = arg z.

    Args:
        setting: a key of ``CIRCLE_SETTINGS`` (``"rotation"`` or ``"oscillatory"``).
        amp_phase: phi = theta (``"current"``, Xu et al. 2022, eq. 5 as printed) or theta + omega (``"next"``).

    Returns:
        (f, jacobian): functions of one latent (2,), returning (2,) and (2, 2).

    Raises:
        ValueError: for an unknown setting or amp_phase.
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
    """z_{t+1} = f(z_t) + N(0, sigma_z^2 I), x_t = z_t + N(0, sigma_x^2 I), z_0 = (1, 0), f of
    :func:`circle_transition`.

    Args:
        T: training steps.
        key: PRNG key.
        T_test: steps of the continuation (the test sequence).
        setting: ``"rotation"`` or ``"oscillatory"``.
        amp_phase: ``"current"`` or ``"next"`` (see :func:`circle_transition`).
        sigma_x: observation noise sd.
        sigma_z: transition noise sd.

    Returns:
        Sequence: X, Z (T, 2) and X_test, Z_test (T_test, 2).

    Raises:
        TypeError: for a key that is not a PRNG key or counts that are not integers.
        ValueError: for counts below 1 or scales that are not positive.
    """
    check_key(key)
    T = check_count(T, "T")
    T_test = check_count(T_test, "T_test")
    check_positive(sigma_x, "sigma_x"), check_positive(sigma_z, "sigma_z")
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
    """z_{t+1} = a z_t + N(0, q^2), x_t = z_t + N(0, r^2), z_1 from the stationary N(0, q^2 / (1 - a^2)).

    Args:
        T: training steps.
        key: PRNG key.
        T_test: steps of the continuation.
        a: the autoregression coefficient, |a| < 1.
        q: transition noise sd.
        r: observation noise sd.

    Returns:
        Sequence: X, Z (T, 1) and X_test, Z_test (T_test, 1).

    Raises:
        TypeError: for a key that is not a PRNG key or counts that are not integers.
        ValueError: for counts below 1 or scales that are not positive.
    """
    check_key(key)
    T = check_count(T, "T")
    T_test = check_count(T_test, "T_test")
    check_positive(q, "q"), check_positive(r, "r")
    as_finite_array(a, "a")
    k1, kz, kx = jax.random.split(key, 3)
    z1 = jax.random.normal(k1, (1,)) * q / jnp.sqrt(1 - a**2)

    def step(z, e):
        return a * z + e, z

    _, Z = jax.lax.scan(step, z1, q * jax.random.normal(kz, (T + T_test, 1)))
    X = Z + r * jax.random.normal(kx, Z.shape)
    return Sequence(X[:T], Z[:T], X[T:], Z[T:])


_HEART_SUPERSAMPLE = 4


def _heart_image(position, size: int):
    """Render the filled heart (a^2 + b^2 - 1)^3 - a^2 b^3 <= 0 at a quantised position: (size, size)."""
    scale = size / 64
    levels = jnp.round(31 * (jnp.clip(position, -1.5, 1.5) + 1.5) / 3)
    centre = (10 + levels * 43 / 31) * scale  # pixel coordinates (column, height), spanning 10..53 at 64 px
    offsets = (jnp.arange(_HEART_SUPERSAMPLE) + 0.5) / _HEART_SUPERSAMPLE - 0.5
    grid = (jnp.arange(size)[:, None] + offsets[None, :]).reshape(-1)  # sub-sample coordinates
    a = (grid[None, :] - centre[0]) / (4 * scale)  # columns
    b = ((size - 1 - grid)[:, None] - centre[1]) / (4 * scale)  # rows: index grows downwards, height upwards
    inside = (a**2 + b**2 - 1) ** 3 - a**2 * b**3 <= 0
    return inside.reshape(size, _HEART_SUPERSAMPLE, size, _HEART_SUPERSAMPLE).mean(axis=(1, 3))


def sprite_sequence(T: int, key, *, T_test: int = 200, size: int = 64, pixel_noise: float = 0.1) -> Sequence:
    """The dSprite stand-in: oscillatory latent dynamics (sigma_z = 0.2), a heart drawn at the latent plus
    N(0, 0.05^2) noise, quantised to 32 positions per axis, plus pixel noise.

    Args:
        T: training steps.
        key: PRNG key.
        T_test: steps of the continuation.
        size: image side, 64 or 32.
        pixel_noise: sd of the pixel noise.

    Returns:
        Sequence: X (T, size^2) flattened grayscale images, Z (T, 2) latents, and the continuation.

    Raises:
        TypeError: for a key that is not a PRNG key or counts that are not integers.
        ValueError: for counts below 1 or scales that are not positive.
    """
    check_key(key)
    T = check_count(T, "T")
    T_test = check_count(T_test, "T_test")
    check_positive(pixel_noise, "pixel_noise")
    if size not in (32, 64):
        raise ValueError(f"size must be 64 or 32, got {size}")
    k_seq, k_pos, k_pix = jax.random.split(key, 3)
    seq = circle_dynamics(T, k_seq, T_test=T_test, setting="oscillatory", sigma_x=0.05)
    Z = jnp.concatenate([seq.Z, seq.Z_test])
    positions = Z + 0.05 * jax.random.normal(k_pos, Z.shape)
    images = jax.lax.map(lambda p: _heart_image(p, size), positions).reshape(Z.shape[0], -1)
    X = images + pixel_noise * jax.random.normal(k_pix, images.shape)
    return Sequence(X[:T], Z[:T], X[T:], Z[T:])


_PALETTE = np.array([[0.85, 0.2, 0.15], [0.2, 0.55, 0.85], [0.95, 0.8, 0.2], [0.3, 0.7, 0.3]])


def panorama_scene(key, num_pillars: int = 12):
    """A fixed 360-degree scene of coloured pillars for :func:`panorama_sequence`.

    Args:
        key: PRNG key.
        num_pillars: number of pillars.

    Returns:
        dict of (num_pillars,) centre angles, angular half-widths and heights, and (num_pillars, 3) colours.

    Raises:
        TypeError: for a key that is not a PRNG key or num_pillars not an integer.
        ValueError: for num_pillars below 1.
    """
    check_key(key)
    num_pillars = check_count(num_pillars, "num_pillars")
    k1, k2, k3, k4 = jax.random.split(key, 4)
    return dict(centre=jax.random.uniform(k1, (num_pillars,), maxval=2 * jnp.pi),
                width=jax.random.uniform(k2, (num_pillars,), minval=0.05, maxval=0.3),
                height=jax.random.uniform(k3, (num_pillars,), minval=0.3, maxval=0.9),
                colour=jnp.asarray(_PALETTE)[jax.random.randint(k4, (num_pillars,), 0, 4)])


def _panorama_view(heading, scene, rows: int = 36, cols: int = 48):
    """A (rows, cols, 3) RGB crop of field of view pi/3 centred on ``heading``; values in [0, 1]."""
    angles = heading + jnp.pi / 3 * (jnp.arange(cols) / (cols - 1) - 0.5)
    height = 1.0 - (jnp.arange(rows) + 0.5) / rows  # 1 at the top row, 0 at the bottom
    sky = jnp.array([0.55, 0.75, 0.95]) + (1 - height[:, None]) * jnp.array([0.3, 0.2, 0.05])
    floor = jnp.array([0.25, 0.22, 0.2]) + height[:, None] * jnp.array([0.3, 0.3, 0.3])
    image = jnp.broadcast_to(jnp.where(height[:, None] > 0.5, sky, floor)[:, None, :], (rows, cols, 3))
    for p in range(scene["centre"].shape[0]):  # painter's order: later pillars in front
        delta = jnp.angle(jnp.exp(1j * (angles - scene["centre"][p])))  # wrapped angle difference
        alpha = jnp.exp(-(delta**2) / (2 * scene["width"][p] ** 2))[None, :] * (height[:, None] <= scene["height"][p])
        image = (1 - alpha[..., None]) * image + alpha[..., None] * scene["colour"][p]
    return jnp.clip(image, 0.0, 1.0)


def panorama_sequence(T: int, key, *, T_test: int = 200, omega: float = 0.4, sigma_theta: float = 0.2,
                      sigma_x: float = 0.2, pixel_noise: float = 0.1, scene_key=None) -> Sequence:
    """The DeepMind-Lab stand-in: heading theta_{t+1} = theta_t + omega + N(0, sigma_theta^2), latent
    z = (cos theta, sin theta), image = the view at theta + N(0, sigma_x^2) of a fixed scene plus pixel noise.

    Args:
        T: training steps.
        key: PRNG key.
        T_test: steps of the continuation.
        omega: mean turn per step (radians).
        sigma_theta: sd of the turn.
        sigma_x: sd of the viewing direction around the heading.
        pixel_noise: sd of the pixel noise.
        scene_key: PRNG key of the scene (default ``jax.random.key(0)``).

    Returns:
        Sequence: X (T, 5184) flattened 36 x 48 RGB views, Z (T, 2), and the continuation.

    Raises:
        TypeError: for a key that is not a PRNG key or counts that are not integers.
        ValueError: for counts below 1 or scales that are not positive.
    """
    check_key(key)
    T = check_count(T, "T")
    T_test = check_count(T_test, "T_test")
    for name, value in (("sigma_theta", sigma_theta), ("sigma_x", sigma_x), ("pixel_noise", pixel_noise)):
        check_positive(value, name)
    as_finite_array(omega, "omega")
    scene = panorama_scene(jax.random.key(0) if scene_key is None else scene_key)
    k_theta, k_view, k_pix = jax.random.split(key, 3)
    steps = omega + sigma_theta * jax.random.normal(k_theta, (T + T_test,))
    theta = jnp.mod(jnp.cumsum(steps), 2 * jnp.pi)
    Z = jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=1)
    views = theta + sigma_x * jax.random.normal(k_view, theta.shape)
    images = jax.lax.map(lambda h: _panorama_view(h, scene), views).reshape(theta.shape[0], -1)
    X = images + pixel_noise * jax.random.normal(k_pix, images.shape)
    return Sequence(X[:T], Z[:T], X[T:], Z[T:])
