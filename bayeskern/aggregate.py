"""Aggregated kernel tests: a weighted collection of kernels, chosen without the labels, and one permutation null.

A test statistic is computed for every kernel of the collection on the observed labelling and on B random
relabellings (the same relabellings for every kernel). Each kernel's statistic becomes a permutation p-value p_k
among those B + 1 values, and the aggregated statistic is max_k log(w_k / p_k): a weighted minimum of p-values,
so a kernel with more prior weight needs less evidence. The aggregated statistic of every relabelling is computed
the same way, and its p-value is the rank of the observed one. As the collection depends on the pooled sample only
(never on which point came from which sample), the B + 1 labellings are exchangeable under the null and the level
is exact for any data, whatever the collection.
"""

from dataclasses import dataclass, field

import numpy as np

from .kernels.base import Kernel
from .kernels.stationary import RBF, Matern12
from .testresult import HypothesisTestResult, tie_tolerance

__all__ = ["KernelCollection", "AggregatedTestResult", "aggregate_statistics"]

FAMILIES = {"gaussian": RBF, "exponential": Matern12}


@dataclass(frozen=True)
class KernelCollection:
    """Kernels and their prior weights for an aggregated test.

    Attributes:
        kernels: the K kernels.
        weights: (K,) positive weights summing to 1.
        labels: K short descriptions (family, lengthscale, where it came from).

    Raises:
        ValueError: for an empty collection, lengths that differ, or weights that are not positive and finite.
        TypeError: for an entry that is not a Kernel.
    """

    kernels: tuple
    weights: np.ndarray
    labels: tuple

    def __post_init__(self):
        kernels, weights = tuple(self.kernels), np.asarray(self.weights, float)
        if not kernels or weights.shape != (len(kernels),) or len(self.labels) != len(kernels):
            raise ValueError(f"kernels, weights and labels must have one common length >= 1, got {len(kernels)}, "
                             f"{weights.shape} and {len(self.labels)}")
        if not all(isinstance(k, Kernel) for k in kernels):
            raise TypeError("every entry of kernels must be a bayeskern Kernel")
        if not (np.all(np.isfinite(weights)) and np.all(weights > 0)):
            raise ValueError(f"weights must be positive and finite, got {weights}")
        object.__setattr__(self, "kernels", kernels)
        object.__setattr__(self, "weights", weights / weights.sum())
        object.__setattr__(self, "labels", tuple(self.labels))

    def __len__(self):
        return len(self.kernels)

    @classmethod
    def single(cls, kernel: Kernel, label: str = "given") -> "KernelCollection":
        """A collection of one kernel (the aggregated test is then the plain permutation test).

        Args:
            kernel: the kernel.
            label: its description.

        Returns:
            KernelCollection: weight 1 on ``kernel``.

        Raises:
            TypeError: for a kernel that is not a Kernel.
        """
        return cls((kernel,), np.ones(1), (label,))


def aggregate_statistics(stats, weights):
    """The weighted minimum-p aggregation of per-kernel permutation statistics.

    Args:
        stats: (B + 1, K) statistics, row 0 the observed labelling, rows 1.. the relabellings.
        weights: (K,) positive kernel weights.

    Returns:
        (aggregated, p_values): (B + 1,) values max_k log(w_k / p_bk) and the (B + 1, K) per-kernel permutation
        p-values p_bk = #{b' : T_b'k >= T_bk} / (B + 1), statistics within ``TIES_RTOL`` of each other counted as ties
        (see :func:`bayeskern.testresult.permutation_p_value`).

    Raises:
        ValueError: for stats that are not (B + 1, K) with K weights, or non-finite statistics.
    """
    stats, weights = np.asarray(stats, float), np.asarray(weights, float)
    if stats.ndim != 2 or weights.shape != (stats.shape[1],):
        raise ValueError(f"stats must be (B + 1, K) with K weights, got {stats.shape} and {weights.shape}")
    if not np.all(np.isfinite(stats)):
        raise ValueError("the per-kernel statistics are not all finite")
    B1 = stats.shape[0]
    ordered = np.sort(stats, axis=0)
    p = np.empty_like(stats)
    for k in range(stats.shape[1]):
        p[:, k] = (B1 - np.searchsorted(ordered[:, k], stats[:, k] - tie_tolerance(stats[:, k]), side="left")) / B1
    return np.max(np.log(weights)[None, :] - np.log(p), axis=1), p


@dataclass(frozen=True)
class AggregatedTestResult(HypothesisTestResult):
    """Outcome of an aggregated test: the overall p-value and what each kernel contributed.

    Attributes:
        statistic: the aggregated statistic max_k log(w_k / p_k).
        p_value: its permutation p-value (1 + #{S_b >= S}) / (1 + B).
        method: ``"permutation"``.
        null_samples: (B,) the aggregated statistic on the relabellings.
        kernels: the K kernels (for an independence test, (kx, ky) pairs).
        weights: (K,) the kernels' prior weights.
        kernel_statistics: (K,) each kernel's observed statistic (MMD^2 U-statistic or HSIC_b).
        kernel_p_values: (K,) each kernel's own permutation p-value (not corrected for the aggregation).
        labels: the kernels' descriptions.
    """

    weights: np.ndarray | None = field(default=None, repr=False)
    kernel_statistics: np.ndarray | None = field(default=None, repr=False)
    kernel_p_values: np.ndarray | None = field(default=None, repr=False)
    labels: tuple = field(default=(), repr=False)

    def ranking(self) -> np.ndarray:
        """Kernel indices by decreasing evidence log(w_k / p_k) (the first one sets the statistic).

        Returns:
            (K,) int array.
        """
        return np.argsort(-(np.log(self.weights) - np.log(self.kernel_p_values)), kind="stable")

    def dominant(self, family: str | None = None):
        """The kernel that carried the most weighted evidence, optionally within one family.

        Args:
            family: ``"gaussian"``, ``"exponential"`` or None for any.

        Returns:
            The kernel (for an independence test, the (kx, ky) pair).

        Raises:
            ValueError: for an unknown family or one absent from the collection.
        """
        if family is not None and family not in FAMILIES:
            raise ValueError(f"family must be one of {tuple(FAMILIES)} or None, got {family!r}")
        for i in self.ranking():
            kernel = self.kernels[i]
            first = kernel[0] if isinstance(kernel, tuple) else kernel
            if family is None or type(first) is FAMILIES[family]:
                return kernel
        raise ValueError(f"the collection has no {family} kernel")
