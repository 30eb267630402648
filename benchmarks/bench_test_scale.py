"""Kernel tests on the data users bring: hundreds of dimensions and 10^3-10^6 points, side by side with the anchors.

bayeskern's default tests (``mmd_test(X, Y, "bayes")``, ``hsic_test(x, y, "bayes", "bayes")`` and the median
heuristic, ``method="auto"``: the exact kernel with the cyclic-shift null up to 2000 pooled points, random features
above) against the authors' MMDAgg and MMD-FUSE (quadratic time), MMDAggInc and HSICAggInc (agginc, R = 200, their
defaults) and HSICAgg (agginc with R = N - 1, the complete U-statistic), run in their own virtual environment
(``benchmarks/.anchors/venv``, see bench_test_power.py --setup). Every test sees the same data sets, alpha = 0.05.
Rejection rates come with their Monte-Carlo standard error; seconds are per test after compilation (the anchors'
and ours), and "first" is the first call, compilation included.

Problems (the samplers are written here from their definitions): scikit-learn's 8x8 digits (d = 64, real data, rows
drawn with replacement, so they repeat) with the share of digits 0-4 raised in the second sample; sparse mean and
scale changes in d = 100 to 1000; perturbed uniform densities (Schrab et al. 2023) at n = 2000 and 10^5 (smaller
perturbations at the larger n); a
sinusoidal dependence (Sejdinovic et al. 2013) at n = 500 and 10^5; and a null of each kind.

Run:  python benchmarks/bench_test_scale.py --cells NAME ... [--reps R] [--out results.json] [--redo-ours]
      python benchmarks/bench_test_scale.py --cost [--sizes ...] [--dims ...]   # seconds per test against n and d
      python benchmarks/bench_test_scale.py --budget 10 --cost-json cost.json   # power at 10 s per test
      python benchmarks/bench_test_scale.py --million [--processes 2]          # n = 10^6: time, decision
      python benchmarks/bench_test_scale.py --design --reps 100                # random features: R and the crossover
      python benchmarks/bench_test_scale.py --design --wide --reps 40          # only the high-dimensional problems
      python benchmarks/bench_test_scale.py --report results.json [--figure scale.png]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_test_power import (ANCHORS, _results_json, mixture, perturbed_uniform, run_anchors,  # noqa: E402
                              setup_anchors, sinusoid)


# --- samplers ----------------------------------------------------------------------------------------------------


def digits(rng, n, share):
    """Two samples of n rows of scikit-learn's 8x8 digits (d = 64, pixel values 0-16), drawn with replacement: P with
    the classes in their own proportions, Q with digits 0-4 making up ``share`` of the draws (0.5 of the data set;
    share 0.5 is a null)."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images, labels = data.data.astype(float), data.target
    low = labels < 5
    weights = np.where(low, share / low.mean(), (1 - share) / (1 - low.mean()))
    return (images[rng.integers(0, len(images), n)],
            images[rng.choice(len(images), n, p=weights / weights.sum())])


def sparse_shift(rng, n, d, coordinates, mean=0.0, ratio=1.0):
    """X ~ N(0, I_d); Y the same with its first ``coordinates`` coordinates shifted by ``mean`` and scaled by ``ratio``."""
    change = np.arange(d) < coordinates
    return rng.standard_normal((n, d)), rng.standard_normal((n, d)) * np.where(change, ratio, 1.0) + change * mean


