"""Bayesian kernel learning (BKL): the type-II ML SE kernel of a (pooled) sample, for MMD and HSIC tests."""

import jax.numpy as jnp

from bayeskern._validation import as_points, check_same_dim
from bayeskern.bke.inducing import hold_out_inducing
from bayeskern.kernels import RBF

from .type2 import Type2Result, fit_type2

__all__ = ["bkl_fit", "bkl_kernel"]


def bkl_fit(X, Y=None, *, key, m: int | None = None, tau2=1.0, **fit_kwargs) -> Type2Result:
    """Type-II ML of the BKE pseudolikelihood on the pooled sample [X; Y] (spec bke.md §11-12).

    ``m`` inducing points (default ``min(100, max(D, N // 10))``) are held out of the pooled
    sample at random with ``key``; ``tau2`` is fixed (default 1). The labels are not used, so a
    permutation test with the learned kernel keeps its level. Other options go to ``fit_type2``.
    """
    pooled = as_points(X, "X")
    if Y is not None:
        Y = as_points(Y, "Y")
        check_same_dim(pooled, Y, "X and Y")
        pooled = jnp.concatenate([pooled, Y])
    X_rest, Z = hold_out_inducing(pooled, key, m)
    return fit_type2(X_rest, Z, tau2, **fit_kwargs)


def bkl_kernel(X, Y=None, *, key, m: int | None = None, tau2=1.0, **fit_kwargs) -> RBF:
    """The BKL kernel RBF(theta_hat) of the pooled sample: a drop-in for the median heuristic."""
    return bkl_fit(X, Y, key=key, m=m, tau2=tau2, **fit_kwargs).kernel()

