"""Stationary kernels on R^d with isotropic (scalar) or ARD (vector) lengthscales.

Convention: ``r^2 = sum_k (x_k - y_k)^2 / l_k^2``; the RBF kernel is ``exp(-r^2 / 2)``.
Distances use explicit differences (no ``|x|^2 + |y|^2 - 2 x.y`` cancellation), so
the Gram diagonal is exactly k(0) and gradients at r = 0 are finite.
"""

import abc

import jax.numpy as jnp

from .base import Kernel, as_float_param

__all__ = ["Stationary", "RBF", "Matern12", "Matern32", "Matern52", "RationalQuadratic"]


def _safe_sqrt(r2):
    """sqrt with a zero (not NaN) gradient at 0."""
    positive = r2 > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, r2, 1.0)), 0.0)


class Stationary(Kernel):
    """Base for k(x, y) = profile(r^2) with scaled squared distance r^2."""

    _leaves = ("lengthscale",)

    def __init__(self, lengthscale=1.0):
        name = type(self).__name__
        self.lengthscale = as_float_param(lengthscale, f"{name} lengthscale")
        if self.lengthscale.ndim > 1:
            raise ValueError(f"{name} lengthscale must be a scalar or a vector (ARD), got shape {self.lengthscale.shape}")

    def _scaled(self, X):
        ls = self.lengthscale
        if ls.ndim == 1 and ls.shape[0] != X.shape[-1]:
            raise ValueError(
                f"{type(self).__name__} ARD lengthscale has {ls.shape[0]} entries but the points have dimension {X.shape[-1]}"
            )
        return X / ls

    def sqdist(self, X, Y):
        """Scaled squared distances r^2(x_i, y_j): (n, m)."""
        Xs, Ys = self._scaled(X), self._scaled(Y)
        return jnp.sum((Xs[:, None, :] - Ys[None, :, :]) ** 2, axis=-1)

    def _cross(self, X, Y):
        return self.profile(self.sqdist(X, Y))

    def _paired(self, X, Y):
        return self.profile(jnp.sum((self._scaled(X) - self._scaled(Y)) ** 2, axis=-1))

    @abc.abstractmethod
    def profile(self, r2):
        """k as a function of the scaled squared distance."""


class RBF(Stationary):
    """Squared exponential: exp(-||x - y||^2 / (2 l^2)); vector l gives ARD."""

    def profile(self, r2):
        return jnp.exp(-0.5 * r2)


class Matern12(Stationary):
    """Matérn nu = 1/2 (exponential kernel): exp(-r)."""

    def profile(self, r2):
        return jnp.exp(-_safe_sqrt(r2))


class Matern32(Stationary):
    """Matérn nu = 3/2: (1 + sqrt(3) r) exp(-sqrt(3) r)."""

    def profile(self, r2):
        s = jnp.sqrt(3.0) * _safe_sqrt(r2)
        return (1.0 + s) * jnp.exp(-s)


class Matern52(Stationary):
    """Matérn nu = 5/2: (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)."""

    def profile(self, r2):
        s = jnp.sqrt(5.0) * _safe_sqrt(r2)
        return (1.0 + s + 5.0 * r2 / 3.0) * jnp.exp(-s)


class RationalQuadratic(Stationary):
    """Rational quadratic: (1 + r^2 / (2 alpha))^(-alpha), alpha > 0."""

    _leaves = ("lengthscale", "alpha")

    def __init__(self, lengthscale=1.0, alpha=1.0):
        super().__init__(lengthscale)
        self.alpha = as_float_param(alpha, "RationalQuadratic alpha")

    def profile(self, r2):
        return (1.0 + r2 / (2.0 * self.alpha)) ** (-self.alpha)
