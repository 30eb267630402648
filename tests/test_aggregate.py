"""The Bayesian aggregated MMD and HSIC tests: the aggregation against its definition, the BKE lengthscale posterior,
exact level under the null, power where the median heuristic has none, and what the result reports."""

import jax
import numpy as np
import pytest

import bayeskern as bk
from bayeskern import bke, plotting
from bayeskern.aggregate import aggregate_statistics
from bayeskern.bke.hyper import _basins


@pytest.fixture(autouse=True)
def _x64():
    bk.enable_x64()


def test_aggregation_matches_its_definition():
    rng = np.random.default_rng(0)
    stats, w = rng.standard_normal((30, 4)), np.array([0.1, 0.2, 0.3, 0.4])
    stats[5, 2] = stats[0, 2]  # a tie counts as at least as extreme
    aggregated, p = aggregate_statistics(stats, w)
    for b in range(30):
        for k in range(4):
            assert p[b, k] == np.mean(stats[:, k] >= stats[b, k])
        assert aggregated[b] == pytest.approx(max(np.log(w[k] / p[b, k]) for k in range(4)))


def test_a_collection_of_one_kernel_is_the_plain_test():
    rng = np.random.default_rng(1)
    X, Y = rng.standard_normal((40, 2)), rng.standard_normal((50, 2)) + 0.3
    kernel, key = bk.RBF(1.3), jax.random.key(3)
    plain = bk.mmd_test(X, Y, kernel, key=key, n_permutations=199)
    single = bk.mmd_test(X, Y, bk.KernelCollection.single(kernel), key=key, n_permutations=199)
    assert single.p_value == plain.p_value
    assert single.kernel_statistics[0] == pytest.approx(plain.statistic, rel=1e-12)
    x, y = X[:, :1], X[:, 1:] + X[:, :1] ** 2
    plain = bk.hsic_test(x, y, bk.RBF(1.0), bk.RBF(0.7), key=key, n_permutations=199)
    single = bk.hsic_test(x, y, bk.KernelCollection.single(bk.RBF(1.0)), bk.RBF(0.7), key=key, n_permutations=199)
    assert single.p_value == plain.p_value


def test_per_kernel_statistics_are_the_estimators():
    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((30, 1)), rng.laplace(size=(35, 1))
    result = bk.mmd_test(X, Y, "bayes", key=jax.random.key(0), n_permutations=99)
    for kernel, stat in zip(result.kernels, result.kernel_statistics):
        assert stat == pytest.approx(float(bk.mmd2_unbiased(X, Y, kernel)), rel=1e-9, abs=1e-12)
    x, y = X, np.sin(3 * X) + 0.3 * rng.standard_normal((30, 1))
    result = bk.hsic_test(x, y, "bayes", "bayes", key=jax.random.key(0), n_permutations=99)
    for (kx, ky), stat in zip(result.kernels, result.kernel_statistics):
        assert stat == pytest.approx(float(bk.hsic_biased(x, y, kx, ky)), rel=1e-9)
    assert np.isclose(result.weights.sum(), 1.0) and len(result.labels) == len(result.kernels)


def test_the_lengthscale_posterior_is_the_tempered_pseudolikelihood():
    rng = np.random.default_rng(3)
    centres = np.repeat(np.array([[-20.0, 0.0], [0.0, 0.0], [20.0, 0.0]]), 60, axis=0)
    X = centres + rng.standard_normal(centres.shape)
    post = bke.lengthscale_posterior(X, key=jax.random.key(0), m=40)
    L = post.log_likelihood
    assert np.allclose(post.weights, np.exp(L / post.n - np.max(L / post.n)) / np.sum(np.exp(L / post.n - np.max(L / post.n))))
    idx = [int(np.argmin(np.abs(post.grid - t))) for t in post.modes]
    for i in idx:
        assert L[i] >= L[max(i - 1, 0)] and L[i] >= L[min(i + 1, len(L) - 1)]
    assert np.isclose(post.mode_weights.sum(), 1.0) and np.all(np.diff(post.mode_weights) <= 0)
    # a within-cluster scale and a between-cluster scale
    assert min(post.modes) < 5.0 < max(post.modes), post.modes
    objective = bke.SEPseudolikelihood.build(*bke.hold_out_inducing(X, jax.random.key(0), 40))  # the same split
    assert L[10] == pytest.approx(float(objective(post.grid[10])), rel=1e-10)


