"""A NumPyro model of the kernel Bayes filter's hyperparameters (a library extension of Xu et al. 2022)."""

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from bayeskern._validation import as_points, check_count, check_positive, check_same_length, is_concrete
from bayeskern.compression import ackip
from bayeskern.kbr.features import select_landmarks
from bayeskern.kbr.filter import KernelBayesFilter
from bayeskern.kernels.heuristics import median_heuristic
from bayeskern.kernels.stationary import RBF

__all__ = ["FilterSplit", "split_for_validation", "compress_split", "kbf_hyper_model", "HYPER_PRIORS"]

# (mean, sd) of the normal priors on the log hyperparameters (operator scale)
HYPER_PRIORS = {
    "log_cx": (0.0, 0.75),
    "log_cz": (0.0, 0.75),
    "log_lam": {"iw": (math.log(1e-3), 2.0), "original": (math.log(1e-6), 3.0)},
    "log_eta": (math.log(3e-4), 1.5),
    "log_lam_prime": (math.log(3e-4), 1.5),
    "log_s": (math.log(0.2), 1.0),
}


class FilterSplit(NamedTuple):
    """One training trajectory split for :func:`kbf_hyper_model`.

    Attributes:
        X_fit: (T - V, d_x) observations the filter is built on (steps 1..T-V).
        Z_fit: (T - V, d_z) their latents.
        X_val: (V, d_x) validation observations (the last V steps).
        Z_val: (V, d_z) their latents.
        median_x: () median pairwise distance of X_fit, the unit of the observation bandwidth (a constant).
        median_z: () median pairwise distance of Z_fit, the unit of the latent bandwidth.
        landmarks: optional (p_x, d_x) Nystrom landmarks of the observations, for a low-rank filter.
        Z_prev: optional (m, d_z) transition sources when the fit pairs are m compressed transitions
            Z_prev[j] -> (Z_fit[j], X_fit[j]) (:func:`compress_split`).
        landmarks_z: optional (p_z, d_z) Nystrom landmarks of the latents.
    """

    X_fit: jax.Array
    Z_fit: jax.Array
    X_val: jax.Array
    Z_val: jax.Array
    median_x: jax.Array
    median_z: jax.Array
    landmarks: jax.Array | None = None
    Z_prev: jax.Array | None = None
    landmarks_z: jax.Array | None = None


