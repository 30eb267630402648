"""Kernel sums at the machine's limit: mmd2_unbiased and hsic_unbiased against KeOps, side by side, and against the exp
throughput.

The unbiased MMD^2 of two samples of n points in d = 2, RBF kernel, float64. bayeskern evaluates the within-sample sums
over the blocks on and above the diagonal only (2 n^2 kernel evaluations instead of 3 n^2), each block's kernel
evaluation fused with its sum. KeOps (pykeops LazyTensor reductions, what a KeOps user writes: three full sums) runs in
its own virtual environment (created by this script on first use: python -m venv + pip install pykeops). The machine's
peak is measured as XLA's throughput of exp on a long float64 array (the floor of any RBF evaluation). HSIC: n paired
points, x in d = 2 and y = |x_1| + noise in d = 1, RBF kernels; bayeskern computes the row sums of K and of L
(2 n^2 evaluations) and sum(K * L) over the blocks on and above the diagonal (n (n + b) evaluations, b = 1024); KeOps
runs three full reductions (row sums of K, of L and the sum of K * L: 4 n^2 evaluations).

Run:  python benchmarks/bench_mmd_keops.py [--sizes 30000 100000] [--keops-size 30000] [--anchors benchmarks/.anchors]
Timings are the second call (compilation excluded). Evaluations per second count those done (n^2 for the cross sum,
n (n + b) / 2 per within-sample sum with blocks of b); "nominal" counts the 3 n^2 of the plain formula.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def exp_peak():
    """exp evaluations per second on a contiguous float64 array of 2^24 entries (all cores, as XLA schedules it)."""
    import jax
    import jax.numpy as jnp

    a = jnp.linspace(-30.0, 0.0, 1 << 24)
    f = jax.jit(lambda a: jnp.sum(jnp.exp(a)))
    f(a).block_until_ready()
    start = time.perf_counter()
    for _ in range(5):
        f(a).block_until_ready()
    return 5 * a.size / (time.perf_counter() - start)


def timed_mmd(X, Y, lengthscale):
    import bayeskern as bk

    kernel = bk.RBF(lengthscale)
    bk.mmd2_unbiased(X, Y, kernel).block_until_ready()
    start = time.perf_counter()
    value = float(bk.mmd2_unbiased(X, Y, kernel))
    return value, time.perf_counter() - start


def timed_hsic(U, V, lengthscale):
    import bayeskern as bk

    kernel = bk.RBF(lengthscale)
    bk.hsic_unbiased(U, V, kernel, kernel).block_until_ready()
    start = time.perf_counter()
    value = float(bk.hsic_unbiased(U, V, kernel, kernel))
    return value, time.perf_counter() - start


def anchors_python(folder: Path) -> Path:
    python = folder / "bin" / "python"
    if not python.exists() or subprocess.run([str(python), "-c", "import pykeops"], capture_output=True).returncode:
        print(f"# installing pykeops into the anchors' virtual environment {folder}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "pykeops", "numpy"], check=True)
    return python


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[30_000, 100_000])
    parser.add_argument("--keops-size", type=int, default=30_000)
    parser.add_argument("--anchors", type=Path, default=HERE / ".anchors", help="virtual environment for KeOps")
    args = parser.parse_args()
    import bayeskern as bk
    from _common import machine_line

    bk.enable_x64()
    print(machine_line("RBF, d = 2, float64, block size 1024"), flush=True)
    peak = exp_peak()
    print(f"exp throughput (XLA, float64, 2^24 entries): {peak:.3g} /s", flush=True)
    rng = np.random.default_rng(0)
    lengthscale = 1.0
    results = {}
    for n in sorted(set(args.sizes) | {args.keops_size}):
        X, Y = rng.standard_normal((n, 2)), rng.standard_normal((n, 2)) + 0.1
        value, seconds = timed_mmd(X, Y, lengthscale)
        done = n * n + n * (n + min(n, 1024))   # cross sum + two triangles of blocks (diagonal blocks whole)
        results[n] = (X, Y, value, seconds)
        print(f"bayeskern mmd2_unbiased n = {n:>7}: {seconds:7.2f} s, {done / seconds:.3g} evaluations/s "
              f"({done / seconds / peak:.0%} of the exp throughput), {3 * n * n / seconds:.3g} nominal/s", flush=True)
    n = args.keops_size
    U = rng.standard_normal((n, 2))
    V = np.abs(U[:, :1]) + 0.5 * rng.standard_normal((n, 1))
    hsic, hsic_seconds = timed_hsic(U, V, lengthscale)
    done = 2 * n * n + n * (n + min(n, 1024))
    print(f"bayeskern hsic_unbiased n = {n:>7}: {hsic_seconds:7.2f} s, {done / hsic_seconds:.3g} evaluations/s "
          f"({done / hsic_seconds / peak:.0%} of the exp throughput), {4 * n * n / hsic_seconds:.3g} nominal/s",
          flush=True)
    X, Y, value, seconds = results[args.keops_size]
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(Path(tmp) / "data.npz", X=X, Y=Y, U=U, V=V, lengthscale=lengthscale)
        subprocess.run([str(anchors_python(args.anchors)), str(HERE / "_keops_side.py"), str(Path(tmp) / "data.npz"),
                        str(Path(tmp) / "out.json")], check=True, capture_output=True)
        keops = json.load(open(Path(tmp) / "out.json"))
    print(f"KeOps     mmd2_unbiased n = {n:>7}: {keops['seconds']:7.2f} s, {3 * n * n / keops['seconds']:.3g} "
          f"evaluations/s; bayeskern is {keops['seconds'] / seconds:.1f}x faster; values agree to "
          f"{abs(keops['value'] - value) / abs(value):.1e} relative")
    print(f"KeOps     hsic_unbiased n = {n:>7}: {keops['hsic_seconds']:7.2f} s, {4 * n * n / keops['hsic_seconds']:.3g} "
          f"evaluations/s; bayeskern is {keops['hsic_seconds'] / hsic_seconds:.1f}x faster; values agree to "
          f"{abs(keops['hsic'] - hsic) / abs(hsic):.1e} relative")


if __name__ == "__main__":
    main()
