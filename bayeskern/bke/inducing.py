"""Inducing points for the BKE pseudolikelihood (spec bke.md §12)."""

import jax
import numpy as np

from .._validation import as_points

__all__ = ["default_num_inducing", "hold_out_inducing"]


def default_num_inducing(N: int, D: int) -> int:
    """m = min(100, max(D, floor(N / 10))) for a sample of N points in D dimensions."""
    return min(100, max(D, N // 10))


def hold_out_inducing(X, key, m: int | None = None):
    """Split X (N, D) into likelihood points and m held-out inducing points, uniformly at random.

    Returns ``(X_rest, Z)`` with shapes (N - m, D) and (m, D); ``m`` defaults to
    :func:`default_num_inducing`. The full X stays available for embedding posteriors and tests.
    """
    X = as_points(X, "X")
    N, D = X.shape
    m = default_num_inducing(N, D) if m is None else int(m)
    if m < D:
        raise ValueError(f"m must be at least D = {D} inducing points, got m = {m}")
    if N - m < 1:
        raise ValueError(f"X has {N} points: too few to hold out m = {m} inducing points and keep one for the likelihood")
    perm = jax.random.permutation(key, N)
    Z = X[perm[:m]]
    if len(np.unique(np.asarray(Z), axis=0)) < m:
        raise ValueError("X has duplicated points among the chosen inducing points; deduplicate X or pass Z explicitly")
    return X[perm[m:]], Z
