"""bayeskern: Bayesian kernel embeddings and kernel methods on JAX.

Float64 is opt-in, as in NumPyro: call ``bayeskern.enable_x64()`` once at program
start. Importing bayeskern changes no global JAX state.
"""

from . import datasets, kernels
from ._config import enable_x64, x64_enabled
from .embeddings import KernelEmbedding, mean_embedding, skmse, witness
from .hsic import hsic_biased, hsic_test, hsic_unbiased
from .kernels import (
    RBF,
    Indicator,
    Kernel,
    Linear,
    Matern12,
    Matern32,
    Matern52,
    Polynomial,
    RationalQuadratic,
    TensorProduct,
    median_heuristic,
)
from .linalg import CholeskyError
from .mmd import mmd2_biased, mmd2_gaussians, mmd2_linear, mmd2_unbiased, mmd_test
from .testresult import HypothesisTestResult

__version__ = "0.1.0"

__all__ = [
    "datasets",
    "kernels",
    "enable_x64",
    "x64_enabled",
    "Kernel",
    "RBF",
    "Matern12",
    "Matern32",
    "Matern52",
    "RationalQuadratic",
    "Linear",
    "Polynomial",
    "Indicator",
    "TensorProduct",
    "median_heuristic",
    "KernelEmbedding",
    "mean_embedding",
    "witness",
    "skmse",
    "mmd2_biased",
    "mmd2_unbiased",
    "mmd2_linear",
    "mmd2_gaussians",
    "mmd_test",
    "hsic_biased",
    "hsic_unbiased",
    "hsic_test",
    "HypothesisTestResult",
    "CholeskyError",
]
