"""Xu et al. (2022, Section 5.3): kernel Bayes filtering from images, on the procedural stand-ins.

sprite (a heart on a 64 x 64 canvas at quantised positions of oscillatory latent dynamics) and panorama (36 x 48
RGB views of a fixed 360-degree scene at a noisy heading). Methods: Original and IW KBR with a Gaussian kernel on
raw pixels (hyperparameters by the tuning protocol of kbr.tune_kbf), and IW(NN): the image network (1024-512-128-32, spectral
normalisation, batch norm, dropout 0.5 on panorama) learned with the unweighted adaptive loss, lambda validated
on the same grid (``--network cnn``: the small convolutional network of kbr.train_image_cnn instead). Reported:
test MSE per method (mean over runs); figure: filtered latents of the last run.

Run: python examples/kbf_images.py [--tasks sprite panorama] [--runs 3] [--T 500] [--network mlp|cnn]
     [--out examples-out]
"""

import argparse
from pathlib import Path

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import bayeskern as bk
from bayeskern import kbr
from bayeskern.plotting import save_figure

METHODS = ("Original", "IW", "IW(NN)")
GENERATORS = {"sprite": kbr.data.sprite_sequence, "panorama": kbr.data.panorama_sequence}
DROPOUT = {"sprite": 0.0, "panorama": 0.5}
IMAGE_SHAPES = {"sprite": (64, 64, 1), "panorama": (36, 48, 3)}


def run_task(task: str, key, *, T=500, T_test=200, steps=100, lam_grid=kbr.LAMBDA_GRIDS["iw"], hidden=kbr.IMAGE_HIDDEN,
             network="mlp"):
    """{method: (test MSE, filtered means (T_test, 2))} plus "raw" and the test latents for one run."""
    k_data, k_net = jax.random.split(key)
    seq = GENERATORS[task](T, k_data, T_test=T_test)
    out = {}
    for name, method in (("Original", "original"), ("IW", "iw")):
        means = kbr.tune_kbf(seq.X, seq.Z, method=method).filter.filter(seq.X_test)
        out[name] = (kbr.filter_mse(means, seq.Z_test), np.asarray(means))

    def train(X, Z, lam, sigma_z):
        if network == "cnn":
            return kbr.train_image_cnn(k_net, X, Z, image_shape=IMAGE_SHAPES[task], lam=lam, sigma_z=sigma_z,
                                       steps=steps)[0]
        return kbr.train_image_features(k_net, X, Z, lam=lam, sigma_z=sigma_z, hidden=hidden, steps=steps,
                                        dropout=DROPOUT[task])[0]

    means = kbr.tune_feature_filter(seq.X, seq.Z, train, lam_grid=lam_grid).filter.filter(seq.X_test)
    out["IW(NN)"] = (kbr.filter_mse(means, seq.Z_test), np.asarray(means))
    return out, np.asarray(seq.Z_test)


def main(out_dir="examples-out", tasks=("sprite", "panorama"), runs=3, seed=0, **kwargs):
    """Run ``runs`` seeds per task, print the MSE table, save kbf_images.png; returns {task: [{method: mse}]}."""
    results, last = {}, {}
    for task in tasks:
        results[task] = []
        for r in range(runs):
            out, Z_test = run_task(task, jax.random.fold_in(jax.random.key(seed), r), **kwargs)
            results[task].append({name: mse for name, (mse, _) in out.items()})
            last[task] = (out, Z_test)
            print(f"{task} run {r}: " + ", ".join(f"{m} {v:.4f}" for m, v in results[task][-1].items()), flush=True)
    print(f"test MSE, mean +- sd over {runs} runs")
    for task, rows in results.items():
        print(f"{task:>9}: " + ", ".join(f"{m} {np.mean([r[m] for r in rows]):.4f} +- "
                                         f"{np.std([r[m] for r in rows]):.4f}" for m in METHODS))
    fig, axes = plt.subplots(len(tasks), 1, figsize=(10, 3 * len(tasks)), squeeze=False)
    for ax, task in zip(axes[:, 0], tasks):
        out, Z_test = last[task]
        ax.plot(Z_test[:100, 0], "k", lw=2, label="latent z_1")
        for name in METHODS:
            ax.plot(out[name][1][:100, 0], lw=1, label=f"{name} ({out[name][0]:.3f})")
        ax.set(title=f"{task}: first latent coordinate, first 100 test steps", xlabel="t")
        ax.legend(fontsize=8, ncol=4)
    fig.tight_layout()
    print(f"figure: {save_figure(fig, Path(out_dir) / 'kbf_images.png')}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["sprite", "panorama"], choices=sorted(GENERATORS))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--T", type=int, default=500)
    parser.add_argument("--network", choices=("mlp", "cnn"), default="mlp", help="IW(NN) feature network")
    parser.add_argument("--out", default="examples-out")
    args = parser.parse_args()
    bk.enable_x64()
    main(args.out, tuple(args.tasks), args.runs, T=args.T, network=args.network)
