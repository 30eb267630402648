"""The KeOps side of bench_mmd_keops.py; runs in the anchors' own virtual environment, never in bayeskern's.

Usage: python _keops_side.py DATA.npz OUT.json. The unbiased MMD^2 with an RBF kernel as a KeOps user writes it: three
LazyTensor reductions in float64, the diagonal k(x, x) = 1 removed from the within-sample sums. With an HSIC sample in
DATA (U, V), also the unbiased HSIC (Song et al. 2012) from three reductions: the row sums of K and of L and the sum
of K * L.
"""

import json
import sys
import time

import numpy as np
from pykeops.numpy import LazyTensor


def _rbf(A, B, lengthscale):
    a, b = LazyTensor(A[:, None, :] / lengthscale), LazyTensor(B[None, :, :] / lengthscale)
    return (-((a - b) ** 2).sum(-1) / 2).exp()


def kernel_sum(A, B, lengthscale):
    return float(_rbf(A, B, lengthscale).sum(1).sum())


def hsic_unbiased(U, V, lengthscale):
    n = len(U)
    K, L = _rbf(U, U, lengthscale), _rbf(V, V, lengthscale)
    rK, rL = K.sum(1)[:, 0] - 1.0, L.sum(1)[:, 0] - 1.0   # rows of K and L with a zero diagonal
    trace = float((K * L).sum(1).sum()) - n
    return (trace + rK.sum() * rL.sum() / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * rK @ rL) / (n * (n - 3))


def mmd2_unbiased(X, Y, lengthscale):
    n, m = len(X), len(Y)
    return ((kernel_sum(X, X, lengthscale) - n) / (n * (n - 1)) + (kernel_sum(Y, Y, lengthscale) - m) / (m * (m - 1))
            - 2.0 * kernel_sum(X, Y, lengthscale) / (n * m))


def main():
    data = np.load(sys.argv[1])
    X, Y, lengthscale = data["X"], data["Y"], float(data["lengthscale"])
    mmd2_unbiased(X[:100], Y[:100], lengthscale)   # compiles the formula once (cached on disk by KeOps)
    start = time.perf_counter()
    value = mmd2_unbiased(X, Y, lengthscale)
    out = {"value": value, "seconds": time.perf_counter() - start}
    if "U" in data:
        U, V = data["U"], data["V"]
        hsic_unbiased(U[:100], V[:100], lengthscale)
        start = time.perf_counter()
        out["hsic"] = hsic_unbiased(U, V, lengthscale)
        out["hsic_seconds"] = time.perf_counter() - start
    json.dump(out, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
