"""Kernel base class and combinators (sum, product, scaling, tensor product).

A kernel says how to evaluate k on blocks of points (:meth:`Kernel.evaluate`) and on
aligned pairs (:meth:`Kernel.evaluate_paired`); how big Gram matrices, row sums and
mat-vecs are assembled lives in :mod:`bayeskern.kernels.blockwise`.

Two levels of the same computation are public:

* checked entry points, ``cross``, ``gram``, ``diag`` and ``paired``: they validate and
  convert their inputs (:meth:`Kernel.prepare`) and run one compiled program;
* unchecked fast paths, ``evaluate`` and ``evaluate_paired``, for code that is already
  traced (inside ``jit``, ``vmap``, ``grad`` or a ``lax`` loop) on inputs prepared once
  at the boundary. They never inspect values, so they cost nothing beyond the arithmetic.
"""

import abc
from typing import ClassVar

import jax
import jax.numpy as jnp

from .._trees import tree_hash, trees_equal
from .._validation import as_points, as_real_array, check_positive, check_same_dim, check_same_length

__all__ = ["Kernel", "Sum", "Product", "Scaled", "TensorProduct", "as_float_param", "kernel_class"]

_KERNEL_CLASSES: dict[str, type] = {}


def kernel_class(name: str):
    """bayeskern's kernel class called ``name`` (every Kernel subclass of bayeskern registers), or None.

    Args:
        name: a class name, e.g. ``"RBF"``.

    Returns:
        The class, or None for a name bayeskern does not define (how saved files refuse foreign kernels).

    Raises:
        TypeError: for a name that is not a string.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a kernel class name (a string), got {name!r}")
    return _KERNEL_CLASSES.get(name)


def as_float_param(value, name: str):
    """A hyperparameter as a float array, checked positive when concrete."""
    value = as_real_array(value, name)
    dtype = value.dtype if jnp.issubdtype(value.dtype, jnp.floating) else jnp.result_type(float)
    return check_positive(jnp.asarray(value, dtype=dtype), name)  # strongly typed: one compiled program per dtype


class Kernel(abc.ABC):
    """A positive-definite kernel k(x, y), registered as a JAX pytree.

    Hyperparameters named in ``_leaves`` are pytree leaves (so ``jit``, ``vmap``
    and ``grad`` go through them); settings in ``_static`` are hashable structure.
    Subclasses implement :meth:`evaluate` ``(X, Y) -> (n, m)`` and
    :meth:`evaluate_paired` ``(X, Y) -> (n,)`` on prepared inputs, and may override
    :meth:`prepare` (default: points (n, d)).
    """

    _leaves: ClassVar[tuple[str, ...]] = ()
    _static: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        jax.tree_util.register_pytree_node(cls, cls.tree_flatten, cls.tree_unflatten)
        if cls.__module__.startswith("bayeskern."):  # loading files builds bayeskern's own kernels only
            if _KERNEL_CLASSES.get(cls.__name__, cls) is not cls:
                raise RuntimeError(f"two kernel classes share the name {cls.__name__!r}")
            _KERNEL_CLASSES[cls.__name__] = cls

    def __eq__(self, other) -> bool:
        """The same kernel class with equal settings and equal hyperparameters (shape, dtype and values)."""
        return trees_equal(self, other)

    def __hash__(self) -> int:
        return tree_hash(self)

    def tree_flatten(self):
        """(leaves, static settings): the pytree split of the kernel."""
        leaves = tuple(getattr(self, name) for name in self._leaves)
        static = tuple(getattr(self, name) for name in self._static)
        return leaves, static

    @classmethod
    def tree_unflatten(cls, static, leaves):
        """Rebuild a kernel from :meth:`tree_flatten`'s output without re-checking its leaves."""
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
    def prepare(self, X, name: str = "X"):
        """Check and convert one input for this kernel, once, before traced code evaluates it.

        Args:
            X: the input: points (n, d) or (n,) for most kernels, a pair ``(X, Y)`` of aligned samples for a
                tensor product, integer labels (n,) for the indicator kernel.
            name: the argument name that error messages use.

        Returns:
            The input in the form :meth:`evaluate` takes: a float array (n, d) for points.

        Raises:
            TypeError: for data that are not real numbers.
            ValueError: for non-finite values or a shape the kernel cannot take; the message names ``name``.
        """
        return as_points(X, name)

    def prepare_pair(self, X, Y):
        """Prepare two inputs and check that their points have the same dimension.

        Args:
            X: first input (n, ...), as for :meth:`prepare`.
            Y: second input (m, ...).

        Returns:
            (X, Y) prepared.

        Raises:
            TypeError: for data that are not real numbers.
            ValueError: for non-finite values or points of different dimensions.
        """
        X = self.prepare(X, "X")
        Y = self.prepare(Y, "Y")
        check_same_dim(X, Y, "X and Y")
        return X, Y

    # --- public evaluation -------------------------------------------------
    def cross(self, X, Y):
        """Cross-covariance matrix k(x_i, y_j), checked and compiled.

        Args:
            X: (n, ...) first input.
            Y: (m, ...) second input.

        Returns:
            (n, m) array of kernel values.

        Raises:
            TypeError: for data that are not real numbers.
            ValueError: for non-finite values or inputs of different dimensions.
        """
        X, Y = self.prepare_pair(X, Y)
        return _compiled_cross(self, X, Y)

    def gram(self, X):
        """Gram matrix k(x_i, x_j), checked and compiled.

        Args:
            X: (n, ...) input.

        Returns:
            (n, n) symmetric positive semidefinite array.

        Raises:
            TypeError: for data that are not real numbers.
            ValueError: for non-finite values or a shape the kernel cannot take.
        """
        X = self.prepare(X, "X")
        return _compiled_cross(self, X, X)

    def diag(self, X):
        """Diagonal k(x_i, x_i) of the Gram matrix, without forming the matrix.

        Args:
            X: (n, ...) input.

        Returns:
            (n,) array.

        Raises:
            TypeError: for data that are not real numbers.
            ValueError: for non-finite values or a shape the kernel cannot take.
        """
        X = self.prepare(X, "X")
        return _compiled_paired(self, X, X)

    def paired(self, X, Y):
        """Aligned evaluations k(x_i, y_i), i = 1..n.

        Args:
            X: (n, ...) first input.
            Y: (n, ...) second input, row i paired with row i of X.

        Returns:
            (n,) array.

        Raises:
            TypeError: for data that are not real numbers.
            ValueError: for non-finite values, inputs of different dimensions or different numbers of rows.
        """
        X, Y = self.prepare_pair(X, Y)
        check_same_length(X, Y, "X and Y")
        return _compiled_paired(self, X, Y)

    @abc.abstractmethod
    def evaluate(self, X, Y):
        """k on all pairs of prepared inputs: the unchecked fast path for traced code.

        Args:
            X: (n, ...) input prepared by :meth:`prepare`.
            Y: (m, ...) input prepared by :meth:`prepare`.

        Returns:
            (n, m) array of kernel values.

        Nothing is inspected, so nothing is raised here: inputs of the wrong shape fail inside JAX.
        """

    @abc.abstractmethod
    def evaluate_paired(self, X, Y):
        """k on aligned prepared inputs: the unchecked fast path of :meth:`paired` for traced code.

        Args:
            X: (n, ...) input prepared by :meth:`prepare`.
            Y: (n, ...) input prepared by :meth:`prepare`.

        Returns:
            (n,) array of k(x_i, y_i).

        Nothing is inspected, so nothing is raised here: inputs of the wrong shape fail inside JAX.
        """

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
_compiled_cross = jax.jit(lambda kernel, X, Y: kernel.evaluate(X, Y))
_compiled_paired = jax.jit(lambda kernel, X, Y: kernel.evaluate_paired(X, Y))


