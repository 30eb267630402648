"""One conditional-expectation signature, ``obj.conditional_expectation(x_query, f)``, across the families."""

import jax
import numpy as np
import pytest

import bayeskern as bk
from bayeskern import compression, jdl, kbr
from bayeskern.kernels import RBF

N, LAM = 80, 1e-3
KX, KY = RBF(0.4), RBF(0.5)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, (N, 1))
    Y = np.sin(1.5 * X) + 0.1 * rng.standard_normal((N, 1))
    return X, Y


def _dense_cme(X, Y_values, x_query):
    """E[f(Y) | x] = f(Y)^T (K_XX + n lam I)^{-1} k_X(x), by a dense solve: (q, k)."""
    n = X.shape[0]
    K = np.asarray(KX.gram(X))
    return np.linalg.solve(K + n * LAM * np.eye(n), np.asarray(KX.cross(X, x_query))).T @ Y_values


def test_jdl_cme_and_compression_agree_with_each_other_and_the_dense_formula(data):
    X, Y = data
    x_query = np.linspace(-1.5, 1.5, 9)[:, None]
    f = lambda V: np.hstack([V, V**2])  # noqa: E731  (two test functions at once: (n, 2))
    reference = _dense_cme(X, f(Y), x_query)
    bases = jdl.jdl_bases(X, Y, KX, KY, tol=1e-14)
    model = jdl.fit_jdl(None, None, None, None, LAM, constraint="normalised", bases=bases)
    cme = jdl.fit_cme(None, None, None, None, LAM, bases=bases)
    compressed = compression.jkh(X, Y, 60, key=jax.random.key(0), lam_c=LAM, kernel_x=KX, kernel_y=KY,
                                 standardise=False, progress_bar=False)
    results = {"jdl": model.conditional_expectation(x_query, f), "cme": cme.conditional_expectation(x_query, f),
               "compression": compressed.conditional_expectation(x_query, f)}
    for name, result in results.items():
        assert type(result) is bk.ConditionalExpectation, name
        assert result.mean.shape == (9, 2) and result.mass.shape == (9,) and result.undefined.shape == (9,), name
        assert not bool(result.undefined.any()), name
    # the linear estimators are the dense kernel ridge (CME) formula: on the data (full-rank CME) and on the
    # compressed set (its KCME)
    np.testing.assert_allclose(results["cme"].mean, reference, rtol=1e-6, atol=1e-6)
    on_set = _dense_cme(np.asarray(compressed.x), f(np.asarray(compressed.y)), x_query)
    np.testing.assert_allclose(results["compression"].mean, on_set, rtol=1e-8, atol=1e-10)
    weights = np.linalg.solve(np.asarray(KX.gram(X)) + N * LAM * np.eye(N), np.asarray(KX.cross(X, x_query)))
    np.testing.assert_allclose(results["cme"].mass, weights.sum(axis=0), rtol=1e-6)
    # JDL is a different (self-normalised) estimator of the same conditional law: close, not equal. Its mass at x
    # is sum_j (1 + h(x, y_j)) / n, whose average over the training x's is the total mass, 1 for a normalised model
    np.testing.assert_allclose(np.mean(model.conditional_expectation(X).mass), 1.0, rtol=1e-10)
    gap = np.abs(np.asarray(results["jdl"].mean) - reference).max()
    assert 1e-6 < gap < 0.1
    # all three explain E[Y | x] and E[Y^2 | x]: RMSE at most 0.3 x that of the best constant
    truth = np.hstack([np.sin(1.5 * x_query), np.sin(1.5 * x_query) ** 2 + 0.01])
    constant = np.sqrt(np.mean((truth - truth.mean(axis=0)) ** 2, axis=0))
    for name, result in results.items():
        rmse = np.sqrt(np.mean((np.asarray(result.mean) - truth) ** 2, axis=0))
        assert np.all(rmse < 0.3 * constant), (name, rmse, constant)


def test_f_as_values_callable_or_identity_gives_the_same_answer(data):
    X, Y = data
    x_query = X[:5]
    model = jdl.fit_jdl(X, Y, KX, KY, LAM, constraint="normalised", tol=1e-8)
    cme = jdl.fit_cme(X, Y, KX, KY, LAM, tol=1e-8)
    for obj in (model, cme):
        identity = obj.conditional_expectation(x_query).mean
        np.testing.assert_allclose(obj.conditional_expectation(x_query, lambda V: V).mean, identity, atol=1e-12)
        np.testing.assert_allclose(obj.conditional_expectation(x_query, Y).mean, identity, atol=1e-12)
        with pytest.raises(ValueError, match="one value per training outcome"):
            obj.conditional_expectation(x_query, Y[:-1])
    result = compression.jkh(X, Y, 10, key=jax.random.key(1), lam_c=LAM, progress_bar=False)
    np.testing.assert_allclose(result.conditional_expectation(x_query, result.y_original).mean,
                               result.conditional_expectation(x_query).mean, atol=1e-12)


def test_kbr_posterior_read_out_has_the_same_type():
    W = np.array([[0.2, 0.0], [0.3, 0.0], [0.5, 0.0]])
    Z = np.array([[0.0], [1.0], [2.0]])
    result = kbr.normalized_posterior_mean(W, Z)
    assert type(result) is bk.ConditionalExpectation
    np.testing.assert_allclose(result.mean[0], [1.3])
    np.testing.assert_array_equal(result.undefined, [False, True])
    assert np.isnan(result.mean[1, 0])  # zero mass: flagged and NaN, never a plausible number
