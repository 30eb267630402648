"""``bayeskern jdl X Y``: a low-rank joint distribution model of (X, Y) and the conditional law of Y given X."""

import time

import numpy as np

from ._io import check, load_pair, load_sample, output_folder, write_summary

__all__ = ["add_parsers", "held_out_lsif_loss"]

SCALES = (0.5, 1.0, 2.0)
LAMBDAS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2)


def held_out_lsif_loss(model, X, Y) -> float:
    """Least-squares density-ratio loss of 1 + h on held-out pairs (v of them), the quantity JDL fits in-sample:
    (1/v^2) sum_ij (1 + h(x_i, y_j))^2 - (2/v) sum_i (1 + h(x_i, y_i)), from the features in O(v m^2)."""
    Px, Py = np.asarray(model.features_x(X)), np.asarray(model.features_y(Y))
    H, v = np.asarray(model.H), X.shape[0]
    total = Py.sum(0) @ H @ Px.sum(0)
    squares = np.sum((H @ (Px.T @ Px)) * ((Py.T @ Py) @ H))
    paired = np.asarray(model.density_ratio(X, Y))
    return float((v**2 + 2 * total + squares) / v**2 - 2 * paired.mean())


def _validate(X, Y, args, key):
    """(sigma_x, sigma_y, lam) minimising the held-out loss of the normalised model, 1/5 of the rows held out."""
    import jax

    import bayeskern as bk
    from bayeskern.jdl import fit_jdl, jdl_bases

    n = X.shape[0]
    perm = np.asarray(jax.random.permutation(key, n))
    val, fit = perm[: n // 5], perm[n // 5:]
    med_x, med_y = float(bk.median_heuristic(X[fit])), float(bk.median_heuristic(Y[fit]))
    scores = {}
    for sx in SCALES:
        for sy in SCALES:
            bases = jdl_bases(X[fit], Y[fit], bk.RBF(sx * med_x), bk.RBF(sy * med_y), tol=args.tol)
            for lam in LAMBDAS:
                model = fit_jdl(None, None, None, None, lam, constraint="normalised", bases=bases)
                scores[(sx * med_x, sy * med_y, lam)] = held_out_lsif_loss(model, X[val], Y[val])
    return min(scores, key=scores.get), scores


def _run(args):
    import jax

    import bayeskern as bk
    from bayeskern.jdl import fit_jdl

    X, Y = load_pair(args.x, args.y)
    check(X.shape[0] >= 10, f"jdl needs at least 10 paired rows, got {X.shape[0]}")
    if args.query:
        Xq = load_sample(args.query, "--query")
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
    weights = np.asarray(model.conditional_weights(Xq).mean)
    sd = np.sqrt(np.clip(np.asarray(second.mean) - np.asarray(mean.mean) ** 2, 0.0, None))
    summary |= {"sigma_x": sigma_x, "sigma_y": sigma_y, "lam": lam,
                "rank_x": int(model.basis_x.A.shape[1]), "rank_y": int(model.basis_y.A.shape[1]),
                "normalisation_error": abs(float(model.total_mass()) - 1.0),
                "queries": int(Xq.shape[0]), "undefined_conditionals": int(np.sum(mean.undefined)),
                "queries_with_negative_weights": float(np.mean((weights < 0).any(axis=1))),
                "seconds": round(time.perf_counter() - t0, 3)}
    out = output_folder(args.out)
    model.save(out / "model.npz")
    d = Y.shape[1]
    header = [f"x{j}" for j in range(X.shape[1])] + [f"mean_y{j}" for j in range(d)] + [f"sd_y{j}" for j in range(d)]
    np.savetxt(out / "conditional.csv", np.hstack([Xq, np.asarray(mean.mean), sd]), delimiter=",",
               header=",".join(header), comments="")
    files = [out / "model.npz", out / "conditional.csv", _plot(X, Y, Xq, np.asarray(mean.mean), sd, out / "jdl.png")]
    write_summary(out, summary, files)
    return summary


def _plot(X, Y, Xq, mean, sd, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
                                   "(bayeskern.jdl.load_model) and jdl.png.")
    p.add_argument("x", help="conditioning sample (n, d_x): .npy or .csv/.txt, one point per row")
    p.add_argument("y", help="outcomes (n, d_y), paired with X row by row")
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
    p.add_argument("--seed", type=int, default=0, help="seed of the validation split")
    p.add_argument("--out", default="bayeskern-out", help="folder for the outputs (default ./bayeskern-out)")
    p.set_defaults(run=_run, check=_check)
