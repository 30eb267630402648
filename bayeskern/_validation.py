"""Argument checks shared by the public API.

Shape checks always run. Value checks (NaN/inf, positivity, integer labels)
run only on concrete arrays: inside ``jit``/``vmap``/``grad`` the values are
tracers and cannot be inspected, so traced code relies on the caller having
validated its data once, outside the transformation. Concrete data stay
concrete through the conversions here even while a function is being traced
(e.g. the data a NumPyro model closes over while NUTS compiles it), so their
value checks run there too.
"""

import functools

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
    "as_real_array",
    "as_finite_array",
    "check_count",
    "check_key",
    "as_matrix",
    "check_covariance",
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


def _real(x, name: str) -> np.ndarray:
    """``x`` as a NumPy array of real numbers, or a TypeError naming ``name`` (strings, booleans, complex)."""
    arr = np.asarray(x)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must be a real number, got {x!r}")
    return arr


def check_positive(x, name: str):
    """Raise ``ValueError`` unless every entry of a concrete ``x`` is finite and > 0."""
    if is_concrete(x):
        arr = _real(x, name)
        if arr.size == 0 or not np.all(np.isfinite(arr)) or not np.all(arr > 0):
            raise ValueError(f"{name} must be positive and finite, got {arr.tolist()}")
    return x


def check_nonnegative(x, name: str):
    """Raise ``ValueError`` unless every entry of a concrete ``x`` is finite and >= 0."""
    if is_concrete(x):
        arr = _real(x, name)
        if not np.all(np.isfinite(arr)) or not np.all(arr >= 0):
            raise ValueError(f"{name} must be non-negative and finite, got {arr.tolist()}")
    return x


def _concrete_stays_concrete(convert):
    """Run the conversion ``convert(x, ...)`` eagerly when ``x`` holds no tracer, even inside a trace: the converted
    array is then concrete, so the value checks that follow still see its values."""
    @functools.wraps(convert)
    def wrapped(x, *args, **kwargs):
        if not is_concrete(x):
            return convert(x, *args, **kwargs)
        with jax.ensure_compile_time_eval():
            return convert(x, *args, **kwargs)

    return wrapped


@_concrete_stays_concrete
def as_real_array(x, name: str):
    """``x`` as a JAX array of real numbers (integer, boolean or float), or a ``TypeError`` / ``ValueError`` naming
    ``name``: strings, objects and complex numbers are refused (a complex part is never dropped silently), and so
    are ragged nested lists."""
    if type(x).__module__.startswith("pandas"):
        x = _pandas_values(x, name)
    if not isinstance(x, (jax.Array, np.ndarray)):
        try:
            x = np.asarray(x)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{name} is not a rectangular array (ragged rows or mixed types): {err}") from None
    kind = np.dtype(x.dtype).kind if not jnp.issubdtype(x.dtype, jax.dtypes.extended) else "V"
    if kind == "c":
        raise TypeError(f"{name} must be real, got complex dtype {x.dtype} (pass x.real if the imaginary part is 0)")
    if kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {x.dtype}")
    # a NumPy array goes to the device by a copy; jnp.asarray would compile a program for each new shape
    return jax.device_put(x) if isinstance(x, np.ndarray) else jnp.asarray(x)


def _pandas_values(x, name: str):
    """The values of a pandas Series or DataFrame as a NumPy array: a frame's columns that hold text, dates or
    categories named in a ``TypeError``; nullable and Arrow-backed numbers as their NumPy type (float with NaN where
    missing)."""
    if hasattr(x, "columns"):
        text = [str(c) for c, t in x.dtypes.items() if getattr(t, "kind", "O") not in "biuf"]
        if text:
            raise TypeError(f"{name} has columns that do not hold real numbers: {text}; select its numeric columns")
        dtypes = list(x.dtypes) or [np.dtype(float)]   # a frame without columns: refused below, by its shape
    elif getattr(x.dtype, "kind", "O") in "biuf":
        dtypes = [x.dtype]
    else:
        return x.to_numpy()   # refused below, by its dtype
    dtype = np.result_type(*(getattr(t, "numpy_dtype", t) for t in dtypes))
    return x.to_numpy(dtype=np.float64 if bool(np.any(x.isna())) else dtype, na_value=np.nan)


