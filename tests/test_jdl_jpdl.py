"""Polynomial JPDL (Filipović et al. 2021, Appendix B)."""

import numpy as np
import pytest

from bayeskern.jdl import fit_jpdl, load_model, monomial_exponents, polynomial_basis, sos_certificate
from bayeskern.jdl.jpdl import _vandermonde


@pytest.fixture(scope="module")
def sample():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 1))
    return X, 0.8 * X + 0.6 * rng.standard_normal((300, 1))


def test_monomial_order_and_orthonormal_basis(sample):
    np.testing.assert_array_equal(monomial_exponents(2, 2), [[0, 0], [1, 0], [0, 1], [2, 0], [1, 1], [0, 2]])
    assert monomial_exponents(3, 4).shape == (35, 3)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 2))
    basis = polynomial_basis(X, 3)
    A = np.asarray(basis.A)
    n = 200
    np.testing.assert_allclose(A.T @ A, n * np.eye(10), atol=1e-9 * n)  # L^T L = n I
    # B = L / n is bi-orthogonal and K B = L for the kernel k_q = tau G^{-1} tau^T (eps = 0)
    V = np.asarray(_vandermonde(X, basis.exponents))
    K = V @ np.linalg.solve(V.T @ V / n, V.T)
    np.testing.assert_allclose(K @ (A / n), A, atol=1e-8)
    np.testing.assert_allclose(K, A @ A.T, atol=1e-8)
    np.testing.assert_allclose(basis.evaluate(None, X), A, atol=1e-10)
    with pytest.raises(ValueError, match="at least 10 points"):
        polynomial_basis(X[:5], 3)
    with pytest.raises(ValueError, match="variety"):
        polynomial_basis(np.c_[X[:, 0], X[:, 0]], 2)


def test_unconstrained_is_gamma_over_one_plus_lambda(sample):
    X, Y = sample
    model = fit_jpdl(X, Y, 4, 0.1)
    solution = model.solution
    A_x, A_y = np.asarray(model.basis_x.A), np.asarray(model.basis_y.A)
    n = 300
    Gamma = A_y.T @ A_x / n - np.outer(A_y.sum(0), A_x.sum(0)) / n**2
    np.testing.assert_allclose(solution.H, Gamma / 1.1, atol=1e-13)
    one = model.conditional_expectation(X[:10], lambda Y: np.ones(Y.shape[0]))
    np.testing.assert_allclose(one.mean, 1.0, atol=1e-13)


def test_sos_positivity_certificate_and_round_trip(sample, tmp_path):
    X, Y = sample
    model = fit_jpdl(X, Y, 2, 1e-2, constraint="sos")
    solution = model.solution
    assert solution.normalisation <= 1e-8 and solution.positivity >= -1e-8  # PSD Gram matrix
    rng = np.random.default_rng(1)
    far = lambda: rng.standard_normal((4000, 1)) * rng.choice([0.5, 3.0, 30.0], (4000, 1))  # noqa: E731
    assert float(model.density_ratio(far(), far()).min()) >= -1e-8  # positive everywhere, not only on the data
    unconstrained = fit_jpdl(X, Y, 2, 1e-2)
    assert float(unconstrained.density_ratio(far(), far()).min()) < -1.0  # what the SOS constraint prevents
    # the certificate accepts the feasible point (H = 0, A = e_0 e_0^T) and rejects a perturbed Gram matrix
    gram = np.diag([1.0, 0, 0, 0, 0, 0])
    assert sos_certificate(np.zeros_like(solution.H), gram, model.basis_x, model.basis_y, 2)["max_residual"] == 0.0
    gram[1, 1] = 0.1
    assert sos_certificate(np.zeros_like(solution.H), gram, model.basis_x, model.basis_y, 2)["max_residual"] >= 0.1
    model.save(tmp_path / "jpdl.npz")
    loaded = load_model(tmp_path / "jpdl.npz")
    np.testing.assert_array_equal(loaded.conditional_expectation(X[:7]).mean, model.conditional_expectation(X[:7]).mean)
