"""Power and level of the kernel tests against MMDAgg, MMD-FUSE and HSICAggInc, side by side in one run.

Every cell draws ``--reps`` data sets (seeded), and every test sees the same data sets: bayeskern's Bayesian
aggregated test (``"bayes"``), the median heuristic and BKL (``bkl_kernel``), all with 500 permutations, alpha = 0.05;
the authors' MMDAgg and MMD-FUSE (two-sample) or HSICAggInc (independence) with their defaults, run in their own
virtual environment (``benchmarks/.anchors/venv``; ``--setup`` creates it from the authors' repositories cloned into
``benchmarks/.anchors/src``, or from GitHub). The problems are those of the anchors' papers and of Flaxman et al.
(2016): the grid of Gaussians, perturbed uniform densities (d = 1, 2), the mixture of the MMD-FUSE paper, normal vs
Laplace, mean and scale shifts, unequal sample sizes, heavy tails, d = 50, and nulls of each kind; for independence,
a high-frequency sinusoidal density and rotated independent sources. The samplers are written here from the papers'
definitions. Rejection rates come with their Monte-Carlo standard error sqrt(p (1 - p) / reps); seconds are per test
after compilation.

Run:  python benchmarks/bench_test_power.py [--reps 100] [--cells NAME ...] [--out results.json]
      python benchmarks/bench_test_power.py --setup      # the anchors' virtual environment
      python benchmarks/bench_test_power.py --bkl-inducing   # BKL's power against its number of inducing points
      python benchmarks/bench_test_power.py --cost           # seconds of the "bayes" test against n
      python benchmarks/bench_test_power.py --design --reps 60   # how the defaults were chosen
      python benchmarks/bench_test_power.py --report results.json --figure power.png
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
ANCHORS = HERE / ".anchors"
REPOSITORIES = ("mmdagg", "mmdfuse", "agginc")


# --- samplers (from the papers' definitions) -------------------------------------------------------------------


def perturbed_uniform(rng, n, d, p, scale):
    """The perturbed uniform problem of Schrab et al. (2023), as bayeskern.datasets ships it."""
    import bayeskern as bk

    return bk.datasets.perturbed_uniform(n, d, p, scale, seed=rng)


def mixture(rng, n, d=2, mu=20.0, std=1.6):
    """Four Gaussians at (+-mu, +-mu) (zeros beyond two coordinates), unit standard deviation; in Y the fourth has
    standard deviation ``std`` (the MMD-FUSE paper's mixture)."""
    centres = np.array([(mu, mu), (-mu, mu), (mu, -mu), (-mu, -mu)])

    def draw(last_std):
        c = rng.integers(0, 4, n)
        sd = np.where(c == 3, last_std, 1.0)[:, None]
        out = rng.standard_normal((n, d)) * sd
        out[:, :2] += centres[c]
        return out

    return draw(1.0), draw(std)


def shift(rng, n, d, delta, m=None, dist="normal"):
    """X ~ F, Y ~ F + delta e_1 in d dimensions, F standard normal or Student t_3."""
    m = n if m is None else m
    draw = rng.standard_normal if dist == "normal" else (lambda size: rng.standard_t(3, size))
    return draw((n, d)), draw((m, d)) + delta * np.eye(d)[0]


def scale_shift(rng, n, d, ratio):
    """X ~ N(0, I_d), Y ~ N(0, diag(ratio^2, 1, ..., 1))."""
    return rng.standard_normal((n, d)), rng.standard_normal((n, d)) * np.r_[ratio, np.ones(d - 1)]


def sinusoid(rng, n, frequency, amplitude=1.0):
    """(x, y) on [-pi, pi]^2 with density proportional to 1 + a sin(l x) sin(l y) (Sejdinovic et al. 2013; a = 1
    there)."""
    kept, total = [], 0
    while total < n:
        z = rng.uniform(-np.pi, np.pi, (4 * n, 2))
        keep = rng.uniform(0, 2, len(z)) <= 1 + amplitude * np.sin(frequency * z[:, 0]) * np.sin(frequency * z[:, 1])
        kept.append(z[keep])
        total += keep.sum()
    z = np.concatenate(kept)[:n]
    return z[:, :1], z[:, 1:]


def rotated_sources(rng, n, angle):
    """Two independent uniform sources of unit variance rotated by ``angle``: dependent unless angle = k pi / 2."""
    s = rng.uniform(-np.sqrt(3), np.sqrt(3), (n, 2))
    c, si = np.cos(angle), np.sin(angle)
    z = s @ np.array([[c, -si], [si, c]]).T
    return z[:, :1], z[:, 1:]


def _blobs(eps, per):
    import bayeskern as bk

    return lambda rng: bk.datasets.blobs(eps, per=per, seed=rng)


def _normal_vs_laplace(n):
    import bayeskern as bk

    return lambda rng: bk.datasets.normal_vs_laplace(n, seed=rng)


# name -> (kind, sampler(rng) -> (X, Y), is the null true)
CELLS = {
    "perturbed d=1 (p=2, scale 0.3, n=500)": ("mmd", lambda r: perturbed_uniform(r, 500, 1, 2, 0.3), False),
    "perturbed d=2 (p=2, scale 0.6, n=500)": ("mmd", lambda r: perturbed_uniform(r, 500, 2, 2, 0.6), False),
    "blobs eps=6, 20 per centre": ("mmd", _blobs(6.0, 20), False),
    "blobs eps=2, 100 per centre": ("mmd", _blobs(2.0, 100), False),
    "mixture (std 1.6, n=500)": ("mmd", lambda r: mixture(r, 500), False),
    "normal vs Laplace (n=200)": ("mmd", _normal_vs_laplace(200), False),
    "mean shift d=10 (0.4, n=150)": ("mmd", lambda r: shift(r, 150, 10, 0.4), False),
    "scale shift d=5 (1.4, n=200)": ("mmd", lambda r: scale_shift(r, 200, 5, 1.4), False),
    "unequal sizes (100 vs 400, shift 0.35)": ("mmd", lambda r: shift(r, 100, 2, 0.35, m=400), False),
    "t_3 shift d=2 (0.3, n=200)": ("mmd", lambda r: shift(r, 200, 2, 0.3, dist="t"), False),
    "mean shift d=50 (0.6, n=200)": ("mmd", lambda r: shift(r, 200, 50, 0.6), False),
    "null N(0, I_2) (n=200)": ("mmd", lambda r: shift(r, 200, 2, 0.0), True),
    "null uniform d=1 (n=500)": ("mmd", lambda r: perturbed_uniform(r, 500, 1, 2, 0.0), True),
    "null blobs eps=1, 20 per centre": ("mmd", _blobs(1.0, 20), True),
    "null t_3 (100 vs 400)": ("mmd", lambda r: shift(r, 100, 2, 0.0, m=400, dist="t"), True),
    "sinusoid l=4 (n=500)": ("hsic", lambda r: sinusoid(r, 500, 4.0), False),
    "rotated sources pi/8 (n=200)": ("hsic", lambda r: rotated_sources(r, 200, np.pi / 8), False),
    "null sinusoid l=0 (n=500)": ("hsic", lambda r: sinusoid(r, 500, 0.0), True),
    "null sources unrotated (n=200)": ("hsic", lambda r: rotated_sources(r, 200, 0.0), True),
}


# --- bayeskern's side ------------------------------------------------------------------------------------------


def _ours(kind):
    import bayeskern as bk
    from bayeskern.inference import bkl_kernel

    if kind == "mmd":
        return {"bayes": lambda X, Y, key: bk.mmd_test(X, Y, "bayes", key=key),
                "median": lambda X, Y, key: bk.mmd_test(X, Y, "median", key=key),
                "BKL": lambda X, Y, key: bk.mmd_test(X, Y, bkl_kernel, key=key)}
    return {"bayes": lambda X, Y, key: bk.hsic_test(X, Y, "bayes", "bayes", key=key),
            "median": lambda X, Y, key: bk.hsic_test(X, Y, key=key),
            "BKL": lambda X, Y, key: bk.hsic_test(X, Y, bkl_kernel, bkl_kernel, key=key)}


def run_ours(kind, data, seed):
    import jax

    out = {}
    for name, test in _ours(kind).items():
        test(*data[0], jax.random.key(seed)).reject(0.05)   # compile
        rejections, seconds = [], []
        for r, (X, Y) in enumerate(data):
            start = time.perf_counter()
            rejections.append(int(test(X, Y, jax.random.key(seed + 1 + r)).reject(0.05)))
            seconds.append(time.perf_counter() - start)
        out[name] = dict(rejections=rejections, seconds=float(np.mean(seconds)))
    return out


def run_anchors(kind, data, python, tests=None):
    """The anchors' rejections and seconds on ``data`` (``tests``: names, default ANCHOR_TESTS[kind])."""
    with tempfile.TemporaryDirectory() as tmp:
        arrays = {f"{s}_{r}": np.asarray(a, np.float32) for r, (X, Y) in enumerate(data) for s, a in (("X", X), ("Y", Y))}
        np.savez(Path(tmp) / "data.npz", kind=kind, tests=np.array(tests or ANCHOR_TESTS[kind]), **arrays)
        subprocess.run([str(python), str(HERE / "_power_side.py"), str(Path(tmp) / "data.npz"),
                        str(Path(tmp) / "out.json")], check=True)
        return json.loads((Path(tmp) / "out.json").read_text())


def setup_anchors(folder: Path) -> Path:
    """The anchors' virtual environment (created on first use), with jax and the authors' three packages."""
    python = folder / "venv" / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(folder / "venv")], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "jax", "numpy", "scipy", "psutil", "gputil"],
                       check=True)
        for repo in REPOSITORIES:
            local = folder / "src" / repo
            source = str(local) if local.exists() else f"git+https://github.com/antoninschrab/{repo}"
            subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", source], check=True)
    return python


