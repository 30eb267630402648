"""The anchors' side of bench_test_power.py; runs in the anchors' own virtual environment, never in bayeskern's.

Usage: python _power_side.py DATA.npz OUT.json. DATA holds X_0, Y_0, X_1, Y_1, ... and ``kind`` ("mmd" or "hsic").
Two-sample: MMDAgg (Schrab et al. 2023) and MMD-FUSE (Biggs, Schrab & Gretton 2023) with their defaults, called as
their authors' experiments call them (MMDAgg with its default seed, MMD-FUSE with a fresh key per repetition).
Independence: HSICAggInc (Schrab, Kim, Guedj & Gretton 2022, ``agginc("hsic", X, Y)``) with its defaults. Each test
runs once on the first data set to compile; the seconds are those of the calls after it.
"""

import json
import sys
import time

import jax
import numpy as np


def _tests(kind):
    if kind == "mmd":
        from mmdagg.jax import mmdagg
        from mmdfuse import mmdfuse

        return {"MMDAgg": lambda X, Y, key: mmdagg(X, Y), "MMD-FUSE": lambda X, Y, key: mmdfuse(X, Y, key)}
    from agginc.jax import agginc

    return {"HSICAggInc": lambda X, Y, key: agginc("hsic", X, Y)}


def main(data_path, out_path):
    data = np.load(data_path)
    kind = str(data["kind"])
    reps = sum(1 for k in data.files if k.startswith("X_"))
    out = {}
    for name, test in _tests(kind).items():
        key = jax.random.PRNGKey(42)
        int(test(jax.numpy.asarray(data["X_0"]), jax.numpy.asarray(data["Y_0"]), key))  # compile
        rejections, seconds = [], []
        for r in range(reps):
            X, Y = jax.numpy.asarray(data[f"X_{r}"]), jax.numpy.asarray(data[f"Y_{r}"])
            key, sub = jax.random.split(key)
            start = time.perf_counter()
            rejections.append(int(test(X, Y, sub)))
            seconds.append(time.perf_counter() - start)
        out[name] = dict(rejections=rejections, seconds=float(np.mean(seconds)))
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
