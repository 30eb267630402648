"""One-step-ahead forecasting of an observed series with the kernel Bayes filter: lag designs, the validated choice
of lags, transform and filter hyperparameters, and sequential conformal bands (user guide, forecasting)."""

import dataclasses
import math
import statistics
import threading
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special

from .._config import require_x64
from .._validation import as_finite_array, check_count, check_positive
from .._workers import run_pinned, usable_cores
from .filter import (ETA_GRID, KernelBayesFilter, OutOfRangeWarning, ReadoutWarning, _loo_eta, _median_scale,
                     _widened_range)

__all__ = ["ForecastDesign", "Candidate", "ForecastTuning", "ConformalBand", "lag_design", "seasonal_period",
           "dickey_fuller_t",
           "tune_forecaster", "conformal_band", "FORECAST_C_GRID", "FORECAST_LAMBDA_GRID", "FORECAST_MAX_FIT",
           "FORECAST_MAX_MEMBERS"]

FORECAST_C_GRID = (0.5, 1.0, 2.0)
"""Bandwidth multipliers (of the median distance of the lag vectors) validated by :func:`tune_forecaster`."""
FORECAST_LAMBDA_GRID = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)
"""KBR ridges (operator scale) validated by :func:`tune_forecaster`; the largest shrinks towards the prior mean."""
FORECAST_MAX_FIT = 250
"""The most (latest) fit steps a forecaster's validation filters, and the Bayesian forecaster's model, are built on."""
FORECAST_MAX_MEMBERS = 8
"""The most designs whose forecasts :func:`tune_forecaster`'s forecaster averages (``ForecastTuning.members``)."""


class ForecastDesign(NamedTuple):
    """How a series becomes a filtering problem.

    The filter models u = D y, the standardised series y differenced by D = (1 - B)^a (1 - B^s)^b, B the backshift:
    a = 1 with ``difference``, b = 1 with ``seasonal`` = s > 0. Its forecast of u_t gives y_t = u_t + (y_t - u_t),
    the second term a combination of earlier values.

    Attributes:
        lags: the lags l whose values u_{t-l} form the observation x_t (increasing).
        difference: whether u takes first differences y_t - y_{t-1} (True) or not (False: levels, unless seasonal).
        seasonal: the period s of a seasonal difference u_t - u_{t-s}, or 0 for none.
        intercepts: the period P of the autoregression's seasonal intercepts (one per phase t mod P of a step t
            counted from the series' start: deterministic seasonality), or 0 for one intercept.
        order: the differencing's reach a + s b (the earlier values it combines).
        offset: the first step the design forecasts (its largest lag plus its differencing's order).
        label: a short description, e.g. ``"lags (1, 2), first and seasonal (12) differences"``.
    """

    lags: tuple
    difference: bool
    seasonal: int = 0
    intercepts: int = 0

    @property
    def order(self) -> int:
        """How many earlier values the differencing combines: 1 for first differences plus s for seasonal ones."""
        return int(self.difference) + self.seasonal

    @property
    def offset(self) -> int:
        """The largest lag plus the differencing's order."""
        return max(self.lags) + self.order

    @property
    def label(self) -> str:
        """The lags and the transform in words."""
        lags = self.lags
        shown = f"lags 1-{lags[-1]}" if lags == tuple(range(1, lags[-1] + 1)) and len(lags) > 1 else f"lags {lags}"
        if self.seasonal:
            kind = f"{'first and ' if self.difference else ''}seasonal ({self.seasonal}) differences"
        else:
            kind = "differences" if self.difference else "levels"
        means = f", seasonal ({self.intercepts}) intercepts" if self.intercepts else ""
        return f"{shown}, {kind}{means}"


class Candidate(NamedTuple):
    """One validated filter: design, hyperparameters and its validation error.

    Attributes:
        design: the :class:`ForecastDesign`.
        c: bandwidth multiplier of the median distance (observations and latents).
        lam: KBR ridge.
        eta: KuLSIF ridge (leave-one-out).
        mse: validation mean squared one-step error, per coordinate, in standardised units.
        in_range: whether the filter's read-outs (its estimates of the autoregression's residual) stayed within
            the range of the training residuals, widened by ``RANGE_MARGIN``, at every validation step.
    """

    design: ForecastDesign
    c: float
    lam: float
    eta: float
    mse: float
    in_range: bool


class ForecastTuning(NamedTuple):
    """The validated choice of :func:`tune_forecaster`.

    Attributes:
        best: the chosen :class:`Candidate`, or None when no filter beat both baselines on validation.
        fallback: ``"persistence"`` or ``"prior mean"`` when ``best`` is None (that baseline forecasts), else None.
        candidates: every validated :class:`Candidate` (the best of each design's hyperparameter grid).
        persistence_mse: validation mean squared error of persistence (y_t forecast by y_{t-1}).
        prior_mean_mse: validation mean squared error of the training mean.
        validation_errors: (V, d) one-step errors of the chosen forecaster on the validation steps, in
            standardised units (optimistic: the forecaster won on them; bands calibrate on other steps).
        num_validation: V, the number of validation steps.
        members: the candidates whose forecasts the forecaster averages with equal weights: ``best`` first, then
            the designs that validation cannot tell from it (:func:`tune_forecaster`); () when a baseline forecasts.
    """

    best: Candidate | None
    fallback: str | None
    candidates: tuple
    persistence_mse: float
    prior_mean_mse: float
    validation_errors: np.ndarray
    num_validation: int
    members: tuple = ()


def _as_series(y, name: str) -> np.ndarray:
    """A series as a float (T, d) array: (T,) becomes (T, 1).

    Args:
        y: (T,) or (T, d) real finite values.
        name: the argument's name, for errors.

    Returns:
        (T, d) float64 (float with x64 off) NumPy array.

    Raises:
        TypeError: for values that are not real numbers.
        ValueError: for non-finite values or another number of dimensions.
    """
    y = np.asarray(as_finite_array(y, name), dtype=float)
    if y.ndim == 1:
        y = y[:, None]
    if y.ndim != 2:
        raise ValueError(f"{name} must have shape (T,) or (T, d), got {y.shape}")
    return y


