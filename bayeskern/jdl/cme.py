"""Low-rank conditional mean embedding on the JDL bases, the comparator of JDL."""

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_matrix, check_positive, num_points
from ..conditional import ConditionalExpectation, outcome_values, weighted_expectation
from ..fitted import fitted, static
from ..kernels.base import Kernel
from .factor import RotatedBasis
from .fit import JDLBases, jdl_bases

__all__ = ["LowRankCME", "fit_cme", "simplex_qp"]


@fitted
class LowRankCME:
    """E_CME[f(Y) | X = x] = sum_k v_k(x) f(y_{p_k}), v(x) = R_Y F psi_X(x): only the m_Y Y-pivots
    carry mass, and sum_k v_k(x) need not be 1 (the normalisation error) nor v(x) >= 0.

    Attributes:
        kernel_x: kernel on X.
        kernel_y: kernel on Y.
        basis_x: rotated basis of X.
        basis_y: rotated basis of Y (its pivots carry the weights).
        F: (m_Y, m_X) coefficients.
        lam: the ridge.
        constraint: ``"unconstrained"`` or ``"normalised_positive"`` (Filipović et al. 2021, eqs. 51-52).
    """

    kernel_x: Kernel
    kernel_y: Kernel
    basis_x: RotatedBasis
    basis_y: RotatedBasis
    F: jax.Array
    lam: float
    constraint: str = static()

    def weights(self, x_query):
        """Pivot weights v(x) at query points.

        Args:
            x_query: (q, d_X) query points.

        Returns:
            (q, m_Y) array.

        Raises:
            TypeError: for queries that are not real numbers.
            ValueError: for non-finite queries or queries of another dimension than the training inputs.
        """
        return self.basis_x.evaluate(self.kernel_x, x_query, "x_query") @ (self.basis_y.R @ self.F).T

    def conditional_expectation(self, x_query, f=None) -> ConditionalExpectation:
        """sum_k v_k(x) f(y_{p_k}) at query points: linear, not self-normalised (``mass`` is sum_k v_k(x)).

        Args:
            x_query: (q, d_X) query points.
            f: a function of outcomes (k, d_Y) -> (k, ...) (applied to the m_Y pivot outcomes), its values (n, ...)
                on the training outcomes, or None (the identity).

        Returns:
            ConditionalExpectation: ``mean`` (q, ...), ``mass`` (q,), ``undefined`` all False.

        Raises:
            TypeError: for queries that are not real numbers.
            ValueError: for non-finite queries or queries of another dimension than the training inputs.
                Also for values of f that are not finite or of another length than n.
        """
        pivots = self.basis_y.pivots
        if f is None or callable(f):
            values = outcome_values(f, self.basis_y.points, pivots.shape[0], self.F.dtype)
        else:
            values = outcome_values(f, None, self.basis_y.A.shape[0], self.F.dtype)[pivots]
        return weighted_expectation(self.weights(x_query), values)

    def normalisation_error(self, x_query):
        """|E_CME[1 | x] - 1| = |sum_k v_k(x) - 1| per query point.

        Args:
            x_query: (q, d_X) query points.

        Returns:
            (q,) array.

        Raises:
            TypeError: for queries that are not real numbers.
            ValueError: for non-finite queries or queries of another dimension than the training inputs.
        """
        return jnp.abs(self.weights(x_query).sum(axis=1) - 1.0)


