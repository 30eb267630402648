"""Built-in synthetic data (generated, never downloaded), seeded with NumPy's default_rng."""

import numpy as np

from ._validation import check_count

__all__ = ["blobs", "normal_vs_laplace", "perturbed_uniform", "rotation"]


def rotation(angle: float) -> np.ndarray:
    """2-D rotation matrix R(angle).

    Args:
        angle: the angle in radians.

    Returns:
        (2, 2) array.

    Raises:
        ValueError: for an angle that is not a finite number.
    """
    if not (isinstance(angle, (int, float, np.floating, np.integer)) and np.isfinite(angle)):
        raise ValueError(f"angle must be a finite number (radians), got {angle!r}")
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s], [s, c]])


def blobs(eps: float, *, spacing: float = 10 * np.sqrt(2), per: int = 100, angle: float = np.pi / 4, seed=0):
    """Grid-of-Gaussians two-sample problem (Gretton et al. 2012; the BKL experiment of Flaxman et al. 2016, Section 5.1).

    Nine centres on {-s, 0, s}^2. P: each centre plus N(0, I_2) noise; Q: each centre plus N(0, R diag(eps, 1) R^T)
    noise with R = R(angle). eps = 1 gives P = Q. Each centre gets ``per`` points of each sample, and each sample
    comes in its own random order, so row i of P and row i of Q share a centre only by chance (aligned rows would
    hand a test that pairs x_i with y_i, such as a wild bootstrap, a stratification no real two-sample problem has).

    Args:
        eps: the variance ratio of Q's noise along the rotated axis, > 0.
        spacing: the distance s between neighbouring centres.
        per: points per centre in each sample.
        angle: the rotation of Q's noise, in radians.
        seed: an integer seed or a ``numpy.random.Generator``.

    Returns:
        (P, Q), each (9 * per, 2).

    Raises:
        TypeError: for per not an integer.
        ValueError: for eps not positive, per below 1 or an angle that is not finite.
    """
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps}")
    per = check_count(per, "per")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    grid = (np.arange(3) - 1) * spacing
    centres = np.repeat(np.array([(a, b) for a in grid for b in grid]), per, axis=0)
    P = centres + rng.standard_normal(centres.shape)
    Q = centres + rng.standard_normal(centres.shape) @ (rotation(angle) @ np.diag([np.sqrt(eps), 1.0])).T
    return P[rng.permutation(len(P))], Q[rng.permutation(len(Q))]


def normal_vs_laplace(n: int, seed=0):
    """P = N(0, 1) and Q = Laplace(0, sqrt(1/2)): equal mean and variance, different shape.

    Args:
        n: points per sample.
        seed: an integer seed or a ``numpy.random.Generator``.

    Returns:
        (XP, XQ), each (n, 1), drawn in that order.

    Raises:
        TypeError: for n not an integer.
        ValueError: for n below 1.
    """
    n = check_count(n, "n")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    xp = rng.standard_normal(n)
    xq = rng.laplace(0.0, np.sqrt(0.5), n)
    return xp[:, None], xq[:, None]


def _bump(t):
    """The perturbation profile: a smooth positive bump on (-1, -1/2) and a negative one on (-1/2, 0), zero elsewhere."""
    out = np.zeros_like(t)
    a, b = (t > -1) & (t < -0.5), (t > -0.5) & (t < 0)
    out[a] = np.exp(-1 / (1 - (4 * t[a] + 3) ** 2))
    out[b] = -np.exp(-1 / (1 - (4 * t[b] + 1) ** 2))
    return out


def _perturbed_density(x, theta, scale):
    """The density of :func:`perturbed_uniform` at points x.

    Args:
        x: (N, d) points.
        theta: (p,) * d array of signs, one per perturbation cell.
        scale: the height of the perturbations, in [0, 1].

    Returns:
        (N,) array: 1 + e^d scale sum_nu theta_nu prod_r G(p x_r - nu_r) on [0, 1]^d, 0 outside.
    """
    x = np.asarray(x, float)
    d, p = x.shape[1], theta.shape[0]
    g = [_bump(p * x[:, r][:, None] - np.arange(1, p + 1)[None, :]) for r in range(d)]   # d x (N, p)
    pert = g[0]
    for r in range(1, d):
        pert = (pert[:, :, None] * g[r][:, None, :]).reshape(len(x), -1)
    inside = np.all((x >= 0) & (x <= 1), axis=1)
    return np.where(inside, 1.0 + np.exp(d) * scale * (pert @ theta.ravel()), 0.0)


def perturbed_uniform(n: int, d: int = 1, perturbations: int = 2, scale: float = 0.5, seed=0):
    """Uniform on [0, 1]^d against a perturbed uniform density (the two-sample problem of Schrab et al. 2023).

    The perturbed density adds p^d smooth bumps of random sign (one per cell of a p x ... x p grid), each a positive
    and a negative lobe, of height ``scale``: 1 + e^d scale sum_nu theta_nu prod_r G(p x_r - nu_r). The signs theta
    are drawn afresh with each seed. More perturbations or a smaller scale make the problem harder.

    Args:
        n: points per sample.
        d: the dimension.
        perturbations: p, the number of perturbations per dimension.
        scale: their height, in [0, 1] (0 gives two uniform samples: a null).
        seed: an integer seed or a ``numpy.random.Generator``.

    Returns:
        (XP, XQ), each (n, d): XP from the perturbed density (by rejection), XQ uniform.

    Raises:
        TypeError: for n, d or perturbations not an integer.
        ValueError: for n, d or perturbations below 1, or a scale outside [0, 1].
    """
    n, d, p = check_count(n, "n"), check_count(d, "d"), check_count(perturbations, "perturbations")
    if not 0.0 <= scale <= 1.0:
        raise ValueError(f"scale must lie in [0, 1], got {scale}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    theta = rng.choice([-1.0, 1.0], size=(p,) * d)
    kept, total = [], 0
    while total < n:
        x = rng.uniform(0, 1, (4 * n, d))
        keep = rng.uniform(0, 1 + scale, len(x)) <= _perturbed_density(x, theta, scale)
        kept.append(x[keep])
        total += int(keep.sum())
    return np.concatenate(kept)[:n], rng.uniform(0, 1, (n, d))
