"""Stationary kernels on R^d with isotropic (scalar) or ARD (vector) lengthscales.

Convention: ``r^2 = sum_k (x_k - y_k)^2 / l_k^2``; the RBF kernel is ``exp(-r^2 / 2)``.

Squared distances of kernels that are smooth in r^2 (RBF, rational quadratic) use
the matrix-product expansion ``|x - c|^2 + |y - c|^2 - 2 (x - c).(y - c)`` about the
block mean c (3-4x faster on CPU; rounding O(eps * spread^2), harmless for a smooth
function of r^2). Kernels of r = sqrt(r^2) (Matérn) would amplify that rounding to
O(sqrt(eps)), so they use explicit coordinate differences: their Gram diagonal is
exactly k(0) and their gradients at r = 0 are finite.
"""

import abc

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from .._validation import (as_finite_array, as_matrix, as_real_array, check_count, check_finite, check_positive,
                           is_concrete)
from .base import Kernel, as_float_param

__all__ = ["squared_distances", "Stationary", "RBF", "RBFFull", "Matern12", "Matern32", "Matern52", "RationalQuadratic",
           "se_scale_tril"]


_UNROLL_MAX_DIM = 16


def squared_distances(Xs, Ys):
    """Squared Euclidean distances by the expansion ||x||^2 + ||y||^2 - 2 x.y about the mean of Xs.

    Fast (one matrix product); the rounding error is O(eps x spread^2), and negative round-off is clipped to 0.

    Args:
        Xs: (n, d) array.
        Ys: (m, d) array.

    Returns:
        (n, m) array.

    Raises:
        TypeError: for input that is not real numbers.
        ValueError: for non-finite input, or arrays that are not (n, d) and (m, d).
    """
    Xs, Ys = as_real_array(Xs, "Xs"), as_real_array(Ys, "Ys")
    if Xs.ndim != 2 or Ys.ndim != 2 or Xs.shape[1] != Ys.shape[1]:
        raise ValueError(f"Xs and Ys must have shapes (n, d) and (m, d), got {Xs.shape} and {Ys.shape}")
    check_finite(Xs, "Xs"), check_finite(Ys, "Ys")
    return _expanded_squared_distances(Xs, Ys)


@jax.jit   # one program per shape where it runs eagerly, instead of one per operation
def _expanded_squared_distances(Xs, Ys):
    c = jnp.mean(Xs, axis=0)
    Xc, Yc = Xs - c, Ys - c
    d2 = jnp.sum(Xc**2, axis=1)[:, None] + jnp.sum(Yc**2, axis=1)[None, :] - 2.0 * Xc @ Yc.T
    return jnp.maximum(d2, 0.0)


def _sqdist_exact(Xs, Ys):
    d = Xs.shape[-1]
    if d <= _UNROLL_MAX_DIM:  # one 2-D broadcast per coordinate vectorises far better than an (n, m, d) cube
        return sum((Xs[:, k][:, None] - Ys[:, k][None, :]) ** 2 for k in range(d))
    return jnp.sum((Xs[:, None, :] - Ys[None, :, :]) ** 2, axis=-1)


def _safe_sqrt(r2):
    """sqrt with a zero (not NaN) gradient at 0."""
    positive = r2 > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, r2, 1.0)), 0.0)


