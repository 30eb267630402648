"""Built-in synthetic data (generated, never downloaded), seeded with NumPy's default_rng."""

import numpy as np

from ._validation import check_count

__all__ = ["blobs", "normal_vs_laplace", "rotation"]


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
    noise with R = R(angle). eps = 1 gives P = Q.

    Args:
        eps: the variance ratio of Q's noise along the rotated axis, > 0.
        spacing: the distance s between neighbouring centres.
        per: points per centre (centres repeated consecutively).
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
    return P, Q


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
