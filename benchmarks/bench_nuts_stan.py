"""NUTS on the BKE lengthscale posterior: bayeskern's default run_nuts against PyStan 3, side by side on one machine.

The problem: the normal-vs-Laplace samples of Flaxman et al. (2016, Section 5.2), pooled n = 800 with m = 10 points
held out as inducing points, tau2 = 1, Gamma(1, 1) prior on the lengthscale; 4 chains x (1000 warm-up + 1000
draws). Stan runs the same log density (benchmarks/_stan_side.py; checked against NumPyro's at 5 points), in
its own virtual environment (created by this script on first use: python -m venv + pip install pystan).
bayeskern runs in fresh processes, so compilation is paid as a user pays it: once without and once with the
persistent compilation cache (bayeskern.enable_compilation_cache). The posterior mean and sd of the lengthscale
are checked against quadrature on a fine grid (|error| < 3 MCSE for every sampler).

Run:  python benchmarks/bench_nuts_stan.py [--anchors benchmarks/.anchors] [--repeats 3] [--large]
"ESS/s sampling" divides the bulk ESS by the wall time of the sampling phase (bayeskern: MCMCResult.timings;
Stan: its per-chain "Elapsed Time (Sampling)", packed onto the machine's cores as PyStan runs them);
"incl. compilation" divides by the whole run_nuts call in a fresh process. Shared machines are noisy: every
configuration runs --repeats times (Stan with seeds 1, 2, ...; bayeskern in as many fresh processes, which draw
identical chains) and the table shows the median ESS/s of the runs, with the spread of their seconds.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CHAINS, WARMUP, SAMPLES = 4, 1000, 1000
CHECK_THETAS = [0.1, 0.2, 0.3, 0.5, 1.0]

BAYESKERN_SIDE = """
import json, sys, time
t_import = time.perf_counter()
import jax, numpy as np, bayeskern as bk
bk.enable_x64()
if sys.argv[2] == "cache":
    bk.enable_compilation_cache(sys.argv[3])
from bayeskern.inference import run_nuts
from bayeskern.models import bke_model
data = json.load(open(sys.argv[1]))
X, Z = np.asarray(data["x"])[:, None], np.asarray(data["z"])[:, None]
start = time.perf_counter()
run = run_nuts(bke_model, X, Z, key=jax.random.key(2), num_chains=data["chains"], num_warmup=data["warmup"],
               num_samples=data["samples"], progress_bar=False, tau2=data["tau2"])
seconds = time.perf_counter() - start
print(json.dumps({"theta": run.samples["lengthscale"].tolist(), "timings": run.timings, "call_seconds": seconds,
                  "n_leapfrog": float(run.sample_stats["n_steps"].mean())}))
"""


def problem(per_sample=400, m=10):
    import jax
    import bayeskern as bk
    from bayeskern.bke import hold_out_inducing

    XP, XQ = bk.datasets.normal_vs_laplace(per_sample, seed=0)
    X, Z = hold_out_inducing(np.vstack([XP, XQ]), jax.random.key(1), m)
    return np.asarray(X)[:, 0], np.asarray(Z)[:, 0]


LARGE_SIDE = """
import json, sys, time
import jax, jax.numpy as jnp, numpy as np, bayeskern as bk
from bayeskern.bke import SEPseudolikelihood
from bayeskern.inference import fit_type2, run_nuts
from bayeskern.models import bke_model
bk.enable_x64()
data = json.load(open(sys.argv[1]))
X, Z = np.asarray(data["x"])[:, None], np.asarray(data["z"])[:, None]
objective = SEPseudolikelihood.build(X, Z)
gradient = jax.jit(jax.value_and_grad(lambda rho: objective(jnp.exp(rho), 1.0)))
jax.block_until_ready(gradient(0.0))
start = time.perf_counter()
for k in range(50):
    jax.block_until_ready(gradient(0.01 * k))
per_gradient = (time.perf_counter() - start) / 50
start = time.perf_counter()
fit = fit_type2(X, Z)   # two local maxima here (l = 0.15 and 2.2, 166 nats apart): start at the global one
type2 = time.perf_counter() - start
run = run_nuts(bke_model, X, Z, key=jax.random.key(3), progress_bar=False, init_values={"lengthscale": fit.lengthscale})
print(json.dumps({"per_gradient": per_gradient, "wall": time.perf_counter() - start, "timings": run.timings,
                  "type2": type2, "maxima": [float(m[0]) for m in fit.local_maxima],
                  "rhat": run.diagnostics.max_rhat, "ess": run.diagnostics.min_ess_bulk,
                  "divergences": run.diagnostics.divergences, "mean": float(run.samples["lengthscale"].mean())}))
