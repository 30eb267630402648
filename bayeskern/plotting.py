"""Matplotlib figures for test results and witness functions (imported lazily by the CLI and examples)."""

from pathlib import Path

import numpy as np

from ._validation import as_finite_array, check_count
from .fitted import write_atomic

__all__ = ["plot_null_distribution", "plot_kernel_evidence", "plot_witness_1d", "plot_witness_2d", "plot_likelihood_curve", "plot_ranges",
           "save_figure"]


def save_figure(fig, path, dpi: int = 120) -> Path:
    """Lay out ``fig``, write it to ``path`` atomically (creating the folder) and close it.

    Args:
        fig: a matplotlib figure.
        path: the image file; its suffix gives the format (PNG when there is none).
        dpi: resolution, an integer >= 1.

    Returns:
        The path written.

    Raises:
        TypeError: for a dpi that is not an integer.
        ValueError: for a dpi below 1, or a format matplotlib does not know.
    """
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    check_count(dpi, "dpi")
    write_atomic(path, lambda f: fig.savefig(f, dpi=dpi, format=path.suffix.lstrip(".") or "png"))
    plt.close(fig)
    return path


def plot_ranges(ax, groups: dict, names):
    """Mean and min-max range per name over repetitions, one offset series per group.

    Args:
        ax: the matplotlib axes to draw on.
        groups: {label: (reps, len(names)) values}, one series per label.
        names: the x-axis labels, one per column of the values.

    Raises:
        TypeError: for values that are not real numbers.
        ValueError: for non-finite values.
    """
    for i, (label, values) in enumerate(groups.items()):
        values = _values(values, f"groups[{label!r}]")
        mean = values.mean(0)
        pos = np.arange(len(names)) + 0.25 * (i - (len(groups) - 1) / 2)
        ax.errorbar(pos, mean, yerr=[mean - values.min(0), values.max(0) - mean], fmt="o", capsize=3, label=label)
    ax.set_xticks(np.arange(len(names)), names, rotation=30)


def plot_null_distribution(ax, result, label: str = "statistic"):
    """Histogram of the permutation null with the observed statistic marked.

    Args:
        ax: the matplotlib axes to draw on.
        result: a permutation test's :class:`~bayeskern.HypothesisTestResult`.
        label: the x-axis label.

    Raises:
        ValueError: for a result without permutation statistics (a large-sample test).
    """
    if getattr(result, "null_samples", None) is None:
        raise ValueError(f"result has no null_samples to plot (a permutation test's result; got "
                         f"method={getattr(result, 'method', None)!r})")
    ax.hist(result.null_samples, bins=40, color="0.7", label="permutation null")
    ax.axvline(result.statistic, color="C3", lw=2, label=f"observed (p = {result.p_value:.3g})")
    ax.set_xlabel(label)
    ax.set_ylabel("count")
    ax.legend(frameon=False)


def plot_kernel_evidence(ax, result, top: int = 10):
    """Which kernels carried an aggregated test: log(w_k / p_k) of the ``top`` strongest, with the threshold.

    Bars show each kernel's weighted evidence (prior weight w_k, own permutation p-value p_k); the dashed line is
    the smallest observed evidence that rejects at level 0.05 given the permutation null of the aggregated statistic.

    Args:
        ax: the matplotlib axes to draw on.
        result: an :class:`~bayeskern.AggregatedTestResult` (``mmd_test`` or ``hsic_test`` with ``"bayes"`` or a
            KernelCollection).
        top: how many kernels to show, an integer >= 1.

    Raises:
        TypeError: for a result that is not an aggregated test's, or top not an integer.
        ValueError: for top below 1.
    """
    if getattr(result, "kernel_p_values", None) is None:
        raise TypeError(f"result must be an AggregatedTestResult, got {type(result).__name__}")
    top = check_count(top, "top")
    order = result.ranking()[:top]
    evidence = np.log(result.weights) - np.log(result.kernel_p_values)
    ax.barh(np.arange(len(order))[::-1], evidence[order], color="C0")
    ax.set_yticks(np.arange(len(order))[::-1], [result.labels[i] for i in order], fontsize=8)
    threshold = np.quantile(result.null_samples, 0.95)
    ax.axvline(threshold, color="C3", ls="--", label="95 % of the permutation null")
    ax.set_xlabel("evidence  log(w_k / p_k)")
    ax.set_title(f"aggregated p = {result.p_value:.3g}")
    ax.legend(frameon=False, fontsize=8)


