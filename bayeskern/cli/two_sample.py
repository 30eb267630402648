"""``bayeskern demo`` and ``bayeskern two-sample X Y``: BKL lengthscale or the Bayesian aggregated kernels, MMD test,
witness posterior."""

import sys
import time
from pathlib import Path

import numpy as np

from ._io import (CLIError, add_column_options, add_seed_and_out, check, load_pair, pyplot, report, sample_columns,
                  write_netcdf, write_summary)

__all__ = ["add_parsers"]


def _two_sample_report(X, Y, args, title):
    import jax

    import bayeskern as bk
    from bayeskern.bke import hold_out_inducing
    from bayeskern.inference import fit_type2

    t0 = time.perf_counter()
    key = jax.random.key(args.seed)
    median = float(bk.median_heuristic(X, Y))
    fit = split = result = None
    if args.lengthscale:
        ls, rule = args.lengthscale, "user"
    elif args.kernel == "bayes":
        report(f"Bayesian aggregated MMD test: BKE posterior kernels and a bandwidth floor, {args.permutations} "
               "permutations")
        result = bk.mmd_test(X, Y, "bayes", key=jax.random.fold_in(key, 2), n_permutations=args.permutations)
        ls = float(result.dominant("gaussian").lengthscale)
        rule = "the dominant Gaussian kernel of the Bayesian aggregated test"
    elif args.kernel == "median":
        ls, rule = median, "median heuristic (pooled)"
    else:
        report("BKL: type-II fit of the lengthscale (compiles on first use)")
        split = hold_out_inducing(np.vstack([X, Y]), jax.random.fold_in(key, 1), args.inducing)
        fit = fit_type2(*split, args.tau2)
        ls = float(fit.lengthscale)
        rule = f"BKL: type-II ML of the BKE pseudolikelihood (tau2 = {fit.tau2:g}, m = {fit.m} held-out inducing points)"
    if result is None:
        report(f"MMD test with lengthscale {ls:.4g}, {args.permutations} permutations")
        result = bk.mmd_test(X, Y, bk.RBF(ls), key=jax.random.fold_in(key, 2), n_permutations=args.permutations)
    summary = {
        "title": title,
        "n_x": int(X.shape[0]),
        "n_y": int(Y.shape[0]),
        "dimension": int(X.shape[1]),
        "kernel": "bayes aggregate" if args.kernel == "bayes" and not args.lengthscale else "rbf",
        "lengthscale": ls,
        "lengthscale_rule": rule,
        "median_heuristic_lengthscale": median,
        "p_value": result.p_value,
        "n_permutations": args.permutations,
        f"reject_at_{args.alpha}": result.reject(args.alpha),
    }
    if hasattr(result, "kernel_p_values"):
        summary["statistic"] = result.statistic
        summary["statistic_meaning"] = "max over kernels of log(weight / own permutation p-value)"
        summary["kernels"] = [{"kernel": result.labels[i], "weight": float(result.weights[i]),
                               "mmd2_unbiased": float(result.kernel_statistics[i]),
                               "p_value": float(result.kernel_p_values[i])} for i in result.ranking()[:5]]
    else:
        summary["mmd2_unbiased"] = result.statistic
    if fit is not None:
        summary["bkl_local_maxima"] = [round(t, 4) for t, _ in fit.local_maxima]
        median_result = bk.mmd_test(X, Y, bk.RBF(median), key=jax.random.fold_in(key, 2), n_permutations=args.permutations)
        summary["p_value_median_heuristic"] = median_result.p_value
    out = Path(args.out)
    witness, files = _witness(X, Y, ls, fit, split, args, jax.random.fold_in(key, 3), summary, out)
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    report("writing the figure and summary.json")
    files.append(_plot(X, Y, ls, fit, median, result, witness, out / "two_sample.png"))
    write_summary(out, summary, files)
    return summary