ANCHOR_TESTS = {"mmd": ("MMDAgg", "MMD-FUSE"), "hsic": ("HSICAggInc", "HSICAgg")}


def power_table(cells, reps, out_path=None, redo_ours=False):
    """Run every cell (the anchors' results in ``out_path`` are kept; bayeskern's are recomputed with
    ``redo_ours``). The anchors' environment is set up only when a cell lacks their results."""
    import bayeskern as bk

    bk.enable_x64()
    results = json.loads(out_path.read_text()) if out_path and out_path.exists() else {}
    for name in cells:
        kind, sampler, null = CELLS[name]
        c = list(CELLS).index(name)
        row = results.get(name, {})
        done = lambda tests: all(t in row and len(row[t]["rejections"]) >= reps for t in tests)
        ours = tuple(_ours(kind))
        if done(ANCHOR_TESTS[kind]) and done(ours) and not redo_ours:
            continue
        rng = np.random.default_rng(1000 + c)
        data = [sampler(rng) for _ in range(reps)]
        if not done(ANCHOR_TESTS[kind]):
            row.update(run_anchors(kind, data, setup_anchors(ANCHORS)))
        if redo_ours or not done(ours):
            row.update(run_ours(kind, data, 10_000 * (c + 1)))
        results[name] = row
        print(_line(name, row, reps, null), flush=True)
        if out_path:
            out_path.write_text(_results_json(results))
    return results


