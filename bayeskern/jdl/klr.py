"""Low-rank kernel logistic regression on the Algorithm-1 basis, a JDL comparator."""

from functools import partial

import jax
import jax.numpy as jnp
import jaxopt

from .._config import require_x64
from .._validation import as_finite_array, as_points, check_positive, check_same_length
from ..fitted import fitted
from ..kernels.base import Kernel
from ..linalg import pivoted_cholesky
from .factor import RotatedBasis, rotate

__all__ = ["LowRankKLR", "fit_klr"]


@fitted
class LowRankKLR:
    """A low-rank kernel logistic regression cl(x) = sigmoid(psi_X(x)^T c).

    Attributes:
        kernel_x: kernel on X.
        basis_x: the rotated basis (m_X functions).
        coef: (m_X,) coefficients c; ||c||^2 is the RKHS norm of the logit.
        lam: the ridge.
    """

    kernel_x: Kernel
    basis_x: RotatedBasis
    coef: jax.Array
    lam: float

    def predict_proba(self, Xq):
        """P(label = 1 | x) at query points.

        Args:
            Xq: (q, d_X) query points.

        Returns:
            (q,) probabilities.

        Raises:
            TypeError: for queries that are not real numbers.
            ValueError: for non-finite queries or queries of another dimension than the training inputs.
        """
        return jax.nn.sigmoid(self.basis_x.evaluate(self.kernel_x, Xq, "Xq") @ self.coef)


def _penalised_loss(coef, A, labels, lam):
    z = A @ coef
    # -sum[I log sigmoid(z) + (1 - I) log(1 - sigmoid(z))] = sum softplus(z) - I z, stable for large |z|
    return jnp.sum(jax.nn.softplus(z) - labels * z) + lam * jnp.sum(coef**2)


def fit_klr(X, labels, kernel_x: Kernel, lam: float, *, tol: float = 1e-3, max_rank: int | None = None,
            basis: RotatedBasis | None = None, gtol: float = 1e-9) -> LowRankKLR:
    """Low-rank kernel logistic regression on the JDL basis of X (Filipović et al. 2021, Appendix D).

    Minimises the summed log-losses + lam ||c||^2 over c in R^{m_X} (no intercept, as written there) with
    jaxopt's L-BFGS.

    Args:
        X: (n, d_X) inputs.
        labels: (n,) labels in {0, 1}.
        kernel_x: kernel on X.
        lam: ridge > 0.
        tol: relative trace error of the basis.
        max_rank: optional cap on the rank.
        basis: a rotated basis of X to reuse (e.g. ``jdl_bases(...).basis_x``).
        gtol: gradient tolerance of L-BFGS.

    Returns:
        LowRankKLR: ``predict_proba(x_query)`` gives P(label = 1 | x).

    Raises:
        ValueError: for labels other than 0 and 1, lam <= 0, unpaired or non-finite inputs.
        RuntimeError: when float64 is off.
    """
    require_x64("fit_klr")
    X = as_points(X, "X")
    labels = as_finite_array(labels, "labels").astype(X.dtype).reshape(-1)
    check_same_length(X, labels[:, None], "X and labels")
    if not bool(jnp.all((labels == 0) | (labels == 1))):
        raise ValueError("labels must be 0 or 1")
    check_positive(lam, "lam")
    if basis is None:
        basis = rotate(pivoted_cholesky(kernel_x, X, tol=tol, max_rank=max_rank), X)
    coef = _fit_coef(basis.A, labels, jnp.asarray(lam, X.dtype), gtol)
    return LowRankKLR(kernel_x, basis, coef, float(lam))


def _scaled_loss(coef, A, labels, lam):
    return _penalised_loss(coef, A, labels, lam) / A.shape[0]  # O(1) scale for the tolerance


@partial(jax.jit, static_argnames="gtol")
def _fit_coef(A, labels, lam, gtol):
    """L-BFGS on the penalised log-loss, compiled once per basis shape (not once per call)."""
    return jaxopt.LBFGS(_scaled_loss, maxiter=5000, tol=gtol).run(jnp.zeros(A.shape[1], A.dtype), A, labels,
                                                                  lam).params
