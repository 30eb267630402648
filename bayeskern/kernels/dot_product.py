"""Dot-product kernels on R^d."""

import jax.numpy as jnp

from .._validation import as_finite_array, check_count, check_nonnegative
from .base import Kernel

__all__ = ["Linear", "Polynomial"]


class Linear(Kernel):
    """Linear kernel k(x, y) = x . y (no hyperparameters)."""

    def evaluate(self, X, Y):
        return X @ Y.T

    def evaluate_paired(self, X, Y):
        return jnp.sum(X * Y, axis=-1)


class Polynomial(Kernel):
    """Polynomial kernel k(x, y) = (x . y + offset)^degree.

    Args:
        degree: integer degree >= 1 (static structure).
        offset: offset >= 0 (a pytree leaf).

    Attributes:
        degree: the integer degree.
        offset: () float array, the offset.

    Raises:
        TypeError: for a degree that is not an integer.
        ValueError: for a degree below 1 or an offset that is negative or not finite.
    """

    _leaves = ("offset",)
    _static = ("degree",)

    def __init__(self, degree: int = 2, offset=1.0):
        check_count(degree, "degree")
        self.degree = degree
        offset = as_finite_array(offset, "Polynomial offset").astype(jnp.result_type(float))
        self.offset = check_nonnegative(offset, "Polynomial offset")

    def evaluate(self, X, Y):
        return (X @ Y.T + self.offset) ** self.degree

    def evaluate_paired(self, X, Y):
        return (jnp.sum(X * Y, axis=-1) + self.offset) ** self.degree
