"""Fitted JDL models, low-rank CME and KLR."""

import dataclasses

import jax
import jax.numpy as jnp
import jaxopt
import numpy as np
import pytest

from bayeskern.jdl import (fit_cme, fit_jdl, fit_klr, grid_row_minima, jdl_bases, jdl_problem, load_model, objective,
                           simplex_qp)
from bayeskern.kernels import RBF, Matern52


@pytest.fixture(scope="module")
def sample():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((250, 2))
    Y = np.c_[np.sin(X[:, 0]) + 0.3 * rng.standard_normal(250), X[:, 1] ** 2 + 0.3 * rng.standard_normal(250)]
    return X, Y, jdl_bases(X, Y, RBF(1.0), RBF(1.0), tol=1e-4)


def _bases_for(constraint, sample):
    """Grid cutting planes cost O(active cuts^3): test them at a coarser tolerance (m ~ 15 per side)."""
    X, Y, bases = sample
    return jdl_bases(X, Y, RBF(1.0), RBF(1.0), tol=1e-2) if constraint == "grid" else bases


def _second(Y):
    return Y[:, :, None] * Y[:, None, :]


@pytest.mark.parametrize("constraint", ["unconstrained", "normalised", "data_box", "kernel_bound", "grid"])
def test_conditionals_are_self_normalised_linear_and_batched(sample, constraint, rng):
    X, Y, _ = sample
    bases = _bases_for(constraint, sample)
    model = fit_jdl(None, None, None, None, 1e-3 if constraint == "grid" else 1e-5, constraint=constraint, bases=bases)
    Xq = rng.standard_normal((40, 2))
    one = model.conditional_expectation(Xq, lambda Y: jnp.ones(Y.shape[0]))
    np.testing.assert_allclose(one.mean, 1.0, atol=1e-13)
    assert not bool(one.undefined.any())
    F1, F2 = rng.standard_normal((250, 3)), rng.standard_normal((250, 3))
    combo = model.conditional_expectation(Xq, 2 * F1 - 3 * F2).mean
    np.testing.assert_allclose(combo, 2 * model.conditional_expectation(Xq, F1).mean
                               - 3 * model.conditional_expectation(Xq, F2).mean, atol=1e-10)
    single = np.stack([model.conditional_expectation(Xq[i:i + 1], F1).mean[0] for i in range(3)])
    np.testing.assert_allclose(single, model.conditional_expectation(Xq[:3], F1).mean, atol=1e-13)
    # conditional weights on the y-sample reproduce the expectation and sum to one
    weights = model.conditional_weights(Xq).mean
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(weights @ F1, model.conditional_expectation(Xq, F1).mean, atol=1e-10)


