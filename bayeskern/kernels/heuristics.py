"""Data-driven default lengthscales."""

import jax
import numpy as np
from scipy.spatial.distance import pdist

from .._validation import as_points, check_count, check_min_points, check_same_dim

__all__ = ["median_heuristic"]

_CONVENTIONS = {"half_sq": 1.0, "sq": 2.0 ** -0.5}


def median_heuristic(X, Y=None, *, convention: str = "half_sq", max_points: int = 3000, key=None):
    """Median pairwise Euclidean distance, as an RBF lengthscale.

    Args:
        X: (n, d) or (n,) float array.
        Y: optional (m, d) array pooled with X, as for two-sample tests.
        convention: ``"half_sq"`` returns the median itself, the lengthscale l of exp(-d^2 / (2 l^2));
            ``"sq"`` returns median / sqrt(2), which reproduces exp(-d^2 / median^2).
        max_points: above this many pooled points the median is taken on a random subsample of that size.
        key: PRNG key of the subsample (default ``jax.random.key(0)``, so repeated calls agree).

    When more than half the pairs are repeated points (binary or heavily rounded data) the median of all pairwise
    distances is 0; the median of the distances between distinct points is returned instead.

    Returns:
        float: the lengthscale.

    Raises:
        ValueError: for an unknown convention, non-finite inputs, fewer than 2 pooled points, samples of different
            dimension, or a sample of one repeated point.

    Examples:
        >>> import numpy as np, bayeskern as bk
        >>> X = np.array([[0.0], [1.0], [3.0]])                  # distances 1, 2, 3
        >>> bk.median_heuristic(X), round(bk.median_heuristic(X, convention="sq"), 4)
        (2.0, 1.4142)
    """
    if convention not in _CONVENTIONS:
        raise ValueError(f"convention must be one of {sorted(_CONVENTIONS)}, got {convention!r}")
    if check_count(max_points, "max_points") < 2:
        raise ValueError(f"max_points must be at least 2, got {max_points}")
    Z = as_points(X, "X")
    if Y is not None:
        Y = as_points(Y, "Y")
        check_same_dim(Z, Y, "X and Y")
        Z = np.concatenate([np.asarray(Z), np.asarray(Y)])
    check_min_points(Z, 2, "median_heuristic (pooled sample)")
    if Z.shape[0] > max_points:
        key = jax.random.key(0) if key is None else key
        Z = jax.random.choice(key, Z, (max_points,), replace=False)
    distances = pdist(np.asarray(Z, dtype=np.float64))  # on the host: no program per sample size
    median = float(np.median(distances))
    if not median > 0:   # more than half the pairs are repeated points: they carry no scale
        positive = distances[distances > 0]
        if positive.size == 0:
            raise ValueError("median_heuristic: every pooled point is the same point, so there is no scale")
        median = float(np.median(positive))
    return median * _CONVENTIONS[convention]
