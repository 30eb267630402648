"""One-step-ahead forecasting of real series: the kernel Bayes forecaster against statsmodels' AR and SARIMAX.

Panel: series shipped inside statsmodels (nothing is downloaded), the last 20 % of each held out. For every series:

- ``forecast_series`` (bayeskern.inference): lags, differencing and filter hyperparameters validated on the last
  training steps, an adaptive conformal 90 % band; with ``--bayesian`` also the NUTS-averaged filter;
- AR(p), p by AIC (statsmodels ``ar_select_order``, up to 13 lags), least squares, its 90 % interval;
- SARIMAX(2, d, 1), d = 1 when the augmented Dickey-Fuller test keeps a unit root (p > 0.05), with a seasonal
  (1, 0, 1, s) part when the series has a season s (monthly series: 12), its 90 % interval;
- persistence (y_t forecast by y_{t-1}).

Printed per series: RMSE relative to AR, coverage of the 90 % bands on the test steps, seconds; then the summary
the acceptance reads (mean coverage, share of series with RMSE <= 1.05 x AR). Needs the ``examples`` extra.

Run: python benchmarks/bench_forecast.py [--bayesian] [--series sunspots nile ...] [--out benchmarks-out]
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

SEASONS = {"elnino": 12, "co2": 12, "elec_equip": 12}


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
    fitted = SARIMAX(y_train, order=(2, d, 1), seasonal_order=seasonal, trend="c" if d == 0 else "n").fit(disp=False)
    pred = fitted.apply(y).get_prediction(start=len(y) - n_test, end=len(y) - 1)
    return pred.predicted_mean, pred.conf_int(alpha=0.1).T, f"(2,{d},1){seasonal if season else ''}"


def coverage(band, truth) -> float:
    return float(np.mean((truth >= band[0]) & (truth <= band[1])))


def rmse(forecast, truth) -> float:
    return float(np.sqrt(np.mean((forecast - truth) ** 2)))


def main(out, *, names=None, bayesian=False, seed=0):
    """Runs the panel, prints the table and writes bench_forecast.png; returns {series: {method: (ratio, cov, s)}}."""
    bk.enable_x64()
    warnings.filterwarnings("ignore", module="statsmodels")
    series = panel()
    names = names or list(series)
    methods = ["KBF (tuned)"] + (["KBF (Bayesian)"] if bayesian else []) + ["AR", "SARIMAX", "persistence"]
    print(f"{'series':<13}{'T':>5}{'test':>6}  " + "  ".join(f"{m:>24}" for m in methods))
    print(f"{'':<26}" + "  ".join(f"{'RMSE/AR  cover   sec':>24}" for _ in methods))
    results = {}
    for name in names:
        y = series[name]
        n_test = len(y) // 5
        y_train, truth = y[:-n_test], y[-n_test:]
        rows = {}
        for label, bayes in (("KBF (tuned)", False), ("KBF (Bayesian)", True))[: 1 + bayesian]:
            fc = forecast_series(y_train, truth, key=jax.random.key(seed), bayesian=bayes)
            rows[label] = (fc.mean[:, 0], fc.band[:, :, 0], fc.seconds)
        t0 = time.perf_counter()
        ar, ar_band, p = ar_baseline(y_train, y, n_test)
        rows["AR"] = (ar, ar_band, time.perf_counter() - t0)
        t0 = time.perf_counter()
        sar, sar_band, order = sarimax_baseline(y_train, y, n_test, SEASONS.get(name))
        rows["SARIMAX"] = (sar, sar_band, time.perf_counter() - t0)
        rows["persistence"] = (y[-n_test - 1:-1], None, 0.0)
        ar_rmse = rmse(ar, truth)
        results[name] = {m: (rmse(f, truth) / ar_rmse, None if b is None else coverage(b, truth), s)
                         for m, (f, b, s) in rows.items()}
        cells = []
        for m in methods:
            ratio, cov, sec = results[name][m]
            cells.append(f"{ratio:>8.3f}  {'  -  ' if cov is None else f'{cov:5.2f}'}  {sec:6.1f}")
        print(f"{name:<13}{len(y):>5}{n_test:>6}  " + "  ".join(f"{c:>24}" for c in cells) + f"   AR({p}) SARIMAX{order}",
              flush=True)
    for m in methods[:-1]:
        ratios = np.array([results[n][m][0] for n in names])
        covs = np.array([results[n][m][1] for n in names])
        print(f"{m}: mean coverage {covs.mean():.3f} (min {covs.min():.2f}); RMSE <= 1.05 x AR on "
              f"{np.mean(ratios <= 1.05):.0%} of series, max ratio {ratios.max():.3f}; "
              f"max seconds {max(results[n][m][2] for n in names):.0f}")
    _plot(results, names, methods, Path(out))
    return results


def _plot(results, names, methods, out):
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    x = np.arange(len(names))
    width = 0.8 / len(methods)
    for i, m in enumerate(methods):
        axes[0].bar(x + i * width, [results[n][m][0] for n in names], width, label=m, color=f"C{i}")
        if m != "persistence":
            axes[1].bar(x + i * width, [results[n][m][1] for n in names], width, label=m, color=f"C{i}")
    axes[0].axhline(1.05, color="k", lw=0.8, ls="--")
    axes[0].set(ylabel="one-step RMSE / AR's", ylim=(0, 2))
    axes[1].axhspan(0.85, 0.95, color="0.9")
    axes[1].axhline(0.9, color="k", lw=0.8, ls="--")
    axes[1].set(ylabel="coverage of the 90% band", ylim=(0.5, 1.0))
    for ax in axes:
        ax.set_xticks(x + 0.4 - width / 2, names, rotation=30, ha="right", fontsize=8)
    axes[0].legend(fontsize=7)
    save_figure(fig, out / "bench_forecast.png")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bayesian", action="store_true")
    parser.add_argument("--series", nargs="*")
    parser.add_argument("--out", default="benchmarks-out")
    args = parser.parse_args()
    main(args.out, names=args.series, bayesian=args.bayesian)
