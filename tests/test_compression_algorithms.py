"""Compression algorithms and their results."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bayeskern import RBF, Indicator
from bayeskern.compression import (ackh, ackip, class_probabilities, jkh, jkip, jmmd2, kcd2_tower, load_result,
                                   select_lambda, validation_loss)
from bayeskern.compression.herding import ackh_pool_scores, herd_pool
from bayeskern.compression.objectives import (ackip_objective, class_score_terms, class_scores, data_blocks,
                                              jkip_objective, label_sweep)

ackip_objective, jkip_objective = jax.jit(ackip_objective), jax.jit(jkip_objective)  # compiled once per shape

KX, KY = RBF(0.8), RBF(0.6)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (40, 2))
    y = (x[:, :1] * np.sin(2 * x[:, 1:]) + 0.2 * rng.standard_normal((40, 1)))
    return x, y


def _pool_run(method, x, y, m, **kw):
    xj, yj = jnp.asarray(x), jnp.asarray(y)
    return herd_pool(method, xj, yj, data_blocks(xj, yj, 16), KX, kw.pop("ky", KY), m, x=xj, y=yj, **kw)


def _jmmd2_brute(x, y, cx, cy):
    """JMMD^2 by explicit sums over the stacked sample with weights 1/n and -1/m."""
    z, w = np.vstack([x, cx]), np.concatenate([np.full(len(x), 1 / len(x)), np.full(len(cx), -1 / len(cx))])
    v = np.vstack([y, cy])
    K = np.exp(-np.sum((z[:, None] - z[None]) ** 2, -1) / (2 * 0.8**2))
    L = np.exp(-np.sum((v[:, None] - v[None]) ** 2, -1) / (2 * 0.6**2))
    return w @ (K * L) @ w


def test_jkh_is_exactly_greedy_and_recovers_the_data_at_m_equal_n(data):
    x, y = data
    idx, trace = _pool_run("jkh", x, y, 8)
    const = _jmmd2_brute(x, y, x[:1], y[:1]) - _j(x, y, x[:1], y[:1])  # the data-data term dropped from J
    chosen = []
    for t, j in enumerate(np.asarray(idx)):
        rest = [c for c in range(len(x)) if c not in chosen]
        scores = [_jmmd2_brute(x, y, x[chosen + [c]], y[chosen + [c]]) for c in rest]
        assert rest[int(np.argmin(scores))] == j
        chosen.append(int(j))
        assert _jmmd2_brute(x, y, x[chosen], y[chosen]) - trace[t] == pytest.approx(const, abs=1e-12)
    idx, _ = _pool_run("jkh", x, y, len(x))
    assert sorted(np.asarray(idx).tolist()) == list(range(len(x)))
    assert abs(float(jmmd2((x, y), (x[np.asarray(idx)], y[np.asarray(idx)]), KX, KY))) < 1e-12
    repeated, _ = _pool_run("jkh", x, y, 60, replace=True)  # with replacement m may exceed n
    assert len(repeated) == 60


def _j(x, y, cx, cy):
    return float(jkip_objective(jnp.asarray(cx), jnp.asarray(cy), data_blocks(jnp.asarray(x), jnp.asarray(y)), KX, KY))


def test_ackh_pool_scores_equal_the_objective_from_scratch(data):
    x, y = data
    xj, yj = jnp.asarray(x), jnp.asarray(y)
    blocks, lam, m = data_blocks(xj, yj, 16), 1e-2, 6
    rng = np.random.default_rng(1)
    chosen = rng.choice(40, 3, replace=False)
    for t in (0, 3):
        cx, cy = jnp.zeros((m, 2)).at[:t].set(xj[chosen[:t]]), jnp.zeros((m, 1)).at[:t].set(yj[chosen[:t]])
        mask = jnp.arange(m) < t
        scores = ackh_pool_scores(xj, yj, blocks, KX, KY, cx, cy, mask, lam)
        for c in (0, 7, 23):
            idx = np.append(chosen[:t], c)
            scratch = ackip_objective(xj[idx], yj[idx], blocks, KX, KY, lam)
            assert float(scores[c]) == pytest.approx(float(scratch), abs=1e-12)
    idx, trace = _pool_run("ackh", x, y, 5, lam_c=lam)
    assert len(set(np.asarray(idx).tolist())) == 5
    assert float(trace[-1]) == pytest.approx(float(ackip_objective(xj[idx], yj[idx], blocks, KX, KY, lam)), abs=1e-12)
    labels = np.arange(40) % 3  # the same scorer with the indicator kernel
    lj = jnp.asarray(labels)
    idx, trace = _pool_run("ackh", x, labels, 4, lam_c=lam, ky=Indicator())
    scratch = ackip_objective(xj[idx], lj[idx], data_blocks(xj, lj, 16), KX, Indicator(), lam)
    assert float(trace[-1]) == pytest.approx(float(scratch), abs=1e-12)


@pytest.mark.parametrize("method", ["jkip", "ackip"])
def test_class_scores_differ_from_the_objective_by_a_constant_and_sweeps_descend(data, method):
    x, _ = data
    xj = jnp.asarray(x)
    labels = jnp.asarray(np.arange(40) % 4)
    blocks = data_blocks(xj, labels, 16)
    rng = np.random.default_rng(2)
    cx, cy = xj[:6] + 0.1 * rng.standard_normal((6, 2)), jnp.asarray(rng.integers(0, 4, 6))
    objective = (lambda lab: jkip_objective(cx, lab, blocks, KX, Indicator())) if method == "jkip" else \
        (lambda lab: ackip_objective(cx, lab, blocks, KX, Indicator(), 1e-2))
    terms = class_score_terms(method, cx, blocks, KX, 1e-2, 4)
    scores = np.asarray(class_scores(terms, cy, 4))
    for j in range(6):
        diffs = [float(objective(cy.at[j].set(c))) - scores[j, c] for c in range(4)]
        assert np.ptp(diffs) < 1e-12
    swept = label_sweep(terms, cy, 4)
    assert float(objective(swept)) <= float(objective(cy)) + 1e-15
    greedy = cy  # the same sweep by brute force on the full objective: slot by slot, keep strict improvements
    for j in range(6):
        values = [float(objective(greedy.at[j].set(c))) for c in range(4)]
        if min(values) < values[int(greedy[j])] - 1e-14:
            greedy = greedy.at[j].set(int(np.argmin(values)))
    np.testing.assert_array_equal(np.asarray(swept), np.asarray(greedy))


def test_kip_methods_lower_their_objectives_and_return_sets_in_user_units(data):
    x, y = data
    x_user, y_user = 5.0 + 3.0 * x, -2.0 + 10.0 * y
    for method, fn in (("jkip", jkip), ("ackip", ackip)):
        kw = dict(lam_c=1e-2) if method == "ackip" else {}
        res = fn(x_user, y_user, 6, key=jax.random.key(0), num_steps=150, progress_bar=False, **kw)
        assert res.method == method and res.x.shape == (6, 2) and res.y.shape == (6, 1) and res.x.dtype == np.float64
        assert res.objective[-1] < res.objective[0] and np.all(np.isfinite(res.objective))
        mapped = res.standardiser.inverse(res.x, res.y)
        np.testing.assert_allclose(res.x_original, mapped[0], rtol=1e-14)
        np.testing.assert_allclose(res.x_original, res.x * x_user.std(0) + x_user.mean(0), rtol=1e-12)
        np.testing.assert_allclose(res.y_original, res.y * y_user.std(0) + y_user.mean(0), rtol=1e-12)
    # the returned trace ends at the objective of the returned set
    xs, ys = (x_user - x_user.mean(0)) / x_user.std(0), (y_user - y_user.mean(0)) / y_user.std(0)
    assert res.objective[-1] == pytest.approx(float(kcd2_tower((xs, ys), (res.x, res.y), res.kernel_x, res.kernel_y,
                                                               1e-2)), abs=1e-10)
    batched = ackip(x, y, 6, key=jax.random.key(0), lam_c=1e-2, num_steps=100, batch_size=16, progress_bar=False)
    assert np.all(np.isfinite(batched.objective))


def test_discrete_kip_and_herding_use_the_indicator_kernel(data):
    x, _ = data
    labels = (x[:, 0] > 0).astype(int) + 2 * (x[:, 1] > 0)
    for fn in (jkip, ackip):
        res = fn(x, labels, 8, key=jax.random.key(1), num_steps=60, progress_bar=False)
        assert isinstance(res.kernel_y, Indicator) and res.y.dtype.kind == "i" and set(res.y) <= {0, 1, 2, 3}
        assert res.objective[-1] <= res.objective[0]
        probs = np.asarray(res.class_probabilities(x, 4))
        assert probs.shape == (40, 4) and np.allclose(probs.sum(1), 1.0) and probs.min() >= 0
        assert np.mean(probs.argmax(1) == labels) > 0.6
    res = ackh(x, labels, 6, key=jax.random.key(2), gradient=True, steps_per_point=10, progress_bar=False)
    assert res.y.dtype.kind == "i" and res.indices is None


def test_gradient_herding_traces_its_sets_and_beats_random_subsets(data):
    x, y = data
    xs, ys = (x - x.mean(0)) / x.std(0), (y - y.mean(0)) / y.std(0)
    rng = np.random.default_rng(6)
    for fn in (jkh, ackh):
        res = fn(x, y, 4, key=jax.random.key(3), gradient=True, steps_per_point=30, lam_c=1e-2, progress_bar=False,
                 optimizer=optax.adam(0.05))
        assert res.indices is None and res.x.shape == (4, 2)
        blocks = data_blocks(jnp.asarray(xs), jnp.asarray(ys))
        value = jkip_objective(res.x, res.y, blocks, res.kernel_x, res.kernel_y) if fn is jkh else \
            ackip_objective(res.x, res.y, blocks, res.kernel_x, res.kernel_y, 1e-2)
        assert res.objective[-1] == pytest.approx(float(value), abs=1e-10)
        objective = (lambda a, b: jkip_objective(a, b, blocks, res.kernel_x, res.kernel_y)) if fn is jkh else \
            (lambda a, b: ackip_objective(a, b, blocks, res.kernel_x, res.kernel_y, 1e-2))
        random = [float(objective(xs[i], ys[i])) for i in (rng.choice(40, 4, replace=False) for _ in range(10))]
        assert res.objective[-1] < np.mean(random)


def test_results_predict_and_round_trip(tmp_path, data):
    x, y = data
    res = jkh(x, y, 7, key=jax.random.key(4), lam_c=1e-2, progress_bar=False)
    np.testing.assert_allclose(res.x_original, x[res.indices], rtol=1e-14, atol=1e-14)
    path = tmp_path / "set.npz"
    res.save(path)
    back = load_result(path)
    np.testing.assert_array_equal(back.x, res.x)
    np.testing.assert_array_equal(back.objective, res.objective)
    assert back.lam_c == res.lam_c and back.method == "jkh"
    q = x[:5]
    np.testing.assert_array_equal(np.asarray(back.conditional_expectation(q, lambda v: v**2).mean),
                                  np.asarray(res.conditional_expectation(q, lambda v: v**2).mean))
    # the KCME of the result, by hand in standardised units
    xs = (x - x.mean(0)) / x.std(0)
    W = np.linalg.solve(np.asarray(res.kernel_x.gram(res.x)) + 7 * 1e-2 * np.eye(7),
                        np.asarray(res.kernel_x.cross(res.x, xs[:5])))
    np.testing.assert_allclose(np.asarray(res.conditional_expectation(q).mean)[:, 0],
                               W.T @ res.y_original[:, 0], rtol=1e-9)


def test_select_lambda_matches_a_brute_force_search_and_prefers_larger_on_ties():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((60, 1))
    y = np.sin(2 * x) + 0.1 * rng.standard_normal((60, 1))
    xv, yv = x[:15], y[:15]
    lam = select_lambda(x[15:], y[15:], xv, yv, KX, KY, size=45, key=jax.random.key(0), coarse=(1e-4, 1e-2, 1.0),
                        n_fine=5)
    coarse = min((float(validation_loss(x[15:], y[15:], xv, yv, KX, KY, g)), -g) for g in (1e-4, 1e-2, 1.0))
    fine = np.geomspace(-coarse[1] / 10, -coarse[1] * 10, 5)
    best = min((float(validation_loss(x[15:], y[15:], xv, yv, KX, KY, g)), -g) for g in fine)
    assert lam == pytest.approx(-best[1], rel=1e-12)
    assert class_probabilities(np.array([0, 1]), np.array([[-1.0], [-2.0]]), 2).tolist() == [[0.5, 0.5]]


def test_bad_inputs_are_named(data):
    x, y = data
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="smaller than the number of data points"):
        jkh(x, y, 40, key=key, lam_c=1.0, progress_bar=False)
    with pytest.raises(ValueError, match="m must be >= 1"):
        jkip(x, y, 0, key=key, progress_bar=False)
    with pytest.raises(ValueError, match="lam_c"):
        ackip(x, y, 5, key=key, lam_c=0.0, progress_bar=False)
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="x"):
        ackh(bad, y, 5, key=key, lam_c=1e-2, progress_bar=False)
    with pytest.raises(ValueError, match="integer class labels"):
        ackip(x, y[:, 0] + 0.5, 5, key=key, lam_c=1e-2, response="indicator", progress_bar=False)
    with pytest.raises(ValueError, match="same number of points"):
        jkip(x, y[:-1], 5, key=key, progress_bar=False)
    with pytest.raises(ValueError, match="negative label"):
        jkip(x, -np.ones(40, int), 5, key=key, progress_bar=False)
    with pytest.raises(ValueError, match="became non-finite after"):  # a NaN never reaches a returned trace
        ackip(x, y, 5, key=key, lam_c=1e-2, num_steps=20, optimizer=optax.adam(float("nan")), progress_bar=False)


def test_a_second_call_reuses_the_compiled_optimisation(data, caplog):
    """The loss is a static argument of the compiled rounds: it must be the same object for the same settings, or
    every call compiles the rounds anew (a new functools.partial per call did) and JAX keeps every program."""
    x, y = data
    for method in (ackip, jkip):
        method(x, y, 5, key=jax.random.key(0), num_steps=10, n_init=2, lam_c=1e-2, progress_bar=False)
        with jax.log_compiles(True), caplog.at_level("WARNING"):
            caplog.clear()
            method(x, y, 5, key=jax.random.key(1), num_steps=10, n_init=2, lam_c=1e-2, progress_bar=False)
        compiled = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling jit(")]
        assert not any(m.startswith(("Compiling jit(_round)", "Compiling jit(_loss_value)")) for m in compiled), \
            compiled
