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
    tempered = np.exp(L / post.n - np.max(L / post.n))
    assert np.allclose(post.weights, tempered / tempered.sum())
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
    only = bke.BayesAggregate(families=("gaussian",), num_bandwidths=0, posterior_share=1.0)(X, Y,
                                                                                          key=jax.random.key(1))
    assert all("posterior" in label for label in only.labels) and all(type(k) is bk.RBF for k in only.kernels)


@pytest.mark.parametrize("dim, share", [(2, 0.5), (31, 0.5), (32, bke.WIDE_POSTERIOR_SHARE),
                                        (100, bke.WIDE_POSTERIOR_SHARE)])
def test_the_default_share_falls_from_a_span_of_32_dimensions(dim, share):
    """The posterior kernels carry half the weight by default, a tenth once the pooled sample spans 32 or more
    dimensions; the floor's bandwidths share the rest evenly, or from 32 dimensions in proportion to 1 / l; with no
    floor the posterior kernels carry all of it."""
    rng = np.random.default_rng(dim)
    X, Y = rng.standard_normal((60, dim)), rng.standard_normal((60, dim))
    collection = bke.BayesAggregate(families=("gaussian",), inducing=(10,))(X, Y, key=jax.random.key(2))
    posterior = np.array(["posterior" in label for label in collection.labels])
    assert posterior.any() and collection.weights[posterior].sum() == pytest.approx(share)
    assert collection.weights.sum() == pytest.approx(1.0)
    floor = collection.weights[~posterior]
    ells = np.array([k.lengthscale for k in np.array(collection.kernels, object)[~posterior]])
    assert np.ptp(ells) > 0.5 * ells.min()
    spread = floor * ells if dim >= 32 else floor
    assert np.allclose(spread, spread[0], rtol=1e-9)
    only = bke.BayesAggregate(families=("gaussian",), num_bandwidths=0, inducing=(10,))(X, Y, key=jax.random.key(2))
    assert only.weights.sum() == pytest.approx(1.0) and all("posterior" in label for label in only.labels)


def test_the_share_follows_the_span_and_the_rule_always_has_a_kernel():
    """100 columns spanning a plane take the share of two dimensions; the independence rule keeps half in any
    dimension; a rule without a floor on a sample too coarse for the posterior gets the median heuristic's kernel."""
    from bayeskern.bke.aggregate import MARGINAL_RULE

    rng = np.random.default_rng(5)
    flat = np.zeros((120, 100))
    flat[:, :2] = rng.standard_normal((120, 2))
    planar = bke.BayesAggregate(families=("gaussian",), inducing=(10,))(flat, key=jax.random.key(2))
    assert planar.weights[np.array(["posterior" in label for label in planar.labels])].sum() == pytest.approx(0.5)
    marginal = MARGINAL_RULE(rng.standard_normal((120, 100)), key=jax.random.key(2))
    assert marginal.weights[np.array(["posterior" in label for label in marginal.labels])].sum() == pytest.approx(0.5)
    coarse = np.repeat(np.eye(5, 100), 10, axis=0)      # 5 distinct points, every distance sqrt 2
    fallback = bke.BayesAggregate(families=("gaussian",), num_bandwidths=0)(coarse, key=jax.random.key(2))
    assert len(fallback.kernels) == 1 and "median" in fallback.labels[0]
    assert fallback.kernels[0].lengthscale == pytest.approx(np.sqrt(2.0))


def test_the_floor_reaches_the_scale_that_resolves_concentrated_distances():
    """In low dimension the floor starts at half the 5 % quantile of the distances; in high dimension, where every
    pair sits near the same distance, at half the root of the 5-95 % range of the squared distances."""
    from bayeskern.bke.aggregate import _distance_range

    rng = np.random.default_rng(7)
    for D in (1, 768):
        Z = rng.standard_normal((300, D))
        d2 = np.sum((Z[:, None] - Z[None]) ** 2, -1)[np.triu_indices(300, 1)]
        low, high = _distance_range(Z, jax.random.key(0))
        assert high == pytest.approx(np.sqrt(d2.max()), rel=1e-12)
        spread = np.sqrt(np.quantile(d2, 0.95) - np.quantile(d2, 0.05))
        expected = np.quantile(np.sqrt(d2), 0.05) if D == 1 else spread
        assert low == pytest.approx(expected, rel=1e-12)
    # D = 768: |x - y|^2 has sd sqrt(8 D), so its 5-95 % range is about 3.29 sqrt(8 D); the floor then starts near
    # a fifth of the median distance sqrt(2 D), not at half its 5 % quantile (0.48 of it)
    assert low == pytest.approx(np.sqrt(2 * 1.645 * np.sqrt(8 * 768)), rel=0.1)
    floor = bke.BayesAggregate()(Z[:150], Z[150:], key=jax.random.key(1))
    smallest = min(k.lengthscale for k, label in zip(floor.kernels, floor.labels) if "floor" in label)
    assert smallest == pytest.approx(low / 2, rel=0.2)   # the rule draws its own subsample of distances


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