CELLS = {   # name -> (kind, sampler(rng) -> (X, Y), the null is true, anchors)
    "digits, share of 0-4 0.65 (d=64, n=300)": ("mmd", lambda r: digits(r, 300, 0.65), False, ("MMDAgg", "MMD-FUSE")),
    "sparse mean shift d=100 (10 coords by 0.08, n=500)": (
        "mmd", lambda r: sparse_shift(r, 500, 100, 10, mean=0.08), False, ("MMDAgg", "MMD-FUSE")),
    "sparse scale change d=100 (10 coords x1.25, n=500)": (
        "mmd", lambda r: sparse_shift(r, 500, 100, 10, ratio=1.25), False, ("MMDAgg", "MMD-FUSE")),
    "sparse scale change d=768 (50 coords x1.15, n=500)": (
        "mmd", lambda r: sparse_shift(r, 500, 768, 50, ratio=1.15), False, ("MMDAgg", "MMD-FUSE")),
    "sparse mean shift d=1000 (20 coords by 0.12, n=500)": (
        "mmd", lambda r: sparse_shift(r, 500, 1000, 20, mean=0.12), False, ("MMDAgg", "MMD-FUSE")),
    "null digits (d=64, n=300)": ("mmd", lambda r: digits(r, 300, 0.5), True, ("MMDAgg", "MMD-FUSE")),
    "null N(0, I_768) (n=500)": ("mmd", lambda r: sparse_shift(r, 500, 768, 0), True, ()),
    "perturbed d=1 (p=2, scale 0.15, n=2000)": (
        "mmd", lambda r: perturbed_uniform(r, 2000, 1, 2, 0.15), False, ("MMDAgg", "MMD-FUSE", "MMDAggInc")),
    "null uniform d=1 (n=2000)": (
        "mmd", lambda r: perturbed_uniform(r, 2000, 1, 2, 0.0), True, ()),
    "perturbed d=1 (p=2, scale 0.08, n=10^4)": (
        "mmd", lambda r: perturbed_uniform(r, 10_000, 1, 2, 0.08), False, ("MMDAggInc",)),
    # agginc holds O(N R B) numbers: at n = 10^5 it asks for 81 GB (out of memory here), so the anchors stop at 10^4
    "perturbed d=1 (p=2, scale 0.03, n=10^5)": (
        "mmd", lambda r: perturbed_uniform(r, 100_000, 1, 2, 0.03), False, ()),
    "null uniform d=1 (n=10^5)": ("mmd", lambda r: perturbed_uniform(r, 100_000, 1, 2, 0.0), True, ()),
    "sinusoid l=4 (n=500)": ("hsic", lambda r: sinusoid(r, 500, 4.0), False, ("HSICAggInc", "HSICAgg")),
    "sinusoid l=4, amplitude 0.15 (n=10^4)": (
        "hsic", lambda r: sinusoid(r, 10_000, 4.0, 0.15), False, ("HSICAggInc",)),
    "sinusoid l=4, amplitude 0.05 (n=10^5)": ("hsic", lambda r: sinusoid(r, 100_000, 4.0, 0.05), False, ()),
    "null sinusoid l=0 (n=10^5)": ("hsic", lambda r: sinusoid(r, 100_000, 0.0), True, ()),
}


# --- bayeskern's side --------------------------------------------------------------------------------------------


def _ours(kind):
    import bayeskern as bk

    if kind == "mmd":
        return {"bayes": lambda X, Y, key: bk.mmd_test(X, Y, "bayes", key=key, progress_bar=False),
                "median": lambda X, Y, key: bk.mmd_test(X, Y, "median", key=key, progress_bar=False)}
    return {"bayes": lambda X, Y, key: bk.hsic_test(X, Y, "bayes", "bayes", key=key, progress_bar=False),
            "median": lambda X, Y, key: bk.hsic_test(X, Y, key=key, progress_bar=False)}


def run_ours(kind, data, seed):
    """Rejections, seconds per test after the first call, the first call's seconds and the method used."""
    import jax

    out = {}
    for name, test in _ours(kind).items():
        start = time.perf_counter()
        result = test(*data[0], jax.random.key(seed + 1))
        first = time.perf_counter() - start
        rejections, seconds = [int(result.reject(0.05))], []
        for r, (X, Y) in enumerate(data[1:], start=1):
            start = time.perf_counter()
            rejections.append(int(test(X, Y, jax.random.key(seed + 1 + r)).reject(0.05)))
            seconds.append(time.perf_counter() - start)
        out[name] = dict(rejections=rejections, seconds=float(np.mean(seconds)) if seconds else first,
                         first_seconds=first, method=result.method)
    return out