def as_finite_array(x, name: str):
    """:func:`as_real_array`, then NaN and inf refused (when concrete), naming ``name``."""
    return check_finite(as_real_array(x, name), name)


def check_count(value, name: str, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``, or a ``TypeError`` (not an integer) / ``ValueError`` (too small)."""
    if isinstance(value, jax.Array) and value.ndim == 0 and jnp.issubdtype(value.dtype, jnp.integer) \
            and is_concrete(value):
        value = int(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum} (an integer), got {value}")
    return int(value)


def check_key(key, name: str = "key"):
    """Raise ``TypeError`` unless ``key`` is a JAX PRNG key: ``jax.random.key(seed)`` (or a legacy uint32 (2,)
    ``jax.random.PRNGKey``)."""
    dtype = getattr(key, "dtype", None)
    typed = dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key)
    legacy = dtype == jnp.uint32 and getattr(key, "shape", None) == (2,)
    if not (typed or legacy):
        raise TypeError(f"{name} must be a JAX PRNG key such as jax.random.key(0), got {key!r}")
    return key


@_concrete_stays_concrete
def as_matrix(A, name: str, shape: tuple = (None, None), *, square: bool = False):
    """``A`` as a finite float matrix (default float: float64 with x64 on, never a float32 solve by accident) of
    ``shape`` (None entries free; a 1-D ``shape`` asks for a vector), square if asked; ``ValueError``/``TypeError``
    naming ``name``."""
    A = as_real_array(A, name)
    if square and A.ndim == 2 and A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {A.shape}")
    if A.ndim != len(shape) or any(want is not None and got != want for got, want in zip(A.shape, shape)):
        wanted = "(" + ", ".join("*" if w is None else str(w) for w in shape) + ("," if len(shape) == 1 else "") + ")"
        raise ValueError(f"{name} must have shape {wanted}, got {A.shape}")
    if A.dtype != jnp.result_type(float):
        A = A.astype(jnp.result_type(float))
    return check_finite(A, name)


def check_covariance(C, name: str, d: int):
    """``C`` as a (d, d) symmetric positive semidefinite float matrix (eigenvalues >= -1e-10 x the largest)."""
    C = as_matrix(C, name, (d, d))
    if is_concrete(C):
        arr = np.asarray(C)
        scale = max(np.abs(arr).max(), np.finfo(arr.dtype).tiny)
        if not np.allclose(arr, arr.T, rtol=1e-10, atol=1e-12 * scale):
            raise ValueError(f"{name} must be symmetric")
        eig = np.linalg.eigvalsh(arr)
        if eig.min() < -1e-10 * max(eig.max(), 0.0) or eig.max() < 0:
            raise ValueError(f"{name} is not positive semidefinite (smallest eigenvalue {eig.min():.3g})")
    return C


@_concrete_stays_concrete
def as_points(X, name: str = "X"):
    """Return ``X`` as a float array of shape (n, d); a 1-D array is n points in 1-D."""
    X = as_real_array(X, name)
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


@_concrete_stays_concrete
def as_labels(y, name: str = "y"):
    """Return discrete labels as an integer array of shape (n,).

    Accepts integer or boolean arrays of shape (n,) or (n, 1); float arrays only
    when concrete and integer-valued (e.g. labels read from a CSV file).
    """
    y = as_real_array(y, name)
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
            return jax.device_put(arr.astype(np.int64))
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


def row_keys(A) -> np.ndarray:
    """One hashable key per row of a 2-D array (exact float equality; -0.0 equals 0.0), so membership tests and
    counts of distinct rows cost O(n log n), not O(n^2)."""
    A = np.ascontiguousarray(np.asarray(A, dtype=np.float64) + 0.0)  # + 0.0 maps -0.0 to 0.0
    return A.view(np.dtype((np.void, A.dtype.itemsize * A.shape[1]))).ravel()


def num_distinct_rows(X) -> int:
    """The number of distinct rows of a checked (N, D) array (exact equality)."""
    return len(np.unique(row_keys(X)))