class Sum(Kernel):
    """Sum kernel k(x, y) = k1(x, y) + k2(x, y); ``k1 + k2`` builds it.

    Args:
        k1: first kernel.
        k2: second kernel, on the same inputs.

    Attributes:
        k1: the first kernel.
        k2: the second kernel.

    Raises:
        TypeError: when k1 or k2 is not a Kernel.
    """

    _leaves = ("k1", "k2")

    def __init__(self, k1: Kernel, k2: Kernel):
        _check_kernels(k1=k1, k2=k2)
        self.k1, self.k2 = k1, k2

    def prepare(self, X, name: str = "X"):
        return self.k1.prepare(X, name)

    def evaluate(self, X, Y):
        return self.k1.evaluate(X, Y) + self.k2.evaluate(X, Y)

    def evaluate_paired(self, X, Y):
        return self.k1.evaluate_paired(X, Y) + self.k2.evaluate_paired(X, Y)


class Product(Kernel):
    """Product kernel k(x, y) = k1(x, y) k2(x, y) on the same inputs; ``k1 * k2`` builds it.

    Args:
        k1: first kernel.
        k2: second kernel, on the same inputs (for kernels on different inputs use :class:`TensorProduct`).

    Attributes:
        k1: the first kernel.
        k2: the second kernel.

    Raises:
        TypeError: when k1 or k2 is not a Kernel.
    """

    _leaves = ("k1", "k2")

    def __init__(self, k1: Kernel, k2: Kernel):
        _check_kernels(k1=k1, k2=k2)
        self.k1, self.k2 = k1, k2

    def prepare(self, X, name: str = "X"):
        return self.k1.prepare(X, name)

    def evaluate(self, X, Y):
        return self.k1.evaluate(X, Y) * self.k2.evaluate(X, Y)

    def evaluate_paired(self, X, Y):
        return self.k1.evaluate_paired(X, Y) * self.k2.evaluate_paired(X, Y)


