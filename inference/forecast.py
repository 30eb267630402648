"""One-step-ahead forecasts of an observed series with calibrated bands: the validated kernel Bayes forecaster,
Bayesian-averaged over the filter's hyperparameters by NUTS, with an adaptive conformal band."""

import math
import time
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from numpyro.infer.util import constrain_fn, potential_energy, unconstrain_fn

from bayeskern._config import require_x64
from bayeskern._validation import check_key
from bayeskern.optim import optax_scan
from bayeskern.kbr.filter import ReadoutWarning, TuningWarning, _widened_range
from bayeskern.kbr.forecast import (FORECAST_MAX_FIT, ForecastDesign, ForecastTuning, _as_series, _calibration,
                                    _check_tuning_arguments, _design_rows, _location_scale, _residual_latents,
                                    _standardised, _validation_size, conformal_band, tune_forecaster)
from bayeskern.kbr.multistep import _calibration_errors, _forecast_path
from bayeskern.models.kbf import kbf_hyper_model, split_for_validation

from .diagnostics import Diagnostics
from .kbf import _chain_method_for_filters, posterior_predictive_filter
from .nuts import run_nuts

__all__ = ["Forecast", "CalibrationWarning", "forecast_series"]


class Forecast(NamedTuple):
    """One-step-ahead forecasts of a test series with a predictive band.

    Attributes:
        mean: (T~, d) forecasts; row t uses the training series and the test steps before t.
        band: (2, T~, d) lower and upper band of probability ``level``, finite everywhere.
        level: the band's coverage target.
        design: the chosen :class:`~bayeskern.kbr.forecast.ForecastDesign` (lags, differencing), or None when a
            baseline forecasts.
        fallback: ``"persistence"`` or ``"prior mean"`` when no filter beat both baselines on validation and that
            baseline forecasts (a warning says so), else None.
        tuning: the :class:`~bayeskern.kbr.forecast.ForecastTuning` of the validated choice.
        scale: (T~, d) the scale of each step's band before conformal calibration (ones for the tuned filter; the
            posterior predictive standard deviation for the Bayesian one).
        calibration: (C, d) the calibration scores: |error| / scale of the chosen forecaster on the C steps before
            the validation block, refitted on the steps before them.
        clipped: (T~,) whether the filter's read-out left the training residuals' range (widened by
            :data:`~bayeskern.kbr.RANGE_MARGIN`) at the step and was clipped to it (a warning names the steps).
        widened: (T~, d) whether the step's band came from the tail rule of :func:`bayeskern.kbr.conformal_band`
            (too few scores for its level; a warning says how many).
        mcmc: NUTS diagnostics of the Bayesian filter, or None.
        seconds: wall time of the whole call.
    """

    mean: np.ndarray
    band: np.ndarray
    level: float
    design: ForecastDesign | None
    fallback: str | None
    tuning: ForecastTuning
    scale: np.ndarray
    calibration: np.ndarray
    clipped: np.ndarray
    widened: np.ndarray
    mcmc: Diagnostics | None
    seconds: float


class CalibrationWarning(UserWarning):
    """The band of some steps came from the tail rule: the calibration scores were too few for the level."""


_MIN_CALIBRATION = 10   # the fewest calibration steps a training series must leave room for
_MIN_CALIBRATION_FIT = 12   # the fewest rows the calibration filter is fitted on (eta's leave-one-out needs 11)


