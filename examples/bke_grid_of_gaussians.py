"""Flaxman et al. (2016, Section 5.1): MMD two-sample test on the grid of Gaussians, BKL vs the median heuristic.

P: nine unit Gaussians on a 3 x 3 grid (spacing 10 sqrt 2); Q: the same centres with
covariances of eigenvalue ratio eps, rotated by pi/4. For every repetition the lengthscale is
learned by BKL (type-II ML of the BKE pseudolikelihood, tau2 = 1, m = 100 held-out inducing
points of the pooled sample) and compared with the median heuristic. Figures: scatter plots,
type-II error vs eps, the multimodal likelihood curve, and the witness posterior mean at eps = 2.

Run: python examples/bke_grid_of_gaussians.py [--reps 20] [--permutations 200] [--out examples-out]
"""

import argparse
from pathlib import Path

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from tqdm.auto import tqdm

import bayeskern as bk
from bayeskern.bke import embedding_posterior, hold_out_inducing
from bayeskern.inference import fit_type2
from bayeskern.plotting import plot_likelihood_curve, plot_witness_2d, save_figure

EPS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 12.0, 15.0)


def rejection_rates(eps, reps, permutations, seed=1000, m=100, alpha=0.05):
    """Rejection rates of the MMD test with the BKL and median-heuristic lengthscales over fresh samples."""
    reject = {"bkl": [], "median": []}
    for r in tqdm(range(reps), desc=f"eps = {eps}", leave=False):
        P, Q = bk.datasets.blobs(eps, seed=seed + r)
        key = jax.random.key(seed + r)
        fit = fit_type2(*hold_out_inducing(np.vstack([P, Q]), jax.random.fold_in(key, 1), m))
        for rule, ls in (("bkl", fit.lengthscale), ("median", float(bk.median_heuristic(P, Q)))):
            result = bk.mmd_test(P, Q, bk.RBF(ls), key=jax.random.fold_in(key, 2), n_permutations=permutations)
            reject[rule].append(result.reject(alpha))
    return {rule: float(np.mean(v)) for rule, v in reject.items()}


def main(out: Path, reps: int = 20, permutations: int = 200, eps_values=EPS, mesh: int = 200):
    bk.enable_x64()
    out.mkdir(parents=True, exist_ok=True)
    P, Q = bk.datasets.blobs(2.0, seed=1)
    pool = np.vstack([P, Q])
    X, Z = hold_out_inducing(pool, jax.random.key(1), 100)
    curve_fit = fit_type2(X, Z, grid=np.geomspace(0.2, 60.0, 161))
    median = float(bk.median_heuristic(P, Q))
    print(f"eps = 2: BKL lengthscale {curve_fit.lengthscale:.4f} (tau2 = 1, m = 100), median heuristic {median:.2f}")
    print("  local maxima:", ", ".join(f"{t:.3g} ({v - curve_fit.log_likelihood:+.0f})" for t, v in curve_fit.local_maxima))

    rates = {}
    for eps in eps_values:
        rates[eps] = rejection_rates(eps, reps, permutations)
        kind = "size" if eps == 1.0 else "type-II error"
        shown = {rule: (r if eps == 1.0 else 1 - r) for rule, r in rates[eps].items()}
        print(f"eps = {eps:>4}: {kind} BKL {shown['bkl']:.2f}, median heuristic {shown['median']:.2f}")

    s = 10 * np.sqrt(2)
    axes_1d = np.linspace(-2 * s, 2 * s, mesh)
    xx, yy = np.meshgrid(axes_1d, axes_1d)
    mean = _witness_mean(P, Q, curve_fit.lengthscale, xx, yy)

    fig, ax = plt.subplots(1, 5, figsize=(26, 4.8))
    for a, eps in zip(ax[:2], (2.0, 10.0)):
        Pa, Qa = bk.datasets.blobs(eps, seed=1)
        a.scatter(*Pa.T, s=2, label="P"), a.scatter(*Qa.T, s=2, label="Q")
        a.set_title(f"(A/B) samples, eps = {eps:g}"), a.set_aspect("equal"), a.legend(markerscale=4)
    errs = [e for e in eps_values if e != 1.0]
    for rule, style in (("bkl", "o-"), ("median", "s--")):
        ax[2].plot(errs, [1 - rates[e][rule] for e in errs], style, label="BKL" if rule == "bkl" else "median heuristic")
    ax[2].set_xlabel("eps"), ax[2].set_ylabel("type-II error"), ax[2].set_ylim(-0.05, 1.05)
    ax[2].set_title(f"(C) {reps} repetitions, B = {permutations}"), ax[2].legend()
    plot_likelihood_curve(ax[3], curve_fit, median)
    ax[3].set_title("(D) BKE pseudolikelihood, eps = 2")
    plot_witness_2d(ax[4], xx, yy, mean)
    ax[4].set_title(f"(E) witness posterior mean, eps = 2, lengthscale {curve_fit.lengthscale:.3g}")
    save_figure(fig, out / "bke_grid_of_gaussians.png", dpi=110)
    return curve_fit, median, rates


def _witness_mean(P, Q, lengthscale, xx, yy):
    """Posterior mean of mu_P - mu_Q on a large mesh, in row blocks (the mean needs no joint covariance)."""
    k = bk.RBF(lengthscale)
    pP, pQ = embedding_posterior(P, k, 1.0), embedding_posterior(Q, k, 1.0)
    points = np.column_stack([xx.ravel(), yy.ravel()])
    values = np.concatenate([np.asarray(pP.mean(b) - pQ.mean(b)) for b in np.array_split(points, 20)])
    return values.reshape(xx.shape)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--permutations", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path("examples-out"))
    args = parser.parse_args()
    main(args.out, args.reps, args.permutations)
