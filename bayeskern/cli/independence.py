"""``bayeskern independence X Y``: HSIC test of paired samples, RBF kernels by BKL, the median heuristic or the
Bayesian aggregated test."""

import time

import numpy as np

from pathlib import Path

from ._io import add_column_options, add_seed_and_out, check, load_pair, pyplot, sample_columns, write_summary

__all__ = ["add_parsers"]


def _run(args):
    import jax

    import bayeskern as bk
    from bayeskern.inference import bkl_kernel

    X, Y = load_pair(args.x, args.y, columns=sample_columns(args))
    t0 = time.perf_counter()
    key = jax.random.key(args.seed)
    method = "permutation" if args.permutations > 0 else "gamma"
    rule = {"bkl": bkl_kernel, "median": "median", "bayes": "bayes"}[args.kernel]
    result = bk.hsic_test(X, Y, rule, rule, key=key, n_permutations=max(args.permutations, 1),
                          method=method)
    aggregated = hasattr(result, "kernel_p_values")
    kx, ky = result.dominant() if aggregated else result.kernels
    summary = {"title": f"independence: {args.x} vs {args.y}", "n": int(X.shape[0]), "dim_x": int(X.shape[1]),
               "dim_y": int(Y.shape[1]), "kernel": "bayes aggregate" if aggregated else "rbf",
               "lengthscale_rule": _RULES[args.kernel],
               "lengthscale_x": np.asarray(kx.lengthscale).tolist(), "lengthscale_y": np.asarray(ky.lengthscale).tolist(),
               "null": "permutation" if method == "permutation" else "Gamma approximation",
               "statistic": result.statistic, "p_value": result.p_value,
               f"reject_at_{args.alpha}": result.reject(args.alpha), "seconds": round(time.perf_counter() - t0, 3)}
    if aggregated:
        summary["statistic_meaning"] = "max over kernel pairs of log(weight / own permutation p-value)"
        summary["kernels"] = [{"kernels": result.labels[i], "weight": float(result.weights[i]),
                               "hsic_biased": float(result.kernel_statistics[i]),
                               "p_value": float(result.kernel_p_values[i])} for i in result.ranking()[:5]]
    if method == "permutation":
        summary["n_permutations"] = args.permutations
    out = Path(args.out)
    write_summary(out, summary, [_plot(X, Y, result, out / "independence.png")])
    return summary


_RULES = {"bkl": "BKL (type-II ML of the BKE pseudolikelihood, per sample)", "median": "median heuristic (per sample)",
          "bayes": "Bayesian aggregated test; the lengthscales are its dominant pair"}


def _plot(X, Y, result, path):
    plt = pyplot()
    from bayeskern.plotting import plot_kernel_evidence, plot_null_distribution, save_figure

    aggregated = hasattr(result, "kernel_p_values")
    fig, axes = plt.subplots(1, 2, figsize=(10.4 + 3.0 * aggregated, 4.2))
    axes[0].scatter(X[:, 0], Y[:, 0], s=6, alpha=0.5)
    axes[0].set_xlabel("X, first column")
    axes[0].set_ylabel("Y, first column")
    axes[0].set_title("paired sample", fontsize=9)
    if aggregated:
        plot_kernel_evidence(axes[1], result, top=8)
    elif result.null_samples is not None:
        plot_null_distribution(axes[1], result, "biased HSIC")
    else:
        axes[1].text(0.5, 0.5, f"n HSIC = {result.statistic:.4g}\nGamma-approximated p = {result.p_value:.3g}",
                     ha="center", va="center", transform=axes[1].transAxes)
        axes[1].set_axis_off()
    return save_figure(fig, path)


def _check(args):
    check(args.permutations >= 0, "--permutations must be >= 0 (0: Gamma approximation of the null)")
    check(0 < args.alpha < 1, "--alpha must lie in (0, 1)")
    check(args.kernel != "bayes" or args.permutations > 0, "--kernel bayes needs --permutations > 0")


def add_parsers(sub) -> None:
    p = sub.add_parser("independence", help="kernel independence (HSIC) test of paired samples in CSV or NPY files",
                       description="HSIC test of H0: X and Y independent, from paired rows (row i of X with row i "
                                   "of Y). RBF kernels with lengthscales learned per sample (BKL) or the median "
                                   "heuristic. Writes summary.json and independence.png.")
    p.add_argument("x", help="first sample: .npy, or .csv/.txt with one point per row")
    p.add_argument("y", help="second sample, paired with X row by row (any number of columns)")
    add_column_options(p)
    p.add_argument("--kernel", choices=("bkl", "median", "bayes"), default="median",
                   help="kernel rule for both variables: median heuristic (default), bkl (type-II ML), or bayes (the "
                        "Bayesian aggregated test over the BKE posterior kernels of each variable; permutations only)")
    p.add_argument("--permutations", type=int, default=500,
                   help="permutations of Y for the null (default 500); 0 uses the Gamma approximation (large n)")
    p.add_argument("--alpha", type=float, default=0.05, help="test level for the reject/accept line (default 0.05)")
    add_seed_and_out(p, "seed for the permutations and the BKL inducing points")
    p.set_defaults(run=_run, check=_check, outputs=lambda a: ["summary.json", "independence.png"])
