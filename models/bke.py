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
    """NumPyro model of Bayesian kernel learning: p(theta | X) proportional to p(theta) exp(L(theta, tau2)).

    L is the BKE marginal pseudolikelihood (:func:`bayeskern.bke.log_pseudolikelihood`). Sample it with
    :func:`bayeskern.inference.run_nuts`, started at a type-II fit.

    Args:
        X: (n, D) likelihood points.
        Z: (m, D) held-out inducing points (:func:`bayeskern.bke.hold_out_inducing`).
        tau2: the fixed noise variance (tau2 is fixed by default: for m > D the pseudolikelihood is unbounded along
            theta -> inf, tau2 ~ theta^-4).
        tau2_prior: None (fixed tau2), ``"gamma11"`` (the paper's Gamma(1, 1); warns, reproduction only) or a
            NumPyro distribution.
        lengthscale_prior: a NumPyro distribution for theta (default the paper's Gamma(1, 1)).
        ard: one lengthscale per input dimension.
        convention: the model variant (see :func:`bayeskern.bke.log_pseudolikelihood`).
        objective: a prebuilt :class:`bayeskern.bke.SEPseudolikelihood` (skips re-validating X and Z per trace).

    Sites:
        ``lengthscale`` (scalar, or (D,) with ``ard``), deterministic ``log_lengthscale``, and ``tau2`` when
        ``tau2_prior`` is given.

    Raises:
        ValueError: for invalid inducing points or an unknown tau2 prior.

    Examples:
        >>> import jax, numpy as np, bayeskern as bk
        >>> from bayeskern.bke import hold_out_inducing
        >>> from bayeskern.inference import run_nuts
        >>> from bayeskern.models import bke_model
        >>> XP, XQ = bk.datasets.normal_vs_laplace(100, seed=0)
        >>> X, Z = hold_out_inducing(np.vstack([XP, XQ]), jax.random.key(0), m=10)
        >>> mcmc = run_nuts(bke_model, X, Z, key=jax.random.key(1), num_chains=1, num_warmup=200,
        ...                 num_samples=400, progress_bar=False)
        >>> mcmc.samples["lengthscale"].shape               # (chains, draws)
        (1, 400)
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
