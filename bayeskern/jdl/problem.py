"""The separable low-rank JDL problem: data terms, weights and positivity bounds."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_matrix, check_count, check_positive
from .factor import RotatedBasis

__all__ = ["JDLProblem", "jdl_problem", "box_bounds", "kernel_bounds", "objective"]


class JDLProblem(NamedTuple):
    """min sum(W * H**2 - 2 * Gamma * H) over H (m_Y, m_X): the JDL objective restricted to the rotated bases.

    Attributes:
        W: (m_Y, m_X) weights Lambda_Y Lambda_X^T / n^2 + lam.
        Gamma: (m_Y, m_X) data term G / n - S / n^2.
        S: (m_Y, m_X) a b^T, the normalisation <S, H> = 0.
        G: (m_Y, m_X) A_Y^T A_X.
        a: (m_Y,) A_Y^T 1.
        b: (m_X,) A_X^T 1.
        n: the sample size.
    """

    W: jnp.ndarray
    Gamma: jnp.ndarray
    S: jnp.ndarray
    G: jnp.ndarray
    a: jnp.ndarray
    b: jnp.ndarray
    n: int


def jdl_problem(basis_x: RotatedBasis, basis_y: RotatedBasis, lam, *, n: int | None = None) -> JDLProblem:
    """Assemble (W, Gamma, S) from the rotated bases of the X- and Y-samples (same n): O(n m_X m_Y).

    Args:
        basis_x: rotated basis of X.
        basis_y: rotated basis of Y.
        lam: ridge > 0.
        n: the sample size, when the factors carry zero padding rows (row-sharded data); default their row count.

    Returns:
        JDLProblem: the separable problem.

    Raises:
        TypeError: for bases that are not RotatedBasis (or PolynomialBasis) objects.
        ValueError: for bases of different sample sizes, lam not positive or n below 1.
    """
    check_bases(basis_x, basis_y)
    A_x, A_y = basis_x.A, basis_y.A
    if A_x.shape[0] != A_y.shape[0]:
        raise ValueError(f"the X and Y bases have different sample sizes ({A_x.shape[0]} and {A_y.shape[0]})")
    check_positive(lam, "lam")  # lam = 0 leaves W singular
    n = A_x.shape[0] if n is None else check_count(n, "n")
    return JDLProblem(*_separable(A_x, A_y, basis_x.eigenvalues, basis_y.eigenvalues, lam, n), n)


@jax.jit
def _separable(A_x, A_y, eig_x, eig_y, lam, n):
    """(W, Gamma, S, G, a, b) of the separable problem (see :class:`JDLProblem`)."""
    G = A_y.T @ A_x
    a, b = A_y.sum(axis=0), A_x.sum(axis=0)
    S = jnp.outer(a, b)
    return jnp.outer(eig_y, eig_x) / n**2 + lam, G / n - S / n**2, S, G, a, b


def _product_bounds(lo_y, hi_y, lo_x, hi_x):
    """Min and max of u v over u in [lo_y, hi_y], v in [lo_x, hi_x] (entrywise, outer): (27)-(28)."""
    ends = jnp.stack([jnp.outer(u, v) for u in (lo_y, hi_y) for v in (lo_x, hi_x)])
    return ends.min(axis=0), ends.max(axis=0)


def box_bounds(basis_x: RotatedBasis, basis_y: RotatedBasis, *, mask=None):
    """Bounds of A_Y[s, k] A_X[t, l] over the sample, from the column extremes of A_X and A_Y: the coefficients of
    the single-inequality positivity tightening (Filipović et al. 2021, eqs. 27-28).

    Args:
        basis_x: rotated basis of X.
        basis_y: rotated basis of Y.
        mask: optional (n,) bool, the rows to take extremes over (the real rows of row-sharded data).

    Returns:
        (C_lo, C_hi), two (m_Y, m_X) arrays.

    Raises:
        TypeError: for bases that are not RotatedBasis (or PolynomialBasis) objects.
    """
    check_bases(basis_x, basis_y)

    def extremes(A):
        keep = True if mask is None else mask[:, None]
        return jnp.where(keep, A, jnp.inf).min(axis=0), jnp.where(keep, A, -jnp.inf).max(axis=0)

    return _product_bounds(*extremes(basis_y.A), *extremes(basis_x.A))


def kernel_bounds(basis_x: RotatedBasis, basis_y: RotatedBasis, kappa_x: float = 1.0, kappa_y: float = 1.0):
    """Bounds -/+ sqrt(kappa_X kappa_Y) for kernels bounded by kappa on the diagonal: |psi_l(u)| <= sqrt(kappa)
    for every u, so the tightening guarantees 1 + h >= 0 everywhere, not only on the sample.

    Args:
        basis_x: rotated basis of X.
        basis_y: rotated basis of Y.
        kappa_x: sup of k_X(u, u), > 0.
        kappa_y: sup of k_Y(u, u), > 0.

    Returns:
        (C_lo, C_hi), two (m_Y, m_X) arrays.

    Raises:
        TypeError: for bases that are not RotatedBasis (or PolynomialBasis) objects.
        ValueError: for kappa not positive.
    """
    check_bases(basis_x, basis_y)
    check_positive(kappa_x, "kappa_x"), check_positive(kappa_y, "kappa_y")
    c = float(np.sqrt(kappa_x * kappa_y))
    shape = (basis_y.A.shape[1], basis_x.A.shape[1])
    return jnp.full(shape, -c), jnp.full(shape, c)


def objective(problem: JDLProblem, H):
    """The reduced objective sum(W H^2 - 2 Gamma H) (the regularised risk of Q_Y H Q_X^T, up to a constant).

    Args:
        problem: the JDLProblem.
        H: (m_Y, m_X) coefficients.

    Returns:
        () array.

    Raises:
        TypeError: for a problem that is not a JDLProblem or H that is not real numbers.
        ValueError: for H non-finite or of another shape.
    """
    check_problem(problem)
    H = as_matrix(H, "H", problem.W.shape)
    return jnp.sum(problem.W * H**2 - 2.0 * problem.Gamma * H)


def check_bases(basis_x, basis_y):
    """TypeError unless both bases are :class:`RotatedBasis` (from :func:`bayeskern.jdl.rotate` or ``jdl_bases``)."""
    for name, basis in (("basis_x", basis_x), ("basis_y", basis_y)):
        if not (hasattr(basis, "A") and hasattr(basis, "eigenvalues")):  # a RotatedBasis or a PolynomialBasis
            raise TypeError(f"{name} must be a RotatedBasis (jdl_bases / rotate), got {type(basis).__name__}")


def check_problem(problem):
    """TypeError unless ``problem`` is a :class:`JDLProblem` (from :func:`jdl_problem`)."""
    if not isinstance(problem, JDLProblem):
        raise TypeError(f"problem must be a JDLProblem (jdl_problem), got {type(problem).__name__}")
