"""Hilbert–Schmidt independence criterion: estimators and the independence test."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import gammaincc

from ._kernel_choice import choose_kernel
from .aggregate import AggregatedTestResult, KernelCollection, aggregate_statistics
from ._validation import as_points, check_count, check_key, check_min_points, check_same_length, num_points
from .kernels.base import Kernel, TensorProduct
from .kernels.blockwise import (DEFAULT_BLOCK_SIZE, block_row_reduce, check_kernel, diagonal_values, pair_sum,
                                prepare_rows, row_sums)
from .cyclic import (DEFAULT_NUM_FEATURES, choose_method, cyclic_layout, hsic_cyclic_statistics,
                     hsic_feature_statistics)
from .sharding import RowShards, check_same_layout, gather_rows
from .testresult import HypothesisTestResult, permutation_p_value

__all__ = ["hsic_biased", "hsic_unbiased", "hsic_test"]

_METHODS = ("auto", "permutation", "cyclic", "features", "gamma")
_FEATURE_STREAM = 0xFE   # fold_in tag: the random frequencies use a key independent of the layout


def _prepare(X, Y, kx, ky, minimum, block_size=1):
    check_count(block_size, "block_size")
    check_kernel(kx, "kx"), check_kernel(ky, "ky")
    X = prepare_rows(kx, X, "X")
    Y = prepare_rows(ky, Y, "Y")
    check_same_length(X, Y, "X and Y")
    if isinstance(X, RowShards) or isinstance(Y, RowShards):
        check_same_layout(X, Y, "X and Y")
    check_min_points(X, minimum, "X")
    return X, Y


def _default_kernels(X, Y, kx, ky, key):
    keys = (None, None) if key is None else (jax.random.fold_in(key, 0xB1), jax.random.fold_in(key, 0xB2))
    return (choose_kernel(kx, as_points(X, "X"), key=keys[0], what="kx", role="marginal"),
            choose_kernel(ky, as_points(Y, "Y"), key=keys[1], what="ky", role="marginal"))


def _moments(kx, ky, X, Y, block_size):
    """Row sums of K and L, their diagonals, and sum(K * L) in one matrix-free pass (zero on padded rows of
    RowShards inputs)."""
    XY = X.with_values((X.values, Y.values)) if isinstance(X, RowShards) else (X, Y)
    sKL = pair_sum(TensorProduct(kx, ky), XY, XY, block_size)
    return (row_sums(kx, X, X, block_size), row_sums(ky, Y, Y, block_size), diagonal_values(kx, X),
            diagonal_values(ky, Y), sKL)


def _biased_from(sKL, rK, rL, n):
    return (sKL - 2.0 / n * jnp.dot(rK, rL) + jnp.sum(rK) * jnp.sum(rL) / n**2) / n**2


@partial(jax.jit, static_argnames=("block_size",))
def _hsic_b(kx, ky, X, Y, block_size):
    rK, rL, _, _, sKL = _moments(kx, ky, X, Y, block_size)
    return _biased_from(sKL, rK, rL, num_points(X))


@partial(jax.jit, static_argnames=("block_size",))
def _hsic_u(kx, ky, X, Y, block_size):
    n = num_points(X)
    rK, rL, dK, dL, sKL = _moments(kx, ky, X, Y, block_size)
    rKt, rLt = rK - dK, rL - dL
    trace = sKL - jnp.dot(dK, dL)
    total = trace + jnp.sum(rKt) * jnp.sum(rLt) / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * jnp.dot(rKt, rLt)
    return total / (n * (n - 3))


def hsic_biased(X, Y, kx: Kernel, ky: Kernel, *, block_size: int = DEFAULT_BLOCK_SIZE):
    """Biased HSIC_b = tr(K H L H) / n^2 of paired samples, H = I - 11^T / n (Gretton et al. 2005); >= 0.

    Matrix-free like :func:`hsic_unbiased`.

    Args:
        X: (n, d_x) float array, row i paired with Y[i]; or a :class:`~bayeskern.sharding.RowShards`.
        Y: (n, d_y) float array; or a RowShards with the same rows per process.
        kx: kernel on X.
        ky: kernel on Y.
        block_size: rows per block.

    Returns:
        Scalar array, the estimate.

    Raises:
        TypeError: for kernels that are not Kernels or data that are not real numbers.
        ValueError: for non-finite or unpaired samples, or fewer than 2 pairs.
    """
    X, Y = _prepare(X, Y, kx, ky, 2, block_size)
    return _hsic_b(kx, ky, X, Y, block_size)


def hsic_unbiased(X, Y, kx: Kernel, ky: Kernel, *, block_size: int = DEFAULT_BLOCK_SIZE):
    """Unbiased HSIC U-statistic of paired samples (Song et al. 2012, eq. 5): may be negative under independence.

    Computed from kernel row sums, diagonals and sum(K * L) in one matrix-free pass: O(n^2) kernel evaluations,
    O(block_size n) memory.

    Args:
        X: (n, d_x) array (or (n,) labels with an Indicator kernel); row i is paired with Y[i]. Or a
            :class:`~bayeskern.sharding.RowShards` (rows over processes), Y then one of the same layout.
        Y: (n, d_y) array.
        kx: kernel on X.
        ky: kernel on Y.
        block_size: rows per block.

    Returns:
        Scalar array, the estimate.

    Raises:
        ValueError: for non-finite inputs, unpaired samples, or n < 4.
    """
    X, Y = _prepare(X, Y, kx, ky, 4, block_size)
    return _hsic_u(kx, ky, X, Y, block_size)


@partial(jax.jit, static_argnames=("batch",))
def _null_dense(kx, ky, X, Y, perms, batch):
    """HSIC_b of (X, Y[perm]) for each permutation, from dense centred K and L."""
    n = X.shape[0]
    K = kx.evaluate(X, X)
    Kc = K - K.mean(0)[None, :] - K.mean(1)[:, None] + K.mean()
    L = ky.evaluate(Y, Y)
    return lax.map(lambda p: jnp.sum(Kc * L[p][:, p]) / n**2, perms, batch_size=batch)


@partial(jax.jit, static_argnames=("batch",))
def _null_dense_collection(kxs, kys, X, Y, perms, batch):
    """HSIC_b of every kernel pair (kxs[i], kys[j]) on (X, Y[perm]) for each permutation: (P, I, J)."""
    n = X.shape[0]

    def centred(k):
        K = k.evaluate(X, X)
        return K - K.mean(0)[None, :] - K.mean(1)[:, None] + K.mean()

    Kc = jnp.stack([centred(k) for k in kxs]).reshape(len(kxs), n * n)
    L = jnp.stack([k.evaluate(Y, Y) for k in kys])
    return lax.map(lambda p: Kc @ L[:, p][:, :, p].reshape(len(kys), n * n).T / n**2, perms, batch_size=batch)


@partial(jax.jit, static_argnames=("block_size",))
def _null_matrix_free(kx, ky, X, Y, perms, block_size):
    """HSIC_b of (X, Y[perm]) for each permutation without forming K or L."""
    n = X.shape[0]
    rK, rL = row_sums(kx, X, X, block_size), row_sums(ky, Y, Y, block_size)
    kxy = TensorProduct(kx, ky)

    def one(p):
        pairs = (X, Y[p])
        return _biased_from(pair_sum(kxy, pairs, pairs, block_size), rK, rL[p], n)

    return lax.map(one, perms)


@partial(jax.jit, static_argnames=("block_size",))
def _gamma_parameters(kx, ky, X, Y, block_size):
    """Observed n * HSIC_b and the Gamma(shape, scale) null of Gretton et al. (2008)."""
    n = float(X.shape[0])  # float: n^4 overflows int64 for n ~ 10^5
    rK, rL, dK, dL, sKL = _moments(kx, ky, X, Y, block_size)
    aK, aL = rK / n, rL / n
    mK, mL = jnp.mean(aK), jnp.mean(aL)

    def fn(rows, cols, mask):
        (xi, yi, aKi, aLi), (xj, yj, aKj, aLj) = rows, cols
        Kc = kx.evaluate(xi, xj) - aKi[:, None] - aKj[None, :] + mK
        Lc = ky.evaluate(yi, yj) - aLi[:, None] - aLj[None, :] + mL
        return jnp.sum(jnp.where(mask[None, :], (Kc * Lc) ** 2, 0.0), axis=1)

    data = (X, Y, aK, aL)
    total = jnp.sum(block_row_reduce(fn, data, data, block_size=block_size))
    diag = jnp.sum(((dK - 2 * aK + mK) * (dL - 2 * aL + mL)) ** 2)
    var = (total - diag) / 36.0 / (n * (n - 1)) * 72.0 * (n - 4) * (n - 5) / (n * (n - 1) * (n - 2) * (n - 3))
    mu_x = (jnp.sum(rK) - jnp.sum(dK)) / (n * (n - 1))
    mu_y = (jnp.sum(rL) - jnp.sum(dL)) / (n * (n - 1))
    mean = (jnp.mean(dK) - mu_x) * (jnp.mean(dL) - mu_y) / n
    stat = n * _biased_from(sKL, rK, rL, n)
    shape, scale = mean**2 / var, n * var / mean
    return stat, shape, scale


def hsic_test(
    X,
    Y,
    kx: Kernel | KernelCollection | str | None = None,
    ky: Kernel | KernelCollection | str | None = None,
    *,
    key=None,
    n_permutations: int = 500,
    method: str = "auto",
    num_features: int = DEFAULT_NUM_FEATURES["hsic"],
    progress_bar: bool | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    dense_max: int = 2048,
) -> HypothesisTestResult:
    """Kernel independence test of H0: X and Y are independent, from n paired points.

    Args:
        X: (n, d_x) array; row i is paired with row i of Y. Integer labels work with :class:`Indicator` kernels.
            With ``method="features"`` also a :class:`~bayeskern.sharding.RowShards` (Y one of the same layout):
            every process gathers the pairs, the processes compute the feature sums in turn, and the result equals
            the one-process test's to rounding.
        Y: (n, d_y) array.
        kx: kernel on X; None or ``"median"`` for an RBF with the median-heuristic lengthscale of X; or a kernel
            rule such as :func:`bayeskern.inference.bkl_kernel` (learned on X with a key derived from ``key``).
        ky: kernel on Y, as ``kx``. With ``"bayes"`` (kernels at the modes of the BKE posterior of that variable
            plus a bandwidth floor), a :class:`bayeskern.bke.BayesAggregate` or a
            :class:`~bayeskern.KernelCollection` for either variable, every pair of kernels is tested at once
            (weights multiplied) and the aggregated test returns an :class:`~bayeskern.AggregatedTestResult`.
        key: PRNG key for the permutations (``method="permutation"``) and for kernel rules.
        n_permutations: number B of relabellings of Y, an integer >= 1 (cyclic and features: at least B shifts
            and at most 2 max(B + 1, 256) - 1, unless the sample is smaller).
        method: ``"permutation"``: the biased HSIC_b against B permutations, p-value (1 + #{T_b >= T}) / (1 + B).
            Up to ``dense_max`` points the centred Gram matrices are formed once; above it every permutation is
            a matrix-free pass (O(n^2) time, O(n) memory). ``"cyclic"``: the exact HSIC_b of every cyclic shift of Y
            in a random block layout of the pairs (:mod:`bayeskern.cyclic`; with fewer than B + 1 pairs also the
            reflections), a group, so the level is exact; one FFT pass, O(n^2 log B) per kernel pair.
            ``"features"``: the same null with ``num_features`` random Fourier features per kernel, O(n R^2) per
            kernel pair. ``"auto"`` (default): permutations for small samples (below 200 pairs, or 2n - 1 < B),
            the cyclic null up to ``FEATURES_ABOVE["hsic"]`` pairs, the features above (stationary kernels).
            ``"gamma"``: n * HSIC_b against the moment-matched Gamma null of Gretton et al. (2008), two matrix-free
            passes in all (asymptotic level).
        num_features: R, random frequencies per kernel and variable with features.
        progress_bar: show progress on stderr (cyclic and features); None shows it from 5000 pairs on with the
            exact kernel (cyclic), from 10^5 with features.
        block_size: rows per block of the matrix-free passes.
        dense_max: largest n for which Gram matrices are formed.

    Returns:
        HypothesisTestResult: statistic, p-value, the null statistics (permutation or features), the kernels used
        and ``method`` (an AggregatedTestResult for an aggregated test).

    Raises:
        TypeError: for RowShards with a method other than ``"features"``, or ``method="features"`` with a kernel
            that has no spectral measure.
        ValueError: for unpaired inputs, too few points, an unknown method, a missing key, n_permutations or
            num_features < 1, a degenerate Gamma null (a constant sample), or an aggregated test with
            ``method="gamma"``.

    Examples:
        >>> import jax, numpy as np, bayeskern as bk
        >>> rng = np.random.default_rng(0)
        >>> x = rng.uniform(-2, 2, (200, 1))
        >>> y = x**2 + 0.2 * rng.standard_normal((200, 1))          # dependent, uncorrelated
        >>> bk.hsic_test(x, y, key=jax.random.key(0), n_permutations=200).reject(0.05)
        True
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    distributed = isinstance(X, RowShards) or isinstance(Y, RowShards)
    if distributed:
        if method != "features":
            raise TypeError(f"hsic_test with method={method!r} takes X and Y on one process, got a RowShards: pass "
                            "method='features' for the test on rows spread over processes")
        check_same_layout(X, Y, "X and Y")
        X, Y = gather_rows(X), gather_rows(Y)
    if key is not None:
        check_key(key)
    n_permutations = check_count(n_permutations, "n_permutations")
    num_features = check_count(num_features, "num_features")
    block_size, dense_max = check_count(block_size, "block_size"), check_count(dense_max, "dense_max", 0)
    kx, ky = _default_kernels(X, Y, kx, ky, key)
    collections = None
    if isinstance(kx, KernelCollection) or isinstance(ky, KernelCollection):
        if method == "gamma":
            raise ValueError("an aggregated test (kx or ky 'bayes' or a KernelCollection) needs a permutation or "
                             "feature null, not method='gamma'")
        collections = tuple(k if isinstance(k, KernelCollection) else KernelCollection.single(k) for k in (kx, ky))
        kx, ky = collections[0].kernels[0], collections[1].kernels[0]
    X, Y = _prepare(X, Y, kx, ky, 6 if method == "gamma" else 2)
    n = X.shape[0]
    cx, cy = collections or (KernelCollection.single(kx), KernelCollection.single(ky))
    if method != "gamma":
        method = choose_method(method, n, cx.kernels + cy.kernels, n_permutations, "hsic")
    if method in ("cyclic", "features"):
        if key is None:
            raise ValueError("hsic_test with a permutation null needs a PRNG key: pass key=jax.random.key(seed)")
        layout = cyclic_layout(n, n_permutations, key, reflections=method == "cyclic")
        if method == "cyclic":
            stats = hsic_cyclic_statistics(cx.kernels, cy.kernels, X, Y, layout, progress_bar)
        else:
            stats = hsic_feature_statistics(cx.kernels, cy.kernels, X, Y, layout,
                                            jax.random.fold_in(key, _FEATURE_STREAM), num_features, progress_bar,
                                            distributed)
        if collections is None:
            observed, null = float(stats[0, 0]), stats[1:, 0]
            return HypothesisTestResult(observed, permutation_p_value(observed, null), method, null, (kx, ky))
        return _aggregated_result(cx, cy, stats, method)
    if method == "gamma":
        stat, shape, scale = _gamma_parameters(kx, ky, X, Y, block_size)
        if not (float(shape) > 0 and float(scale) > 0):
            raise ValueError("hsic_test(method='gamma'): degenerate null moments (constant X or Y?)")
        p_value = float(gammaincc(shape, stat / scale))
        return HypothesisTestResult(float(stat), p_value, "gamma", None, (kx, ky))

    if key is None:
        raise ValueError("hsic_test(method='permutation') needs a PRNG key: pass key=jax.random.key(seed)")
    perms = _identity_and_permutations(key, n, n_permutations)
    if collections is not None:
        return _aggregated(*collections, X, Y, perms, dense_max, block_size)
    if n <= dense_max:
        stats = _null_dense(kx, ky, X, Y, perms, max(1, 2**24 // n**2))
    else:
        stats = _null_matrix_free(kx, ky, X, Y, perms, block_size)
    stats = np.asarray(stats)
    observed, null = float(stats[0]), stats[1:]
    return HypothesisTestResult(observed, permutation_p_value(observed, null), "permutation", null, (kx, ky))


@partial(jax.jit, static_argnums=(1, 2))
def _identity_and_permutations(key, n, count):
    """(count + 1, n): the identity first (observed and null share arithmetic), then ``count`` random permutations."""
    perms = jax.vmap(lambda k: jax.random.permutation(k, n))(jax.random.split(key, count))
    return jnp.concatenate([jnp.arange(n)[None, :], perms])


def _aggregated(cx, cy, X, Y, perms, dense_max, block_size):
    """The aggregated test over every pair of the two collections, weights multiplied."""
    n = X.shape[0]
    if n <= dense_max:
        batch = max(1, 2**24 // (n**2 * len(cy)))
        stats = np.asarray(_null_dense_collection(cx.kernels, cy.kernels, X, Y, perms, batch))
        stats = stats.reshape(stats.shape[0], -1)
    else:
        stats = np.stack([np.asarray(_null_matrix_free(a, b, X, Y, perms, block_size))
                          for a in cx.kernels for b in cy.kernels], axis=1)
    return _aggregated_result(cx, cy, stats, "permutation")


def _aggregated_result(cx, cy, stats, method):
    """The aggregated result from (B + 1, Kx Ky) statistics of every kernel pair (row 0 observed)."""
    weights = np.outer(cx.weights, cy.weights).ravel()
    pairs = tuple((a, b) for a in cx.kernels for b in cy.kernels)
    labels = tuple(f"x: {a}; y: {b}" for a in cx.labels for b in cy.labels)
    aggregated, p = aggregate_statistics(stats, weights)
    observed, null = float(aggregated[0]), aggregated[1:]
    return AggregatedTestResult(observed, permutation_p_value(observed, null), method, null, pairs, weights,
                                stats[0], p[0], labels)
