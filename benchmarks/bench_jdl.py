"""Timings of JDL and the low-rank CME: fit + 5000 conditional second-moment matrices.

Run: python benchmarks/bench_jdl.py [--sizes 1000 10000 100000 1000000] [--dim 3] [--devices 2]
Gaussian data (jdl.data.gaussian_pairs), Gaussian kernels at the median heuristic, lam = 1e-6, the tolerance schedule
(1e-3 up to n = 1e5, 1e-2 at 1e6, 1e-1 beyond). "fit" = Algorithm 1 on both sides, rotation, assembly and the
solve; "eval" = 5000 conditional E[Y Y^T | x]. Both are second calls (compilation is reported separately).
--devices k splits the CPU into k forced host devices and shards the rows of X and Y over them.
"""

import argparse
import os
import sys
import time

if "--devices" in sys.argv:  # must precede the first import of jax
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={sys.argv[sys.argv.index('--devices') + 1]}"

import jax  # noqa: E402

import bayeskern as bk  # noqa: E402
from bayeskern.jdl import fit_cme, fit_jdl, jdl_bases  # noqa: E402
from bayeskern.jdl.data import gaussian_pairs, random_correlation  # noqa: E402
from bayeskern.sharding import shard_rows  # noqa: E402
from bayeskern.kernels import RBF, median_heuristic  # noqa: E402
from _common import machine_line  # noqa: E402


def tolerance(n):
    return 1e-3 if n <= 100_000 else (1e-2 if n <= 1_000_000 else 1e-1)


def run_once(X, Y, Xt, kx, ky, tol, method):
    t0 = time.perf_counter()
    bases = jdl_bases(X, Y, kx, ky, tol=tol)
    if method == "cme":
        model = fit_cme(None, None, None, ky, 1e-6, bases=bases)
        out = lambda: model.conditional_expectation(Xt, lambda V: V[:, :, None] * V[:, None, :])  # noqa: E731
    else:
        model = fit_jdl(None, None, None, None, 1e-6, constraint=method, bases=bases)
        out = lambda: model.conditional_expectation(Xt, lambda V: V[:, :, None] * V[:, None, :]).mean  # noqa: E731
    jax.block_until_ready(model.basis_x.A)
    t1 = time.perf_counter()
    jax.block_until_ready(out())
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, bases.basis_x.A.shape[1], bases.basis_y.A.shape[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--dim", type=int, default=3)
    parser.add_argument("--methods", nargs="+", default=["unconstrained", "data_box", "cme"])
    parser.add_argument("--devices", type=int, default=1)
    args = parser.parse_args()
    bk.enable_x64()
    print(machine_line(f"d = {args.dim}, devices = {len(jax.devices())}"))
    C = random_correlation(jax.random.key(0), 2 * args.dim)
    Xt, _ = gaussian_pairs(jax.random.key(1), C, 5000)
    for n in args.sizes:
        X, Y = gaussian_pairs(jax.random.key(2), C, n)
        kx, ky = RBF(median_heuristic(X)), RBF(median_heuristic(Y))
        if args.devices > 1:
            X, Y = shard_rows(X), shard_rows(Y)
        for method in args.methods:
            first = run_once(X, Y, Xt, kx, ky, tolerance(n), method)
            fit, ev, m_x, m_y = run_once(X, Y, Xt, kx, ky, tolerance(n), method)
            compile_s = first[0] + first[1] - fit - ev
            print(f"{method:>13}  n = {n:>8}  eps = {tolerance(n):.0e}  m = {m_x}/{m_y}: fit {fit:7.3f} s  "
                  f"eval {ev:6.3f} s  total {fit + ev:7.3f} s  (compilation {compile_s:5.1f} s)", flush=True)


if __name__ == "__main__":
    main()