class Stationary(Kernel):
    """Base class of stationary kernels k(x, y) = profile(r^2), r^2 = ||(x - y) / l||^2.

    Subclasses define :meth:`profile`; the lengthscale (scalar or (D,) for ARD) is a pytree leaf.

    Args:
        lengthscale: l > 0, a scalar or a (D,) vector (ARD: one lengthscale per input dimension).

    Attributes:
        lengthscale: () or (D,) float array, the lengthscale l.

    Raises:
        TypeError: for a lengthscale that is not a real number.
        ValueError: for a lengthscale that is not positive and finite, is so small that 1 / l^2 overflows, or
            has more than one axis.
    """

    _leaves = ("lengthscale",)
    _smooth_in_r2 = False  # True: rounding in r^2 is harmless, use the fast expansion

    def __init__(self, lengthscale=1.0):
        name = type(self).__name__
        self.lengthscale = as_float_param(lengthscale, f"{name} lengthscale")
        if self.lengthscale.ndim > 1:
            raise ValueError(f"{name} lengthscale must be a scalar or a vector (ARD), got shape {self.lengthscale.shape}")
        smallest = 1.0 / np.sqrt(np.finfo(self.lengthscale.dtype).max)  # below it 1 / l^2 overflows
        if is_concrete(self.lengthscale) and not np.all(np.asarray(self.lengthscale) >= smallest):
            raise ValueError(f"{name} lengthscale {np.asarray(self.lengthscale).tolist()} is too small: 1 / l^2 "
                             f"overflows {self.lengthscale.dtype} and the Gram matrix would be NaN")

    def _scaled(self, X):
        ls = self.lengthscale
        if ls.ndim == 1 and ls.shape[0] != X.shape[-1]:
            raise ValueError(
                f"{type(self).__name__} ARD lengthscale has {ls.shape[0]} entries but the points have dimension {X.shape[-1]}"
            )
        return X / ls

    def sqdist(self, X, Y):
        """Scaled squared distances r^2(x_i, y_j) = ||(x_i - y_j) / l||^2 of prepared points (traceable).

        Args:
            X: (n, D) points.
            Y: (m, D) points.

        Returns:
            (n, m) array.

        Raises:
            ValueError: for an ARD lengthscale of another length than D.
        """
        Xs, Ys = self._scaled(X), self._scaled(Y)
        return squared_distances(Xs, Ys) if self._smooth_in_r2 else _sqdist_exact(Xs, Ys)

    def evaluate(self, X, Y):
        return self.profile(self.sqdist(X, Y))

    def evaluate_paired(self, X, Y):
        return self.profile(jnp.sum((self._scaled(X) - self._scaled(Y)) ** 2, axis=-1))

    @abc.abstractmethod
    def profile(self, r2):
        """The kernel as a function of the scaled squared distance: k(x, y) = profile(r^2) (traceable).

        Args:
            r2: array of scaled squared distances r^2 >= 0, any shape.

        Returns:
            Array of kernel values, the shape of r2.

        Nothing is inspected, so nothing is raised here (the unchecked path of :meth:`evaluate`).
        """


class RBF(Stationary):
    """Squared-exponential kernel exp(-r^2 / 2), r = ||(x - y) / l||.

    Args:
        lengthscale: l > 0, a scalar or a (D,) vector (ARD: one lengthscale per input dimension).

    Attributes:
        lengthscale: () or (D,) float array, the lengthscale l.

    Raises:
        ValueError: for a lengthscale that is not positive and finite (or too small: 1 / l^2 overflows).

    Examples:
        >>> import numpy as np, bayeskern as bk
        >>> k = bk.RBF(2.0)
        >>> bool(np.isclose(k.cross(np.zeros((1, 1)), np.full((1, 1), 2.0))[0, 0], np.exp(-0.5)))
        True
        >>> bk.RBF(np.array([1.0, 10.0])).gram(np.ones((3, 2))).shape   # ARD on 2-D points
        (3, 3)
    """

    _smooth_in_r2 = True

    def profile(self, r2):
        return jnp.exp(-0.5 * r2)


class Matern12(Stationary):
    """Matérn kernel with nu = 1/2 (the exponential kernel): exp(-r), r = ||(x - y) / l||.

    Args:
        lengthscale: l > 0, a scalar or a (D,) vector (ARD: one lengthscale per input dimension).

    Attributes:
        lengthscale: () or (D,) float array, the lengthscale l.

    Raises:
        ValueError: for a lengthscale that is not positive and finite.
    """

    def profile(self, r2):
        return jnp.exp(-_safe_sqrt(r2))


class Matern32(Stationary):
    """Matérn kernel with nu = 3/2: (1 + sqrt(3) r) exp(-sqrt(3) r), r = ||(x - y) / l||.

    Args:
        lengthscale: l > 0, a scalar or a (D,) vector (ARD: one lengthscale per input dimension).

    Attributes:
        lengthscale: () or (D,) float array, the lengthscale l.

    Raises:
        ValueError: for a lengthscale that is not positive and finite.
    """

    def profile(self, r2):
        s = jnp.sqrt(3.0) * _safe_sqrt(r2)
        return (1.0 + s) * jnp.exp(-s)


class Matern52(Stationary):
    """Matérn kernel with nu = 5/2: (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r), r = ||(x - y) / l||.

    Args:
        lengthscale: l > 0, a scalar or a (D,) vector (ARD: one lengthscale per input dimension).

    Attributes:
        lengthscale: () or (D,) float array, the lengthscale l.

    Raises:
        ValueError: for a lengthscale that is not positive and finite.
    """

    def profile(self, r2):
        s = jnp.sqrt(5.0) * _safe_sqrt(r2)
        return (1.0 + s + 5.0 * r2 / 3.0) * jnp.exp(-s)


