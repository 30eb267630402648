"""A fitted joint distribution model 1 + h(x, y) and its conditional read-outs (spec jdl.md §8)."""

import dataclasses
import json
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..kernels.base import Kernel
from ..kernels.serialise import kernel_from_state, kernel_state
from .factor import RotatedBasis
from .positivity import grid_row_minima

__all__ = ["ConditionalExpectation", "JointDistributionModel", "load_model", "zero_denominator_threshold"]


def zero_denominator_threshold(n: int) -> float:
    """|denominator| <= 1e-12 n marks a conditional as undefined (spec §2.2)."""
    return 1e-12 * n


class ConditionalExpectation(NamedTuple):
    """E[f | conditioning point] for q query points.

    mean: (q, ...) the self-normalised expectation, NaN where undefined; denominator: (q,) the total mass
    sum_j (1 + h(x, y_j)) (n for an exactly normalised conditional); undefined: (q,) bool, |denominator| <=
    1e-12 n (the conditional has (numerically) zero mass and cannot be normalised).
    """

    mean: jax.Array
    denominator: jax.Array
    undefined: jax.Array


def _ratio(numerator, denominator, n):
    undefined = jnp.abs(denominator) <= zero_denominator_threshold(n)
    safe = jnp.where(undefined, 1.0, denominator)
    shape = (-1,) + (1,) * (numerator.ndim - 1)
    mean = jnp.where(undefined.reshape(shape), jnp.nan, numerator / safe.reshape(shape))
    return ConditionalExpectation(mean, denominator, undefined)


