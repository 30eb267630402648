"""Forecasting the future: the next steps of a series (NumPy, or pandas with dates) with a band per horizon."""

import inspect
import time
import warnings
from typing import NamedTuple

import numpy as np

from bayeskern._config import require_x64
from bayeskern._validation import check_count, check_key
from bayeskern.kbr.forecast import (FORECAST_MAX_FIT, ForecastDesign, ForecastTuning, _as_series,
                                    _calibration, _check_tuning_arguments, _conformal_quantile, _location_scale,
                                    _MIN_FIT_STEPS, _validation_size, conformal_band, tune_forecaster)
from bayeskern.kbr.filter import ReadoutWarning
from bayeskern.kbr.multistep import iterated_forecasts

from .diagnostics import Diagnostics
from .forecast import CalibrationWarning, _hyperparameter_posterior, _other_members, _sampled, _warn_clipped

__all__ = ["ForecastAhead", "forecast_ahead", "Backtest", "backtest"]


class ForecastAhead(NamedTuple):
    """Forecasts of the next steps of a series, with a band per horizon.

    Attributes:
        mean: (steps, d) forecasts of the next ``steps`` values.
        band: (2, steps, d) lower and upper limits of probability ``level`` at each horizon, finite.
        index: the future dates (a pandas ``DatetimeIndex`` or ``PeriodIndex`` continuing the input's at its
            frequency; the next integers for an integer index), or None for NumPy input.
        columns: the d names of the series (the Series' name or the DataFrame's columns; ``y0``, ``y1``, ... for
            NumPy input).
        level: the band's coverage target.
        design: the chosen :class:`~bayeskern.kbr.ForecastDesign`, or None when a baseline forecasts.
        fallback: ``"persistence"`` or ``"prior mean"`` when a baseline forecasts, else None.
        tuning: the validated choice (:func:`bayeskern.kbr.tune_forecaster`).
        calibration_counts: (steps,) the number of calibration errors behind each horizon's band.
        widened: (steps, d) whether the horizon's band came from the tail rule (too few errors for the level).
        clipped: (steps,) whether the filter's read-out was clipped to the training range at that step (with
            ``bayesian``: for some draw).
        mcmc: NUTS diagnostics of the Bayesian forecaster, or None.
        seconds: wall time of the whole call.
    """

    mean: np.ndarray
    band: np.ndarray
    index: object
    columns: tuple
    level: float
    design: ForecastDesign | None
    fallback: str | None
    tuning: ForecastTuning
    calibration_counts: np.ndarray
    widened: np.ndarray
    clipped: np.ndarray
    mcmc: Diagnostics | None
    seconds: float

    def to_frame(self):
        """A pandas DataFrame of the forecasts and band limits, indexed by ``index`` (1..steps, named "step",
        when there is none): columns ``mean``, ``lower``, ``upper`` for one series, ``<name>_mean``,
        ``<name>_lower``, ``<name>_upper`` for several.

        Returns:
            pandas.DataFrame of ``steps`` rows.

        Raises:
            ImportError: when pandas is not installed.
        """
        import pandas as pd

        steps = self.mean.shape[0]
        index = self.index if self.index is not None else pd.RangeIndex(1, steps + 1, name="step")
        parts = {"mean": self.mean, "lower": self.band[0], "upper": self.band[1]}
        if len(self.columns) == 1:
            data = {kind: values[:, 0] for kind, values in parts.items()}
        else:
            data = {f"{name}_{kind}": values[:, j] for j, name in enumerate(self.columns)
                    for kind, values in parts.items()}
        return pd.DataFrame(data, index=index)


