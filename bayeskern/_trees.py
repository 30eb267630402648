"""What ``==`` means for kernels and fitted objects: the same pytree with equal leaves."""

import jax
import numpy as np


def trees_equal(a, b) -> bool:
    """Whether ``a`` and ``b`` are the same object tree: equal pytree structure (classes, static settings) and
    leaves of equal shape, dtype and values; NaN entries match NaN entries in the same places (an object with an
    undefined value, flagged as such, equals its saved-and-loaded copy)."""
    if type(a) is not type(b):
        return False
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    return tree_a == tree_b and all(_leaves_equal(x, y) for x, y in zip(leaves_a, leaves_b))


def _leaves_equal(x, y) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    return bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))


def tree_hash(obj) -> int:
    """A hash consistent with :func:`trees_equal`: that of the pytree structure (equal trees share it)."""
    return hash(jax.tree.structure(obj))
