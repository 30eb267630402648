"""The result of a compression run: the compressed set, how it was obtained, and predictions from it."""

import dataclasses

import jax.numpy as jnp
import numpy as np

from .._validation import as_points
from ..conditional import ConditionalExpectation, outcome_values, weighted_expectation
from ..fitted import fitted, load_as, static
from ..kernels.base import Kernel
from .kcme import class_probabilities, kcme_weights
from .standardise import Standardiser

__all__ = ["CompressionResult", "load_result"]


@fitted
class CompressionResult:
    """A compressed set of m labelled pairs.

    x, y: the set in standardised units (m, d_x), (m, d_y) or (m,) labels — the units of the kernels;
    x_original, y_original: the same set in the user's units; indices: positions in the data for pool
    herding (None when the points were optimised); objective: the trace of the method's objective
    (per step for KIP, per added pair for herding); lam_c: the compressed-set ridge used by the KCME
    (and by ACKH/ACKIP objectives); timings: seconds per phase.
    """

    method: str = static()
    x: np.ndarray
    y: np.ndarray
    kernel_x: Kernel
    kernel_y: Kernel
    standardiser: Standardiser
    lam_c: float
    objective: np.ndarray
    indices: np.ndarray | None = None
    timings: dict = dataclasses.field(default_factory=dict)

    @property
    def m(self) -> int:
        return int(self.x.shape[0])

    @property
    def x_original(self) -> np.ndarray:
        return np.asarray(self.standardiser.inverse(self.x, self.y)[0])

    @property
    def y_original(self) -> np.ndarray:
        return np.asarray(self.standardiser.inverse(self.x, self.y)[1])

    def weights(self, x_query):
        """KCME coefficients alpha(x) = (K_CC + m lam_C I)^{-1} k_C(x) at queries in the user's units: (m, N)."""
        xq = self.standardiser.transform_x(as_points(x_query, "x_query"))
        return kcme_weights(self.x, xq, self.kernel_x, self.lam_c)

    def conditional_expectation(self, x_query, f=None) -> ConditionalExpectation:
        """E[f(Y) | X = x] from the compressed set (the KCME, linear: ``mass`` is sum_j alpha_j(x)) at queries
        x_query (N, d_x) in the user's units. f: a function of the set's responses in the user's units (m, ...)
        -> (m, ...), its values (m, ...) on them, or None (the identity). ``mean`` has shape (N, ...)."""
        values = outcome_values(f, jnp.asarray(self.y_original), self.m, jnp.result_type(float))
        return weighted_expectation(self.weights(x_query).T, values)

    def class_probabilities(self, x_query, n_classes: int):
        """Clip-normalised class probabilities (N, C) (indicator kernel)."""
        return class_probabilities(self.y, self.weights(x_query), n_classes)


def load_result(path) -> CompressionResult:
    """Read a result saved with ``result.save(path)`` (an alias of :func:`bayeskern.load`)."""
    return load_as(path, CompressionResult)