"""


def large(anchors):
    """Pooled n = 2·10^4, m = 50: seconds per gradient (bayeskern, Stan) and one default run_nuts to convergence."""
    x, z = problem(10_000, 50)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.json"
        json.dump({"x": x.tolist(), "z": z.tolist(), "tau2": 1.0, "check_thetas": CHECK_THETAS,
                   "gradient_only": 20}, open(data, "w"))
        subprocess.run([str(anchors_python(anchors)), str(HERE / "_stan_side.py"), str(data), str(Path(tmp) / "s.json")],
                       check=True)
        stan = json.load(open(Path(tmp) / "s.json"))
        out = subprocess.run([sys.executable, "-c", LARGE_SIDE, str(data)], check=True, capture_output=True,
                             text=True).stdout
    ours = json.loads(out.strip().splitlines()[-1])
    print(f"pooled n = {len(x)}, m = {len(z)}: seconds per gradient, Stan {stan['gradient_seconds']:.4f}, "
          f"bayeskern {ours['per_gradient']:.4f} ({stan['gradient_seconds'] / ours['per_gradient']:.1f}x)")
    print(f"type-II fit {ours['type2']:.1f} s, local maxima at l = {ours['maxima']}; then")
    print(f"default run_nuts from the fit, 4 chains x (1000 + 1000): wall {ours['wall']:.1f} s (warm-up "
          f"{ours['timings']['warmup']:.1f} s, sampling {ours['timings']['sampling']:.1f} s), max R-hat "
          f"{ours['rhat']:.4f}, min bulk ESS {ours['ess']:.0f}, divergences {ours['divergences']}, posterior mean "
          f"{ours['mean']:.4f}")


def quadrature(x, z, tau2):
    """Posterior mean and sd of the lengthscale by quadrature in log theta (trapezoid rule, 20001 points)."""
    import jax
    import jax.numpy as jnp
    from bayeskern.bke import SEPseudolikelihood

    objective = SEPseudolikelihood.build(x[:, None], z[:, None])
    rho = np.linspace(np.log(0.02), np.log(5.0), 20001)
    # log posterior density of rho = log theta: Gamma(1, 1) prior, L(theta) and the Jacobian theta
    log_p = np.asarray(jax.jit(jax.vmap(lambda r: objective(jnp.exp(r), tau2) - jnp.exp(r) + r))(rho))
    w = np.exp(log_p - log_p.max())
    theta = np.exp(rho)
    mass = np.trapezoid(w, rho)
    mean = np.trapezoid(w * theta, rho) / mass
    return mean, np.sqrt(np.trapezoid(w * (theta - mean) ** 2, rho) / mass), objective


def anchors_python(folder: Path) -> Path:
    python = folder / "bin" / "python"
    if not python.exists():
        print(f"# creating the anchors' virtual environment in {folder} (pystan)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "pystan", "numpy"], check=True)
    return python


def summary(theta, seconds, truth):
    import arviz as az

    theta = np.asarray(theta)
    ess = float(az.ess(theta, method="bulk"))
    mcse_mean, mcse_sd = float(az.mcse(theta, method="mean")), float(az.mcse(theta, method="sd"))
    mean, sd = theta.mean(), theta.std(ddof=1)
    ok = abs(mean - truth[0]) < 3 * mcse_mean and abs(sd - truth[1]) < 3 * mcse_sd
    return {"ess": ess, "ess_per_s": ess / seconds, "mean": mean, "sd": sd, "mean_err_mcse": (mean - truth[0]) / mcse_mean,
            "sd_err_mcse": (sd - truth[1]) / mcse_sd, "within_3_mcse": ok,
            "rhat": float(az.rhat(theta))}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--anchors", type=Path, default=HERE / ".anchors", help="virtual environment for PyStan")
    parser.add_argument("--chains", type=int, default=CHAINS)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of every configuration (median shown)")
    parser.add_argument("--large", action="store_true", help="also pooled n = 2·10^4, m = 50: per-gradient times "
                                                             "and a converged default run")
    parser.add_argument("--only-large", action="store_true", help="only the n = 2·10^4 figures")
    args = parser.parse_args()
    if args.only_large:
        return large(args.anchors)
    import bayeskern as bk
    from _common import machine_line

    bk.enable_x64()
    print(machine_line(f"pooled n = 800, m = 10, {args.chains} chains x ({WARMUP} + {SAMPLES})"), flush=True)
    x, z = problem()
    tau2 = 1.0
    truth_mean, truth_sd, objective = quadrature(x, z, tau2)
    print(f"quadrature: posterior mean {truth_mean:.6f}, sd {truth_sd:.6f}", flush=True)
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.json"
        json.dump({"x": x.tolist(), "z": z.tolist(), "tau2": tau2, "chains": args.chains, "warmup": WARMUP,
                   "samples": SAMPLES, "check_thetas": CHECK_THETAS, "repeats": args.repeats}, open(data, "w"))
        stan_out = Path(tmp) / "stan.json"
        subprocess.run([str(anchors_python(args.anchors)), str(HERE / "_stan_side.py"), str(data), str(stan_out)],
                       check=True)
        stan = json.load(open(stan_out))
        ours = [np.log(t) + float(objective(t, tau2)) - t for t in CHECK_THETAS]   # the same log density, by hand
        gap = max(abs(a - b) / abs(b) for a, b in zip(stan["log_density"], ours))
        print(f"log density, Stan vs bayeskern at theta = {CHECK_THETAS}: max relative difference {gap:.1e}")
        runs = {}
        for label, mode in (("fresh process", "plain"), ("fresh process, compilation cache warm", "cache")):
            if mode == "cache":   # a first process fills the cache
                subprocess.run([sys.executable, "-c", BAYESKERN_SIDE, str(data), "cache", str(Path(tmp) / "jax")],
                               check=True, capture_output=True)
            runs[label] = [json.loads(subprocess.run(
                [sys.executable, "-c", BAYESKERN_SIDE, str(data), mode, str(Path(tmp) / "jax")], check=True,
                capture_output=True, text=True).stdout.strip().splitlines()[-1]) for _ in range(args.repeats)]
    truth = (truth_mean, truth_sd)
    packed = min(cores, args.chains)
    rows = [("PyStan 3 (sampling)", [(r["theta"], sum(r["chain_sampling_seconds"]) / packed, r["n_leapfrog"])
                                     for r in stan["runs"]]),
            ("PyStan 3 (warm-up + sampling, compiled model cached)",
             [(r["theta"], r["wall_seconds"], r["n_leapfrog"]) for r in stan["runs"]])]
    for label, repeats in runs.items():
        assert all(r["theta"] == repeats[0]["theta"] for r in repeats), "fresh processes drew different chains"
        rows.append((f"bayeskern default run_nuts, {label} (sampling)",
                     [(r["theta"], r["timings"]["sampling"], r["n_leapfrog"]) for r in repeats]))
        rows.append((f"bayeskern default run_nuts, {label} (whole call incl. compilation)",
                     [(r["theta"], r["call_seconds"], r["n_leapfrog"]) for r in repeats]))
    rows = [(label, sorted((summary(theta, seconds, truth) | {"seconds": seconds, "leapfrog": leapfrog}
                            for theta, seconds, leapfrog in repeats), key=lambda s: s["ess_per_s"]))
            for label, repeats in rows]
    print(f"| sampler | seconds (median of {args.repeats}; min-max) | bulk ESS | ESS/s (median) | x Stan sampling | "
          "mean (err/MCSE) | sd (err/MCSE) | R-hat | leapfrog/draw |")
    print("|---|---|---|---|---|---|---|---|---|")
    reference = rows[0][1][len(rows[0][1]) // 2]["ess_per_s"]
    for label, runs_of_row in rows:
        s, seconds = runs_of_row[len(runs_of_row) // 2], [r["seconds"] for r in runs_of_row]
        print(f"| {label} | {s['seconds']:.2f} ({min(seconds):.2f}-{max(seconds):.2f}) | {s['ess']:.0f} | "
              f"{s['ess_per_s']:.0f} | {s['ess_per_s'] / reference:.1f} | {s['mean']:.4f} ({s['mean_err_mcse']:+.1f}) | "
              f"{s['sd']:.4f} ({s['sd_err_mcse']:+.1f}) | {s['rhat']:.4f} | {s['leapfrog']:.2f} |")
    print("all posteriors within 3 MCSE of quadrature: "
          f"{all(s['within_3_mcse'] for _, runs_of_row in rows for s in runs_of_row)}")
    if args.large:
        large(args.anchors)


if __name__ == "__main__":
    main()
