"""Timings of the BKE pseudolikelihood and of NUTS on the normal-vs-Laplace problem of Flaxman et al. (2016, Section 5.2) (float64).

Run: python benchmarks/bench_bke.py [--sizes 10000 100000 1000000] [--inducing 10 50 200] [--dim 1]
     [--nuts] [--backend numpyro|blackjax] [--curve]
Prints one line per measurement; copy them to benchmarks/RESULTS.md with the machine.
Likelihood + gradient times are the second call on the same shapes (after compilation). ``--curve`` times
`bke.lengthscale_posterior` (the 81-point pseudolikelihood curve behind the aggregated tests) instead: its first
call, compilation included, and a second call on new data of the same shapes.
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import bayeskern as bk
from bayeskern.bke import SEPseudolikelihood, hold_out_inducing
from _common import machine_line, timed


def likelihood_and_gradient(n, m, dim, rng):
    X = rng.standard_normal((n, dim))
    Z = rng.standard_normal((m, dim)) * 1.3
    objective = SEPseudolikelihood.build(X, Z)
    value_and_grad = jax.jit(jax.value_and_grad(lambda rho, f: f(jnp.exp(rho), 1.0)))
    return timed(lambda: value_and_grad(0.1, objective))[0]


def curve_timing(n, m, dim, rng):
    """(first call, second call) seconds of the lengthscale posterior of two (n, dim) normal samples."""
    seconds = []
    for seed in range(2):
        X = rng.standard_normal((n, dim))
        t0 = time.perf_counter()
        bk.bke.lengthscale_posterior(X, key=jax.random.key(seed), m=m)
        seconds.append(time.perf_counter() - t0)
    return seconds


def nuts_timing(backend, chains=4, warmup=1000, samples=1000):
    from bayeskern.inference import run_nuts
    from bayeskern.models import bke_model

    XP, XQ = bk.datasets.normal_vs_laplace(400, seed=0)
    X, Z = hold_out_inducing(np.vstack([XP, XQ]), jax.random.key(1), 10)
    run = run_nuts(bke_model, X, Z, key=jax.random.key(2), backend=backend, num_chains=chains, num_warmup=warmup,
                   num_samples=samples, progress_bar=False)
    ess = run.diagnostics.min_ess_bulk
    return run.wall_time, ess, run.diagnostics


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--inducing", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--dim", type=int, default=1)
    parser.add_argument("--nuts", action="store_true", help="also time NUTS on the normal-vs-Laplace problem")
    parser.add_argument("--backend", choices=("numpyro", "blackjax"), nargs="+", default=["numpyro", "blackjax"])
    parser.add_argument("--curve", action="store_true", help="time the lengthscale posterior's curve instead")
    args = parser.parse_args()
    bk.enable_x64()
    print(machine_line(f"D = {args.dim}"))
    rng = np.random.default_rng(0)
    for m in args.inducing:
        for n in args.sizes:
            if args.curve:
                first, second = curve_timing(n, m, args.dim, rng)
                print(f"lengthscale curve  n = {n:>8}  m = {m:>4}: first call {first:8.2f} s, "
                      f"second {second:8.2f} s", flush=True)
            else:
                seconds = likelihood_and_gradient(n, m, args.dim, rng)
                print(f"likelihood + gradient  n = {n:>8}  m = {m:>4}: {seconds:8.3f} s", flush=True)
    if args.nuts:
        for backend in args.backend:
            wall, ess, d = nuts_timing(backend)
            print(f"NUTS {backend:>8} (n = 800 pooled, m = 10, 4 chains x 1000 + 1000): wall {wall:.1f} s "
                  f"(incl. compilation), min bulk ESS {ess:.0f}, {ess / wall:.0f} ESS/s, "
                  f"R-hat {d.max_rhat:.4f}, divergences {d.divergences}", flush=True)


if __name__ == "__main__":
    main()