def _witness(X, Y, ls, fit, split, args, key, summary, out):
    """Witness posterior on a grid: over NUTS lengthscale draws (1-D; the posterior goes to ``posterior.nc``) or at
    the fixed lengthscale (2-D). Returns ((posterior, grid axes) or None, files written)."""
    import jax

    import bayeskern as bk
    from bayeskern.bke import witness_posterior

    d = X.shape[1]
    mode = args.witness if args.witness != "auto" else ("nuts" if d == 1 and fit is not None else "fixed")
    if d > 2 or mode == "none":
        summary["witness"] = "not computed" if mode == "none" else "not plotted for dimension > 2"
        return None, []
    Z = np.vstack([X, Y])
    lo, hi = np.quantile(Z, 0.005, axis=0), np.quantile(Z, 0.995, axis=0)  # where the data are, not the extremes
    pad = 0.05 * (hi - lo)
    axes = [np.linspace(lo[i] - pad[i], hi[i] + pad[i], 401 if d == 1 else 50) for i in range(d)]
    grid = axes[0][:, None] if d == 1 else np.stack(np.meshgrid(*axes), -1).reshape(-1, 2)
    files = []
    if mode == "nuts":
        check(fit is not None, "--witness nuts needs the BKL lengthscale (drop --lengthscale and --kernel median)")
        from bayeskern.inference import run_nuts
        from bayeskern.models import bke_model

        report(f"NUTS over the lengthscale: {args.chains} chains x ({args.warmup} + {args.samples})")
        mcmc = run_nuts(bke_model, *split, key=jax.random.fold_in(key, 2), num_chains=args.chains, num_warmup=args.warmup,
                        num_samples=args.samples, init_values={"lengthscale": fit.lengthscale}, tau2=args.tau2,
                        progress_bar=sys.stderr.isatty())
        report("witness posterior over the lengthscale draws")
        draws = mcmc.draws()
        keep = np.linspace(0, len(draws["lengthscale"]) - 1, min(400, len(draws["lengthscale"]))).astype(int)
        post = witness_posterior(X, Y, tau2=args.tau2, grid=grid, hyper_draws={"lengthscale": draws["lengthscale"][keep]},
                                 key=jax.random.fold_in(key, 3))
        theta = draws["lengthscale"]
        summary["nuts"] = {"chains": args.chains, "warmup": args.warmup, "samples": args.samples,
                           "lengthscale_mean": float(theta.mean()),
                           "lengthscale_80pct": [float(np.quantile(theta, 0.1)), float(np.quantile(theta, 0.9))],
                           "max_split_rhat": mcmc.diagnostics.max_rhat, "min_ess_bulk": mcmc.diagnostics.min_ess_bulk,
                           "divergences": mcmc.diagnostics.divergences}
        summary["witness"] = f"posterior over {len(keep)} NUTS lengthscale draws, 80% pointwise band"
        write_netcdf(mcmc.idata, out / "posterior.nc")
        files.append(out / "posterior.nc")
    else:
        post = witness_posterior(X, Y, bk.RBF(ls), args.tau2, grid=grid)
        summary["witness"] = f"posterior at lengthscale {ls:.4g} (tau2 = {args.tau2:g}), 80% pointwise band"
    summary["witness_band_excludes_zero_fraction"] = post.fraction_excluding_zero
    return (post, axes), files


def _plot(X, Y, ls, fit, median, result, witness, path):
    plt = pyplot()
    from bayeskern.plotting import (plot_kernel_evidence, plot_likelihood_curve, plot_null_distribution,
                                    plot_witness_1d, plot_witness_2d, save_figure)

    aggregated = hasattr(result, "kernel_p_values")
    panels = 1 + (fit is not None) + (witness is not None)
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels + 2.0 * aggregated, 4.2), squeeze=False)
    axes = list(axes[0])
    if fit is not None:
        plot_likelihood_curve(axes.pop(0), fit, median)
    if aggregated:
        plot_kernel_evidence(axes.pop(0), result, top=8)
    else:
        plot_null_distribution(axes.pop(0), result, f"unbiased MMD^2 (lengthscale {ls:.3g})")
    if witness is not None:
        post, grid_axes = witness
        ax = axes.pop(0)
        if X.shape[1] == 1:
            plot_witness_1d(ax, post.grid[:, 0], post.mean, X, Y, band=(post.lower, post.upper))
            ax.set_title(f"witness posterior: band excludes 0 on {100 * post.fraction_excluding_zero:.0f}% of the grid",
                         fontsize=9)
        else:
            xx, yy = np.meshgrid(*grid_axes)
            plot_witness_2d(ax, xx, yy, post.mean.reshape(xx.shape), X, Y)
            ax.set_title("witness posterior mean", fontsize=9)
    return save_figure(fig, path)