def _results_json(results):
    """The results as JSON with one line per cell and test (a rerun's diff shows the decisions that changed)."""
    cells = [f" {json.dumps(name)}: {{\n" + ",\n".join(f"  {json.dumps(t)}: {json.dumps(v)}" for t, v in row.items())
             + "\n }" for name, row in results.items()]
    return "{\n" + ",\n".join(cells) + "\n}\n"


def _line(name, row, reps, null):
    se = lambda p: np.sqrt(p * (1 - p) / reps)
    parts = [f"{t} {np.mean(v['rejections']):.2f} ({v['seconds']:.2f} s)" for t, v in row.items()]
    return f"{'H0 ' if null else 'H1 '}{name:42s} " + " | ".join(parts) + \
        f"   [MC se at 0.5: {se(0.5):.3f}, at 0.05: {se(0.05):.3f}]"


def bkl_inducing(reps):
    """BKL's power against its number m of held-out inducing points, beside "bayes"."""
    import jax

    import bayeskern as bk
    from bayeskern.inference import bkl_kernel

    bk.enable_x64()
    for name in ("blobs eps=6, 20 per centre", "perturbed d=1 (p=2, scale 0.3, n=500)", "normal vs Laplace (n=200)"):
        kind, sampler, _ = CELLS[name]
        rng = np.random.default_rng(7)
        data = [sampler(rng) for _ in range(reps)]
        cols = {}
        for m in (10, 25, 50, 100):
            rule = lambda X, Y, key, m=m: bkl_kernel(X, Y, key=key, m=m)
            cols[f"BKL m={m}"] = np.mean([bk.mmd_test(X, Y, rule, key=jax.random.key(r)).reject(0.05)
                                          for r, (X, Y) in enumerate(data)])
        for m in (10, 30, 100, None):
            rule = bk.bke.BayesAggregate() if m is None else bk.bke.BayesAggregate(inducing=(m,))
            cols["bayes (default)" if m is None else f"bayes m={m}"] = np.mean(
                [bk.mmd_test(X, Y, rule, key=jax.random.key(r)).reject(0.05) for r, (X, Y) in enumerate(data)])
        print(f"{name:42s} " + "  ".join(f"{k} {v:.2f}" for k, v in cols.items()), flush=True)