def split_for_validation(X, Z, n_val: int = 200, *, burn_in: int = 10,
                         num_landmarks: int | tuple[int, int] | None = None,
                         landmark_scale: float = 0.5, max_fit: int | None = None) -> FilterSplit:
    """Split one training trajectory for :func:`kbf_hyper_model`, as :func:`bayeskern.kbr.tune_kbf` does.

    The last V = min(n_val, T // 2) steps validate; the filter is built on the others (the last ``max_fit`` of
    them when given), with bandwidth units (the fit medians) fixed as constants.

    Args:
        X: (T, d_x) observations of the training trajectory.
        Z: (T, d_z) latent states, row t paired with X[t].
        n_val: number of validation steps (at most T // 2).
        burn_in: validation steps the model skips while the filter forgets its uniform start.
        num_landmarks: p landmarks among the fit observations and p among the fit latents, or (p_x, p_z)
            (pivoted Cholesky at bandwidth ``landmark_scale`` x median): the model's filters are then low rank
            (Nystrom features of both kernels), O(T p_x^2 + T p_z) per filter step and per gradient instead of
            O(T^3) (an approximation that sharpens as p grows; the observation landmarks set the cost).
        landmark_scale: bandwidth of the landmark selection, in units of the median distance (below the
            bandwidths the posterior visits, so the landmarks cover them).
        max_fit: build the model's filters on at most this many fit steps, the ones just before the validation
            block (None: all). A gradient costs O(fit steps), so this bounds the cost of sampling on long series;
            the hyperparameters are on the operator scale and keep their meaning when
            :func:`bayeskern.inference.posterior_predictive_filter` refits on every step.

    Returns:
        FilterSplit: fit and validation pairs, the fit medians and the optional landmarks.

    Raises:
        ValueError: for unpaired or non-finite inputs, or a trajectory too short for 3 fit steps and more than
            ``burn_in`` validation steps.
    """
    X, Z = as_points(X, "X"), as_points(Z, "Z")
    check_same_length(X, Z, "X and Z")
    T = X.shape[0]
    V = min(check_count(n_val, "n_val"), T // 2)
    burn_in = check_count(burn_in, "burn_in", minimum=0)
    if T - V < 3 or V <= burn_in:
        raise ValueError(f"training sequence too short: T = {T} gives {T - V} fit and {V} validation steps; "
                         f"need at least 3 fit steps and more than burn_in = {burn_in} validation steps")
    first = 0 if max_fit is None else max(0, T - V - check_count(max_fit, "max_fit", minimum=3))
    X_fit, Z_fit = X[first: T - V], Z[first: T - V]
    median_x, median_z = median_heuristic(X_fit), median_heuristic(Z_fit)
    check_positive(landmark_scale, "landmark_scale")
    landmarks = landmarks_z = None
    if num_landmarks is not None:
        if np.ndim(num_landmarks) not in (0, 1) or np.size(num_landmarks) not in (1, 2):
            raise ValueError(f"num_landmarks must be an integer or a pair (p_x, p_z), got {num_landmarks!r}")
        p_x, p_z = np.broadcast_to(num_landmarks, (2,)).tolist()
        for p in (p_x, p_z):
            if isinstance(p, bool) or not isinstance(p, int) or p < 1:
                raise ValueError(f"num_landmarks must hold positive integers, got {num_landmarks!r}")
        landmarks = select_landmarks(RBF(landmark_scale * median_x), X_fit, p_x)
        landmarks_z = select_landmarks(RBF(landmark_scale * median_z), Z_fit, p_z)
    # the medians as arrays, like the rows: NUTS then keeps one compiled sampler for every split of these shapes
    return FilterSplit(X_fit, Z_fit, X[T - V:], Z[T - V:], np.asarray(median_x), np.asarray(median_z), landmarks,
                       landmarks_z=landmarks_z)


def compress_split(split: FilterSplit, m: int, *, key, num_steps: int = 1000, lam_c=None,
                   progress_bar: bool = False) -> FilterSplit:
    """Compress the fit transitions of a split to m triples, so the filter model costs O(m^3) per gradient.

    The T_fit - 1 transitions z_t -> (z_{t+1}, x_{t+1}) are compressed by ACKIP (the compressed conditional mean
    embedding of (z', x') given z is fitted to the data's); :func:`kbf_hyper_model` then builds its filters on m
    atoms instead of T_fit. Validation pairs and the fit medians (the bandwidth units) are kept; landmarks are
    dropped.

    Args:
        split: a :func:`split_for_validation` result (not already compressed).
        m: number of compressed transitions, 2 <= m < T_fit - 1.
        key: PRNG key of the compression.
        num_steps: ACKIP optimiser steps.
        lam_c: ridge of the compressed embedding (tuned at size m if None).
        progress_bar: show the compression's progress.

    Returns:
        FilterSplit: the split with m fit triples (``Z_prev``, ``Z_fit``, ``X_fit``).

    Raises:
        ValueError: for a split that is already compressed or m out of range.
    """
    if split.Z_prev is not None:
        raise ValueError("split is already compressed")
    n = split.Z_fit.shape[0] - 1
    if not 2 <= m < n:
        raise ValueError(f"m must lie in [2, {n}) (the fit transitions), got {m}")
    d_z = split.Z_fit.shape[1]
    result = ackip(split.Z_fit[:-1], jnp.hstack([split.Z_fit[1:], split.X_fit[1:]]), m, key=key,
                   num_steps=num_steps, lam_c=lam_c, progress_bar=progress_bar)
    nxt = jnp.asarray(result.y_original)
    return split._replace(X_fit=nxt[:, d_z:], Z_fit=nxt[:, :d_z], landmarks=None, landmarks_z=None,
                          Z_prev=jnp.asarray(result.x_original))


def _normal(name, priors, method=None):
    if priors is not None and name in priors:
        loc, scale = priors[name]
    else:
        loc, scale = HYPER_PRIORS[name] if method is None else HYPER_PRIORS[name][method]
    return numpyro.sample(name, dist.Normal(loc, scale))


def kbf_hyper_model(split: FilterSplit, *, method: str = "iw", tau: float = 1.0, burn_in: int = 10,
                    tie_transition: bool = True, smooth_truncation: float | None = 1e-3, priors: dict | None = None):
    """NumPyro model of a kernel Bayes filter's hyperparameters (log c_x, log c_z, log lam, log eta, log s).

    Builds the filter on ``split``'s fit pairs (bandwidths c x fit median), runs it over the validation
    observations and scores the filtered means with tau sum_t log N(z_t; z^_t, s^2 I) after ``burn_in`` steps: a
    pseudo-likelihood of the filter as a predictor, one factor per validation step (so the pointwise log
    likelihood of ``run_nuts`` ranks filters with ``az.loo``). Priors and the likelihood are in the KBR guide.

    Args:
        split: a :func:`split_for_validation` (or :func:`compress_split`) result; with landmarks the IW filter
            uses Nystrom observation features.
        method: ``"iw"`` or ``"original"``.
        tau: temperature of the likelihood, > 0 (1/integrated autocorrelation time of the residuals gives
            calibrated bands).
        burn_in: validation steps not scored.
        tie_transition: lam' = eta; with False ``log_lam_prime`` is sampled too.
        smooth_truncation: replaces max(0, gamma) by t softplus(gamma / t) with this t for smooth NUTS gradients
            (default 1e-3); None keeps the exact truncation.
        priors: site name -> (mean, sd) of its normal prior, replacing :data:`HYPER_PRIORS`' for those sites (e.g.
            centred at a validated choice); pass arrays, so that a sampler compiled for one prior serves another.

    Sites:
        ``log_cx``, ``log_cz``, ``log_lam``, ``log_eta``, ``log_s`` (and ``log_lam_prime``), the deterministic
        filtered means ``z_val_hat`` and the observed ``z_val`` (one factor per scored validation step).

    Raises:
        ValueError: for an unknown method, tau <= 0, or priors for sites the model does not sample or that are not
            (finite mean, positive sd) pairs.
    """
    if method not in HYPER_PRIORS["log_lam"]:
        raise ValueError(f"method must be one of {tuple(HYPER_PRIORS['log_lam'])}, got {method!r}")
    check_positive(tau, "tau")
    if not isinstance(split, FilterSplit):
        raise TypeError(f"split must be a FilterSplit (split_for_validation), got {type(split).__name__}")
    burn_in = check_count(burn_in, "burn_in", minimum=0)
    if burn_in >= split.X_val.shape[0]:
        raise ValueError(f"burn_in must be below the {split.X_val.shape[0]} validation steps, got {burn_in}")
    _check_priors(priors, tie_transition)
    log_cx, log_cz = _normal("log_cx", priors), _normal("log_cz", priors)
    log_lam, log_eta = _normal("log_lam", priors, method), _normal("log_eta", priors)
    lam_prime = None if tie_transition else jnp.exp(_normal("log_lam_prime", priors))
    log_s = _normal("log_s", priors)
    zhat = _validation_means(split, log_cx, log_cz, log_lam, log_eta, lam_prime, method, smooth_truncation)
    numpyro.deterministic("z_val_hat", zhat)
    scored = split.Z_val[burn_in:]
    with numpyro.handlers.scale(scale=tau), numpyro.plate("validation_step", scored.shape[0]):
        numpyro.sample("z_val", dist.Normal(zhat[burn_in:], jnp.exp(log_s)).to_event(1), obs=scored)


def _check_priors(priors, tie_transition: bool) -> None:
    """A ValueError naming ``priors`` for a site the model does not sample, or a (mean, sd) pair that is not one
    with a finite mean and a positive sd (checked where the values are concrete)."""
    if priors is None:
        return
    sites = {"log_cx", "log_cz", "log_lam", "log_eta", "log_s"} | (set() if tie_transition else {"log_lam_prime"})
    unknown = sorted(set(priors) - sites)
    if unknown:
        raise ValueError(f"priors names sites the model does not sample: {unknown} (it samples {sorted(sites)})")
    for name, pair in priors.items():
        if np.shape(pair) != (2,):
            raise ValueError(f"priors[{name!r}] must be a (mean, sd) pair, got {pair!r}")
        if is_concrete(pair) and not (np.isfinite(float(pair[0])) and float(pair[1]) > 0):
            raise ValueError(f"priors[{name!r}] must have a finite mean and a positive sd, got {pair!r}")


@partial(jax.jit, static_argnames=("method", "smooth_truncation"))
def _validation_means(split, log_cx, log_cz, log_lam, log_eta, lam_prime, method, smooth_truncation):
    """The model's filter (built on the fit pairs) run over the validation observations: (V, d_z).

    One compiled program, also where NumPyro evaluates the model outside ``jit`` (initialisation, predictive).
    """
    landmarks = None if split.landmarks is None else (split.landmarks, split.landmarks_z)
    kbf = KernelBayesFilter.build(split.X_fit, split.Z_fit, jnp.exp(log_cx) * split.median_x,
                                  jnp.exp(log_cz) * split.median_z, jnp.exp(log_lam), jnp.exp(log_eta), lam_prime,
                                  method=method, smooth_truncation=smooth_truncation, Z_prev=split.Z_prev,
                                  rank=None, landmarks=landmarks)
    return kbf.filter(split.X_val)
