"""Filtering a real series: yearly sunspot numbers 1700-2008 (the data set shipped inside statsmodels).

One-step-ahead prediction as a filtering problem. The series is variance-stabilised (y = sqrt(count)) and
standardised on the training years; the latent state is z_t = (y_t, y_{t-1}) and the observation arriving at
year t is the previous value x_t = y_{t-1}, so the filtered mean of the first coordinate after x_1..x_t is a
forecast of y_t from the years before it. Compared on the test years (one-step-ahead RMSE in sunspot numbers):

- the tuned kernel Bayes filter (kbr.tune_kbf: bandwidth multiplier and lam on validation years, eta by KuLSIF LOO);
- the Bayesian-averaged filter: NUTS over kbf_hyper_model started at the grid optimum, one filter per posterior
  draw, averaged, with a 90 % predictive band;
- an autoregression AR(p) fitted by least squares with p chosen by AIC (statsmodels), the classical baseline;
- persistence (next year = this year).

Needs the ``examples`` extra (statsmodels); nothing is downloaded.

Run: python examples/kbf_sunspots.py [--test-years 60] [--warmup 300] [--samples 300] [--out examples-out]
"""

import argparse
from pathlib import Path

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import bayeskern as bk
from bayeskern import kbr
from bayeskern.inference import band_coverage, kbf_init_values, posterior_predictive_filter, run_nuts
from bayeskern.models import kbf_hyper_model, split_for_validation
from bayeskern.plotting import save_figure


def load_sunspots():
    """(years, counts): the yearly mean sunspot numbers 1700-2008 as shipped with statsmodels."""
    from statsmodels.datasets import sunspots

    data = sunspots.load_pandas().data
    return data["YEAR"].to_numpy(int), data["SUNACTIVITY"].to_numpy(float)


def state_space(y):
    """Latents z_t = (y_t, y_{t-1}) and observations x_t = y_{t-1} for t = 2..n-1 (0-based): (Z, X)."""
    Z = np.stack([y[2:], y[1:-1]], axis=1)
    X = y[1:-1, None]
    return Z, X


def ar_forecasts(y_train, y_all, n_test):
    """One-step-ahead AR(p) forecasts of the last n_test values (p by AIC on the training years, least squares)."""
    from statsmodels.tsa.ar_model import AutoReg, ar_select_order

    p = max(ar_select_order(y_train, maxlag=12, ic="aic").ar_lags or [1])
    fitted = AutoReg(y_train, lags=p).fit()
    intercept, coefs = fitted.params[0], fitted.params[1:]
    n = len(y_all)
    forecasts = [intercept + coefs @ y_all[t - 1::-1][:p] for t in range(n - n_test, n)]
    return np.array(forecasts), p


def main(out, *, test_years=60, n_val=60, landmarks=20, chains=2, warmup=300, samples=300, seed=0):
    """Fits every method, prints the one-step-ahead errors and writes kbf_sunspots.png; returns {method: RMSE}."""
    bk.enable_x64()
    years, counts = load_sunspots()
    root = np.sqrt(counts)
    n_train = len(root) - test_years
    centre, scale = root[:n_train].mean(), root[:n_train].std()
    y = (root - centre) / scale
    Z, X = state_space(y)
    T = n_train - 2  # training pairs use years up to the last training year
    Z_train, X_train = Z[:T], X[:T]
    burn = 20  # the filters start uniform: they run over the last training years before the test years
    X_run = X[T - burn:]
    to_counts = lambda v: np.maximum(np.asarray(v) * scale + centre, 0.0) ** 2
    truth = counts[n_train:]

    tuned = kbr.tune_kbf(X_train, Z_train, n_val=n_val)
    forecasts = {"tuned KBF": to_counts(tuned.filter.filter(X_run)[burn:, 0])}
    print(f"tuned KBF: c = {tuned.c}, lam = {tuned.lam}, eta = {tuned.eta}", flush=True)

    split = split_for_validation(X_train, Z_train, n_val=n_val, num_landmarks=landmarks)
    run = run_nuts(kbf_hyper_model, split, key=jax.random.key(seed), num_chains=chains, num_warmup=warmup,
                   num_samples=samples, init_values=kbf_init_values(tuned, 2),
                   dense_mass=True, max_tree_depth=3, rhat_max=1.05, min_ess=1)
    d = run.diagnostics
    print(f"NUTS {chains} x ({warmup} + {samples}): {run.wall_time:.1f} s, max R-hat {d.max_rhat:.3f}, "
          f"divergences {d.divergences}", flush=True)
    pred = posterior_predictive_filter(run.draws(), X_train, Z_train, X_run, key=jax.random.key(seed + 1))
    forecasts["Bayesian KBF"] = to_counts(pred.mean[burn:, 0])
    band = to_counts(pred.predictive_band[:, burn:, 0])
    coverage = band_coverage(pred.predictive_band[:, burn:, :1], y[n_train:, None])

    ar, p = ar_forecasts(y[:n_train], y, test_years)
    forecasts[f"AR({p})"] = to_counts(ar)
    forecasts["persistence"] = counts[n_train - 1:-1]
    rmse = {name: float(np.sqrt(np.mean((f - truth) ** 2))) for name, f in forecasts.items()}
    print("one-step-ahead RMSE over the test years (sunspot number): "
          + ", ".join(f"{name} {value:.1f}" for name, value in rmse.items()), flush=True)
    print(f"90% predictive band of the Bayesian KBF covers {100 * coverage:.0f}% of the test years", flush=True)

    fig, axes = plt.subplots(1, 2, figsize=(13, 4), gridspec_kw={"width_ratios": [3, 1]})
    t = years[n_train:]
    axes[0].fill_between(t, band[0], band[1], color="C1", alpha=0.25, label="90% predictive band")
    axes[0].plot(t, truth, "k.-", lw=1.2, label="observed")
    for i, (name, f) in enumerate(forecasts.items()):
        axes[0].plot(t, f, lw=1.1, color=f"C{i}", label=name)
    axes[0].set(xlabel="year", ylabel="sunspot number", title="one-step-ahead forecasts, test years")
    axes[0].legend(fontsize=8, ncol=2)
    axes[1].bar(range(len(rmse)), list(rmse.values()), color=[f"C{i}" for i in range(len(rmse))])
    axes[1].set_xticks(range(len(rmse)), list(rmse), rotation=30, ha="right", fontsize=8)
    axes[1].set(ylabel="RMSE (sunspot number)")
    save_figure(fig, Path(out) / "kbf_sunspots.png")
    return rmse


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--test-years", type=int, default=60)
    parser.add_argument("--landmarks", type=int, default=20)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--out", default="examples-out")
    args = parser.parse_args()
    main(args.out, test_years=args.test_years, landmarks=args.landmarks, chains=args.chains, warmup=args.warmup,
         samples=args.samples)
