"""Convergence diagnostics for MCMC output: split-R-hat, ESS, divergences, with warnings (arviz-based)."""

import warnings
import numpy as np

from bayeskern.fitted import fitted, static

from ._arviz import az

__all__ = ["MCMCWarning", "Diagnostics", "diagnose"]


class MCMCWarning(UserWarning):
    """A sampler run that should not be trusted as is (R-hat, ESS or divergences)."""


@fitted
class Diagnostics:
    """Worst-case summaries over all posterior variables.

    Attributes:
        max_rhat: the largest rank-normalised split R-hat (NaN for a single chain, where it is not defined).
        min_ess_bulk: the smallest bulk effective sample size.
        min_ess_tail: the smallest tail effective sample size.
        divergences: divergent transitions over all chains and draws.
        num_draws: draws over all chains.
        problems: human-readable failures (empty when fine).
        ok: True when there are no problems.
        divergence_rate: divergences / num_draws.
    """

    max_rhat: float
    min_ess_bulk: float
    min_ess_tail: float
    divergences: int
    num_draws: int
    problems: tuple = static(default=())

    @property
    def ok(self) -> bool:
        """True when no check failed."""
        return not self.problems

    @property
    def divergence_rate(self) -> float:
        """The share of divergent transitions."""
        return self.divergences / self.num_draws


def _worst(dataset, reduce):
    values = [np.asarray(dataset[name]).ravel() for name in dataset.data_vars]
    values = np.concatenate(values) if values else np.array([np.nan])
    return float(reduce(values))


def diagnose(idata, *, rhat_max: float = 1.01, min_ess: float | None = None, var_names=None,
             warn: bool = True) -> Diagnostics:
    """Split R-hat, bulk and tail ESS and divergences of an arviz ``InferenceData``, worst case over variables.

    Args:
        idata: arviz ``InferenceData`` with a posterior (and sample stats for divergences).
        rhat_max: flag a max rank-normalised split R-hat above this.
        min_ess: flag a bulk or tail ESS below this (default 100 per chain).
        var_names: variables to check (default all).
        warn: emit the warning (else only report the problems).

    Returns:
        Diagnostics: the worst-case summaries and the list of problems.

    Raises:
        TypeError: for idata without a posterior group.

    Warns:
        MCMCWarning: when any check fails.
    """
    if not hasattr(idata, "posterior"):
        raise TypeError(f"idata must be an arviz InferenceData with a posterior group, got {type(idata).__name__}")
    posterior = idata.posterior if var_names is None else idata.posterior[var_names]
    chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
    min_ess = 100.0 * chains if min_ess is None else float(min_ess)
    rhat = _worst(az.rhat(posterior), np.nanmax) if chains > 1 else float("nan")
    ess_bulk = _worst(az.ess(posterior, method="bulk"), np.nanmin)
    ess_tail = _worst(az.ess(posterior, method="tail"), np.nanmin)
    divergent = int(np.sum(idata.sample_stats["diverging"])) if "sample_stats" in idata.groups() else 0
    problems = []
    if rhat > rhat_max:
        problems.append(f"split R-hat {rhat:.4f} > {rhat_max}")
    if min(ess_bulk, ess_tail) < min_ess:
        problems.append(f"effective sample size {min(ess_bulk, ess_tail):.0f} < {min_ess:.0f}")
    if divergent:
        problems.append(f"{divergent} divergent transitions out of {chains * draws}")
    if warn and problems:
        warnings.warn("MCMC diagnostics: " + "; ".join(problems), MCMCWarning, stacklevel=2)
    return Diagnostics(rhat, ess_bulk, ess_tail, divergent, chains * draws, tuple(problems))
