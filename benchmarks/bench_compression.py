"""Compression at scale: wall time and quality at m = 100.

Run: python benchmarks/bench_compression.py [--sizes 1000 10000 100000] [--m 100] [--steps 1000]

Data: the heteroscedastic stand-in (standardised), median-heuristic RBF kernels, lambda_C tuned at s = m (compression.select_lambda).
Per n and method: wall time of the public call (compilation included, lambda_C fixed), the truth-based
AMCMD^2 (400-node quadrature) and JMMD^2 (its O(n^2) data-data term only up to n = 10^4). JKH scores a random
pool of min(n, 5000) candidates, ACKH a pool of min(n, 1000) (|pool| = 300 beyond 10^4: its cost is
O(|pool| n m^2)). KIP methods take Adam steps on the full data up to n = 10^4 and unbiased minibatches of
--batch rows beyond; the seconds per full-data ACKIP/JKIP step show the linear growth in n.
"""

import argparse
import time

import jax
import numpy as np

import bayeskern as bk
from bayeskern import compression as bc
from bayeskern.compression.objectives import ackip_objective, data_blocks, jkip_objective
from _common import machine_line


def truth_amcmd2(cx, cy, kx, ky, lam_c, stats):
    return float(bc.amcmd2_gaussian_truth((cx, cy), kx, ky, lam_c, *bc.data.heteroscedastic_quadrature(stats)))


def step_seconds(objective, cx, cy):
    grad = jax.jit(jax.value_and_grad(objective, argnums=(0, 1)))
    jax.block_until_ready(grad(cx, cy))
    t0 = time.perf_counter()
    for _ in range(3):
        jax.block_until_ready(grad(cx, cy))
    return (time.perf_counter() - t0) / 3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--m", type=int, default=100)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=4096)
    args = parser.parse_args()
    bk.enable_x64()
    m = args.m
    print(machine_line(f"m = {m}, {args.steps} Adam steps"))
    print(f"{'n':>7} {'method':>6} {'seconds':>8} {'AMCMD2':>9} {'JMMD2':>9}  notes")
    for n in args.sizes:
        x, y = (np.asarray(v) for v in bc.data.heteroscedastic(n + 1000, jax.random.key(n)))
        stats = bc.fit_standardiser(x[:n], y[:n], discrete=False)
        xs, ys = (np.asarray(v) for v in stats.transform(x, y))
        xt, yt, xv, yv = xs[:n], ys[:n], xs[n:], ys[n:]
        kx = bk.RBF(bk.median_heuristic(xt, convention="sq", max_points=1000))
        ky = bk.RBF(bk.median_heuristic(yt, convention="sq", max_points=1000))
        lam_c = bc.select_lambda(xt, yt, xv, yv, kx, ky, size=m, key=jax.random.key(1))
        common = dict(kernel_x=kx, kernel_y=ky, standardise=False, progress_bar=False, lam_c=lam_c)
        batch = None if n <= 10_000 else args.batch
        runs = {
            "JKH": (lambda: bc.jkh(xt, yt, m, key=jax.random.key(2), candidates=min(n, 5000), **common),
                    f"pool {min(n, 5000)}"),
            "ACKH": (lambda: bc.ackh(xt, yt, m, key=jax.random.key(2), candidates=min(n, 1000 if n <= 10_000 else 300),
                                     **common), f"pool {min(n, 1000 if n <= 10_000 else 300)}"),
            "JKIP": (lambda: bc.jkip(xt, yt, m, key=jax.random.key(2), num_steps=args.steps, batch_size=batch, **common),
                     "full data" if batch is None else f"batch {batch}"),
            "ACKIP": (lambda: bc.ackip(xt, yt, m, key=jax.random.key(2), num_steps=args.steps, batch_size=batch,
                                       **common), "full data" if batch is None else f"batch {batch}"),
        }
        const = float(bc.jmmd2((xt, yt), (xt[:1], yt[:1]), kx, ky)) - float(
            jkip_objective(xt[:1], yt[:1], data_blocks(xt, yt), kx, ky)) if n <= 10_000 else None
        rand = [np.asarray(jax.random.choice(k, n, (m,), replace=False)) for k in jax.random.split(jax.random.key(3), 10)]
        rand_amcmd = np.mean([truth_amcmd2(xt[i], yt[i], kx, ky, lam_c, stats) for i in rand])
        print(f"{n:>7} {'Random':>6} {'':>8} {rand_amcmd:9.4g} {'':>9}  mean of 10 subsets, lam_C = {lam_c:.3g}")
        for name, (run, note) in runs.items():
            t0 = time.perf_counter()
            res = run()
            seconds = time.perf_counter() - t0
            jm = "" if const is None else f"{const + float(jkip_objective(res.x, res.y, data_blocks(xt, yt), kx, ky)):9.3g}"
            print(f"{n:>7} {name:>6} {seconds:8.1f} {truth_amcmd2(res.x, res.y, kx, ky, lam_c, stats):9.4g} {jm:>9}  {note}",
                  flush=True)
        blocks = data_blocks(xt, yt)
        cx, cy = xt[:m], yt[:m]
        print(f"{n:>7} one full-data gradient step: ACKIP "
              f"{step_seconds(lambda a, b: ackip_objective(a, b, blocks, kx, ky, lam_c), cx, cy):.3f} s, JKIP "
              f"{step_seconds(lambda a, b: jkip_objective(a, b, blocks, kx, ky), cx, cy):.3f} s", flush=True)


if __name__ == "__main__":
    main()