def lag_design(u, lags):
    """Observations and latents of a lagged series: x_t = (u_{t-l})_{l in lags}, z_t = (u_t, x_t).

    Args:
        u: (T,) or (T, d) series.
        lags: increasing positive integer lags, the largest below T.

    Returns:
        (X, Z): X of shape (T - p, d |lags|) and Z of shape (T - p, d (1 + |lags|)), rows t = p..T-1 with p the
        largest lag; the first d columns of Z are u_t.

    Raises:
        TypeError: for values that are not real numbers.
        ValueError: for non-finite values, lags that are not increasing positive integers or a largest lag >= T.
    """
    u = _as_series(u, "u")
    lags = _check_lags(lags)
    p = max(lags)
    T = u.shape[0]
    if p >= T:
        raise ValueError(f"the largest lag must be below the series length {T}, got {p}")
    X = np.concatenate([u[p - lag: T - lag] for lag in lags], axis=1)
    return X, np.concatenate([u[p:], X], axis=1)


def seasonal_period(y, max_period: int) -> int | None:
    """The seasonal period of a series, read off its first differences u in two steps.

    Whether there is a season: the largest autocorrelation of u at the m lags in [4, max_period] must be a local
    peak above z / sqrt(T), z the white-noise quantile of level 1 - 0.025 / m (Bonferroni: the largest of ~50
    white-noise autocorrelations passes the one-lag band 2 / sqrt(T) in most series).
    Which period: the p in [4, max_period] whose phase means (one mean of u per phase t mod p) explain most, by the
    p-value of their F test against one mean, when it is below 0.05 / m. A sinusoidal season has a flat-topped
    autocorrelation whose highest peak noise moves to s +- 1 or a multiple, and a peak at 2 s can outgrow the one at
    s; the F test does not reward a multiple (its extra phase means add degrees of freedom, not fit) and sees every
    harmonic of the profile at once. When no period passes it, the lag of that largest autocorrelation, or its
    shortest divisor p >= 4 whose autocorrelation is a local peak above 2 / sqrt(T) within 2 / sqrt(T) of it.

    Args:
        y: (T,) or (T, d) series (the coordinates' autocorrelations are averaged).
        max_period: largest period considered (at most T / 3 is used).

    Returns:
        int or None (no season).

    Raises:
        TypeError: for values that are not real numbers.
        ValueError: for non-finite values or max_period below 1.
    """
    y = _as_series(y, "y")
    max_period = check_count(max_period, "max_period")
    u = np.diff(y, axis=0)
    u = u - u.mean(axis=0)
    T = u.shape[0]
    max_period = min(max_period, T // 3)
    if max_period < 4:
        return None
    denom = np.sum(u**2, axis=0)
    denom = np.where(denom > 0, denom, 1.0)
    acf = np.array([np.mean(np.sum(u[s:] * u[:-s], axis=0) / denom) for s in range(1, max_period + 2)])
    band = 2 / math.sqrt(T)
    largest_band = statistics.NormalDist().inv_cdf(1 - 0.025 / (max_period - 3)) / math.sqrt(T)

    def peak(s, threshold):
        return acf[s - 1] >= acf[s - 2] and acf[s - 1] >= acf[s] and acf[s - 1] > threshold

    s = int(np.argmax(acf[3:max_period])) + 4  # acf[k] is lag k + 1
    if not peak(s, largest_band):
        return None
    p_value, p = min((_phase_means_p_value(u, p), p) for p in range(4, max_period + 1))
    if p_value < 0.05 / (max_period - 3):
        return p
    # a multiple of a period is a period too: the highest peak may sit at 2 s (monthly temperatures: 24), so the
    # shortest divisor of it whose peak is as high, within the white-noise band, is the period
    divisors = [s // k for k in range(s // 4, 1, -1) if s % k == 0]
    return next((p for p in divisors if peak(p, band) and acf[p - 1] >= acf[s - 1] - band), s)


def _phase_means_p_value(u, p: int) -> float:
    """The p-value of the F test of one mean per phase t mod p of the centred series u (T, d) against one mean,
    the coordinates pooled: (between / (d (p - 1))) / (within / (d (T - p)))."""
    T, d = u.shape
    phase = _phases(p, 0, T)
    counts = np.bincount(phase, minlength=p)
    means = np.stack([np.bincount(phase, u[:, i], minlength=p) for i in range(d)], axis=1) / counts[:, None]
    between = float(np.sum(counts[:, None] * means**2))
    within = float(np.sum(u**2)) - between
    if within <= 0:
        return 0.0 if between > 0 else 1.0
    return float(special.fdtrc(d * (p - 1), d * (T - p), (between / (p - 1)) / (within / (T - p))))


_ADF_CRITICAL = -2.86
"""The asymptotic 5 % critical value of the Dickey-Fuller t statistic with a constant and no trend (Fuller 1976,
table 8.5.2; MacKinnon 1996)."""


def dickey_fuller_t(y, *, lagged_differences="aic") -> np.ndarray:
    """The augmented Dickey-Fuller statistic (Said & Dickey 1984) of each coordinate: the t statistic of rho in the
    least-squares regression dy_t = a + rho y_{t-1} + sum_j b_j dy_{t-j} + e_t, j = 1..k. A value below -2.86 rejects
    a unit root at the 5 % level (asymptotic critical value, constant and no trend).

    Args:
        y: (T,) or (T, d) series.
        lagged_differences: k, or ``"aic"``: per coordinate the k in 0..K with the smallest AIC, n log(RSS / n)
            + 2 (k + 2), every order fitted on the same rows (the last T - 1 - K changes), K = min(ceil(12 (T /
            100)^(1/4)), T // 2 - 2) (Schwert 1989; fewer where the rows run out); the statistic is then that order's
            regression on every row it can use. Too few lagged differences leave autocorrelated errors (a test of
            the wrong size), too many cost power.

    Returns:
        (d,) statistics; NaN for a coordinate whose lagged level the other regressors explain exactly (constant),
        or that the regression fits exactly.

    Raises:
        TypeError: for values that are not real numbers.
        ValueError: for non-finite values, a bad ``lagged_differences`` or a series too short for the regression.
    """
    y = _as_series(y, "y")
    T = y.shape[0]
    if isinstance(lagged_differences, str):
        if lagged_differences != "aic":
            raise ValueError(f"lagged_differences must be 'aic' or a count >= 0, got {lagged_differences!r}")
        orders = range(max(0, min(math.ceil(12 * (T / 100) ** 0.25), T // 2 - 2, (T - 5) // 2)) + 1)
    else:
        orders = [check_count(lagged_differences, "lagged_differences", minimum=0)]
    if T - 1 - orders[-1] < orders[-1] + 4:
        raise ValueError(f"y of {T} steps is too short for a Dickey-Fuller regression with {orders[-1]} lagged "
                         f"differences")
    stats = np.full(y.shape[1], np.nan)
    first = orders[-1]   # the rows every order can use: the AIC compares the orders on the same data
    centred = y - y.mean(axis=0)
    sd = np.sqrt(np.mean(centred**2, axis=0))
    for i in np.flatnonzero(sd > 0):   # the statistic does not depend on the units: standardised, a series of
        z = centred[:, i] / sd[i]       # large level and small changes is not taken for a constant one
        dz = np.diff(z)

        def aic(k):
            others, level, change = _dickey_fuller_rows(z, dz, k, first)
            return _least_squares_aic(np.column_stack([others, level]), change[:, None])

        k = min(orders, key=aic) if len(orders) > 1 else orders[0]
        stats[i] = _dickey_fuller_rho_t(*_dickey_fuller_rows(z, dz, k, k))
    return stats


def _dickey_fuller_rows(y, dy, k: int, first: int):
    """(others (n, k + 1), level (n,), change (n,)): the regressors 1 and dy_{t-1..t-k}, the lagged level y_{t-1} and
    the change dy_t over the changes dy (T - 1,) of the (T,) series y from index ``first`` (>= k) on."""
    n = dy.shape[0] - first
    others = np.column_stack([np.ones(n)] + [dy[first - j: dy.shape[0] - j] for j in range(1, k + 1)])
    return others, y[first: first + n], dy[first:]


def _dickey_fuller_rho_t(others, level, change) -> float:
    """The t statistic of rho in change ~ others + rho level (Frisch-Waugh: rho from the residuals of the level and
    of the change on the other regressors); NaN where the others explain the level or the fit is exact."""
    both = np.column_stack([level, change])
    r_level, r_change = (both - others @ np.linalg.lstsq(others, both, rcond=None)[0]).T
    ss = r_level @ r_level
    if ss <= 1e-12 * max(level @ level, 1.0):
        return np.nan
    rho = (r_level @ r_change) / ss
    resid = r_change - rho * r_level
    sigma2 = resid @ resid / (level.shape[0] - others.shape[1] - 1)
    return rho / math.sqrt(sigma2 / ss) if sigma2 > 0 else np.nan   # an exact fit has no t statistic


def _aic_order(y, max_order: int) -> int:
    """The order p in 1..max_order of a least-squares autoregression of y with the smallest AIC,
    n log det(residual covariance) + 2 (p d + 1) d, all orders fitted on the same rows.

    Args:
        y: (T, d) series.
        max_order: largest order, < T / 2.

    Returns:
        int.
    """
    T, d = y.shape
    best = (np.inf, 1)
    for p in range(1, max_order + 1):
        X, Z = lag_design(y, tuple(range(1, p + 1)))
        X, U = X[max_order - p:], Z[max_order - p:, :d]
        best = min(best, (_least_squares_aic(np.hstack([_intercept_columns(1, 0, X.shape[0]), X]), U), p))
    return best[1]


def _least_squares_aic(A, U) -> float:
    """AIC of the least-squares regression of U (n, d) on the columns of A (n, k): n log det(residual covariance)
    + 2 k d."""
    resid = U - A @ np.linalg.lstsq(A, U, rcond=None)[0]
    logdet = np.linalg.slogdet(np.atleast_2d(resid.T @ resid / resid.shape[0]))[1]
    return resid.shape[0] * logdet + 2 * A.shape[1] * U.shape[1]


def _seasonal_intercepts(s_fit, lags: tuple, difference: bool, season: int) -> int:
    """``season`` when one intercept per phase of the season lowers the AIC of the design's least-squares
    autoregression on the standardised fit steps ``s_fit`` (T, d) against one intercept, else 0. A spurious season
    then costs nothing: its intercepts do not pay for themselves. Fewer than three fit rows per coefficient: 0."""
    X, Z, _, offset = _design_rows(s_fit, ForecastDesign(lags, difference))
    n, d = X.shape[0], Z.shape[1] - X.shape[1]
    if n < 3 * (season + X.shape[1]):
        return 0
    one = np.hstack([_intercept_columns(1, offset, n), X])
    phased = np.hstack([_intercept_columns(season, offset, n), X])
    return season if _least_squares_aic(phased, Z[:, :d]) < _least_squares_aic(one, Z[:, :d]) else 0


def _candidate_lags(season: int | None, max_order: int, max_lag: int, order: int | None = None) -> list:
    """The lag sets :func:`tune_forecaster` validates: (1..p) for p in 1, 2, 4, 8 and the AIC order up to
    ``max_order``, and with a season s (1, 2, s) and (1, 2, s - 1, s, s + 1) where s + 1 <= ``max_lag``.

    Args:
        season: seasonal period, or None.
        max_order: the longest run of consecutive lags 1..p.
        max_lag: the largest seasonal lag allowed.
        order: the order of the autoregression chosen by AIC (``_aic_order``), or None.

    Returns:
        list of lag tuples.
    """
    orders = sorted({p for p in (1, 2, 4, 8, order or 1) if p <= max_order})
    sets = [tuple(range(1, p + 1)) for p in orders]
    if season is not None and season + 1 <= max_lag and season > 3:
        sets += [(1, 2, season), (1, 2, season - 1, season, season + 1)]
    return sets


def _location_scale(y_train):
    """(centre, scale) of the training series per coordinate; a constant coordinate keeps scale 1."""
    scale = y_train.std(axis=0)
    return y_train.mean(axis=0), np.where(scale > 0, scale, 1.0)


def _standardised(y_train, y):
    centre, scale = _location_scale(y_train)
    return (y - centre) / scale


def _differencing(design: ForecastDesign) -> tuple:
    """((k, c_k), ...): y_t - u_t = sum_k c_k y_{t-k} for the design's differenced series u = D y."""
    poly = np.ones(1)                                   # coefficients of B^0, B^1, ... in D
    if design.difference:
        poly = np.convolve(poly, [1.0, -1.0])
    if design.seasonal:
        poly = np.convolve(poly, np.r_[1.0, np.zeros(design.seasonal - 1), -1.0])
    return tuple((k, -float(c)) for k, c in enumerate(poly) if k > 0 and c != 0)


def _differenced(s, design: ForecastDesign):
    """(u, base): u_t (the design's differenced series) and base_t = s_t - u_t, both (T, d) with NaN at the first
    ``design.order`` steps (where the differencing reaches before the series)."""
    base = np.full(s.shape, np.nan)
    base[design.order:] = 0.0
    for k, c in _differencing(design):
        base[design.order:] += c * s[design.order - k: s.shape[0] - k]
    return s - base, base


def _design_rows(s, design: ForecastDesign):
    """(X, Z, base, offset): the lag design of the standardised series s (T, d); the forecast of s_t is
    base_t + (first d coordinates of the filtered mean), row r of X forecasting s at time r + offset."""
    u, base = _differenced(s, design)
    X, Z = lag_design(u[design.order:], design.lags)
    return X, Z, base[design.offset:], design.offset


class _Autoregression(NamedTuple):
    """A least-squares autoregression u_t ~ b_{phase(t)} + x_t B of a design's rows, callable on (m, k) lag vectors
    of consecutive rows from ``start`` on."""

    intercepts: np.ndarray   # (P, d): one per phase, P = 1 without seasonal intercepts
    slopes: np.ndarray       # (k, d)
    offset: int              # row r of the design forecasts step r + offset

    def __call__(self, X, start: int = 0):
        return self.intercepts[_phases(self.intercepts.shape[0], self.offset + start, X.shape[0])] + X @ self.slopes


def _phases(period: int, first: int, n: int) -> np.ndarray:
    """(n,) the phases t mod ``period`` of the steps first..first + n - 1."""
    return (first + np.arange(n)) % period


def _intercept_columns(period: int, first: int, n: int) -> np.ndarray:
    """(n, period) the regression columns of one intercept per phase (a column of ones for period 1) of the steps
    first..first + n - 1."""
    return np.eye(period)[_phases(period, first, n)]


def _linear_mean(X, U, design: ForecastDesign, start: int = 0) -> _Autoregression:
    """Least-squares autoregression U ~ b_phase + X B on rows start.. of the design, X (n, k) lag vectors and U
    (n, d) targets, with the design's seasonal intercepts (one intercept without)."""
    period = max(design.intercepts, 1)
    A = np.hstack([_intercept_columns(period, design.offset + start, X.shape[0]), X])
    coef = np.linalg.lstsq(A, U, rcond=None)[0]
    return _Autoregression(coef[:period], coef[period:], design.offset)


def _residual_latents(X, Z, rows, design: ForecastDesign, start: int = 0):
    """(R, ar): the latents of rows start.. of the design with their first d coordinates replaced by what the
    least-squares autoregression ``ar`` fitted on the first ``rows`` of them leaves over, R = (u - ar(x), x)."""
    d = Z.shape[1] - X.shape[1]
    ar = _linear_mean(X[:rows], Z[:rows, :d], design, start)
    return np.hstack([Z[:, :d] - ar(X, start), Z[:, d:]]), ar


def _build_filter(X, Z, c, lam, rank, design, **setting):
    """The forecaster's filter on the fit rows (X, Z) (:func:`_filter_setting`, whose keywords it takes), of the
    given rank.

    Returns:
        (kbf, ar, (low, high), eta): the filter, the autoregression, the bounds (d,) of the filter's training
        residuals widened by ``RANGE_MARGIN``, and eta.
    """
    X, R, sigma_x, sigma_z, eta, ar, bounds = _filter_setting(X, Z, c, design, **setting)
    return KernelBayesFilter.build(X, R, sigma_x, sigma_z, lam, eta, rank=rank), ar, bounds, eta


def _filter_setting(X, Z, c, design, *, start=0, eta_grid=ETA_GRID, c_z=None, eta=None, window=None):
    """What the forecaster's filter is built from: the autoregression fitted on every fit row (X, Z), the filter's
    rows (X, R), R the residual latents, with bandwidths c (observations) and c_z (latents; default c) times the
    medians.

    Args:
        X: (n, k) lag vectors of the fit rows.
        Z: (n, d + k) their latents.
        c: bandwidth multiplier of the observations.
        design: the :class:`ForecastDesign` of the rows (its seasonal intercepts).
        start: the design row of X's first row.
        eta_grid: KuLSIF ridges scored by leave-one-out when ``eta`` is None.
        c_z: bandwidth multiplier of the residual latents (default c).
        eta: a given KuLSIF ridge (e.g. a posterior draw's).
        window: the filter's rows are the last this many only (the autoregression still on all).

    Returns:
        (X_w, R_w, sigma_x, sigma_z, eta, ar, (low, high)): the filter's rows, bandwidths and KuLSIF ridge, the
        autoregression and the bounds (d,) of the filter's training residuals widened by ``RANGE_MARGIN``.
    """
    d = Z.shape[1] - X.shape[1]
    R, ar = _residual_latents(X, Z, X.shape[0], design, start)
    first = 0 if window is None else max(0, X.shape[0] - window)
    X, R = X[first:], R[first:]
    # lag vectors that are one point (a constant differenced series: a constant or strictly periodic one) have no
    # distance scale; the standardised unit serves, and the forecasts come from the differencing and the
    # autoregression alone
    sigma_z = (c if c_z is None else c_z) * _median_scale(R, "R", default=1.0)
    eta = _loo_eta(R, sigma_z, eta_grid, 20, 10) if eta is None else eta
    bounds = tuple(np.asarray(b) for b in _widened_range(R[:, :d]))
    return X, R, c * _median_scale(X, "X", default=1.0), sigma_z, eta, ar, bounds


def _filter_means(X, Z, X_run, c, lams, eta_grid, rank, design, start, run_start):
    """The autoregression's forecasts of u over X_run (design rows from ``run_start``) and, for each ridge in
    ``lams``, the filtered mean of its residual, from one filter built on the fit rows (X, Z) of ``design`` from
    row ``start`` (:func:`_build_filter`; lam enters only the update, so the filter is built once and the ridge
    replaced).

    Returns:
        (eta, trend (m, d), [read-out (m, d) per lam], (low, high)): the residual read-outs are raw (unclipped);
        low and high (d,) bound the training residuals widened by ``RANGE_MARGIN``.
    """
    d = Z.shape[1] - X.shape[1]
    base, ar, bounds, eta = _build_filter(X, Z, c, min(lams), rank, design, start=start, eta_grid=eta_grid)
    readouts = []
    for lam in lams:
        kbf = dataclasses.replace(base, lam=jnp.asarray(lam))
        with warnings.catch_warnings():  # unseen observations and read-outs out of range are checked by the callers
            warnings.simplefilter("ignore", OutOfRangeWarning)
            warnings.simplefilter("ignore", ReadoutWarning)
            readouts.append(np.asarray(kbf.filter(X_run))[:, :d])
    return eta, ar(X_run, run_start), readouts, bounds


def _in_range(readout, bounds) -> np.ndarray:
    """(m,) whether each step's read-out lies within the widened training range in every coordinate."""
    low, high = bounds
    return np.all((readout >= low) & (readout <= high), axis=1)


def tune_forecaster(y, *, n_val: int | None = None, lags="auto", season: int | None = None, max_lag: int | None = None,
                    burn_in: int = 20, max_fit: int = FORECAST_MAX_FIT, c_grid=FORECAST_C_GRID, lam_grid=FORECAST_LAMBDA_GRID,
                    eta_grid=ETA_GRID, rank="auto", workers: int | None = None) -> ForecastTuning:
    """Choose lags, transform (levels, first or seasonal differences) and filter hyperparameters on the last
    validation steps.

    The series is standardised; for every design (lag set x transform) and every multiplier c the filter is built
    on the steps before the validation block (bandwidths c x median distance, the KuLSIF ridge by leave-one-out;
    the latents are what a least-squares autoregression on the lags leaves over), then run over the last
    ``burn_in`` fit steps and the V validation steps for every lam. A candidate is not chosen when the filter's
    read-out at a validation step leaves the range of its training residuals widened by
    :data:`~bayeskern.kbr.RANGE_MARGIN` (exploding weights), or when it does not beat both persistence
    (y_t = y_{t-1}) and the training mean; when no candidate remains, the better baseline is the forecaster
    (``fallback``). Among the rest: the design with the smallest validation error, and within its grid the most
    regularised hyperparameters within one standard error of its best (``best``). Designs that validation cannot
    tell from it join it as ``members``, whose forecasts the forecaster averages (forecast combination, Bates &
    Granger 1969): every other design, at the hyperparameters the same rule picks within its own grid, whose
    validation squared errors exceed the best's by less than two standard errors of the paired difference, the
    closest first, at most :data:`FORECAST_MAX_MEMBERS` in all.

    Args:
        y: (T, d) training series (the last V steps validate).
        n_val: V (at most T // 2); default min(200, max(20, T // 5)).
        lags: ``"auto"``: (1..p) for p in 1, 2, 4, 8 and the AIC order of a least-squares autoregression, and with
            a season s also (1, 2, s) and (1, 2, s - 1, s, s + 1); or one explicit lag set, e.g. ``(1, 2, 12)``.
            Each lag set is validated on levels and on first differences (with a season, with one intercept per
            phase of the season, seasonal dummies, where they lower the AIC of the design's autoregression on the
            fit steps), and with a season also on seasonal differences y_t - y_{t-s} and on both
            (:class:`ForecastDesign`); but the automatic lag sets without first differences where an augmented
            Dickey-Fuller test on the whole series (lagged differences by AIC) rejects a unit root at 5 %
            (:func:`dickey_fuller_t` below -2.86).
        season: seasonal period of the automatic lag sets and the seasonal differences; default
            :func:`seasonal_period` of the fit steps (with explicit lags: none unless given).
        max_lag: the largest automatic lag; default: runs 1..p up to min(T_fit // 10, s + 1) (12 without a
            season) and the seasonal sets where s + 1 <= T_fit // 4.
        burn_in: fit steps each validation run filters before the first validation step (the filter starts
            uniform).
        max_fit: the validation filters are built on at most this many (the last) fit steps: an exact filter step
            costs O(T^3), so long series tune on their recent past (the final filter uses every step). Every
            design's validation filter uses the same number of fit steps, no more than the design with the longest
            reach (lags plus differencing) leaves.
        c_grid: bandwidth multipliers.
        lam_grid: KBR ridges.
        eta_grid: KuLSIF ridges scored by leave-one-out.
        rank: the filters' rank, as in :meth:`KernelBayesFilter.build`.
        workers: processes that score the designs (at most one per design), each pinned to a CPU core of its own
            (the designs dealt out in turn; the same candidates as scored in this process). None: one per usable
            core on a CPU (an exact filter step factorises a matrix of a few hundred rows, which the threads of
            one process run more slowly than one pinned thread: a pinned process per core uses the cores); 1: in
            this process. Workers compile their programs afresh on every call: for repeated calls, call
            :func:`bayeskern.enable_compilation_cache` first (they then load them).

    Returns:
        ForecastTuning: the choice, the validated candidates and the baselines' validation errors.

    Raises:
        ValueError: for a series too short for the validation split (24 fit steps), n_val above
            T // 2, bad lags, empty grids or workers below 1.
        RuntimeError: when float64 is off.
    """
    require_x64("tune_forecaster")
    y = _as_series(y, "y")
    T = y.shape[0]
    _check_tuning_arguments(lags, workers)
    for grid, name in ((c_grid, "c_grid"), (lam_grid, "lam_grid"), (eta_grid, "eta_grid")):
        if len(grid) == 0:
            raise ValueError(f"{name} must hold at least one value, got an empty grid")
        for value in grid:
            check_positive(value, name)
    burn_in = check_count(burn_in, "burn_in", minimum=0)
    max_fit = check_count(max_fit, "max_fit", minimum=10)
    V = _validation_size(T, n_val, "y")
    designs = _designs(y[: T - V], lags, season, max_lag, whole=y)
    s = _standardised(y[: T - V], y)
    truth = s[T - V:]
    persistence = float(np.mean((s[T - V - 1: -1] - truth) ** 2))
    prior_mean = float(np.mean(truth**2))
    # designs whose lags leave too few fit rows before the validation block are not scored (an explicit lag set, or
    # no design at all, is an error)
    fits = [T - V - design.offset >= max(10, burn_in + 3) for design in designs]
    if not all(fits) and (not isinstance(lags, str) or not any(fits)):
        short = designs[fits.index(False)]
        raise ValueError(f"y of {T} steps is too short for V = {V} validation steps and lags {short.lags}: "
                         f"{T - V - short.offset} fit rows")
    designs = [design for design, fit in zip(designs, fits) if fit]
    workers = _design_workers(workers, len(designs))
    # every design's validation filter is built on the same number of (the last) fit rows: the designs compete on
    # equal terms, and their filters share one set of shapes (compiled once, not once per design's reach)
    window = min(max_fit, min(T - V - design.offset for design in designs))
    setting = (s, V, max(len(design.lags) for design in designs) * y.shape[1], burn_in, window, tuple(c_grid),
               tuple(lam_grid), tuple(eta_grid), rank)
    runs = [run for scored in _scored_designs(designs, setting, workers) for run in scored]
    per_design = {}
    for cand, _ in runs:
        if cand.design not in per_design or _better(cand, per_design[cand.design]):
            per_design[cand.design] = cand
    candidates = tuple(per_design.values())
    eligible = [(c, e) for c, e in runs if c.in_range and c.mse < min(persistence, prior_mean)]
    if eligible:
        chosen, err = _simplest_within_one_se(eligible)
        return ForecastTuning(chosen, None, candidates, persistence, prior_mean, err, V,
                              _members(chosen, err, eligible))
    fallback = "persistence" if persistence <= prior_mean else "prior mean"
    err = (s[T - V - 1: -1] - truth) if fallback == "persistence" else -truth
    return ForecastTuning(None, fallback, candidates, persistence, prior_mean, err, V)


_MIN_FIT_STEPS = 24
"""The fewest training steps before the validation block that :func:`tune_forecaster` fits its filters on."""


def _validation_size(T: int, n_val, name: str, *, reserve: int = 0) -> int:
    """V, the validation steps of a training series of T steps: ``n_val``, or by default
    min(200, max(20, T // 5)) (at most T // 2).

    Args:
        T: the series' length.
        n_val: None or a positive integer at most T // 2.
        name: the series' argument name, for errors.
        reserve: further steps the caller holds out before the validation block (calibration).

    Raises:
        ValueError: for n_val above T // 2, or a series with fewer than V + ``reserve`` + ``_MIN_FIT_STEPS`` steps.
    """
    if n_val is None:
        V = min(200, max(20, T // 5), max(1, T // 2))
    else:
        V = check_count(n_val, "n_val")
        if V > T // 2:
            raise ValueError(f"n_val must be at most half the series ({T // 2} of the {T} steps of {name}), got {V}")
    if T < V + reserve + _MIN_FIT_STEPS:
        raise ValueError(f"{name} of {T} steps is too short: at least {V + reserve + _MIN_FIT_STEPS} are needed ("
                         f"{V} validation steps{f', {reserve} calibration steps' if reserve else ''} and "
                         f"{_MIN_FIT_STEPS} to fit on)")
    return V


def _check_tuning_arguments(lags, workers) -> None:
    """A ValueError / TypeError naming ``lags`` (not "auto" nor increasing positive integers) or ``workers`` (not
    None nor a positive integer)."""
    if isinstance(lags, str):
        if lags != "auto":
            raise ValueError(f"lags must be 'auto' or a tuple of positive integers, got {lags!r}")
    else:
        _check_lags(lags)
    if workers is not None:
        check_count(workers, "workers")


def _design_workers(workers, num_designs: int) -> int:
    """The number of processes that score ``num_designs`` designs (``workers`` of :func:`tune_forecaster`, at most
    one per design)."""
    if workers is not None:
        return min(check_count(workers, "workers"), num_designs)
    if jax.default_backend() != "cpu":
        return 1
    return max(1, min(num_designs, len(usable_cores())))


def _scored_designs(designs, setting, workers: int) -> list:
    """Every design's validation runs [(Candidate, (V, d) errors), ...], in design order: scored here, or dealt out
    in turn to ``workers`` processes pinned to a usable core each (two on one core when there are fewer cores)."""
    if workers == 1:
        return _score_designs((designs, setting), None, threading.Event())
    cores = usable_cores()
    jobs = [(designs[w::workers], setting) for w in range(workers)]
    parts, interrupted = run_pinned(_score_designs, jobs, [cores[w % len(cores)] for w in range(workers)],
                                    lambda n: None)
    if interrupted:
        raise KeyboardInterrupt
    scored = [None] * len(designs)
    for w, part in enumerate(parts):
        scored[w::workers] = part
    return scored


def _score_designs(job, report, stop) -> list:
    """[runs of each design of ``job = (designs, setting)``]: every c and lam of its grid, (Candidate, errors)
    pairs. A worker's target (:func:`bayeskern._workers.run_pinned`); ``stop`` ends it between designs."""
    designs, (s, V, width, burn_in, window, c_grid, lam_grid, eta_grid, rank) = job
    T, scored = s.shape[0], []
    truth = s[T - V:]
    for design in designs:
        if stop.is_set():
            break
        X, Z, base, offset = _design_rows(s, design)
        # zero columns up to the widest design: distances, medians and the autoregression's fit are unchanged, and
        # every design's filters share one set of shapes (compiled once, not once per lag count)
        pad = ((0, 0), (0, width - X.shape[1]))
        X, Z = np.pad(X, pad), np.pad(Z, pad)
        n_fit = T - V - offset
        run, fit, runs = slice(n_fit - burn_in, T - offset), slice(n_fit - window, n_fit), []
        for c in c_grid:
            eta, trend, readouts, bounds = _filter_means(X[fit], Z[fit], X[run], c, lam_grid, eta_grid, rank, design,
                                                         fit.start, run.start)
            for lam, readout in zip(lam_grid, readouts):
                err = base[n_fit:] + trend[burn_in:] + readout[burn_in:] - truth
                mse = float(np.mean(err**2))
                if np.isfinite(mse):
                    in_range = bool(np.all(_in_range(readout, bounds)))
                    runs.append((Candidate(design, float(c), float(lam), float(eta), mse, in_range), err))
        scored.append(runs)
    return scored


def _simplest_within_one_se(runs):
    """The design with the smallest validation error, then the one-standard-error rule within its grid: among its
    hyperparameters whose validation error exceeds the smallest by less than one standard error of the paired
    difference, the most regularised (largest lam, then widest bandwidth). ``runs`` holds (Candidate, (V, d)
    errors) pairs."""
    best, best_err = min(runs, key=lambda r: r[0].mse)
    runs = [r for r in runs if r[0].design == best.design]
    best_sq = np.mean(best_err**2, axis=1)

    def close(err):
        diff = np.mean(err**2, axis=1) - best_sq
        return np.mean(diff) <= np.std(diff, ddof=1) / math.sqrt(diff.size)

    near = [r for r in runs if close(r[1])]
    return min(near, key=lambda r: (-r[0].lam, -r[0].c, r[0].mse))


def _members(chosen: Candidate, chosen_err, runs) -> tuple:
    """``chosen``, then each other design's pick of :func:`_simplest_within_one_se` among ``runs`` ((Candidate,
    (V, d) errors) pairs) whose squared errors exceed the chosen ones by less than two standard errors of the paired
    difference, by that excess, at most :data:`FORECAST_MAX_MEMBERS` in all."""
    chosen_sq = np.mean(chosen_err**2, axis=1)
    close = []
    for design in dict.fromkeys(c.design for c, _ in runs if c.design != chosen.design):
        cand, err = _simplest_within_one_se([r for r in runs if r[0].design == design])
        diff = np.mean(err**2, axis=1) - chosen_sq
        if np.mean(diff) < 2 * np.std(diff, ddof=1) / math.sqrt(diff.size):
            close.append((float(np.mean(diff)), cand))
    close.sort(key=lambda pair: pair[0])
    return (chosen,) + tuple(cand for _, cand in close[: FORECAST_MAX_MEMBERS - 1])


def _better(a: Candidate, b: Candidate) -> bool:
    """In-range candidates first, then the smaller validation error."""
    return (not a.in_range, a.mse) < (not b.in_range, b.mse)


def _check_lags(lags) -> tuple:
    """Lags as a tuple of increasing positive integers, or a ValueError naming ``lags``."""
    values = np.atleast_1d(np.asarray(lags))
    if values.ndim != 1 or values.size == 0 or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"lags must be 'auto' or increasing positive integers, got {lags!r}")
    lag_set = tuple(int(v) for v in values)
    if lag_set[0] < 1 or any(b <= a for a, b in zip(lag_set, lag_set[1:])):
        raise ValueError(f"lags must be 'auto' or increasing positive integers, got {lags!r}")
    return lag_set


def _designs(y_fit, lags, season, max_lag, whole=None):
    """The designs :func:`tune_forecaster` validates, read off the fit steps ``y_fit`` (T, d); the unit-root test
    reads ``whole`` (default ``y_fit``), the training series with its validation steps."""
    T, s_fit = y_fit.shape[0], _standardised(y_fit, y_fit)
    if isinstance(lags, str):
        if lags != "auto":
            raise ValueError(f"lags must be 'auto' or a tuple of positive integers, got {lags!r}")
        if season is None:
            season = seasonal_period(y_fit, max_period=min(T // 4, 60))
        if max_lag is None:   # runs of lags up to a tenth of the steps; the five seasonal ones up to a quarter
            max_order, max_lag = max(1, min(T // 10, 12 if season is None else season + 1)), T // 4
        else:
            max_order = max_lag = check_count(max_lag, "max_lag")
        lag_sets = _candidate_lags(season, max_order, max_lag, _aic_order(s_fit, max_order))
    else:
        lag_sets = [_check_lags(lags)]
    transforms = (False, True)
    if isinstance(lags, str):
        transforms = _unit_root_transforms(y_fit if whole is None else whole)
    designs = [ForecastDesign(lag_set, difference) for lag_set in lag_sets for difference in transforms]
    if season is None:
        return designs
    # with a season, levels and first differences carry one intercept per phase where the AIC of their
    # autoregression says so (deterministic seasonality: a stable profile averaged over every fit season);
    # seasonal differences remove such a profile themselves
    designs = [design._replace(intercepts=_seasonal_intercepts(s_fit, design.lags, design.difference, season))
               for design in designs]
    return designs + [ForecastDesign(lag_set, difference, season) for lag_set in lag_sets
                      for difference in transforms]


def _unit_root_transforms(y) -> tuple:
    """Whether the automatic designs take first differences (on their own or after seasonal ones): not, (False,),
    where an augmented Dickey-Fuller test (lagged differences by AIC) on the series y (T, d) rejects a unit root at
    5 % in every coordinate; else with and without, (False, True). Not rejecting is no evidence of a unit root
    (the test has little power near one on a short series), so both stay; validation one step ahead cannot tell
    them apart there. Seasonal differences answer another question (unit roots at the seasonal frequencies, which
    this test does not look at): they stay either way. The test is not fitted to any validation error, so it reads
    every training step: the more steps, the more power."""
    return (False,) if np.all(dickey_fuller_t(y) < _ADF_CRITICAL) else (False, True)


class ConformalBand(NamedTuple):
    """A sequential conformal band.

    Attributes:
        band: (2, T~, d) lower and upper limits.
        widened: (T~, d) whether the step's half-width came from the tail rule of :func:`conformal_band` (the
            known scores were too few for its level).
    """

    band: np.ndarray
    widened: np.ndarray


def conformal_band(mean, scale, calibration, errors, level: float, *, gamma: float = 0.02,
                   delay: int = 1) -> ConformalBand:
    """Adaptive sequential conformal band: step t uses the calibration scores and the scores revealed before t.

    The score of a step is |error| / scale per coordinate. Step t's band is mean_t +- q_t scale_t, with q_t the
    ceil((n_t + 1)(1 - alpha_t))-th smallest of the n_t scores known before t. With exchangeable scores and
    ``gamma = 0`` each step is covered with probability >= level (split conformal prediction, Vovk et al. 2005).
    ``gamma`` > 0 adapts the miscoverage target after every step, alpha_{t+1} = alpha_t + gamma (1 - level - miss_t)
    (adaptive conformal inference, Gibbs & Candes 2021): the share of misses then tends to 1 - level, however the
    errors drift.

    A step's error is revealed ``delay`` steps after its own: with one-step forecasts (``delay = 1``) the scores of
    all earlier steps are known at t; with h-step forecasts from consecutive origins (``delay = h``) those of the
    steps up to t - h, and each adaptation uses the latest revealed miss.

    When that rank exceeds n_t (too few scores for the level 1 - alpha_t: fewer than 1 / alpha_t - 1 of them, or
    alpha_t driven to 0 or below by a run of misses) the exact rule's band is the whole line. The band is kept
    finite instead, by a stated tail rule: q_t is the larger of the largest known score and z s, with s the root mean
    square of the known scores and z the two-sided standard normal quantile of max(alpha_t, (1 - level) / 10)
    (the quantile the scores would have if the errors were Gaussian with the scale s); ``widened`` flags those
    steps.

    Args:
        mean: (T~, d) point forecasts.
        scale: (T~, d) positive scales of the steps (ones for plain residuals).
        calibration: (n, d) calibration scores, n >= 1.
        errors: (T~, d) the errors truth - mean of the steps, each revealed after its forecast.
        level: coverage in (0, 1).
        gamma: step size of the adaptation, >= 0.
        delay: steps until a step's error is revealed, >= 1.

    Returns:
        ConformalBand: ``band`` (2, T~, d) and ``widened`` (T~, d).

    Raises:
        TypeError: for values that are not real numbers.
        ValueError: for non-finite values, shapes that do not match, no calibration score, scales that are not
            positive, a level outside (0, 1) or gamma < 0.
    """
    mean, scale, errors = (_as_series(a, name) for a, name in ((mean, "mean"), (scale, "scale"), (errors, "errors")))
    scores = _as_series(calibration, "calibration")
    if scale.shape != mean.shape or errors.shape != mean.shape or scores.shape[1] != mean.shape[1]:
        raise ValueError(f"scale and errors must have the shape of mean {mean.shape} and calibration its "
                         f"columns, got {scale.shape}, {errors.shape} and {scores.shape}")
    if scores.shape[0] == 0:
        raise ValueError("calibration must hold at least one score")
    if np.any(scale <= 0):
        raise ValueError("scale must be positive")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if not gamma >= 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    delay = check_count(delay, "delay")
    test_scores = np.abs(errors) / scale
    T, d = mean.shape
    alpha = np.full(d, 1.0 - level)
    q, widened = np.empty((T, d)), np.zeros((T, d), bool)
    for t in range(T):
        known = np.sort(np.concatenate([scores, test_scores[:max(0, t - delay + 1)]], axis=0), axis=0)
        for j in range(d):
            q[t, j], widened[t, j] = _conformal_quantile(known[:, j], alpha[j], level)
        revealed = t - delay + 1
        if revealed >= 0:
            alpha += gamma * ((1.0 - level) - (test_scores[revealed] > q[revealed]))
    half = q * scale
    return ConformalBand(np.stack([mean - half, mean + half]), widened)


def _conformal_quantile(sorted_scores, alpha: float, level: float):
    """(q, widened): the ceil((n + 1)(1 - alpha))-th smallest of n sorted scores, or where that rank exceeds n the
    tail rule of :func:`conformal_band` (``widened`` True).

    Args:
        sorted_scores: (n,) scores in increasing order, n >= 1.
        alpha: the miscoverage target (any real: the adaptation may drive it below 0).
        level: the band's nominal level (sets the tail rule's floor (1 - level) / 10 on alpha).

    Returns:
        (float, bool).
    """
    n = sorted_scores.shape[0]
    rank = math.ceil((n + 1) * (1.0 - alpha))
    if rank > n:
        z = _NORMAL.inv_cdf(1.0 - 0.5 * max(alpha, (1.0 - level) / 10))
        return max(float(sorted_scores[-1]), z * math.sqrt(float(np.mean(sorted_scores**2)))), True
    return (0.0 if rank < 1 else float(sorted_scores[rank - 1])), False


_NORMAL = statistics.NormalDist()


def _calibration(T: int, tuning: ForecastTuning, *, min_fit: int, wanted: int | None = None,
                 needed: int = 1) -> tuple:
    """(tuning, C): the tuning without the members (other than the chosen one) whose reach would leave fewer than
    ``needed`` calibration steps before the validation block with ``min_fit`` fit rows before them (on a short
    series one long-reaching member would otherwise leave every member too few), and C, the calibration steps:
    ``wanted`` (default as many as the validation steps), fewer when a remaining member keeps fewer than ``min_fit``
    fit rows before them (0 when the series has no room)."""
    wanted = tuning.num_validation if wanted is None else wanted

    def room(offset: int) -> int:
        return T - tuning.num_validation - offset - min_fit

    if tuning.best is None:
        return tuning, max(0, min(wanted, room(1)))
    members = tuple(m for m in tuning.members if m == tuning.best or room(m.design.offset) >= needed)
    return tuning._replace(members=members), max(0, min(wanted, *(room(m.design.offset) for m in members)))
