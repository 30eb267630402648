"""Low-rank kernel Bayes filters: Nystrom landmarks chosen by a trace-error rule and factored T x T maps.

With p Nystrom features Phi (T, p) of the latent kernel, G_Z ~ Phi Phi^T and every T x T map of the filter is a
product of two T x p matrices (push-through identity), e.g.
T (G_Z + T eta I)^{-1} G_Z ~ T Phi (Phi^T Phi + T eta I_p)^{-1} Phi^T, so a filter step costs O(T p) on the latent
side and O(T p^2) on the observation side, and memory is O(T p).
"""

import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .._validation import check_positive, is_concrete
from ..fitted import saveable
from ..kernels.base import Kernel
from ..linalg import pivoted_cholesky, spd_solve
from .features import select_landmarks

__all__ = ["Factored", "EXACT_MAX_T", "MAX_AUTO_RANK", "TRACE_ERROR_SHARE", "filter_landmarks", "landmark_ridges"]

EXACT_MAX_T = 500
"""``rank="auto"`` keeps the exact filter up to this many training steps and goes low rank above it."""
MAX_AUTO_RANK = 400
"""The most landmarks ``rank="auto"`` selects per kernel."""
TRACE_ERROR_SHARE = 0.01
"""``rank="auto"`` stops adding landmarks once trace(K - K_p) <= this share x the ridge's Gram coefficient."""


@saveable
class Factored(NamedTuple):
    """A T x T linear map stored as ``left @ right.T``; ``M @ w`` costs O(T p).

    Attributes:
        left: (T, p) left factor.
        right: (T, p) right factor.
    """

    left: jax.Array
    right: jax.Array

    def __matmul__(self, w):
        return self.left @ (self.right.T @ w)

    def dense(self):
        """The map as a dense matrix (for tests and small T only).

        Returns:
            (T, T) array.
        """
        return self.left @ self.right.T


def filter_landmarks(kernel_x: Kernel | None, kernel_z: Kernel, X, Z, rank, ridge_x, ridge_z):
    """Landmarks (landmarks_x, landmarks_z) of a low-rank filter, or None for the exact filter.

    ``rank=None`` is exact; an integer p takes the first p pivots of the pivoted Cholesky factorisation of each Gram
    matrix; ``"auto"`` is exact for T <= ``EXACT_MAX_T`` and otherwise adds pivots until the trace of the
    Nystrom error, an upper bound on its operator norm, is at most ``TRACE_ERROR_SHARE`` x T x ridge (the
    coefficient of the identity in the filter's Gram systems), capped at ``MAX_AUTO_RANK``. The error of each
    regularised solve is then about 1 % of the exact one. ``kernel_x=None`` (observation features given) selects
    latent landmarks only. O(T p) kernel evaluations, no T x T matrix.

    Args:
        kernel_x: observation kernel, or None when the filter has observation features.
        kernel_z: latent kernel.
        X: (T, d_x) training observations.
        Z: (T, d_z) training latents.
        rank: None, an integer p >= 1 or ``"auto"``.
        ridge_x: the observation side's ridge (:func:`landmark_ridges`).
        ridge_z: the latent side's ridge.

    Returns:
        (landmarks_x or None, landmarks_z), or None for the exact filter.

    Raises:
        ValueError: for an invalid rank, or traced hyperparameters where landmarks must be chosen.
    """
    T = Z.shape[0]
    if rank is None or (rank == "auto" and T <= EXACT_MAX_T):
        return None
    if rank != "auto" and (isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 1):
        raise ValueError(f"rank must be None, 'auto' or a positive integer, got {rank!r}")
    for value, name in ((kernel_x, "sigma_x"), (kernel_z, "sigma_z"), (ridge_x, "lam"), (ridge_z, "eta")):
        if not is_concrete(value):
            raise ValueError(f"choosing landmarks needs concrete hyperparameters ({name} is traced): under jit/grad "
                             "pass landmarks= (e.g. from kbr.filter_landmarks) or rank=None")

    def pivots(kernel, points, ridge):
        if rank != "auto":
            return select_landmarks(kernel, points, min(T, int(rank)))
        chol = pivoted_cholesky(kernel, points, tol=TRACE_ERROR_SHARE * float(ridge), max_rank=min(T, MAX_AUTO_RANK))
        return points[chol.pivots]

    landmarks_x = None if kernel_x is None else pivots(kernel_x, X, ridge_x)
    return landmarks_x, pivots(kernel_z, Z, ridge_z)


def landmark_ridges(method: str, lam, eta, lam_prime):
    """The identity coefficients (per training step) that the Nystrom errors of k_X and k_Z meet in the filter's
    systems: lam for the IW update, sqrt(lam) for the original KBR (whose system is squared), and the smaller of
    eta and lam' on the latent side.

    Args:
        method: ``"iw"`` or ``"original"``.
        lam: KBR ridge > 0.
        eta: KuLSIF ridge > 0.
        lam_prime: transition ridge > 0.

    Returns:
        (ridge_x, ridge_z).

    Raises:
        ValueError: for an unknown method or a ridge that is not positive.
    """
    if method not in ("iw", "original"):
        raise ValueError(f"method must be 'iw' or 'original', got {method!r}")
    check_positive(lam, "lam"), check_positive(eta, "eta"), check_positive(lam_prime, "lam_prime")
    return (lam if method == "iw" else jnp.sqrt(lam)), jnp.minimum(eta, lam_prime)


def factored_kulsif(Phi, eta):
    """K_eta = T (G_Z + T eta I)^{-1} G_Z with G_Z = Phi Phi^T, as T Phi A^{-1} Phi^T, A = Phi^T Phi + T eta I."""
    T, p = Phi.shape
    A = Phi.T @ Phi + T * eta * jnp.eye(p, dtype=Phi.dtype)
    return Factored(T * _right_solve(A, Phi), Phi)


def factored_transition(Phi, Phi_prev, lam_prime, first_row_zero: bool):
    """(G_prev + n lam' I)^{-1} k(Z_prev, Z) with Gram matrices from features, n = rows of Phi_prev.

    With ``first_row_zero`` (one trajectory) Phi_prev = Phi[:-1] and a zero first row is prepended.
    """
    n, p = Phi_prev.shape
    B = Phi_prev.T @ Phi_prev + n * lam_prime * jnp.eye(p, dtype=Phi.dtype)
    left = _right_solve(B, Phi_prev)
    if first_row_zero:
        left = jnp.concatenate([jnp.zeros((1, p), left.dtype), left])
    return Factored(left, Phi)


def _right_solve(A, Phi):
    """Phi A^{-1} for SPD A (p, p): (T, p)."""
    return spd_solve(A, Phi.T).T
