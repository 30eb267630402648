"""BKE embedding and witness posteriors for fixed hyperparameters."""

import jax
import numpy as np
import pytest

import bayeskern as bk
from bayeskern.bke import ConvolvedSE, embedding_posterior, witness_posterior
from bayeskern.kernels import RBF


def test_posterior_at_data_equals_predictive_and_variances_are_valid(rng):
    X = rng.standard_normal((30, 2))
    k, tau2 = RBF(0.8), 0.7
    post = embedding_posterior(X, k, tau2)
    R = np.asarray(ConvolvedSE(k).gram(X))
    A = R + tau2 / 30 * np.eye(30)
    y = np.asarray(k.gram(X)).mean(1)
    np.testing.assert_allclose(post.mean(X), R @ np.linalg.solve(A, y), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(post.cov(X), R - R @ np.linalg.solve(A, R), atol=1e-10)
    Xs = rng.standard_normal((25, 2)) * 2
    assert np.all(np.asarray(post.var(Xs)) >= 0)
    np.testing.assert_allclose(post.var(Xs), np.diag(np.asarray(post.cov(Xs))), rtol=1e-9, atol=1e-13)
    eig = np.linalg.eigvalsh(np.asarray(post.cov(Xs)))
    assert eig.min() >= -1e-10 * eig.max()


def test_noise_limits_interpolate_and_return_prior(rng):
    X = rng.standard_normal((15, 1))
    k = RBF(0.6)
    y = np.asarray(k.gram(X)).mean(1)
    np.testing.assert_allclose(embedding_posterior(X, k, 1e-10).mean(X), y, rtol=1e-5)
    far = embedding_posterior(X, k, 1e12)
    Xs = np.linspace(-2, 2, 5)
    np.testing.assert_allclose(far.mean(Xs), 0.0, atol=1e-9)
    np.testing.assert_allclose(far.var(Xs), ConvolvedSE(k).diag(Xs), rtol=1e-8)


def test_posterior_mean_with_k_prior_is_skmse(rng):
    n, tau2 = 25, 0.3
    X, Xs = rng.standard_normal((n, 2)), rng.standard_normal((7, 2))
    k = RBF(0.9)
    post = embedding_posterior(X, k, tau2, prior_cov=k)
    np.testing.assert_allclose(post.mean(Xs), bk.skmse(X, k, tau2 / n**2)(Xs), rtol=1e-9, atol=1e-12)


def test_witness_closed_form_matches_monte_carlo_and_is_antisymmetric(rng):
    XP, XQ = rng.standard_normal((40, 1)), rng.laplace(0, np.sqrt(0.5), (40, 1))
    grid = np.linspace(-3, 3, 9)
    k = RBF(0.7)
    exact = witness_posterior(XP, XQ, k, 1.0, grid=grid)
    swapped = witness_posterior(XQ, XP, k, 1.0, grid=grid)
    np.testing.assert_allclose(swapped.mean, -exact.mean, rtol=1e-12)
    assert np.all(witness_posterior(XP, XP, k, 1.0, grid=grid).mean == 0.0)
    pP, pQ = embedding_posterior(XP, k), embedding_posterior(XQ, k)
    draws = np.asarray(pP.sample(jax.random.key(0), grid, 4000) - pQ.sample(jax.random.key(1), grid, 4000))
    sd = np.sqrt(np.diag(exact.cov))
    assert np.all(np.abs(draws.mean(0) - exact.mean) < 5 * sd / np.sqrt(4000))
    np.testing.assert_allclose(draws.var(0), sd**2, rtol=0.12)
    np.testing.assert_allclose(exact.upper - exact.mean, 1.2815515655 * sd, rtol=1e-8)


def test_witness_from_hyperparameter_draws(rng):
    XP, XQ = rng.standard_normal((30, 1)), rng.standard_normal((30, 1)) + 1.0
    grid = np.linspace(-3, 4, 15)
    draws = {"lengthscale": np.array([0.5, 0.7, 0.9, 1.1] * 50)}
    post = witness_posterior(XP, XQ, grid=grid, hyper_draws=draws, make_kernel=lambda d: (RBF(d["lengthscale"]), 1.0),
                             key=jax.random.key(3))
    assert post.draws.shape == (200, 15)
    assert np.all(post.lower <= post.mean) and np.all(post.mean <= post.upper)
    # the draw-wise mean estimates the average of the exact fixed-lengthscale means
    expected = np.mean([witness_posterior(XP, XQ, RBF(l), 1.0, grid=grid).mean for l in (0.5, 0.7, 0.9, 1.1)], axis=0)
    assert np.all(np.abs(post.mean - expected) < 5 * post.draws.std(0) / np.sqrt(200))
    default = witness_posterior(XP, XQ, grid=grid, hyper_draws=draws, key=jax.random.key(3))
    np.testing.assert_allclose(default.draws, post.draws, rtol=1e-12)  # RBF(lengthscale), tau2 = 1 by default
    with pytest.raises(ValueError, match="'lengthscale' entry"):
        witness_posterior(XP, XQ, grid=grid, hyper_draws={"theta": draws["lengthscale"]}, key=jax.random.key(3))
    with pytest.raises(ValueError, match="PRNG key"):
        witness_posterior(XP, XQ, grid=grid, hyper_draws=draws)
    with pytest.raises(ValueError, match="band must lie"):
        witness_posterior(XP, XQ, RBF(1.0), grid=grid, band=1.0)


def test_a_second_witness_posterior_over_draws_reuses_its_program(caplog):
    XP, XQ = bk.datasets.normal_vs_laplace(40, seed=1)
    grid = np.linspace(-2, 2, 7)[:, None]
    witness_posterior(XP, XQ, grid=grid, hyper_draws={"lengthscale": np.full(3, 0.7)}, key=jax.random.key(0))
    with jax.log_compiles(True), caplog.at_level("WARNING"):
        caplog.clear()
        witness_posterior(XP, XQ, tau2=1.3, grid=grid, hyper_draws={"lengthscale": np.full(3, 0.9)}, key=jax.random.key(1))
    assert not any(r.getMessage().startswith("Compiling jit(_witness_draws)") for r in caplog.records)


def test_integer_lengthscale_draws_keep_a_fractional_tau2():
    """The default tau2 fills a float array whatever the dtype of the lengthscale draws (an integer fill truncated
    tau2 = 0.5 to 0)."""
    XP, XQ = bk.datasets.normal_vs_laplace(40, seed=2)
    grid = np.linspace(-2, 2, 5)[:, None]
    as_int = witness_posterior(XP, XQ, tau2=0.5, grid=grid, hyper_draws={"lengthscale": np.ones(3, int)}, key=jax.random.key(0))
    as_float = witness_posterior(XP, XQ, tau2=0.5, grid=grid, hyper_draws={"lengthscale": np.ones(3)}, key=jax.random.key(0))
    np.testing.assert_allclose(as_int.draws, as_float.draws, rtol=1e-12)
