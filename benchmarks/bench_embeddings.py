"""Timings of the matrix-free MMD and HSIC code on this machine (d = 2, float64).

Run: python benchmarks/bench_embeddings.py [--sizes 10000 100000] [--permutations 100]
Prints one line per measurement; copy them to benchmarks/RESULTS.md with the machine.
Times are after compilation (a first call on the same shapes warms up).
"""

import argparse

import jax
import numpy as np

import bayeskern as bk
from _common import machine_line, timed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--permutations", type=int, default=100, help="HSIC permutation test size (n <= 10^4 only)")
    parser.add_argument("--block-size", type=int, default=bk.kernels.DEFAULT_BLOCK_SIZE)
    args = parser.parse_args()
    bk.enable_x64()
    print(machine_line(f"block {args.block_size}"))
    rng = np.random.default_rng(0)
    for n in args.sizes:
        X = rng.standard_normal((n, 2))
        Y = rng.standard_normal((n, 2)) + 0.1
        k = bk.RBF(1.0)
        t, v = timed(lambda: bk.mmd2_unbiased(X, Y, k, block_size=args.block_size))
        print(f"mmd2_unbiased           n={n:>7}  {t:8.2f} s   value {float(v):.3e}")
        Yd = X[:, :1] + 0.5 * rng.standard_normal((n, 1))
        t, r = timed(lambda: bk.hsic_test(X, Yd, bk.RBF(1.0), bk.RBF(1.0), method="gamma", block_size=args.block_size).statistic)
        print(f"hsic_test gamma         n={n:>7}  {t:8.2f} s   n*HSIC_b {r:.3e}")
        if n <= 10_000:
            key = jax.random.key(0)
            run = lambda: bk.hsic_test(X, Yd, bk.RBF(1.0), bk.RBF(1.0), key=key, n_permutations=args.permutations,
                                       block_size=args.block_size).p_value
            t, p = timed(run)
            print(f"hsic_test permutation   n={n:>7}  {t:8.2f} s   B={args.permutations}, p {p:.3g}")


if __name__ == "__main__":
    main()
