"""Random Fourier features and adaptive observation features: spec kbr.md §1 and §10 item 15."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskern import kbr
from bayeskern.kernels import RBF


def test_random_fourier_features_approximate_the_gaussian_kernel(rng):
    Z = rng.standard_normal((40, 2))
    rff = kbr.random_fourier_features(jax.random.key(0), 2, 0.8, num_features=20_000)
    Phi = rff(Z)
    np.testing.assert_allclose(Phi @ Phi.T, RBF(0.8).gram(Z), atol=0.03)
    with pytest.raises(ValueError, match="sigma must be positive"):
        kbr.random_fourier_features(jax.random.key(0), 2, -1.0)


def test_adaptive_loss_equals_the_profiled_minimum_and_the_trace_formula(rng):
    n, p, F, lam = 40, 5, 30, 0.01
    Psi, Phi = rng.standard_normal((n, p)), rng.standard_normal((n, F))
    r = np.maximum(rng.standard_normal(n) + 0.7, 0)
    D = np.diag(r)
    # brute force: minimise (1/n) sum r_i |phi_i - E^T psi_i|^2 + lam |E|_F^2 over E by the normal equations
    E = np.linalg.solve(Psi.T @ D @ Psi + n * lam * np.eye(p), Psi.T @ D @ Phi)
    brute = (np.sum(r[:, None] * (Phi - Psi @ E) ** 2) / n) + lam * np.sum(E**2)
    value = float(kbr.adaptive_feature_loss(Psi, Phi, lam, r_hat=r))
    assert value == pytest.approx(brute, rel=1e-10)
    # Gram-matrix form with G_Z = Phi Phi^T
    G = Phi @ Phi.T
    gram = (np.trace(G @ D) - np.trace(G @ D @ Psi @ np.linalg.solve(Psi.T @ D @ Psi + n * lam * np.eye(p), Psi.T @ D))) / n
    assert value == pytest.approx(gram, rel=1e-10)
    # gradient in the features matches central differences
    g = jax.grad(lambda P: kbr.adaptive_feature_loss(P, Phi, lam, r_hat=r))(jnp.asarray(Psi))
    h, (i, j) = 1e-6, (3, 2)
    bump = np.zeros_like(Psi)
    bump[i, j] = h
    fd = (float(kbr.adaptive_feature_loss(Psi + bump, Phi, lam, r_hat=r))
          - float(kbr.adaptive_feature_loss(Psi - bump, Phi, lam, r_hat=r))) / (2 * h)
    assert float(g[i, j]) == pytest.approx(fd, rel=1e-6)


def test_trained_features_lower_the_loss_and_drive_a_filter():
    seq = kbr.data.circle_dynamics(150, jax.random.key(1), T_test=20)
    net, trace = kbr.train_features(jax.random.key(2), seq.X, seq.Z, lam=1e-3, sigma_z=0.7, hidden=(32, 16), steps=60)
    trace = np.asarray(trace)
    assert trace.shape == (60,) and np.all(np.isfinite(trace)) and trace[-1] < 0.7 * trace[0]
    kbf = kbr.KernelBayesFilter.build(seq.X, seq.Z, kbr.FeatureKernel(net), 0.7, 1e-3, 1e-4)
    Psi = net(seq.X)
    np.testing.assert_allclose(kbf.G_X, Psi @ Psi.T, atol=1e-12)
    means = kbf.filter(seq.X_test)
    assert kbr.filter_mse(means, seq.Z_test) < kbr.filter_mse(seq.X_test, seq.Z_test)  # 0.105 vs 0.120
    with pytest.raises(ValueError, match="X_test contains"):
        kbf.filter(seq.X_test.at[0, 0].set(jnp.inf))
