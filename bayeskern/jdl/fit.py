"""Fitting JDL end to end: both factorisations, the rotation, the separable problem and a solver."""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from .._config import require_x64
from .._interrupt import Interrupted
from .._validation import as_points, check_positive, check_same_length, num_points
from ..kernels.base import Kernel
from ..kernels.heuristics import median_heuristic
from ..kernels.stationary import RBF
from ..linalg import pivoted_cholesky
from ..sharding import RowShards, check_same_layout
from .factor import RotatedBasis, rotate
from .model import JointDistributionModel
from .positivity import solve_grid_positive
from .problem import box_bounds, jdl_problem, kernel_bounds
from .solvers import solve_normalised, solve_positive, solve_unconstrained

__all__ = ["select_hyperparameters", "JDLBases", "jdl_bases", "fit_jdl", "CONSTRAINTS"]

CONSTRAINTS = ("unconstrained", "normalised", "data_box", "kernel_bound", "grid")
"""The values of ``fit_jdl(constraint=...)``."""


class JDLBases(NamedTuple):
    """The training sample with its two rotated low-rank bases (reusable across lam and constraints).

    Attributes:
        X: (n, d_X) training inputs.
        Y: (n, d_Y) training outcomes.
        kernel_x: kernel on X.
        kernel_y: kernel on Y.
        basis_x: rotated basis of X (m_X functions).
        basis_y: rotated basis of Y (m_Y functions).
    """

    X: jnp.ndarray
    Y: jnp.ndarray
    kernel_x: Kernel
    kernel_y: Kernel
    basis_x: RotatedBasis
    basis_y: RotatedBasis


def jdl_bases(X, Y, kernel_x: Kernel, kernel_y: Kernel, *, tol: float = 1e-3, max_rank: int | None = None) -> JDLBases:
    """Low-rank bases of both variables: matrix-free pivoted Cholesky and the double-orthogonal rotation.

    Reuse the result across :func:`fit_jdl` / :func:`fit_cme` calls with different lambda or constraints; it is
    most of the cost of a fit (m kernel columns and O(n m^2) flops per side, memory O(n m)).

    Args:
        X: (n, d_X) float array; or a :class:`~bayeskern.sharding.RowShards` (rows spread over processes: the
            factors ``A`` stay split by rows, zero on padded rows; everything m-sized is replicated).
        Y: (n, d_Y) float array, row i paired with X[i]; a RowShards of the same layout when X is one.
        kernel_x: kernel on X.
        kernel_y: kernel on Y.
        tol: relative trace error of the factors, in (0, 1): the ranks stop growing once the residual trace is at
            most ``tol`` x trace.
        max_rank: optional cap on each rank.

    Returns:
        JDLBases: the data, the kernels and the rotated bases ``basis_x``, ``basis_y`` (ranks ``A.shape[1]``).

    Raises:
        ValueError: for unpaired or non-finite inputs, fewer than 2 points, or tol outside (0, 1).
        RuntimeError: when float64 is off.
    """
    require_x64("jdl_bases")
    X, Y = (Z.with_values(as_points(Z.values, name)) if isinstance(Z, RowShards) else as_points(Z, name)
            for Z, name in ((X, "X"), (Y, "Y")))
    check_same_length(X, Y, "X and Y")
    if isinstance(X, RowShards) or isinstance(Y, RowShards):
        check_same_layout(X, Y, "X and Y")
    if num_points(X) < 2:
        raise ValueError(f"JDL needs at least 2 sample points, got {num_points(X)}")
    if not 0 < tol < 1:
        raise ValueError(f"tol must lie in (0, 1), got {tol}")
    bases = [rotate(pivoted_cholesky(k, Z, tol=tol, max_rank=max_rank), Z) for k, Z in ((kernel_x, X), (kernel_y, Y))]
    return JDLBases(X, Y, kernel_x, kernel_y, *bases)


