"""A NumPyro model of the kernel Bayes filter's hyperparameters (spec kbr.md §7; a library extension)."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from bayeskern._validation import as_points, check_positive, check_same_length
from bayeskern.kbr.filter import KernelBayesFilter
from bayeskern.kernels.heuristics import median_heuristic

__all__ = ["FilterSplit", "split_for_validation", "kbf_hyper_model", "HYPER_PRIORS"]

# (mean, sd) of the normal priors on the log hyperparameters (operator scale)
HYPER_PRIORS = {
    "log_cx": (0.0, 0.75),
    "log_cz": (0.0, 0.75),
    "log_lam": {"iw": (jnp.log(1e-3), 2.0), "original": (jnp.log(1e-6), 3.0)},
    "log_eta": (jnp.log(3e-4), 1.5),
    "log_lam_prime": (jnp.log(3e-4), 1.5),
    "log_s": (jnp.log(0.2), 1.0),
}


class FilterSplit(NamedTuple):
    """Fit pairs (steps 1..T-V), validation pairs (the last V steps) and the fit medians (constants)."""

    X_fit: jax.Array
    Z_fit: jax.Array
    X_val: jax.Array
    Z_val: jax.Array
    median_x: jax.Array
    median_z: jax.Array


def split_for_validation(X, Z, n_val: int = 200, *, burn_in: int = 10) -> FilterSplit:
    """Split one training trajectory as in spec §6.4: V = min(n_val, T // 2) validation steps at the end."""
    X, Z = as_points(X, "X"), as_points(Z, "Z")
    check_same_length(X, Z, "X and Z")
    T = X.shape[0]
    V = min(n_val, T // 2)
    if T - V < 3 or V <= burn_in:
        raise ValueError(f"training sequence too short: T = {T} gives {T - V} fit and {V} validation steps; "
                         f"need at least 3 fit steps and more than burn_in = {burn_in} validation steps")
    X_fit, Z_fit = X[: T - V], Z[: T - V]
    return FilterSplit(X_fit, Z_fit, X[T - V:], Z[T - V:], median_heuristic(X_fit), median_heuristic(Z_fit))


def _normal(name, method=None):
    loc, scale = HYPER_PRIORS[name] if method is None else HYPER_PRIORS[name][method]
    return numpyro.sample(name, dist.Normal(loc, scale))


def kbf_hyper_model(split: FilterSplit, *, method: str = "iw", tau: float = 1.0, burn_in: int = 10,
                    tie_transition: bool = True, smooth_truncation: float | None = 1e-3):
    """Posterior over (log c_x, log c_z, log lam, log eta, log s) of a kernel Bayes filter (spec §7).

    Builds the filter on ``split``'s fit pairs (bandwidths c * fit median), runs it over the validation
    observations and scores the filtered means with tau * sum_t log N(z_t; z^_t, s^2 I) after ``burn_in``
    steps: a pseudo-likelihood of the filter as a predictor. lam' = eta unless ``tie_transition=False``
    (then ``log_lam_prime`` is sampled too). ``smooth_truncation`` (default 1e-3) smooths max(0, gamma)
    for NUTS; None keeps the exact truncation.
    """
    check_positive(tau, "tau")
    log_cx, log_cz = _normal("log_cx"), _normal("log_cz")
    log_lam, log_eta = _normal("log_lam", method), _normal("log_eta")
    lam_prime = None if tie_transition else jnp.exp(_normal("log_lam_prime"))
    log_s = _normal("log_s")
    kbf = KernelBayesFilter.build(split.X_fit, split.Z_fit, jnp.exp(log_cx) * split.median_x,
                                  jnp.exp(log_cz) * split.median_z, jnp.exp(log_lam), jnp.exp(log_eta), lam_prime,
                                  method=method, smooth_truncation=smooth_truncation)
    zhat = kbf.filter(split.X_val)
    numpyro.deterministic("z_val_hat", zhat)
    with numpyro.handlers.scale(scale=tau):
        numpyro.sample("z_val", dist.Normal(zhat[burn_in:], jnp.exp(log_s)).to_event(2), obs=split.Z_val[burn_in:])
