"""How the hypothesis tests turn a ``kernel`` argument into a kernel or a kernel collection: given, median
heuristic, a learned rule, or a named rule that a method family registers (``"bayes"``, by :mod:`bayeskern.bke`)."""

import numpy as np

from ._validation import num_distinct_rows
from .aggregate import KernelCollection
from .kernels.base import Kernel
from .kernels.heuristics import median_heuristic
from .kernels.stationary import RBF

__all__ = ["choose_kernel", "register_named_rule"]

_NAMED_RULES: dict[str, dict] = {}


def register_named_rule(name: str, *, two_sample, marginal) -> None:
    """Make ``kernel=name`` in the tests stand for a rule: ``two_sample`` on the pooled sample of a two-sample test,
    ``marginal`` on each variable of an independence test (each ``rule(X, Y=None, *, key)``)."""
    _NAMED_RULES[name] = dict(two_sample=two_sample, marginal=marginal)


def choose_kernel(kernel, X, Y=None, *, key=None, what: str = "kernel", role: str = "two_sample"):
    """``kernel``: a Kernel or KernelCollection (returned as is), None or "median" (RBF with the median-heuristic
    lengthscale of the pooled sample), a registered name such as "bayes", or a kernel rule
    ``rule(X, Y, *, key) -> Kernel | KernelCollection`` that learns from the unlabelled (pooled) sample, e.g.
    :func:`bayeskern.inference.bkl_kernel` (needs ``key``). ``role`` picks a named rule's two-sample or marginal
    form."""
    if isinstance(kernel, (Kernel, KernelCollection)):
        return kernel
    if kernel is None or (isinstance(kernel, str) and kernel == "median"):
        pooled = X if Y is None else np.concatenate([np.asarray(X), np.asarray(Y)])
        if num_distinct_rows(pooled) < 2:   # one repeated point: no scale, and every kernel gives statistics 0
            return RBF(1.0)
        return RBF(median_heuristic(X, Y))
    if isinstance(kernel, str) and kernel in _NAMED_RULES:
        kernel = _NAMED_RULES[kernel][role]
    if callable(kernel) and not isinstance(kernel, str):
        if key is None:
            raise ValueError(f"a learned {what} rule needs a PRNG key (key=...), e.g. to hold out inducing points")
        learned = kernel(X, Y, key=key)
        if not isinstance(learned, (Kernel, KernelCollection)):
            raise TypeError(f"the {what} rule returned a {type(learned).__name__}, not a Kernel or KernelCollection")
        return learned
    names = ", ".join(repr(n) for n in ("median", *_NAMED_RULES))
    raise ValueError(f"{what} must be a Kernel, a KernelCollection, None, one of {names} or a kernel rule such as "
                     f"bayeskern.inference.bkl_kernel, got {kernel!r}")
