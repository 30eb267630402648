"""The forecaster's forecasts, one step or several ahead: each member design's autoregression iterated on its own
predictions (the recursive strategy) and its filter's embedding carried forward by the transition, from any origin,
the members averaged; every member runs the same compiled programs."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .filter import KernelBayesFilter, _observations, _step, _uniform_weights
from .forecast import (ForecastTuning, _as_series, _design_rows, _differenced, _differencing, _filter_setting,
                       _location_scale, _standardised)
from .lowrank import EXACT_MAX_T

__all__ = ["iterated_forecasts"]


def iterated_forecasts(y, tuning: ForecastTuning, fit_end: int, origins, horizon: int, *, rank="auto",
                       burn_in: int = 20, hyper=None, max_fit: int | None = None):
    """Forecasts of y at steps o, o + 1, ..., o + horizon - 1 from each origin o, using y before o only.

    Each member of ``tuning.members`` is fitted on y[:fit_end] (standardised on it, as
    :func:`~bayeskern.inference.forecast_series` fits it on its training series) and the members' forecasts are
    averaged with equal weights. From each origin a member's filter, having consumed the observations up to o - 1,
    forecasts step o as in one-step forecasting. Beyond it, the forecasts take the place of the unknown values in
    the autoregression's lags (the recursive strategy), while the filter's embedding is carried forward by its
    transition alone: the lags of later steps hold the forecaster's own predictions, not observations, so Bayes'
    rule is not applied to them, and the residual's read-out relaxes towards its long-run mean as the horizon
    grows. A read-out outside the training residuals' widened range is clipped, as in one-step forecasting. A
    baseline forecaster (``tuning.fallback``) repeats y[o - 1] (persistence) or the mean of y[:fit_end].

    Several members' filters are built on the same number of (the last) fit rows, as many as the member of longest
    reach has and at most :data:`~bayeskern.kbr.EXACT_MAX_T` (exact filters, whose shapes do not depend on the
    data as a low-rank filter's landmarks do), with their lag vectors padded by zero columns to the widest
    member's (distances and the autoregression are unchanged): their programs share one set of shapes and compile
    once. One filter runs over the burn-in and the origins' observations; each origin starts from its weights.

    Args:
        y: (T, d) series; T >= every origin.
        tuning: the :func:`~bayeskern.kbr.tune_forecaster` choice.
        fit_end: the forecaster is fitted on the first ``fit_end`` steps.
        origins: increasing origins o with fit_end - burn_in <= o <= T (T: forecasts beyond the data).
        horizon: steps forecast from each origin, >= 1.
        rank: the filters' rank.
        burn_in: fit steps the filters run over before the first origin (fewer when a member has fewer fit rows).
        hyper: (c_x, c_z, lam, eta), e.g. a posterior draw of :func:`bayeskern.models.kbf_hyper_model`: the best
            design alone forecasts, its filter built with bandwidths c_x and c_z times the medians of its fit
            observations and residual latents and these ridges, instead of the tuning's c and lam with eta by
            leave-one-out.
        max_fit: the filters are built on at most this many (the last) fit rows (the autoregressions still on all
            of them), e.g. as the Bayesian model's filters are.

    Returns:
        (paths (O, horizon, d) in the units of y, clipped (O, horizon) bool: some member's read-out was clipped).
    """
    y = _as_series(y, "y")
    origins = np.asarray(origins, int)
    centre, scale = _location_scale(y[:fit_end])
    if tuning.best is None:
        start = y[origins - 1] if tuning.fallback == "persistence" else np.broadcast_to(centre, (origins.size,
                                                                                                 y.shape[1]))
        return np.repeat(start[:, None, :], horizon, axis=1), np.zeros((origins.size, horizon), bool)
    members = (tuning.best,) if hyper is not None else tuning.members
    if not members:
        raise ValueError("tuning.members must hold the forecaster's candidates (tuning.best first)")
    s = _standardised(y[:fit_end], y)
    rows = [_design_rows(s, member.design) for member in members]
    n_fit = min(fit_end - offset for *_, offset in rows)
    window = n_fit if max_fit is None else min(n_fit, max_fit)
    if len(members) > 1:     # exact filters share their shapes; a low-rank one's landmark count depends on its data
        window = min(window, EXACT_MAX_T)
    burn_in = min(burn_in, n_fit)
    if origins.min() < fit_end - burn_in or origins.max() > y.shape[0]:
        raise ValueError(f"origins must lie in [{fit_end - burn_in}, {y.shape[0]}], got {origins.min()} to "
                         f"{origins.max()}")
    d = y.shape[1]
    width = max(len(member.design.lags) for member in members) * d
    reach = max(max(member.design.lags) for member in members)
    order = max(max(1, member.design.order) for member in members)
    period = int(np.lcm.reduce([max(1, member.design.intercepts) for member in members]))
    paths, clipped = 0.0, np.zeros((origins.size, horizon), bool)
    for member, (X, Z, _, offset) in zip(members, rows):
        pad = ((0, 0), (0, width - X.shape[1]))
        X, Z = np.pad(X, pad), np.pad(Z, pad)
        fit = slice(0, fit_end - offset)
        if hyper is None:
            lam, setting = member.lam, _filter_setting(X[fit], Z[fit], member.c, member.design, window=window)
        else:
            c_x, c_z, lam, eta = hyper
            setting = _filter_setting(X[fit], Z[fit], c_x, member.design, c_z=c_z, eta=eta, window=window)
        X_fit, R, sigma_x, sigma_z, eta, ar, (low, high) = setting
        kbf = KernelBayesFilter.build(X_fit, R, sigma_x, sigma_z, lam, eta, rank=rank)
        lags = member.design.lags
        u, _ = _differenced(s, member.design)
        history = _recent(u, origins, max(lags), reach)                          # u_{o-1}, u_{o-2}, ...
        past = _recent(s, origins, max(1, member.design.order), order)           # s_{o-1}, s_{o-2}, ...
        # the observations from the burn-in to the last origin's (its lags: row o - offset, built from u as the
        # last origin may be the step after the data)
        last = np.pad(np.concatenate([u[origins.max() - lag] for lag in lags]), (0, width - len(lags) * d))
        run = np.vstack([X[fit_end - burn_in - offset: origins.max() - offset], last])
        posterior, following = _run_weights(kbf, jnp.asarray(run))
        at = origins - fit_end + burn_in
        coefficients = np.zeros(order)
        for k, c in _differencing(member.design):
            coefficients[k - 1] = c
        intercepts = np.tile(ar.intercepts, (period // ar.intercepts.shape[0], 1))   # (period, d): one program
        path, flags = _iterate(kbf, jnp.asarray(intercepts), jnp.asarray(ar.slopes), jnp.asarray(low),
                               jnp.asarray(high), posterior[at], following[at], jnp.asarray(history),
                               jnp.asarray(past), jnp.asarray(coefficients), jnp.asarray(origins % period),
                               horizon, index=_lag_index(lags, width // d))
        paths = paths + np.asarray(path) / len(members)
        clipped |= np.asarray(flags)
    return paths * scale + centre, clipped


def _forecast_path(y_train, y_test, tuning: ForecastTuning, *, burn_in: int = 20, rank="auto"):
    """One-step-ahead forecasts of y_test by the forecaster refitted on all of y_train: :func:`iterated_forecasts`
    one step ahead from every test step.

    A read-out (a filter's estimate of its autoregression's residual) outside the range of the training residuals
    widened by ``RANGE_MARGIN`` is clipped to it and the step flagged: weights that exploded on an observation
    unlike the training ones say nothing beyond that range.

    Args:
        y_train: (T, d) training series.
        y_test: (T~, d) test series (row t forecast from y_train and y_test[:t]).
        tuning: the :func:`tune_forecaster` result on y_train.
        burn_in: training steps the filters run over before the first test step.
        rank: the filters' rank.

    Returns:
        (forecasts (T~, d) in the units of y, clipped (T~,) bool).
    """
    T = y_train.shape[0]
    paths, clipped = iterated_forecasts(np.concatenate([y_train, y_test]), tuning, T,
                                        np.arange(T, T + y_test.shape[0]), 1, rank=rank, burn_in=burn_in)
    return paths[:, 0], clipped[:, 0]


def _calibration_errors(y_train, tuning: ForecastTuning, size: int, *, rank="auto"):
    """(C, d) one-step errors, in the units of y, of the forecaster on the C steps before the validation block,
    refitted on the steps before them: neither its fit nor its choice saw these steps, so their errors are
    exchangeable with those of new steps (the validation errors of the winner are not: it won on them).

    Args:
        y_train: (T, d) training series.
        tuning: the :func:`tune_forecaster` result on y_train.
        size: C (:func:`~bayeskern.kbr.forecast._calibration`), >= 1.
        rank: the filters' rank.

    Returns:
        (C, d) errors truth - forecast.
    """
    end = y_train.shape[0] - tuning.num_validation
    block = y_train[end - size: end]
    forecast, _ = _forecast_path(y_train[: end - size], block, tuning, rank=rank)
    return block - forecast


@jax.jit
def _run_weights(kbf, X_run):
    """((T~, T), (T~, T)): the filter's weights after each observation of X_run (T~, d_x), started uniform, and the
    predictive weights that follow each."""
    def step(w_pred, g):
        w_next, w = _step(kbf, w_pred, g)
        return w_next, (w, w_next)

    return jax.lax.scan(step, _uniform_weights(kbf), _observations(kbf, X_run))[1]


def _recent(a, origins, count: int, total: int):
    """(O, total, d): a_{o-1}, ..., a_{o-count} for each origin o of ``origins``, then zeros up to ``total`` rows."""
    recent = a[origins[:, None] - 1 - np.arange(count)[None, :]]
    return np.pad(recent, ((0, 0), (0, total - count), (0, 0)))


def _lag_index(lags, width: int):
    """(indices (L,), mask (L,)): the rows of history (u_{t-1}, u_{t-2}, ...) that form the lag vector, padded to
    ``width`` lags, and where they hold a lag (not padding)."""
    index = np.zeros(width, int)
    index[: len(lags)] = np.asarray(lags) - 1
    return jnp.asarray(index), jnp.arange(width) < len(lags)


@partial(jax.jit, static_argnames=("horizon",))
def _iterate(kbf, intercepts, slopes, low, high, w_post, w_next, history, past, differencing, phase, horizon, index):
    """The multi-step forecasts of the standardised series from O origins at once: (O, horizon, d) and clipped flags
    (O, horizon). The autoregression's intercept of a step of phase p is intercepts[p] (S, d), S the period of its
    seasonal intercepts (1 for one intercept), and its slopes are (k, d); phase (O,) holds the origins' phases.
    w_post (O, T) are the filter's weights after step o's observed lags (Bayes' rule applied), w_next (O, T) the
    predictive weights that follow; history (O, P, d) holds u_{o-1}, ..., u_{o-P} (the differenced series; zeros
    beyond the design's largest lag); past (O, M, d) holds s_{o-1}, ..., s_{o-M}, from which ``differencing`` (M,)
    rebuilds s_t = u_t + sum_k differencing[k - 1] s_{t-k}; ``index`` = (rows, mask) of :func:`_lag_index`. Later
    lags hold forecasts, not observations, so the embedding is only carried forward by the transition (no update on
    values the filter made up itself); the autoregression runs on the forecast lags."""
    d = past.shape[-1]
    rows, mask = index

    def advance(carry, w):
        w_next, history, past, phase = carry
        x = jnp.where(mask[:, None], history[rows], 0.0).reshape(-1)       # as lag_design orders them
        raw = (w @ kbf.Z)[:d]
        residual = jnp.clip(raw, low, high)
        u = intercepts[phase] + x @ slopes + residual
        s = u + differencing @ past
        carry = (kbf.transition @ w_next, jnp.concatenate([u[None], history[:-1]]),
                 jnp.concatenate([s[None], past[:-1]]), (phase + 1) % intercepts.shape[0])
        return carry, w_next, (s, jnp.any(raw != residual))

    def one_origin(w_post, w_next, history, past, phase):
        def step(state, _):
            carry, w = state
            carry, w, out = advance(carry, w)
            return (carry, w), out

        _, out = jax.lax.scan(step, ((w_next, history, past, phase), w_post), None, length=horizon)
        return out

    return jax.vmap(one_origin)(w_post, w_next, history, past, phase)
