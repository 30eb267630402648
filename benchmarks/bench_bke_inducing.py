"""Stability of type-II BKE lengthscales: kernel-herding inducing points vs a random held-out subset at equal m.

Run: python benchmarks/bench_bke_inducing.py [--seeds 10] [--problems laplace blobs]
For each problem and m, every seed draws a new data set; the held-out rule also draws its subset with that seed,
herding is deterministic given the data. Prints the mean lengthscale and the spread (sd of log theta, and the
min-max range) across seeds, then the spread due to the inducing choice alone (one data set, --seeds subsets).
"""

import argparse

import jax
import numpy as np

import bayeskern as bk
from bayeskern.bke import herding_inducing, hold_out_inducing
from bayeskern.inference import fit_type2
from _common import machine_line

PROBLEMS = {  # name -> (pooled-sample generator for a seed, inducing sizes m)
    "laplace": (lambda seed: np.vstack(bk.datasets.normal_vs_laplace(200, seed=seed)), (10, 30)),
    "blobs": (lambda seed: np.vstack(bk.datasets.blobs(2.0, per=50, seed=seed)), (50, 100)),
}


def lengthscale(X, rule, m, seed):
    if rule == "held-out":
        X_rest, Z = hold_out_inducing(X, jax.random.key(seed), m)
    else:
        X_rest, Z = herding_inducing(X, m)
    return float(fit_type2(X_rest, Z).lengthscale)


def spread(thetas):
    log = np.log(thetas)
    return f"mean {np.mean(thetas):8.4f}  sd(log) {np.std(log, ddof=1):.4f}  range [{min(thetas):.4f}, {max(thetas):.4f}]"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    args = parser.parse_args()
    bk.enable_x64()
    print(machine_line(f"type-II BKL, tau2 = 1, {args.seeds} seeds"))
    for name in args.problems:
        sample, sizes = PROBLEMS[name]
        for m in sizes:
            for rule in ("held-out", "herding"):
                thetas = [lengthscale(sample(s), rule, m, s) for s in range(args.seeds)]
                print(f"{name:8s} m = {m:3d}  {rule:9s} data seeds:   {spread(thetas)}")
            thetas = [lengthscale(sample(0), "held-out", m, s) for s in range(args.seeds)]
            print(f"{name:8s} m = {m:3d}  held-out  subset seeds: {spread(thetas)}  (herding: one set, spread 0)")


if __name__ == "__main__":
    main()