# design problems: the same families at other sizes and difficulties than CELLS (the defaults were chosen here)
DESIGN = {
    "blobs eps=4, 30 per centre": _blobs(4.0, 30),
    "perturbed d=1 (p=2, scale 0.6, n=300)": lambda r: perturbed_uniform(r, 300, 1, 2, 0.6),
    "perturbed d=2 (p=2, scale 0.9, n=300)": lambda r: perturbed_uniform(r, 300, 2, 2, 0.9),
    "normal vs Laplace (n=150)": _normal_vs_laplace(150),
    "mean shift d=10 (0.5, n=100)": lambda r: shift(r, 100, 10, 0.5),
    "scale shift d=5 (1.4, n=100)": lambda r: scale_shift(r, 100, 5, 1.4),
    "t_3 shift d=2 (0.4, n=150)": lambda r: shift(r, 150, 2, 0.4, dist="t"),
    "unequal sizes (80 vs 320, shift 0.4)": lambda r: shift(r, 80, 2, 0.4, m=320),
    "null N(0, I_2) (n=200)": lambda r: shift(r, 200, 2, 0.0),
}


def _normal_tail_min_p(stats, weights):
    """Weighted minimum of normal tail probabilities of the statistics standardised over all labellings."""
    from scipy.special import log_ndtr

    z = (stats - stats.mean(0)) / stats.std(0)
    return np.max(np.log(weights)[None, :] - log_ndtr(-z), axis=1)


def _fused(stats, weights):
    """MMD-FUSE-style soft maximum of standardised statistics (standardised over all labellings)."""
    z = (stats - stats.mean(0)) / stats.std(0)
    return np.log(np.sum(weights[None, :] * np.exp(z), axis=1))


