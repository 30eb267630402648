"""The BKE prior covariance r(x, y) = int k(x, u) k(u, y) nu(du) for squared-exponential k."""

import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from .._validation import as_real_array, check_finite, check_positive
from ..kernels.base import Kernel
from ..kernels.stationary import RBF, RBFFull, squared_distances, se_scale_tril

__all__ = ["ConvolvedSE"]

_NU = ("lebesgue", "gaussian")
_R_SCALE = ("exact", "unit")


def _whiten(L, X):
    return solve_triangular(L, X.T, lower=True).T


class ConvolvedSE(Kernel):
    """Convolved squared-exponential kernel r_theta(x, y) = int k(x, u) k(u, y) nu(du), the covariance of the BKE
    prior GP(0, r_theta).

    With Sigma the covariance of the base kernel and d = x - y: for Lebesgue nu,
    r = pi^{D/2} |Sigma|^{1/2} exp(-d^T Sigma^{-1} d / 4). For the Gaussian measure
    nu(du) = exp(-(u - c)^T H^{-1} (u - c) / 2) du, r gains the factor
    |I + Sigma H^{-1} / 2|^{-1/2} exp(-(s - c)^T (Sigma / 2 + H)^{-1} (s - c) / 2), s = (x + y) / 2.

    Args:
        base: the SE kernel k_theta: RBF (isotropic or ARD) or RBFFull.
        nu: ``"lebesgue"`` or ``"gaussian"``.
        eta: Gaussian nu with H = eta^2 I (give eta or H, not both).
        H: Gaussian nu with this (D, D) SPD matrix.
        center: (D,) centre c of the Gaussian nu (default 0).
        r_scale: ``"exact"``, or ``"unit"`` to drop the constant pi^{D/2} |Sigma|^{1/2} (the scaling of
            Flaxman et al. 2016, Appendix B).
        nu_normalised: divide by the mass (2 pi)^{D/2} |H|^{1/2} of the Gaussian nu.

    Attributes:
        base: the SE kernel k_theta.
        nu: ``"lebesgue"`` or ``"gaussian"``.
        eta: () float array for H = eta^2 I, or None.
        H: (D, D) float array, or None.
        center: (D,) float array, or None (the origin).
        r_scale: ``"exact"`` or ``"unit"``.
        nu_normalised: whether the Gaussian nu is normalised to a probability measure.

    Raises:
        TypeError: for a base kernel that is not RBF or RBFFull, or options that are not real numbers.
        ValueError: for an unknown nu or r_scale, a Gaussian nu without exactly one of eta and H, Gaussian options
            with the Lebesgue nu, or eta not positive.
    """

    _leaves = ("base", "eta", "H", "center")
    _static = ("nu", "r_scale", "nu_normalised")

    def __init__(self, base: Kernel, *, nu="lebesgue", eta=None, H=None, center=None, r_scale="exact", nu_normalised=False):
        if nu not in _NU:
            raise ValueError(f"nu must be one of {_NU}, got {nu!r}")
        if r_scale not in _R_SCALE:
            raise ValueError(f"r_scale must be one of {_R_SCALE}, got {r_scale!r}")
        if nu == "gaussian" and (eta is None) == (H is None):
            raise ValueError("nu='gaussian' needs exactly one of eta (H = eta^2 I) or H")
        if nu == "lebesgue" and (eta is not None or H is not None or center is not None or nu_normalised):
            raise ValueError("eta, H, center and nu_normalised apply only to nu='gaussian'")
        if not isinstance(base, (RBF, RBFFull)):
            raise TypeError(f"ConvolvedSE needs a squared-exponential base kernel (RBF or RBFFull), got {type(base).__name__}")
        self.base = base
        self.eta = None if eta is None else check_positive(_real(eta, "eta"), "eta")
        self.H = None if H is None else check_finite(_real(H, "H"), "H")
        self.center = None if center is None else check_finite(_real(center, "center"), "center")
        self.nu, self.r_scale, self.nu_normalised = nu, r_scale, bool(nu_normalised)

    def _log_r(self, X, Y, paired: bool):
        D = X.shape[-1]
        Ls = se_scale_tril(self.base, D)
        half_logdet_sigma = jnp.sum(jnp.log(jnp.diag(Ls)))
        Xw, Yw = _whiten(Ls, X), _whiten(Ls, Y)
        d2 = jnp.sum((Xw - Yw) ** 2, axis=-1) if paired else squared_distances(Xw, Yw)
        log_r = -0.25 * d2
        if self.r_scale == "exact":
            log_r = log_r + 0.5 * D * jnp.log(jnp.pi) + half_logdet_sigma
        if self.nu == "gaussian":
            H = self.eta**2 * jnp.eye(D) if self.H is None else self.H
            c = jnp.zeros(D) if self.center is None else jnp.broadcast_to(self.center, (D,))
            S2 = 0.5 * Ls @ Ls.T + H
            L2 = jnp.linalg.cholesky(S2)
            LH = jnp.linalg.cholesky(H)
            u, v = _whiten(L2, 0.5 * (X - c)), _whiten(L2, 0.5 * (Y - c))
            if paired:
                mid = jnp.sum((u + v) ** 2, axis=-1)
            else:
                mid = jnp.maximum(jnp.sum(u**2, 1)[:, None] + jnp.sum(v**2, 1)[None, :] + 2.0 * u @ v.T, 0.0)
            half_logdet_h = jnp.sum(jnp.log(jnp.diag(LH)))
            log_r = log_r - 0.5 * mid + half_logdet_h - jnp.sum(jnp.log(jnp.diag(L2)))
            if self.nu_normalised:
                log_r = log_r - 0.5 * D * jnp.log(2 * jnp.pi) - half_logdet_h
        return log_r

    def evaluate(self, X, Y):
        return jnp.exp(self._log_r(X, Y, paired=False))

    def evaluate_paired(self, X, Y):
        return jnp.exp(self._log_r(X, Y, paired=True))


def _real(value, name):
    """A hyperparameter of the convolved kernel as a float array (strings, objects and complex refused)."""
    return as_real_array(value, name).astype(jnp.result_type(float))
