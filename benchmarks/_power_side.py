"""The anchors' side of bench_test_power.py and bench_test_scale.py; runs in the anchors' own virtual environment, never
in bayeskern's.

Usage: python _power_side.py DATA.npz OUT.json. DATA holds X_0, Y_0, X_1, Y_1, ..., ``kind`` ("mmd" or "hsic") and
optionally ``tests`` (names; default: MMDAgg and MMD-FUSE for "mmd", HSICAggInc and HSICAgg for "hsic").
Two-sample: MMDAgg (Schrab et al. 2023) and MMD-FUSE (Biggs, Schrab & Gretton 2023) with their defaults, called as
their authors' experiments call them (MMDAgg with its default seed, MMD-FUSE with a fresh key per repetition), and
MMDAggInc (Schrab, Kim, Guedj & Gretton 2022, ``agginc("mmd", X, Y)``, R = 200). Independence: HSICAggInc
(``agginc("hsic", X, Y)``, R = 200) and HSICAgg, the same test with R = N - 1 superdiagonals, i.e. the complete
U-statistic. agginc compiles with its seed as a static argument, so the default seed is kept for every repetition.
Each test runs once on the first data set to compile (its seconds are reported as ``first_seconds``); the seconds
are those of the calls after it, the first data set included.
"""

import json
import sys
import time

import jax
import numpy as np

DEFAULT_TESTS = {"mmd": ("MMDAgg", "MMD-FUSE"), "hsic": ("HSICAggInc", "HSICAgg")}


def _tests(names):
    tests = {}
    for name in names:
        if name == "MMDAgg":
            from mmdagg.jax import mmdagg

            tests[name] = lambda X, Y, key: mmdagg(X, Y)
        elif name == "MMD-FUSE":
            from mmdfuse import mmdfuse

            tests[name] = lambda X, Y, key: mmdfuse(X, Y, key)
        else:
            from agginc.jax import agginc

            kind = "mmd" if name == "MMDAggInc" else "hsic"
            full = name == "HSICAgg"
            tests[name] = lambda X, Y, key, kind=kind, full=full: agginc(kind, X, Y, R=X.shape[0] - 1) if full \
                else agginc(kind, X, Y)
    return tests


def main(data_path, out_path):
    data = np.load(data_path)
    kind = str(data["kind"])
    names = [str(t) for t in data["tests"]] if "tests" in data.files else DEFAULT_TESTS[kind]
    reps = sum(1 for k in data.files if k.startswith("X_"))
    out = {}
    for name, test in _tests(names).items():
        key = jax.random.PRNGKey(42)
        start = time.perf_counter()
        int(test(jax.numpy.asarray(data["X_0"]), jax.numpy.asarray(data["Y_0"]), key))  # compile
        first = time.perf_counter() - start
        rejections, seconds = [], []
        for r in range(reps):
            X, Y = jax.numpy.asarray(data[f"X_{r}"]), jax.numpy.asarray(data[f"Y_{r}"])
            key, sub = jax.random.split(key)
            start = time.perf_counter()
            rejections.append(int(test(X, Y, sub)))
            seconds.append(time.perf_counter() - start)
        out[name] = dict(rejections=rejections, seconds=float(np.mean(seconds)), first_seconds=first)
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
