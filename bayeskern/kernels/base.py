"""Kernel base class and combinators (sum, product, scaling, tensor product).

A kernel only says how to evaluate k on blocks of points (``_cross``) and on
aligned pairs (``_paired``); how big Gram matrices, row sums and mat-vecs are
assembled lives in :mod:`bayeskern.kernels.blockwise`.
"""

import abc
from typing import ClassVar

import jax
import jax.numpy as jnp

from .._validation import as_points, check_positive, check_same_dim, check_same_length

__all__ = ["Kernel", "Sum", "Product", "Scaled", "TensorProduct", "as_float_param"]


def as_float_param(value, name: str):
    """A hyperparameter as a float array, checked positive when concrete."""
    value = jnp.asarray(value)
    if not jnp.issubdtype(value.dtype, jnp.floating):
        value = value.astype(jnp.result_type(float))
    return check_positive(value, name)


class Kernel(abc.ABC):
    """A positive-definite kernel k(x, y), registered as a JAX pytree.

    Hyperparameters named in ``_leaves`` are pytree leaves (so ``jit``, ``vmap``
    and ``grad`` go through them); settings in ``_static`` are hashable structure.
    Subclasses implement ``_cross(X, Y) -> (n, m)`` and ``_paired(X, Y) -> (n,)``
    on prepared inputs, and may override ``_prepare`` (default: points (n, d)).
    """

    _leaves: ClassVar[tuple[str, ...]] = ()
    _static: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        jax.tree_util.register_pytree_node(cls, cls._tree_flatten, cls._tree_unflatten)

    def _tree_flatten(self):
        leaves = tuple(getattr(self, name) for name in self._leaves)
        static = tuple(getattr(self, name) for name in self._static)
        return leaves, static

    @classmethod
    def _tree_unflatten(cls, static, leaves):
        obj = object.__new__(cls)  # bypass __init__: leaves may be tracers or placeholders
        for name, value in zip(cls._leaves, leaves):
            setattr(obj, name, value)
        for name, value in zip(cls._static, static):
            setattr(obj, name, value)
        return obj

    def __repr__(self):
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._leaves + self._static)
        return f"{type(self).__name__}({fields})"

    # --- inputs -------------------------------------------------------------
    def _prepare(self, X, name: str):
        return as_points(X, name)

    def _prepare_pair(self, X, Y):
        X = self._prepare(X, "X")
        Y = self._prepare(Y, "Y")
        check_same_dim(X, Y, "X and Y")
        return X, Y

    # --- public evaluation -------------------------------------------------
    def cross(self, X, Y):
        """Cross-covariance matrix k(x_i, y_j): X (n, ...) and Y (m, ...) -> (n, m)."""
        X, Y = self._prepare_pair(X, Y)
        return _compiled_cross(self, X, Y)

    def gram(self, X):
        """Gram matrix k(x_i, x_j): X (n, ...) -> (n, n)."""
        X = self._prepare(X, "X")
        return _compiled_cross(self, X, X)

    def diag(self, X):
        """Diagonal k(x_i, x_i) of the Gram matrix without forming it: (n,)."""
        X = self._prepare(X, "X")
        return _compiled_paired(self, X, X)

    def paired(self, X, Y):
        """Aligned evaluations k(x_i, y_i) for i = 1..n: (n,)."""
        X, Y = self._prepare_pair(X, Y)
        check_same_length(X, Y, "X and Y")
        return _compiled_paired(self, X, Y)

    @abc.abstractmethod
    def _cross(self, X, Y):
        """k on all pairs of prepared inputs: (n, m)."""

    @abc.abstractmethod
    def _paired(self, X, Y):
        """k on aligned prepared inputs: (n,)."""

    # --- algebra -------------------------------------------------------------
    def __add__(self, other):
        if not isinstance(other, Kernel):
            return NotImplemented
        return Sum(self, other)

    def __mul__(self, other):
        if isinstance(other, Kernel):
            return Product(self, other)
        return Scaled(self, other)

    def __rmul__(self, other):
        return Scaled(self, other)


# One compiled program per kernel structure and input shape: eager calls would otherwise
# compile every primitive separately (tens of ms each on CPU).
_compiled_cross = jax.jit(lambda kernel, X, Y: kernel._cross(X, Y))
_compiled_paired = jax.jit(lambda kernel, X, Y: kernel._paired(X, Y))


class Sum(Kernel):
    """k(x, y) = k1(x, y) + k2(x, y)."""

    _leaves = ("k1", "k2")

    def __init__(self, k1: Kernel, k2: Kernel):
        self.k1, self.k2 = k1, k2

    def _prepare(self, X, name):
        return self.k1._prepare(X, name)

    def _cross(self, X, Y):
        return self.k1._cross(X, Y) + self.k2._cross(X, Y)

    def _paired(self, X, Y):
        return self.k1._paired(X, Y) + self.k2._paired(X, Y)


class Product(Kernel):
    """k(x, y) = k1(x, y) * k2(x, y) on the same inputs."""

    _leaves = ("k1", "k2")

    def __init__(self, k1: Kernel, k2: Kernel):
        self.k1, self.k2 = k1, k2

    def _prepare(self, X, name):
        return self.k1._prepare(X, name)

    def _cross(self, X, Y):
        return self.k1._cross(X, Y) * self.k2._cross(X, Y)

    def _paired(self, X, Y):
        return self.k1._paired(X, Y) * self.k2._paired(X, Y)


class Scaled(Kernel):
    """k(x, y) = scale * base(x, y) with scale > 0 (a signal variance)."""

    _leaves = ("base", "scale")

    def __init__(self, base: Kernel, scale):
        if not isinstance(base, Kernel):
            raise TypeError(f"base must be a Kernel, got {type(base).__name__}")
        self.base = base
        self.scale = as_float_param(scale, "Scaled scale")
        if self.scale.ndim != 0:
            raise ValueError(f"Scaled scale must be a scalar, got shape {self.scale.shape}")

    def _prepare(self, X, name):
        return self.base._prepare(X, name)

    def _cross(self, X, Y):
        return self.scale * self.base._cross(X, Y)

    def _paired(self, X, Y):
        return self.scale * self.base._paired(X, Y)


class TensorProduct(Kernel):
    """Kernel on pairs: k((x, y), (x', y')) = k_x(x, x') * k_y(y, y').

    Inputs are tuples ``(X, Y)`` of aligned samples with the same number of rows,
    e.g. features and labels of a labelled data set.
    """

    _leaves = ("k_x", "k_y")

    def __init__(self, k_x: Kernel, k_y: Kernel):
        self.k_x, self.k_y = k_x, k_y

    def _prepare(self, XY, name):
        if not isinstance(XY, (tuple, list)) or len(XY) != 2:
            raise ValueError(f"{name} must be a pair (X, Y) of aligned samples for a TensorProduct kernel")
        X = self.k_x._prepare(XY[0], f"{name}[0]")
        Y = self.k_y._prepare(XY[1], f"{name}[1]")
        check_same_length(X, Y, f"{name}[0] and {name}[1]")
        return (X, Y)

    def _cross(self, A, B):
        return self.k_x._cross(A[0], B[0]) * self.k_y._cross(A[1], B[1])

    def _paired(self, A, B):
        return self.k_x._paired(A[0], B[0]) * self.k_y._paired(A[1], B[1])
