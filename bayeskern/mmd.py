"""Maximum mean discrepancy: estimators, the Gaussian closed form, and the two-sample test."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr

from ._kernel_choice import choose_kernel
from .aggregate import AggregatedTestResult, KernelCollection, aggregate_statistics
from ._validation import (as_points, as_real_array, check_count, check_covariance, check_finite, check_key,
                          check_min_points, check_positive, check_same_dim, num_points)
from .kernels.base import Kernel
from .kernels.blockwise import DEFAULT_BLOCK_SIZE, blocked_matvec, diagonal_sum, pair_sum, prepare_pair
from .cyclic import (choose_method, default_num_features, cyclic_layout, mmd_cyclic_statistics,
                     mmd_feature_statistics)
from .sharding import RowShards, gather_rows, reject_row_shards
from .testresult import HypothesisTestResult, permutation_p_value

__all__ = ["mmd2_biased", "mmd2_unbiased", "mmd2_linear", "mmd2_gaussians", "mmd_test"]

_ESTIMATORS = ("unbiased", "biased", "linear")
_METHODS = ("auto", "permutation", "cyclic", "features")
_FEATURE_STREAM = 0xFE   # fold_in tag: the random frequencies use a key independent of the layout


def _prepare_samples(X, Y, kernel, minimum, block_size=1):
    check_count(block_size, "block_size")
    X, Y = prepare_pair(kernel, X, Y)
    check_min_points(X, minimum, "X")
    check_min_points(Y, minimum, "Y")
    return X, Y


def _sum_and_trace(kernel, X, block_size):
    return pair_sum(kernel, X, X, block_size), diagonal_sum(kernel, X)


@partial(jax.jit, static_argnames=("unbiased", "block_size"))
def _mmd2_quadratic(kernel, X, Y, unbiased, block_size):
    n, m = num_points(X), num_points(Y)
    sxx, txx = _sum_and_trace(kernel, X, block_size)
    syy, tyy = _sum_and_trace(kernel, Y, block_size)
    sxy = pair_sum(kernel, X, Y, block_size)
    if unbiased:
        return (sxx - txx) / (n * (n - 1)) + (syy - tyy) / (m * (m - 1)) - 2.0 * sxy / (n * m)
    return sxx / n**2 + syy / m**2 - 2.0 * sxy / (n * m)


def mmd2_unbiased(X, Y, kernel: Kernel, *, block_size: int = DEFAULT_BLOCK_SIZE):
    """Unbiased U-statistic estimate of MMD^2 (Gretton et al. 2012, eq. 3): may be negative under P = Q.

    Within-sample sums exclude the diagonal and divide by n(n - 1) and m(m - 1). Matrix-free: O((n + m)^2)
    kernel evaluations in row blocks, O(block_size (n + m)) memory.

    Args:
        X: (n, d) float array, the sample of P; or a :class:`~bayeskern.sharding.RowShards` (rows spread over
            devices and processes: the shards meet in a ring, each device holding two at a time).
        Y: (m, d) float array, the sample of Q; or a RowShards.
        kernel: the kernel, e.g. ``RBF(median_heuristic(X, Y))``.
        block_size: rows per block.

    Returns:
        Scalar array, the estimate.

    Raises:
        ValueError: for non-finite or empty inputs, samples of different dimension, or fewer than 2 points.
    """
    X, Y = _prepare_samples(X, Y, kernel, 2, block_size)
    return _mmd2_quadratic(kernel, X, Y, True, block_size)


def mmd2_biased(X, Y, kernel: Kernel, *, block_size: int = DEFAULT_BLOCK_SIZE):
    """Biased V-statistic ||mu_X - mu_Y||^2 of the empirical embeddings (Gretton et al. 2012, eq. 5); >= 0.

    Matrix-free like :func:`mmd2_unbiased`; a single point per sample is allowed.

    Args:
        X: (n, d) float array, the sample of P; or a :class:`~bayeskern.sharding.RowShards`.
        Y: (m, d) float array, the sample of Q; or a RowShards.
        kernel: the kernel.
        block_size: rows per block.

    Returns:
        Scalar array, the estimate.

    Raises:
        TypeError: for a kernel that is not a Kernel or data that are not real numbers.
        ValueError: for non-finite or empty inputs, or samples of different dimension.
    """
    X, Y = _prepare_samples(X, Y, kernel, 1, block_size)
    return _mmd2_quadratic(kernel, X, Y, False, block_size)


def _linear_h(kernel, X, Y):
    """Per-pair h-statistics of the linear-time estimator (Gretton et al. 2012, Lemma 14)."""
    p = min(X.shape[0], Y.shape[0]) // 2
    x1, x2 = X[0 : 2 * p : 2], X[1 : 2 * p : 2]
    y1, y2 = Y[0 : 2 * p : 2], Y[1 : 2 * p : 2]
    k = kernel.evaluate_paired
    return k(x1, x2) + k(y1, y2) - k(x1, y2) - k(x2, y1)


def mmd2_linear(X, Y, kernel: Kernel):
    """Linear-time unbiased MMD^2 from disjoint pairs (Gretton et al. 2012, Lemma 14): O(n) time and memory.

    Uses the first 2 floor(min(n, m) / 2) points of each sample; its variance is larger than the U-statistic's.

    Args:
        X: (n, d) float array, the sample of P.
        Y: (m, d) float array, the sample of Q.
        kernel: the kernel, e.g. ``RBF(median_heuristic(X, Y))``.

    Returns:
        Scalar array, the estimate.

    Raises:
        ValueError: for non-finite inputs, samples of different dimension, or fewer than 2 points.
    """
    reject_row_shards("mmd2_linear", X=X, Y=Y)
    X, Y = _prepare_samples(X, Y, kernel, 2)
    return jnp.mean(_linear_h(kernel, X, Y))


def mmd2_gaussians(mean_p, cov_p, mean_q, cov_q, lengthscale):
    """Population MMD^2 between N(mean_p, cov_p) and N(mean_q, cov_q) under the RBF kernel, in closed form.

    Uses E exp(-|W|^2 / (2 l^2)) = det(I + S / l^2)^(-1/2) exp(-m^T (S + l^2 I)^(-1) m / 2) for W ~ N(m, S)
    (ARD: l^2 I -> diag(l^2)), with W = X - X', Y - Y', X - Y. A reference for tests and benchmarks.

    Args:
        mean_p: (d,) mean of P.
        cov_p: (d, d) covariance of P (positive semidefinite).
        mean_q: (d,) mean of Q.
        cov_q: (d, d) covariance of Q.
        lengthscale: RBF lengthscale, scalar or (d,).

    Returns:
        Scalar array.

    Raises:
        ValueError: for means of different lengths, covariances that are not (d, d), symmetric and positive
            semidefinite, or a lengthscale that is not positive (scalar or (d,)).
    """
    mean_p, mean_q = (check_finite(jnp.atleast_1d(as_real_array(m, name).astype(float)), name)
                      for m, name in ((mean_p, "mean_p"), (mean_q, "mean_q")))
    d = mean_p.shape[0]
    if mean_p.ndim != 1 or mean_q.shape != (d,):
        raise ValueError(f"mean_p and mean_q must be vectors of one length d, got shapes {mean_p.shape} and "
                         f"{mean_q.shape}")
    cov_p, cov_q = (check_covariance(jnp.atleast_2d(as_real_array(c, name)), name, d)
                    for c, name in ((cov_p, "cov_p"), (cov_q, "cov_q")))
    lengthscale = check_positive(as_real_array(lengthscale, "lengthscale").astype(float), "lengthscale")
    if lengthscale.shape not in ((), (d,)):
        raise ValueError(f"lengthscale must be a scalar or have shape ({d},), got {lengthscale.shape}")
    ell2 = jnp.broadcast_to(lengthscale**2, (d,))

    def expected_k(mean, cov):
        S = cov + jnp.diag(ell2)
        _, logdet_ratio = jnp.linalg.slogdet(S / jnp.sqrt(ell2)[:, None] / jnp.sqrt(ell2)[None, :])
        return jnp.exp(-0.5 * logdet_ratio - 0.5 * mean @ jnp.linalg.solve(S, mean))

    zero = jnp.zeros(d)
    return expected_k(zero, 2 * cov_p) + expected_k(zero, 2 * cov_q) - 2 * expected_k(mean_p - mean_q, cov_p + cov_q)


@partial(jax.jit, static_argnames=("n", "block_size"))
def _label_forms(kernel, Z, S, n, block_size):
    """For label columns S (N, b) marking sample X: MMD^2 terms of each relabelling.

    Returns (XX, YY, XY, dX, dY): off-diagonal within-sample sums, the cross sum
    and the diagonal sums, each (b,).
    """
    d = kernel.evaluate_paired(Z, Z)
    KS = blocked_matvec(kernel, Z, Z, jnp.concatenate([S, jnp.ones((S.shape[0], 1), S.dtype)], axis=1), block_size)
    r = KS[:, -1] - d
    q = jnp.sum(S * (KS[:, :-1] - d[:, None] * S), axis=0)
    p = S.T @ r
    dX = S.T @ d
    return q, jnp.sum(r) - 2 * p + q, p - q, dX, jnp.sum(d) - dX


@partial(jax.jit, static_argnames=("batch", "N", "n"))
def _label_batch(keys, start, batch, N, n):
    """(N, batch) 0/1 labels of the first sample, one column per key of keys[start : start + batch] (a last, short
    batch is filled up with its first key); in the batch at start 0, column 0 is the observed labelling."""
    index = start + jnp.arange(batch)
    perms = jax.vmap(lambda k: jax.random.permutation(k, N))(keys[jnp.where(index < keys.shape[0], index, start)])
    S = jax.vmap(lambda p: jnp.zeros(N).at[p[:n]].set(1.0))(perms).T
    return S.at[:, 0].set(jnp.where(start == 0, (jnp.arange(N) < n).astype(S.dtype), S[:, 0]))


def _statistic(forms, n, m, estimator):
    XX, YY, XY, dX, dY = forms
    if estimator == "unbiased":
        return XX / (n * (n - 1)) + YY / (m * (m - 1)) - 2 * XY / (n * m)
    return (XX + dX) / n**2 + (YY + dY) / m**2 - 2 * XY / (n * m)


_BKL_STREAM = 0xB1  # fold_in tag: the BKL inducing points use a key independent of the permutations


def _derived(key, tag):
    return None if key is None else jax.random.fold_in(key, tag)


def mmd_test(
    X,
    Y,
    kernel: Kernel | KernelCollection | str | None = None,
    *,
    key=None,
    n_permutations: int = 500,
    estimator: str = "unbiased",
    method: str = "auto",
    num_features: int | None = None,
    progress_bar: bool | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    max_label_columns: int = 2**25,
) -> HypothesisTestResult:
    """Kernel two-sample test of H0: P = Q with an exact-level permutation p-value.

    ``method="permutation"``: the null distribution comes from ``n_permutations`` random relabellings of the pooled
    sample, and the p-value is (1 + #{T_b >= T}) / (1 + B). All relabellings share each kernel block (one
    matrix-free pass per batch of ``max_label_columns // (n + m)`` permutations), so no (n + m) x (n + m) matrix is
    formed; the cost is O((n + m)^2 B) per kernel. ``method="cyclic"``: the null holds the cyclic shifts of a
    random block layout of the pooled sample (:mod:`bayeskern.cyclic`; with fewer than B + 1 points also the
    reflections), a group of relabellings, so the level is exact as well; every shift's exact statistic comes from
    one FFT pass, O((n + m)^2 log B) per kernel. ``method="features"``: the same null with each kernel replaced by
    ``num_features`` random Fourier features, O((n + m) R log B) per kernel, for large samples. ``"auto"``
    (default): permutations for small samples (below 200 points, or 2N - 1 < B), the cyclic null up to
    ``FEATURES_ABOVE["mmd"]`` pooled points (``WIDE_FEATURES_ABOVE`` from ``WIDE_FROM_DIM`` dimensions on), the
    features above it (when every kernel is stationary).

    Args:
        X: (n, d) float array, the sample of P; with ``method="features"`` also a
            :class:`~bayeskern.sharding.RowShards` (then Y too): every process gathers the rows, the processes
            compute the feature sums in turn, and the result equals the one-process test's to rounding.
        Y: (m, d) float array, the sample of Q.
        kernel: a :class:`~bayeskern.kernels.Kernel`; None or ``"median"`` for an RBF with the median-heuristic
            lengthscale of the pooled sample; or a kernel rule ``rule(X, Y, *, key) -> Kernel`` such as
            :func:`bayeskern.inference.bkl_kernel` (learned on the pooled, unlabelled sample with a key derived
            from ``key``, so the test keeps its level); or ``"bayes"``, a :class:`bayeskern.bke.BayesAggregate` or a
            :class:`~bayeskern.KernelCollection` for the aggregated test over a weighted collection of kernels
            (``"bayes"``: kernels at the modes of the BKE posterior of the pooled sample plus a bandwidth floor;
            see the guide).
        key: PRNG key (``jax.random.key``) for the permutations; needed unless ``estimator="linear"``.
        n_permutations: number B of relabellings, an integer >= 1 (cyclic and features: at least B shifts and at
            most 2 max(B + 1, 256) - 1, as many as divide the sample most evenly, unless the sample is smaller).
        estimator: ``"unbiased"`` (U-statistic, default) or ``"biased"``, with the permutation or feature null;
            ``"linear"``: the linear-time statistic with its asymptotic normal null.
        method: ``"auto"``, ``"permutation"``, ``"cyclic"`` or ``"features"`` (see above).
        num_features: R, random frequencies per kernel with ``method="features"`` (each gives a cosine and a sine);
            default :func:`bayeskern.cyclic.default_num_features`: the dimension D, from 64 up to 1024.
        progress_bar: show progress on stderr (cyclic and features); None shows it from 5000 pooled points on with
            the exact kernel (cyclic), from 10^5 with features.
        block_size: rows per block of the matrix-free passes.
        max_label_columns: memory cap on permutations evaluated together (labels x points).

    Returns:
        HypothesisTestResult: statistic, p-value, the null statistics, the kernel used and ``method``
        (``"permutation"``, ``"cyclic"`` or ``"features"``); for an aggregated test an :class:`~bayeskern.AggregatedTestResult`
        (statistic max_k log(w_k / p_k), and each kernel's weight, statistic and own p-value).

    Raises:
        TypeError: for RowShards with ``method`` other than ``"features"``, or ``method="features"`` with a kernel
            that has no spectral measure (not stationary).
        ValueError: for inputs of different dimension, fewer than 2 points, an unknown estimator or method, a missing
            key, n_permutations or num_features < 1, or an aggregated test with ``estimator="linear"``.

    Examples:
        >>> import jax, numpy as np, bayeskern as bk
        >>> rng = np.random.default_rng(0)
        >>> X, Y = rng.standard_normal((200, 2)), rng.standard_normal((200, 2)) + [1.0, 0.0]
        >>> result = bk.mmd_test(X, Y, "median", key=jax.random.key(0), n_permutations=200)
        >>> result.p_value <= 1 / 201, result.reject(0.05)
        (True, True)
    """
    if estimator not in _ESTIMATORS:
        raise ValueError(f"estimator must be one of {_ESTIMATORS}, got {estimator!r}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    distributed = isinstance(X, RowShards) or isinstance(Y, RowShards)
    if distributed:
        if method != "features":
            raise TypeError(f"mmd_test with method={method!r} takes X and Y on one process, got a RowShards: pass "
                            "method='features' for the test on rows spread over processes")
        X, Y = (gather_rows(A) if isinstance(A, RowShards) else A for A in (X, Y))
    if key is not None:
        check_key(key)
    n_permutations = check_count(n_permutations, "n_permutations")
    if num_features is not None:
        num_features = check_count(num_features, "num_features")
    block_size, max_label_columns = check_count(block_size, "block_size"), check_count(max_label_columns,
                                                                                      "max_label_columns")
    points = as_points(X, "X"), as_points(Y, "Y")
    check_same_dim(*points, "X and Y")
    kernel = choose_kernel(kernel, *points, key=_derived(key, _BKL_STREAM))
    collection = kernel if isinstance(kernel, KernelCollection) else None
    if collection is not None and estimator == "linear":
        raise ValueError("an aggregated test (kernel='bayes' or a KernelCollection) needs a permutation null: "
                         "estimator must be 'unbiased' or 'biased', not 'linear'")
    X, Y = _prepare_samples(X, Y, collection.kernels[0] if collection else kernel, 2)
    kernels = collection.kernels if collection else (kernel,)
    N = X.shape[0] + Y.shape[0]
    method = "linear" if estimator == "linear" else choose_method(method, N, kernels, n_permutations,
                                                                  dim=X.shape[1])
    if method in ("cyclic", "features"):
        if key is None:
            raise ValueError("mmd_test with a permutation null needs a PRNG key: pass key=jax.random.key(seed)")
        layout = cyclic_layout(N, n_permutations, key, reflections=method == "cyclic")
        if method == "cyclic":
            stats = mmd_cyclic_statistics(kernels, jnp.concatenate([X, Y]), X.shape[0], layout, estimator,
                                          progress_bar)
        else:
            R = default_num_features(X.shape[1]) if num_features is None else num_features
            stats = mmd_feature_statistics(kernels, jnp.concatenate([X, Y]), X.shape[0], layout,
                                           jax.random.fold_in(key, _FEATURE_STREAM), R, estimator,
                                           progress_bar, distributed)
        return _result(stats, kernel, collection, method)

    if estimator == "linear":
        h = _linear_h(kernel, X, Y)
        stat = float(jnp.mean(h))
        se = float(jnp.std(h, ddof=1) / jnp.sqrt(h.shape[0])) if h.shape[0] > 1 else 0.0
        if not se > 0:
            raise ValueError("mmd_test(estimator='linear') needs at least 4 points per sample with non-constant pair statistics")
        return HypothesisTestResult(stat, float(1.0 - ndtr(stat / se)), "normal", None, (kernel,))

    if key is None:
        raise ValueError("mmd_test with a permutation null needs a PRNG key: pass key=jax.random.key(seed)")
    stats = _permutation_statistics(kernels, X, Y, key, n_permutations, estimator, block_size, max_label_columns)
    return _result(stats, kernel, collection, "permutation")


def _result(stats, kernel, collection, method):
    """The test's result from (B + 1, K) statistics, row 0 observed: plain for one kernel, aggregated for a
    collection."""
    if collection is None:
        observed, null = float(stats[0, 0]), stats[1:, 0]
        return HypothesisTestResult(observed, permutation_p_value(observed, null), method, null, (kernel,))
    aggregated, p = aggregate_statistics(stats, collection.weights)
    observed, null = float(aggregated[0]), aggregated[1:]
    return AggregatedTestResult(observed, permutation_p_value(observed, null), method, null, collection.kernels,
                                collection.weights, stats[0], p[0], collection.labels)


def _permutation_statistics(kernels, X, Y, key, n_permutations, estimator, block_size, max_label_columns):
    """(B + 1, K) statistics of every kernel on the observed labelling (row 0) and B shared relabellings."""
    Z = jnp.concatenate([X, Y])
    n, m = X.shape[0], Y.shape[0]
    N = n + m
    keys = jax.random.split(key, n_permutations + 1)  # column 0 is replaced by the observed labels
    batch = max(1, min(n_permutations + 1, max_label_columns // N))
    stats = []
    for start in range(0, n_permutations + 1, batch):
        S = _label_batch(keys, start, batch, N, n)
        stats.append(np.stack([np.asarray(_statistic(_label_forms(kern, Z, S, n, block_size), n, m, estimator)
                                          [: n_permutations + 1 - start]) for kern in kernels], axis=1))
    return np.concatenate(stats)
