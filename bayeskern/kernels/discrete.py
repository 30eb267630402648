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

    def prepare(self, y, name):
        return as_labels(y, name)

    def prepare_pair(self, X, Y):
        return self.prepare(X, "X"), self.prepare(Y, "Y")

    def evaluate(self, a, b):
        return (a[:, None] == b[None, :]).astype(jnp.result_type(float))

    def evaluate_paired(self, a, b):
        return (a == b).astype(jnp.result_type(float))