def scale_table(cells, reps, out_path=None, redo_ours=False):
    """Run the cells (results in ``out_path`` are kept and the run resumes; bayeskern's are recomputed with
    ``redo_ours``, on the same data sets); prints one line per cell."""
    import bayeskern as bk

    bk.enable_x64()
    results = json.loads(out_path.read_text()) if out_path and out_path.exists() else {}
    for name in cells:
        kind, sampler, null, anchors = CELLS[name]
        row = results.get(name, {})
        done = lambda tests: all(t in row and len(row[t]["rejections"]) >= reps for t in tests)
        if done(_ours(kind)) and done(anchors) and not redo_ours:
            continue
        rng = np.random.default_rng(5000 + list(CELLS).index(name))
        data = [sampler(rng) for _ in range(reps)]
        if redo_ours or not done(_ours(kind)):
            row.update(run_ours(kind, data, 20_000 * (list(CELLS).index(name) + 1)))
        if not done(anchors):   # the anchors' levels are exact by construction; the nulls check ours
            row.update(run_anchors(kind, data, setup_anchors(ANCHORS), anchors))
        results[name] = row
        print(_line(name, row, null), flush=True)
        if out_path:
            out_path.write_text(_results_json(results))
    return results


def _line(name, row, null):
    parts = [f"{t} {np.mean(v['rejections']):.2f} ({v['seconds']:.2f} s, first {v['first_seconds']:.1f} s)"
             for t, v in row.items()]
    reps = len(next(iter(row.values()))["rejections"])
    return f"{'H0 ' if null else 'H1 '}{name} [{reps} reps]: " + " | ".join(parts)


# --- cost against n and d ------------------------------------------------------------------------------------------


QUADRATIC_MAX_N = 2000   # MMDAgg and MMD-FUSE (quadratic time, 7.7 and 17 s per test here) are timed up to this n


def cost(sizes, dims, python, max_anchor_seconds=300.0):
    """Seconds per test against n (d = 1, uniform data) and d (n = 500, Gaussian data), bayeskern's default tests and
    the anchors in the same run, each after its compiling first call (whose seconds are reported too). An anchor is
    not run at a size after it took more than ``max_anchor_seconds`` per test at a smaller one, nor MMDAgg and
    MMD-FUSE above ``QUADRATIC_MAX_N``."""
    import jax

    import bayeskern as bk

    bk.enable_x64()
    rng = np.random.default_rng(0)
    table, slow = [], set()
    settings = [("n", n, 1) for n in sizes] + [("d", 500, d) for d in dims]
    for axis, n, d in settings:
        data = [(rng.standard_normal((n, d)), rng.standard_normal((n, d))) if axis == "d"
                else (rng.uniform(size=(n, 1)), rng.uniform(size=(n, 1))) for _ in range(2)]
        row = dict(axis=axis, n=n, d=d)
        for name, test in (("bayes", lambda X, Y, k: bk.mmd_test(X, Y, "bayes", key=k, progress_bar=False)),
                           ("median", lambda X, Y, k: bk.mmd_test(X, Y, "median", key=k, progress_bar=False))):
            start = time.perf_counter()
            test(*data[0], jax.random.key(0))
            row[f"{name} first"] = time.perf_counter() - start
            start = time.perf_counter()
            test(*data[1], jax.random.key(1))
            row[name] = time.perf_counter() - start
        anchors = [a for a in ("MMDAggInc", "MMDAgg", "MMD-FUSE")
                   if a not in slow and (a == "MMDAggInc" or n <= QUADRATIC_MAX_N)]
        if anchors:
            try:
                out = run_anchors("mmd", data, python, anchors)
            except subprocess.CalledProcessError:   # agginc holds O(N R B) numbers: out of memory at large n
                print(f"# {anchors} failed at n = {n} (see their error above); not run at larger n", flush=True)
                slow.update(anchors)
                out = {}
            for a, v in out.items():
                row[a], row[f"{a} first"] = v["seconds"], v["first_seconds"]
                if v["seconds"] > max_anchor_seconds:
                    slow.add(a)
        table.append(row)
        print(json.dumps(row), flush=True)
    return table


# --- power at a budget of seconds per test ---------------------------------------------------------------------------


