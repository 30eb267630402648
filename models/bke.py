"""The Bayesian kernel embedding model of kernel hyperparameters as a NumPyro model."""

import warnings

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from bayeskern._validation import check_positive
from bayeskern.bke.objective import SEPseudolikelihood

__all__ = ["bke_model", "TAU2_PRIOR_WARNING"]

TAU2_PRIOR_WARNING = ("tau2_prior='gamma11' samples tau2 with the paper's Gamma(1, 1) prior: for m > D the BKE "
                      "pseudolikelihood grows without bound along theta -> inf, tau2 ~ theta^-4, so the posterior "
                      "mode sits near theta ~ 2 (m - D) n. Use it to reproduce the paper only.")


def bke_model(X, Z, *, tau2=1.0, tau2_prior=None, lengthscale_prior=None, ard: bool = False,
              convention: str = "exact", objective: SEPseudolikelihood | None = None):
    """BKL posterior over the SE lengthscale(s): p(theta | X) ∝ p(theta) exp(L(theta, tau2)), eq. (15).

    X: (n, D) likelihood points; Z: (m, D) held-out inducing points (``bayeskern.bke.hold_out_inducing``).
    Sites: ``lengthscale`` (scalar, or (D,) with ``ard=True``; prior ``lengthscale_prior``, default
    the paper's Gamma(1, 1)), deterministic ``log_lengthscale``, and ``tau2`` when ``tau2_prior`` is
    ``"gamma11"`` or a NumPyro distribution (tau2 is fixed by default: for m > D the pseudolikelihood is unbounded along theta -> inf,
    tau2 ~ theta^-4). A prebuilt
    ``objective`` (SEPseudolikelihood) skips re-validating X and Z on every trace.
    """
    if objective is None:
        objective = SEPseudolikelihood.build(X, Z, convention=convention)
    prior = dist.Gamma(1.0, 1.0) if lengthscale_prior is None else lengthscale_prior
    if ard:
        prior = prior.expand([objective.dim]).to_event(1)
    lengthscale = numpyro.sample("lengthscale", prior)
    numpyro.deterministic("log_lengthscale", jnp.log(lengthscale))
    if tau2_prior is not None:
        if tau2_prior == "gamma11":
            warnings.warn(TAU2_PRIOR_WARNING, UserWarning, stacklevel=2)
            tau2_prior = dist.Gamma(1.0, 1.0)
        elif not isinstance(tau2_prior, dist.Distribution):
            raise ValueError(f"tau2_prior must be None, 'gamma11' or a numpyro distribution, got {tau2_prior!r}")
        tau2 = numpyro.sample("tau2", tau2_prior)
    else:
        check_positive(tau2, "tau2")
    numpyro.factor("pseudolikelihood", objective(lengthscale, tau2))
