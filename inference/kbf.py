"""Bayesian-averaged kernel Bayes filtering from NUTS draws of the filter's hyperparameters."""

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern._validation import as_finite_array, as_points, check_count, check_key, check_same_length
from bayeskern.kbr.filter import KernelBayesFilter, TuneResult, tune_kbf
from bayeskern.kbr.lowrank import filter_landmarks, landmark_ridges
from bayeskern.kernels.heuristics import median_heuristic
from bayeskern.kernels.stationary import RBF
from bayeskern.models.kbf import HYPER_PRIORS, kbf_hyper_model, split_for_validation

from bayeskern import _workers
from .nuts import MCMCResult, run_nuts

__all__ = ["kbf_init_values", "sample_kbf_posterior", "PredictiveFiltering", "posterior_predictive_filter",
           "band_coverage"]


def kbf_init_values(tuned: TuneResult, dim_z: int) -> dict:
    """Starting values for NUTS over :func:`bayeskern.models.kbf_hyper_model` at a tuned filter's grid optimum.

    Args:
        tuned: a :func:`bayeskern.kbr.tune_kbf` result.
        dim_z: latent dimension d_z (the noise scale s comes from the validation MSE per coordinate).

    Returns:
        dict of the model's sites (``log_cx``, ``log_cz``, ``log_lam``, ``log_eta``, ``log_s``) for ``run_nuts``'s
        ``init_values``.

    Raises:
        TypeError: for tuned that is not a TuneResult, or dim_z not an integer.
        ValueError: for dim_z below 1.
    """
    if not isinstance(tuned, TuneResult):
        raise TypeError(f"tuned must be the TuneResult of kbr.tune_kbf, got {type(tuned).__name__}")
    dim_z = check_count(dim_z, "dim_z")
    mse = tuned.validation_mse[(tuned.c, tuned.lam)]
    return {"log_cx": jnp.log(tuned.c), "log_cz": jnp.log(tuned.c), "log_lam": jnp.log(tuned.lam),
            "log_eta": jnp.log(tuned.eta), "log_s": 0.5 * jnp.log(mse / dim_z)}


def sample_kbf_posterior(X, Z, *, key, tuned: TuneResult | None = None, method: str = "iw", n_val: int = 60,
                         max_fit: int | None = 200, num_landmarks=(10, 20), burn_in: int = 10, num_chains: int = 2,
                         num_warmup: int = 200, num_samples: int = 1000, chain_method: str | None = None,
                         progress_bar: bool = True, **model_kwargs) -> MCMCResult:
    """NUTS over a kernel Bayes filter's hyperparameters with the recommended settings.

    The recommended call of :func:`bayeskern.models.kbf_hyper_model`: the last ``n_val`` steps validate, the
    model's filters are built on the ``max_fit`` steps before them, low rank on ``num_landmarks``
    (observation, latent) Nystrom landmarks; the chains start at the grid optimum of
    :func:`bayeskern.kbr.tune_kbf` (``tuned``, tuned here when None) and adapt a dense mass matrix (the five
    hyperparameters are correlated) with trees of depth at most 4 (at depth 3, log lam, whose posterior has a long
    prior-driven tail, mixes half as fast per gradient). Wall time, R-hat and effective sample sizes of these
    settings on series of 300-600 steps: ``benchmarks/bench_kbf_nuts.py --default-call`` and
    ``benchmarks/RESULTS.md``. Pass the result's ``draws()`` to :func:`posterior_predictive_filter`, which refits
    every draw's filter on all steps.

    Args:
        X: (T, d_x) training observations.
        Z: (T, d_z) training latents.
        key: PRNG key of the sampler.
        tuned: the :func:`bayeskern.kbr.tune_kbf` result the chains start from (None: tuned here, with ``method``
            and ``n_val``).
        method: ``"iw"`` or ``"original"``.
        n_val: validation steps (at most T // 2). A gradient costs O(n_val) (about 4.2 ms at 100, 2.9 ms at 60 on one
            core of the benchmark machine); 60 converged as well as 100 on the benchmark's series.
        max_fit: fit steps of the model's filters (None: all; see :func:`bayeskern.models.split_for_validation`).
        num_landmarks: Nystrom landmarks (p_x, p_z) of the model's filters, or None for exact filters.
        burn_in: validation steps the model does not score while its filter forgets the uniform start.
        num_chains: chains.
        num_warmup: warm-up iterations per chain.
        num_samples: draws per chain.
        chain_method: how the chains share the machine (:func:`run_nuts`). None: ``"processes"`` on a CPU with two
            or more usable cores (each chain on a core of its own), ``"sequential"`` on one core, and
            :func:`run_nuts`'s default on an accelerator.
        progress_bar: show the sampler's progress.
        **model_kwargs: further options of :func:`bayeskern.models.kbf_hyper_model` (``tau``, ...).

    Returns:
        MCMCResult: the draws of ``log_cx``, ``log_cz``, ``log_lam``, ``log_eta``, ``log_s`` and the filtered
        validation means ``z_val_hat``, with diagnostics of the five hyperparameters.

    Raises:
        TypeError: for tuned that is not a TuneResult.
        ValueError: for unpaired or non-finite inputs, a series too short for the split, or an unknown method.
    """
    if method not in HYPER_PRIORS["log_lam"]:
        raise ValueError(f"method must be one of {tuple(HYPER_PRIORS['log_lam'])}, got {method!r}")
    check_key(key)
    split = split_for_validation(X, Z, n_val, burn_in=burn_in, num_landmarks=num_landmarks, max_fit=max_fit)
    init = kbf_init_values(tune_kbf(X, Z, method=method, n_val=n_val) if tuned is None else tuned,
                           split.Z_fit.shape[1])
    return run_nuts(kbf_hyper_model, split, key=key, num_chains=num_chains, num_warmup=num_warmup,
                    num_samples=num_samples, init_values=init, dense_mass=True, max_tree_depth=4,
                    chain_method=_chain_method_for_filters(num_chains) if chain_method is None else chain_method,
                    progress_bar=progress_bar, method=method, burn_in=burn_in, **model_kwargs)


