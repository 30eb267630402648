"""Broadbent et al. (2025): compressing the heteroscedastic stand-in with JKH, JKIP, ACKH and ACKIP.

Y = X sin(3X) + (0.1 + 0.5|X|) eps, X ~ U(-3, 3); n_train = 1000, 100 validation and 500 test points per seed.
lambda_C is tuned at m_max, lambda_P at n (compression.select_lambda); herding is gradient-free over the whole training set,
the KIP methods take Adam steps from the best of 10 random subsets. Reported per method and m: the truth-based
AMCMD^2 (400-node Gauss-Legendre quadrature), the plug-in AMCMD^2 on the test features, JMMD^2 and the RMSE
of the 8 test functions of compression.data, against Random (the mean over 10 uniform subsets).
Figure: AMCMD^2 against m per method (median over seeds, with the range).

Run: python examples/compression_heteroscedastic.py [--seeds 0 1 2] [--ms 5 10 20 30] [--out examples-out]
"""

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import bayeskern as bk
from bayeskern import compression as bc
from bayeskern.plotting import save_figure

METHODS = ("Random", "JKH", "JKIP", "ACKH", "ACKIP")


def run_seed(seed: int, ms=(5, 10, 20, 30), *, n_train=1000, n_val=100, n_test=500, num_steps=1000, pool="data",
             plug_in=True, progress_bar=False):
    """Metrics {method: {m: {"truth", "plug_in", "jmmd2", "rmse": {name: value}}}} for one data seed.

    ``pool``: the herding candidates ("data", or a random pool size for larger n); ``plug_in=False`` skips the
    O(n^3) plug-in AMCMD^2 (reported as NaN).
    """
    key = jax.random.key(seed)
    x, y = bc.data.heteroscedastic(n_train + n_val + n_test, key)
    x, y = np.asarray(x), np.asarray(y)
    stats = bc.fit_standardiser(x[:n_train], y[:n_train], discrete=False)
    xs, ys = (np.asarray(v) for v in stats.transform(x, y))
    (xt, yt), (xv, yv), (xe, _) = (xs[:n_train], ys[:n_train]), (xs[n_train:n_train + n_val], ys[n_train:n_train + n_val]), \
        (xs[n_train + n_val:], ys[n_train + n_val:])
    kx = bk.RBF(bk.median_heuristic(xt, convention="sq", max_points=1000))
    ky = bk.RBF(bk.median_heuristic(yt, convention="sq", max_points=1000))
    k_lam, k_rand, k_run = jax.random.split(jax.random.fold_in(key, 1), 3)
    lam_c = bc.select_lambda(xt, yt, xv, yv, kx, ky, size=max(ms), key=k_lam)
    lam_p = bc.select_lambda(xt, yt, xv, yv, kx, ky, size=n_train, key=k_lam) if plug_in else None
    quadrature = bc.data.heteroscedastic_quadrature(stats)
    te_mean, te_sd = bc.data.heteroscedastic_truth_standardised(xe[:, 0], stats)
    truths = {name: np.asarray(bc.data.gaussian_expectation(name, te_mean, te_sd)) for name in bc.data.TEST_FUNCTIONS}
    common = dict(kernel_x=kx, kernel_y=ky, standardise=False, progress_bar=progress_bar)

    def metrics(cx, cy):
        alpha = bc.kcme_weights(cx, xe, kx, lam_c)
        rmse = {name: float(np.sqrt(np.mean((np.asarray(bc.conditional_expectation(h(jnp.asarray(cy[:, 0])), alpha))
                                             - truths[name]) ** 2)))
                for name, (h, _) in bc.data.TEST_FUNCTIONS.items()}
        return {"truth": float(bc.amcmd2_gaussian_truth((cx, cy), kx, ky, lam_c, *quadrature)),
                "plug_in": float(bc.amcmd2((xt, yt), (cx, cy), xe, kx, ky, lam_p, lam_c)) if plug_in else np.nan,
                "jmmd2": float(bc.jmmd2((xt, yt), (cx, cy), kx, ky)), "rmse": rmse}

    out = {method: {} for method in METHODS}
    m_max = max(ms)
    greedy = {"JKH": bc.jkh(xt, yt, m_max, key=k_run, lam_c=lam_c, candidates=pool, **common),
              "ACKH": bc.ackh(xt, yt, m_max, key=k_run, lam_c=lam_c, candidates=pool, **common)}
    for m in ms:
        draws = [metrics(xt[i], yt[i]) for i in (np.asarray(jax.random.choice(k, n_train, (m,), replace=False))
                                                  for k in jax.random.split(jax.random.fold_in(k_rand, m), 10))]
        out["Random"][m] = {k: (float(np.mean([d[k] for d in draws])) if k != "rmse" else
                                {f: float(np.mean([d["rmse"][f] for d in draws])) for f in draws[0]["rmse"]})
                            for k in draws[0]}
        for name, res in greedy.items():  # the greedy sequence's prefixes are the smaller runs
            out[name][m] = metrics(res.x[:m], res.y[:m])
        for name, fn in (("JKIP", bc.jkip), ("ACKIP", bc.ackip)):
            res = fn(xt, yt, m, key=jax.random.fold_in(k_run, m), lam_c=lam_c, num_steps=num_steps, **common)
            out[name][m] = metrics(res.x, res.y)
    return out


