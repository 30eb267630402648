"""The ``bayeskern`` command line: ``bayeskern demo`` and ``bayeskern two-sample X Y``."""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["main", "load_sample"]


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def load_sample(path: str, name: str) -> np.ndarray:
    """Read a sample (n, d) from .npy or .csv/.txt (comma or whitespace separated, optional header row)."""
    p = Path(path)
    if not p.is_file():
        raise CLIError(f"{name}: no such file: {path}")
    try:
        if p.suffix == ".npy":
            data = np.load(p, allow_pickle=False)
        else:
            delimiter = "," if p.suffix == ".csv" else None
            try:
                data = np.loadtxt(p, delimiter=delimiter, ndmin=2)
            except ValueError:
                data = np.loadtxt(p, delimiter=delimiter, ndmin=2, skiprows=1)
    except (ValueError, OSError) as e:
        raise CLIError(f"{name}: cannot read {path} as numbers ({str(e).splitlines()[0]})") from None
    data = np.asarray(data, dtype=float)
    if data.ndim == 1:
        data = data[:, None]
    if data.ndim != 2 or data.shape[0] < 2:
        raise CLIError(f"{name}: expected a table of at least 2 rows (points) by d columns, got shape {data.shape}")
    if not np.all(np.isfinite(data)):
        raise CLIError(f"{name}: {path} contains NaN or inf")
    return data


def _two_sample_report(X, Y, args, title):
    import jax

    import bayeskern as bk
    from bayeskern.bke import hold_out_inducing
    from bayeskern.inference import fit_type2

    t0 = time.perf_counter()
    key = jax.random.key(args.seed)
    median = float(bk.median_heuristic(X, Y))
    fit = split = None
    if args.lengthscale:
        ls, rule = args.lengthscale, "user"
    elif args.kernel == "median":
        ls, rule = median, "median heuristic (pooled)"
    else:
        split = hold_out_inducing(np.vstack([X, Y]), jax.random.fold_in(key, 1), args.inducing)
        fit = fit_type2(*split, args.tau2)
        ls = float(fit.lengthscale)
        rule = f"BKL: type-II ML of the BKE pseudolikelihood (tau2 = {fit.tau2:g}, m = {fit.m} held-out inducing points)"
    result = bk.mmd_test(X, Y, bk.RBF(ls), key=jax.random.fold_in(key, 2), n_permutations=args.permutations)
    summary = {
        "title": title,
        "n_x": int(X.shape[0]),
        "n_y": int(Y.shape[0]),
        "dimension": int(X.shape[1]),
        "kernel": "rbf",
        "lengthscale": ls,
        "lengthscale_rule": rule,
        "median_heuristic_lengthscale": median,
        "mmd2_unbiased": result.statistic,
        "p_value": result.p_value,
        "n_permutations": args.permutations,
        f"reject_at_{args.alpha}": result.reject(args.alpha),
    }
    if fit is not None:
        summary["bkl_local_maxima"] = [round(t, 4) for t, _ in fit.local_maxima]
        median_result = bk.mmd_test(X, Y, bk.RBF(median), key=jax.random.fold_in(key, 2), n_permutations=args.permutations)
        summary["p_value_median_heuristic"] = median_result.p_value
    witness = _witness(X, Y, ls, fit, split, args, jax.random.fold_in(key, 3), summary)
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    figure = _plot(X, Y, ls, fit, median, result, witness, out / "two_sample.png")
    for name, value in summary.items():
        print(f"{name:>32}: {value}")
    print(f"{'wrote':>32}: {out / 'summary.json'}, {figure}")
    return summary


def _witness(X, Y, ls, fit, split, args, key, summary):
    """Witness posterior on a grid: over NUTS lengthscale draws (1-D) or at the fixed lengthscale (2-D)."""
    import jax

    import bayeskern as bk
    from bayeskern.bke import witness_posterior

    d = X.shape[1]
    mode = args.witness if args.witness != "auto" else ("nuts" if d == 1 and fit is not None else "fixed")
    if d > 2 or mode == "none":
        summary["witness"] = "not computed" if mode == "none" else "not plotted for dimension > 2"
        return None
    Z = np.vstack([X, Y])
    lo, hi = np.quantile(Z, 0.005, axis=0), np.quantile(Z, 0.995, axis=0)  # where the data are, not the extremes
    pad = 0.05 * (hi - lo)
    axes = [np.linspace(lo[i] - pad[i], hi[i] + pad[i], 401 if d == 1 else 50) for i in range(d)]
    grid = axes[0][:, None] if d == 1 else np.stack(np.meshgrid(*axes), -1).reshape(-1, 2)
    if mode == "nuts":
        if fit is None:
            raise CLIError("--witness nuts needs the BKL lengthscale (drop --lengthscale and --kernel median)")
        from bayeskern.inference import run_nuts
        from bayeskern.models import bke_model

        mcmc = run_nuts(bke_model, *split, key=jax.random.fold_in(key, 2), num_chains=args.chains, num_warmup=args.warmup,
                        num_samples=args.samples, init_values={"lengthscale": fit.lengthscale}, tau2=args.tau2,
                        progress_bar=False)
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
    else:
        post = witness_posterior(X, Y, bk.RBF(ls), args.tau2, grid=grid)
        summary["witness"] = f"posterior at lengthscale {ls:.4g} (tau2 = {args.tau2:g}), 80% pointwise band"
    summary["witness_band_excludes_zero_fraction"] = post.fraction_excluding_zero
    return post, axes


