"""The BKE posterior over the SE lengthscale on a grid: every mode and the mass around it."""

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .._compile import quick_jit
from .._validation import as_real_array, check_count, check_key, check_positive
from ..kernels.heuristics import median_heuristic
from .inducing import hold_out_inducing, span_coordinates
from .objective import SEPseudolikelihood

__all__ = ["LengthscalePosterior", "lengthscale_posterior"]


@dataclass(frozen=True)
class LengthscalePosterior:
    """The posterior of log(lengthscale) on a grid (see :func:`lengthscale_posterior`).

    Attributes:
        grid: (G,) lengthscales, increasing and log-spaced.
        log_likelihood: (G,) the BKE pseudolikelihood L at each grid point (-inf where it failed).
        weights: (G,) the tempered posterior probabilities exp(L / n) / sum, a flat prior in log(lengthscale).
        modes: (M,) the lengthscales of the local maxima of L, by decreasing posterior mass.
        mode_weights: (M,) the posterior mass of each mode's basin (the grid points up to the neighbouring minima);
            sums to 1.
        n: the number of likelihood points.
        m: the number of held-out inducing points.
    """

    grid: np.ndarray
    log_likelihood: np.ndarray
    weights: np.ndarray
    modes: np.ndarray
    mode_weights: np.ndarray
    n: int
    m: int


@quick_jit   # a first call's heaviest program: quick compiler options at the top level
def _curve(objective, grid, tau2):
    return jax.lax.map(lambda theta: objective(theta, tau2), grid)


def _basins(curve):
    """Label each grid point with the local maximum it climbs to (ties resolved to the left)."""
    G = len(curve)
    labels = np.empty(G, int)
    for i in range(G):
        j = i
        while True:
            left = curve[j - 1] if j > 0 else -np.inf
            right = curve[j + 1] if j < G - 1 else -np.inf
            if right > curve[j] and right >= left:
                j += 1
            elif left > curve[j]:
                j -= 1
            else:
                break
        labels[i] = j
    return labels


def lengthscale_posterior(X, *, key, m: int | None = None, tau2=1.0, grid=None, size: int = 81) -> LengthscalePosterior:
    """The BKE posterior over an isotropic SE lengthscale of one sample, on a log grid, with all its modes.

    The pseudolikelihood L(theta) of Flaxman et al. (2016, eq. 15) is evaluated on ``m`` inducing points held out
    of X at random (drawn with ``key``) and the rest of X, in X's own affine span (:func:`span_coordinates`: constant
    columns and low-rank embeddings are accepted; the kernel is isotropic, so nothing else changes). With fewer
    inducing points than dimensions (m <= D) the log-volume is that of the m x m side of the Jacobian and an
    evaluation costs O(n m + m^3) after O(n m D) distances (see :func:`log_volume`). It is often multimodal (a within-cluster and a
    between-cluster scale, say), and exp(L) treats each of the n points as a separate observation of the
    embedding, so its modes differ by hundreds of nats and move with the held-out points. The posterior here is
    tempered to one observation's worth, exp(L / n) under a flat prior in log(theta): a power posterior
    (Bissiri, Holmes & Walker, 2016) that keeps every mode with a mass that reflects how well it fits per point.

    Args:
        X: (N, D) sample (for a two-sample problem: the pooled, unlabelled sample).
        key: PRNG key for the held-out inducing points.
        m: number of inducing points, at least 1 and below the number of distinct points (default
            :func:`default_num_inducing`).
        tau2: the noise variance tau^2 > 0.
        grid: (G,) positive lengthscales (default ``size`` points log-spaced on [median / 100, 3 median] of the
            pairwise distances).
        size: number of points of the default grid, at least 3.

    Returns:
        LengthscalePosterior: the grid, L on it, the tempered weights, the modes and their masses.

    Raises:
        TypeError: for a key that is not a PRNG key or data that are not real numbers.
        ValueError: for non-finite data, a sample of one repeated point, m outside [1, number of distinct points),
            a grid that is not 1-D with at least 3 positive values, size below 3, or tau2 not positive.
        FloatingPointError: when L is -inf on the whole grid.
        RuntimeError: when float64 is off.
    """
    X = span_coordinates(X)
    check_key(key)
    tau2 = float(check_positive(tau2, "tau2"))
    size = check_count(size, "size", 3)
    return spanned_posterior(X, key, m, tau2, grid, size)


def spanned_posterior(X, key, m, tau2, grid, size, *, common_size: bool = False) -> LengthscalePosterior:
    """:func:`lengthscale_posterior` of a checked sample already in its span coordinates (no second projection).

    ``common_size`` as in :func:`hold_out_inducing`: samples of one size and span with repeated rows then share the
    compiled curve instead of compiling it again for each count of likelihood points.
    """
    X_rest, Z = hold_out_inducing(X, key, m, common_size=common_size)
    objective = SEPseudolikelihood.build(X_rest, Z)
    if grid is None:
        med = float(median_heuristic(X, key=jax.random.fold_in(key, 1)))
        grid = np.geomspace(0.01 * med, 3.0 * med, size)
    else:
        grid = np.sort(np.asarray(check_positive(as_real_array(grid, "grid"), "grid"), float))
        if grid.ndim != 1 or len(grid) < 3:
            raise ValueError(f"grid must be a 1-D array of at least 3 lengthscales, got shape {grid.shape}")
    curve = np.asarray(_curve(objective, jnp.asarray(grid), tau2))
    curve = np.where(np.isfinite(curve), curve, -np.inf)
    if not np.any(np.isfinite(curve)):
        raise FloatingPointError("the pseudolikelihood is -inf on the whole grid (R_zz + tau2/n I never factorised)")
    n = X_rest.shape[0]
    logw = curve / n
    weights = np.exp(logw - logw.max())
    weights /= weights.sum()
    basin = _basins(curve)
    peaks = np.unique(basin[np.isfinite(curve)])
    mass = np.array([weights[basin == p].sum() for p in peaks])
    order = np.argsort(-mass, kind="stable")
    return LengthscalePosterior(grid, curve, weights, grid[peaks[order]], mass[order] / mass.sum(), n, Z.shape[0])