def fit_jdl(X, Y, kernel_x: Kernel, kernel_y: Kernel, lam: float, *, constraint: str = "data_box", tol: float = 1e-3,
            max_rank: int | None = None, bases: JDLBases | None = None, margin: float = 0.1) -> JointDistributionModel:
    """Fit the low-rank JDL model 1 + h(x, y) of the joint law of (X, Y) (Filipović et al. 2021).

    Builds pivoted-Cholesky bases of both variables (O(n m^2), no n x n matrix), the separable problem
    sum(W H^2 - 2 Gamma H) and solves it under ``constraint``.

    Args:
        X: (n, d_X) float array of inputs (ignored when ``bases`` is given).
        Y: (n, d_Y) float array of outcomes, row i paired with X[i].
        kernel_x: kernel on X (e.g. ``RBF``).
        kernel_y: kernel on Y.
        lam: ridge lambda > 0 on ||h||^2.
        constraint: ``"unconstrained"`` (closed form); ``"normalised"`` (closed form, total mass 1);
            ``"data_box"`` (normalisation plus the paper's single-inequality positivity tightening, solved exactly
            by the two-multiplier dual: proper conditionals wherever the rotated features lie in the data box, but
            strongly shrunk towards independence, see the JDL guide); ``"kernel_bound"`` (normalisation plus
            1 + h >= 0 everywhere for kernels with a constant diagonal, by |psi_l(u)| <= sqrt(k(u, u)));
            ``"grid"`` (normalisation plus 1 + h >= ``margin`` on the whole training grid, by cutting planes,
            :func:`solve_grid_positive`; avoids the shrinkage of the data-box tightening).
        tol: relative trace error of the pivoted Cholesky factors (sets the ranks m_X, m_Y).
        max_rank: optional cap on m_X and m_Y.
        bases: a :func:`jdl_bases` result to reuse (X, Y, kernels and tol are then ignored).
        margin: the grid margin of ``constraint="grid"``.

    Returns:
        JointDistributionModel: the fitted model; ``model.solution`` holds the solver's certificate
        (:class:`JDLSolution`: multipliers, normalisation and positivity residuals).

    Raises:
        ValueError: for an unknown constraint, lam <= 0, unpaired or non-finite inputs.
        RuntimeError: when float64 is off.

    Examples:
        >>> import numpy as np, bayeskern as bk
        >>> from bayeskern.jdl import fit_jdl
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(-2, 2, (400, 1)); Y = np.sin(2 * X) + 0.1 * rng.standard_normal((400, 1))
        >>> model = fit_jdl(X, Y, bk.RBF(0.4), bk.RBF(0.4), 1e-4, constraint="normalised")
        >>> abs(float(model.total_mass()) - 1) < 1e-10
        True
        >>> cond = model.conditional_expectation(np.array([[0.5]]))    # E[Y | x = 0.5] ~ sin(1)
        >>> bool(abs(float(cond.mean[0, 0]) - np.sin(1.0)) < 0.1)
        True
    """
    if constraint not in CONSTRAINTS:
        raise ValueError(f"constraint must be one of {CONSTRAINTS}, got {constraint!r}")
    check_positive(lam, "lam")
    if bases is None:
        bases = jdl_bases(X, Y, kernel_x, kernel_y, tol=tol, max_rank=max_rank)
    sharded = isinstance(bases.X, RowShards)
    if sharded and constraint == "grid":
        raise ValueError("constraint='grid' scans the training grid on one process: not available for RowShards")
    problem = jdl_problem(bases.basis_x, bases.basis_y, lam, n=num_points(bases.X))
    if constraint == "unconstrained":
        solution = solve_unconstrained(problem)
    elif constraint == "normalised":
        solution = solve_normalised(problem)
    elif constraint == "grid":
        solution = solve_grid_positive(problem, bases.basis_x, bases.basis_y, margin=margin)
    elif constraint == "data_box":
        solution = solve_positive(problem, *box_bounds(bases.basis_x, bases.basis_y,
                                                       mask=bases.X.mask if sharded else None))
    else:
        kappa = [_diagonal_bound(k, Z, name) for k, Z, name in
                 ((bases.kernel_x, bases.X, "kernel_x"), (bases.kernel_y, bases.Y, "kernel_y"))]
        solution = solve_positive(problem, *kernel_bounds(bases.basis_x, bases.basis_y, *kappa))
    model = JointDistributionModel(bases.X, bases.Y, bases.kernel_x, bases.kernel_y, bases.basis_x, bases.basis_y,
                                   jnp.asarray(solution.H), float(lam), constraint, solution)
    return model


def _diagonal_bound(kernel: Kernel, Z, name: str) -> float:
    """sup_u k(u, u) for a kernel whose diagonal is constant (stationary kernels and their scalings)."""
    diag = kernel.diag((Z.values if isinstance(Z, RowShards) else Z)[:256])  # padded rows repeat real ones
    if not bool(jnp.allclose(diag, diag[0], rtol=1e-12, atol=0.0)):
        raise ValueError(f"constraint='kernel_bound' needs a kernel with constant diagonal k(u, u); {name} varies")
    return float(diag[0])


def select_hyperparameters(X, Y, score, *, scales=(0.5, 1.0, 2.0), lams=(1e-6, 1e-4, 1e-2), tol: float = 1e-3,
                           constraint: str = "normalised"):
    """Grid search of RBF bandwidths and lambda for JDL models; one pair of bases per bandwidth pair, reused across lam.

    Args:
        X: (n, d_X) training inputs.
        Y: (n, d_Y) training outcomes.
        score: ``score(model) -> float``, lower is better (NaN counts as +inf), e.g. :func:`held_out_ratio_loss` on
            held-out pairs.
        scales: bandwidth multiples of the median distance, for X and for Y.
        lams: ridges to try.
        tol: relative trace error of the bases.
        constraint: the :func:`fit_jdl` constraint of the models scored.

    Returns:
        ((scale_x, scale_y, lam), scores): the best triple and the score of every triple.

    Raises:
        bayeskern.Interrupted: on Ctrl-C, with ``partial`` = (best triple, scores) of the settings scored so far.
    """
    med_x, med_y = median_heuristic(X), median_heuristic(Y)
    scores = {}

    def best():
        return min(scores, key=lambda k: np.nan_to_num(scores[k], nan=np.inf))

    try:
        for sx in scales:
            for sy in scales:
                bases = jdl_bases(X, Y, RBF(sx * med_x), RBF(sy * med_y), tol=tol)
                for lam in lams:
                    model = fit_jdl(None, None, None, None, lam, constraint=constraint, bases=bases)
                    scores[(float(sx), float(sy), float(lam))] = float(score(model))
    except KeyboardInterrupt:
        raise Interrupted((best(), dict(scores)) if scores else None,
                          f"select_hyperparameters: interrupted after {len(scores)} of "
                          f"{len(scales) ** 2 * len(lams)} settings") from None
    return best(), scores
