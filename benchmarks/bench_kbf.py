"""Kernel Bayes filter at scale: exact vs low rank for T from 500 to 10^4 training steps.

Part 1 (scaling, rotation dynamics): for every T, the default filter (``rank="auto"``: exact up to
kbr.EXACT_MAX_T steps, Nystrom landmarks above) on --steps test steps and, up to --exact-max, the exact filter
(``rank=None``) on --exact-steps test steps (an exact step costs O(T^3)), both at fixed hyperparameters (c = 1,
lam = 1e-3, eta = 1e-4). "cold s" is fit + filter on a cleared compilation cache (what a new user's first call
pays, compilation included); "fit s" (KernelBayesFilter.fit: medians, landmarks, features and maps) and
"filter s" (the recursion over the test steps) are after compilation; "update ms" is one streaming step
(KernelBayesFilter.update). "MB" is the size of the fitted filter's arrays (O(T^2) exact, O(T p) low rank).

Part 2 (accuracy, both dynamics at --check-T, --exact-steps test steps): test MSE of the default filter against
the exact one, IW and original KBR; the acceptance bound is 2 %.

Part 3 (protocol): tune_kbf (hyperparameter search) wall time for T up to --exact-max.

Run: python benchmarks/bench_kbf.py [--T 500 1000 2000 5000 10000] [--steps 1000] [--exact-max 2000]
     [--exact-steps 200] [--check-T 2000]
"""

import argparse
import time

import jax

import bayeskern as bk
from bayeskern import kbr
from _common import machine_line, timed

LAM, ETA = 1e-3, 1e-4


def megabytes(kbf) -> float:
    return sum(leaf.nbytes for leaf in jax.tree.leaves(kbf)) / 2**20


def cold(fn):
    """(seconds, result) of the first call, compilation included."""
    jax.clear_caches()
    start = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - start, out


def scaling(Ts, steps, exact_max, exact_steps, seed):
    print(f"{'filter':>8} {'T':>6} {'steps':>6} {'rank':>10} {'cold s':>7} {'fit s':>7} {'filter s':>9} "
          f"{'update ms':>9} {'MB':>8} {'test MSE':>9}", flush=True)
    for T in Ts:
        for name, rank, n_test in (("default", "auto", steps), ("exact", None, exact_steps)):
            if rank is None and T > exact_max:
                continue
            seq = kbr.data.circle_dynamics(T, jax.random.key(seed), T_test=n_test, setting="rotation")

            def fit():
                return kbr.KernelBayesFilter.fit(seq.X, seq.Z, lam=LAM, eta=ETA, rank=rank)

            cold_s, _ = cold(lambda: fit().filter(seq.X_test))
            fit_s, kbf = timed(fit)
            filter_s, means = timed(lambda: kbf.filter(seq.X_test))
            stream_s, _ = timed(lambda: _stream(kbf, seq.X_test[:20]))
            print(f"{name:>8} {T:>6} {n_test:>6} {str(kbf.rank or 'exact'):>10} {cold_s:7.2f} {fit_s:7.2f} "
                  f"{filter_s:9.2f} {50 * stream_s:9.3f} {megabytes(kbf):8.1f} "
                  f"{kbr.filter_mse(means, seq.Z_test):9.4f}", flush=True)


def accuracy(T, steps, seed):
    print(f"\n{'dynamics':>12} {'method':>9} {'T':>6} {'rank':>10} {'exact MSE':>10} {'default MSE':>12} "
          f"{'ratio':>6}", flush=True)
    for setting in ("rotation", "oscillatory"):
        seq = kbr.data.circle_dynamics(T, jax.random.key(seed), T_test=steps, setting=setting)
        for method, lam in (("iw", LAM), ("original", 1e-6)):
            default, exact = (kbr.KernelBayesFilter.fit(seq.X, seq.Z, lam=lam, eta=ETA, method=method, rank=rank)
                              for rank in ("auto", None))
            mse_default, mse_exact = (kbr.filter_mse(kbf.filter(seq.X_test), seq.Z_test) for kbf in (default, exact))
            print(f"{setting:>12} {method:>9} {T:>6} {str(default.rank or 'exact'):>10} {mse_exact:10.4f} "
                  f"{mse_default:12.4f} {mse_default / mse_exact:6.3f}", flush=True)


def tuning(Ts, exact_max, seed):
    print(f"\n{'T':>6} {'tune_kbf s':>11} {'c':>5} {'lam':>7} {'eta':>7}", flush=True)
    for T in (t for t in Ts if t <= exact_max):
        seq = kbr.data.circle_dynamics(T, jax.random.key(seed), setting="rotation")
        start = time.perf_counter()
        tuned = kbr.tune_kbf(seq.X, seq.Z)
        print(f"{T:>6} {time.perf_counter() - start:11.1f} {tuned.c:5.1f} {tuned.lam:7.0e} {tuned.eta:7.0e}",
              flush=True)


def _stream(kbf, X_test):
    """Filter by one update per observation; returns the last mean (so the timing waits for every step)."""
    state, mean = kbf.initial_state(), None
    for x in X_test:
        state, mean = kbf.update(state, x)
    return mean


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--T", type=int, nargs="+", default=[500, 1000, 2000, 5000, 10000])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--exact-max", type=int, default=2000)
    parser.add_argument("--exact-steps", type=int, default=200)
    parser.add_argument("--check-T", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    bk.enable_x64()
    print(machine_line(f"kernel Bayes filter, {args.steps} test steps, lam = {LAM}, eta = {ETA}"), flush=True)
    scaling(args.T, args.steps, args.exact_max, args.exact_steps, args.seed)
    accuracy(args.check_T, args.exact_steps, args.seed)
    tuning(args.T, args.exact_max, args.seed)


if __name__ == "__main__":
    main()
