"""A fitted joint distribution model 1 + h(x, y) and its conditional read-outs."""

import jax
import jax.numpy as jnp

from ..conditional import ConditionalExpectation, outcome_values, self_normalised_expectation
from .._validation import num_points
from ..fitted import fitted, load_as, static
from ..kernels.base import Kernel
from ..sharding import RowShards
from .factor import RotatedBasis
from .positivity import grid_row_minima

__all__ = ["ConditionalExpectation", "JointDistributionModel", "load_model"]


@fitted
class JointDistributionModel:
    """Radon-Nikodym model 1 + h(x, y), h = psi_Y(y)^T H psi_X(x), of the joint law w.r.t. the product of the
    empirical marginals.

    X: (n, d_X), Y: (n, d_Y) the training sample; basis_x, basis_y: the rotated bases (m_X and m_Y functions);
    H: (m_Y, m_X) coefficients; lam, constraint: how H was fitted (see :func:`bayeskern.jdl.fit_jdl`);
    solution: the solver's :class:`bayeskern.jdl.JDLSolution` (multipliers and certificate), when fitted here.
    """

    X: jax.Array
    Y: jax.Array
    kernel_x: Kernel
    kernel_y: Kernel
    basis_x: RotatedBasis
    basis_y: RotatedBasis
    H: jax.Array
    lam: float
    constraint: str = static()
    solution: object = None

    @property
    def n(self) -> int:
        return num_points(self.X)

    def _on_real_rows(self, values):
        """Zero an n-sized result on the padded rows of row-sharded training data (a no-op otherwise)."""
        if not isinstance(self.X, RowShards):
            return values
        return jnp.where(self.X.mask.reshape((-1,) + (1,) * (values.ndim - 1)), values, 0.0)

    def _outcomes(self, f, sample, name):
        if isinstance(sample, RowShards):
            return self._on_real_rows(outcome_values(f, sample.values, sample.values.shape[0], self.H.dtype, name))
        return outcome_values(f, sample, self.n, self.H.dtype, name)

    # --- basis functions ------------------------------------------------------
    def features_x(self, Xq, name: str = "Xq"):
        """psi_X at query points: (q, m_X), from m_X kernel evaluations per point."""
        return self.basis_x.evaluate(self.kernel_x, Xq, name)

    def features_y(self, Yq, name: str = "Yq"):
        """psi_Y at query points: (q, m_Y)."""
        return self.basis_y.evaluate(self.kernel_y, Yq, name)

    # --- conditional expectations ---------------------------------------------
    def conditional_expectation(self, x_query, f=None) -> ConditionalExpectation:
        """E_Q[f(Y) | X = x] at query points x_query (q, d_X) (self-normalised), O(m_X^2 + m_X m_Y + m_Y k) per
        point.

        f: a function of the training outcomes Y (n, d_Y) -> (n, ...), or its values (n, ...) on them; default
        the identity (the conditional mean of Y). With row-sharded training data (RowShards) pass a function. ``mean`` has shape (q, ...); ``mass`` is the total mass
        sum_j (1 + h(x, y_j)) / n (1 for an exactly normalised conditional).
        """
        F = self._outcomes(f, self.Y, "f")
        return self._expect(self.features_x(x_query, "x_query"), F, self.basis_y.A, self.H)

    def conditional_expectation_given_y(self, y_query, g=None) -> ConditionalExpectation:
        """E_Q[g(X) | Y = y] at query points y_query (q, d_Y): the roles of X and Y swapped."""
        G = self._outcomes(g, self.X, "g")
        return self._expect(self.features_y(y_query, "y_query"), G, self.basis_x.A, self.H.T)

    def _expect(self, Psi, F, A_out, H):
        flat = F.reshape(F.shape[0], -1)
        # per-f precomputation O(n m k): Omega = F^T A_out H (k, m_in) and omega = H^T A_out^T 1 (m_in,)
        omega = H.T @ A_out.sum(axis=0)
        Omega = (flat.T @ A_out) @ H
        numerator = (flat.sum(axis=0) + Psi @ Omega.T) / self.n
        return self_normalised_expectation(numerator.reshape((Psi.shape[0],) + F.shape[1:]), 1.0 + Psi @ omega / self.n)

    def conditional_weights(self, x_query) -> ConditionalExpectation:
        """The conditional law of Y given X = x on the training outcomes: mean (q, n) holds the weights
        (1 + h(x, y_j)) / sum_j (1 + h(x, y_j)) (summing to 1; negative entries are positivity violations).
        O(q n) memory."""
        W = (1.0 + self.features_x(x_query, "x_query") @ self.H.T @ self.basis_y.A.T) / self.n
        W = self._on_real_rows(W.T).T
        return self_normalised_expectation(W, W.sum(axis=1))

    def density_ratio(self, Xq, Yq):
        """1 + h(x_i, y_i) for aligned query pairs: (q,)."""
        return 1.0 + jnp.sum((self.features_y(Yq) @ self.H) * self.features_x(Xq), axis=1)

    # --- grid quantities ----------------------------------------------------------
    def marginal_x(self):
        """Q_X({x_i}) = (1 + (A_X H^T a)_i / n) / n: (n,) masses of the training x's (4)."""
        a = self.basis_y.A.sum(axis=0)
        return self._on_real_rows((1.0 + self.basis_x.A @ (self.H.T @ a) / self.n) / self.n)

    def marginal_y(self):
        """Q_Y({y_j}) = (1 + (A_Y H b)_j / n) / n: (n,) masses of the training y's (4)."""
        b = self.basis_x.A.sum(axis=0)
        return self._on_real_rows((1.0 + self.basis_y.A @ (self.H @ b) / self.n) / self.n)

    def total_mass(self):
        """Q(Z) = 1 + <S, H> / n^2 (= 1 for a normalised model)."""
        a, b = self.basis_y.A.sum(axis=0), self.basis_x.A.sum(axis=0)
        return 1.0 + a @ self.H @ b / self.n**2

    def min_grid_weight(self, block_size: int = 1024):
        """min over the training grid of 1 + h(x_i, y_j), in row blocks: O(n^2 m_Y) time, O(n block) memory."""
        if isinstance(self.X, RowShards):
            raise ValueError("min_grid_weight scans the training grid on one process: not available for RowShards")
        return float(grid_row_minima(self.H, self.basis_x, self.basis_y, block_size)[0].min())


def load_model(path) -> JointDistributionModel:
    """Read a JDL/JPDL model saved with ``model.save(path)`` (an alias of :func:`bayeskern.load`)."""
    return load_as(path, JointDistributionModel)
