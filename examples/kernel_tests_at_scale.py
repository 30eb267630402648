"""Kernel tests at scale: power against seconds per test as the sample grows, and the cost against n.

One problem whose difference only large samples see: the perturbed uniform density in d = 1 (Schrab et al. 2023;
3 perturbations of height 0.1). For each sample size, the same data sets for every test: the Bayesian aggregated
test with its defaults (method="auto": the exact kernel with the cyclic-shift null up to 2000 pooled points, random
Fourier features above), the same test with the exact kernel at every size (method="cyclic"), and the median
heuristic. Left: power against the seconds one test takes, each point a sample size; the test worth running at a
budget of seconds is the highest curve there. Right: seconds per test against n. alpha = 0.05, 500 shifts. The
side-by-side comparison with MMDAgg, MMD-FUSE and MMDAggInc is benchmarks/bench_test_scale.py.

Run: python examples/kernel_tests_at_scale.py [--reps 50] [--sizes 500 1000 ...] [--out examples-out]
"""

import argparse
import time
from pathlib import Path

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from tqdm.auto import tqdm

import bayeskern as bk
from bayeskern.plotting import save_figure

TESTS = {"bayes (auto)": dict(kernel="bayes"), "bayes, exact kernel": dict(kernel="bayes", method="cyclic"),
         "median (auto)": dict(kernel="median")}
EXACT_MAX_N = 5000   # the exact kernel's O(n^2) is not run above this many points per sample


def curves(sizes, reps, seed=0):
    """{test: [(n, power, seconds per test)]}, every test on the same ``reps`` data sets of each size."""
    out = {name: [] for name in TESTS}
    for n in sizes:
        data = [bk.datasets.perturbed_uniform(n, 1, 3, 0.1, seed=seed + 1000 * n + r) for r in range(reps)]
        for name, options in TESTS.items():
            if options.get("method") == "cyclic" and n > EXACT_MAX_N:
                continue
            options = dict(options)
            kernel = options.pop("kernel")
            bk.mmd_test(*data[0], kernel, key=jax.random.key(seed), progress_bar=False, **options)   # compile
            start, hits = time.perf_counter(), 0
            for r, (X, Y) in enumerate(tqdm(data, desc=f"{name}, n = {n}", leave=False)):
                hits += bk.mmd_test(X, Y, kernel, key=jax.random.key(seed + 1 + r), progress_bar=False,
                                    **options).reject(0.05)
            out[name].append((n, hits / reps, (time.perf_counter() - start) / reps))
    return out


def main(out: Path, reps: int = 50, sizes=(250, 500, 1000, 2000, 5000, 20_000, 100_000)):
    bk.enable_x64()
    out.mkdir(parents=True, exist_ok=True)
    results = curves(sizes, reps)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    for i, (name, points) in enumerate(results.items()):
        n, power, seconds = map(np.array, zip(*points))
        left.plot(seconds, power, "o-", color=f"C{i}", label=name)
        for x, y, size in zip(seconds, power, n):
            left.annotate(f"{size:g}", (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7, color=f"C{i}")
        right.loglog(n, seconds, "o-", color=f"C{i}", label=name)
        print(f"{name} ({reps} repetitions): " + "; ".join(
            f"n = {a}: power {p:.2f}, {s:.2f} s" for a, p, s in points))
    left.set(xscale="log", xlabel="seconds per test (after compilation)", ylabel="power (alpha = 0.05)",
             title="power against time (labels: points per sample)")
    right.set(xlabel="points per sample n", ylabel="seconds per test", title="cost against n")
    left.legend(frameon=False)
    right.legend(frameon=False)
    fig.tight_layout()
    print(f"figure: {save_figure(fig, out / 'kernel_tests_at_scale.png')}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--sizes", type=int, nargs="*", default=[250, 500, 1000, 2000, 5000, 20_000, 100_000])
    parser.add_argument("--out", type=Path, default=Path("examples-out"))
    args = parser.parse_args()
    main(args.out, args.reps, args.sizes)
