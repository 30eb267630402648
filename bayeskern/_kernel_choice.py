"""How the hypothesis tests turn a ``kernel`` argument into a kernel: given, median heuristic, or a learned rule."""

from .kernels.base import Kernel
from .kernels.heuristics import median_heuristic
from .kernels.stationary import RBF

__all__ = ["choose_kernel"]


def choose_kernel(kernel, X, Y=None, *, key=None, what: str = "kernel") -> Kernel:
    """``kernel``: a Kernel (returned as is), None or "median" (RBF with the median-heuristic lengthscale of the
    pooled sample), or a kernel rule ``rule(X, Y, *, key) -> Kernel`` that learns the kernel from the unlabelled
    (pooled) sample, e.g. :func:`bayeskern.inference.bkl_kernel` (needs ``key``)."""
    if isinstance(kernel, Kernel):
        return kernel
    if kernel is None or (isinstance(kernel, str) and kernel == "median"):
        return RBF(median_heuristic(X, Y))
    if callable(kernel):
        if key is None:
            raise ValueError(f"a learned {what} rule needs a PRNG key (key=...), e.g. to hold out inducing points")
        learned = kernel(X, Y, key=key)
        if not isinstance(learned, Kernel):
            raise TypeError(f"the {what} rule returned a {type(learned).__name__}, not a Kernel")
        return learned
    raise ValueError(f"{what} must be a Kernel, None, 'median' or a kernel rule such as "
                     f"bayeskern.inference.bkl_kernel, got {kernel!r}")