def _binary_mmd_p_value(x, S, n, kernel_value):
    """The permutation p-value of the unbiased MMD^2 of binary data x (N,) for the label columns S (N, B + 1) (column 0
    observed), counted in exact arithmetic: the statistic is P + Q c with rationals P, Q given by the counts of ones
    in each sample, and c = k(0, 1)."""
    from fractions import Fraction

    m, ones = len(x) - n, int(x.sum())

    def parts(a):
        b = ones - a
        within = lambda k, size: (Fraction(k * (k - 1) + (size - k) * (size - k - 1)), Fraction(2 * k * (size - k)))
        (e1, u1), (e2, u2) = within(a, n), within(b, m)
        exy, uxy = Fraction(a * b + (n - a) * (m - b)), Fraction(a * (m - b) + (n - a) * b)
        return (e1 / (n * (n - 1)) + e2 / (m * (m - 1)) - 2 * exy / (n * m),
                u1 / (n * (n - 1)) + u2 / (m * (m - 1)) - 2 * uxy / (n * m))

    counts = (S * x[:, None]).sum(0).round().astype(int)
    P0, Q0 = parts(counts[0])
    extreme = 0
    for a in counts[1:]:
        dP, dQ = (v - v0 for v, v0 in zip(parts(a), (P0, Q0)))
        extreme += (dP == 0 and dQ == 0) or float(dP) + float(dQ) * kernel_value >= 0
    return (1 + extreme) / len(counts)


def test_ties_of_discrete_data_are_counted_as_exact_arithmetic_counts_them():
    """Binary data, n = 30 per sample, B = 99: labellings with the same counts have equal statistics, which the
    float sums differ on in the last bits (the observed, contiguous labelling rounding high). The p-value equals the
    one counted in exact arithmetic on every one of 100 null data sets (without the tie tolerance 92 of them
    differ), and so do the per-kernel p-values of the aggregated test."""
    from bayeskern.mmd import _label_batch

    n, B = 30, 99
    for r in range(100):
        rng = np.random.default_rng(500 + r)
        x = (rng.uniform(size=2 * n) < 0.5).astype(float)
        key = jax.random.key(r)
        S = np.asarray(_label_batch(jax.random.split(key, B + 1), 0, B + 1, 2 * n, n))
        result = bk.mmd_test(x[:n, None], x[n:, None], bk.RBF(1.0), key=key, n_permutations=B)
        assert result.p_value == _binary_mmd_p_value(x, S, n, np.exp(-0.5)), r
        if r < 10:
            collection = bk.KernelCollection((bk.RBF(0.7), bk.Matern12(2.0)), np.array([0.5, 0.5]), ("a", "b"))
            aggregated = bk.mmd_test(x[:n, None], x[n:, None], collection, key=key, n_permutations=B)
            assert aggregated.kernel_p_values[0] == _binary_mmd_p_value(x, S, n, np.exp(-0.5 / 0.7**2))
            assert aggregated.kernel_p_values[1] == _binary_mmd_p_value(x, S, n, np.exp(-1 / 2.0))


def _digits_like(rng, n):
    """Integer pixels with five levels, d = 16, each image drawn from one of four templates: many repeated rows."""
    templates = rng.integers(0, 5, (4, 16))
    return np.clip(templates[rng.integers(0, 4, n)] + rng.integers(-1, 2, (n, 16)) * (rng.uniform(size=(n, 16)) < 0.1),
                   0, 4).astype(float)


@pytest.mark.parametrize("rule", ["bayes", "bkl", "median"])
def test_every_kernel_rule_takes_repeated_rows_constant_columns_and_few_levels(rule):
    """A test is defined for any data: rounded data with many repeated rows and constant columns, a sample whose
    every row appears twice, integers with five levels, and a constant sample give a result in every kernel rule
    (the constant sample p = 1)."""
    from bayeskern.inference import bkl_kernel

    kernel = bkl_kernel if rule == "bkl" else rule
    rng = np.random.default_rng(7)
    images = _digits_like(rng, 120)
    images[:, 3] = 2.0   # a constant pixel
    twice = np.repeat(rng.standard_normal((40, 3)), 2, axis=0)
    levels = rng.integers(0, 5, (90, 1)).astype(float)
    for X, Y in ((images[:60], images[60:]), (twice, twice[::-1] + 0.5), (levels[:45], levels[45:])):
        result = bk.mmd_test(X, Y, kernel, key=jax.random.key(2), n_permutations=99)
        assert 0.0 < result.p_value <= 1.0
    constant = bk.mmd_test(np.ones((20, 2)), np.ones((25, 2)), kernel, key=jax.random.key(3), n_permutations=99)
    assert constant.p_value == 1.0
    if rule != "median":
        hsic = bk.hsic_test(levels, levels ** 2 + rng.integers(0, 2, (90, 1)), kernel, kernel, key=jax.random.key(4),
                            n_permutations=99)
        assert hsic.reject(0.05)