def _chain_method_for_filters(num_chains: int) -> str | None:
    """How NUTS chains over the filter model share this machine: ``"processes"`` on a CPU with two or more usable
    cores, else ``"sequential"`` on a CPU and None (:func:`run_nuts`'s default) on an accelerator.

    A gradient of the filter model is a scan of many small operations: one JAX process runs two chains no faster
    than one (its threads contend: ``"parallel"`` took 90 s where ``"sequential"`` took 62 s for 2 x (200 + 500)
    draws at T = 300), while a process pinned to each core runs each chain at full speed (39 s, the same draws;
    ``benchmarks/RESULTS.md``).
    """
    if jax.default_backend() != "cpu":
        return None
    return "processes" if num_chains >= 2 and len(_workers.usable_cores()) >= 2 else "sequential"


class PredictiveFiltering(NamedTuple):
    """Posterior predictive filtering of a test sequence (T~ steps, d_z coordinates).

    Attributes:
        mean: (T~, d_z) the Bayesian-averaged estimate.
        hyper_band: (2, T~, d_z) lower and upper quantiles of the per-draw filtered means.
        predictive_band: (2, T~, d_z) the same of the filtered means plus each draw's N(0, s^2) noise.
        draws: (S, T~, d_z) the filtered means of the S hyperparameter draws.
    """

    mean: jax.Array
    hyper_band: jax.Array
    predictive_band: jax.Array
    draws: jax.Array


