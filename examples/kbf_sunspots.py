"""Forecasting a real series: yearly sunspot numbers 1700-2008 (the data set shipped inside statsmodels).

``bayeskern.inference.forecast_series`` turns the series into a filtering problem: the observation at year t is
the vector of lagged values, the latent state the current value with those lags, and the kernel Bayes filter
models what a least-squares autoregression on the lags leaves over. The lags (here the 11-year cycle is found
in the autocorrelation and offered as seasonal lags), levels or first differences and the filter's
hyperparameters are chosen on the last training years; the 90 % band is conformal (calibrated on the years before
those, forecast by the chosen filter refitted without them, and on the test years as they arrive). The series is variance-stabilised (y = sqrt(count)).

Compared on the last 60 years (one-step-ahead RMSE in sunspot numbers and coverage of the 90 % bands):

- the kernel Bayes forecaster, and with ``--bayesian`` the NUTS-averaged one;
- an autoregression AR(p) with p chosen by AIC (statsmodels), with its own 90 % interval;
- persistence (next year = this year).

Needs the ``examples`` extra (statsmodels); nothing is downloaded.

Run: python examples/kbf_sunspots.py [--test-years 60] [--bayesian] [--out examples-out]
"""

import argparse
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


def load_sunspots():
    """(years, counts): the yearly mean sunspot numbers 1700-2008 as shipped with statsmodels."""
    from statsmodels.datasets import sunspots

    data = sunspots.load_pandas().data
    return data["YEAR"].to_numpy(int), data["SUNACTIVITY"].to_numpy(float)


def ar_forecasts(y_train, y_all, n_test):
    """One-step-ahead AR(p) forecasts of the last n_test values with their 90 % interval (p by AIC)."""
    from statsmodels.tsa.ar_model import AutoReg, ar_select_order

    lags = ar_select_order(y_train, maxlag=12, ic="aic").ar_lags or [1]
    frame = AutoReg(y_train, lags=lags).fit().apply(y_all).get_prediction(
        start=len(y_all) - n_test, end=len(y_all) - 1).summary_frame(alpha=0.1)
    return frame["mean"].to_numpy(), frame[["mean_ci_lower", "mean_ci_upper"]].to_numpy().T, max(lags)


def main(out, *, test_years=60, bayesian=False, seed=0):
    """Forecasts the test years, prints errors and coverages, writes kbf_sunspots.png; returns {method: RMSE}."""
    bk.enable_x64()
    years, counts = load_sunspots()
    y = np.sqrt(counts)
    y_train, y_test = y[:-test_years], y[-test_years:]
    to_counts = lambda v: np.maximum(np.asarray(v), 0.0) ** 2
    truth = counts[-test_years:]

    fits = {"kernel Bayes": forecast_series(y_train, y_test, bayesian=False)}
    if bayesian:
        fits["kernel Bayes (NUTS)"] = forecast_series(y_train, y_test, key=jax.random.key(seed))
    forecasts, bands, coverages = {}, {}, {}
    for name, fc in fits.items():
        forecasts[name], bands[name] = to_counts(fc.mean[:, 0]), to_counts(fc.band[:, :, 0])
        coverages[name] = float(np.mean((y_test >= fc.band[0, :, 0]) & (y_test <= fc.band[1, :, 0])))
        t = fc.tuning
        chosen = (f"{fc.design.label}, c = {t.best.c}, lam = {t.best.lam}" if fc.design else f"baseline: {t.fallback}")
        print(f"{name}: {chosen}; {fc.seconds:.1f} s"
              + (f"; NUTS max R-hat {fc.mcmc.max_rhat:.3f}" if fc.mcmc is not None else ""), flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ar, ar_band, p = ar_forecasts(y_train, y, test_years)
    forecasts[f"AR({p})"], bands[f"AR({p})"] = to_counts(ar), to_counts(ar_band)
    coverages[f"AR({p})"] = float(np.mean((y_test >= ar_band[0]) & (y_test <= ar_band[1])))
    forecasts["persistence"] = counts[-test_years - 1:-1]
    rmse = {name: float(np.sqrt(np.mean((f - truth) ** 2))) for name, f in forecasts.items()}
    print("one-step-ahead RMSE over the test years (sunspot number): "
          + ", ".join(f"{name} {value:.1f}" for name, value in rmse.items()), flush=True)
    print("coverage of the 90% bands: " + ", ".join(f"{name} {100 * c:.0f}%" for name, c in coverages.items()),
          flush=True)

    fig, axes = plt.subplots(1, 2, figsize=(13, 4), gridspec_kw={"width_ratios": [3, 1]})
    t = years[-test_years:]
    for i, name in enumerate(forecasts):
        if name in bands:
            axes[0].fill_between(t, bands[name][0], bands[name][1], color=f"C{i}", alpha=0.15,
                                 label=f"{name}: 90% band")
    axes[0].plot(t, truth, "k.-", lw=1.2, label="observed")
    for i, (name, f) in enumerate(forecasts.items()):
        axes[0].plot(t, f, lw=1.1, color=f"C{i}", label=name)
    axes[0].set(xlabel="year", ylabel="sunspot number", title="one-step-ahead forecasts, test years")
    axes[0].legend(fontsize=7, ncol=2)
    axes[1].bar(range(len(rmse)), list(rmse.values()), color=[f"C{i}" for i in range(len(rmse))])
    axes[1].set_xticks(range(len(rmse)), list(rmse), rotation=30, ha="right", fontsize=8)
    axes[1].set(ylabel="RMSE (sunspot number)")
    save_figure(fig, Path(out) / "kbf_sunspots.png")
    return rmse


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--test-years", type=int, default=60)
    parser.add_argument("--bayesian", action="store_true")
    parser.add_argument("--out", default="examples-out")
    args = parser.parse_args()
    main(args.out, test_years=args.test_years, bayesian=args.bayesian)
