"""One-step-ahead forecasts of an observed series with calibrated bands: the validated kernel Bayes forecaster,
Bayesian-averaged over the filter's hyperparameters by NUTS, with an adaptive conformal band."""

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayeskern._config import require_x64
from bayeskern._validation import check_key
from bayeskern.kbr.forecast import (FORECAST_MAX_FIT, ForecastDesign, ForecastTuning, _as_series, _design_rows,
                                    _forecast_path, _location_scale, _residual_latents, _standardised,
                                    conformal_band, tune_forecaster)
from bayeskern.models.kbf import kbf_hyper_model, split_for_validation

from .diagnostics import Diagnostics
from .kbf import _chain_method_for_filters, posterior_predictive_filter
from .nuts import run_nuts

__all__ = ["Forecast", "forecast_series"]


class Forecast(NamedTuple):
    """One-step-ahead forecasts of a test series with a predictive band.

    Attributes:
        mean: (T~, d) forecasts; row t uses the training series and the test steps before t.
        band: (2, T~, d) lower and upper band of probability ``level``.
        level: the band's coverage target.
        design: the chosen :class:`~bayeskern.kbr.forecast.ForecastDesign` (lags, differencing), or None when a
            baseline forecasts (``tuning.fallback``).
        tuning: the :class:`~bayeskern.kbr.forecast.ForecastTuning` of the validated choice.
        scale: (T~, d) the scale of each step's band before conformal calibration (ones for the tuned filter; the
            posterior predictive standard deviation for the Bayesian one).
        mcmc: NUTS diagnostics of the Bayesian filter, or None.
        seconds: wall time of the whole call.
    """

    mean: np.ndarray
    band: np.ndarray
    level: float
    design: ForecastDesign | None
    tuning: ForecastTuning
    scale: np.ndarray
    mcmc: Diagnostics | None
    seconds: float


