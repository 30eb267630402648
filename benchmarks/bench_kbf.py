"""Kernel Bayes filter timings (issue 4, acceptance 5): fit + 200-step filtering for T in {500, 2000}.

"fit" is the precomputation on T training pairs at fixed hyperparameters (KernelBayesFilter.fit: medians,
Gram matrices, the KuLSIF map and the transition solve); "filter" runs the filtering recursion over a 200-step test
sequence; "update ms" is one streaming step (KernelBayesFilter.update, one observation at a time, as live data
arrive), averaged over the test sequence. Times are after compilation (second call). The protocol's hyperparameter
search (tune_kbf) is timed separately, since it is the cost a user pays once per training sequence.

Run: python benchmarks/bench_kbf.py [--T 500 2000] [--steps 200]
"""

import argparse
import time

import jax

import bayeskern as bk
from bayeskern import kbr
from _common import machine_line, timed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--T", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    bk.enable_x64()
    print(machine_line(f"rotation dynamics, {args.steps} test steps"), flush=True)
    print(f"{'method':>8} {'T':>6} {'fit s':>8} {'filter s':>9} {'total s':>8} {'update ms':>9} {'test MSE':>9} "
          f"{'tune s':>7}")
    for T in args.T:
        seq = kbr.data.circle_dynamics(T, jax.random.key(args.seed), T_test=args.steps, setting="rotation")
        for method, lam in (("iw", 1e-3), ("original", 1e-6)):
            fit_s, kbf = timed(lambda: kbr.KernelBayesFilter.fit(seq.X, seq.Z, lam=lam, eta=1e-4, method=method))
            filter_s, means = timed(lambda: kbf.filter(seq.X_test))
            stream_s, _ = timed(lambda: _stream(kbf, seq.X_test))
            start = time.perf_counter()
            tuned = kbr.tune_kbf(seq.X, seq.Z, method=method)
            tune_s = time.perf_counter() - start
            mse = kbr.filter_mse(tuned.filter.filter(seq.X_test), seq.Z_test)
            print(f"{method:>8} {T:>6} {fit_s:8.3f} {filter_s:9.3f} {fit_s + filter_s:8.3f} "
                  f"{1e3 * stream_s / args.steps:9.3f} {mse:9.4f} {tune_s:7.1f}", flush=True)


def _stream(kbf, X_test):
    """Filter by one update per observation; returns the last mean (so the timing waits for every step)."""
    state, mean = kbf.initial_state(), None
    for x in X_test:
        state, mean = kbf.update(state, x)
    return mean


if __name__ == "__main__":
    main()
