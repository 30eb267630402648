"""JDL data generators and metrics."""

import jax
import numpy as np
import pytest
from scipy.linalg import logm

from bayeskern.jdl.data import (archakov_hansen_correlation, cauchy_cumulative, ff_synthetic, gaussian_pairs,
                                gaussian_second_moment, lagged_sum_task, random_correlation, uniform_cumulative,
                                uniform_moments)
from bayeskern.jdl.metrics import clipped_log_loss, negative_weight_share, non_psd_share, relative_moment_loss


def test_archakov_hansen_parametrisation():
    for p in (2, 4, 6):
        C = random_correlation(jax.random.key(p), p)
        gamma = np.asarray(jax.random.uniform(jax.random.key(p), (p * (p - 1) // 2,), minval=-1.0, maxval=1.0))
        np.testing.assert_array_equal(C, archakov_hansen_correlation(gamma, p))
        np.testing.assert_array_equal(np.diag(C), 1.0)
        assert np.linalg.eigvalsh(C).min() > 0
        np.testing.assert_allclose(np.real(logm(C))[np.tril_indices(p, -1)], gamma, atol=1e-10)
    assert archakov_hansen_correlation([0.3], 2)[0, 1] == pytest.approx(np.tanh(0.3), abs=1e-13)
    with pytest.raises(ValueError, match="gamma"):
        archakov_hansen_correlation([0.1, 0.2], 2)


def test_exact_moments_agree_with_monte_carlo():
    C = random_correlation(jax.random.key(1), 4)
    X, Y = (np.asarray(a) for a in gaussian_pairs(jax.random.key(2), C, 400_000))
    x0 = np.array([[0.3, -0.5]])
    # E[Y Y^T | X = x0] by regression: the residual covariance plus the fitted mean
    B = np.linalg.lstsq(X, Y, rcond=None)[0].T
    resid = Y - X @ B.T
    mc = np.cov(resid.T) + np.outer(B @ x0[0], B @ x0[0])
    np.testing.assert_allclose(gaussian_second_moment(C, x0)[0], mc, atol=1e-2)
    # uniform cumulative averages: moments depend on x only through s = d x_d; condition on a thin slab of s
    X, Y = (np.asarray(a) for a in uniform_cumulative(jax.random.key(3), 2_000_000, 2))
    slab = np.abs(X[:, -1] - 0.55) < 0.004
    mean, second = uniform_moments(X[slab])
    np.testing.assert_allclose(Y[slab].mean(0), mean.mean(0), atol=3e-3)
    np.testing.assert_allclose((Y[slab, :, None] * Y[slab, None, :]).mean(0), second.mean(0), atol=3e-3)
    Xc, Yc = cauchy_cumulative(jax.random.key(4), 1000, 3)
    assert Xc.shape == Yc.shape == (1000, 3) and np.abs(np.asarray(Yc)).max() > 10  # heavy tails


def test_ff_synthetic_has_heavy_tails_clustering_and_dependence():
    z = np.asarray(ff_synthetic(jax.random.key(0)))
    assert z.shape == (26_000, 25)
    centred = z - z.mean(0)
    kurtosis = (centred**4).mean(0) / (centred**2).mean(0) ** 2 - 3
    assert kurtosis.min() > 4
    a = np.abs(z[:, 0]) - np.abs(z[:, 0]).mean()
    assert (a[1:] * a[:-1]).mean() / (a**2).mean() > 0.08  # volatility clustering
    corr = np.corrcoef(z.T)[np.triu_indices(25, 1)]
    assert 0.4 <= corr.min() and corr.max() <= 0.95
    x, y = lagged_sum_task(z, 5)
    assert x.shape == (25_999, 5) and y.shape == (25_999,)
    np.testing.assert_allclose(y[0], z[1, :5].sum())


def test_metrics_on_hand_made_inputs():
    M = np.random.default_rng(0).standard_normal((10, 2, 2))
    assert relative_moment_loss(M, M) == 0.0
    assert relative_moment_loss(np.ones((2, 1)), np.array([[0.0], [2.0]])) == 1.0
    p = np.array([-0.1, 0.0, 1e-13, 0.5, 1.0, 1.2])
    for label in (0, 1):
        labels = np.full(6, label)
        expected = -np.log(np.minimum(1, np.maximum(p, 1e-12))) if label else -np.log(np.maximum(1e-12, np.minimum(1 - p, 1)))
        for k in range(6):
            assert clipped_log_loss(labels[k:k + 1], p[k:k + 1]) == pytest.approx(expected[k], rel=1e-14)
    psd = np.stack([np.eye(2), np.diag([1.0, -1e-12]), np.diag([1.0, -1e-3]), np.zeros((2, 2)) + 1])
    assert non_psd_share(psd) == 0.25
    assert negative_weight_share(np.array([[0.5, 0.5], [1.2, -0.2], [0.0, 1.0]])) == pytest.approx(1 / 3)
