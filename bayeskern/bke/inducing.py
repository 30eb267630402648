"""Inducing points for the BKE pseudolikelihood: a random held-out subset or kernel herding."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_points, check_count, check_key, num_distinct_rows, row_keys
from ..compression.herding import jkh_pool_scores
from ..kernels.base import Kernel
from ..kernels.blockwise import DEFAULT_BLOCK_SIZE, kernel_row_sums
from ..kernels.heuristics import median_heuristic
from ..kernels.stationary import RBF

__all__ = ["default_num_inducing", "hold_out_inducing", "herding_inducing", "span_coordinates"]


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


def hold_out_inducing(X, key, m: int | None = None, *, common_size: bool = False):
    """Split a sample into likelihood points and m held-out inducing points, uniformly at random.

    The inducing points must not enter the pseudolikelihood (their own volume term vanishes); the full X stays
    available for embedding posteriors and tests. m changes the type-II answer: report it, keep it fixed. Repeated
    rows (rounded values, pixels, categories) are allowed: the inducing points are the first m distinct rows of a
    random order, and every copy of them is held out of the likelihood points.

    Args:
        X: (N, D) float array.
        key: PRNG key.
        m: number of inducing points, at least 1 and below the number of distinct rows (default
            :func:`default_num_inducing` of the number of distinct rows).
        common_size: when copies of the inducing points left the likelihood points (how many depends on the data),
            keep a random subset of those of one of eight sizes per octave (at most an eighth fewer), so that
            samples of one size give arrays of a few shapes and share compiled programs.

    Returns:
        (X_rest, Z): arrays of shapes (N - m - copies of Z, D) (with ``common_size``: that count rounded down to
        one of eight sizes per octave) and (m, D); without repeated rows (N - m, D).

    Raises:
        ValueError: for non-finite inputs, m below 1, or m not below the number of distinct rows.
    """
    X = as_points(X, "X")
    m = _check_size(X, m)
    order = np.asarray(_random_order(check_key(key), X.shape[0]))
    values, ids = np.asarray(X), _row_ids(X)
    if ids is None:   # no repeated rows
        rest, inducing = order[m:], order[:m]
    else:
        seen = ids[order]
        firsts = np.sort(np.unique(seen, return_index=True)[1])[:m]   # the first m distinct values met
        rest, inducing = order[~np.isin(seen, seen[firsts])], order[firsts]
        if common_size and len(rest) + m < len(order):    # copies left: a random subset (rest is in random order)
            rest = rest[: _common_size(len(rest))]
    return jax.device_put(values[rest]), jax.device_put(values[inducing])


def _common_size(n: int) -> int:
    """The largest of eight sizes per octave not above n: a multiple of 2^(k - 3) for n in [2^k, 2^(k + 1)), k >= 4
    (at most an eighth fewer); n itself below 16."""
    if n < 16:
        return n
    step = 1 << (n.bit_length() - 4)
    return n - n % step


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
    ids = _row_ids(X)
    ids = np.arange(X.shape[0]) if ids is None else ids
    chosen = np.asarray(_herd(kernel, X, mu, jax.device_put(ids), m))
    values = np.asarray(X)
    return jax.device_put(values[~np.isin(ids, ids[chosen])]), jax.device_put(values[chosen])


@partial(jax.jit, static_argnames="m")
def _herd(kernel, X, mu, ids, m):
    """Indices of m herded rows; once a row is taken, so are its copies."""
    self_kernel = kernel.evaluate_paired(X, X)

    def step(state, t):
        running, taken = state
        i = jnp.argmax(jnp.where(taken, -jnp.inf, jkh_pool_scores(mu, running, self_kernel, t)))
        return (running + kernel.evaluate(X, X[i][None])[:, 0], taken | (ids == ids[i])), i

    state = (jnp.zeros(X.shape[0], mu.dtype), jnp.zeros(X.shape[0], bool))
    return jax.lax.scan(step, state, jnp.arange(m))[1]


def _check_size(X, m):
    distinct = num_distinct_rows(X)
    m = default_num_inducing(distinct, X.shape[1]) if m is None else check_count(m, "m")
    if distinct - m < 1:
        raise ValueError(f"X has {distinct} distinct points: too few to hold out m = {m} inducing points and keep one "
                         "for the likelihood")
    return m


@partial(jax.jit, static_argnums=1)
def _random_order(key, N):
    return jax.random.permutation(key, N)


def _row_ids(X):
    """(N,) integer id of each row's value (equal rows, equal ids), or None when no row repeats."""
    keys = row_keys(X)
    _, first, ids = np.unique(keys, return_index=True, return_inverse=True)
    return None if len(first) == len(keys) else ids


def span_coordinates(X):
    """The points' coordinates in their affine span: an isometry, so distances (and isotropic kernels) are unchanged.

    Constant columns, collinear coordinates and embeddings of low rank make the log-volume of the BKE
    pseudolikelihood vanish in the directions the sample never moves in. In the span's own coordinates, (X - mean) V
    with V the right singular vectors of the centred sample whose singular values are not negligible (NumPy's rank
    tolerance), every direction carries data. A sample whose centred rows span R^D is returned as it is.

    Args:
        X: (N, D) float array.

    Returns:
        (N, r) array, r the rank of the centred sample (X itself when r = D).

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for non-finite data, or a sample whose rows are all equal (r = 0).
    """
    X = as_points(X, "X")
    centred = np.asarray(X, float) - np.mean(np.asarray(X, float), axis=0)
    singular = np.linalg.svd(centred, compute_uv=False)
    rank = int(np.sum(singular > singular[:1].max(initial=0.0) * max(centred.shape) * np.finfo(float).eps))
    if rank == 0:
        raise ValueError("every row of X is the same point: the sample spans no direction")
    if rank == X.shape[1]:
        return X
    return jax.device_put(centred @ np.linalg.svd(centred, full_matrices=False)[2][:rank].T)
