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

    Attributes:
        method: ``"jkh"``, ``"jkip"``, ``"ackh"`` or ``"ackip"``.
        x: (m, d_x) the set's features in standardised units (the units of the kernels).
        y: (m, d_y) its responses in standardised units, or (m,) labels.
        kernel_x: the kernel on standardised features.
        kernel_y: the kernel on standardised responses.
        standardiser: the map between your units and the standardised ones.
        lam_c: the compressed-set ridge of the KCME (and of the ACKH/ACKIP objectives).
        objective: the trace of the method's objective (per step for KIP, per added pair for herding).
        indices: (m,) positions in the data for pool herding; None when the points were optimised.
        timings: seconds per phase.
        m: the size of the set.
        x_original: (m, d_x) the features in your units.
        y_original: the responses in your units.
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
        """The size of the set."""
        return int(self.x.shape[0])

    @property
    def x_original(self) -> np.ndarray:
        """(m, d_x) the set's features in your units."""
        return np.asarray(self.standardiser.inverse(self.x, self.y)[0])

    @property
    def y_original(self) -> np.ndarray:
        """(m, d_y) the set's responses in your units, or (m,) labels."""
        return np.asarray(self.standardiser.inverse(self.x, self.y)[1])

    def weights(self, x_query):
        """KCME coefficients alpha(x) = (K_CC + m lam_C I)^{-1} k_C(x) at queries in your units.

        Args:
            x_query: (N, d_x) query features in your units.

        Returns:
            (m, N) array, one column per query.

        Raises:
            TypeError: for queries that are not real numbers.
            ValueError: for non-finite queries or queries of another dimension.
        """
        xq = self.standardiser.transform_x(as_points(x_query, "x_query"))
        return kcme_weights(self.x, xq, self.kernel_x, self.lam_c)

    def conditional_expectation(self, x_query, f=None) -> ConditionalExpectation:
        """E[f(Y) | X = x] from the compressed set: the KCME, linear, so ``mass`` is sum_j alpha_j(x).

        Args:
            x_query: (N, d_x) query features in your units.
            f: a function of the set's responses in your units, (m, ...) -> (m, ...); its values (m, ...) on
                them; or None (the identity: the conditional mean).

        Returns:
            ConditionalExpectation: ``mean`` (N, ...), ``mass`` (N,), ``undefined`` all False.

        Raises:
            TypeError: for queries or values of f that are not real numbers.
            ValueError: for non-finite queries or values, or values of f of another length than m.
        """
        values = outcome_values(f, jnp.asarray(self.y_original), self.m, jnp.result_type(float))
        return weighted_expectation(self.weights(x_query).T, values)

    def class_probabilities(self, x_query, n_classes: int):
        """Clip-normalised class probabilities from a set with labels (indicator kernel).

        Args:
            x_query: (N, d_x) query features in your units.
            n_classes: the number of classes C.

        Returns:
            (N, C) array: the KCME's class masses, clipped at 0 and normalised per query.

        Raises:
            TypeError: for n_classes not an integer.
            ValueError: for non-finite queries, n_classes below the largest label + 1.
        """
        return class_probabilities(self.y, self.weights(x_query), n_classes)


def load_result(path) -> CompressionResult:
    """Read a result saved with ``result.save(path)``: :func:`bayeskern.load` that checks the class.

    Args:
        path: the ``.npz`` file.

    Returns:
        CompressionResult: the saved result.

    Raises:
        FileNotFoundError: when the file does not exist.
        FileFormatError: for a file holding anything else, or not a bayeskern save.
    """
    return load_as(path, CompressionResult)