def forecast_ahead(y, steps: int, *, level: float = 0.9, lags="auto", season: int | None = None,
                   n_val: int | None = None, bayesian: bool = False, key=None, num_chains: int = 2,
                   num_warmup: int = 200, num_samples: int = 200, num_landmarks=(20, 20), num_draws: int = 40,
                   progress_bar: bool = False, rank="auto", workers: int | None = None) -> ForecastAhead:
    """Forecasts of the next ``steps`` values of a series, with a band per horizon.

    The forecaster is the one :func:`forecast_series` validates (lags, levels, first or seasonal differences,
    seasonal intercepts, the filter of what an autoregression leaves over, refitted on the whole series; the average
    over the designs that validation cannot tell apart, ``tuning.members``). Several steps ahead the forecasts take
    the place of the unknown values in the autoregression's lags (the recursive strategy), and the filter's
    embedding is carried forward by its transition (no Bayes update on lags that hold forecasts), so its correction
    relaxes towards the residual's long-run mean (:func:`bayeskern.kbr.multistep.iterated_forecasts`).

    The band of horizon h is conformal on that horizon's errors: the chosen forecaster, refitted on the steps before
    a calibration block of C steps just before the validation block (neither its fit nor its choice saw them), is
    iterated from every origin in the block, and its h-step errors that fall inside the block (C - h + 1 of them)
    are the scores; the band's half-width is their ceil((n + 1) level)-th smallest (split conformal prediction),
    or the tail rule of :func:`bayeskern.kbr.conformal_band` where they are too few (``widened``). The band never
    narrows with the horizon (the h-step error of the best forecast is no smaller than the (h - 1)-step one, whereas
    the quantiles of far horizons come from fewer scores and overlapping origins, and dip by chance): the half-widths
    are the isotonic regression of the per-horizon quantiles on the horizon, weighted by their numbers of scores,
    which pools a dip with its neighbours instead of raising it to the largest quantile before it.

    With ``bayesian=True`` NUTS samples the chosen design's filter hyperparameters (as :func:`forecast_series`
    does) and that design's forecast becomes the average over ``num_draws`` of them: each draw's forecaster (its
    filter on the last :data:`~bayeskern.kbr.FORECAST_MAX_FIT` fit steps, low rank on ``num_landmarks``) forecasts
    the future and the calibration origins, while the other members keep their validated filters in the average
    over members. The scores are then |error| / scale, with the scale the spread of that average over the draws
    and their noise, so the band is wider where the draws disagree.

    Args:
        y: (T,) or (T, d) NumPy array, or a pandas Series or DataFrame; a ``DatetimeIndex`` (with a frequency that
            pandas can infer) or ``PeriodIndex`` is continued into ``index``.
        steps: the number of future steps, >= 1.
        level: the band's coverage target at each horizon, in (0, 1).
        lags: ``"auto"`` or an explicit lag set such as ``(1, 2, 12)``.
        season: seasonal period of the automatic lags and of the seasonal differences; default
            :func:`bayeskern.kbr.seasonal_period` of the fit steps.
        n_val: validation steps V (at most T // 2); default min(200, max(20, T // 5)).
        bayesian: average over NUTS draws of the filter's hyperparameters.
        key: PRNG key (needed when ``bayesian``).
        num_chains: NUTS chains.
        num_warmup: NUTS warm-up iterations per chain.
        num_samples: NUTS draws per chain.
        num_landmarks: Nystrom landmarks (observations, latents) of the sampled filters and of each draw's
            forecaster (as many per kernel as the larger of the two; None: exact filters).
        num_draws: posterior draws (evenly thinned) whose forecasters are averaged.
        progress_bar: show the sampler's progress.
        rank: rank of the filters, as in :meth:`bayeskern.kbr.KernelBayesFilter.build`.
        workers: processes that score the lag designs (:func:`bayeskern.kbr.tune_forecaster`).

    Returns:
        ForecastAhead: ``mean`` (steps, d), ``band`` (2, steps, d), ``index``, ``to_frame()`` and the choice.

    Raises:
        TypeError: for values that are not real numbers, steps that is not an integer, or a missing key with
            ``bayesian=True``.
        ValueError: for non-finite values, steps below 1, a level outside (0, 1), a dated index without a
            frequency, or a series too short for V validation steps, a calibration block of ``steps`` and 24 fit
            steps.
        RuntimeError: when float64 is off.

    Warns:
        TuningWarning: a baseline forecasts (no filter beat persistence and the training mean on validation), or
            ``bayesian=True`` is not honoured (a baseline, or a filter exact on validation, leaves nothing to sample).
        CalibrationWarning: the calibration errors are too few for the level at some horizon (tail rule).
        ReadoutWarning: the filter's read-out was clipped at some future step.
    """
    require_x64("forecast_ahead")
    start = time.perf_counter()
    values, dates, columns = _unpack(y)
    steps = check_count(steps, "steps")
    _check_level(level)
    T = values.shape[0]
    index = _future_index(dates, steps)
    fans = _fitted_fans(values, T, np.array([T]), steps, "y", lags=lags, season=season, n_val=n_val, bayesian=bayesian,
                        key=key, num_chains=num_chains, num_warmup=num_warmup, num_samples=num_samples,
                        num_landmarks=num_landmarks, num_draws=num_draws, progress_bar=progress_bar, rank=rank,
                        workers=workers)
    d = values.shape[1]
    q, widened = np.empty((steps, d)), np.zeros((steps, d), bool)
    for h, scores in enumerate(fans.calibration):
        for j in range(d):
            q[h, j], widened[h, j] = _conformal_quantile(np.sort(scores[:, j]), 1 - level, level)
    mean = fans.mean[0]
    counts = np.array([scores.shape[0] for scores in fans.calibration])
    half = _nondecreasing(q * fans.scale[0], counts[:, None], axis=0)
    if widened.any():
        first = int(np.flatnonzero(widened.any(axis=1))[0]) + 1
        warnings.warn(f"from horizon {first} on, the {counts[first - 1]} or fewer calibration errors per horizon are "
                      f"too few for level {level}: those bands follow the tail rule (see widened)",
                      CalibrationWarning, stacklevel=2)
    _warn_clipped(fans.clipped[0], "future")
    tuning = fans.tuning
    design = None if tuning.best is None else tuning.best.design
    return ForecastAhead(mean, np.stack([mean - half, mean + half]), index, columns, level, design, tuning.fallback,
                         tuning, counts, widened, fans.clipped[0], fans.mcmc, time.perf_counter() - start)