def _harmonic_p(p, weights):
    """Weighted harmonic mean of the kernels' p-values (Wilson 2019), as log sum_k w_k / p_k."""
    return np.log(np.sum(weights[None, :] / p, axis=1))


def _cauchy_p(p, weights):
    """Cauchy combination of the kernels' p-values (Liu & Xie 2020), shifted off p = 1."""
    return np.sum(weights[None, :] * np.tan((0.5 - p + 0.5 / p.shape[0]) * np.pi), axis=1)


def design(reps):
    """The weighting and combination of the "bayes" test, compared on the design problems from shared statistics.

    Every variant sees the same per-kernel permutation statistics; "floor" is the bandwidth grid alone (weights
    uniform), "share s" gives the posterior kernels weight s, "median kernel s" adds the median-heuristic kernel
    with weight s (taken evenly from the posterior and floor shares), "median kernel 0.25 / 0.5" gives it 0.25 (floor
    0.25) or 0.5 (no floor) beside the posterior's 0.5, "floor 2:1 Gaussian" and "Gaussian floor" reweight the
    floor's families, "fuse" replaces the weighted minimum p-value by a soft maximum of standardised statistics,
    "normal tails" the kernels' rank p-values by normal tails of their standardised statistics, "harmonic p" and
    "Cauchy p" by a weighted harmonic mean or a Cauchy combination of the kernels' p-values. "best bandwidth in
    hindsight" is the single Gaussian kernel, among bandwidths 2^(1/3) apart over the floor's range, with the most
    power on the problem: an upper bound that no rule choosing its kernels from the unlabelled sample can promise.
    """
    import jax

    import bayeskern as bk
    from bayeskern.aggregate import aggregate_statistics
    from bayeskern.bke.aggregate import _distance_range
    from bayeskern.mmd import _permutation_statistics

    bk.enable_x64()
    rule = bk.bke.BayesAggregate()
    reject = lambda values: np.mean(values >= values[0]) <= 0.05
    for name, sampler in DESIGN.items():
        rng, cols, single = np.random.default_rng(99), {}, []
        for r in range(reps):
            X, Y = sampler(rng)
            key = jax.random.key(r)
            rule_key = jax.random.fold_in(key, 1)
            collection = rule(X, Y, key=rule_key)
            # Gaussian kernels 2^(1/3) apart over the floor's range, for the best bandwidth in hindsight
            lo, hi = _distance_range(np.concatenate([X, Y]), jax.random.split(rule_key)[1])
            fine = np.exp(np.arange(np.log(lo / 2), np.log(2 * hi) + 1e-9, np.log(2) / 3))
            median = bk.RBF(bk.median_heuristic(X, Y))   # last column: the median-heuristic kernel
            kernels = collection.kernels + tuple(bk.RBF(float(ell)) for ell in fine) + (median,)
            stats = _permutation_statistics(kernels, np.asarray(X, float), np.asarray(Y, float), key, 500,
                                            "unbiased", 1024, 2**25)
            K = len(collection)
            single.append([reject(stats[:, K + j]) for j in range(len(fine))])
            stats = np.concatenate([stats[:, :K], stats[:, -1:]], axis=1)
            posterior = np.array(["posterior" in label for label in collection.labels] + [False])
            gaussian = np.array([label.startswith("gaussian") for label in collection.labels] + [True])
            floor = ~posterior
            floor[-1] = False
            gaussian_posterior = posterior & gaussian
            prior = np.append(collection.weights, 0.0)

            def weights(share, floor_weights, median_share=0.0, floor_share=None):
                w = np.zeros(len(prior))
                w[posterior] = share * prior[posterior] / prior[posterior].sum()
                floor_share = 1 - share - median_share if floor_share is None else floor_share
                if floor_share > 0:
                    w[floor] = floor_share * floor_weights[floor] / floor_weights[floor].sum()
                w[-1] = median_share
                return w

            even = floor.astype(float)
            variants = {"floor" if share == 0 else f"share {share}": weights(share, even)
                        for share in (0.0, 0.25, 0.5, 0.75)}
            variants["median kernel 0.1"] = weights(0.45, even, 0.1)
            variants["median kernel 0.2"] = weights(0.4, even, 0.2)
            variants["median kernel 0.25"] = weights(0.5, even, 0.25)
            variants["median kernel 0.5"] = weights(0.5, even, 0.5, floor_share=0.0)
            variants["floor 2:1 Gaussian"] = weights(0.5, np.where(gaussian, 2.0, 1.0) * floor)
            variants["Gaussian floor"] = weights(0.5, (gaussian & floor).astype(float))
            keep = variants["share 0.5"]
            default = keep > 0
            for label, w in variants.items():
                used = w > 0
                aggregated, _ = aggregate_statistics(stats[:, used], w[used])
                cols.setdefault(label, []).append(reject(aggregated))
            cols.setdefault("median alone", []).append(reject(stats[:, -1]))
            _, p = aggregate_statistics(stats[:, default], keep[default])
            combined = {"normal tails": _normal_tail_min_p(stats[:, default], keep[default]),
                        "fuse": _fused(stats[:, default], keep[default]),
                        "harmonic p": _harmonic_p(p, keep[default]), "Cauchy p": _cauchy_p(p, keep[default])}
            for label, values in combined.items():
                cols.setdefault(f"{label} (share 0.5)", []).append(reject(values))
            first = int(np.argmax(gaussian_posterior))
            cols.setdefault("heaviest posterior mode alone", []).append(reject(stats[:, first]))
        shortest = min(len(s) for s in single)
        cols["best bandwidth in hindsight"] = [max(np.mean([s[j] for s in single]) for j in range(shortest))]
        print(f"{name:40s} " + "  ".join(f"{k} {np.mean(v):.2f}" for k, v in cols.items()), flush=True)


