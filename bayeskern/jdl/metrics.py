"""Evaluation metrics of the experiments of Filipović et al. (2021, Sections 5.1 and 5.2)."""

import numpy as np

from .model import JointDistributionModel

__all__ = ["relative_moment_loss", "clipped_log_loss", "non_psd_share", "negative_weight_share", "held_out_ratio_loss"]


def relative_moment_loss(exact, estimate) -> float:
    """Loss (31): mean over points of ||E - E_hat||_F^2 / ||E||_F^2 for (q, ...) arrays of conditional moments."""
    exact, estimate = np.asarray(exact), np.asarray(estimate)
    if exact.shape != estimate.shape:
        raise ValueError(f"exact and estimate shapes differ: {exact.shape} vs {estimate.shape}")
    axes = tuple(range(1, exact.ndim))
    return float(np.mean(np.sum((exact - estimate) ** 2, axis=axes) / np.sum(exact**2, axis=axes)))


def clipped_log_loss(labels, p, eta: float = 1e-12) -> float:
    """Loss (32), with the asymmetric clip exactly as written: -mean[I log min(1, max(p, eta))
    + (1 - I) log max(eta, min(1 - p, 1))]."""
    labels, p = np.asarray(labels, np.float64), np.asarray(p, np.float64)
    return float(-np.mean(labels * np.log(np.minimum(1.0, np.maximum(p, eta)))
                          + (1 - labels) * np.log(np.maximum(eta, np.minimum(1.0 - p, 1.0)))))


def non_psd_share(M, tau: float = 1e-10) -> float:
    """Share of (q, d, d) matrices with lambda_min(sym M) < -tau max|lambda(sym M)| (non-PSD beyond round-off)."""
    M = np.asarray(M)
    lam = np.linalg.eigvalsh(0.5 * (M + np.swapaxes(M, -1, -2)))
    return float(np.mean(lam[:, 0] < -tau * np.abs(lam).max(axis=1)))


def negative_weight_share(weights) -> float:
    """Share of query points (rows of a (q, n) weight matrix) with at least one negative weight."""
    return float(np.mean(np.asarray(weights).min(axis=1) < 0))


def held_out_ratio_loss(model, X, Y) -> float:
    """Validation score of a JDL model: its estimation loss on held-out pairs, which needs no ground truth.

    E(h) = ||h_hat - h||^2 in L^2(P_X x P_Y) on v held-out pairs minus the constant v, i.e.
    (1/v^2) sum_ij (1 + h(x_i, y_j))^2 - (2/v) sum_i (1 + h(x_i, y_i)), computed from the features in O(v m^2)
    without a v x v matrix.

    Args:
        model: a fitted :class:`JointDistributionModel`.
        X: (v, d_X) held-out inputs.
        Y: (v, d_Y) held-out outcomes, row i paired with X[i].

    Returns:
        float, lower is better.

    Raises:
        TypeError: for a model that is not a JointDistributionModel or data that are not real numbers.
        ValueError: for non-finite or unpaired data, or data of another dimension than the model's.
    """
    if not isinstance(model, JointDistributionModel):
        raise TypeError(f"model must be a fitted JointDistributionModel, got {type(model).__name__}")
    Px, Py = np.asarray(model.features_x(X, "X")), np.asarray(model.features_y(Y, "Y"))
    if Px.shape[0] != Py.shape[0]:
        raise ValueError(f"X and Y must hold the same number of pairs, got {Px.shape[0]} and {Py.shape[0]}")
    H, v = np.asarray(model.H), Px.shape[0]
    total = Py.sum(0) @ H @ Px.sum(0)
    squares = np.sum((H @ (Px.T @ Px)) * ((Py.T @ Py) @ H))
    paired = np.asarray(model.density_ratio(X, Y))
    return float((v**2 + 2 * total + squares) / v**2 - 2 * paired.mean())