@dataclasses.dataclass(frozen=True)
class JointDistributionModel:
    """Radon-Nikodym model 1 + h(x, y), h = psi_Y(y)^T H psi_X(x), of the joint law w.r.t. the product of the
    empirical marginals (spec §2, §6).

    X: (n, d_X), Y: (n, d_Y) the training sample; basis_x, basis_y: the rotated bases (m_X and m_Y functions);
    H: (m_Y, m_X) coefficients; lam, constraint: how H was fitted (see :func:`bayeskern.jdl.fit_jdl`).
    """

    X: jax.Array
    Y: jax.Array
    kernel_x: Kernel
    kernel_y: Kernel
    basis_x: RotatedBasis
    basis_y: RotatedBasis
    H: jax.Array
    lam: float
    constraint: str

    @property
    def n(self) -> int:
        return self.X.shape[0]

    # --- basis functions ------------------------------------------------------
    def features_x(self, Xq):
        """psi_X at query points: (q, m_X), from m_X kernel evaluations per point."""
        return self.basis_x.evaluate(self.kernel_x, Xq)

    def features_y(self, Yq):
        """psi_Y at query points: (q, m_Y)."""
        return self.basis_y.evaluate(self.kernel_y, Yq)

    # --- conditional expectations ---------------------------------------------
    def _values(self, f, sample, name):
        values = f(sample) if callable(f) else jnp.asarray(f)
        values = jnp.asarray(values, dtype=self.H.dtype)
        if values.ndim == 0 or values.shape[0] != self.n:
            raise ValueError(f"{name} must hold one value per training point (leading axis {self.n}), "
                             f"got shape {values.shape}")
        if not bool(jnp.all(jnp.isfinite(values))):
            raise ValueError(f"{name} contains non-finite values")
        return values

    def conditional_expectation(self, Xq, f=None) -> ConditionalExpectation:
        """E_Q[f(Y) | X = x] for query points Xq (q, d_X) (spec §8.1), O(m_X^2 + m_X m_Y + m_Y k) per point.

        f: a function of the training outcomes Y (n, d_Y) -> (n, ...) or its values (n, ...) on them; default
        the identity (the conditional mean of Y). The result has shape (q, ...).
        """
        F = self._values(_identity if f is None else f, self.Y, "f")
        return self._expect(self.features_x(Xq), F, self.basis_y.A, self.H)

    def conditional_expectation_given_y(self, Yq, g=None) -> ConditionalExpectation:
        """E_Q[g(X) | Y = y] for query points Yq (q, d_Y) (spec §8.2): the roles of X and Y swapped."""
        G = self._values(_identity if g is None else g, self.X, "g")
        return self._expect(self.features_y(Yq), G, self.basis_x.A, self.H.T)

    def _expect(self, Psi, F, A_out, H):
        flat = F.reshape(self.n, -1)
        # per-f precomputation O(n m k): Omega = F^T A_out H (k, m_in) and omega = H^T A_out^T 1 (m_in,)
        omega = H.T @ A_out.sum(axis=0)
        Omega = (flat.T @ A_out) @ H
        numerator = flat.sum(axis=0) + Psi @ Omega.T
        denominator = self.n + Psi @ omega
        result = _ratio(numerator, denominator, self.n)
        return result._replace(mean=result.mean.reshape((Psi.shape[0],) + F.shape[1:]))

    def conditional_weights(self, Xq) -> ConditionalExpectation:
        """The conditional law of Y given X = x on the training outcomes: mean (q, n) holds the weights
        (1 + h(x, y_j)) / denominator (summing to 1; negative entries are positivity violations). O(q n) memory."""
        W = 1.0 + self.features_x(Xq) @ self.H.T @ self.basis_y.A.T
        return _ratio(W, W.sum(axis=1), self.n)

    def density_ratio(self, Xq, Yq):
        """1 + h(x_i, y_i) for aligned query pairs: (q,)."""
        return 1.0 + jnp.sum((self.features_y(Yq) @ self.H) * self.features_x(Xq), axis=1)

    # --- grid quantities ----------------------------------------------------------
    def marginal_x(self):
        """Q_X({x_i}) = (1 + (A_X H^T a)_i / n) / n: (n,) masses of the training x's (4)."""
        a = self.basis_y.A.sum(axis=0)
        return (1.0 + self.basis_x.A @ (self.H.T @ a) / self.n) / self.n

    def marginal_y(self):
        """Q_Y({y_j}) = (1 + (A_Y H b)_j / n) / n: (n,) masses of the training y's (4)."""
        b = self.basis_x.A.sum(axis=0)
        return (1.0 + self.basis_y.A @ (self.H @ b) / self.n) / self.n

    def total_mass(self):
        """Q(Z) = 1 + <S, H> / n^2 (= 1 for a normalised model)."""
        a, b = self.basis_y.A.sum(axis=0), self.basis_x.A.sum(axis=0)
        return 1.0 + a @ self.H @ b / self.n**2

    def min_grid_weight(self, block_size: int = 1024):
        """min over the training grid of 1 + h(x_i, y_j), in row blocks: O(n^2 m_Y) time, O(n block) memory."""
        return float(grid_row_minima(self.H, self.basis_x, self.basis_y, block_size)[0].min())

    # --- persistence -------------------------------------------------------------
    def save(self, path) -> None:
        """Write the model to an ``.npz`` file; :func:`load_model` restores it exactly."""
        arrays = {f"basis_x_{k}": np.asarray(v) for k, v in self.basis_x._asdict().items()}
        arrays |= {f"basis_y_{k}": np.asarray(v) for k, v in self.basis_y._asdict().items()}
        meta = {"lam": float(self.lam), "constraint": self.constraint, "kernel_x": kernel_state(self.kernel_x),
                "kernel_y": kernel_state(self.kernel_y), "basis": type(self.basis_x).__name__, "format": 1}
        np.savez(path, X=np.asarray(self.X), Y=np.asarray(self.Y), H=np.asarray(self.H), meta=json.dumps(meta),
                 **arrays)


def _identity(V):
    """The default test function f(v) = v."""
    return V


def load_model(path) -> JointDistributionModel:
    """Read a model written by :meth:`JointDistributionModel.save`."""
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
        from .jpdl import PolynomialBasis

        kind = {"RotatedBasis": RotatedBasis, "PolynomialBasis": PolynomialBasis}[meta["basis"]]
        basis = {side: kind(*(data[f"basis_{side}_{k}"] if k == "exponents" else jnp.asarray(data[f"basis_{side}_{k}"])
                              for k in kind._fields)) for side in ("x", "y")}
        return JointDistributionModel(jnp.asarray(data["X"]), jnp.asarray(data["Y"]),
                                      kernel_from_state(meta["kernel_x"]), kernel_from_state(meta["kernel_y"]),
                                      basis["x"], basis["y"], jnp.asarray(data["H"]), meta["lam"], meta["constraint"])