def budget(seconds, cost_json, reps, python):
    """Power on the large-n perturbed densities when every test gets ``seconds`` per test: each on as many points per
    sample as it can process in that time (read off the cost table, largest measured n within the budget)."""
    import jax

    import bayeskern as bk

    bk.enable_x64()
    lines = [line for line in Path(cost_json).read_text().splitlines() if line.startswith("{")]
    rows = [r for r in map(json.loads, lines) if r["axis"] == "n"]
    affordable = {}
    for name in ("bayes", "median", "MMDAggInc", "MMDAgg", "MMD-FUSE"):
        fits = [r["n"] for r in rows if name in r and r[name] <= seconds]
        if fits:
            affordable[name] = max(fits)
    print(f"# points per sample within {seconds} s per test: {affordable}", flush=True)
    problems = {"perturbed d=1 (p=2, scale 0.05)": lambda r, n: perturbed_uniform(r, n, 1, 2, 0.05),
                "perturbed d=2 (p=2, scale 0.1)": lambda r, n: perturbed_uniform(r, n, 2, 2, 0.1)}
    for problem, sampler in problems.items():
        line = []
        for name, n in affordable.items():
            rng = np.random.default_rng(77)
            data = [sampler(rng, n) for _ in range(reps)]
            if name in ("bayes", "median"):
                test = _ours("mmd")[name]
                rejections = [test(X, Y, jax.random.key(r)).reject(0.05) for r, (X, Y) in enumerate(data)]
                rate = float(np.mean(rejections))
            else:
                rate = float(np.mean(run_anchors("mmd", data, python, (name,))[name]["rejections"]))
            line.append(f"{name} {rate:.2f} (n = {n})")
        print(f"{problem} at {seconds} s per test [{reps} reps]: " + " | ".join(line), flush=True)


# --- n = 10^6: one process, two processes ----------------------------------------------------------------------------


_WORKER = textwrap.dedent("""
    import os, sys, time
    pid, count, port, n = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    if count > 1:   # one core each (two JAX programs sharing both cores slow each other down); one process: both
        os.sched_setaffinity(0, {pid % os.cpu_count()})
    import bayeskern as bk
    from bayeskern import distributed
    if count > 1:
        assert distributed.initialize(f"127.0.0.1:{port}", count, pid)
    bk.enable_x64()
    import jax
    import numpy as np
    from bayeskern.sharding import shard_rows
    X, Y = bk.datasets.perturbed_uniform(n, 1, 3, 0.05, seed=123)
    cut = lambda A: A[pid * len(A) // count:(pid + 1) * len(A) // count]
    start = time.perf_counter()
    if count > 1:
        X, Y = shard_rows(cut(X)), shard_rows(cut(Y))
    result = bk.mmd_test(X, Y, "bayes", key=jax.random.key(0), method="features", progress_bar=pid == 0)
    print("result", pid, count, result.p_value, result.reject(0.05), time.perf_counter() - start, flush=True)
""")


def million(n, processes):
    """``mmd_test(X, Y, "bayes")`` on n points per sample (perturbed uniform, d = 1) in one process and in
    ``processes`` processes (jax.distributed on localhost, rows split between them): seconds, p-value, decision."""
    lines = []
    for count in sorted({1, processes}):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(i), str(count), str(port), str(n)],
                                  stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
                 for i in range(count)]
        for p in procs:
            out, _ = p.communicate()
            lines += [line for line in out.splitlines() if line.startswith("result")]
    for line in lines:
        _, pid, count, p_value, reject, seconds = line.split()
        print(f"n = {n} per sample, {count} process(es), process {pid}: p = {float(p_value):.4f}, reject {reject}, "
              f"{float(seconds):.1f} s including compilation", flush=True)


# --- design: number of random features, and where the features take over ---------------------------------------------


DESIGN = {   # other problems than CELLS: the default number of features and the crossover were chosen here
    "perturbed d=1 (p=3, scale 0.15, n=1500)": lambda r: perturbed_uniform(r, 1500, 1, 3, 0.15),
    "perturbed d=2 (p=2, scale 0.3, n=1500)": lambda r: perturbed_uniform(r, 1500, 2, 2, 0.3),
    "mixture (std 1.25, n=1500)": lambda r: mixture(r, 1500, std=1.25),
    "normal vs t_10 (n=1500)": lambda r: (r.standard_normal((1500, 1)), r.standard_t(10, (1500, 1)) / np.sqrt(1.25)),
}


