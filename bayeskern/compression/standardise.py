"""Standardisation of labelled data: zero mean, unit s.d. per column."""

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_finite_array
from ..fitted import fitted
from ..sharding import RowShards

__all__ = ["Standardiser", "fit_standardiser"]


@fitted
class Standardiser:
    """Affine maps x -> (x - x_mean) / x_scale and, for continuous responses, y -> (y - y_mean) / y_scale.

    x_mean, x_scale: (d_x,); y_mean, y_scale: (d_y,), or None for discrete labels (left as they are).
    A constant column keeps scale 1.
    """

    x_mean: jax.Array
    x_scale: jax.Array
    y_mean: jax.Array | None
    y_scale: jax.Array | None

    def transform_x(self, x):
        """Features (n, d_x) in the user's units -> standardised units (a RowShards stays one)."""
        if isinstance(x, RowShards):
            return x.with_values(self.transform_x(x.values))
        return (x - self.x_mean) / self.x_scale

    def transform(self, x, y):
        """Data in the user's units -> standardised units."""
        if self.y_mean is None:
            return self.transform_x(x), y
        if isinstance(y, RowShards):
            return self.transform_x(x), y.with_values((y.values - self.y_mean) / self.y_scale)
        return self.transform_x(x), (y - self.y_mean) / self.y_scale

    def inverse(self, x, y):
        """Standardised units -> the user's units."""
        x = x * self.x_scale + self.x_mean
        return x, y if self.y_mean is None else y * self.y_scale + self.y_mean

    @classmethod
    def identity(cls, d_x: int, d_y: int | None):
        """The map that leaves data unchanged (``standardise=False``)."""
        y = (None, None) if d_y is None else (jnp.zeros(d_y), jnp.ones(d_y))
        return cls(jnp.zeros(d_x), jnp.ones(d_x), *y)


def _moments(a, name):
    if isinstance(a, RowShards):  # over the real rows, on the devices that hold them
        mean, sd = _masked_moments(a.values, a.mask)
    else:
        a = np.asarray(as_finite_array(a, name), dtype=np.float64)
        if a.ndim not in (1, 2) or a.shape[0] == 0:
            raise ValueError(f"{name} must be a non-empty array of shape (n,) or (n, d), got {a.shape}")
        mean, sd = a.mean(0), a.std(0)
    return jnp.asarray(mean), jnp.asarray(np.where(sd > 0, sd, 1.0))


@jax.jit
def _masked_moments(values, mask):
    w = mask.astype(values.dtype)[:, None]
    mean = jnp.sum(w * values, axis=0) / jnp.sum(w)
    return mean, jnp.sqrt(jnp.sum(w * (values - mean) ** 2, axis=0) / jnp.sum(w))


def fit_standardiser(x, y, *, discrete: bool) -> Standardiser:
    """Column means and standard deviations of training data x (n, d_x) and y (n, d_y) (y ignored if discrete)."""
    y_stats = (None, None) if discrete else _moments(y, "y")
    return Standardiser(*_moments(x, "x"), *y_stats)
