"""Joint distribution learning with adaptive low-rank tensor-product kernels (spec jdl.md)."""

from .factor import PivotedCholesky, RotatedBasis, pivoted_cholesky, rotate

__all__ = ["PivotedCholesky", "RotatedBasis", "pivoted_cholesky", "rotate"]
