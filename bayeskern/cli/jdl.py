"""``bayeskern jdl X Y``: a low-rank joint distribution model of (X, Y) and the conditional law of Y given X."""

import time

import numpy as np

from pathlib import Path

from ._io import (add_column_options, add_seed_and_out, check, load_pair, load_sample, pyplot, report,
                  sample_columns, write_summary, write_table)

__all__ = ["add_parsers"]

SCALES = (0.5, 1.0, 2.0)
LAMBDAS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
_BLOCK = 1024  # query rows per block of conditional weights (memory O(block n), never q x n)


def _validate(X, Y, args, key):
    """(sigma_x, sigma_y, lam) minimising the held-out loss E(h) of the normalised model, 1/5 of the rows held out."""
    import jax

    import bayeskern as bk
    from bayeskern.jdl import held_out_ratio_loss, select_hyperparameters

    perm = np.asarray(jax.random.permutation(key, X.shape[0]))
    val, fit = perm[: X.shape[0] // 5], perm[X.shape[0] // 5:]
    try:
        (sx, sy, lam), scores = select_hyperparameters(X[fit], Y[fit],
                                                       lambda m: held_out_ratio_loss(m, X[val], Y[val]),
                                                       scales=SCALES, lams=LAMBDAS, tol=args.tol)
    except bk.Interrupted as stopped:
        if stopped.partial is not None:
            _write_scores(stopped.partial[1], Path(args.out))
            report(f"validation interrupted: validation.csv holds the {len(stopped.partial[1])} of "
                   f"{len(SCALES) ** 2 * len(LAMBDAS)} settings scored so far")
        raise
    _write_scores(scores, Path(args.out))
    return (sx * float(bk.median_heuristic(X[fit])), sy * float(bk.median_heuristic(Y[fit])), lam), scores


def _write_scores(scores, out):
    """validation.csv: one row per (bandwidth multiple of X, of Y, lambda) with its held-out loss."""
    write_table(out / "validation.csv", np.array([[*k, v] for k, v in scores.items()]),
                ["scale_x", "scale_y", "lam", "held_out_loss"])


def _negative_share(model, Xq) -> float:
    """Share of query points whose conditional weights on the n training outcomes include a negative one,
    in row blocks (memory O(block n))."""
    from bayeskern.jdl.metrics import negative_weight_share

    blocks = [Xq[i:i + _BLOCK] for i in range(0, Xq.shape[0], _BLOCK)]
    return sum(negative_weight_share(model.conditional_weights(b).mean) * len(b) for b in blocks) / Xq.shape[0]


def _run(args):
    import jax

    import bayeskern as bk
    from bayeskern.jdl import fit_jdl

    X, Y = load_pair(args.x, args.y, columns=sample_columns(args))
    check(X.shape[0] >= 10, f"jdl needs at least 10 paired rows, got {X.shape[0]}")
    if args.query:
        Xq = load_sample(args.query, "--query", args.columns)   # the columns of X
        check(Xq.shape[1] == X.shape[1], f"--query has {Xq.shape[1]} columns but X has {X.shape[1]}")
    elif X.shape[1] == 1:
        Xq = np.linspace(*np.quantile(X[:, 0], [0.01, 0.99]), 200)[:, None]
    else:
        Xq = X
    t0 = time.perf_counter()
    summary = {"title": f"JDL of {args.x}, {args.y}", "n": int(X.shape[0]), "dim_x": int(X.shape[1]),
               "dim_y": int(Y.shape[1]), "constraint": args.constraint, "tol": args.tol}
    if args.lam is None:
        (sigma_x, sigma_y, lam), scores = _validate(X, Y, args, jax.random.key(args.seed))
        summary["validation"] = f"{len(scores)} (sigma_x, sigma_y, lam) by held-out least-squares loss, 1/5 held out"
    else:
        sigma_x, sigma_y, lam = (args.scale_x * float(bk.median_heuristic(X)), args.scale_y * float(bk.median_heuristic(Y)),
                                 args.lam)
    model = fit_jdl(X, Y, bk.RBF(sigma_x), bk.RBF(sigma_y), lam, constraint=args.constraint, tol=args.tol)
    mean = model.conditional_expectation(Xq)
    second = model.conditional_expectation(Xq, lambda V: V**2)
    sd = np.sqrt(np.clip(np.asarray(second.mean) - np.asarray(mean.mean) ** 2, 0.0, None))
    summary |= {"sigma_x": sigma_x, "sigma_y": sigma_y, "lam": lam,
                "rank_x": int(model.basis_x.A.shape[1]), "rank_y": int(model.basis_y.A.shape[1]),
                "normalisation_error": abs(float(model.total_mass()) - 1.0),
                "queries": int(Xq.shape[0]), "undefined_conditionals": int(np.sum(mean.undefined)),
                "queries_with_negative_weights": _negative_share(model, Xq),
                "seconds": round(time.perf_counter() - t0, 3)}
    out = Path(args.out)
    model.save(out / "model.npz")
    d = Y.shape[1]
    header = [f"x{j}" for j in range(X.shape[1])] + [f"mean_y{j}" for j in range(d)] + [f"sd_y{j}" for j in range(d)]
    write_table(out / "conditional.csv", np.hstack([Xq, np.asarray(mean.mean), sd]), header)
    files = [out / "model.npz", out / "conditional.csv", _plot(X, Y, Xq, np.asarray(mean.mean), sd, out / "jdl.png")]
    write_summary(out, summary, files)
    return summary


def _plot(X, Y, Xq, mean, sd, path):
    plt = pyplot()
    from bayeskern.plotting import save_figure

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    ax.scatter(X[:, 0], Y[:, 0], s=4, color="0.6", alpha=0.5, label="data")
    order = np.argsort(Xq[:, 0])
    ax.plot(Xq[order, 0], mean[order, 0], color="C0", label="E[Y | x]")
    ax.fill_between(Xq[order, 0], (mean - sd)[order, 0], (mean + sd)[order, 0], color="C0", alpha=0.2, lw=0,
                    label="+- conditional sd")
    ax.set_xlabel("x, first column")
    ax.set_ylabel("y, first column")
    ax.legend(frameon=False)
    return save_figure(fig, path)


def _check(args):
    check(0 < args.tol < 1, "--tol must lie in (0, 1)")
    check(args.lam is None or args.lam > 0, "--lam must be positive")
    check(args.scale_x > 0 and args.scale_y > 0, "--scale-x and --scale-y must be positive")


def add_parsers(sub) -> None:
    from bayeskern.jdl import CONSTRAINTS

    p = sub.add_parser("jdl", help="joint distribution learning: conditional means and spreads of Y given X",
                       description="Fits the low-rank JDL model (a Radon-Nikodym derivative 1 + h of the joint law "
                                   "of (X, Y) against the product of its marginals, RBF kernels, matrix-free "
                                   "pivoted Cholesky bases) and reads off E[Y | x] and sd[Y | x] at query points. "
                                   "Without --lam, bandwidths (0.5, 1, 2 x median) and lambda are chosen by a "
                                   "held-out least-squares loss. Writes summary.json, conditional.csv, model.npz "
                                   "(bayeskern.load), jdl.png and, when validating, validation.csv.")
    p.add_argument("x", help="conditioning sample (n, d_x): .npy or .csv/.txt, one point per row")
    p.add_argument("y", help="outcomes (n, d_y), paired with X row by row")
    add_column_options(p)
    p.add_argument("--query", default=None,
                   help="points x at which to read the conditional law (default: a grid for 1-D X, else X)")
    p.add_argument("--constraint", choices=CONSTRAINTS, default="grid",
                   help="normalisation/positivity: grid (default: 1 + h >= margin on the training grid), data_box "
                        "(the paper's), kernel_bound, normalised or unconstrained")
    p.add_argument("--tol", type=float, default=1e-3, help="relative trace tolerance of the bases (default 1e-3)")
    p.add_argument("--lam", type=float, default=None, help="ridge lambda (default: chosen by validation)")
    p.add_argument("--scale-x", type=float, default=1.0, help="with --lam: RBF bandwidth of X as a multiple of "
                                                              "the median distance (default 1)")
    p.add_argument("--scale-y", type=float, default=1.0, help="with --lam: the same for Y (default 1)")
    add_seed_and_out(p, "seed of the validation split")
    p.set_defaults(run=_run, check=_check,
                   outputs=lambda a: ["summary.json", "model.npz", "conditional.csv", "jdl.png"]
                   + ["validation.csv"] * (a.lam is None))