def _rotated(rng, n, angle):
    """Two independent uniform sources rotated by ``angle`` (dependent unless a multiple of pi / 2)."""
    s = rng.uniform(-1, 1, (n, 2))
    z = s @ np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]).T
    return z[:, :1], z[:, 1:]


def _heteroscedastic(rng, n):
    """x standard normal, y = x e / 2 + e' with independent standard normal e, e': uncorrelated, dependent."""
    x = rng.standard_normal((n, 1))
    return x, 0.5 * x * rng.standard_normal((n, 1)) + rng.standard_normal((n, 1))


DESIGN_HSIC = {
    "sinusoid l=3, amplitude 0.3 (n=2500)": lambda r: sinusoid(r, 2500, 3.0, 0.3),
    "rotated sources pi/24 (n=2500)": lambda r: _rotated(r, 2500, np.pi / 24),
    "heteroscedastic y = x e / 2 + e' (n=2500)": lambda r: _heteroscedastic(r, 2500),
}


def _sparse_change(rng, n, d, k, shift=0.0, scale=1.0):
    """Standard normal samples in d dimensions, the second with its first k coordinates shifted and scaled."""
    X, Y = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    Y[:, :k] = shift + scale * Y[:, :k]
    return X, Y


DESIGN_WIDE = {   # high dimension: how the number of features must grow with d
    "sparse mean shift d=768 (20 coords by 0.1, n=2000)": lambda r: _sparse_change(r, 2000, 768, 20, shift=0.1),
    "sparse scale change d=256 (30 coords x1.1, n=2000)": lambda r: _sparse_change(r, 2000, 256, 30, scale=1.1),
}


def design(reps, features=(32, 64, 128, 256), hsic_features=(8, 16, 32, 64), wide_features=(64, 256, None, 1024),
           only=None):
    """Power and seconds of "bayes" with the exact kernel (cyclic null) and with R random features, same data
    (R = None: the default for the data's dimension); ``only``: these problems of DESIGN_WIDE alone."""
    import jax

    import bayeskern as bk

    bk.enable_x64()
    runs = [(name, sampler, "mmd", features) for name, sampler in DESIGN.items()] + [
        (name, sampler, "mmd", wide_features) for name, sampler in DESIGN_WIDE.items()] + [
        (name, sampler, "hsic", hsic_features) for name, sampler in DESIGN_HSIC.items()]
    runs = [run for run in runs if only is None or run[0] in only]
    for name, sampler, kind, counts in runs:
        rng = np.random.default_rng(21)
        data = [sampler(rng) for _ in range(reps)]
        test = (lambda X, Y, key, **o: bk.mmd_test(X, Y, "bayes", key=key, **o)) if kind == "mmd" else \
            (lambda X, Y, key, **o: bk.hsic_test(X, Y, "bayes", "bayes", key=key, **o))
        cols = {}
        for label, options in [("exact", dict(method="cyclic"))] + [
                (f"R={R or 'default'}", dict(method="features", num_features=R)) for R in counts]:
            test(*data[0], jax.random.key(0), **options)
            start = time.perf_counter()
            rejections = [test(X, Y, jax.random.key(r + 1), **options).reject(0.05) for r, (X, Y) in enumerate(data)]
            cols[label] = (float(np.mean(rejections)), (time.perf_counter() - start) / reps)
        print(f"{name} [{reps} reps]: " + "  ".join(f"{k} {p:.2f} ({s:.2f} s)" for k, (p, s) in cols.items()),
              flush=True)


# --- report ----------------------------------------------------------------------------------------------------------


