import jax.numpy as jnp
import numpy as np
import pytest

import bayeskern as bk
from bayeskern import RBF, Linear, Matern32


def test_mean_embedding_evaluation_and_inner_products(rng):
    X, T = rng.standard_normal((50, 2)), rng.standard_normal((13, 2))
    w = rng.standard_normal(50)
    k = Matern32(0.8)
    K_TX = np.asarray(k.cross(T, X))
    np.testing.assert_allclose(bk.mean_embedding(X, k)(T, block_size=8), K_TX.mean(1), rtol=1e-12)
    mu = bk.mean_embedding(X, k, weights=w)
    np.testing.assert_allclose(mu(T, block_size=8), K_TX @ w, rtol=1e-12)
    nu = bk.mean_embedding(T, k)
    assert float(mu.inner(nu)) == pytest.approx(w @ K_TX.T @ np.full(13, 1 / 13), rel=1e-12)
    assert float(mu.norm2()) == pytest.approx(w @ np.asarray(k.gram(X)) @ w, rel=1e-12)
    np.testing.assert_allclose((2.0 * mu - nu)(T), 2 * K_TX @ w - np.asarray(k.gram(T)).mean(1), rtol=1e-12)


def test_witness_is_antisymmetric_and_zero_for_identical_samples(rng):
    X, Y, T = rng.standard_normal((20, 1)), rng.standard_normal((30, 1)) + 1, np.linspace(-3, 3, 7)
    k = RBF(0.5)
    w = bk.witness(X, Y, k)(T)
    np.testing.assert_allclose(bk.witness(Y, X, k)(T), -w, rtol=1e-14)
    np.testing.assert_allclose(bk.witness(X, X, k)(T), np.zeros(7), atol=1e-15)
    assert float(np.asarray(w)[-1]) < 0 < float(np.asarray(w)[0])


def test_embeddings_in_different_rkhs_cannot_be_combined(rng):
    X = rng.standard_normal((5, 1))
    with pytest.raises(ValueError, match="different kernels"):
        bk.mean_embedding(X, RBF(1.0)) - bk.mean_embedding(X, RBF(2.0))
    with pytest.raises(ValueError, match="weights must have shape"):
        bk.mean_embedding(X, RBF(1.0), weights=np.ones((5, 2)))
    with pytest.raises(ValueError, match="X and weights must have the same number"):
        bk.mean_embedding(X, RBF(1.0), weights=np.ones(4))


def test_skmse_beta_formula(rng):
    X, T = rng.standard_normal((25, 2)), rng.standard_normal((9, 2))
    k, lam = RBF(0.9), 0.03
    K = np.asarray(k.gram(X))
    beta = np.linalg.solve(K + 25 * lam * np.eye(25), K.mean(1))
    est = bk.skmse(X, k, lam)
    np.testing.assert_allclose(est.weights, beta, rtol=1e-9)
    np.testing.assert_allclose(est(T), np.asarray(k.cross(T, X)) @ beta, rtol=1e-9)


def test_skmse_equals_feature_space_shrinkage(rng):
    """With an explicit feature map (random Fourier features), the beta form of S-KMSE
    equals Sigma_hat (Sigma_hat + lam I)^{-1} mu_hat computed in feature space."""
    n, D = 25, 40
    X, T = rng.standard_normal((n, 2)), rng.standard_normal((6, 2))
    W, b = rng.standard_normal((2, D)) / 0.8, rng.uniform(0, 2 * np.pi, D)
    phi = lambda A: np.sqrt(2.0 / D) * np.cos(A @ W + b)
    Phi, lam = phi(X), 0.05
    Sigma, mu = Phi.T @ Phi / n, Phi.mean(0)
    feature_mean = Sigma @ np.linalg.solve(Sigma + lam * np.eye(D), mu)
    est = bk.skmse(Phi, Linear(), lam)
    np.testing.assert_allclose(est(phi(T)), phi(T) @ feature_mean, atol=1e-12)


def test_skmse_shrinks_towards_zero_and_rejects_bad_lambda(rng):
    X = rng.standard_normal((30, 1))
    k = RBF(1.0)
    norms = [float(bk.skmse(X, k, lam).norm2()) for lam in (1e-6, 1e-2, 1.0)]
    assert norms[0] > norms[1] > norms[2] > 0
    assert norms[0] == pytest.approx(float(bk.mean_embedding(X, k).norm2()), rel=1e-3)
    with pytest.raises(ValueError, match="lam must be positive"):
        bk.skmse(X, k, 0.0)
    with pytest.raises(ValueError, match="X contains"):
        bk.skmse(jnp.full((3, 1), jnp.nan), k, 0.1)