def plot_witness_1d(ax, grid, values, X=None, Y=None, band=None, labels=("P", "Q")):
    """Witness values on a 1-D grid, an optional (lower, upper) band and rug plots of the samples.

    Args:
        ax: the matplotlib axes to draw on.
        grid: (G,) or (G, 1) grid points.
        values: (G,) witness values.
        X: optional sample of P, drawn as a rug.
        Y: optional sample of Q, drawn as a rug.
        band: optional (lower, upper) pair of (G,) arrays.
        labels: legend names of the two samples.

    Raises:
        TypeError: for values that are not real numbers.
        ValueError: for non-finite grid or values.
    """
    grid, values = _values(grid, "grid").ravel(), _values(values, "values")
    ax.axhline(0.0, color="0.5", lw=0.8)
    if band is not None:
        ax.fill_between(grid, np.asarray(band[0]), np.asarray(band[1]), color="C0", alpha=0.25, label="band")
    ax.plot(grid, np.asarray(values), color="C0", lw=2, label="witness")
    for sample, colour, name, level in ((X, "C1", labels[0], 0.02), (Y, "C2", labels[1], 0.04)):
        if sample is not None:
            s = np.asarray(sample).ravel()
            ax.plot(s, np.full_like(s, -level * np.max(np.abs(values))), "|", color=colour, alpha=0.5, label=name)
    ax.set_xlabel("x")
    ax.set_ylabel("witness  mu_P - mu_Q")
    ax.legend(frameon=False)


def plot_witness_2d(ax, xx, yy, values, X=None, Y=None, labels=("P", "Q")):
    """Filled contour of witness values on a mesh, coloured symmetrically about 0.

    Args:
        ax: the matplotlib axes to draw on.
        xx: (a, b) first coordinates of the mesh.
        yy: (a, b) second coordinates.
        values: (a, b) witness values.
        X: optional (n, 2) sample of P, drawn as points.
        Y: optional (m, 2) sample of Q, drawn as points.
        labels: legend names of the two samples.

    Returns:
        The contour set (for a colour bar).

    Raises:
        TypeError: for values that are not real numbers.
        ValueError: for non-finite values or arrays that do not share one 2-D shape.
    """
    xx, yy, values = _values(xx, "xx"), _values(yy, "yy"), _values(values, "values")
    if not xx.shape == yy.shape == values.shape or xx.ndim != 2:
        raise ValueError(f"xx, yy and values must share one 2-D shape, got {xx.shape}, {yy.shape}, {values.shape}")
    lim = float(np.max(np.abs(values))) or 1.0
    cs = ax.contourf(xx, yy, values, levels=21, cmap="RdBu_r", vmin=-lim, vmax=lim)
    for sample, colour, name in ((X, "C1", labels[0]), (Y, "C2", labels[1])):
        if sample is not None:
            s = np.asarray(sample)
            ax.scatter(s[:, 0], s[:, 1], s=3, color=colour, alpha=0.4, label=name)
    ax.set_aspect("equal")
    if X is not None or Y is not None:
        ax.legend(frameon=False, loc="upper right")
    return cs


def plot_likelihood_curve(ax, fit, median=None):
    """BKE pseudolikelihood L(theta) on the type-II grid with the optimum, local maxima and median marked.

    Args:
        ax: the matplotlib axes to draw on.
        fit: a :class:`~bayeskern.inference.Type2Result` (from ``inference.fit_type2``).
        median: optional median-heuristic lengthscale to mark.

    Raises:
        TypeError: for a fit without a likelihood curve.
    """
    if getattr(fit, "curve", None) is None:
        raise TypeError(f"fit must be a type-II result with a likelihood curve (inference.fit_type2), got {fit!r}")
    finite = np.isfinite(fit.curve)
    ax.semilogx(fit.grid[finite], fit.curve[finite], color="C0", lw=1.5)
    for theta, value in fit.local_maxima[1:]:
        ax.plot(theta, value, "o", color="0.4", ms=4)
    ax.plot(fit.lengthscale, fit.log_likelihood, "*", color="C3", ms=12, label=f"BKL {fit.lengthscale:.3g}")
    if median is not None:
        ax.axvline(median, color="C1", ls="--", label=f"median heuristic {median:.3g}")
    values = fit.curve[finite]
    spread = fit.log_likelihood - np.median(values)
    ax.set_ylim(max(values.min(), fit.log_likelihood - 3 * spread) - 0.05 * spread, fit.log_likelihood + 0.1 * spread)
    ax.set_xlabel("lengthscale")
    ax.set_ylabel(f"log pseudolikelihood (tau2 = {fit.tau2:g}, m = {fit.m})")
    ax.legend(fontsize=8)


def _values(a, name):
    """Plotted values as a finite NumPy array (strings, complex numbers and NaN refused, naming ``name``)."""
    return np.asarray(as_finite_array(a, name))
