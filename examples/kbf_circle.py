"""Xu et al. (2022, Section 5.2): kernel Bayes filters on noisy circular dynamics vs the EKF.

Latent z_t on a noisy circle (rotation: omega = 0.3; oscillatory: omega = 0.4, beta = 0.4, M = 8),
observed as x_t = z_t + N(0, 0.2^2 I). IW-KBF and original KBF are tuned by the protocol of kbr.tune_kbf (median
bandwidth multiplier and lam by validation on the last 200 training steps, eta by the KuLSIF LOO) on
T = 500 training steps and filter the next 200; the EKF knows the true dynamics and noise levels.
The static reference E[z_t | x_t] of a JDL fit (kbr.jdl_regression: no dynamics) shows what the filters gain
from the transition model. Figure: test MSE per method and setting, and the first latent coordinate of one test run.

Run: python examples/kbf_circle.py [--runs 5] [--T 500] [--out examples-out]
"""

import argparse
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import bayeskern as bk
from bayeskern import kbr
from bayeskern.plotting import save_figure

METHODS = ("EKF", "IW-KBF", "original KBF", "raw observations", "JDL E[z | x]")


def run_once(setting, key, *, T=500, T_test=200, amp_phase="current"):
    """Test MSEs (EKF, IW, original, raw, JDL reference) and the filtered traces of one run."""
    seq = kbr.data.circle_dynamics(T, key, T_test=T_test, setting=setting, amp_phase=amp_phase)
    f, jac = kbr.data.circle_transition(setting, amp_phase)
    noise = 0.04 * jnp.eye(2)
    traces = {"EKF": kbr.ekf_filter(seq.X_test, f, jac, noise, noise, jnp.zeros(2), 50.0 * jnp.eye(2))}
    for name, method in (("IW-KBF", "iw"), ("original KBF", "original")):
        traces[name] = kbr.tune_kbf(seq.X, seq.Z, method=method).filter.filter(seq.X_test)
    traces["raw observations"] = seq.X_test
    traces["JDL E[z | x]"] = kbr.jdl_regression(seq.X, seq.Z).conditional_expectation(seq.X_test).mean
    return np.array([kbr.filter_mse(traces[m], seq.Z_test) for m in METHODS]), traces, seq


def main(out, runs=5, settings=("rotation", "oscillatory"), T=500, seed=0):
    """Returns {setting: (runs, 4) MSEs in METHODS order} and writes kbf_circle.png."""
    bk.enable_x64()
    results, examples = {}, {}
    for setting in settings:
        rows = []
        for r in range(runs):
            mse, traces, seq = run_once(setting, jax.random.fold_in(jax.random.key(seed), r), T=T)
            rows.append(mse)
            if r == 0:
                examples[setting] = (traces, seq)
        results[setting] = np.array(rows)
        summary = ", ".join(f"{m} {v:.4f}" for m, v in zip(METHODS, results[setting].mean(0)))
        print(f"{setting}: {summary}", flush=True)
    fig, axes = plt.subplots(1, 1 + len(settings), figsize=(4.5 * (1 + len(settings)), 3.6))
    width = 0.8 / len(METHODS)
    for j, m in enumerate(METHODS):
        means = [results[s][:, j].mean() for s in settings]
        sds = [results[s][:, j].std() for s in settings]
        axes[0].bar(np.arange(len(settings)) + j * width, means, width, yerr=sds, capsize=3, label=m)
    axes[0].set_xticks(np.arange(len(settings)) + 0.4 - width / 2, settings)
    axes[0].set(ylabel="test MSE", title=f"{runs} runs, T = {T}")
    axes[0].legend(fontsize=8)
    for ax, setting in zip(axes[1:], settings):
        traces, seq = examples[setting]
        t = np.arange(seq.Z_test.shape[0])
        ax.plot(t, seq.Z_test[:, 0], "k-", lw=1.5, label="latent")
        ax.plot(t, seq.X_test[:, 0], ".", color="0.6", ms=3, label="observation")
        for m in METHODS[:3] + METHODS[4:]:
            ax.plot(t, traces[m][:, 0], lw=1, label=m)
        ax.set(xlabel="test step", ylabel="first coordinate", title=setting)
        ax.set_xlim(0, 60)
    axes[-1].legend(fontsize=8)
    save_figure(fig, Path(out) / "kbf_circle.png")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--T", type=int, default=500)
    parser.add_argument("--out", default="examples-out")
    args = parser.parse_args()
    main(args.out, args.runs, T=args.T)