class Backtest(NamedTuple):
    """Forecasts from every origin of a held-out span by a forecaster fitted before it, each with its band.

    Attributes:
        origins: (O,) the origins o (positions in y): the forecasts of origin o are of y[o], ..., y[o + steps - 1],
            made from y[:o].
        dates: the origins' labels (the pandas index at ``origins``), or None for NumPy input.
        mean: (O, steps, d) forecasts.
        band: (2, O, steps, d) lower and upper limits of probability ``level``, finite.
        truth: (O, steps, d) the values forecast.
        level: the bands' coverage target.
        tuning: the validated choice of the forecaster fitted on y[:start].
        widened: (O, steps, d) whether a band came from the tail rule (too few known errors for its level).
        clipped: (O, steps) whether the filter's read-out was clipped to the training range.
        mcmc: NUTS diagnostics of the Bayesian forecaster, or None.
        seconds: wall time of the whole call.
    """

    origins: np.ndarray
    dates: object
    mean: np.ndarray
    band: np.ndarray
    truth: np.ndarray
    level: float
    tuning: ForecastTuning
    widened: np.ndarray
    clipped: np.ndarray
    mcmc: Diagnostics | None
    seconds: float

    def coverage(self) -> np.ndarray:
        """The share of origins whose band held the truth, per horizon and series.

        Returns:
            (steps, d) shares in [0, 1].
        """
        return self._hits().mean(axis=0)

    def coverage_se(self, block: int | None = None, *, draws: int = 2000, seed: int = 0) -> np.ndarray:
        """The Monte-Carlo standard error of :meth:`coverage`, by the moving-block bootstrap over the origins.

        The h-step errors of neighbouring origins share up to h - 1 steps, so the hits of one horizon are not
        independent and sqrt(p (1 - p) / O) understates the error. Each bootstrap draw strings together blocks of
        ``block`` consecutive origins (starts drawn uniformly) up to O origins; the standard deviation of the
        coverage over the draws is returned.

        Args:
            block: origins per block, in 1..O; default min(steps, O), longer than any overlap of the errors.
            draws: bootstrap draws, >= 2.
            seed: seed of the NumPy generator that draws the blocks.

        Returns:
            (steps, d) standard errors.

        Raises:
            ValueError: for a block outside 1..O or fewer than 2 draws.
        """
        hits = self._hits()
        O = hits.shape[0]
        block = min(hits.shape[1], O) if block is None else block
        if not (isinstance(block, (int, np.integer)) and 1 <= block <= O):
            raise ValueError(f"block must be an integer in 1..{O} (the number of origins), got {block!r}")
        if not (isinstance(draws, (int, np.integer)) and draws >= 2):
            raise ValueError(f"draws must be an integer >= 2, got {draws!r}")
        count = -(-O // block)
        last = O - (count - 1) * block                                    # the rows kept of the last block
        starts = np.random.default_rng(seed).integers(0, O - block + 1, size=(draws, count))
        running = np.concatenate([np.zeros((1,) + hits.shape[1:]), np.cumsum(hits, axis=0)])
        whole = running[starts[:, :-1] + block] - running[starts[:, :-1]]          # (draws, count - 1, steps, d)
        part = running[starts[:, -1] + last] - running[starts[:, -1]]              # (draws, steps, d)
        return ((whole.sum(axis=1) + part) / O).std(axis=0, ddof=1)

    def _hits(self) -> np.ndarray:
        """(O, steps, d) 1.0 where the band held the truth, else 0.0."""
        return ((self.band[0] <= self.truth) & (self.truth <= self.band[1])).astype(float)

    def rmse(self) -> np.ndarray:
        """The root mean squared error over the origins, per horizon and series.

        Returns:
            (steps, d) errors in the units of y.
        """
        return np.sqrt(np.mean(np.square(self.truth - self.mean), axis=0))


def backtest(y, steps: int, *, start: int, level: float = 0.9, gamma: float = 0.02, **options) -> Backtest:
    """Forecasts 1 to ``steps`` ahead from every origin of y[start:] by the forecaster fitted on y[:start], the way
    it would have been used over those steps: each origin sees the values before it, and each band learns from the
    errors revealed so far.

    The forecaster, its means and its calibration scores are those of ``forecast_ahead(y[:start], steps,
    **options)``, fitted once; from origin o its means are forecast from y[:o] (as ``forecast_ahead(y[:o], ...)``
    would with the same fitted forecaster). The band of horizon h at origin o is the sequential conformal band of
    :func:`bayeskern.kbr.conformal_band` with ``delay`` h: its scores are the calibration scores and the h-step
    errors of the earlier origins already revealed (those of origins up to o - h), and ``gamma`` adapts its level
    after each revealed miss, so a band that proves too narrow (or wide) over the span widens (narrows). As in
    :func:`forecast_ahead` each origin's half-widths are then made non-decreasing in the horizon by isotonic
    regression, weighted by the number of scores behind each band.

    Args:
        y: (T,) or (T, d) NumPy array, or a pandas Series or DataFrame.
        steps: the horizons 1..``steps`` forecast from each origin, >= 1.
        start: the first origin; the forecaster is fitted on y[:start], and the origins are start, ..., T - steps.
        level: the bands' coverage target, in (0, 1).
        gamma: step size of the bands' adaptation (0: plain sequential split conformal), >= 0.
        **options: the keyword arguments of :func:`forecast_ahead` (``lags``, ``season``, ``n_val``, ``bayesian``,
            ``key``, ...).

    Returns:
        Backtest: ``mean``, ``band`` and ``truth`` per origin and horizon; ``coverage()`` (with ``coverage_se()``)
        and ``rmse()``.

    Raises:
        TypeError: as :func:`forecast_ahead`, or for an unknown option.
        ValueError: as :func:`forecast_ahead` for y[:start], for a start that leaves no origin, or gamma < 0.

    Warns:
        TuningWarning: as :func:`forecast_ahead`.
        CalibrationWarning: some bands follow the tail rule (``widened``).
        ReadoutWarning: the filter's read-out was clipped from some origin.
    """
    require_x64("backtest")
    began = time.perf_counter()
    values, dates, _ = _unpack(y)
    steps = check_count(steps, "steps")
    _check_level(level)
    if not gamma >= 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    unknown = sorted(set(options) - set(_FORECAST_DEFAULTS))
    if unknown:
        raise TypeError(f"backtest got unknown options {unknown}; it takes forecast_ahead's: "
                        f"{tuple(_FORECAST_DEFAULTS)}")
    T = values.shape[0]
    start = check_count(start, "start")
    if start > T - steps:
        raise ValueError(f"start must be at most len(y) - steps = {T - steps} so that some origin's {steps} steps "
                         f"lie in y, got {start}")
    options = {**_FORECAST_DEFAULTS, **options}
    origins = np.arange(start, T - steps + 1)
    fans = _fitted_fans(values, start, origins, steps, "y[:start]", **options)
    truth = values[origins[:, None] + np.arange(steps)[None, :]]                           # (O, steps, d)
    half, widened = np.empty_like(truth), np.zeros(truth.shape, bool)
    for h, scores in enumerate(fans.calibration):
        errors = truth[:, h] - fans.mean[:, h]
        conformal = conformal_band(np.zeros_like(errors), fans.scale[:, h], scores, errors, level, gamma=gamma,
                                   delay=h + 1)
        half[:, h], widened[:, h] = conformal.band[1], conformal.widened
    calibrated = np.array([scores.shape[0] for scores in fans.calibration])
    known = calibrated + np.maximum(0, np.arange(origins.size)[:, None] - np.arange(steps))   # per band (O, steps)
    half = _nondecreasing(half, known[..., None], axis=1)
    if widened.any():
        warnings.warn(f"{int(widened.any(axis=2).sum())} of the {widened.shape[0] * steps} bands (origins x horizons) "
                      f"had too few known errors for level {level} and follow the tail rule (see widened)",
                      CalibrationWarning, stacklevel=2)
    if fans.clipped.any():
        hit = origins[fans.clipped.any(axis=1)]
        warnings.warn(f"the filter's read-out left the training range from {hit.size} of {origins.size} origins "
                      f"(first: {hit[:10].tolist()}) and was clipped to it", ReadoutWarning, stacklevel=2)
    return Backtest(origins, None if dates is None else dates[origins], fans.mean,
                    np.stack([fans.mean - half, fans.mean + half]), truth, level, fans.tuning, widened, fans.clipped,
                    fans.mcmc, time.perf_counter() - began)


_FORECAST_DEFAULTS = {name: option.default for name, option in inspect.signature(forecast_ahead).parameters.items()
                      if option.kind is option.KEYWORD_ONLY and name != "level"}
"""forecast_ahead's options of the forecaster, with their defaults (``backtest`` passes them on)."""


def _check_level(level) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")


class _Fans(NamedTuple):
    """A fitted forecaster's forecasts from some origins and its calibration scores (|error| / scale) per horizon."""

    tuning: ForecastTuning
    calibration: tuple        # steps arrays (n_h, d)
    mean: np.ndarray          # (O, steps, d)
    scale: np.ndarray         # (O, steps, d)
    clipped: np.ndarray       # (O, steps)
    mcmc: Diagnostics | None


def _fitted_fans(values, fit_end, origins, steps, name, *, lags, season, n_val, bayesian, key, num_chains, num_warmup,
                 num_samples, num_landmarks, num_draws, progress_bar, rank, workers) -> _Fans:
    """The forecaster tuned, calibrated (and sampled) on values[:fit_end], and its forecasts 1..steps ahead from
    ``origins`` (each >= fit_end, using the values before it); ``name`` names values[:fit_end] in errors."""
    if bayesian:
        check_key(key)
        num_draws = check_count(num_draws, "num_draws")
    _check_tuning_arguments(lags, workers)
    fit = values[:fit_end]
    V = _validation_size(fit_end, n_val, name, reserve=steps)
    tuning = tune_forecaster(fit, n_val=V, lags=lags, season=season, rank=rank, workers=workers)
    bayesian = _sampled(tuning, bayesian, stacklevel=4)         # the user's call of forecast_ahead or backtest
    tuning, C = _calibration(fit_end, tuning, min_fit=_MIN_FIT_STEPS - 1, wanted=max(V, 2 * steps), needed=steps)
    if C < steps:
        chosen = tuning.fallback if tuning.best is None else tuning.best.design.label
        raise ValueError(f"{name} of {fit_end} steps leaves {C} calibration steps for {chosen}: too few for bands "
                         f"{steps} steps ahead; ask for at most {max(C, 1)} steps, pass a smaller n_val (the "
                         f"validation block holds {V} steps) or a longer series")
    end = fit_end - V                                 # calibration origins end-C .. end-1, errors inside the block
    cal_origins = np.arange(end - C, end)
    mcmc = None
    if bayesian:
        run = _hyperparameter_posterior(fit, tuning, key, num_chains, num_warmup, num_samples, num_landmarks,
                                        progress_bar)
        (paths, cal_scale), (future, future_scale, clipped) = _posterior_fans(
            values, tuning, run.draws(), (end - C, cal_origins), (fit_end, origins), steps, num_draws, num_landmarks,
            rank)
        mcmc = run.diagnostics
    else:
        paths, _ = iterated_forecasts(fit, tuning, end - C, cal_origins, steps, rank=rank)
        future, clipped = iterated_forecasts(values, tuning, fit_end, origins, steps, rank=rank)
        cal_scale, future_scale = np.ones_like(paths), np.ones_like(future)
    targets = cal_origins[:, None] + np.arange(steps)[None, :]                             # (C, steps)
    inside = targets < end
    scores = np.abs(fit[np.minimum(targets, end - 1)] - paths) / cal_scale                # (C, steps, d)
    calibration = tuple(scores[inside[:, h], h] for h in range(steps))
    return _Fans(tuning, calibration, future, future_scale, clipped, mcmc)


def _posterior_fans(values, tuning, draws, calibration, future, steps, num_draws, num_landmarks, rank):
    """The forecaster with the chosen design's filter averaged over the posterior draws, at the calibration (fit end,
    origins) and the ``future`` (fit end, origins): ((calibration means (C, steps, d), scales), (future means (O,
    steps, d), scales, clipped (O, steps))).

    The chosen design's forecast is the mean of its draws' forecasters; the other members of ``tuning`` keep their
    validated filters, and the members are averaged with equal weights as in the point forecaster. A scale is the
    spread of the average over the draws and the draws' mean noise sd."""
    (cal_fit_end, cal_origins), (fit_end, origins) = calibration, future
    total = np.asarray(draws["log_s"]).shape[0]
    chosen = np.unique(np.linspace(0, total - 1, min(num_draws, total)).round().astype(int))
    hyper = np.exp(np.stack([np.asarray(draws[k])[chosen] for k in ("log_cx", "log_cz", "log_lam", "log_eta")], 1))
    noise = np.mean(np.exp(2 * np.asarray(draws["log_s"])[chosen])) * _location_scale(values[:fit_end])[1] ** 2
    refit_rank = rank if num_landmarks is None else int(np.max(num_landmarks))
    cal, fut, clipped = [], [], np.zeros((len(origins), steps), bool)
    for c_x, c_z, lam, eta in hyper:
        fit = dict(rank=refit_rank, hyper=(c_x, c_z, lam, eta), max_fit=FORECAST_MAX_FIT)
        cal.append(iterated_forecasts(values[:fit_end], tuning, cal_fit_end, cal_origins, steps, **fit)[0])
        path, flags = iterated_forecasts(values, tuning, fit_end, origins, steps, **fit)
        fut.append(path)
        clipped |= flags
    share, others = _other_members(tuning)
    cal, fut = share * np.array(cal), share * np.array(fut)
    if others is not None:
        cal = cal + (1 - share) * iterated_forecasts(values[:fit_end], others, cal_fit_end, cal_origins, steps,
                                                     rank=rank)[0]
        path, flags = iterated_forecasts(values, others, fit_end, origins, steps, rank=rank)
        fut, clipped = fut + (1 - share) * path, clipped | flags
    return ((cal.mean(axis=0), np.sqrt(cal.var(axis=0) + noise)),
            (fut.mean(axis=0), np.sqrt(fut.var(axis=0) + noise), clipped))


def _unpack(y):
    """(values (T, d), the pandas index or None, column names) of a NumPy array or a pandas Series/DataFrame."""
    if type(y).__module__.startswith("pandas"):
        if getattr(y, "ndim", None) == 1:
            columns = (str(y.name) if y.name is not None else "y",)
        else:
            columns = tuple(str(c) for c in y.columns)
        try:   # nullable and extension dtypes (Int64, Float64) convert; text and objects do not
            values = y.to_numpy(dtype=float)
        except (TypeError, ValueError):
            dtypes = sorted({str(t) for t in (y.dtypes if y.ndim == 2 else [y.dtype])})
            raise TypeError(f"y must hold real numbers, got dtype {', '.join(dtypes)}") from None
        return _as_series(values, "y"), y.index, columns
    values = _as_series(y, "y")
    return values, None, tuple(f"y{j}" for j in range(values.shape[1]))


def _future_index(index, steps: int):
    """The ``steps`` labels after a pandas index: dates at its frequency, the next integers, else None."""
    if index is None:
        return None
    import pandas as pd

    if isinstance(index, (pd.PeriodIndex, pd.DatetimeIndex)) and not (index.is_monotonic_increasing
                                                                      and index.is_unique):
        raise ValueError("y's dates must increase strictly (the last row is the latest step): sort them with "
                         "y.sort_index() and remove repeated dates")

    if isinstance(index, pd.PeriodIndex):
        return pd.period_range(index[-1] + 1, periods=steps, freq=index.freq, name=index.name)
    if isinstance(index, pd.DatetimeIndex):
        freq = index.freq or (pd.DatetimeIndex(index, freq="infer").freq if len(index) >= 3 else None)
        if freq is None:
            raise ValueError("y has dates without a regular frequency (pandas cannot infer one): give it a "
                             "DatetimeIndex with a freq, e.g. y.asfreq('MS'), or pass the values alone")
        return pd.date_range(index[-1], periods=steps + 1, freq=freq, name=index.name)[1:]
    if pd.api.types.is_integer_dtype(index.dtype) and len(index) >= 2:
        step = int(index[-1] - index[-2])
        return pd.Index(int(index[-1]) + step * np.arange(1, steps + 1), name=index.name)
    return None


def _nondecreasing(values, weights, axis: int) -> np.ndarray:
    """The weighted least-squares fit to ``values`` that does not decrease along ``axis`` (isotonic regression), by
    pooling adjacent violators: O(n) per line of n values.

    Args:
        values: (..., n, ...) reals.
        weights: positive weights, broadcastable to ``values``.
        axis: the axis along which the fit may not decrease.

    Returns:
        An array of the shape of ``values``.
    """
    v = np.moveaxis(np.asarray(values, float), axis, -1)
    w = np.moveaxis(np.broadcast_to(np.asarray(weights, float), np.shape(values)), axis, -1)
    fit = np.empty_like(v)
    for line in np.ndindex(v.shape[:-1]):
        blocks = []                                     # (mean, weight, length), the means increasing
        for value, weight in zip(v[line], w[line]):
            mean, mass, size = value, weight, 1
            while blocks and blocks[-1][0] > mean:      # pool with the block before while it lies above
                before, before_mass, before_size = blocks.pop()
                mean = (before * before_mass + mean * mass) / (before_mass + mass)
                mass, size = before_mass + mass, before_size + size
            blocks.append((mean, mass, size))
        fit[line] = np.repeat([b[0] for b in blocks], [b[2] for b in blocks])
    return np.moveaxis(fit, -1, axis)
