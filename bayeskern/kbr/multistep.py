"""Forecasts several steps ahead with the validated forecaster: the autoregression iterated on its own predictions
(the recursive strategy) and the filter's embedding carried forward by its transition, from any origin, in one
compiled program for many origins."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .filter import _observations, _step, _uniform_weights
from .forecast import (ForecastTuning, _as_series, _build_filter, _design_rows, _differenced, _differencing,
                       _location_scale, _standardised)

__all__ = ["iterated_forecasts"]


def iterated_forecasts(y, tuning: ForecastTuning, fit_end: int, origins, horizon: int, *, rank="auto",
                       burn_in: int = 20, hyper=None, max_fit: int | None = None):
    """Forecasts of y at steps o, o + 1, ..., o + horizon - 1 from each origin o, using y before o only.

    The forecaster chosen by ``tuning`` is fitted on y[:fit_end] (standardised on it, as
    :func:`~bayeskern.inference.forecast_series` fits it on its training series). From each origin the filter,
    having consumed the observations up to o - 1, forecasts step o as in one-step forecasting. Beyond it, the
    forecasts take the place of the unknown values in the autoregression's lags (the recursive strategy), while the
    filter's embedding is carried forward by its transition alone: the lags of later steps hold the forecaster's
    own predictions, not observations, so Bayes' rule is not applied to them, and the residual's read-out relaxes
    towards its long-run mean as the horizon grows. A read-out outside the training residuals' widened range is
    clipped, as in one-step forecasting. A baseline forecaster (``tuning.fallback``) repeats y[o - 1]
    (persistence) or the mean of y[:fit_end].

    Args:
        y: (T, d) series; T >= every origin.
        tuning: the :func:`~bayeskern.kbr.tune_forecaster` choice.
        fit_end: the forecaster is fitted on the first ``fit_end`` steps.
        origins: increasing origins o with fit_end - burn_in <= o <= T (T: forecasts beyond the data).
        horizon: steps forecast from each origin, >= 1.
        rank: the filter's rank.
        burn_in: fit steps the filter runs over before the first origin.
        hyper: (c_x, c_z, lam, eta), e.g. a posterior draw of :func:`bayeskern.models.kbf_hyper_model`: the filter
            is built with bandwidths c_x and c_z times the medians of its fit observations and residual latents
            and these ridges, instead of the tuning's c and lam with eta by leave-one-out.
        max_fit: with ``hyper``, the filter is built on at most this many (the last) fit rows, as the model's
            filters are (the autoregression still on all of them).

    Returns:
        (paths (O, horizon, d) in the units of y, clipped (O, horizon) bool).
    """
    y = _as_series(y, "y")
    origins = np.asarray(origins, int)
    centre, scale = _location_scale(y[:fit_end])
    if tuning.best is None:
        start = y[origins - 1] if tuning.fallback == "persistence" else np.broadcast_to(centre, (origins.size,
                                                                                                 y.shape[1]))
        return np.repeat(start[:, None, :], horizon, axis=1), np.zeros((origins.size, horizon), bool)
    b = tuning.best
    s = _standardised(y[:fit_end], y)
    X, Z, _, offset = _design_rows(s, b.design)
    n_fit = fit_end - offset
    if hyper is None:
        kbf, ar, (low, high), _ = _build_filter(X[:n_fit], Z[:n_fit], b.c, b.lam, rank)
    else:
        c_x, c_z, lam, eta = hyper
        kbf, ar, (low, high), _ = _build_filter(X[:n_fit], Z[:n_fit], c_x, lam, rank, c_z=c_z, eta=eta,
                                                window=max_fit)
    run_start = max(0, n_fit - burn_in)
    if origins.min() - offset < run_start or origins.max() > y.shape[0]:
        raise ValueError(f"origins must lie in [{run_start + offset}, {y.shape[0]}], got {origins.min()} to "
                         f"{origins.max()}")
    weights = _predictive_weights(kbf, jnp.asarray(X[run_start: origins.max() - offset]))
    u, _ = _differenced(s, b.design)
    p, m = max(b.design.lags), max(1, b.design.order)
    history = np.stack([u[o - p: o][::-1] for o in origins])          # (O, p, d): u_{o-1}, ..., u_{o-p}
    past = np.stack([s[o - m: o][::-1] for o in origins])             # (O, m, d): s_{o-1}, ..., s_{o-m}
    paths, clipped = _iterate(kbf, jnp.asarray(ar.coef), jnp.asarray(low), jnp.asarray(high),
                              weights[origins - offset - run_start], jnp.asarray(history), jnp.asarray(past),
                              tuple(lag - 1 for lag in b.design.lags), _differencing(b.design), horizon)
    return np.asarray(paths) * scale + centre, np.asarray(clipped)


@jax.jit
def _predictive_weights(kbf, X_run):
    """(T~ + 1, T) the filter's predictive weights before each observation of X_run (T~, d_x) and after the last."""
    def step(w_pred, g):
        return _step(kbf, w_pred, g)[0], w_pred

    last, before = jax.lax.scan(step, _uniform_weights(kbf), _observations(kbf, X_run))
    return jnp.concatenate([before, last[None]])


@partial(jax.jit, static_argnames=("lag_index", "differencing", "horizon"))
def _iterate(kbf, coef, low, high, w_pred, history, past, lag_index, differencing, horizon):
    """The multi-step forecasts of the standardised series from O origins at once: (O, horizon, d) and clipped
    flags (O, horizon). history (O, p, d) holds u_{o-1}, ..., u_{o-p} (the differenced series); past (O, m, d)
    holds s_{o-1}, ..., s_{o-m}, from which ``differencing`` ((k, c_k), ...) rebuilds s_t = u_t + sum_k c_k s_{t-k};
    w_pred (O, T) the predictive weights before step o. Step o's lags are observed: Bayes' rule updates the
    embedding. Later lags hold forecasts, not observations, so the embedding is only carried forward by the
    transition (no update on values the filter made up itself); the autoregression runs on the forecast lags."""
    d = past.shape[-1]
    index = jnp.asarray(lag_index)

    def advance(w_next, w, history, past):
        x = history[index].reshape(-1)                       # (u_{t-l})_{l in lags}, as lag_design orders them
        raw = (w @ kbf.Z)[:d]
        residual = jnp.clip(raw, low, high)
        u = coef[0] + x @ coef[1:] + residual
        s = u + sum(c * past[k - 1] for k, c in differencing)
        carry = (w_next, jnp.concatenate([u[None], history[:-1]]), jnp.concatenate([s[None], past[:-1]]))
        return carry, (s, jnp.any(raw != residual))

    def one_origin(w_pred, history, past):
        x = history[index].reshape(-1)
        w_next, w = _step(kbf, w_pred, _observations(kbf, x[None, :])[0])
        carry, first = advance(w_next, w, history, past)

        def step(carry, _):
            w_pred, history, past = carry
            return advance(kbf.transition @ w_pred, w_pred, history, past)

        _, rest = jax.lax.scan(step, carry, None, length=horizon - 1)
        return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first, rest)

    return jax.vmap(one_origin)(w_pred, history, past)
