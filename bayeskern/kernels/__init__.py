"""Kernels as pytrees, and matrix-free ways to reduce their Gram matrices.

A kernel object holds hyperparameters and evaluates k on blocks of points: checked (``cross``, ``gram``, ``diag``,
``paired``) or unchecked for traced code (``evaluate``, ``evaluate_paired``). How large kernel matrices are reduced
without being formed (mat-vecs, row sums, totals, row-block reductions) is separate, in the blockwise functions.
"""

from .base import Kernel, Product, Scaled, Sum, TensorProduct
from .base import kernel_class
from .blockwise import DEFAULT_BLOCK_SIZE, block_row_reduce, kernel_matvec, kernel_row_sums, kernel_sum
from .discrete import Indicator
from .dot_product import Linear, Polynomial
from .heuristics import median_heuristic
from .stationary import (RBF, Matern12, Matern32, Matern52, RationalQuadratic, RBFFull, Stationary, se_scale_tril,
                         squared_distances)

__all__ = [
    "Kernel",
    "Sum",
    "Product",
    "Scaled",
    "TensorProduct",
    "Stationary",
    "RBF",
    "RBFFull",
    "se_scale_tril",
    "Matern12",
    "Matern32",
    "Matern52",
    "RationalQuadratic",
    "Linear",
    "Polynomial",
    "Indicator",
    "median_heuristic",
    "DEFAULT_BLOCK_SIZE",
    "block_row_reduce",
    "kernel_matvec",
    "kernel_row_sums",
    "kernel_sum",
    "squared_distances",
    "kernel_class",
]