def forecast_series(y_train, y_test, *, key=None, level: float = 0.9, lags="auto", bayesian: bool = False,
                    season: int | None = None, n_val: int | None = None, gamma: float = 0.05,
                    num_chains: int = 2, num_warmup: int = 200, num_samples: int = 200, num_landmarks=(20, 20),
                    progress_bar: bool = False, rank="auto", workers: int | None = None) -> Forecast:
    """One-step-ahead forecasts of ``y_test`` from ``y_train`` by a kernel Bayes filter, with a calibrated band.

    The series is standardised on ``y_train``; the lags (seasonal ones included), levels or first differences and
    the filter's hyperparameters are chosen on the last validation steps of ``y_train``
    (:func:`bayeskern.kbr.tune_forecaster`: the filter models what a least-squares autoregression on the lags
    leaves over, and a candidate that does not beat persistence and the training mean on validation is never
    chosen). With ``bayesian=True`` NUTS samples the filter's hyperparameters
    (:func:`bayeskern.models.kbf_hyper_model`, started at the validated choice) and the forecast averages one
    filter per draw, each built like the model's filters (on the last :data:`~bayeskern.kbr.FORECAST_MAX_FIT` fit
    steps, low rank on ``num_landmarks``); the spread of the draws plus each draw's noise scale gives each step its
    scale. The band is conformal: scores |error| / scale of the validation steps and of the test steps already seen
    set its half-width, adapted after every step (:func:`bayeskern.kbr.conformal_band`).

    Args:
        y_train: (T,) or (T, d) training series.
        y_test: (T~,) or (T~, d) series to forecast one step ahead (row t from y_train and y_test[:t]).
        key: PRNG key (needed when ``bayesian``).
        level: coverage target of the band, in (0, 1).
        lags: ``"auto"`` or an explicit lag set such as ``(1, 2, 12)``.
        bayesian: average over NUTS draws of the hyperparameters (else the validated filter alone, the default:
            on the benchmark panel the average is slower and no more accurate).
        season: seasonal period for the automatic lags; default from the autocorrelation of the differences.
        n_val: validation steps (at most T // 2); default min(200, max(20, T // 5)).
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
        Forecast: ``mean`` (T~, d), ``band`` (2, T~, d), the chosen design, the tuning, scales and diagnostics.

    Raises:
        TypeError: for a missing key with ``bayesian=True``.
        ValueError: for series that are not finite, of different dimensions or too short, or a level outside
            (0, 1).
        RuntimeError: when float64 is off.
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
    tuning = tune_forecaster(y_train, n_val=n_val, lags=lags, season=season, rank=rank, workers=workers)
    centre, sd = _location_scale(y_train)
    if bayesian and tuning.best is not None:
        keys = jax.random.split(key, 2)
        mean, scale, calibration_errors, cal_scale, diagnostics = _bayesian(
            y_train, y_test, tuning, keys, num_chains, num_warmup, num_samples, num_landmarks, progress_bar, rank,
            centre, sd)
    else:
        mean = _forecast_path(y_train, y_test, tuning, rank=rank)
        calibration_errors = tuning.validation_errors * sd
        scale, cal_scale, diagnostics = np.ones_like(mean), np.ones_like(calibration_errors), None
    band = conformal_band(mean, scale, np.abs(calibration_errors) / cal_scale, y_test - mean, level, gamma=gamma)
    design = None if tuning.best is None else tuning.best.design
    return Forecast(mean, band, level, design, tuning, scale, diagnostics, time.perf_counter() - start)


def _residual_pairs(s, design, rows):
    """(X, R, ar, base, offset): the lag design of the standardised series s with residual latents
    (:func:`~bayeskern.kbr.forecast._residual_latents`, autoregression fitted on the first ``rows`` rows)."""
    X, Z, base, offset = _design_rows(s, design)
    R, ar = _residual_latents(X, Z, rows)
    return X, R, ar, base, offset


def _bayesian(y_train, y_test, tuning, keys, num_chains, num_warmup, num_samples, num_landmarks, progress_bar, rank,
              centre, sd):
    """NUTS over the filter's hyperparameters for the chosen design; forecasts, scales and validation scores."""
    b, V = tuning.best, tuning.num_validation
    T, d = y_train.shape
    y = np.concatenate([y_train, y_test])
    s = _standardised(y_train, y)
    X, R, _, _, offset = _residual_pairs(s[:T], b.design, T - V - b.design.offset)
    split = split_for_validation(X, R, n_val=V, burn_in=0, num_landmarks=num_landmarks, max_fit=FORECAST_MAX_FIT)
    init = {"log_cx": jnp.log(b.c), "log_cz": jnp.log(b.c), "log_lam": jnp.log(b.lam), "log_eta": jnp.log(b.eta),
            "log_s": 0.5 * jnp.log(b.mse)}
    run = run_nuts(kbf_hyper_model, split, key=keys[0], num_chains=num_chains, num_warmup=num_warmup,
                   num_samples=num_samples, init_values=init, dense_mass=True, max_tree_depth=4,
                   chain_method=_chain_method_for_filters(num_chains), progress_bar=progress_bar, rhat_max=1.05,
                   min_ess=1)
    draws = run.draws()
    val_means = np.asarray(draws["z_val_hat"])[..., :d]  # (S, V, d) residual forecasts of the validation steps
    noise = np.exp(2 * np.asarray(draws["log_s"]))[:, None, None]
    cal_scale = np.sqrt(val_means.var(axis=0) + noise.mean())
    cal_err = (np.asarray(split.Z_val)[:, :d] - val_means.mean(axis=0)) * sd

    X, R, ar, base, offset = _residual_pairs(s, b.design, T - offset)
    n_fit = T - offset
    # each draw's filter as the model scored it: on the model's window of fit steps, low rank on as many landmarks
    # (per kernel) as the sampled filters
    first, burn = max(0, n_fit - FORECAST_MAX_FIT), min(20, n_fit)
    refit_rank = rank if num_landmarks is None else int(np.max(num_landmarks))
    pred = posterior_predictive_filter(draws, X[first:n_fit], R[first:n_fit], X[n_fit - burn:], key=keys[1],
                                       rank=refit_rank)
    test_draws = np.asarray(pred.draws)[:, burn:, :d]
    mean_s = base[n_fit:] + ar(X[n_fit:]) + test_draws.mean(axis=0)
    scale = np.sqrt(test_draws.var(axis=0) + noise.mean()) * sd
    return mean_s * sd + centre, scale, cal_err, cal_scale * sd, run.diagnostics