def test_basins_climb_to_their_local_maximum():
    curve = np.array([0.0, 1.0, 3.0, 2.0, 1.5, 2.5, 4.0, 1.0])
    assert list(_basins(curve)) == [2, 2, 2, 2, 6, 6, 6, 6]


def test_the_rule_spreads_its_weight_as_documented():
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((80, 2)), rng.standard_normal((70, 2))
    rule = bke.BayesAggregate(posterior_share=0.6, num_bandwidths=4)
    collection = rule(X, Y, key=jax.random.key(1))
    posterior = np.array(["posterior" in label for label in collection.labels])
    assert collection.weights[posterior].sum() == pytest.approx(0.6)
    assert np.allclose(collection.weights[~posterior], 0.4 / 8)
    assert {type(k) for k in collection.kernels} == {bk.RBF, bk.Matern12}
    only = bke.BayesAggregate(families=("gaussian",), num_bandwidths=0, posterior_share=1.0)(X, Y, key=jax.random.key(1))
    assert all("posterior" in label for label in only.labels) and all(type(k) is bk.RBF for k in only.kernels)


@pytest.mark.parametrize("test", ["mmd", "hsic"])
def test_the_aggregated_test_holds_its_level(test):
    """Under the null the p-value is uniform on the permutation grid: seeded, 120 data sets."""
    p_values = []
    for r in range(120):
        rng = np.random.default_rng(100 + r)
        X, Y = rng.standard_normal((20, 1)), rng.standard_normal((20, 1))
        if test == "mmd":
            result = bk.mmd_test(X, Y, "bayes", key=jax.random.key(r), n_permutations=39)
        else:
            result = bk.hsic_test(X, Y, "bayes", "bayes", key=jax.random.key(r), n_permutations=39)
        p_values.append(result.p_value)
    p_values = np.array(p_values)
    for level in (0.05, 0.25, 0.5):
        se = np.sqrt(level * (1 - level) / len(p_values))
        assert np.mean(p_values <= level) <= level + 2.5 * se, (level, np.mean(p_values <= level))
    assert np.mean(p_values <= 0.5) >= 0.5 - 2.5 * np.sqrt(0.25 / len(p_values))   # not conservative to uselessness


def test_the_bayes_test_finds_the_grid_of_gaussians_the_median_misses():
    XP, XQ = bk.datasets.blobs(6.0, per=20, seed=0)
    key = jax.random.key(0)
    assert not bk.mmd_test(XP, XQ, "median", key=key).reject(0.05)
    result = bk.mmd_test(XP, XQ, "bayes", key=key)
    assert result.reject(0.05)
    best = result.kernels[result.ranking()[0]]
    assert float(best.lengthscale) < 5.0   # the within-cluster scale, not the grid's
    witness = bke.aggregated_witness(result, XP, XQ, grid=XP[:15])
    expected = bke.witness_posterior(XP, XQ, result.dominant("gaussian"), grid=XP[:15])
    assert np.allclose(witness.mean, expected.mean)


def test_independence_at_high_frequency():
    rng = np.random.default_rng(5)
    x = rng.uniform(-np.pi, np.pi, (200, 1))
    y = np.sin(8 * x) + 0.3 * rng.standard_normal((200, 1))
    key = jax.random.key(0)
    assert bk.hsic_test(x, y, "bayes", "bayes", key=key, n_permutations=199).reject(0.05)
    assert not bk.hsic_test(x, y, key=key, n_permutations=199).reject(0.05)


def test_dominant_and_the_evidence_plot(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    XP, XQ = bk.datasets.normal_vs_laplace(150, seed=1)
    result = bk.mmd_test(XP, XQ, "bayes", key=jax.random.key(2), n_permutations=99)
    first = result.ranking()[0]
    assert result.dominant() is result.kernels[first]
    assert type(result.dominant("exponential")) is bk.Matern12
    fig, ax = plt.subplots()
    plotting.plot_kernel_evidence(ax, result, top=5)
    assert len(ax.patches) == 5 and result.labels[first] in [t.get_text() for t in ax.get_yticklabels()]
    plotting.save_figure(fig, tmp_path / "evidence.png")
    with pytest.raises(TypeError, match="AggregatedTestResult"):
        plotting.plot_kernel_evidence(ax, bk.HypothesisTestResult(1.0, 0.5, "gamma"))
