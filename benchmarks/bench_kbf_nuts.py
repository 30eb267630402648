"""NUTS over the kernel Bayes filter's hyperparameters on the rotation dynamics of Xu et al. (2022, Section 5.2).

Grid-search filter (kbr.tune_kbf) vs the Bayesian-averaged filter from kbf_hyper_model: wall time, R-hat,
divergences, test MSE ratio and 90% predictive-band coverage.

The pseudo-likelihood's filters are low rank on --landmarks Nystrom landmarks (p_x for the observations, p_z for
the latents: O(T p_x^2 + T p_z) per filter step instead of O(T^3); 0 = the exact filter); predictive filtering
refits the filter on all T. NUTS adapts a dense mass matrix (five correlated hyperparameters) with trees of depth
at most --depth and runs the chains one after the other (--chain-method parallel gives each chain its own device via numpyro.set_host_device_count; on the 2-core
CPU of the recorded runs that was slower, since one JAX process already keeps both cores busy).
--compress m instead builds them on m ACKIP-compressed fit transitions (models.compress_split; O(m^3) per
gradient, no landmarks): issue 7, acceptance 2 compares it with the full training set.

--default-call runs inference.sample_kbf_posterior with its defaults (the recommended call) on both dynamics at
T = 300 and 600 and --seeds seeds: NUTS wall time (compilation included), max split R-hat of the hyperparameters
(what run_nuts reports) and of the filtered validation means too, test MSE against the grid filter and coverage.

Run: python benchmarks/bench_kbf_nuts.py [--T 300] [--n-val 100] [--landmarks 10 20] [--chains 2] [--warmup 300]
     [--samples 300] [--depth 3] [--chain-method sequential] [--compress 40]
     (the CPU setting; --T 500 --n-val 200 suits a GPU)
     python benchmarks/bench_kbf_nuts.py --default-call [--seeds 0 1] [--default-samples 1000]
         [--cases oscillatory:300:0 ...] [--default-chain-method sequential]
"""

import argparse
import inspect
import time

import jax
import numpy as np
import numpyro

import bayeskern as bk
from bayeskern import kbr
from bayeskern.inference import (band_coverage, diagnose, kbf_init_values, posterior_predictive_filter, run_nuts,
                                 sample_kbf_posterior)
from bayeskern.models import compress_split, kbf_hyper_model, split_for_validation
from _common import machine_line


def run(*, T=300, n_val=100, landmarks=(10, 20), compress=0, compress_steps=1000, chains=2, warmup=300, samples=300,
        depth=3, chain_method="sequential", seed=0, setting="rotation", log=print) -> dict:
    """The acceptance-4 run: grid filter, NUTS over its hyperparameters, Bayesian-averaged predictive filtering.

    Returns grid_mse, bayes_mse, coverage (90% predictive band), hyper_coverage, diagnostics, wall (NUTS seconds)
    and draws (site -> flattened draws); ``log`` receives the progress lines.
    """
    model = f"ACKIP-compressed to m = {compress} transitions" if compress else f"landmarks {landmarks or 'none (exact)'}"
    log(machine_line(f"{setting}, T = {T}, V = {n_val}, {model}, seed {seed}"))
    seq = kbr.data.circle_dynamics(T, jax.random.key(seed), setting=setting)
    start = time.perf_counter()
    tuned = kbr.tune_kbf(seq.X, seq.Z, method="iw", n_val=n_val)
    grid_mse = kbr.filter_mse(tuned.filter.filter(seq.X_test), seq.Z_test)
    log(f"grid filter: c = {tuned.c}, lam = {tuned.lam}, eta = {tuned.eta}, test MSE {grid_mse:.4f} "
        f"({time.perf_counter() - start:.1f} s)")
    split = split_for_validation(seq.X, seq.Z, n_val=n_val, num_landmarks=None if compress else landmarks)
    if compress:
        start = time.perf_counter()
        split = compress_split(split, compress, key=jax.random.key(seed + 3), num_steps=compress_steps)
        log(f"ACKIP compression of {T - n_val - 1} transitions to {compress}: {time.perf_counter() - start:.1f} s")
    mcmc = run_nuts(kbf_hyper_model, split, key=jax.random.key(seed + 1), num_chains=chains, num_warmup=warmup,
                    num_samples=samples, init_values=kbf_init_values(tuned, 2),
                    max_tree_depth=depth, rhat_max=1.05, min_ess=1, dense_mass=True, chain_method=chain_method,
                    progress_bar=False)
    d, draws = mcmc.diagnostics, mcmc.draws()
    pred = posterior_predictive_filter(draws, seq.X, seq.Z, seq.X_test, key=jax.random.key(seed + 2))
    out = {"grid_mse": grid_mse, "bayes_mse": kbr.filter_mse(pred.mean, seq.Z_test),
           "coverage": band_coverage(pred.predictive_band, seq.Z_test),
           "hyper_coverage": band_coverage(pred.hyper_band, seq.Z_test), "diagnostics": d,
           "wall": mcmc.wall_time, "draws": draws}
    log(f"NUTS {chains} x ({warmup} + {samples}), depth {depth}, {chain_method} chains on "
        f"{jax.local_device_count()} devices: wall {mcmc.wall_time:.1f} s, max R-hat "
        f"{d.max_rhat:.3f}, min bulk ESS {d.min_ess_bulk:.0f}, divergences {d.divergences} "
        f"({100 * d.divergences / (chains * samples):.1f}%)")
    log(f"Bayesian-averaged test MSE {out['bayes_mse']:.4f} = {out['bayes_mse'] / grid_mse:.3f} x grid; 90% "
        f"predictive band coverage {out['coverage']:.3f}; hyperparameter band coverage {out['hyper_coverage']:.3f}")
    for k in ("log_cx", "log_cz", "log_lam", "log_eta", "log_s"):
        v = np.asarray(draws[k])
        log(f"  {k}: mean {v.mean():.3f}, sd {v.std():.3f}")
    return out


