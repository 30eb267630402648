"""``bayeskern filter X Z X_TEST``: a tuned kernel Bayes filter, optionally Bayesian-averaged over NUTS draws."""

import time

import numpy as np

from pathlib import Path

from ._io import add_seed_and_out, check, load_pair, load_sample, pyplot, report, write_netcdf, write_summary, write_table

__all__ = ["add_parsers"]


def _run(args):
    import jax

    from bayeskern import kbr
    from bayeskern.inference import band_coverage

    X, Z = load_pair(args.x, args.z, ("X", "Z"))
    X_test = load_sample(args.x_test, "X_TEST")
    check(X_test.shape[1] == X.shape[1], f"X_TEST has {X_test.shape[1]} columns but X has {X.shape[1]}")
    Z_test = None
    if args.z_test:
        Z_test = load_sample(args.z_test, "--z-test")
        check(Z_test.shape == (X_test.shape[0], Z.shape[1]),
              f"--z-test must have shape {(X_test.shape[0], Z.shape[1])} (a row per X_TEST row), got {Z_test.shape}")
    t0 = time.perf_counter()
    tuned = kbr.tune_kbf(X, Z, method=args.method, n_val=args.validation)
    means = np.asarray(tuned.filter.filter(X_test))
    summary = {"title": f"kernel Bayes filter ({args.method.upper()}-KBR) on {args.x}, {args.z}",
               "training_steps": int(X.shape[0]), "test_steps": int(X_test.shape[0]), "method": args.method,
               "bandwidth_multiplier_c": tuned.c, "lam": tuned.lam, "eta": tuned.eta,
               "validation_mse": {f"c={c:g}, lam={lam:g}": v for (c, lam), v in tuned.validation_mse.items()}}
    if Z_test is not None:
        summary["test_mse"] = kbr.filter_mse(means, Z_test)
    out = Path(args.out)
    tuned.filter.save(out / "filter.npz")
    files, columns, band = [out / "filter.npz"], [means], None
    if args.nuts:
        band, nuts = _bayesian_average(args, X, Z, X_test, tuned, jax.random.key(args.seed), out)
        files.append(out / "posterior.nc")
        columns += [nuts.pop("mean"), band[0], band[1]]
        summary["nuts"] = nuts
        if Z_test is not None:
            summary["nuts"]["test_mse"] = kbr.filter_mse(columns[1], Z_test)
            summary["nuts"]["band_coverage"] = band_coverage(band, Z_test)
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    d = Z.shape[1]
    names = [f"grid_{j}" for j in range(d)]
    if args.nuts:
        names += [f"{kind}_{j}" for kind in ("bayes", f"lower{args.level:g}", f"upper{args.level:g}") for j in range(d)]
    write_table(out / "filtered.csv", np.hstack(columns), names)
    files += [out / "filtered.csv", _plot(columns, band, Z_test, out / "filter.png")]
    write_summary(out, summary, files)
    return summary


def _bayesian_average(args, X, Z, X_test, tuned, key, out):
    """NUTS over the filter's hyperparameters from the grid optimum, then posterior predictive filtering."""
    import jax

    from bayeskern import Interrupted
    from bayeskern.inference import kbf_init_values, posterior_predictive_filter, run_nuts
    from bayeskern.models import kbf_hyper_model, split_for_validation

    split = split_for_validation(X, Z, n_val=args.validation, num_landmarks=args.landmarks or None)
    try:
        mcmc = run_nuts(kbf_hyper_model, split, key=jax.random.fold_in(key, 1), method=args.method,
                        num_chains=args.chains, num_warmup=args.warmup, num_samples=args.samples,
                        init_values=kbf_init_values(tuned, Z.shape[1]), max_tree_depth=args.max_tree_depth)
    except Interrupted as stopped:
        if stopped.partial is not None:
            write_netcdf(stopped.partial.idata, out / "posterior.nc")
            report(f"NUTS interrupted: posterior.nc holds the {stopped.partial.sample_stats['lp'].shape[1]} draws "
                   f"per chain finished so far (of {args.samples}); no predictive filtering was run")
        raise
    write_netcdf(mcmc.idata, out / "posterior.nc")
    pred = posterior_predictive_filter(mcmc.draws(), X, Z, X_test, key=jax.random.fold_in(key, 2),
                                       method=args.method, num_draws=args.draws, level=args.level)
    diag = mcmc.diagnostics
    return np.asarray(pred.predictive_band), {
        "mean": np.asarray(pred.mean), "chains": args.chains, "warmup": args.warmup, "samples": args.samples,
        "landmarks": args.landmarks, "max_split_rhat": diag.max_rhat, "min_ess_bulk": diag.min_ess_bulk,
        "divergences": diag.divergences, "posterior_draws_filtered": int(pred.draws.shape[0]),
        "band": f"{args.level:g} posterior predictive", "wall_seconds": round(mcmc.wall_time, 2)}