def posterior_predictive_filter(samples: dict, X, Z, X_test, *, key, method: str = "iw", num_draws: int = 100,
                                noise_draws: int = 10, level: float = 0.9,
                                smooth_truncation: float | None = None, rank="auto") -> PredictiveFiltering:
    """Bayesian-averaged filtering: one filter per posterior draw of the hyperparameters, averaged, with bands.

    For ``num_draws`` thinned draws, refit the filter on all training pairs and filter the test sequence (one
    compiled sequential map); the hyperparameter band is the spread of the filtered means, the
    predictive band adds N(0, s^2) noise of each draw (``noise_draws`` per draw).

    Args:
        samples: posterior draws of :func:`bayeskern.models.kbf_hyper_model`, site -> (draws,), as from
            ``MCMCResult.draws()``.
        X: (T, d_x) training observations.
        Z: (T, d_z) training latents.
        X_test: (T~, d_x) test observations.
        key: PRNG key for the predictive noise.
        method: ``"iw"`` or ``"original"``, as in the model.
        num_draws: draws used (evenly thinned).
        noise_draws: noise draws per hyperparameter draw for the predictive band.
        level: probability mass of the bands, in (0, 1).
        smooth_truncation: the model's smoothing of max(0, gamma) (None: exact).
        rank: filter rank as in :meth:`bayeskern.kbr.KernelBayesFilter.build`. A low-rank choice selects one set
            of landmarks for all draws, at the smallest sampled bandwidths and ridges (the draws that need the
            most landmarks), so memory is O(T p) instead of O(T^2).

    Returns:
        PredictiveFiltering: ``mean`` (T~, d_z), ``hyper_band`` and ``predictive_band`` (2, T~, d_z) (lower and
        upper), and the per-draw ``draws`` (S, T~, d_z).

    Raises:
        ValueError: for unpaired or non-finite inputs or a level outside (0, 1).
    """
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if method not in ("iw", "original"):
        raise ValueError(f"method must be 'iw' or 'original', got {method!r}")
    check_key(key)
    num_draws, noise_draws = check_count(num_draws, "num_draws"), check_count(noise_draws, "noise_draws")
    X, Z, X_test = as_points(X, "X"), as_points(Z, "Z"), as_points(X_test, "X_test")
    check_same_length(X, Z, "X and Z")
    if X_test.shape[1] != X.shape[1]:
        raise ValueError(f"X_test must hold observations of dimension {X.shape[1]} like X, got {X_test.shape}")
    missing = sorted({"log_cx", "log_cz", "log_lam", "log_eta", "log_s"} - set(samples))
    if missing:
        raise ValueError(f"samples lacks the sites {missing} of models.kbf_hyper_model (pass MCMCResult.draws())")
    total = np.shape(samples["log_cx"])[0]
    idx = np.unique(np.linspace(0, total - 1, min(num_draws, total)).astype(int))
    theta = {k: jnp.asarray(np.asarray(v)[idx]) for k, v in samples.items() if k.startswith("log_")}
    med_x, med_z = median_heuristic(X), median_heuristic(Z)
    landmarks = _shared_landmarks(theta, X, Z, med_x, med_z, method, rank)
    draws = _filter_draws(theta, X, Z, X_test, med_x, med_z, landmarks, method, smooth_truncation)
    s = jnp.exp(theta["log_s"])[:, None, None, None]
    noisy = draws[:, None] + s * jax.random.normal(key, (draws.shape[0], noise_draws) + draws.shape[1:])
    q = jnp.array([(1 - level) / 2, (1 + level) / 2])
    return PredictiveFiltering(jnp.mean(draws, axis=0), jnp.quantile(draws, q, axis=0),
                               jnp.quantile(noisy.reshape((-1,) + draws.shape[1:]), q, axis=0), draws)


def _shared_landmarks(theta, X, Z, med_x, med_z, method, rank):
    """Landmarks for every draw's filter (None: exact), chosen at the smallest sampled bandwidths and ridges."""
    smallest = {k: float(jnp.min(jnp.exp(v))) for k, v in theta.items()}
    ridges = landmark_ridges(method, smallest["log_lam"], smallest["log_eta"],
                             smallest.get("log_lam_prime", smallest["log_eta"]))
    return filter_landmarks(RBF(smallest["log_cx"] * med_x), RBF(smallest["log_cz"] * med_z), X, Z, rank, *ridges)


@partial(jax.jit, static_argnames=("method", "smooth_truncation"))
def _filter_draws(theta, X, Z, X_test, med_x, med_z, landmarks, method, smooth_truncation):
    def one(t):
        lam_prime = jnp.exp(t["log_lam_prime"]) if "log_lam_prime" in t else None
        kbf = KernelBayesFilter.build(X, Z, jnp.exp(t["log_cx"]) * med_x, jnp.exp(t["log_cz"]) * med_z,
                                      jnp.exp(t["log_lam"]), jnp.exp(t["log_eta"]), lam_prime, method=method,
                                      smooth_truncation=smooth_truncation, rank=None, landmarks=landmarks)
        return kbf.filter(X_test)

    return jax.lax.map(one, theta)


def band_coverage(band, Z_true) -> float:
    """Empirical coverage of a band: the share of (step, coordinate) entries of the truth inside it.

    Args:
        band: (2, T~, d_z) lower and upper band (e.g. ``PredictiveFiltering.predictive_band``).
        Z_true: (T~, d_z) true latent states.

    Returns:
        float in [0, 1].

    Raises:
        ValueError: when the band is not (2,) + Z_true.shape.
    """
    band = np.asarray(as_finite_array(band, "band"))
    Z_true = np.asarray(as_finite_array(Z_true, "Z_true"))
    if band.shape != (2,) + Z_true.shape:
        raise ValueError(f"band must have shape (2,) + Z_true.shape = {(2,) + Z_true.shape}, got {band.shape}")
    return float(np.mean((Z_true >= band[0]) & (Z_true <= band[1])))