ANCHOR_COST_MAX_N = 2500   # the anchors' cost is measured up to this n per sample (MMD-FUSE: 46 s per test there)


def cost(sizes, python=None):
    """Seconds per test of mmd_test(X, Y, "bayes") (500 permutations) against n per sample, d = 1, uniform data,
    after compilation; beside MMDAgg and MMD-FUSE in the same run up to ``ANCHOR_COST_MAX_N``."""
    import jax

    import bayeskern as bk

    bk.enable_x64()
    rng = np.random.default_rng(0)
    for n in sizes:
        data = [(rng.uniform(size=(n, 1)), rng.uniform(size=(n, 1))) for _ in range(4)]
        bk.mmd_test(*data[0], "bayes", key=jax.random.key(0))   # compile
        start = time.perf_counter()
        for r, (X, Y) in enumerate(data[1:]):
            bk.mmd_test(X, Y, "bayes", key=jax.random.key(r + 1))
        line = f"n = {n:>6} per sample: bayes {(time.perf_counter() - start) / 3:8.2f} s"
        if python is not None and n <= ANCHOR_COST_MAX_N:
            anchors = run_anchors("mmd", data, python)
            line += "".join(f", {name} {v['seconds']:.2f} s" for name, v in anchors.items())
        print(line, flush=True)