class RationalQuadratic(Stationary):
    """Rational quadratic kernel (1 + r^2 / (2 alpha))^(-alpha), r = ||(x - y) / l||: a scale mixture of RBFs.

    Args:
        lengthscale: l > 0, a scalar or a (D,) vector (ARD: one lengthscale per input dimension).
        alpha: shape alpha > 0 (alpha -> infinity gives the RBF).

    Attributes:
        lengthscale: () or (D,) float array, the lengthscale l.
        alpha: () float array, the shape alpha.

    Raises:
        ValueError: for a lengthscale or alpha that is not positive and finite.
    """

    _leaves = ("lengthscale", "alpha")
    _smooth_in_r2 = True

    def __init__(self, lengthscale=1.0, alpha=1.0):
        super().__init__(lengthscale)
        self.alpha = as_float_param(alpha, "RationalQuadratic alpha")

    def profile(self, r2):
        return (1.0 + r2 / (2.0 * self.alpha)) ** (-self.alpha)


class RBFFull(Kernel):
    """Squared-exponential kernel with a full covariance: exp(-(x - y)^T Sigma^{-1} (x - y) / 2).

    RBF(l) is the case L = l I.

    Args:
        scale_tril: (D, D) lower-triangular L with positive diagonal, Sigma = L L^T (entries above the diagonal
            are ignored).

    Attributes:
        scale_tril: (D, D) float array, the lower-triangular factor L.

    Raises:
        ValueError: for a non-square matrix, non-finite entries or a diagonal that is not positive.
    """

    _leaves = ("scale_tril",)

    def __init__(self, scale_tril):
        L = as_finite_array(scale_tril, "scale_tril")
        if not jnp.issubdtype(L.dtype, jnp.floating):
            L = L.astype(jnp.result_type(float))
        if L.ndim != 2 or L.shape[0] != L.shape[1]:
            raise ValueError(f"RBFFull scale_tril must be a square (D, D) matrix, got shape {L.shape}")
        check_positive(jnp.diag(L), "RBFFull scale_tril diagonal")
        self.scale_tril = jnp.tril(L)

    @classmethod
    def from_covariance(cls, Sigma):
        """The kernel with a given covariance, through its Cholesky factor.

        Args:
            Sigma: (D, D) symmetric positive definite covariance.

        Returns:
            RBFFull: the kernel exp(-(x - y)^T Sigma^{-1} (x - y) / 2).

        Raises:
            ValueError: when Sigma is not symmetric positive definite.
        """
        Sigma = as_matrix(Sigma, "Sigma", square=True)
        L = jnp.linalg.cholesky(Sigma)
        if is_concrete(L) and not (bool(jnp.all(jnp.isfinite(L))) and bool(jnp.allclose(Sigma, Sigma.T))):
            raise ValueError("Sigma must be symmetric positive definite")
        return cls(L)

    def _whiten(self, X):
        L = self.scale_tril
        if L.shape[0] != X.shape[-1]:
            raise ValueError(f"RBFFull scale_tril is {L.shape[0]}x{L.shape[0]} but the points have dimension {X.shape[-1]}")
        return solve_triangular(L, X.T, lower=True).T

    def evaluate(self, X, Y):
        return jnp.exp(-0.5 * squared_distances(self._whiten(X), self._whiten(Y)))

    def evaluate_paired(self, X, Y):
        return jnp.exp(-0.5 * jnp.sum((self._whiten(X) - self._whiten(Y)) ** 2, axis=-1))


def se_scale_tril(kernel, dim: int):
    """Cholesky factor L of Sigma for a squared-exponential kernel k = exp(-d^T Sigma^{-1} d / 2).

    Args:
        kernel: ``RBF`` (L = l I_D, or diag(l) for ARD) or ``RBFFull`` (its scale_tril).
        dim: the input dimension D.

    Returns:
        (D, D) array.

    Raises:
        TypeError: for other kernels.
        ValueError: for an ARD lengthscale of another length than D.
    """
    dim = check_count(dim, "dim")
    if isinstance(kernel, RBFFull):
        return kernel.scale_tril
    if isinstance(kernel, RBF):
        ls = kernel.lengthscale
        if ls.ndim == 1 and ls.shape[0] != dim:
            raise ValueError(f"RBF ARD lengthscale has {ls.shape[0]} entries but the points have dimension {dim}")
        return jnp.diag(jnp.broadcast_to(ls, (dim,)))
    raise TypeError(f"a squared-exponential kernel (RBF or RBFFull) is required, got {type(kernel).__name__}")
