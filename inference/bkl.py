"""Bayesian kernel learning (BKL): the type-II ML SE kernel of a (pooled) sample, for MMD and HSIC tests."""

import jax.numpy as jnp

from bayeskern._validation import as_points, check_same_dim, num_distinct_rows
from bayeskern.bke.inducing import hold_out_inducing, span_coordinates
from bayeskern.kernels import RBF

from .type2 import Type2Result, fit_type2

__all__ = ["bkl_fit", "bkl_kernel"]


def bkl_fit(X, Y=None, *, key, m: int | None = None, tau2=1.0, **fit_kwargs) -> Type2Result:
    """Type-II ML of the BKE pseudolikelihood on the pooled sample [X; Y] (the fit behind :func:`bkl_kernel`).

    The labels are not used, so a permutation test with the learned kernel keeps its level. An isotropic fit runs
    in the pooled sample's affine span (:func:`bayeskern.bke.span_coordinates`), so constant columns and low-rank
    data are accepted; repeated rows are too (:func:`bayeskern.bke.hold_out_inducing`; when copies of the inducing
    points leave the likelihood points, a random subset of those of one of eight sizes per octave is fitted on, so
    that data sets of one size share the compiled fit).

    Args:
        X: (n, D) sample.
        Y: optional (m, D) second sample, pooled with X.
        key: PRNG key: ``m`` inducing points are held out of the pooled sample at random.
        m: number of inducing points (default ``min(100, max(D, N // 10))``, D the dimension of the span).
        tau2: the fixed noise variance.
        **fit_kwargs: passed to :func:`fit_type2`.

    Returns:
        Type2Result: the fit.

    Raises:
        TypeError: for a key that is not a PRNG key or data that are not real numbers.
        ValueError: for non-finite data, samples of different dimensions, a sample of one repeated point or m
            outside [1, number of distinct points).
        RuntimeError: when float64 is off.
    """
    pooled = as_points(X, "X")
    if Y is not None:
        Y = as_points(Y, "Y")
        check_same_dim(pooled, Y, "X and Y")
        pooled = jnp.concatenate([pooled, Y])
    if not fit_kwargs.get("ard", False):   # an isotropic kernel sees only distances: fit in the sample's own span
        pooled = span_coordinates(pooled)
    X_rest, Z = hold_out_inducing(pooled, key, m, common_size=True)
    return fit_type2(X_rest, Z, tau2, **fit_kwargs)


def bkl_kernel(X, Y=None, *, key, m: int | None = None, tau2=1.0, **fit_kwargs) -> RBF:
    """The BKL kernel RBF(theta_hat) of the pooled, unlabelled sample: a drop-in for the median heuristic.

    A kernel rule for :func:`bayeskern.mmd_test` and :func:`bayeskern.hsic_test`: type-II maximum likelihood of
    the BKE pseudolikelihood on [X; Y] with m held-out inducing points (see :func:`bkl_fit`). Labels are not used,
    so a test with this kernel keeps its level. A sample of one repeated point has no scale to learn and gets
    RBF(1.0) (every kernel gives it the same statistics).

    Args:
        X: (n, d) sample.
        Y: optional (m, d) second sample, pooled with X.
        key: PRNG key for the held-out inducing points.
        m: number of inducing points (default ``bayeskern.bke.default_num_inducing``).
        tau2: the fixed noise variance.
        **fit_kwargs: passed to :func:`fit_type2` (e.g. ``grid``).

    Returns:
        RBF: the kernel with the type-II lengthscale.

    Raises:
        TypeError: for a key that is not a PRNG key or data that are not real numbers.
        ValueError: for non-finite data, samples of different dimensions or m outside [D, N).
        RuntimeError: when float64 is off.

    Examples:
        >>> import jax, bayeskern as bk
        >>> from bayeskern.inference import bkl_kernel
        >>> XP, XQ = bk.datasets.normal_vs_laplace(100, seed=0)
        >>> kernel = bkl_kernel(XP, XQ, key=jax.random.key(0), m=10)
        >>> type(kernel).__name__, bool(float(kernel.lengthscale) > 0)
        ('RBF', True)
    """
    pooled = as_points(X, "X") if Y is None else jnp.concatenate([as_points(X, "X"), as_points(Y, "Y")])
    if num_distinct_rows(pooled) < 2:   # a sample of one point: every kernel gives the same (zero) statistics
        return RBF(1.0)
    return bkl_fit(X, Y, key=key, m=m, tau2=tau2, **fit_kwargs).kernel()

