"""Joint distribution learning with adaptive low-rank tensor-product kernels (Filipović et al. 2021).

Pipeline: :func:`bayeskern.linalg.pivoted_cholesky` and :func:`rotate` on each side (:func:`jdl_bases`), the
separable problem (:func:`jdl_problem`), a solver and the fitted :class:`JointDistributionModel` (:func:`fit_jdl`); the
low-rank CME (:func:`fit_cme`) and kernel logistic regression (:func:`fit_klr`) share the bases.
"""

from .cme import LowRankCME, fit_cme, simplex_qp
from .factor import RotatedBasis, rotate
from .fit import CONSTRAINTS, JDLBases, fit_jdl, jdl_bases, select_hyperparameters
from .jpdl import PolynomialBasis, fit_jpdl, monomial_exponents, polynomial_basis, sos_certificate
from .klr import LowRankKLR, fit_klr
from .metrics import held_out_ratio_loss
from .model import ConditionalExpectation, JointDistributionModel, load_model
from .positivity import grid_row_minima, solve_grid_positive
from ..sharding import row_mesh, shard_rows
from .problem import JDLProblem, box_bounds, jdl_problem, kernel_bounds, objective
from .solvers import JDLSolution, positivity_margin, solve_normalised, solve_positive, solve_unconstrained

__all__ = [
    "RotatedBasis", "rotate",
    "JDLProblem", "jdl_problem", "box_bounds", "kernel_bounds", "objective",
    "JDLSolution", "solve_unconstrained", "solve_normalised", "solve_positive", "positivity_margin",
    "solve_grid_positive", "grid_row_minima",
    "JDLBases", "jdl_bases", "fit_jdl", "CONSTRAINTS", "select_hyperparameters", "held_out_ratio_loss",
    "ConditionalExpectation", "JointDistributionModel", "load_model",
    "LowRankCME", "fit_cme", "simplex_qp",
    "LowRankKLR", "fit_klr",
    "PolynomialBasis", "polynomial_basis", "monomial_exponents", "fit_jpdl", "sos_certificate",
    "row_mesh", "shard_rows",
]
