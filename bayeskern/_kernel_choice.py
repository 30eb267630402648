"""How the hypothesis tests turn a ``kernel`` argument into a kernel: given, median heuristic or BKL."""

from .kernels.base import Kernel
from .kernels.heuristics import median_heuristic
from .kernels.stationary import RBF

__all__ = ["choose_kernel"]


def choose_kernel(kernel, X, Y=None, *, key=None, what: str = "kernel") -> Kernel:
    """``kernel``: a Kernel (returned as is), None or "median" (RBF with the median-heuristic
    lengthscale of the pooled sample) or "bkl" (RBF with the type-II ML lengthscale of the
    BKE pseudolikelihood, :func:`bayeskern.inference.bkl_kernel`; needs ``key``)."""
    if isinstance(kernel, Kernel):
        return kernel
    if kernel is None or kernel == "median":
        return RBF(median_heuristic(X, Y))
    if kernel == "bkl":
        if key is None:
            raise ValueError(f"{what}='bkl' needs a PRNG key (key=...) to choose the held-out inducing points")
        from bayeskern.inference.bkl import bkl_kernel  # the inference subpackage builds on this one

        return bkl_kernel(X, Y, key=key)
    raise ValueError(f"{what} must be a Kernel, None, 'median' or 'bkl', got {kernel!r}")