def fit_cme(X, Y, kernel_x: Kernel, kernel_y: Kernel, lam: float, *, constraint: str = "unconstrained",
            tol: float = 1e-3, max_rank: int | None = None, bases: JDLBases | None = None) -> LowRankCME:
    """Low-rank conditional mean embedding on the JDL bases (Filipović et al. 2021, Appendix C).

    Closed form F_kl = G_kl / (Lambda_X,l + n lam) (eq. 46); only the m_Y pivot outcomes carry weight, and the
    weights of a query need not sum to one (``mass`` of the read-out shows it).

    Args:
        X: (n, d_X) inputs (ignored when ``bases`` is given).
        Y: (n, d_Y) outcomes, row i paired with X[i].
        kernel_x: kernel on X.
        kernel_y: kernel on Y.
        lam: ridge > 0 (the system holds n lam).
        constraint: ``"unconstrained"`` or ``"normalised_positive"``: the unconditional normalisation
            1^T R_Y F b = n and positivity R_Y F b >= 0 (eqs. 51-52), solved exactly as a simplex-constrained QP
            in the K_Y[p, p] metric (always feasible).
        tol: relative trace error of the bases.
        max_rank: optional cap on the ranks.
        bases: a :func:`jdl_bases` result to reuse (X, Y, kernels and tol are then ignored).

    Returns:
        LowRankCME: ``conditional_expectation(x_query, f)``, ``weights``, ``normalisation_error``.

    Raises:
        ValueError: for an unknown constraint, lam <= 0, unpaired or non-finite inputs.
        RuntimeError: when float64 is off.
    """
    if constraint not in ("unconstrained", "normalised_positive"):
        raise ValueError(f"constraint must be 'unconstrained' or 'normalised_positive', got {constraint!r}")
    check_positive(lam, "lam")
    if bases is None:
        bases = jdl_bases(X, Y, kernel_x, kernel_y, tol=tol, max_rank=max_rank)
    bx, by = bases.basis_x, bases.basis_y
    n = num_points(bases.X)
    w = np.asarray(bx.eigenvalues) + n * lam
    G = np.asarray(by.A.T @ bx.A)
    F = G / w
    if constraint == "normalised_positive":
        b = np.asarray(bx.A.sum(axis=0))
        R_y = np.asarray(by.R)
        K_p = np.asarray(bases.kernel_y.gram(by.points))
        u0 = F @ b
        v = simplex_qp(K_p, R_y @ u0, float(n))
        u = R_y.T @ (K_p @ v)  # R_Y^{-1} = R_Y^T K_Y[p, p]
        F = F + np.outer(u - u0, b / w) / np.sum(b**2 / w)
    return LowRankCME(bases.kernel_x, bases.kernel_y, bx, by, jnp.asarray(F), float(lam), constraint)


def simplex_qp(K, v0, total: float, tol: float = 1e-12):
    """min (v - v0)^T K (v - v0) s.t. v >= 0, sum(v) = total, by a primal active-set method (finite termination).

    Args:
        K: (m, m) positive definite metric.
        v0: (m,) unconstrained target.
        total: the sum of the solution, > 0.
        tol: relative tolerance of the optimality checks.

    Returns:
        (m,) NumPy array v.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs, shapes that do not match or total not positive.
        RuntimeError: when the active set does not settle.
    """
    v0 = np.asarray(as_matrix(v0, "v0", (None,)), np.float64)
    m = v0.shape[0]
    K = np.asarray(as_matrix(K, "K", (m, m)), np.float64)
    if not total > 0:
        raise ValueError(f"total must be positive, got {total}")
    Kv0 = K @ v0
    v = np.full(m, total / m)
    free = np.ones(m, bool)
    for _ in range(50 * m + 100):
        idx = np.flatnonzero(free)
        kkt = np.zeros((idx.size + 1, idx.size + 1))
        kkt[:-1, :-1] = 2 * K[np.ix_(idx, idx)]
        kkt[:-1, -1] = kkt[-1, :-1] = 1.0
        sol = np.linalg.solve(kkt, np.r_[2 * Kv0[idx], total])
        target = np.zeros(m)
        target[idx] = sol[:-1]
        scale = tol * total
        if np.all(target[idx] >= -scale):
            v = np.maximum(target, 0.0)
            multipliers = 2 * (K @ v - Kv0) + sol[-1]  # >= 0 on the bound set at the optimum
            bound = np.flatnonzero(~free)
            if bound.size == 0 or multipliers[bound].min() >= -tol * (1 + np.abs(multipliers).max()):
                return v
            free[bound[np.argmin(multipliers[bound])]] = True
        else:
            step = target - v
            shrinking = idx[step[idx] < 0]
            ratios = v[shrinking] / -step[shrinking]
            block = shrinking[np.argmin(ratios)]
            v = v + ratios.min() * step
            v[block] = 0.0
            free[block] = False
    raise RuntimeError("simplex_qp: the active-set method did not terminate")