def forecast_series(y_train, y_test, *, key=None, level: float = 0.9, lags="auto", bayesian: bool = False,
                    season: int | None = None, n_val: int | None = None, gamma: float = 0.05,
                    num_chains: int = 2, num_warmup: int = 200, num_samples: int = 200, num_landmarks=(20, 20),
                    progress_bar: bool = False, rank="auto", workers: int | None = None) -> Forecast:
    """One-step-ahead forecasts of ``y_test`` from ``y_train`` by a kernel Bayes filter, with a calibrated band.

    The series is standardised on ``y_train``; the lags (seasonal ones included), levels, first or seasonal
    differences (without a season, levels alone where a Dickey-Fuller test rejects a unit root) and the filter's
    hyperparameters are chosen on the last V validation steps of ``y_train``
    (:func:`bayeskern.kbr.tune_forecaster`: the filter models what a least-squares autoregression on the lags
    leaves over, and a candidate that does not beat persistence and the training mean on validation is never
    chosen; when none does, that baseline forecasts, ``fallback`` says which and a warning is raised). The forecast
    averages the chosen design's forecaster with those of the designs validation cannot tell from it
    (``tuning.members``). With ``bayesian=True`` NUTS samples the chosen design's filter hyperparameters
    (:func:`bayeskern.models.kbf_hyper_model`, every chain started at the posterior mode that L-BFGS climbs to from
    the validated choice): the chosen design's forecast becomes the average of one filter per draw, each built like
    the model's filters (on the last :data:`~bayeskern.kbr.FORECAST_MAX_FIT` fit steps, low rank on
    ``num_landmarks``), and the other members keep their validated filters in the average; the spread of that
    average over the draws plus the draws' noise scale gives each step its scale. A read-out outside the training
    residuals' range is clipped to it and flagged (``clipped``).

    The band is conformal. Its calibration scores are |error| / scale of the forecaster on the C steps just
    before the validation block (C = V, fewer on short series), refitted on the steps before them, so that
    neither the fit nor the choice saw them; the test steps already revealed join them, and the level adapts after
    every step (:func:`bayeskern.kbr.conformal_band`). The band is finite at every step: where the scores are too
    few for the level it follows a stated tail rule (``widened``, with a warning).

    Args:
        y_train: (T,) or (T, d) training series: at least V + 34 steps (24 to fit on, 10 for calibration).
        y_test: (T~,) or (T~, d) series to forecast one step ahead (row t from y_train and y_test[:t]).
        key: PRNG key (needed when ``bayesian``).
        level: coverage target of the band, in (0, 1).
        lags: ``"auto"`` or an explicit lag set such as ``(1, 2, 12)``.
        bayesian: average over NUTS draws of the chosen design's hyperparameters (else the validated designs'
            forecasters, the default: on the benchmark panel the NUTS average is slower and no more accurate).
        season: seasonal period of the automatic lags and of the seasonal differences; default
            :func:`bayeskern.kbr.seasonal_period` of the fit steps.
        n_val: validation steps V (at most T // 2); default min(200, max(20, T // 5)).
        gamma: adaptation step of the conformal band (0: plain sequential split conformal; 0.05 keeps the
            coverage within 0.01 of 0.9 when the errors grow by half or double after calibration, on test spans
            of 40-100 steps: ``bench_forecast.py --gamma-study``).
        num_chains: NUTS chains.
        num_warmup: NUTS warm-up iterations per chain.
        num_samples: NUTS draws per chain.
        num_landmarks: Nystrom landmarks (observations, latents) of the sampled filters; each draw's forecasting
            filter has as many per kernel as the larger of the two (None: exact filters, refitted with ``rank``).
        progress_bar: show the sampler's progress.
        rank: rank of the validated filters, as in :meth:`bayeskern.kbr.KernelBayesFilter.build`.
        workers: processes that score the lag designs (:func:`bayeskern.kbr.tune_forecaster`).

    Returns:
        Forecast: ``mean`` (T~, d), ``band`` (2, T~, d), the chosen design or fallback, the tuning, scales,
        calibration scores, flags and diagnostics.

    Raises:
        TypeError: for a missing key with ``bayesian=True``.
        ValueError: for series that are not finite, of different dimensions or too short, n_val above half of
            y_train, or a level outside (0, 1).
        RuntimeError: when float64 is off.

    Warns:
        TuningWarning: a baseline forecasts (no filter beat both on validation); with ``bayesian=True`` no NUTS
            run then takes place, nor when the chosen filter forecasts the validation steps exactly.
        ReadoutWarning: read-outs clipped at some test steps.
        CalibrationWarning: the calibration scores are too few for the level itself (fewer than
            level / (1 - level)); ``widened`` flags every step of the tail rule, also those the adaptation led to.
    """
    require_x64("forecast_series")
    start = time.perf_counter()
    y_train, y_test = _as_series(y_train, "y_train"), _as_series(y_test, "y_test")
    if y_test.shape[1] != y_train.shape[1]:
        raise ValueError(f"y_test must have the dimension of y_train ({y_train.shape[1]}), got {y_test.shape[1]}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    if bayesian:
        check_key(key)
    _check_tuning_arguments(lags, workers)
    T = y_train.shape[0]
    V = _validation_size(T, n_val, "y_train", reserve=_MIN_CALIBRATION)
    tuning = tune_forecaster(y_train, n_val=V, lags=lags, season=season, rank=rank, workers=workers)
    tuning, C = _calibration(T, tuning, min_fit=_MIN_CALIBRATION_FIT)
    if _sampled(tuning, bayesian):
        keys = jax.random.split(key, 3)
        mean, scale, clipped, calibration, diagnostics = _bayesian(
            y_train, y_test, tuning, C, keys, num_chains, num_warmup, num_samples, num_landmarks, progress_bar, rank)
    else:
        mean, clipped = _forecast_path(y_train, y_test, tuning, rank=rank)
        calibration = np.abs(_calibration_errors(y_train, tuning, C, rank=rank))
        scale, diagnostics = np.ones_like(mean), None
    _warn_clipped(clipped, "test")
    conformal = conformal_band(mean, scale, calibration, y_test - mean, level, gamma=gamma)
    if math.ceil((C + 1) * level) > C:   # (the adaptation alone reaches the tail rule too: flagged, not warned)
        warnings.warn(f"{C} calibration scores support a band of level at most {C / (C + 1):.3f}, not {level}: "
                      f"{int(conformal.widened.any(axis=1).sum())} of {y_test.shape[0]} test steps got their band "
                      f"from the tail rule (see Forecast.widened)", CalibrationWarning, stacklevel=2)
    design = None if tuning.best is None else tuning.best.design
    return Forecast(mean, conformal.band, level, design, tuning.fallback, tuning, scale, calibration, clipped,
                    conformal.widened, diagnostics, time.perf_counter() - start)


def _sampled(tuning, bayesian: bool, *, stacklevel: int = 3) -> bool:
    """Whether the Bayesian average runs: ``bayesian`` and a filter to sample whose validation errors are not zero to
    rounding (an exact forecaster, e.g. of a strictly periodic series, leaves the noise scale no value above 0). A
    TuningWarning (at ``stacklevel``: the caller's caller by default) says when a baseline forecasts, and why
    ``bayesian=True`` was not honoured."""
    if tuning.best is None:
        warnings.warn(f"no filter beat both persistence and the training mean on the {tuning.num_validation} "
                      f"validation steps: {tuning.fallback} forecasts"
                      + (" (no Bayesian average: there is no filter to sample)" if bayesian else ""),
                      TuningWarning, stacklevel=stacklevel)
        return False
    if bayesian and tuning.best.mse <= _EXACT_MSE:
        warnings.warn(f"the chosen forecaster ({tuning.best.design.label}) forecasts the {tuning.num_validation} "
                      "validation steps exactly: there is no noise to sample, so the validated filter forecasts "
                      "(no Bayesian average)", TuningWarning, stacklevel=stacklevel)
        return False
    return bayesian


_EXACT_MSE = 1e-20
"""Validation mean squared errors (standardised units) at or below this are exact forecasts, to rounding."""


def _warn_clipped(clipped, kind: str) -> None:
    """The ReadoutWarning of read-outs clipped at some steps (numbered from 1 for future steps)."""
    if clipped.any():
        steps = np.flatnonzero(clipped) + (kind == "future")
        warnings.warn(f"the filter's read-out left the training range at {steps.size} of {clipped.size} {kind} "
                      f"steps (first: {steps[:10].tolist()}) and was clipped to it", ReadoutWarning, stacklevel=3)


def _bayesian(y_train, y_test, tuning, C, keys, num_chains, num_warmup, num_samples, num_landmarks, progress_bar,
              rank):
    """NUTS over the filter's hyperparameters for the chosen design; forecasts (T~, d), scales (T~, d) and clipped
    flags (T~,) of the test steps, calibration scores (C, d) and diagnostics. The chosen design's forecast averages
    its draws' filters; the other members keep their validated ones, and the members are averaged with equal
    weights."""
    b, V = tuning.best, tuning.num_validation
    T, d = y_train.shape
    centre, sd = _location_scale(y_train)
    s = _standardised(y_train, np.concatenate([y_train, y_test]))
    run = _hyperparameter_posterior(y_train, tuning, keys[0], num_chains, num_warmup, num_samples, num_landmarks,
                                   progress_bar)
    draws = run.draws()
    refit_rank = rank if num_landmarks is None else int(np.max(num_landmarks))
    end = T - V
    share, others = _other_members(tuning)
    cal_mean, cal_sd, _ = _posterior_forecasts(draws, s[:end], b.design, end - C, keys[1], refit_rank, share)
    mean_s, sd_s, clipped = _posterior_forecasts(draws, s, b.design, T, keys[2], refit_rank, share)
    mean = mean_s * sd + centre
    if others is not None:
        block = y_train[end - C: end]
        cal_others = _forecast_path(y_train[: end - C], block, others, rank=rank)[0]
        cal_mean = share * cal_mean + (1 - share) * (cal_others - centre) / sd
        test_others, flags = _forecast_path(y_train, y_test, others, rank=rank)
        mean, clipped = share * mean + (1 - share) * test_others, clipped | flags
    calibration = np.abs(s[end - C: end] - cal_mean) / cal_sd
    return mean, sd_s * sd, clipped, calibration, run.diagnostics


def _other_members(tuning):
    """(1 / M, the chosen design's weight in the average of the M members; the tuning of the other members, or None
    when the chosen design is the only one): the Bayesian forecaster samples the chosen design's filter alone."""
    count = len(tuning.members)
    return 1 / count, (tuning._replace(members=tuning.members[1:]) if count > 1 else None)


def _hyperparameter_posterior(y_train, tuning, key, num_chains, num_warmup, num_samples, num_landmarks,
                             progress_bar):
    """NUTS over the filter's hyperparameters (c_x, c_z, lam, eta, s) for the design ``tuning`` chose, on the series
    standardised on y_train (the model's filters on the last FORECAST_MAX_FIT fit steps, low rank on
    ``num_landmarks``, scored on the validation steps), every chain started at the posterior mode uphill of the
    validated choice (:func:`_posterior_mode`): the MCMCResult."""
    b, V = tuning.best, tuning.num_validation
    T = y_train.shape[0]
    X, Z, _, _ = _design_rows(_standardised(y_train, y_train), b.design)
    R, _ = _residual_latents(X, Z, T - V - b.design.offset, b.design)
    split = split_for_validation(X, R, n_val=V, burn_in=0, num_landmarks=num_landmarks, max_fit=FORECAST_MAX_FIT)
    init = {"log_cx": jnp.log(b.c), "log_cz": jnp.log(b.c), "log_lam": jnp.log(b.lam), "log_eta": jnp.log(b.eta),
            "log_s": 0.5 * jnp.log(b.mse)}
    return run_nuts(kbf_hyper_model, split, key=key, num_chains=num_chains, num_warmup=num_warmup,
                    num_samples=num_samples, init_values=_posterior_mode(split, init), dense_mass=True,
                    max_tree_depth=4, chain_method=_chain_method_for_filters(num_chains), progress_bar=progress_bar,
                    rhat_max=1.05, min_ess=1)


_MODE_STEPS = 40
"""The most L-BFGS iterations of :func:`_posterior_mode`."""


def _posterior_mode(split, start: dict) -> dict:
    """The mode of :func:`~bayeskern.models.kbf_hyper_model`'s posterior on ``split`` that L-BFGS
    (:data:`_MODE_STEPS` iterations, :func:`_climb`) climbs to from ``start``, site name -> value; ``start``
    itself when the climb ends anywhere not finite or no higher.

    The validated hyperparameters score an exact filter on the validation steps; the model scores its own filter
    (low rank by default), whose posterior can peak far from them (El Nino: a 40 times wider observation
    bandwidth) with lesser modes on the way. Chains started at the validated point then settle in different modes
    (split R-hat 1.8); started at the mode the climb reaches, they sample the same one.
    """
    x, values, u, u0 = _start_and_climb(split, {name: np.asarray(value) for name, value in start.items()})
    if not (all(np.all(np.isfinite(v)) for v in jax.tree.leaves(x)) and float(u) < float(u0)):
        return start
    return {name: values[name] for name in x}


@jax.jit
def _start_and_climb(split, start):
    """Map the start to the unconstrained scale, climb, and map the end back in one program (not the model operation
    by operation), with the data and the start as arguments: one compilation serves every split of the same shapes.
    Returns (unconstrained mode, its constrained values, potential there, potential at the start)."""
    x0 = unconstrain_fn(kbf_hyper_model, (split,), {}, start)
    x, u, u0 = _climb(lambda z: potential_energy(kbf_hyper_model, (split,), {}, z), x0)
    return x, constrain_fn(kbf_hyper_model, (split,), {}, x), u, u0


def _climb(potential, x):
    """:data:`_MODE_STEPS` L-BFGS steps (optax, zoom line search) down ``potential`` from the pytree x: (the end, the
    potential there, the potential at x), both values the ones the line search computed (no evaluation of its own)."""
    def loss(params, carry, data, key):
        return potential(params), carry

    solver = optax.lbfgs()
    end, state, _, trace = optax_scan(loss, x, solver, solver.init(x), None, None, length=_MODE_STEPS)
    return end, optax.tree.get(state, "value"), trace[0]


def _posterior_forecasts(draws, s, design, fit_end, key, rank, share=1.0):
    """One-step forecasts of the standardised series s (T', d) at steps fit_end..T'-1 by the posterior's filters,
    each built on (the last FORECAST_MAX_FIT of) the steps before fit_end like the model's, as the autoregression
    of the lags plus the draws' mean read-out (each draw's read-out clipped to the training residuals' widened
    range).

    Returns:
        (mean (m, d), predictive sd (m, d): the draws' spread, times ``share`` (the chosen design's weight in an
        average of members), and the mean noise variance, clipped (m,): some draw's read-out was clipped at the
        step).
    """
    d = s.shape[1]
    X, Z, base, offset = _design_rows(s, design)
    n_fit = fit_end - offset
    R, ar = _residual_latents(X, Z, n_fit, design)
    first, burn = max(0, n_fit - FORECAST_MAX_FIT), min(20, n_fit)
    pred = posterior_predictive_filter(draws, X[first:n_fit], R[first:n_fit], X[n_fit - burn:], key=key, rank=rank)
    readouts = np.asarray(pred.draws)[:, burn:, :d]     # (S, m, d)
    low, high = (np.asarray(b) for b in _widened_range(R[first:n_fit, :d]))
    clipped = np.any((readouts < low) | (readouts > high), axis=(0, 2))
    readouts = np.clip(readouts, low, high)
    noise = np.mean(np.exp(2 * np.asarray(draws["log_s"])))
    mean = base[n_fit:] + ar(X[n_fit:], n_fit) + readouts.mean(axis=0)
    return mean, np.sqrt(share**2 * readouts.var(axis=0) + noise), clipped
