"""Compression quality at benchmark scale.

Run: python benchmarks/bench_compression_quality.py [--seeds 0 1 2 3 4] [--ms 50 120] [--pool 1000]
                                                    [--skip-digits]

A5: the heteroscedastic stand-in at n_total = 5000 (4000 / 500 / 500): the median RMSE of the 8 test functions
of compression.data at the largest m, per method, and how many of them ACKIP wins (target >= 6 of 8). Herding scores a
random pool of --pool candidates (ACKH costs O(|pool| n m^2)).
A6: classification at m ~ 3% of n_train: the imbalanced stand-in (4000 training points, m = 120) and digits
(scikit-learn's load_digits, 1437 training points, m = 45; needs the `examples` extra): accuracy of ACKIP
against the full-data KCME (targets: >= full - 0.02 and >= full - 0.03) and above Random and JKIP.
"""

import argparse
import sys
from pathlib import Path

import jax
import numpy as np

import bayeskern as bk
from bayeskern import compression as bc
from _common import machine_line

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import compression_heteroscedastic as het  # noqa: E402
import compression_imbalanced as imb  # noqa: E402


def a5(seeds, ms, pool):
    results = [het.run_seed(s, ms, n_train=4000, n_val=500, n_test=500, pool=pool, plug_in=False) for s in seeds]
    m = max(ms)
    print(f"\nA5 heteroscedastic, n_train = 4000, {len(seeds)} seeds, herding pool {pool}")
    print(f"{'m':>4} " + " ".join(f"{k:>9}" for k in het.METHODS) + "   (median truth AMCMD^2)")
    for mm in ms:
        print(f"{mm:>4} " + " ".join(f"{np.median([r[k][mm]['truth'] for r in results]):9.4g}" for k in het.METHODS))
    wins = 0
    print(f"median RMSE at m = {m}")
    for f in bc.data.TEST_FUNCTIONS:
        row = {k: np.median([r[k][m]["rmse"][f] for r in results]) for k in het.METHODS}
        best = min(row, key=row.get)
        wins += best == "ACKIP"
        print(f"{f:>10} " + " ".join(f"{row[k]:9.4f}" for k in het.METHODS) + f"   best: {best}")
    print(f"ACKIP lowest on {wins} of 8 test functions (target >= 6)")


def a6(seeds, skip_digits):
    runs = {"imbalanced (m = 120)": [imb.run_seed(s, 120, n_train=4000, n_val=500, n_test=2000)[0] for s in seeds]}
    if not skip_digits:
        x, y = bc.data.sklearn_dataset("digits")
        digits = []
        for s in seeds:
            perm = np.asarray(jax.random.permutation(jax.random.key(s), len(x)))
            digits.append(imb.compare(x[perm], y[perm], 1437, 180, 45, jax.random.key(s))[0])
        runs["digits (m = 45)"] = digits
    for name, rs in runs.items():
        print(f"\nA6 {name}, {len(seeds)} seeds (median)\n{'method':>10} {'accuracy':>9} {'macro-F1':>9} {'prob RMSE':>9}")
        for k in ("Random", "JKIP", "ACKIP", "full data"):
            print(f"{k:>10} " + " ".join(f"{v:9.3f}" for v in np.median([r[k] for r in rs], axis=0)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--ms", type=int, nargs="+", default=[10, 25, 50, 100, 120, 200])
    parser.add_argument("--pool", type=int, default=1000)
    parser.add_argument("--skip-a5", action="store_true")
    parser.add_argument("--skip-digits", action="store_true")
    args = parser.parse_args()
    bk.enable_x64()
    print(machine_line("compression quality, A5-A6"))
    if not args.skip_a5:
        a5(tuple(args.seeds), tuple(args.ms), args.pool)
    a6(tuple(args.seeds), args.skip_digits)


if __name__ == "__main__":
    main()
