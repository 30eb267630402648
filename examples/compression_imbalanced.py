"""Classification (Broadbent et al. 2025): compressing the 4-class imbalanced stand-in to 3% of its size.

x in R^2 from a 100-component Gaussian mixture, y ~ Categorical(softmax(Wx + b)) with class marginals
(0.32, 0.12, 0.19, 0.37) and Bayes accuracy about 0.63. n_train = 1000, 125 validation points, 2000 test
points; m = 30 (3%), indicator kernel on the labels, lambda_C tuned at m and lambda_P at n (compression.select_lambda).
Reported: accuracy, macro-F1 and the RMSE of the clip-normalised class probabilities against the true ones,
for Random (mean of 10 subsets), JKIP, ACKIP and the full-data KCME. Figure: the data and the compressed sets.

Run: python examples/compression_imbalanced.py [--seeds 0 1] [--m 30] [--out examples-out]
"""

import argparse
from pathlib import Path

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import bayeskern as bk
from bayeskern import compression as bc
from bayeskern.plotting import save_figure

def scores(probs, y, truth, n_classes):
    """(accuracy, macro-F1, class-probability RMSE against ``truth``) of predicted probabilities (N, C)."""
    pred = probs.argmax(1)
    f1 = []
    for c in range(n_classes):
        tp, fp, fn = np.sum((pred == c) & (y == c)), np.sum((pred == c) & (y != c)), np.sum((pred != c) & (y == c))
        f1.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(pred == y)), float(np.mean(f1)), float(np.sqrt(np.mean((probs - truth) ** 2)))


def compare(x, y, n_train, n_val, m, key, *, truth=None, num_steps=1000):
    """Random / JKIP / ACKIP at size m against the full-data KCME on the rows after n_train + n_val.

    x (n, d) in the user's units, y (n,) labels 0..C-1; ``truth`` (n, C): true class probabilities (default: the
    full-data KCME's). Returns ({method: (accuracy, macro-F1, probability RMSE)}, {method: set in user's units}).
    """
    n_classes = int(y.max()) + 1
    stats = bc.fit_standardiser(x[:n_train], y[:n_train], discrete=True)
    xs = np.asarray(stats.transform(x, y)[0])
    xt, yt = xs[:n_train], y[:n_train]
    xv, yv = xs[n_train:n_train + n_val], y[n_train:n_train + n_val]
    xe, ye = xs[n_train + n_val:], y[n_train + n_val:]
    kx, ky = bk.RBF(bk.median_heuristic(xt, convention="sq", max_points=1000)), bk.Indicator()
    lam_c = bc.select_lambda(xt, yt, xv, yv, kx, ky, size=m, key=key)
    lam_p = bc.select_lambda(xt, yt, xv, yv, kx, ky, size=n_train, key=key)
    probs = lambda cx, cy, lam: np.asarray(bc.class_probabilities(cy, bc.kcme_weights(cx, xe, kx, lam), n_classes))
    full = probs(xt, yt, lam_p)
    pe = full if truth is None else truth[n_train + n_val:]
    out = {"full data": scores(full, ye, pe, n_classes)}
    subsets = [np.asarray(jax.random.choice(k, n_train, (m,), replace=False)) for k in jax.random.split(key, 10)]
    out["Random"] = tuple(np.mean([scores(probs(xt[i], yt[i], lam_c), ye, pe, n_classes) for i in subsets], axis=0))
    sets = {}
    for name, fn in (("JKIP", bc.jkip), ("ACKIP", bc.ackip)):
        res = fn(xt, yt, m, key=jax.random.fold_in(key, 1), lam_c=lam_c, num_steps=num_steps, kernel_x=kx,
                 kernel_y=ky, standardise=False, progress_bar=False)
        out[name] = scores(probs(res.x, res.y, lam_c), ye, pe, n_classes)
        sets[name] = (np.asarray(stats.inverse(res.x, res.y)[0]), res.y)
    return out, sets


def run_seed(seed: int, m: int = 30, *, n_train=1000, n_val=125, n_test=2000, num_steps=1000):
    """:func:`compare` on one draw of the imbalanced stand-in; also returns the training data for the figure."""
    x, y, p = bc.data.imbalanced(n_train + n_val + n_test, seed)
    out, sets = compare(x, y, n_train, n_val, m, jax.random.key(seed), truth=p, num_steps=num_steps)
    return out, sets, (x[:n_train], y[:n_train])


def main(out_dir="examples-out", seeds=(0, 1), m=30, **kwargs):
    runs = [run_seed(s, m, **kwargs) for s in seeds]
    methods = ("Random", "JKIP", "ACKIP", "full data")
    print(f"imbalanced stand-in, m = {m} (mean over {len(seeds)} seeds)\n{'method':>10} {'accuracy':>9} {'macro-F1':>9} "
          f"{'prob RMSE':>9}")
    table = {k: np.mean([r[0][k] for r in runs], axis=0) for k in methods}
    for k in methods:
        print(f"{k:>10} " + " ".join(f"{v:9.3f}" for v in table[k]))
    _, sets, (x, y) = runs[0]
    fig, axes = plt.subplots(1, 2, figsize=(11, 5), sharex=True, sharey=True)
    for ax, (name, (cx, cy)) in zip(axes, sets.items()):
        ax.scatter(x[:, 0], x[:, 1], c=y, cmap="tab10", vmin=0, vmax=9, s=4, alpha=0.3)
        ax.scatter(cx[:, 0], cx[:, 1], c=cy, cmap="tab10", vmin=0, vmax=9, s=90, edgecolors="k", marker="*")
        ax.set(title=f"{name}: {m} of {len(x)} points", xlabel="$x_1$", ylabel="$x_2$")
    path = save_figure(fig, Path(out_dir) / "compression_imbalanced.png")
    print(f"figure: {path}")
    return table


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--m", type=int, default=30)
    parser.add_argument("--out", default="examples-out")
    args = parser.parse_args()
    bk.enable_x64()
    main(args.out, tuple(args.seeds), args.m)
