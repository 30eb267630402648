"""Forecasting the future with a fan chart: monthly CO2 at Mauna Loa (the data set shipped inside statsmodels).

``bayeskern.inference.forecast_ahead`` forecasts the next 24 months of the series from a pandas Series with
monthly dates: the validated kernel Bayes forecaster (the season is detected and offered as seasonal lags) runs its
autoregression on its own forecasts and carries the filter forward by its transition, and each horizon gets a
90 % conformal band from the errors of held-out forecast origins at that horizon. Beside it, the fan chart of
statsmodels' ETS model (additive error, damped additive trend, additive season of 12 months) fitted on the same
months. The last 24 months are held out to show how both fans
meet what happened.

Needs the ``examples`` extra (statsmodels); nothing is downloaded.

Run: python examples/forecast_fan_chart.py [--steps 24] [--out examples-out]
"""

import argparse
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import bayeskern as bk
from bayeskern.inference import forecast_ahead
from bayeskern.plotting import save_figure


def load_co2():
    """Monthly mean CO2 (ppm) at Mauna Loa, 1958-2001, as a pandas Series with month-start dates."""
    from statsmodels.datasets import co2

    return co2.load_pandas().data["co2"].resample("MS").mean().interpolate()


def ets_fan(y_train, steps):
    """(means, (2, steps) 90 % interval) of ETS (A, Ad, A) with a season of 12, fitted on y_train."""
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    model = ETSModel(y_train, error="add", trend="add", damped_trend=True, seasonal="add", seasonal_periods=12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = model.fit(disp=False, maxiter=1000).get_prediction(
            start=len(y_train), end=len(y_train) + steps - 1).summary_frame(alpha=0.1)
    return frame["mean"].to_numpy(), frame[["pi_lower", "pi_upper"]].to_numpy().T


def main(out, *, steps=24):
    """Forecasts the held-out months both ways, prints errors and coverages, writes forecast_fan_chart.png;
    returns {method: (RMSE, coverage)}."""
    bk.enable_x64()
    y = load_co2()
    y_train, truth = y.iloc[:-steps], y.iloc[-steps:].to_numpy()
    fc = forecast_ahead(y_train, steps)
    print(f"kernel Bayes forecaster: {len(fc.tuning.members)} designs averaged, the best {fc.design.label}; "
          f"{fc.seconds:.1f} s; the first forecast is for {fc.index[0]:%Y-%m}")
    ets, ets_band = ets_fan(y_train, steps)
    fans = {"kernel Bayes (forecast_ahead)": (fc.mean[:, 0], fc.band[:, :, 0]), "ETS (A, Ad, A)": (ets, ets_band)}
    scores = {}
    for name, (mean, band) in fans.items():
        rmse = float(np.sqrt(np.mean((mean - truth) ** 2)))
        cover = float(np.mean((truth >= band[0]) & (truth <= band[1])))
        width = band[1] - band[0]
        scores[name] = (rmse, cover)
        print(f"{name}: RMSE {rmse:.3f} ppm over the {steps} held-out months, 90% band covers {cover:.0%}, width "
              f"{width[0]:.2f} ppm at 1 month, {width[steps // 2 - 1]:.2f} at {steps // 2}, {width[-1]:.2f} at {steps}")

    fig, axes = plt.subplots(1, 2, figsize=(13, 4), sharey=True)
    past = y_train.iloc[-72:]
    for ax, (name, (mean, band)), color in zip(axes, fans.items(), ("C0", "C1")):
        ax.plot(past.index, past.to_numpy(), color="k", lw=1, label="observed")
        ax.fill_between(fc.index, band[0], band[1], color=color, alpha=0.25, lw=0, label="90% band")
        ax.plot(fc.index, mean, color=color, lw=1.5, label="forecast")
        ax.plot(fc.index, truth, "k.", ms=4, label="held out")
        ax.set(title=name, ylabel="CO2 (ppm)")
        ax.legend(frameon=False, fontsize=8, loc="upper left")
    save_figure(fig, Path(out) / "forecast_fan_chart.png")
    return scores


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--out", default="examples-out")
    args = parser.parse_args()
    main(args.out, steps=args.steps)