def default_call(seeds, log=print, num_samples=1000, cases=None, chain_method=None):
    """sample_kbf_posterior with its defaults (draws per chain: num_samples; chain_method None: its default) on both
    dynamics at T = 300 and 600, or on the given (dynamics, T, seed) cases: one line per run."""
    log(machine_line(f"inference.sample_kbf_posterior, its defaults, num_samples = {num_samples}, chain_method = "
                     f"{chain_method or 'default'}"))
    log("dynamics     T  seed | tune s | NUTS s | R-hat (hyper) | R-hat (with z_val_hat) | min ESS | "
        "MSE / grid | cover")
    cases = cases or [(setting, T, seed) for setting in ("rotation", "oscillatory") for T in (300, 600)
                      for seed in seeds]
    n_val = inspect.signature(sample_kbf_posterior).parameters["n_val"].default
    for setting, T, seed in cases:
        seq = kbr.data.circle_dynamics(T, jax.random.key(seed), setting=setting)
        start = time.perf_counter()
        tuned = kbr.tune_kbf(seq.X, seq.Z, n_val=n_val)   # the start, on the default call's validation steps
        tune_s = time.perf_counter() - start
        mcmc = sample_kbf_posterior(seq.X, seq.Z, key=jax.random.key(seed + 1), tuned=tuned,
                                    num_samples=num_samples, chain_method=chain_method, progress_bar=False,
                                    rhat_max=1.01)
        every = diagnose(mcmc.idata, warn=False)
        pred = posterior_predictive_filter(mcmc.draws(), seq.X, seq.Z, seq.X_test,
                                           key=jax.random.key(seed + 2))
        grid = kbr.filter_mse(tuned.filter.filter(seq.X_test), seq.Z_test)
        d = mcmc.diagnostics
        log(f"{setting:11s} {T:4d} {seed:5d} | {tune_s:6.1f} | {mcmc.wall_time:6.1f} | {d.max_rhat:13.4f} | "
            f"{every.max_rhat:22.4f} | {d.min_ess_bulk:7.0f} | "
            f"{kbr.filter_mse(pred.mean, seq.Z_test) / grid:10.3f} | "
            f"{band_coverage(pred.predictive_band, seq.Z_test):.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--T", type=int, default=300)
    parser.add_argument("--n-val", type=int, default=100)
    parser.add_argument("--landmarks", type=int, nargs="+", default=[10, 20],
                        help="landmarks per kernel, or for the observations and the latents (0: exact)")
    parser.add_argument("--compress", type=int, default=0, help="ACKIP-compressed fit transitions (0: none)")
    parser.add_argument("--compress-steps", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--chain-method", default="sequential", choices=("parallel", "sequential", "vectorized"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--setting", default="rotation", choices=("rotation", "oscillatory"))
    parser.add_argument("--default-call", action="store_true", help="the recommended call on both dynamics")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--default-samples", type=int, default=1000, help="--default-call: draws per chain")
    parser.add_argument("--cases", nargs="+", help="--default-call: only these DYNAMICS:T:SEED runs")
    parser.add_argument("--default-chain-method", choices=("processes", "parallel", "sequential", "vectorized"),
                        help="--default-call: chain_method of sample_kbf_posterior (default: its own choice)")
    args = parser.parse_args()
    if args.chain_method == "parallel":
        numpyro.set_host_device_count(args.chains)  # one CPU device per chain; before JAX's first computation
    bk.enable_x64()
    if args.default_call:
        cases = [(c.split(":")[0], int(c.split(":")[1]), int(c.split(":")[2])) for c in args.cases or []]
        default_call(args.seeds, log=lambda line: print(line, flush=True), num_samples=args.default_samples,
                     cases=cases, chain_method=args.default_chain_method)
        return
    landmarks = tuple(args.landmarks) if len(args.landmarks) > 1 else (args.landmarks[0] or None)
    run(T=args.T, n_val=args.n_val, landmarks=landmarks, compress=args.compress,
        compress_steps=args.compress_steps, chains=args.chains, warmup=args.warmup, samples=args.samples,
        depth=args.depth, chain_method=args.chain_method, seed=args.seed, setting=args.setting,
        log=lambda line: print(line, flush=True))


if __name__ == "__main__":
    main()
