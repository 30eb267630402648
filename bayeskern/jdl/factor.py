"""The double-orthogonal rotation of a pivoted Cholesky factor into the JDL basis."""

from typing import NamedTuple

import jax
import numpy as np

from .._validation import check_same_dim
from ..fitted import saveable
from ..kernels.base import Kernel
from ..linalg import PivotedCholesky
from ..sharding import RowShards

__all__ = ["RotatedBasis", "rotate"]


@saveable
class RotatedBasis(NamedTuple):
    """The double-orthogonal basis psi(u) = R^T k(x_p, u): orthonormal in the RKHS and orthogonal on the training
    points (eigenvalues descending).

    Attributes:
        R: (m, m) = B_tilde V, the coefficients on the pivot points.
        A: (n, m) = L V, the basis at the training points.
        eigenvalues: (m,) Lambda, with A^T A = Lambda and Q^T K Q = I (Q = P R).
        points: (m, d) the pivot points x_p.
        pivots: (m,) their indices.
    """

    R: jax.Array
    A: jax.Array
    eigenvalues: jax.Array
    points: jax.Array
    pivots: jax.Array

    def evaluate(self, kernel: Kernel, U, name: str = "U"):
        """The basis functions psi(u) at new points, from the m pivot points only.

        Args:
            kernel: the kernel the basis was built with.
            U: (q, d) points.
            name: the argument name that error messages use.

        Returns:
            (q, m) array.

        Raises:
            TypeError: for points that are not real numbers.
            ValueError: for non-finite points or points of another dimension than the training points.
        """
        U = kernel.prepare(U, name)
        check_same_dim(U, self.points, f"{name} and the training points")
        return _basis_values(kernel, U, self.points, self.R)


def rotate(factor: PivotedCholesky, X) -> RotatedBasis:
    """Rotate a pivoted Cholesky factor by the eigenvectors of L^T L (descending; each eigenvector's entry of
    largest magnitude made positive).

    Args:
        factor: a :class:`~bayeskern.linalg.PivotedCholesky` of k(X, X).
        X: (n, d) the points it factorises (or the RowShards it was computed on).

    Returns:
        RotatedBasis: the double-orthogonal basis.

    Raises:
        TypeError: for a factor that is not a PivotedCholesky.
    """
    if not isinstance(factor, PivotedCholesky):
        raise TypeError(f"factor must be a PivotedCholesky (linalg.pivoted_cholesky), got {type(factor).__name__}")
    lam, V = np.linalg.eigh(np.asarray(_gram(factor.L)))
    lam, V = lam[::-1], V[:, ::-1]
    V = V * np.sign(V[np.argmax(np.abs(V), axis=0), np.arange(V.shape[1])])
    X = X.values if isinstance(X, RowShards) else X  # pivots index the padded rows of a RowShards
    R, A, points = _rotated(factor.B_tilde, factor.L, V, X if isinstance(X, jax.Array) else np.asarray(X),
                            factor.pivots)
    return RotatedBasis(R, A, jax.device_put(lam), points, factor.pivots)


@jax.jit
def _basis_values(kernel, U, points, R):
    return kernel.evaluate(U, points) @ R


@jax.jit
def _gram(L):
    return L.T @ L


@jax.jit
def _rotated(B_tilde, L, V, X, pivots):
    """(B_tilde V, L V, the pivot points) in one program."""
    return B_tilde @ V, L @ V, (X[:, None] if X.ndim == 1 else X)[pivots]