def report(results_path: Path, figure=None):
    """The markdown table (power or level with its Monte-Carlo standard error, seconds per test) of a JSON of
    results, the acceptance margin of "bayes" on every alternative, and optionally a figure."""
    results = json.loads(results_path.read_text())
    tests = ("bayes", "MMDAgg", "MMD-FUSE", "HSICAggInc", "HSICAgg", "median", "BKL")
    print("| cell | " + " | ".join(tests) + " | bayes - best other (paired se) |")
    print("|---" * (len(tests) + 2) + "|")
    rows = []
    for name in CELLS:
        if name not in results:
            continue
        row, null = results[name], CELLS[name][2]
        rates = {t: float(np.mean(row[t]["rejections"])) for t in tests if t in row}
        reps = len(row["bayes"]["rejections"])
        cells = [f"{rates[t]:.2f} ({row[t]['seconds']:.2f} s)" if t in rates else "" for t in tests]
        best = max((v, t) for t, v in rates.items() if t != "bayes")[1]
        a, b = np.array(row["bayes"]["rejections"]), np.array(row[best]["rejections"])
        d = a - b
        margin = "" if null else f"{d.mean():+.2f} ({np.sqrt(d.var(ddof=1) / len(d)):.3f}, vs {best})"
        print(f"| {name} | " + " | ".join(cells) + f" | {margin} |")
        rows.append((name, null, rates, reps))
    print(f"\nMonte-Carlo standard error of a rate p over R repetitions: sqrt(p (1 - p) / R); R = "
          f"{sorted({r for *_, r in rows})}. Nulls: every test's level must be <= 0.05 + 2 x 0.022 = 0.094 at R = 100.")
    print("\nEach test's largest shortfall against the best other test of its row, over the alternatives:")
    for t in tests:
        gaps = [(max(v for u, v in rates.items() if u != t) - rates[t], name)
                for name, null, rates, _ in rows if not null and t in rates]
        if gaps:
            gap, name = max(gaps)
            print(f"  {t:10s} {gap:+.2f} ({name}); within 0.05 on {sum(g <= 0.05 for g, _ in gaps)} of {len(gaps)}")
    if figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        alts = [r for r in rows if not r[1]]
        fig, ax = plt.subplots(figsize=(11, 0.42 * len(alts) + 1.5))
        width = 0.8 / len(tests)
        for j, t in enumerate(tests):
            y = np.arange(len(alts)) + width * (j - (len(tests) - 1) / 2)
            ax.barh(y, [r[2].get(t, np.nan) for r in alts], height=width, label=t)
        ax.set_yticks(np.arange(len(alts)), [r[0] for r in alts], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("power (rejection rate at alpha = 0.05)")
        ax.legend(frameon=False, fontsize=8, ncol=len(tests), loc="lower center", bbox_to_anchor=(0.5, 1.0))
        fig.tight_layout()
        fig.savefig(figure, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--cells", nargs="*", default=None, help="cell names (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="JSON of every rejection (resumes a run)")
    parser.add_argument("--setup", action="store_true", help="create the anchors' environment and stop")
    parser.add_argument("--bkl-inducing", action="store_true")
    parser.add_argument("--design", action="store_true", help="the design study of the defaults")
    parser.add_argument("--redo-ours", action="store_true", help="recompute bayeskern's tests, keep the anchors'")
    parser.add_argument("--report", type=Path, default=None, help="print the table of a results JSON and stop")
    parser.add_argument("--figure", type=Path, default=None, help="with --report: the power figure (PNG)")
    parser.add_argument("--cost", nargs="*", type=int, default=None, help="sizes n for the cost study")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from _common import machine_line

    if args.report:
        return report(args.report, args.figure)
    print(machine_line(f"{args.reps} repetitions, alpha = 0.05, 500 permutations (bayeskern)"), flush=True)
    if args.bkl_inducing:
        return bkl_inducing(args.reps)
    if args.design:
        return design(args.reps)
    if args.cost is not None:   # sizes above ANCHOR_COST_MAX_N alone need no anchors' environment
        sizes = args.cost or [250, 500, 1000, 2500, 5000]
        return cost(sizes, setup_anchors(ANCHORS) if min(sizes) <= ANCHOR_COST_MAX_N else None)
    if args.setup:
        return setup_anchors(ANCHORS)
    unknown = set(args.cells or ()) - set(CELLS)
    if unknown:
        parser.error(f"unknown cells {sorted(unknown)}; choose from {list(CELLS)}")
    power_table(args.cells or list(CELLS), args.reps, args.out, args.redo_ours)


if __name__ == "__main__":
    main()
