"""Inducing points for the BKE pseudolikelihood: a random held-out subset or kernel herding."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_points, check_count, check_key
from ..compression.herding import jkh_pool_scores
from ..kernels.base import Kernel
from ..kernels.blockwise import DEFAULT_BLOCK_SIZE, kernel_row_sums
from ..kernels.heuristics import median_heuristic
from ..kernels.stationary import RBF

__all__ = ["default_num_inducing", "hold_out_inducing", "herding_inducing"]


def default_num_inducing(N: int, D: int) -> int:
    """The default number of inducing points, m = min(100, max(D, floor(N / 10))).

    Args:
        N: the sample size.
        D: the dimension.

    Returns:
        int, m.

    Raises:
        TypeError: for N or D not an integer.
        ValueError: for N or D below 1.
    """
    N, D = check_count(N, "N"), check_count(D, "D")
    return min(100, max(D, N // 10))


def hold_out_inducing(X, key, m: int | None = None):
    """Split a sample into likelihood points and m held-out inducing points, uniformly at random.

    The inducing points must not enter the pseudolikelihood (their own volume term vanishes); the full X stays
    available for embedding posteriors and tests. m changes the type-II answer: report it, keep it fixed.

    Args:
        X: (N, D) float array.
        key: PRNG key.
        m: number of inducing points, D <= m < N (default :func:`default_num_inducing`).

    Returns:
        (X_rest, Z): arrays of shapes (N - m, D) and (m, D).

    Raises:
        ValueError: for non-finite inputs or m outside [D, N).
    """
    X = as_points(X, "X")
    m = _check_size(X, m)
    X_rest, Z = _random_split(check_key(key), X, m)
    return X_rest, _distinct(Z)


def herding_inducing(X, m: int | None = None, *, kernel: Kernel | None = None,
                     block_size: int = DEFAULT_BLOCK_SIZE):
    """Kernel herding over X (N, D) for m inducing points, held out of the likelihood like a random subset.

    A compressed set as inducing points: greedily z_{t+1} = argmax over the unused points x of
    mu(x) - (sum_{s<=t} k(x, z_s) + k(x, x) / 2) / (t + 1), mu the sample's mean embedding, so the m points
    spread over where the sample has mass; deterministic given X. ``kernel`` defaults to the RBF with lengthscale
    median heuristic x m^(-1/D), the spacing of m points over the sample: a kernel as wide as the median
    resolves only the first few points, after which the greedy choice follows tiny residuals.
    Matrix-free: memory O(N * block_size), time O(N^2 + N m).

    Args:
        X: (N, D) sample.
        m: number of inducing points, D <= m < N (default :func:`default_num_inducing`).
        kernel: the herding kernel (default as above).
        block_size: rows per block of the mean embedding.

    Returns:
        (X_rest, Z): arrays of shapes (N - m, D) and (m, D), as :func:`hold_out_inducing` returns.

    Raises:
        TypeError: for data that are not real numbers or m not an integer.
        ValueError: for non-finite data or m outside [D, N).
    """
    X = as_points(X, "X")
    m = _check_size(X, m)
    kernel = RBF(median_heuristic(X) * m ** (-1.0 / X.shape[1])) if kernel is None else kernel
    mu = kernel_row_sums(kernel, X, block_size=block_size) / X.shape[0]
    chosen = np.asarray(_herd(kernel, X, mu, m))
    return X[np.setdiff1d(np.arange(X.shape[0]), chosen)], _distinct(X[chosen])


@partial(jax.jit, static_argnames="m")
def _herd(kernel, X, mu, m):
    self_kernel = kernel.evaluate_paired(X, X)

    def step(state, t):
        running, taken = state
        i = jnp.argmax(jnp.where(taken, -jnp.inf, jkh_pool_scores(mu, running, self_kernel, t)))
        return (running + kernel.evaluate(X, X[i][None])[:, 0], taken.at[i].set(True)), i

    state = (jnp.zeros(X.shape[0], mu.dtype), jnp.zeros(X.shape[0], bool))
    return jax.lax.scan(step, state, jnp.arange(m))[1]


def _check_size(X, m):
    N, D = X.shape
    m = default_num_inducing(N, D) if m is None else check_count(m, "m")
    if m < D:
        raise ValueError(f"m must be at least D = {D} inducing points, got m = {m}")
    if N - m < 1:
        raise ValueError(f"X has {N} points: too few to hold out m = {m} inducing points and keep one for the likelihood")
    return m


@partial(jax.jit, static_argnames="m")
def _random_split(key, X, m):
    perm = jax.random.permutation(key, X.shape[0])
    return X[perm[m:]], X[perm[:m]]


def _distinct(Z):
    if len(np.unique(np.asarray(Z), axis=0)) < len(Z):
        raise ValueError("X has duplicated points among the chosen inducing points; deduplicate X or pass Z explicitly")
    return Z