def _plot(columns, band, Z_test, path):
    plt = pyplot()
    from bayeskern.plotting import save_figure

    d = columns[0].shape[1]
    fig, axes = plt.subplots(d, 1, figsize=(9, 2.4 * d), squeeze=False, sharex=True)
    t = np.arange(columns[0].shape[0])
    for j, ax in enumerate(axes[:, 0]):
        if Z_test is not None:
            ax.plot(t, Z_test[:, j], color="k", lw=1, label="truth")
        ax.plot(t, columns[0][:, j], color="C0", lw=1, label="grid-tuned filter")
        if band is not None:
            ax.plot(t, columns[1][:, j], color="C3", lw=1, label="Bayesian average")
            ax.fill_between(t, band[0][:, j], band[1][:, j], color="C3", alpha=0.2, lw=0, label="predictive band")
        ax.set_ylabel(f"z[{j}]")
    axes[0, 0].legend(frameon=False, ncol=4, fontsize=8)
    axes[-1, 0].set_xlabel("test step")
    return save_figure(fig, path)


def _check(args):
    check(args.validation >= 11, "--validation must be >= 11 steps (10 burn-in steps are not scored)")
    check(min(args.chains, args.samples, args.draws) >= 1 and args.warmup >= 0,
          "--chains, --samples and --draws must be >= 1 and --warmup >= 0")
    check(args.landmarks >= 0, "--landmarks must be >= 0 (0: the exact filter in the NUTS model)")
    check(0 < args.level < 1, "--level must lie in (0, 1)")


def add_parsers(sub) -> None:
    p = sub.add_parser("filter", help="kernel Bayes filter: learn from a training run, filter a test run",
                       description="Learns a kernel Bayes filter from one training trajectory (observations X, "
                                   "latent states Z, one time step per row), tunes bandwidth and lambda on the "
                                   "last --validation steps (eta by KuLSIF leave-one-out) and filters X_TEST. "
                                   "With --nuts, samples the filter's hyperparameters with NUTS (started at the "
                                   "grid optimum) and reports the Bayesian-averaged estimate with predictive "
                                   "bands. Writes summary.json, filtered.csv, filter.npz (the fitted filter, "
                                   "bayeskern.load), filter.png and, with --nuts, posterior.nc.")
    p.add_argument("x", help="training observations (T, d_x): .npy or .csv/.txt, one time step per row")
    p.add_argument("z", help="training latent states (T, d_z), paired with X row by row")
    p.add_argument("x_test", help="test observations (T_test, d_x) to filter")
    p.add_argument("--z-test", default=None, help="true test states (T_test, d_z): adds MSE and band coverage")
    p.add_argument("--method", choices=("iw", "original"), default="iw",
                   help="KBR update: importance-weighted (iw, default) or the original KBR")
    p.add_argument("--validation", type=int, default=200,
                   help="validation steps at the end of the training run (default 200, at most T/2 are used)")
    p.add_argument("--nuts", action="store_true", help="also sample the hyperparameter posterior with NUTS")
    p.add_argument("--chains", type=int, default=2, help="NUTS chains, one per CPU core at a time (default 2)")
    p.add_argument("--warmup", type=int, default=300, help="NUTS warm-up iterations per chain (default 300)")
    p.add_argument("--samples", type=int, default=300, help="NUTS draws per chain (default 300)")
    p.add_argument("--max-tree-depth", type=int, default=6, help="NUTS maximum tree depth (default 6)")
    p.add_argument("--landmarks", type=int, default=40,
                   help="Nystrom landmarks of the NUTS model's filters (default 40; 0 = exact, O(T^3) per step)")
    p.add_argument("--draws", type=int, default=100, help="posterior draws refitted for the average (default 100)")
    p.add_argument("--level", type=float, default=0.9, help="predictive band level (default 0.9)")
    add_seed_and_out(p, "seed for NUTS and the predictive noise")
    p.set_defaults(run=_run, check=_check, outputs=lambda a: ["summary.json", "filter.npz", "filtered.csv",
                                                               "filter.png"] + ["posterior.nc"] * a.nuts)