def test_the_rule_in_high_dimension_is_cheap_and_keeps_its_inducing_points():
    """In D = 400 (pooled N = 200) the kernel rule holds out m = 10 and 30 points (fewer than D, the m x m side of the
    volume) and 50 (N / 4), and its modes sit at the data's scale; the test rejects a scale change in 40 of the 400
    coordinates that the median heuristic also sees."""
    rng = np.random.default_rng(8)
    X, Y = rng.standard_normal((100, 400)), rng.standard_normal((100, 400))
    Y[:, :40] *= 1.6
    collection = bke.BayesAggregate()(X, Y, key=jax.random.key(0))
    median = bk.median_heuristic(X, Y)
    modes = [float(k.lengthscale) for k, label in zip(collection.kernels, collection.labels) if "posterior" in label]
    assert modes and all(0.1 * median < ell < 3 * median for ell in modes), (modes, median)
    post = bke.lengthscale_posterior(np.vstack([X, Y]), key=jax.random.key(1), m=10)
    assert post.m == 10 and post.n == 190
    assert bk.mmd_test(X, Y, "bayes", key=jax.random.key(2), n_permutations=199).reject(0.05)


def test_from_a_span_of_32_dimensions_the_rule_caps_the_inducing_points_at_the_dimension(monkeypatch):
    """In a 40-dimensional span the rule's m = 100 becomes m = D = 40 (the O(n m + m^3) form of the volume); in a
    10-dimensional span it stays above D (m = 10, 30, 100)."""
    from bayeskern.bke import aggregate

    seen = []
    real = aggregate.spanned_posterior

    def spy(pooled, key, m, *args, **kwargs):
        seen.append((pooled.shape[1], m))
        return real(pooled, key, m, *args, **kwargs)

    monkeypatch.setattr(aggregate, "spanned_posterior", spy)
    rng = np.random.default_rng(9)
    for dim in (40, 10):
        bke.BayesAggregate()(rng.standard_normal((250, dim)), rng.standard_normal((250, dim)), key=jax.random.key(0))
    assert seen == [(40, 10), (40, 30), (40, 40), (10, 10), (10, 30), (10, 100)]


def test_on_repeated_rows_the_rule_keeps_likelihood_points_of_a_few_common_sizes(monkeypatch):
    """The copies of the inducing points leave the likelihood points, so their number changes with the data and each
    count would compile the posterior's curve again: the rule keeps a random subset of one of eight sizes per octave
    (at most an eighth fewer). Data without repeated rows keep every point, and so does lengthscale_posterior."""
    from bayeskern.bke import hyper
    from bayeskern.bke.inducing import _common_size, hold_out_inducing

    assert [_common_size(n) for n in (15, 16, 519, 583, 1000, 1024)] == [15, 16, 512, 576, 960, 1024]
    sizes = np.array([_common_size(n) for n in range(1, 5000)])
    assert np.all(8 * sizes >= 7 * np.arange(1, 5000)) and len(np.unique(sizes[2047:4095])) == 8
    seen = []
    build = hyper.SEPseudolikelihood.build.__func__

    def spy(cls, X, Z, **kwargs):
        seen.append((X.shape[0], Z.shape[0]))
        return build(cls, X, Z, **kwargs)

    monkeypatch.setattr(hyper.SEPseudolikelihood, "build", classmethod(spy))
    rng = np.random.default_rng(3)
    counts = {}
    for seed in range(3):
        X, Y = rng.standard_normal((300, 3)), rng.standard_normal((300, 3))
        Y[:150] = X[rng.integers(0, 300, 150)]            # half of Y repeats rows of X
        seen.clear()
        bke.BayesAggregate()(X, Y, key=jax.random.key(seed))
        for n, m in seen:
            assert n == 600 - m or (n == _common_size(n) and n < 600 - m), (n, m)
            counts.setdefault(m, set()).add(n)
        pooled = np.vstack([X, Y])
        post = bke.lengthscale_posterior(pooled, key=jax.random.key(seed), m=30)
        assert post.n == hold_out_inducing(pooled, jax.random.key(seed), 30)[0].shape[0]
    assert sorted(counts) == [10, 30, 100] and all(len(sizes) <= 2 for sizes in counts.values()), counts
    assert any(n < 500 for n in counts[100])                   # the copies of 100 inducing points did leave
    seen.clear()
    bke.BayesAggregate()(rng.standard_normal((300, 3)), rng.standard_normal((300, 3)), key=jax.random.key(9))
    assert seen == [(590, 10), (570, 30), (500, 100)]
