"""Flaxman et al. (2016, Section 5.2): posterior over the witness function, N(0, 1) vs Laplace(0, sqrt(1/2)), n = 50 and 400.

For each n the lengthscale posterior is sampled with NUTS (4 chains x 400 iterations, 200 of
them warm-up, tau2 = 1 fixed, Gamma(1, 1) prior, m = 10 held-out inducing points from the pooled
sample, chains started at the type-II fit); for every draw one posterior sample of mu_P and one of
mu_Q are differenced on 401 points of [-4, 4]. Figure: posterior mean and 80% pointwise band.

Run: python examples/bke_witness_1d.py [--backend numpyro|blackjax] [--out examples-out]
"""

import argparse
from pathlib import Path

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import bayeskern as bk
from bayeskern.bke import hold_out_inducing, witness_posterior
from bayeskern.inference import fit_type2, run_nuts
from bayeskern.models import bke_model
from bayeskern.plotting import plot_witness_1d, save_figure


def witness_for(n, *, seed=0, backend="numpyro", chains=4, warmup=200, samples=200, progress_bar=True, witness=True):
    """NUTS over the lengthscale, then (``witness=True``) the witness posterior over the draws.

    Returns (mcmc, witness or None, type-II fit).
    """
    XP, XQ = bk.datasets.normal_vs_laplace(n, seed=seed)
    key = jax.random.key(seed)
    X, Z = hold_out_inducing(np.vstack([XP, XQ]), jax.random.fold_in(key, 1), 10)
    fit = fit_type2(X, Z)
    mcmc = run_nuts(bke_model, X, Z, key=jax.random.fold_in(key, 2), backend=backend, num_chains=chains,
                    num_warmup=warmup, num_samples=samples, init_values={"lengthscale": fit.lengthscale},
                    progress_bar=progress_bar)
    if not witness:
        return mcmc, None, fit
    grid = np.linspace(-4.0, 4.0, 401)[:, None]
    post = witness_posterior(XP, XQ, grid=grid, hyper_draws={"lengthscale": mcmc.draws()["lengthscale"]}, band=0.8,
                             key=jax.random.fold_in(key, 3))
    return mcmc, post, fit


def main(out: Path, sizes=(50, 400), backend="numpyro", progress_bar=True):
    bk.enable_x64()
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    fig, axes = plt.subplots(1, len(sizes), figsize=(6 * len(sizes), 4.2), squeeze=False)
    for ax, n in zip(axes[0], sizes):
        mcmc, post, fit = witness_for(n, backend=backend, progress_bar=progress_bar)
        theta = mcmc.draws()["lengthscale"]
        d = mcmc.diagnostics
        print(f"n = {n}: type-II lengthscale {fit.lengthscale:.4f}; NUTS posterior mean {theta.mean():.4f} "
              f"(80%: {np.quantile(theta, 0.1):.3f}-{np.quantile(theta, 0.9):.3f}), R-hat {d.max_rhat:.4f}, "
              f"bulk ESS {d.min_ess_bulk:.0f}, divergences {d.divergences}; "
              f"80% band excludes 0 on {100 * post.fraction_excluding_zero:.0f}% of [-4, 4]")
        plot_witness_1d(ax, post.grid[:, 0], post.mean, band=(post.lower, post.upper))
        ax.set_title(f"n = {n}: band excludes 0 on {100 * post.fraction_excluding_zero:.0f}% of the grid")
        results[n] = (mcmc, post, fit)
    save_figure(fig, out / "bke_witness_1d.png")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("numpyro", "blackjax"), default="numpyro")
    parser.add_argument("--out", type=Path, default=Path("examples-out"))
    args = parser.parse_args()
    main(args.out, backend=args.backend)
