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

    A constant column keeps scale 1.

    Attributes:
        x_mean: (d_x,) feature means.
        x_scale: (d_x,) feature standard deviations.
        y_mean: (d_y,) response means, or None for discrete labels (left as they are).
        y_scale: (d_y,) response standard deviations, or None for labels.
    """

    x_mean: jax.Array
    x_scale: jax.Array
    y_mean: jax.Array | None
    y_scale: jax.Array | None

    def transform_x(self, x):
        """Features in your units -> standardised units.

        Args:
            x: (n, d_x) features, or a RowShards (which stays one).

        Returns:
            The standardised features, shaped like x.

        Raises:
            TypeError: for data that are not real numbers.
            ValueError: for non-finite data.
        """
        if isinstance(x, RowShards):
            return x.with_values(self.transform_x(x.values))
        return (as_finite_array(x, "x") - self.x_mean) / self.x_scale

    def transform(self, x, y):
        """Data in your units -> standardised units (labels are left as they are).

        Args:
            x: (n, d_x) features, or a RowShards.
            y: (n, d_y) responses or (n,) labels, or a RowShards.

        Returns:
            (x, y) standardised.

        Raises:
            TypeError: for data that are not real numbers.
            ValueError: for non-finite data.
        """
        if self.y_mean is None:
            return self.transform_x(x), y
        if isinstance(y, RowShards):
            return self.transform_x(x), y.with_values((y.values - self.y_mean) / self.y_scale)
        return self.transform_x(x), (as_finite_array(y, "y") - self.y_mean) / self.y_scale

    def inverse(self, x, y):
        """Standardised units -> your units.

        Args:
            x: (m, d_x) standardised features.
            y: (m, d_y) standardised responses, or (m,) labels.

        Returns:
            (x, y) in your units.

        Raises:
            TypeError: for data that are not real numbers.
            ValueError: for non-finite data.
        """
        x = as_finite_array(x, "x") * self.x_scale + self.x_mean
        return x, y if self.y_mean is None else y * self.y_scale + self.y_mean

    @classmethod
    def identity(cls, d_x: int, d_y: int | None):
        """The map that leaves data unchanged (``standardise=False``).

        Args:
            d_x: feature dimension.
            d_y: response dimension, or None for labels.

        Returns:
            Standardiser: zero means and unit scales.

        Raises:
            TypeError: for dimensions that are not integers.
            ValueError: for negative dimensions.
        """
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
    """Column means and standard deviations of training data.

    Args:
        x: (n, d_x) features, or a RowShards.
        y: (n, d_y) responses (ignored if discrete), or a RowShards.
        discrete: whether y holds labels (left unstandardised).

    Returns:
        Standardiser: the fitted affine maps.

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for non-finite or empty data, or arrays that are not (n,) or (n, d).
    """
    y_stats = (None, None) if discrete else _moments(y, "y")
    return Standardiser(*_moments(x, "x"), *y_stats)