class Scaled(Kernel):
    """Scaled kernel k(x, y) = scale base(x, y); ``scale * base`` builds it.

    Args:
        base: the kernel.
        scale: signal variance > 0 (a pytree leaf).

    Attributes:
        base: the kernel that is scaled.
        scale: () float array, the signal variance.

    Raises:
        TypeError: when base is not a Kernel.
        ValueError: for a scale that is not a positive finite scalar.
    """

    _leaves = ("base", "scale")

    def __init__(self, base: Kernel, scale):
        if not isinstance(base, Kernel):
            raise TypeError(f"base must be a Kernel, got {type(base).__name__}")
        self.base = base
        self.scale = as_float_param(scale, "Scaled scale")
        if self.scale.ndim != 0:
            raise ValueError(f"Scaled scale must be a scalar, got shape {self.scale.shape}")

    def prepare(self, X, name: str = "X"):
        return self.base.prepare(X, name)

    def evaluate(self, X, Y):
        return self.scale * self.base.evaluate(X, Y)

    def evaluate_paired(self, X, Y):
        return self.scale * self.base.evaluate_paired(X, Y)


class TensorProduct(Kernel):
    """Kernel on pairs: k((x, y), (x', y')) = k_x(x, x') k_y(y, y').

    Inputs are tuples ``(X, Y)`` of aligned samples with the same number of rows, e.g. features and labels of a
    labelled data set (the joint kernel of JMMD and of joint herding).

    Args:
        k_x: kernel on the first component.
        k_y: kernel on the second component.

    Attributes:
        k_x: the kernel on the first component.
        k_y: the kernel on the second component.

    Raises:
        TypeError: when k_x or k_y is not a Kernel.
    """

    _leaves = ("k_x", "k_y")

    def __init__(self, k_x: Kernel, k_y: Kernel):
        _check_kernels(k_x=k_x, k_y=k_y)
        self.k_x, self.k_y = k_x, k_y

    def prepare(self, X, name: str = "X"):
        """Check one input of pairs: a tuple ``(A, B)`` of aligned samples, A for ``k_x`` and B for ``k_y``.

        Args:
            X: the pair ``(A, B)``, A (n, ...) and B (n, ...) with the same number of rows.
            name: the argument name that error messages use (``name[0]``, ``name[1]`` for the components).

        Returns:
            The pair of prepared components.

        Raises:
            TypeError: for components that are not real numbers.
            ValueError: for something other than a pair, non-finite values, or components of different lengths.
        """
        if not isinstance(X, (tuple, list)) or len(X) != 2:
            raise ValueError(f"{name} must be a pair (X, Y) of aligned samples for a TensorProduct kernel")
        A = self.k_x.prepare(X[0], f"{name}[0]")
        B = self.k_y.prepare(X[1], f"{name}[1]")
        check_same_length(A, B, f"{name}[0] and {name}[1]")
        return (A, B)

    def evaluate(self, X, Y):
        return self.k_x.evaluate(X[0], Y[0]) * self.k_y.evaluate(X[1], Y[1])

    def evaluate_paired(self, X, Y):
        return self.k_x.evaluate_paired(X[0], Y[0]) * self.k_y.evaluate_paired(X[1], Y[1])


def _check_kernels(**kernels):
    for name, kernel in kernels.items():
        if not isinstance(kernel, Kernel):
            raise TypeError(f"{name} must be a Kernel, got {type(kernel).__name__}")
