"""``bayeskern compress X Y``: compress n labelled pairs to m pairs that keep the conditional law of Y given X."""

import time

import numpy as np

from pathlib import Path

from ._io import (add_column_options, add_seed_and_out, check, load_pair, pyplot, report, sample_columns,
                  write_summary, write_table)

__all__ = ["add_parsers"]

METHODS = ("ackip", "jkip", "ackh", "jkh")


def _run(args):
    import jax

    from bayeskern import Interrupted
    from bayeskern import compression as bc

    X, Y = load_pair(args.x, args.y, columns=sample_columns(args))
    check(args.m < X.shape[0], f"--m = {args.m} must be smaller than the {X.shape[0]} data pairs")
    if args.labels:
        check(Y.shape[1] == 1 and np.all(Y == np.round(Y)) and Y.min() >= 0,
              "--labels needs Y to be one column of non-negative integer class labels")
        Y = Y[:, 0].astype(int)
    key = jax.random.key(args.seed)
    t0 = time.perf_counter()
    method = getattr(bc, args.method)
    options = {"num_steps": args.steps} if args.method.endswith("kip") else {}
    out = Path(args.out)
    try:
        result = method(X, Y, args.m, key=key, progress_bar=not args.quiet, **options)
    except Interrupted as stopped:
        if stopped.partial is not None:
            stopped.partial.save(out / "compressed.npz")
            _write_csv(stopped.partial, X.shape[1], args.labels, out)
            report(f"{args.method.upper()} interrupted: compressed.npz and compressed.csv hold the set so far "
                   f"({stopped})")
        raise
    result.save(out / "compressed.npz")
    x_std, y_std = result.standardiser.transform(X, Y)
    data = (np.asarray(x_std), np.asarray(y_std))
    random_set = np.asarray(jax.random.choice(jax.random.fold_in(key, 1), X.shape[0], (args.m,), replace=False))
    summary = {"title": f"{args.method.upper()} compression of {args.x}, {args.y}", "method": args.method,
               "n": int(X.shape[0]), "m": result.m, "dim_x": int(X.shape[1]),
               "response": "class labels" if args.labels else f"continuous, {Y.shape[1]} column(s)",
               "lam_c": float(result.lam_c), "final_objective": float(result.objective[-1]),
               "jmmd2_compressed": float(bc.jmmd2(data, (result.x, result.y), result.kernel_x, result.kernel_y)),
               "jmmd2_random_subset": float(bc.jmmd2(data, (data[0][random_set], data[1][random_set]),
                                                     result.kernel_x, result.kernel_y)),
               "seconds": round(time.perf_counter() - t0, 3)}
    _write_csv(result, X.shape[1], args.labels, out)
    files = [out / "compressed.npz", out / "compressed.csv", _plot(X, Y, result, args.labels, out / "compress.png")]
    write_summary(out, summary, files)
    return summary


def _write_csv(result, dim_x, labels, out):
    """compressed.csv: the set in the data's units, one pair per row."""
    y_out = result.y_original.reshape(result.m, -1)
    header = [f"x{j}" for j in range(dim_x)] + ([f"y{j}" for j in range(y_out.shape[1])] if not labels
                                                     else ["label"])
    write_table(out / "compressed.csv", np.hstack([result.x_original, y_out]), header)


def _plot(X, Y, result, labels, path):
    plt = pyplot()
    from bayeskern.plotting import save_figure

    fig, ax = plt.subplots(figsize=(6, 4.5))
    y, cy = (Y, result.y_original) if labels else (Y[:, 0], result.y_original.reshape(result.m, -1)[:, 0])
    ax.scatter(X[:, 0], y, s=4, color="0.6", alpha=0.5, label=f"data (n = {X.shape[0]})")
    ax.scatter(result.x_original[:, 0], cy, s=40, color="C3", marker="x",
               label=f"{result.method.upper()} set (m = {result.m})")
    ax.set_xlabel("x, first column")
    ax.set_ylabel("label" if labels else "y, first column")
    ax.legend(frameon=False)
    return save_figure(fig, path)


def _check(args):
    check(args.m >= 2, "--m must be >= 2")
    check(args.steps >= 1, "--steps must be >= 1")


def add_parsers(sub) -> None:
    p = sub.add_parser("compress", help="conditional distribution compression (ACKIP, JKIP, ACKH, JKH)",
                       description="Compresses n labelled pairs (row i of X with row i of Y) to m pairs whose "
                                   "kernel conditional mean embedding matches the data's (ACKIP, ACKH) or whose "
                                   "joint law matches the data's (JKIP, JKH). Data are standardised; RBF kernels "
                                   "at the median heuristic (indicator kernel for --labels). Writes summary.json "
                                   "(with JMMD^2 of the set and of a random subset of equal size), compressed.csv "
                                   "(the set in your units), compressed.npz (bayeskern.load) "
                                   "and compress.png.")
    p.add_argument("x", help="features (n, d_x): .npy or .csv/.txt, one point per row")
    p.add_argument("y", help="responses (n, d_y), paired with X row by row")
    add_column_options(p)
    p.add_argument("--method", choices=METHODS, default="ackip",
                   help="ackip (default: best conditional fit), jkip, ackh or jkh (greedy, gradient-free)")
    p.add_argument("--m", type=int, default=50, help="size of the compressed set (default 50)")
    p.add_argument("--steps", type=int, default=1000, help="optimiser steps of ACKIP / JKIP (default 1000)")
    p.add_argument("--labels", action="store_true", help="Y is one column of integer class labels")
    add_seed_and_out(p, "seed for initial subsets, minibatches and lam_C tuning")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=_run, check=_check,
                   outputs=lambda a: ["summary.json", "compressed.npz", "compressed.csv", "compress.png"])
