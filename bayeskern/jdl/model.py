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

    Attributes:
        X: (n, d_X) training inputs (or a RowShards).
        Y: (n, d_Y) training outcomes, row i paired with X[i].
        kernel_x: the kernel on X (None for polynomial JPDL bases).
        kernel_y: the kernel on Y (None for polynomial JPDL bases).
        basis_x: the rotated basis of m_X functions on X.
        basis_y: the rotated basis of m_Y functions on Y.
        H: (m_Y, m_X) coefficients.
        lam: the ridge H was fitted with.
        constraint: the constraint H was fitted under (see :func:`bayeskern.jdl.fit_jdl`).
        solution: the solver's :class:`bayeskern.jdl.JDLSolution` (multipliers and certificate), when fitted here.
        n: the number of training pairs.
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
        """The number of training pairs."""
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
        """The basis functions psi_X at query points, from m_X kernel evaluations per point.

        Args:
            Xq: (q, d_X) query points.
            name: the argument name that error messages use.

        Returns:
            (q, m_X) array.

        Raises:
            TypeError: for queries that are not real numbers.
            ValueError: for non-finite queries or queries of another dimension than the training points.
        """
        return self.basis_x.evaluate(self.kernel_x, Xq, name)

    def features_y(self, Yq, name: str = "Yq"):
        """The basis functions psi_Y at query points.

        Args:
            Yq: (q, d_Y) query points.
            name: the argument name that error messages use.

        Returns:
            (q, m_Y) array.

        Raises:
            TypeError: for queries that are not real numbers.
            ValueError: for non-finite queries or queries of another dimension than the training points.
        """
        return self.basis_y.evaluate(self.kernel_y, Yq, name)

    # --- conditional expectations ---------------------------------------------
    def conditional_expectation(self, x_query, f=None) -> ConditionalExpectation:
        """E_Q[f(Y) | X = x] at query points (self-normalised), O(m_X^2 + m_X m_Y + m_Y k) per point.

        Args:
            x_query: (q, d_X) query points.
            f: a function of the training outcomes Y (n, d_Y) -> (n, ...), or its values (n, ...) on them; default
                the identity (the conditional mean of Y). With row-sharded training data pass a function.

        Returns:
            ConditionalExpectation: ``mean`` (q, ...); ``mass`` the total mass sum_j (1 + h(x, y_j)) / n (1 for an
            exactly normalised conditional); ``undefined`` where it vanishes.

        Raises:
            TypeError: for queries or values of the test function that are not real numbers.
            ValueError: for non-finite queries or values, queries of another dimension, or values of another
                length than n (or values instead of a function with row-sharded data).
        """
        F = self._outcomes(f, self.Y, "f")
        return self._expect(self.features_x(x_query, "x_query"), F, self.basis_y.A, self.H)

    def conditional_expectation_given_y(self, y_query, g=None) -> ConditionalExpectation:
        """E_Q[g(X) | Y = y] at query points: :meth:`conditional_expectation` with the roles of X and Y swapped.

        Args:
            y_query: (q, d_Y) query points.
            g: a function of the training inputs X (n, d_X) -> (n, ...), or its values; default the identity.

        Returns:
            ConditionalExpectation: ``mean`` (q, ...), ``mass`` and ``undefined`` as for the other direction.

        Raises:
            TypeError: for queries or values of the test function that are not real numbers.
            ValueError: for non-finite queries or values, queries of another dimension, or values of another
                length than n (or values instead of a function with row-sharded data).
        """
        G = self._outcomes(g, self.X, "g")
        return self._expect(self.features_y(y_query, "y_query"), G, self.basis_x.A, self.H.T)

    def _expect(self, Psi, F, A_out, H):
        return self_normalised_expectation(*_numerator_and_mass(Psi, F, A_out, H, self.n))

    def conditional_weights(self, x_query) -> ConditionalExpectation:
        """The conditional law of Y given X = x on the training outcomes, O(q n) memory.

        Args:
            x_query: (q, d_X) query points.

        Returns:
            ConditionalExpectation: ``mean`` (q, n) holds the weights (1 + h(x, y_j)) / sum_j (1 + h(x, y_j))
            (summing to 1; negative entries are positivity violations).

        Raises:
            TypeError: for queries that are not real numbers.
            ValueError: for non-finite queries or queries of another dimension than the training points.
        """
        W = (1.0 + self.features_x(x_query, "x_query") @ self.H.T @ self.basis_y.A.T) / self.n
        W = self._on_real_rows(W.T).T
        return self_normalised_expectation(W, W.sum(axis=1))

    def density_ratio(self, Xq, Yq):
        """The density ratio 1 + h(x_i, y_i) at aligned query pairs.

        Args:
            Xq: (q, d_X) query inputs.
            Yq: (q, d_Y) query outcomes, row i paired with Xq[i].

        Returns:
            (q,) array.

        Raises:
            TypeError: for queries that are not real numbers.
            ValueError: for non-finite queries or queries of another dimension than the training points.
        """
        return 1.0 + jnp.sum((self.features_y(Yq) @ self.H) * self.features_x(Xq), axis=1)

    # --- grid quantities ----------------------------------------------------------
    def marginal_x(self):
        """The model's marginal masses of the training inputs, Q_X({x_i}) = (1 + (A_X H^T a)_i / n) / n.

        Returns:
            (n,) array.
        """
        a = self.basis_y.A.sum(axis=0)
        return self._on_real_rows((1.0 + self.basis_x.A @ (self.H.T @ a) / self.n) / self.n)

    def marginal_y(self):
        """The model's marginal masses of the training outcomes, Q_Y({y_j}) = (1 + (A_Y H b)_j / n) / n.

        Returns:
            (n,) array.
        """
        b = self.basis_x.A.sum(axis=0)
        return self._on_real_rows((1.0 + self.basis_y.A @ (self.H @ b) / self.n) / self.n)

    def total_mass(self):
        """The model's total mass Q(Z) = 1 + <S, H> / n^2 (1 for a normalised model).

        Returns:
            () array.
        """
        a, b = self.basis_y.A.sum(axis=0), self.basis_x.A.sum(axis=0)
        return 1.0 + a @ self.H @ b / self.n**2

    def min_grid_weight(self, block_size: int = 1024):
        """The smallest density ratio 1 + h(x_i, y_j) over the training grid, in row blocks: O(n^2 m_Y) time,
        O(n block_size) memory.

        Args:
            block_size: rows per block.

        Returns:
            float.

        Raises:
            TypeError: for block_size not an integer.
            ValueError: for row-sharded training data (the grid is scanned on one process) or block_size below 1.
        """
        if isinstance(self.X, RowShards):
            raise ValueError("min_grid_weight scans the training grid on one process: not available for RowShards")
        return float(grid_row_minima(self.H, self.basis_x, self.basis_y, block_size)[0].min())


def load_model(path) -> JointDistributionModel:
    """Read a JDL/JPDL model saved with ``model.save(path)``: :func:`bayeskern.load` that checks the class.

    Args:
        path: the ``.npz`` file.

    Returns:
        JointDistributionModel: the model.

    Raises:
        FileNotFoundError: when the file does not exist.
        FileFormatError: for a file holding anything else, or not a bayeskern save.
    """
    return load_as(path, JointDistributionModel)


@jax.jit
def _numerator_and_mass(Psi, F, A_out, H, n):
    """The self-normalised estimator's numerator (q, ...) and mass (q,), with the per-f precomputation O(n m k):
    Omega = F^T A_out H (k, m_in) and omega = H^T A_out^T 1 (m_in,)."""
    flat = F.reshape(F.shape[0], -1)
    omega = H.T @ A_out.sum(axis=0)
    Omega = (flat.T @ A_out) @ H
    numerator = (flat.sum(axis=0) + Psi @ Omega.T) / n
    return numerator.reshape((Psi.shape[0],) + F.shape[1:]), 1.0 + Psi @ omega / n
