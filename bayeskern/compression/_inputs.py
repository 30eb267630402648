"""Validation of labelled data and kernel defaults shared by the compression functions."""

import jax.numpy as jnp
import numpy as np

from .._validation import as_labels, as_points, check_count, check_same_length
from ..kernels import RBF, Indicator, median_heuristic
from ..kernels.base import Kernel
from ..sharding import RowShards, check_same_layout

RESPONSES = ("continuous", "indicator")


def response_kind(y, kernel_y: Kernel | None, response: str | None) -> str:
    """'indicator' for class labels, 'continuous' otherwise (explicit argument, then kernel, then dtype)."""
    if response is not None:
        if response not in RESPONSES:
            raise ValueError(f"response must be one of {RESPONSES}, got {response!r}")
        return response
    if isinstance(kernel_y, Indicator):
        return "indicator"
    if kernel_y is not None:
        return "continuous"
    dtype = y.values.dtype if isinstance(y, RowShards) else np.asarray(y).dtype
    return "indicator" if (np.issubdtype(dtype, np.integer) or dtype == np.bool_) else "continuous"


def labelled(x, y, kind: str, names=("x", "y")):
    """x as (n, d_x) floats; y as (n, d_y) floats or (n,) integer labels; lengths checked. Row-sharded x and y
    (:class:`~bayeskern.sharding.RowShards`) are checked the same way and must share their layout."""
    if isinstance(x, RowShards) or isinstance(y, RowShards):
        check_same_layout(x, y, f"{names[0]} and {names[1]}")
        xv, yv = labelled(x.values, y.values, kind, names)
        return x.with_values(xv), y.with_values(yv)
    x = as_points(x, names[0])
    y = as_labels(y, names[1]) if kind == "indicator" else as_points(y, names[1])
    check_same_length(x, y, f"{names[0]} and {names[1]}")
    return x, y


def rows_at(a, index):
    """Rows ``index`` of a plain array or of a RowShards (then gathered, replicated); traceable."""
    return a.take(index) if isinstance(a, RowShards) else a[index]


def default_kernels(x, y, kind: str, kernel_x, kernel_y, key=None):
    """RBF kernels with the median heuristic (l^2 = median squared distance / 2, on <= 1000 points)."""
    if kernel_x is None:
        kernel_x = RBF(median_heuristic(x, convention="sq", max_points=1000, key=key))
    if kernel_y is None:
        kernel_y = Indicator() if kind == "indicator" else RBF(median_heuristic(y, convention="sq", max_points=1000,
                                                                                key=key))
    if kind == "indicator" and not isinstance(kernel_y, Indicator):
        raise ValueError(f"discrete responses need the Indicator kernel_y, got {type(kernel_y).__name__}")
    return kernel_x, kernel_y


def check_lambda(lam, name: str) -> float:
    lam = float(lam)
    if not (np.isfinite(lam) and lam > 0):
        raise ValueError(f"{name} must be a positive finite number, got {lam}")
    return lam


def check_size(m, n: int) -> int:
    m = check_count(m, "m")
    if m >= n:
        raise ValueError(f"m must be smaller than the number of data points n = {n}, got m = {m}")
    return int(m)


def onehot(y, n_classes: int):
    return (y[:, None] == jnp.arange(n_classes)[None, :]).astype(jnp.result_type(float))
