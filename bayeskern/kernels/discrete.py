"""Kernels on discrete labels."""

import jax.numpy as jnp

from .._validation import as_labels
from .base import Kernel

__all__ = ["Indicator"]


class Indicator(Kernel):
    """Indicator kernel k(a, b) = 1 if a == b else 0, on integer class labels of shape (n,) or (n, 1).

    Characteristic on a finite set of labels: the kernel for discrete responses in HSIC tests, JDL and
    compression.
    """

    def prepare(self, X, name: str = "X"):
        """Check one input of labels.

        Args:
            X: (n,) or (n, 1) integer or boolean labels (float arrays of whole numbers are accepted when concrete).
            name: the argument name that error messages use.

        Returns:
            (n,) integer array.

        Raises:
            TypeError: for data that are not real numbers.
            ValueError: for labels that are not whole numbers or not of shape (n,) or (n, 1).
        """
        return as_labels(X, name)

    def prepare_pair(self, X, Y):
        """Prepare two inputs of labels (labels have no dimension to compare).

        Args:
            X: (n,) or (n, 1) labels.
            Y: (m,) or (m, 1) labels.

        Returns:
            (X, Y) as (n,) and (m,) integer arrays.

        Raises:
            TypeError: for data that are not real numbers.
            ValueError: for labels that are not whole numbers or of another shape.
        """
        return self.prepare(X, "X"), self.prepare(Y, "Y")

    def evaluate(self, X, Y):
        return (X[:, None] == Y[None, :]).astype(jnp.result_type(float))

    def evaluate_paired(self, X, Y):
        return (X == Y).astype(jnp.result_type(float))
