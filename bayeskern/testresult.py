"""Result object shared by the kernel hypothesis tests."""

from dataclasses import dataclass, field

import numpy as np

__all__ = ["HypothesisTestResult", "permutation_p_value"]

# Statistics of different labellings that are equal in exact arithmetic (repeated rows, discrete data) differ in their
# last bits, because each labelling sums the same terms in another order; the observed labelling (a contiguous block)
# tends to round high among its ties. Values within this fraction of the largest |statistic| count as ties, so the
# test counts exactly what exact arithmetic would (a tie counts against rejection: the level stays exact).
TIES_RTOL = 1e-8


def tie_tolerance(values) -> float:
    """The absolute width within which statistics of one test count as ties: TIES_RTOL x max |value|."""
    return TIES_RTOL * float(np.max(np.abs(values), initial=0.0))


def permutation_p_value(observed: float, null) -> float:
    """(1 + #{null >= observed}) / (1 + B), ties within :data:`TIES_RTOL` counted: exact level for exchangeable data."""
    null = np.asarray(null)
    tolerance = tie_tolerance(np.append(null, observed))
    return float((1 + np.count_nonzero(null >= observed - tolerance)) / (1 + null.size))


@dataclass(frozen=True)
class HypothesisTestResult:
    """Outcome of a kernel test (MMD or HSIC).

    Attributes:
        statistic: the observed statistic.
        p_value: its p-value under H0.
        method: how the null was obtained: ``"permutation"``, ``"gamma"`` or ``"normal"``.
        null_samples: the permutation statistics (B,) when ``method == "permutation"``, else None.
        kernels: the kernel(s) used, so a run can be reproduced.
    """

    statistic: float
    p_value: float
    method: str
    null_samples: np.ndarray | None = field(default=None, repr=False)
    kernels: tuple = field(default=(), repr=False)

    def reject(self, alpha: float = 0.05) -> bool:
        """Whether H0 is rejected at level alpha.

        Args:
            alpha: the level, in (0, 1).

        Returns:
            True when p_value <= alpha.

        Raises:
            ValueError: for alpha outside (0, 1).
        """
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
        return self.p_value <= alpha
