"""Exact Gaussian setting, test functions and data sets used by the compression algorithms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskern import RBF
from bayeskern.compression import data, exact_gaussian as eg
from bayeskern.compression import metrics as bc_metrics

SETTING = dict(a=jnp.array([1.0, -0.5]), b=0.3, sigma=0.4, sigma_x=1.2, ell_x=0.8, ell_y=0.7)


def _within(mc, exact, n_se=4.0):
    mean, se = float(np.mean(mc)), float(np.std(mc) / np.sqrt(len(mc)))
    assert abs(mean - float(exact)) < n_se * se + 1e-12, (mean, float(exact), se)


def test_closed_form_expectations_match_monte_carlo():
    s = eg.GaussianSetting(**SETTING)
    n = 2_000_000
    x, y = (np.asarray(v) for v in eg.sample(s, n, jax.random.key(0)))
    x2, y2 = (np.asarray(v) for v in eg.sample(s, n, jax.random.key(1)))
    k = lambda a, b, ell: np.exp(-np.sum((a - b) ** 2, -1) / (2 * ell**2))
    u, v = np.array([0.3, -0.8]), np.array([-0.5, 0.4])
    _within(k(u, x, 0.8) * k(x, v, 0.8), eg.feature_expectation(s, u[None], v[None])[0, 0])
    _within(k(u, x, 0.8) * k(y, np.array([0.9]), 0.7), eg.joint_expectation(s, u[None], jnp.array([0.9]))[0])
    y_same_x = x @ np.asarray(s.a) + s.b + s.sigma * np.random.default_rng(2).standard_normal(n)
    _within(k(y, y_same_x[:, None], 0.7), eg.conditional_self_term(s))
    _within(k(x, x2, 0.8) * k(y, y2, 0.7), eg.joint_constant(s))


def test_exact_amcmd2_and_the_tower_identity_agree_with_quadrature():
    s = eg.GaussianSetting()  # defaults, d = 1
    rng = np.random.default_rng(3)
    cx, cy = rng.standard_normal((6, 1)), rng.standard_normal((6, 1))
    lam, m = 1e-3, 6
    nodes, weights = np.polynomial.hermite_e.hermegauss(200)  # E over x ~ N(0, 1)
    weights = weights / weights.sum()
    xq = nodes[:, None] * s.sigma_x
    K = lambda a, b, ell: np.exp(-((a - b.T) ** 2) / (2 * ell**2))
    W = np.linalg.inv(K(cx, cx, 1.0) + (m * lam + 1e-10) * np.eye(m))
    alpha = W @ K(cx, xq, 1.0)  # (m, Q)
    f = 1.5 * xq[:, 0]
    var = s.ell_y**2 + s.sigma**2
    mvec = s.ell_y / np.sqrt(var) * np.exp(-((cy - f[None]) ** 2) / (2 * var))  # m_j(x), (m, Q)
    H = np.asarray(jax.vmap(lambda yj: eg.joint_expectation(s, jnp.asarray(cx), jnp.full(m, yj)))(jnp.asarray(cy[:, 0])))
    assert np.sum(W * H) == pytest.approx(np.sum(weights * np.sum(alpha * mvec, 0)), abs=1e-10)
    quad = float(eg.conditional_self_term(s)) + np.sum(weights * (np.sum(alpha * (K(cy, cy, 1.0) @ alpha), 0)
                                                                 - 2 * np.sum(alpha * mvec, 0)))
    exact = float(eg.exact_amcmd2(jnp.asarray(cx), jnp.asarray(cy), s, lam))
    assert exact == pytest.approx(quad, abs=1e-9) and exact >= 0
    # a different averaging law: nu = N(0, 0.5^2)
    xq = nodes[:, None] * 0.5
    alpha, f = W @ K(cx, xq, 1.0), 1.5 * xq[:, 0]
    mvec = s.ell_y / np.sqrt(var) * np.exp(-((cy - f[None]) ** 2) / (2 * var))
    quad = float(eg.conditional_self_term(s)) + np.sum(weights * (np.sum(alpha * (K(cy, cy, 1.0) @ alpha), 0)
                                                                 - 2 * np.sum(alpha * mvec, 0)))
    assert float(eg.exact_amcmd2(jnp.asarray(cx), jnp.asarray(cy), s, lam, sigma_nu=0.5)) == pytest.approx(quad,
                                                                                                          abs=1e-9)


def test_exact_jkip_objective_plus_constant_is_a_jmmd2():
    s = eg.GaussianSetting()
    cx, cy = eg.sample(s, 200_000, jax.random.key(4))
    # the JMMD^2 of a large sample from P to P itself is ~0 (Monte Carlo error only)
    sub = (cx[:400], cy[:400])
    value = float(eg.exact_jkip_objective(*sub, s) + eg.joint_constant(s))
    assert 0 <= value < 5e-3
    far = float(eg.exact_jkip_objective(sub[0] + 3.0, sub[1], s) + eg.joint_constant(s))
    assert far > 10 * value


@pytest.mark.parametrize("name", sorted(data.TEST_FUNCTIONS))
def test_test_function_expectations_match_monte_carlo(name):
    h, _ = data.TEST_FUNCTIONS[name]
    for mu, tau in ((0.3, 0.8), (-1.2, 0.4)):
        draws = mu + tau * np.random.default_rng(5).standard_normal(400_000)
        _within(np.asarray(h(jnp.asarray(draws))), data.gaussian_expectation(name, mu, tau))


def test_data_sets_follow_their_definitions():
    x, y = data.heteroscedastic(20_000, jax.random.key(0))
    mean, sd = data.heteroscedastic_truth(x[:, 0])
    z = (np.asarray(y[:, 0]) - np.asarray(mean)) / np.asarray(sd)
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03 and float(x.min()) >= -3 and float(x.max()) <= 3
    x, y, p = data.imbalanced(50_000, seed=0)
    np.testing.assert_allclose(np.bincount(y) / len(y), [0.32, 0.12, 0.19, 0.37], atol=0.01)
    assert np.allclose(p.sum(1), 1.0) and 0.58 < np.mean(p.argmax(1) == y) < 0.68  # Bayes accuracy ~0.63
    x2, y2, _ = data.imbalanced(50_000, seed=0)
    np.testing.assert_array_equal(y, y2)
    (xtr, ytr), (xv, yv), (xte, yte) = data.train_val_test_split(x[:1000], y[:1000], jax.random.key(1))
    assert (len(xtr), len(xv), len(xte)) == (800, 100, 100)


def test_quadrature_truth_equals_the_exact_amcmd2():
    s = eg.GaussianSetting()
    rng = np.random.default_rng(6)
    cx, cy = rng.standard_normal((5, 1)), rng.standard_normal((5, 1))
    nodes, weights = np.polynomial.hermite_e.hermegauss(120)
    truth = bc_metrics.amcmd2_gaussian_truth((cx, cy), RBF(1.0), RBF(1.0), 1e-3, nodes[:, None], weights / weights.sum(),
                                             1.5 * nodes, np.full(120, 0.5))
    assert float(truth) == pytest.approx(float(eg.exact_amcmd2(jnp.asarray(cx), jnp.asarray(cy), s, 1e-3)), abs=1e-8)


@pytest.mark.slow  # reference reproduction (suite time); runs with pytest -m slow
def test_a7_exact_setting_ackip_beats_jkip_beats_random():
    """Exact Gaussian setting (reference 0.289 / 0.163 / 0.020 at m = 8): ACKIP < JKIP < Random in exact AMCMD^2."""
    s = eg.GaussianSetting()
    for m in (8, 16):
        random = np.mean([float(eg.exact_amcmd2(*eg.sample(s, m, jax.random.key(100 + i)), s, 1e-3)) for i in range(20)])
        value = {method: float(eg.exact_amcmd2(*eg.exact_kip(s, m, method=method, key=jax.random.key(1),
                                                              num_steps=1500)[:2], s, 1e-3))
                 for method in ("jkip", "ackip")}
        assert value["ackip"] < value["jkip"] < random
    assert value["ackip"] < 0.01  # m = 16: reference 0.0025


def test_exact_herding_score_is_the_population_limit_of_the_data_score():
    from bayeskern.compression.objectives import data_blocks, herding_score

    s = eg.GaussianSetting()
    x, y = eg.sample(s, 400_000, jax.random.key(7))
    blocks = data_blocks(x, y, 8192)
    rng = np.random.default_rng(8)
    cx, cy = jnp.asarray(rng.standard_normal((5, 1))), jnp.asarray(rng.standard_normal((5, 1)))
    mask = jnp.array([True, True, True, False, False])
    kx, ky = s.kernels
    for z in (jnp.array([0.3]), jnp.array([-1.1])):
        for w in (jnp.array([0.5]), jnp.array([-1.4])):
            empirical = float(herding_score(z, w, blocks, kx, ky, cx, cy, mask))
            exact = float(eg.exact_herding_score(z, w, cx, cy, mask, s))
            assert exact == pytest.approx(empirical, abs=3e-3)  # Monte Carlo error of the mean embedding ~1e-3


def test_bundled_sklearn_data_sets_load():
    pytest.importorskip("sklearn")
    x, y = data.sklearn_dataset("digits")
    assert x.shape == (1797, 64) and y.dtype.kind == "i" and set(np.unique(y)) == set(range(10))
    x, y = data.sklearn_dataset("diabetes")
    assert x.shape == (442, 10) and y.shape == (442, 1)
    with pytest.raises(ValueError, match="name must be one of"):
        data.sklearn_dataset("mnist")
