"""Kernels as pytrees, and matrix-free ways to reduce their Gram matrices."""

from .base import Kernel, Product, Scaled, Sum, TensorProduct
from .blockwise import DEFAULT_BLOCK_SIZE, block_row_reduce, kernel_matvec, kernel_row_sums, kernel_sum
from .discrete import Indicator
from .dot_product import Linear, Polynomial
from .heuristics import median_heuristic
from .stationary import RBF, Matern12, Matern32, Matern52, RationalQuadratic, RBFFull, Stationary, se_scale_tril

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
]
