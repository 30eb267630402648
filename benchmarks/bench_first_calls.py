"""First calls of the main entry points: programs compiled and seconds, each in a fresh process (cold caches).

Called outside ``jit``, every JAX operation compiles a program of its own for each new shape, so what a first call
costs is mostly how many programs it compiles. Each entry point runs in its own process, after its imports and data,
and the script prints the programs compiled during the call and its wall-clock seconds (median of ``--repeats``
processes), then the same for a next call in that process on new data of the same shapes (what a simulation study
pays per data set). Run it on two checkouts to compare them:

    python benchmarks/bench_first_calls.py --repeats 3
"""

import argparse
import statistics
import subprocess
import sys

CALLS = {
    "mmd_test bayes, 2 x 200 points in d = 2": (
        "X, Y = rng.normal(size=(200, 2)), rng.normal(size=(200, 2)) + 0.2",
        "bk.mmd_test(X, Y, 'bayes', key=jax.random.key(0), n_permutations=200)"),
    "hsic_test, 300 pairs": (
        "X = rng.normal(size=(300, 1)); Y = np.sin(3 * X) + rng.normal(size=(300, 1))",
        "bk.hsic_test(X, Y, key=jax.random.key(0), n_permutations=200)"),
    "lengthscale_posterior, 400 points, m = 40": (
        "X = rng.normal(size=(400, 2))",
        "bk.bke.lengthscale_posterior(X, key=jax.random.key(0), m=40)"),
    "fit_jdl and a conditional mean, 500 pairs": (
        "X = rng.normal(size=(500, 1)); Y = X + 0.3 * rng.normal(size=(500, 1))",
        "bk.jdl.fit_jdl(X, Y, bk.RBF(0.5), bk.RBF(0.5), 1e-3).conditional_expectation(X[:20])"),
    "select_lambda, 300 pairs": (
        "X = rng.normal(size=(300, 1)); Y = X + 0.3 * rng.normal(size=(300, 1))",
        "bk.compression.select_lambda(X[:200], Y[:200], X[200:], Y[200:], bk.RBF(0.5), bk.RBF(0.5), size=100, "
        "key=jax.random.key(0))"),
    "bke.log_volume, 200 points, m = 10, D = 3": (
        "X, Z = rng.normal(size=(200, 3)), rng.normal(size=(10, 3))",
        "bk.bke.log_volume(X, Z, bk.RBF(0.7))"),
    "run_nuts on bke_model, 200 points, m = 10": (
        "from bayeskern.inference import run_nuts; from bayeskern.models import bke_model\n"
        "X, Z = bk.bke.hold_out_inducing(rng.normal(size=(200, 2)), jax.random.key(0), m=10)",
        "run_nuts(bke_model, X, Z, key=jax.random.key(1), num_chains=2, num_warmup=300, num_samples=300, "
        "progress_bar=False, rhat_max=np.inf, min_ess=1).samples"),
    "run_nuts on kbf_hyper_model, 160 steps": (
        "from bayeskern.inference import run_nuts; from bayeskern.models import kbf_hyper_model, split_for_validation\n"
        "z = np.sin(np.arange(160) / 4) + 0.1 * rng.normal(size=160)\n"
        "split = split_for_validation(z[1:, None], np.c_[z[1:], z[:-1]], n_val=40, burn_in=5, num_landmarks=(8, 8))",
        "run_nuts(kbf_hyper_model, split, key=jax.random.key(1), num_chains=2, num_warmup=100, num_samples=100, "
        "progress_bar=False, rhat_max=np.inf, min_ess=1).samples"),
}

_CHILD = """
import time, numpy as np, jax, bayeskern as bk
bk.enable_x64()
count = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **kw: count.append(1) if event == "/jax/core/compile/backend_compile_duration" else None)
for seed in (0, 1):   # the first call, then a next one on new data of the same shapes
    rng = np.random.default_rng(seed)
{setup}
    jax.block_until_ready(jax.numpy.zeros(1))
    count.clear()
    began = time.perf_counter()
    out = {call}
    jax.block_until_ready(out)
    print(len(count), time.perf_counter() - began)
"""


def first_call(setup: str, call: str) -> tuple[int, float, int, float]:
    """(programs compiled, seconds) of one first call in a fresh process, then of a next call on new data."""
    setup = "\n".join("    " + line for line in setup.splitlines())
    out = subprocess.run([sys.executable, "-c", _CHILD.format(setup=setup, call=call)], capture_output=True,
                         text=True, check=True)
    first, seconds, again, next_seconds = out.stdout.split()
    return int(first), float(seconds), int(again), float(next_seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per entry point")
    args = parser.parse_args()
    print(f"{'entry point':45s} {'programs':>9s} {'seconds':>8s}   next call: {'programs':>9s} {'seconds':>8s}")
    for name, (setup, call) in CALLS.items():
        runs = [first_call(setup, call) for _ in range(args.repeats)]
        print(f"{name:45s} {runs[0][0]:9d} {statistics.median(r[1] for r in runs):8.2f}   "
              f"{'':11s}{runs[0][2]:9d} {statistics.median(r[3] for r in runs):8.2f}")


if __name__ == "__main__":
    main()