def report(results_path, figure=None):
    """The markdown table of a results JSON: power or level with its Monte-Carlo se, seconds per test (first call in
    brackets), and the acceptance margins."""
    results = json.loads(Path(results_path).read_text())
    tests = ("bayes", "MMDAgg", "MMD-FUSE", "MMDAggInc", "HSICAggInc", "HSICAgg", "median")
    print("| cell | " + " | ".join(tests) + " | bayes - best other (paired se) |")
    print("|---" * (len(tests) + 2) + "|")
    for name, (kind, _, null, _) in CELLS.items():
        if name not in results:
            continue
        row = results[name]
        rates = {t: float(np.mean(row[t]["rejections"])) for t in tests if t in row}
        reps = len(row["bayes"]["rejections"])
        cells = [f"{rates[t]:.2f} ({row[t]['seconds']:.2f} s; {row[t]['first_seconds']:.1f})" if t in rates else ""
                 for t in tests]
        margin = ""
        if not null:
            best = max((v, t) for t, v in rates.items() if t != "bayes")[1]
            d = np.array(row["bayes"]["rejections"]) - np.array(row[best]["rejections"])
            margin = f"{d.mean():+.2f} ({np.sqrt(d.var(ddof=1) / len(d)):.3f}, vs {best})"
        se = np.sqrt(0.05 * 0.95 / reps)
        bound = f" (bound {0.05 + 2 * se:.3f})" if null else ""
        print(f"| {name} [{reps}]{bound} | " + " | ".join(cells) + f" | {margin} |")
    if figure:
        _figure(results, figure)


def _figure(results, path):
    """Power (left) and seconds per test (right, log scale) of every test on every alternative, one bar per test."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tests = ("bayes", "median", "MMDAgg", "MMD-FUSE", "MMDAggInc", "HSICAggInc", "HSICAgg")
    alts = [n for n, (_, _, null, _) in CELLS.items() if n in results and not null]
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 0.55 * len(alts) + 1.5), sharey=True)
    width = 0.8 / len(tests)
    for j, t in enumerate(tests):
        rows = [(i, results[n][t]) for i, n in enumerate(alts) if t in results[n]]
        if not rows:
            continue
        y = np.array([i for i, _ in rows]) + width * (j - len(tests) / 2)
        left.barh(y, [np.mean(v["rejections"]) for _, v in rows], height=width, color=f"C{j}", label=t)
        right.barh(y, [v["seconds"] for _, v in rows], height=width, color=f"C{j}")
    left.set(yticks=range(len(alts)), yticklabels=alts, xlabel="power (alpha = 0.05)", xlim=(0, 1))
    right.set(xscale="log", xlabel="seconds per test (after compilation)")
    left.invert_yaxis()
    left.legend(frameon=False, fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="*", default=None, help="cell names (default: all)")
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None, help="JSON of every rejection (resumes a run)")
    parser.add_argument("--redo-ours", action="store_true", help="recompute bayeskern's tests, keep the anchors'")
    parser.add_argument("--cost", action="store_true", help="seconds per test against n and d")
    parser.add_argument("--sizes", nargs="*", type=int, default=[1000, 2000, 5000, 10_000, 30_000, 100_000,
                                                                 300_000, 1_000_000])
    parser.add_argument("--dims", nargs="*", type=int, default=[1, 10, 64, 100, 300, 768, 1000])
    parser.add_argument("--budget", type=float, default=None, help="power at this many seconds per test")
    parser.add_argument("--cost-json", type=Path, default=None, help="with --budget: the --cost output (JSON lines)")
    parser.add_argument("--million", action="store_true", help="n = 10^6 in one and in --processes processes")
    parser.add_argument("--n", type=int, default=1_000_000, help="with --million: points per sample")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--design", action="store_true", help="the number of random features and the crossover")
    parser.add_argument("--wide", action="store_true", help="with --design: only the high-dimensional problems")
    parser.add_argument("--report", type=Path, default=None)
    parser.add_argument("--figure", type=Path, default=None)
    args = parser.parse_args()
    from _common import machine_line

    if args.report:
        return report(args.report, args.figure)
    print(machine_line("alpha = 0.05, bayeskern defaults (500 permutations, method='auto')"), flush=True)
    if args.design:
        return design(args.reps, only=DESIGN_WIDE if args.wide else None)
    if args.million:
        return million(args.n, args.processes)
    if args.cost:
        return cost(args.sizes, args.dims, setup_anchors(ANCHORS))
    if args.budget is not None:
        return budget(args.budget, args.cost_json, args.reps, setup_anchors(ANCHORS))
    unknown = set(args.cells or ()) - set(CELLS)
    if unknown:
        parser.error(f"unknown cells {sorted(unknown)}; choose from {list(CELLS)}")
    scale_table(args.cells or list(CELLS), args.reps, args.out, args.redo_ours)


if __name__ == "__main__":
    main()
