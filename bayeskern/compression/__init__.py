"""Conditional distribution compression through kernel embeddings (Broadbent et al. 2025).

Algorithms (:func:`jkh`, :func:`jkip`, :func:`ackh`, :func:`ackip`) return a :class:`CompressionResult`;
metrics (:func:`jmmd2`, :func:`amcmd2`, :func:`kcd2_tower`) judge it; :mod:`.exact_gaussian` gives the exact
Gaussian setting; :mod:`.data` the generated data sets and test functions.
"""

from . import data, exact_gaussian
from .compress import CompressionProblem, ackh, ackip, compression_problem, jkh, jkip
from .kcme import class_probabilities, conditional_expectation, kcme_weights, select_lambda, validation_loss
from .metrics import amcmd, amcmd2, amcmd2_gaussian_truth, jmmd2, kcd2_tower, mmd2_biased
from .objectives import ackip_objective, data_blocks, jkip_objective
from .result import CompressionResult, load_result
from .standardise import Standardiser, fit_standardiser

__all__ = [
    "data", "exact_gaussian",
    "jkh", "jkip", "ackh", "ackip", "CompressionResult", "load_result",
    "compression_problem", "CompressionProblem",
    "kcme_weights", "conditional_expectation", "class_probabilities", "validation_loss", "select_lambda",
    "jmmd2", "amcmd2", "amcmd", "kcd2_tower", "amcmd2_gaussian_truth", "mmd2_biased",
    "ackip_objective", "jkip_objective", "data_blocks",
    "Standardiser", "fit_standardiser",
]
