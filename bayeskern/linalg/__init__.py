"""Linear algebra for kernel matrices: jittered Cholesky factors and solves, and the pivoted Cholesky factor."""

from .dense import CholeskyError, cho_solve_psd, cholesky, jittered_cholesky, logdet_from_cholesky, spd_solve, whiten
from .pivoted import PivotedCholesky, pivoted_cholesky

__all__ = ["CholeskyError", "jittered_cholesky", "cholesky", "cho_solve_psd", "spd_solve", "logdet_from_cholesky",
           "whiten", "PivotedCholesky", "pivoted_cholesky"]
