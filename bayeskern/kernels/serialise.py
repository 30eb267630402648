"""Kernels to and from JSON-able states (class path, static settings, leaves), for saving fitted objects."""

import importlib

import jax.numpy as jnp
import numpy as np

from .base import Kernel

__all__ = ["kernel_state", "kernel_from_state"]


def kernel_state(kernel: Kernel | None) -> dict | None:
    """A JSON description of a kernel pytree: class path, static settings, leaves (arrays or sub-kernels)."""
    if kernel is None:
        return None
    leaves, static = kernel._tree_flatten()
    cls = type(kernel)
    return {"class": f"{cls.__module__}:{cls.__qualname__}", "static": list(static),
            "leaves": [kernel_state(v) if isinstance(v, Kernel) else np.asarray(v).tolist() for v in leaves]}


def kernel_from_state(state: dict | None) -> Kernel | None:
    """Inverse of :func:`kernel_state` (exact: JSON floats round-trip)."""
    if state is None:
        return None
    module, name = state["class"].split(":")
    cls = getattr(importlib.import_module(module), name)
    leaves = [kernel_from_state(v) if isinstance(v, dict) else jnp.asarray(v) for v in state["leaves"]]
    return cls._tree_unflatten(_as_tuples(state["static"]), leaves)


def _as_tuples(value):
    """JSON lists back to the (hashable) tuples of pytree static data."""
    return tuple(_as_tuples(v) for v in value) if isinstance(value, list) else value