def main(out_dir="examples-out", seeds=(0, 1, 2), ms=(5, 10, 20, 30), **kwargs):
    """Run every seed, print the tables, save compression_heteroscedastic.png; returns the per-seed results."""
    results = [run_seed(s, ms, **kwargs) for s in seeds]
    fig, axes = plt.subplots(1, 4, figsize=(19, 4))
    for ax, metric in zip(axes, ("truth", "plug_in", "jmmd2")):
        for method in METHODS:
            vals = np.array([[r[method][m][metric] for m in ms] for r in results])
            ax.plot(ms, np.median(vals, 0), marker="o", label=method)
            ax.fill_between(ms, vals.min(0), vals.max(0), alpha=0.15)
        ax.set(xlabel="m", ylabel=metric, yscale="log", title={"truth": "AMCMD$^2$ (truth)",
                                                               "plug_in": "AMCMD$^2$ (plug-in)", "jmmd2": "JMMD$^2$"}[metric])
    axes[0].legend()
    names, top = list(bc.data.TEST_FUNCTIONS), max(ms)
    for i, method in enumerate(METHODS):  # RMSE per test function at the largest m, relative to Random
        rel = [np.median([r[method][top]["rmse"][f] / r["Random"][top]["rmse"][f] for r in results]) for f in names]
        axes[3].bar(np.arange(len(names)) + 0.16 * (i - 2), rel, width=0.16, label=method)
    axes[3].set_xticks(np.arange(len(names)), names, rotation=45)
    axes[3].set(ylabel="RMSE / RMSE(Random)", title=f"test functions at m = {top}")
    path = save_figure(fig, Path(out_dir) / "compression_heteroscedastic.png")
    for metric in ("truth", "plug_in", "jmmd2"):
        print(f"\n{metric} (median over {len(seeds)} seeds)\n{'m':>4} " + " ".join(f"{m:>9}" for m in METHODS))
        for m in ms:
            print(f"{m:>4} " + " ".join(f"{np.median([r[k][m][metric] for r in results]):9.4g}" for k in METHODS))
    m = max(ms)
    print(f"\nRMSE at m = {m} (median over seeds)")
    for f in bc.data.TEST_FUNCTIONS:
        row = {k: np.median([r[k][m]["rmse"][f] for r in results]) for k in METHODS}
        print(f"{f:>10} " + " ".join(f"{row[k]:9.4f}" for k in METHODS) + f"   best: {min(row, key=row.get)}")
    print(f"figure: {path}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--ms", type=int, nargs="+", default=[5, 10, 20, 30])
    parser.add_argument("--steps", type=int, default=1000, help="Adam steps of JKIP/ACKIP")
    parser.add_argument("--out", default="examples-out")
    args = parser.parse_args()
    bk.enable_x64()
    main(args.out, tuple(args.seeds), tuple(args.ms), num_steps=args.steps)