def test_x_given_y_is_the_swapped_model(sample, rng):
    X, Y, bases = sample
    model = fit_jdl(None, None, None, None, 1e-5, constraint="normalised", bases=bases)
    swapped = fit_jdl(Y, X, RBF(1.0), RBF(1.0), 1e-5, constraint="normalised", tol=1e-4)
    Yq = rng.standard_normal((10, 2))
    np.testing.assert_allclose(model.conditional_expectation_given_y(Yq).mean,
                               swapped.conditional_expectation(Yq).mean, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("constraint", ["data_box", "grid"])
def test_constrained_models_are_proper_on_the_training_grid(sample, constraint):
    X, Y, _ = sample
    bases = _bases_for(constraint, sample)
    lam = 1e-4 if constraint == "grid" else 1e-6  # fewer active grid cuts: the cutting planes stay fast
    model = fit_jdl(None, None, None, None, lam, constraint=constraint, bases=bases)
    solution = model.solution
    assert solution.normalisation <= 1e-10 and solution.positivity >= -1e-12
    assert float(model.min_grid_weight(block_size=100)) >= -1e-12
    assert float(model.marginal_x().sum()) == pytest.approx(1.0, abs=1e-12)
    M = np.asarray(model.conditional_expectation(X, _second).mean)
    eig = np.linalg.eigvalsh(M)
    assert np.all(eig[:, 0] >= -1e-10 * np.abs(eig).max(axis=1))
    if constraint == "grid":  # the margin holds on the grid, and the fit is closer than under (29)
        assert grid_row_minima(model.H, bases.basis_x, bases.basis_y)[0].min() >= 0.1 - 1e-12
        box = fit_jdl(None, None, None, None, lam, constraint="data_box", bases=bases).solution
        problem = jdl_problem(bases.basis_x, bases.basis_y, lam)
        assert float(objective(problem, jnp.asarray(solution.H))) < float(objective(problem, jnp.asarray(box.H)))


def test_kernel_bound_is_positive_everywhere(sample, rng):
    X, Y, bases = sample
    model = fit_jdl(None, None, None, None, 1e-7, constraint="kernel_bound", bases=bases)
    far = lambda size: rng.standard_normal((size, 2)) * rng.choice([0.5, 2.0, 6.0], (size, 1))  # noqa: E731
    assert float(model.density_ratio(far(4000), far(4000)).min()) >= -1e-12
    assert float(jnp.abs(jnp.asarray(model.H)).sum()) <= 1.0 + 1e-12  # the l1 ball of the kernel bound


def test_zero_denominators_are_flagged_not_divided(sample):
    X, Y, bases = sample
    model = fit_jdl(None, None, None, None, 1e-5, constraint="normalised", bases=bases)
    psi = model.features_x(X[:1])[0]
    a = bases.basis_y.A.sum(axis=0)
    H = -model.n * jnp.outer(a, psi) / (jnp.sum(a**2) * jnp.sum(psi**2))  # n + psi^T H^T a = 0 at X[0]
    broken = dataclasses.replace(model, H=H)
    result = broken.conditional_expectation(X[:2])
    assert bool(result.undefined[0]) and not bool(result.undefined[1])
    assert np.all(np.isnan(result.mean[0])) and np.all(np.isfinite(result.mean[1]))


def test_save_and_load_round_trip_exactly(sample, tmp_path, rng):
    X, Y, _ = sample
    model = fit_jdl(X, Y, RBF(jnp.array([0.8, 1.3])), 2.0 * Matern52(1.1) + RBF(0.5), 1e-5, constraint="data_box",
                    tol=1e-3)
    model.save(tmp_path / "jdl.npz")
    loaded = load_model(tmp_path / "jdl.npz")
    Xq = rng.standard_normal((20, 2))
    np.testing.assert_array_equal(loaded.conditional_expectation(Xq, _second).mean,
                                  model.conditional_expectation(Xq, _second).mean)
    np.testing.assert_array_equal(loaded.H, model.H)
    assert loaded.constraint == "data_box" and loaded.lam == 1e-5 and repr(loaded.kernel_y) == repr(model.kernel_y)


def test_cme_at_full_rank_equals_the_kernel_ridge_formula(rng):
    n, lam = 15, 1e-3
    X, Y = np.linspace(-3, 3, n)[rng.permutation(n), None], np.linspace(-2, 2, n)[rng.permutation(n), None]
    kx, ky = RBF(0.5), RBF(0.4)  # well-conditioned Gram matrices: the factor at full rank is accurate
    cme = fit_cme(X, Y, kx, ky, lam, tol=1e-15)
    assert cme.basis_x.R.shape[0] == cme.basis_y.R.shape[0] == n
    Xq = rng.uniform(-2, 2, (6, 1))
    f = rng.standard_normal(n)
    reference = np.linalg.solve(np.asarray(kx.gram(X)) + n * lam * np.eye(n), np.asarray(kx.cross(X, Xq))).T @ f
    np.testing.assert_allclose(cme.conditional_expectation(Xq, f).mean, reference, rtol=1e-7, atol=1e-9)


def test_cme_weights_live_on_pivots_and_constraints_hold(sample, rng):
    X, Y, bases = sample
    cme = fit_cme(None, None, None, RBF(1.0), 1e-6, bases=bases)
    pivots = np.asarray(bases.basis_y.pivots)
    f = np.ones(250)
    f[pivots] = 0.0  # f vanishes on the pivots: only pivots carry mass
    np.testing.assert_allclose(cme.conditional_expectation(X[:10], f).mean, 0.0, atol=1e-14)
    assert float(cme.normalisation_error(rng.standard_normal((200, 2))).max()) > 1e-3  # CME is not normalised
    con = fit_cme(None, None, None, RBF(1.0), 1e-6, constraint="normalised_positive", bases=bases)
    v = np.asarray(con.weights(X).sum(axis=0))  # pivot weights summed over the training x
    assert v.sum() == pytest.approx(250.0, rel=1e-12) and v.min() >= -1e-9


def test_simplex_qp_matches_a_generic_qp(rng):
    B = rng.standard_normal((12, 12))
    K = B @ B.T + 0.1 * np.eye(12)
    v0 = rng.standard_normal(12) * 3
    v = simplex_qp(K, v0, 5.0)
    assert v.min() >= 0 and v.sum() == pytest.approx(5.0, rel=1e-13) and np.sum(v == 0) > 0
    ref = jaxopt.OSQP(tol=1e-12, maxiter=100000).run(
        params_obj=(jnp.asarray(2 * K), jnp.asarray(-2 * K @ v0)), params_eq=(jnp.ones((1, 12)), jnp.array([5.0])),
        params_ineq=(-jnp.eye(12), jnp.zeros(12))).params.primal
    np.testing.assert_allclose(v, ref, atol=1e-6)
    with pytest.raises(ValueError, match="total"):
        simplex_qp(K, v0, 0.0)


def test_klr_is_stationary_and_its_norm_is_the_rkhs_norm(rng):
    n, lam = 120, 0.5
    X = rng.standard_normal((n, 2))
    labels = (X[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(float)
    k = RBF(1.0)
    klr = fit_klr(X, labels, k, lam, tol=1e-8)
    A = klr.basis_x.A
    grad = jax.grad(lambda c: jnp.sum(jax.nn.softplus(A @ c) - labels * (A @ c)) + lam * jnp.sum(c**2))(klr.coef)
    assert float(jnp.abs(grad).max()) <= 1e-6
    Q = np.zeros((n, A.shape[1]))
    Q[np.asarray(klr.basis_x.pivots)] = np.asarray(klr.basis_x.R)
    c = Q @ np.asarray(klr.coef)  # canonical coefficients: cl(x) = sigmoid(k(x, X) c)
    assert c @ np.asarray(k.gram(X)) @ c == pytest.approx(float(jnp.sum(klr.coef**2)), rel=1e-6)
    np.testing.assert_allclose(klr.predict_proba(X), jax.nn.sigmoid(np.asarray(k.gram(X)) @ c), atol=1e-6)
    accuracy = np.mean((np.asarray(klr.predict_proba(X)) > 0.5) == labels)
    assert accuracy > 0.8
    with pytest.raises(ValueError, match="labels"):
        fit_klr(X, labels + 1, k, lam)


def test_hyperparameter_grid_search_returns_the_best_scored_fit():
    from bayeskern import median_heuristic
    from bayeskern.jdl import select_hyperparameters

    rng = np.random.default_rng(5)
    X = rng.standard_normal((80, 1))
    Y = X + 0.3 * rng.standard_normal((80, 1))
    seen = []

    def score(model):  # best at lam = 1e-4, earlier bandwidth pairs better; the first fit scores NaN
        seen.append((float(model.kernel_x.lengthscale), float(model.kernel_y.lengthscale), model.lam))
        value = abs(np.log10(model.lam) + 4) + 1e-3 * len(seen)
        return np.nan if len(seen) == 1 else value  # a NaN first defeats min(), argmin and nan_to_num

    best, scores = select_hyperparameters(X, Y, score, scales=(0.5, 2.0), lams=(1e-6, 1e-4, 1e-2))
    assert len(scores) == len(seen) == 12
    assert best == (0.5, 0.5, 1e-4) and np.isnan(scores[(0.5, 0.5, 1e-6)])  # NaN never wins
    assert {s[:2] for s in scores} == {(0.5, 0.5), (0.5, 2.0), (2.0, 0.5), (2.0, 2.0)}
    mx, my = float(median_heuristic(X)), float(median_heuristic(Y))  # bandwidths = scale x median
    assert {(round(a / mx, 12), round(b / my, 12)) for a, b, _ in seen} == {s[:2] for s in scores}
