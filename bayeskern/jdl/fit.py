"""Fitting JDL end to end: both factorisations, the rotation, the separable problem and a solver (spec jdl.md §0)."""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from .._config import require_x64
from .._validation import as_points, check_same_length
from ..kernels.base import Kernel
from ..kernels.heuristics import median_heuristic
from ..kernels.stationary import RBF
from ..linalg import pivoted_cholesky
from .factor import RotatedBasis, rotate
from .model import JointDistributionModel
from .positivity import solve_grid_positive
from .problem import box_bounds, jdl_problem, kernel_bounds
from .solvers import solve_normalised, solve_positive, solve_unconstrained

__all__ = ["select_hyperparameters", "JDLBases", "jdl_bases", "fit_jdl", "CONSTRAINTS"]

CONSTRAINTS = ("unconstrained", "normalised", "data_box", "kernel_bound", "grid")


class JDLBases(NamedTuple):
    """The training sample with its two rotated low-rank bases (reusable across lam and constraints)."""

    X: jnp.ndarray
    Y: jnp.ndarray
    kernel_x: Kernel
    kernel_y: Kernel
    basis_x: RotatedBasis
    basis_y: RotatedBasis


def jdl_bases(X, Y, kernel_x: Kernel, kernel_y: Kernel, *, tol: float = 1e-3, max_rank: int | None = None) -> JDLBases:
    """Algorithm 1 and the rotation on each side: X (n, d_X), Y (n, d_Y); relative tolerance tol in (0, 1)."""
    require_x64("jdl_bases")
    X, Y = as_points(X, "X"), as_points(Y, "Y")
    check_same_length(X, Y, "X and Y")
    if X.shape[0] < 2:
        raise ValueError(f"JDL needs at least 2 sample points, got {X.shape[0]}")
    if not 0 < tol < 1:
        raise ValueError(f"tol must lie in (0, 1), got {tol}")
    bases = [rotate(pivoted_cholesky(k, Z, tol=tol, max_rank=max_rank), Z) for k, Z in ((kernel_x, X), (kernel_y, Y))]
    return JDLBases(X, Y, kernel_x, kernel_y, *bases)


def fit_jdl(X, Y, kernel_x: Kernel, kernel_y: Kernel, lam: float, *, constraint: str = "data_box", tol: float = 1e-3,
            max_rank: int | None = None, bases: JDLBases | None = None, margin: float = 0.1) -> JointDistributionModel:
    """Fit the low-rank JDL model of the joint law of (X, Y) (spec §6-7).

    constraint: "unconstrained" (§7.1); "normalised" (§7.2, total mass 1); "data_box" (normalisation plus the
    paper's single-inequality positivity tightening (29), solved exactly (§7.3): proper conditionals wherever the
    rotated features lie in the data box, but strongly shrunk towards independence, spec §14.3); "kernel_bound"
    (normalisation plus the Cauchy-Schwarz bound |psi_l(u)| <= sqrt(k(u, u)) for kernels with a constant
    diagonal: 1 + h >= 0 everywhere, §6.4);
    "grid" (normalisation plus 1 + h >= margin on the whole training grid, by cutting planes: see
    :func:`bayeskern.jdl.solve_grid_positive`; a beyond-the-paper treatment that avoids the shrinkage of (29)). ``bases`` reuses a :func:`jdl_bases` factorisation (X, Y, kernels, tol
    are then ignored). Returns a :class:`JointDistributionModel`; its ``solution`` holds the :class:`JDLSolution`
    certificate.
    """
    if constraint not in CONSTRAINTS:
        raise ValueError(f"constraint must be one of {CONSTRAINTS}, got {constraint!r}")
    if bases is None:
        bases = jdl_bases(X, Y, kernel_x, kernel_y, tol=tol, max_rank=max_rank)
    problem = jdl_problem(bases.basis_x, bases.basis_y, lam)
    if constraint == "unconstrained":
        solution = solve_unconstrained(problem)
    elif constraint == "normalised":
        solution = solve_normalised(problem)
    elif constraint == "grid":
        solution = solve_grid_positive(problem, bases.basis_x, bases.basis_y, margin=margin)
    elif constraint == "data_box":
        solution = solve_positive(problem, *box_bounds(bases.basis_x, bases.basis_y))
    else:
        kappa = [_diagonal_bound(k, Z, name) for k, Z, name in
                 ((bases.kernel_x, bases.X, "kernel_x"), (bases.kernel_y, bases.Y, "kernel_y"))]
        solution = solve_positive(problem, *kernel_bounds(bases.basis_x, bases.basis_y, *kappa))
    model = JointDistributionModel(bases.X, bases.Y, bases.kernel_x, bases.kernel_y, bases.basis_x, bases.basis_y,
                                   jnp.asarray(solution.H), float(lam), constraint, solution)
    return model


def _diagonal_bound(kernel: Kernel, Z, name: str) -> float:
    """sup_u k(u, u) for a kernel whose diagonal is constant (stationary kernels and their scalings)."""
    diag = kernel.diag(Z[:256])
    if not bool(jnp.allclose(diag, diag[0], rtol=1e-12, atol=0.0)):
        raise ValueError(f"constraint='kernel_bound' needs a kernel with constant diagonal k(u, u); {name} varies")
    return float(diag[0])


def select_hyperparameters(X, Y, score, *, scales=(0.5, 1.0, 2.0), lams=(1e-6, 1e-4, 1e-2), tol: float = 1e-3,
                           constraint: str = "normalised"):
    """Grid search of RBF bandwidths (``scales`` x the median distance of X and of Y) and lam for JDL models
    fitted on X (n, d_X), Y (n, d_Y): one pair of bases per bandwidth pair, reused across lam.

    ``score(model) -> float`` (lower is better; NaN counts as +inf), e.g. a validation loss on held-out pairs.
    Returns ((scale_x, scale_y, lam) of the best score, {(scale_x, scale_y, lam): score}).
    """
    med_x, med_y = median_heuristic(X), median_heuristic(Y)
    scores = {}
    for sx in scales:
        for sy in scales:
            bases = jdl_bases(X, Y, RBF(sx * med_x), RBF(sy * med_y), tol=tol)
            for lam in lams:
                model = fit_jdl(None, None, None, None, lam, constraint=constraint, bases=bases)
                scores[(float(sx), float(sy), float(lam))] = float(score(model))
    best = min(scores, key=lambda k: np.nan_to_num(scores[k], nan=np.inf))
    return best, scores
