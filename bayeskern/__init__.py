"""bayeskern: Bayesian kernel embeddings and kernel methods on JAX.

Float64 is opt-in, as in NumPyro: call ``bayeskern.enable_x64()`` once at program
start. Importing bayeskern changes no global JAX state.
"""

import importlib

from . import datasets, kernels
from ._config import enable_compilation_cache, enable_x64, x64_enabled
from ._interrupt import Interrupted
from ._version import __version__ as _installed_version
from .conditional import ConditionalExpectation
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
from .fitted import FileFormatError, read_tag
from .fitted import is_registered as _is_registered
from .fitted import load as _load
from .linalg import CholeskyError
from .mmd import mmd2_biased, mmd2_gaussians, mmd2_linear, mmd2_unbiased, mmd_test
from .testresult import HypothesisTestResult
from .aggregate import AggregatedTestResult, KernelCollection

# the method families register their fitted classes for `load` on import (kernels and embeddings already did), and
# bke the "bayes" kernel rule of the tests
from . import bke, compression, jdl, kbr  # noqa: E402  (after the foundation names they build on)



__version__ = _installed_version


def load(path):
    """Restore any bayeskern object saved with ``.save(path)``: same class, arrays bit for bit.

    Works for every fitted class (filters, JDL/JPDL models, low-rank CME, KLR, compression results, type-II fits,
    MCMC results, embedding and witness posteriors, ...). Files are never unpickled: only registered bayeskern
    classes are built.

    Args:
        path: a ``.npz`` file written by ``.save``.

    Returns:
        The saved object, equal (``==``) to the one saved.

    Raises:
        FileNotFoundError: when the file does not exist.
        FileFormatError: the file is not a bayeskern save, is truncated, names a class that is not bayeskern's, or
            comes from a newer format version.
        RuntimeError: the file holds float64 arrays and float64 is off (call :func:`enable_x64` first).

    Examples:
        >>> import numpy as np, bayeskern as bk
        >>> from bayeskern import jdl
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(-2, 2, (100, 1)); Y = np.sin(X) + 0.1 * rng.standard_normal((100, 1))
        >>> model = jdl.fit_jdl(X, Y, bk.RBF(0.5), bk.RBF(0.5), 1e-3, constraint="normalised")
        >>> model.save("model.npz")
        >>> back = bk.load("model.npz")
        >>> type(back).__name__, back == model
        ('JointDistributionModel', True)
    """
    tag = read_tag(path)
    if tag is not None and not _is_registered(tag):  # inference classes register when that layer is imported
        importlib.import_module("bayeskern.inference")  # the package root sits above every layer
    return _load(path)

__all__ = [
    "datasets",
    "kernels",
    "bke",
    "kbr",
    "jdl",
    "compression",
    "load",
    "FileFormatError",
    "Interrupted",
    "ConditionalExpectation",
    "KernelCollection",
    "AggregatedTestResult",
    "enable_x64",
    "x64_enabled",
    "enable_compilation_cache",
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