def _plot(X, Y, ls, fit, median, result, witness, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayeskern.plotting import (plot_likelihood_curve, plot_null_distribution, plot_witness_1d, plot_witness_2d,
                                    save_figure)

    panels = 1 + (fit is not None) + (witness is not None)
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.2), squeeze=False)
    axes = list(axes[0])
    if fit is not None:
        plot_likelihood_curve(axes.pop(0), fit, median)
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
    X, Y = load_sample(args.x, "X"), load_sample(args.y, "Y")
    if X.shape[1] != Y.shape[1]:
        raise CLIError(f"X has {X.shape[1]} columns but Y has {Y.shape[1]}: samples must have the same dimension")
    return _two_sample_report(X, Y, args, f"two-sample: {args.x} vs {args.y}")


def _add_test_options(p):
    p.add_argument("--permutations", type=int, default=500, help="number of random relabellings for the null (default 500)")
    p.add_argument("--kernel", choices=("bkl", "median"), default="bkl",
                   help="lengthscale rule: bkl (type-II ML of the BKE pseudolikelihood, default) or median heuristic")
    p.add_argument("--lengthscale", type=float, default=None, help="fixed RBF lengthscale (overrides --kernel)")
    p.add_argument("--inducing", type=int, default=None, help="BKL: held-out inducing points (default min(100, max(D, N/10)))")
    p.add_argument("--tau2", type=float, default=1.0, help="BKL / witness: embedding noise variance tau2 (default 1)")
    p.add_argument("--witness", choices=("auto", "nuts", "fixed", "none"), default="auto",
                   help="witness posterior: over NUTS lengthscale draws (auto for 1-D), at the fixed lengthscale, or none")
    p.add_argument("--chains", type=int, default=4, help="NUTS chains (default 4)")
    p.add_argument("--warmup", type=int, default=500, help="NUTS warm-up iterations per chain (default 500)")
    p.add_argument("--samples", type=int, default=500, help="NUTS draws per chain (default 500)")
    p.add_argument("--alpha", type=float, default=0.05, help="test level for the reject/accept line (default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="seed for the permutations (and the demo data)")
    p.add_argument("--out", default="bayeskern-out", help="folder for summary.json and PNG figures (default ./bayeskern-out)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bayeskern", description="Bayesian kernel embeddings and kernel tests on JAX.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="BKL + MMD test + witness posterior on built-in data (normal vs Laplace)")
    demo.add_argument("--n", type=int, default=400, help="points per sample (default 400)")
    _add_test_options(demo)
    demo.set_defaults(inducing=10)
    demo.set_defaults(run=_cmd_demo)
    two = sub.add_parser("two-sample", help="kernel two-sample (MMD) test of two samples in CSV or NPY files")
    two.add_argument("x", help="sample from P: .npy, or .csv/.txt with one point per row")
    two.add_argument("y", help="sample from Q, same number of columns as X")
    _add_test_options(two)
    two.set_defaults(run=_cmd_two_sample)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import bayeskern as bk

    bk.enable_x64()
    try:
        if args.permutations < 1:
            raise CLIError("--permutations must be >= 1")
        if not 0 < args.alpha < 1:
            raise CLIError("--alpha must lie in (0, 1)")
        if args.lengthscale is not None and not args.lengthscale > 0:
            raise CLIError("--lengthscale must be positive")
        if not args.tau2 > 0:
            raise CLIError("--tau2 must be positive")
        if min(args.chains, args.samples) < 1 or args.warmup < 0:
            raise CLIError("--chains and --samples must be >= 1 and --warmup >= 0")
        args.run(args)
    except (CLIError, ValueError) as e:
        print(f"bayeskern: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
