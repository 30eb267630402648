"""Saving and loading fitted kernel Bayes filters (``.npz``; exact round trip, precomputed matrices included)."""

import json

import jax.numpy as jnp
import numpy as np

from ..kernels.base import Kernel
from ..kernels.serialise import kernel_from_state, kernel_state
from .features import FeatureKernel, NystromFeatures
from .filter import KernelBayesFilter

__all__ = ["save_filter", "load_filter"]

_ARRAYS = ("X", "Z", "sigma_z", "lam", "eta", "lam_prime", "G_X", "K_eta", "transition")


def _observation_state(kernel: Kernel, arrays: dict) -> dict:
    if not isinstance(kernel, FeatureKernel):
        return {"kernel": kernel_state(kernel)}
    if not isinstance(kernel.features, NystromFeatures):
        raise ValueError(f"save_filter stores kernel observation models and Nystrom features, not "
                         f"{type(kernel.features).__name__}: keep the feature network's parameters yourself and "
                         "rebuild the filter with KernelBayesFilter.build")
    arrays |= {"landmarks": kernel.features.landmarks, "landmark_factor": kernel.features.factor}
    return {"nystrom_kernel": kernel_state(kernel.features.kernel)}


def save_filter(kbf: KernelBayesFilter, path) -> None:
    """Write ``kbf`` to ``path`` (.npz): training pairs, hyperparameters, settings and precomputed matrices."""
    arrays = {name: np.asarray(getattr(kbf, name)) for name in _ARRAYS}
    if kbf.factor is not None:
        arrays["factor"] = np.asarray(kbf.factor)
    meta = {"format": 1, "method": kbf.method, "original_solver": kbf.original_solver,
            "smooth_truncation": kbf.smooth_truncation, **_observation_state(kbf.kernel_x, arrays)}
    np.savez(path, meta=json.dumps(meta), **arrays)


def load_filter(path) -> KernelBayesFilter:
    """Read a filter written by :func:`save_filter` (or :meth:`KernelBayesFilter.save`); filters identically."""
    with np.load(path) as f:
        meta = json.loads(str(f["meta"]))
        arrays = {name: jnp.asarray(f[name]) for name in _ARRAYS}
        if "nystrom_kernel" in meta:
            features = NystromFeatures(kernel_from_state(meta["nystrom_kernel"]), jnp.asarray(f["landmarks"]),
                                       jnp.asarray(f["landmark_factor"]))
            kernel_x = FeatureKernel(features)
        else:
            kernel_x = kernel_from_state(meta["kernel"])
        factor = jnp.asarray(f["factor"]) if "factor" in f.files else None
    return KernelBayesFilter(kernel_x=kernel_x, factor=factor, method=meta["method"],
                             original_solver=meta["original_solver"], smooth_truncation=meta["smooth_truncation"],
                             **arrays)
