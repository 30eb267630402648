"""Argument checks shared by the public API.

Shape checks always run. Value checks (NaN/inf, positivity, integer labels)
run only on concrete arrays: inside ``jit``/``vmap``/``grad`` the values are
tracers and cannot be inspected, so traced code relies on the caller having
validated its data once, outside the transformation.
"""

import jax
import jax.numpy as jnp
import numpy as np

from .sharding import RowShards

__all__ = [
    "is_concrete",
    "as_points",
    "as_labels",
    "check_finite",
    "check_positive",
    "check_nonnegative",
    "check_same_length",
    "check_same_dim",
    "check_min_points",
    "num_points",
]


def is_concrete(x) -> bool:
    """True when no leaf of ``x`` is a JAX tracer."""
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x))


def check_finite(x, name: str):
    """Raise ``ValueError`` if a concrete ``x`` holds NaN or inf."""
    if not is_concrete(x):
        return x
    if isinstance(x, jax.Array) and not x.is_fully_addressable:  # rows spread over processes: count on devices
        with jax.ensure_compile_time_eval():  # also when called while a model is being traced
            bad = int(_count_nonfinite(x)) if jnp.issubdtype(x.dtype, jnp.inexact) else 0
        if bad:
            raise ValueError(f"{name} contains {bad} non-finite value(s) (NaN or inf)")
    else:
        arr = np.asarray(x)
        if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
            bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
            raise ValueError(f"{name} contains {bad} non-finite value(s) (NaN or inf)")
    return x


@jax.jit
def _count_nonfinite(x):
    return jnp.sum(~jnp.isfinite(x))


def check_positive(x, name: str):
    """Raise ``ValueError`` unless every entry of a concrete ``x`` is finite and > 0."""
    if is_concrete(x):
        arr = np.asarray(x)
        if arr.size == 0 or not np.all(np.isfinite(arr)) or not np.all(arr > 0):
            raise ValueError(f"{name} must be positive and finite, got {arr.tolist()}")
    return x


def check_nonnegative(x, name: str):
    """Raise ``ValueError`` unless every entry of a concrete ``x`` is finite and >= 0."""
    if is_concrete(x):
        arr = np.asarray(x)
        if not np.all(np.isfinite(arr)) or not np.all(arr >= 0):
            raise ValueError(f"{name} must be non-negative and finite, got {arr.tolist()}")
    return x


def as_points(X, name: str = "X"):
    """Return ``X`` as a float array of shape (n, d); a 1-D array is n points in 1-D."""
    X = jnp.asarray(X)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"{name} must have shape (n, d) or (n,), got shape {X.shape}")
    if X.shape[0] == 0:
        raise ValueError(f"{name} is empty: it needs at least one point")
    if X.shape[1] == 0:
        raise ValueError(f"{name} has shape {X.shape}: points need at least one coordinate")
    if not jnp.issubdtype(X.dtype, jnp.floating):
        X = X.astype(jnp.result_type(float))
    return check_finite(X, name)


def as_labels(y, name: str = "y"):
    """Return discrete labels as an integer array of shape (n,).

    Accepts integer or boolean arrays of shape (n,) or (n, 1); float arrays only
    when concrete and integer-valued (e.g. labels read from a CSV file).
    """
    y = jnp.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{name} must be labels of shape (n,) or (n, 1), got shape {y.shape}")
    if y.shape[0] == 0:
        raise ValueError(f"{name} is empty: it needs at least one label")
    if jnp.issubdtype(y.dtype, jnp.integer):
        return y
    if y.dtype == jnp.bool_:
        return y.astype(jnp.int32)
    if jnp.issubdtype(y.dtype, jnp.floating) and is_concrete(y):
        arr = np.asarray(y)
        if np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            return jnp.asarray(arr.astype(np.int64))
    raise ValueError(
        f"{name} must hold integer class labels for the indicator kernel, "
        f"got dtype {y.dtype} with non-integer (or traced) values"
    )


def num_points(X) -> int:
    """Leading dimension shared by all leaves of a data pytree (e.g. a pair ``(X, Y)``); a
    :class:`~bayeskern.sharding.RowShards` counts its real rows."""
    sizes = {leaf.num_rows if isinstance(leaf, RowShards) else leaf.shape[0]
             for leaf in jax.tree.leaves(X, is_leaf=lambda a: isinstance(a, RowShards))}
    if len(sizes) != 1:
        raise ValueError(f"the parts of a paired input must have equal lengths, got {sorted(sizes)}")
    return sizes.pop()


def check_min_points(X, minimum: int, name: str):
    """Raise ``ValueError`` if ``X`` has fewer than ``minimum`` points."""
    n = num_points(X)
    if n < minimum:
        raise ValueError(f"{name} needs at least {minimum} points, got {n}")
    return X


def check_same_length(X, Y, names: str):
    """Raise ``ValueError`` unless ``X`` and ``Y`` hold the same number of points."""
    nx, ny = num_points(X), num_points(Y)
    if nx != ny:
        raise ValueError(f"{names} must have the same number of points, got {nx} and {ny}")


def check_same_dim(X, Y, names: str):
    """Raise ``ValueError`` unless the point dimensions (all but the leading axis) agree."""
    sx = [leaf.shape[1:] for leaf in jax.tree.leaves(X)]
    sy = [leaf.shape[1:] for leaf in jax.tree.leaves(Y)]
    if sx != sy:
        raise ValueError(f"{names} must have points of the same dimension, got {sx} and {sy}")
