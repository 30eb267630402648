"""Scaling from one to two processes on CPU: MMD^2, the BKE pseudolikelihood with its gradient, and a JDL fit.

    python benchmarks/bench_distributed.py [--n-mmd 20000] [--n-bke 1000000] [--n-jdl 200000]

Runs three configurations on this machine, one after another: one process on one core, one process on two cores
(JAX's own threads), and two processes on one core each (``bayeskern.distributed`` over localhost, Gloo), each
holding half of the rows. Times are of the second call (the first compiles); every configuration checks its
results against the first's.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

WORKER = """
import json, os, sys, time
pid, count, port, cores, sizes = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
os.sched_setaffinity(0, {int(c) for c in cores.split(",")})
import jax
import numpy as np
import bayeskern as bk
from bayeskern import distributed
if count > 1:
    distributed.initialize(f"127.0.0.1:{port}", count, pid)
bk.enable_x64()
from bayeskern.bke import log_pseudolikelihood
from bayeskern.jdl import fit_jdl
from bayeskern.sharding import shard_rows

def mine(A):
    n = A.shape[0]
    return shard_rows(A[pid * n // count:(pid + 1) * n // count])

def timed(fn):
    jax.block_until_ready(fn())
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - t0, out

rng = np.random.default_rng(0)
out = {}
X, Y = rng.standard_normal((sizes["mmd"], 2)), rng.standard_normal((sizes["mmd"], 2)) + 0.1
Xs, Ys = mine(X), mine(Y)
del X, Y
out["mmd"] = timed(lambda: bk.mmd2_unbiased(Xs, Ys, bk.RBF(1.0), block_size=2048))
X = rng.standard_normal((sizes["bke"], 2))
Z, Xs = X[:50], mine(X[50:])
del X
f = jax.jit(jax.value_and_grad(lambda ell, A: log_pseudolikelihood(A, Z, bk.RBF(ell), 1.0)))
out["bke"] = timed(lambda: f(0.7, Xs))
X = rng.uniform(-2, 2, (sizes["jdl"], 3))
Y = np.sin(X.sum(1, keepdims=True)) + 0.1 * rng.standard_normal((sizes["jdl"], 1))
Xs, Ys = mine(X), mine(Y)
del X, Y
q = np.linspace(-1, 1, 5)[:, None] * np.ones(3)
out["jdl"] = timed(lambda: fit_jdl(Xs, Ys, bk.RBF(1.0), bk.RBF(0.5), 1e-5, constraint="normalised",
                                   tol=1e-4).conditional_expectation(q).mean)
if pid == 0:
    print(json.dumps({k: (t, np.asarray(v[0] if isinstance(v, tuple) else v).ravel().tolist())
                      for k, (t, v) in out.items()}))
"""

CONFIGS = (("1 process, 1 core", 1, ["0"]), ("1 process, 2 cores", 1, ["0,1"]), ("2 processes, 1 core each", 2, ["0", "1"]))


def run(count, cores, sizes):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(i), str(count), str(port), cores[i],
                               json.dumps(sizes)], stdout=subprocess.PIPE, text=True) for i in range(count)]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"a worker failed ({[p.returncode for p in procs]})")
    return json.loads(next(line for line in outs[0].splitlines() if line.startswith("{")))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-mmd", type=int, default=20_000, help="points per sample of the MMD")
    parser.add_argument("--n-bke", type=int, default=1_000_000, help="likelihood points of the BKE objective")
    parser.add_argument("--n-jdl", type=int, default=200_000, help="pairs of the JDL fit (d = 3)")
    args = parser.parse_args()
    sizes = {"mmd": args.n_mmd, "bke": args.n_bke, "jdl": args.n_jdl}
    print(f"# {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}, sizes {sizes}")
    print(f"{'configuration':28s} {'MMD^2 s':>9s} {'BKE value+grad s':>17s} {'JDL fit + E[Y|x] s':>19s}  max rel. diff")
    first = None
    for name, count, cores in CONFIGS:
        result = run(count, cores, sizes)
        first = first or result
        diff = max(max(abs(a - b) / max(abs(b), 1e-300) for a, b in zip(result[k][1], first[k][1])) for k in result)
        print(f"{name:28s} {result['mmd'][0]:9.2f} {result['bke'][0]:17.2f} {result['jdl'][0]:19.2f}  {diff:.1e}")


if __name__ == "__main__":
    main()
