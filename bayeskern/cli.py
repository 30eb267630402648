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

    t0 = time.perf_counter()
    ls = args.lengthscale if args.lengthscale else float(bk.median_heuristic(X, Y))
    kernel = bk.RBF(ls)
    result = bk.mmd_test(X, Y, kernel, key=jax.random.key(args.seed), n_permutations=args.permutations)
    summary = {
        "title": title,
        "n_x": int(X.shape[0]),
        "n_y": int(Y.shape[0]),
        "dimension": int(X.shape[1]),
        "kernel": "rbf",
        "lengthscale": ls,
        "lengthscale_rule": "user" if args.lengthscale else "median heuristic (pooled)",
        "mmd2_unbiased": result.statistic,
        "p_value": result.p_value,
        "n_permutations": args.permutations,
        f"reject_at_{args.alpha}": result.reject(args.alpha),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    figure = _plot(X, Y, kernel, result, out / "two_sample.png")
    for key, value in summary.items():
        print(f"{key:>28}: {value}")
    print(f"{'wrote':>28}: {out / 'summary.json'}" + (f", {figure}" if figure else ""))
    return summary


def _plot(X, Y, kernel, result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import bayeskern as bk
    from bayeskern.plotting import plot_null_distribution, plot_witness_1d, plot_witness_2d

    d = X.shape[1]
    fig, axes = plt.subplots(1, 2 if d <= 2 else 1, figsize=(11 if d <= 2 else 5.5, 4.2), squeeze=False)
    plot_null_distribution(axes[0, 0], result, "unbiased MMD^2")
    w = bk.witness(X, Y, kernel)
    Z = np.vstack([X, Y])
    lo, hi = Z.min(0), Z.max(0)
    pad = 0.1 * (hi - lo)
    if d == 1:
        grid = np.linspace(lo[0] - pad[0], hi[0] + pad[0], 400)
        plot_witness_1d(axes[0, 1], grid, w(grid), X, Y)
    elif d == 2:
        xx, yy = np.meshgrid(*(np.linspace(lo[i] - pad[i], hi[i] + pad[i], 120) for i in range(2)))
        values = np.asarray(w(np.column_stack([xx.ravel(), yy.ravel()]))).reshape(xx.shape)
        plot_witness_2d(axes[0, 1], xx, yy, values, X, Y)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


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
    p.add_argument("--lengthscale", type=float, default=None, help="RBF lengthscale; default: median heuristic on the pooled sample")
    p.add_argument("--alpha", type=float, default=0.05, help="test level for the reject/accept line (default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="seed for the permutations (and the demo data)")
    p.add_argument("--out", default="bayeskern-out", help="folder for summary.json and PNG figures (default ./bayeskern-out)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bayeskern", description="Bayesian kernel embeddings and kernel tests on JAX.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="two-sample test on built-in data (normal vs Laplace), with figures")
    demo.add_argument("--n", type=int, default=400, help="points per sample (default 400)")
    _add_test_options(demo)
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
        args.run(args)
    except (CLIError, ValueError) as e:
        print(f"bayeskern: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