def _cmd_demo(args):
    import bayeskern as bk

    XP, XQ = bk.datasets.normal_vs_laplace(args.n, seed=args.seed)
    return _two_sample_report(XP, XQ, args, f"demo: N(0,1) vs Laplace(0, sqrt(1/2)), n = {args.n} each")


def _cmd_two_sample(args):
    X, Y = load_pair(args.x, args.y, columns=sample_columns(args), paired=False)
    if X.shape[1] != Y.shape[1]:
        raise CLIError(f"X has {X.shape[1]} columns but Y has {Y.shape[1]}: samples must have the same dimension")
    return _two_sample_report(X, Y, args, f"two-sample: {args.x} vs {args.y}")


def _add_test_options(p):
    p.add_argument("--permutations", type=int, default=500, help="number of random relabellings for the null (default 500)")
    p.add_argument("--kernel", choices=("bkl", "median", "bayes"), default="bkl",
                   help="bkl (one RBF, type-II ML of the BKE pseudolikelihood, default), median heuristic, or bayes: "
                        "the Bayesian aggregated test (kernels and weights from the BKE posterior; the witness uses "
                        "its dominant Gaussian kernel)")
    p.add_argument("--lengthscale", type=float, default=None, help="fixed RBF lengthscale (overrides --kernel)")
    p.add_argument("--inducing", type=int, default=None, help="BKL: held-out inducing points (default min(100, max(D, N/10)))")
    p.add_argument("--tau2", type=float, default=1.0, help="BKL / witness: embedding noise variance tau2 (default 1)")
    p.add_argument("--witness", choices=("auto", "nuts", "fixed", "none"), default="auto",
                   help="witness posterior: over NUTS lengthscale draws (auto for 1-D), at the fixed lengthscale, or none")
    p.add_argument("--chains", type=int, default=4, help="NUTS chains (default 4)")
    p.add_argument("--warmup", type=int, default=500, help="NUTS warm-up iterations per chain (default 500)")
    p.add_argument("--samples", type=int, default=500, help="NUTS draws per chain (default 500)")
    p.add_argument("--alpha", type=float, default=0.05, help="test level for the reject/accept line (default 0.05)")
    add_seed_and_out(p, "seed for the permutations (and the demo data)")


def _check(args):
    check(args.permutations >= 1, "--permutations must be >= 1")
    check(0 < args.alpha < 1, "--alpha must lie in (0, 1)")
    check(args.lengthscale is None or args.lengthscale > 0, "--lengthscale must be positive")
    check(args.tau2 > 0, "--tau2 must be positive")
    check(min(args.chains, args.samples) >= 1 and args.warmup >= 0,
          "--chains and --samples must be >= 1 and --warmup >= 0")


def _outputs(args):
    """The files a run may write (the posterior only when NUTS may run: witness auto or nuts)."""
    return ["summary.json", "two_sample.png"] + ["posterior.nc"] * (args.witness in ("auto", "nuts"))


def add_parsers(sub) -> None:
    demo = sub.add_parser("demo", help="BKL + MMD test + witness posterior on built-in data (normal vs Laplace)",
                          description="The main example: N(0, 1) vs Laplace samples with equal mean and variance. "
                                      "Learns the RBF lengthscale by type-II ML of the BKE pseudolikelihood (BKL), "
                                      "runs the MMD permutation test, samples the lengthscale posterior with NUTS "
                                      "and plots the witness-function posterior. Writes summary.json, "
                                      "posterior.nc (arviz netCDF) and two_sample.png.")
    demo.add_argument("--n", type=int, default=400, help="points per sample (default 400)")
    _add_test_options(demo)
    demo.set_defaults(inducing=10, run=_cmd_demo, check=_check, outputs=_outputs)
    two = sub.add_parser("two-sample", help="kernel two-sample (MMD) test of two samples in CSV or NPY files",
                         description="MMD permutation test of X ~ P against Y ~ Q with an RBF kernel whose "
                                     "lengthscale is learned (BKL), the median heuristic or given; witness posterior "
                                     "(NUTS over the lengthscale in 1-D). Writes summary.json, two_sample.png and, "
                                     "with NUTS, posterior.nc.")
    two.add_argument("x", help="sample from P: .npy, or .csv/.txt with one point per row")
    two.add_argument("y", help="sample from Q, same number of columns as X")
    add_column_options(two)
    _add_test_options(two)
    two.set_defaults(run=_cmd_two_sample, check=_check, outputs=_outputs)
