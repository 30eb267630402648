"""Random Fourier features of stationary kernels: frequencies drawn from each kernel's spectral measure.

A stationary kernel with k(x, x) = 1 is the characteristic function of its spectral measure (Bochner's theorem),
k(x, y) = E_w cos(w . (x - y)), so the features phi(x) = [cos(w_j . x), sin(w_j . x)]_j / sqrt(R) of R frequencies
w_j drawn from that measure give phi(x) . phi(y) = (1 / R) sum_j cos(w_j . (x - y)), an unbiased estimate of k(x, y)
(Rahimi & Recht 2007). The measures: Gaussian for the RBF (w = z / l, z standard normal), a multivariate Student t
with 2 nu degrees of freedom for the Matern kernels (w = z / (l sqrt(g / (2 nu))), g ~ chi^2_{2 nu}), a Gamma scale
mixture of Gaussians for the rational quadratic, N(0, Sigma^{-1}) for the full-covariance RBF; a scaled kernel
scales its features.
"""

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from .._validation import check_count, check_key
from .base import Kernel, Scaled
from .stationary import RBF, Matern12, Matern32, Matern52, RationalQuadratic, RBFFull

__all__ = ["spectral_frequencies", "fourier_features", "has_spectral_measure"]

_MATERN_DOF = {Matern12: 1.0, Matern32: 3.0, Matern52: 5.0}   # 2 nu


def has_spectral_measure(kernel) -> bool:
    """Whether :func:`spectral_frequencies` can draw frequencies for ``kernel`` (a stationary kernel of this
    module's list, possibly scaled).

    Args:
        kernel: any object.

    Returns:
        bool.
    """
    while isinstance(kernel, Scaled):
        kernel = kernel.base
    return type(kernel) in (RBF, RBFFull, RationalQuadratic, *_MATERN_DOF)


def spectral_frequencies(kernel: Kernel, key, dim: int, num: int):
    """``num`` frequencies drawn from the spectral measure of a stationary kernel on R^dim.

    Args:
        kernel: RBF (isotropic or ARD), Matern12 / 32 / 52, RationalQuadratic or RBFFull, possibly Scaled.
        key: PRNG key of the draw.
        dim: the dimension D of the points.
        num: the number R of frequencies.

    Returns:
        (R, D) array of frequencies (a Scaled kernel's scale is not in them: see :func:`fourier_features`).

    Raises:
        TypeError: for a kernel without a spectral measure here (non-stationary kernels, sums, products,
            indicators) or a key that is not a PRNG key.
        ValueError: for dim or num below 1, or an ARD lengthscale of another length than dim.
    """
    check_key(key)
    dim, num = check_count(dim, "dim"), check_count(num, "num")
    while isinstance(kernel, Scaled):
        kernel = kernel.base
    if not has_spectral_measure(kernel):
        raise TypeError(f"random Fourier features need a stationary kernel (RBF, Matern12/32/52, RationalQuadratic, "
                        f"RBFFull, or one of them scaled), got {type(kernel).__name__}")
    normal_key, mixing_key = jax.random.split(key)
    z = jax.random.normal(normal_key, (num, dim))
    if isinstance(kernel, RBFFull):
        if kernel.scale_tril.shape[0] != dim:
            raise ValueError(f"RBFFull has dimension {kernel.scale_tril.shape[0]} but the points have dimension {dim}")
        return solve_triangular(kernel.scale_tril.T, z.T, lower=False).T   # w = L^{-T} z ~ N(0, Sigma^{-1})
    ell = kernel.lengthscale
    if ell.ndim == 1 and ell.shape[0] != dim:
        raise ValueError(f"{type(kernel).__name__} ARD lengthscale has {ell.shape[0]} entries but the points have "
                         f"dimension {dim}")
    if isinstance(kernel, RBF):
        return z / ell
    if isinstance(kernel, RationalQuadratic):   # exp(-tau r^2 / 2) averaged over tau ~ Gamma(alpha, rate alpha)
        tau = jax.random.gamma(mixing_key, kernel.alpha, (num, 1)) / kernel.alpha
        return z * jnp.sqrt(tau) / ell
    dof = _MATERN_DOF[type(kernel)]
    g = 2.0 * jax.random.gamma(mixing_key, 0.5 * dof, (num, 1))   # chi^2 with dof degrees of freedom
    return z * jnp.sqrt(dof / g) / ell


def fourier_features(X, frequencies, scale=1.0):
    """phi(x) = sqrt(scale / R) [cos(W x), sin(W x)]: phi(x) . phi(y) estimates scale x k(x, y) (traceable).

    Args:
        X: (n, D) points.
        frequencies: (R, D) frequencies W of :func:`spectral_frequencies`.
        scale: the kernel's variance k(x, x) (a Scaled kernel's scale; 1 otherwise).

    Returns:
        (n, 2 R) array, the cosines first.
    """
    projections = X @ frequencies.T
    return jnp.sqrt(scale / frequencies.shape[0]) * jnp.concatenate([jnp.cos(projections), jnp.sin(projections)],
                                                                     axis=-1)


def kernel_scale(kernel) -> float:
    """k(x, x) of a stationary kernel: the product of the scales of its Scaled wrappers."""
    scale = 1.0
    while isinstance(kernel, Scaled):
        scale, kernel = scale * kernel.scale, kernel.base
    return scale
