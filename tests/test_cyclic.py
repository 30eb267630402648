"""Kernel tests with the cyclic-shift null: the exact kernel's statistics of every shift from one FFT pass, random
Fourier features of every stationary kernel, both against brute force on small inputs; exact level; ties; the
methods method="auto" chooses; progress."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayeskern as bk
from bayeskern import cyclic
from bayeskern.cyclic import (FEATURES_ABOVE, MAX_DEFAULT_FEATURES, MIN_CYCLIC_ROWS, WIDE_FEATURES_ABOVE,
                              WIDE_FROM_DIM, _features, _frequencies, choose_method, cyclic_layout,
                              default_num_features, hsic_cyclic_statistics, hsic_feature_statistics,
                              mmd_cyclic_statistics, mmd_feature_statistics, null_size)
from bayeskern.kernels.spectral import fourier_features, spectral_frequencies


@pytest.fixture(autouse=True)
def _x64():
    bk.enable_x64()


@pytest.mark.parametrize("kernel", [bk.RBF(0.8), bk.RBF(np.array([0.5, 2.0])), bk.Matern12(1.3), bk.Matern32(0.7),
                                    bk.Matern52(1.1), bk.RationalQuadratic(0.9, 1.5),
                                    bk.kernels.RBFFull(np.array([[0.8, 0.0], [0.3, 0.5]])), 2.5 * bk.Matern32(1.0)],
                         ids=lambda k: type(k).__name__ + ("ARD" if getattr(k, "lengthscale", np.ones(1)).ndim else ""))
def test_random_features_estimate_every_stationary_kernel(kernel):
    """phi(x) . phi(y) averages cos(w . (x - y)) over frequencies from the spectral measure: with R = 40000 it is
    within 4 Monte-Carlo standard errors of k(x, y) at distances from 0 to 3 lengthscales."""
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((6, 2)), rng.standard_normal((6, 2)) * 1.5
    R = 40_000
    freqs = spectral_frequencies(kernel, jax.random.key(1), 2, R)
    scale = float(getattr(kernel, "scale", 1.0))
    approx = np.asarray(fourier_features(jnp.asarray(X), freqs, scale) @ fourier_features(jnp.asarray(Y), freqs, scale).T)
    exact = np.asarray(kernel.cross(X, Y))
    # each cos term has variance at most 1/2 (times scale^2): the estimate's standard error is at most scale / sqrt(2R)
    assert np.max(np.abs(approx - exact)) < 4 * scale / np.sqrt(2 * R)
    assert np.allclose(np.diag(np.asarray(fourier_features(jnp.asarray(X), freqs, scale) @
                                          fourier_features(jnp.asarray(X), freqs, scale).T)), scale)


@pytest.mark.parametrize("B", [9, 100])   # several offsets per block (q = 12, s = 6); one (q = N) with reflections
def test_exact_cyclic_statistics_equal_the_estimators_on_every_shifted_labelling(B, monkeypatch):
    """mmd_cyclic_statistics: for every shift (and reflection, when the sample has fewer than B + 1 rows), the
    biased and unbiased MMD^2 of the relabelled sample by the plain estimators, for stationary and non-stationary
    kernels; hsic_cyclic_statistics: HSIC_b of the shifted (reflected) pairing."""
    rng = np.random.default_rng(7)
    n, m = 40, 33
    Z = np.vstack([rng.standard_normal((n, 3)), rng.standard_normal((m, 3)) + 0.3])
    kernels = (bk.RBF(0.7), bk.Matern12(1.5), bk.kernels.Linear(), 2.0 * bk.Matern32(0.9))
    monkeypatch.setattr(cyclic, "MIN_BLOCKS", 1)   # small blocks, so that 73 rows have several offsets
    layout = cyclic_layout(len(Z), B, jax.random.key(1))
    q, s = layout.blocks, layout.offsets
    assert layout.reflected == (B == 100) and null_size(layout) == (2 * q - 1 if B == 100 else q - 1)
    rows, first = Z[layout.order], (layout.order < n).reshape(s, q)
    patterns = [first, first[:, (-np.arange(q)) % q]] if layout.reflected else [first]   # c -> -c - b after the roll
    for estimator, statistic in (("biased", bk.mmd2_biased), ("unbiased", bk.mmd2_unbiased)):
        got = mmd_cyclic_statistics(kernels, jnp.asarray(Z), n, layout, estimator)
        assert got.shape == (null_size(layout) + 1, len(kernels))
        for i, pattern in enumerate(patterns):
            for b in range(q):
                labels = np.roll(pattern, -b, axis=1).ravel()
                want = [float(statistic(rows[labels], rows[~labels], k)) for k in kernels]
                np.testing.assert_allclose(got[i * q + b], want, rtol=1e-10, atol=1e-14)
    x, y = rng.standard_normal((61, 1)), rng.standard_normal((61, 2))
    kxs, kys = (bk.RBF(0.5), bk.Matern12(2.0)), (bk.RBF(0.8), bk.kernels.Linear(), bk.RBF(3.0))
    layout = cyclic_layout(61, B, jax.random.key(5))
    q, s = layout.blocks, layout.offsets
    got = hsic_cyclic_statistics(kxs, kys, jnp.asarray(x), jnp.asarray(y), layout)
    assert got.shape == (null_size(layout) + 1, len(kxs) * len(kys))
    xs, ys = x[layout.order], y[layout.order].reshape(s, q, 2)
    for i, pattern in enumerate([ys, ys[:, (-np.arange(q)) % q]] if layout.reflected else [ys]):
        for b in range(q):
            shifted = np.roll(pattern, -b, axis=1).reshape(-1, 2)
            np.testing.assert_allclose(got[i * q + b], [float(bk.hsic_biased(xs, shifted, a, c)) for a in kxs
                                                        for c in kys], rtol=1e-9, atol=1e-15)


def _shift_reference(phi, labels, layout):
    """(q, K, 2R) feature sums of the first sample under each cyclic shift, by brute force."""
    q, s = layout.blocks, layout.offsets
    P = phi[layout.order].reshape(s, q, *phi.shape[1:])
    L = labels[layout.order].reshape(s, q)
    return np.stack([np.einsum("tc...,tc->...", P, np.roll(L, -b, axis=1)) for b in range(q)]), L.sum(), L.size


def test_the_layout_divides_the_rows_into_enough_blocks():
    """q in [L, 2 L], L = max(B + 1, MIN_BLOCKS), leaving the fewest rows over; one row per block, with reflections,
    when the sample is smaller than B + 1; the rows used are distinct."""
    key = jax.random.key(3)
    for N, B, q, s, reflected in [(4000, 9, 400, 10, False), (1000, 500, 1000, 1, False), (4001, 500, 800, 5, False),
                                  (73, 100, 73, 1, True), (110, 49, 110, 1, False)]:
        layout = cyclic_layout(N, B, key)
        assert (layout.blocks, layout.offsets, layout.reflected) == (q, s, reflected)
        assert len(np.unique(layout.order)) == len(layout.order) == q * s
        L = max(B + 1, cyclic.MIN_BLOCKS)
        assert N % q == min(N % c for c in range(min(L, N), min(2 * L, N) + 1))
        assert null_size(layout) == (2 * q - 1 if reflected else q - 1) >= min(B, N - 1)
    assert not cyclic_layout(73, 100, key, reflections=False).reflected


def test_in_high_dimension_the_default_features_follow_the_dimension_and_track_the_exact_kernel():
    """64 frequencies approximate the statistics of a kernel on 300-dimensional data poorly (a change spread over
    many directions reaches them a few frequencies at a time); the default takes as many frequencies as dimensions,
    and its statistics over every shift follow the exact kernel's on the same layout (the correlation grows as
    about sqrt(R / (R + c)): 0.44 at R = 64, 0.76 at R = D = 300, 0.88 at 1024)."""
    assert [default_num_features(d) for d in (1, 64, 300, 5000)] == [64, 64, 300, MAX_DEFAULT_FEATURES]
    rng = np.random.default_rng(8)
    X, Y = rng.standard_normal((400, 300)), rng.standard_normal((400, 300))
    Y[:, :10] += 0.3
    kernel, key = bk.RBF(float(bk.median_heuristic(X, Y))), jax.random.key(9)
    run = lambda **options: bk.mmd_test(X, Y, kernel, key=key, n_permutations=199, **options)
    exact, default = run(method="cyclic"), run(method="features")
    assert default.statistic == run(method="features", num_features=300).statistic
    every_shift = lambda r: np.r_[r.statistic, r.null_samples]
    corr = lambda r: np.corrcoef(every_shift(r), every_shift(exact))[0, 1]
    assert corr(default) > 0.7 and corr(run(method="features", num_features=64)) < 0.55   # 0.76 and 0.44


def test_mmd_feature_statistics_equal_brute_force_for_every_shift():
    """Every shift's biased and unbiased MMD^2 of the feature kernel equals the brute-force formula on the shifted
    labels; the observed row equals the U-statistic of the feature Gram matrices."""
    rng = np.random.default_rng(1)
    n, m = 70, 53
    Z = np.vstack([rng.standard_normal((n, 2)), rng.standard_normal((m, 2)) + 0.3])
    kernels = (bk.RBF(0.7), bk.Matern12(1.5), 2.0 * bk.Matern32(0.9), bk.RationalQuadratic(0.5, 2.0))
    layout = cyclic_layout(len(Z), 19, jax.random.key(1))
    assert layout.blocks * layout.offsets == len(layout.order) and len(Z) - len(layout.order) < layout.offsets
    key, R = jax.random.key(2), 8
    freqs, scales = _frequencies(kernels, key, 2, R)
    phi = np.asarray(_features(jnp.asarray(Z), freqs, scales)).reshape(len(Z), len(kernels), -1)
    a, nn, N = _shift_reference(phi, (np.arange(len(Z)) < n).astype(float), layout)
    mm, total = N - nn, phi[layout.order].sum(0)
    b = total[None] - a
    biased = np.sum((a / nn - b / mm) ** 2, -1)
    unbiased = ((np.sum(a * a, -1) - np.asarray(scales) * nn) / (nn * (nn - 1))
                + (np.sum(b * b, -1) - np.asarray(scales) * mm) / (mm * (mm - 1)) - 2 * np.sum(a * b, -1) / (nn * mm))
    for estimator, want in (("biased", biased), ("unbiased", unbiased)):
        got = mmd_feature_statistics(kernels, jnp.asarray(Z), n, layout, key, R, estimator)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14)
    used = layout.order
    for k in range(len(kernels)):
        A, B = phi[used[used < n], k], phi[used[used >= n], k]
        Kxx, Kyy = A @ A.T, B @ B.T
        u = ((Kxx.sum() - np.trace(Kxx)) / (len(A) * (len(A) - 1)) + (Kyy.sum() - np.trace(Kyy)) / (len(B) * (len(B) - 1))
             - 2 * (A @ B.T).mean())
        assert unbiased[0, k] == pytest.approx(u, rel=1e-10)


def test_hsic_feature_statistics_equal_brute_force_for_every_shift():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((97, 1)), rng.standard_normal((97, 2))
    layout = cyclic_layout(97, 9, jax.random.key(5))
    kxs, kys = (bk.RBF(0.5), bk.RBF(2.0)), (bk.Matern12(1.0), bk.RBF(0.8), bk.RBF(3.0))
    key, R = jax.random.key(3), 4
    got = hsic_feature_statistics(kxs, kys, jnp.asarray(x), jnp.asarray(y), layout, key, R)
    fx, sx = _frequencies(kxs, key, 1, R)
    fy, sy = _frequencies(kys, jax.random.fold_in(key, 1), 2, R)
    px = np.asarray(_features(jnp.asarray(x), fx, sx)).reshape(97, 2, -1)[layout.order]
    py = np.asarray(_features(jnp.asarray(y), fy, sy)).reshape(97, 3, -1)[layout.order]
    q, s = layout.blocks, layout.offsets
    want = []
    for b in range(q):
        shifted = np.roll(py.reshape(s, q, 3, -1), -b, axis=1).reshape(s * q, 3, -1)
        xc, yc = px - px.mean(0), shifted - shifted.mean(0)
        want.append([np.sum((xc[:, i].T @ yc[:, j]) ** 2) / (s * q) ** 2 for i in range(2) for j in range(3)])
    np.testing.assert_allclose(got, np.array(want), rtol=1e-10, atol=1e-16)


@pytest.mark.parametrize("test", ["mmd", "hsic"])
@pytest.mark.parametrize("method", ["cyclic", "features"])
def test_the_cyclic_null_holds_its_level(test, method):
    """Under the null the p-value is uniform on the grid of shifts: 300 seeded data sets, 49 or more shifts."""
    p_values = []
    for r in range(300):
        rng = np.random.default_rng(3000 + r)
        X, Y = rng.standard_normal((150, 2)), rng.standard_normal((130, 2))
        if test == "mmd":
            result = bk.mmd_test(X, Y, bk.RBF(1.0), key=jax.random.key(r), n_permutations=49, method=method,
                                 num_features=16)
        else:
            result = bk.hsic_test(X, rng.standard_normal((150, 1)), bk.RBF(1.0), bk.RBF(1.0),
                                  key=jax.random.key(r), n_permutations=49, method=method, num_features=8)
        assert result.method == method and len(result.null_samples) >= 49
        p_values.append(result.p_value)
    p_values = np.array(p_values)
    for level in (0.05, 0.2, 0.5):
        se = np.sqrt(level * (1 - level) / len(p_values))
        assert abs(np.mean(p_values <= level) - level) <= 3 * se, (level, np.mean(p_values <= level))


def test_ties_of_binary_data_are_counted_exactly_under_the_feature_null():
    """Binary data: the feature sums of a shift depend only on how many ones it puts in the first sample, so shifts
    with equal counts have equal statistics in exact arithmetic; the p-value equals the count of shifts whose count
    is at least as extreme (|a/n - b/m| at least the observed), over 60 data sets."""
    for r in range(60):
        rng = np.random.default_rng(600 + r)
        n = m = 200
        x = (rng.uniform(size=n + m) < 0.5).astype(float)
        key = jax.random.key(r)
        result = bk.mmd_test(x[:n, None], x[n:, None], bk.RBF(1.0), key=key, n_permutations=49, method="features",
                             num_features=4, estimator="biased")
        layout = cyclic_layout(n + m, 49, key)
        q, s = layout.blocks, layout.offsets
        ones = x[layout.order].reshape(s, q)
        first = (layout.order < n).reshape(s, q).astype(float)
        counts = np.array([np.sum(ones * np.roll(first, -b, axis=1)) for b in range(q)])   # ones in sample 1
        n1, total = first.sum(), ones.sum()
        gap = np.abs(counts / n1 - (total - counts) / (first.size - n1))   # the statistic is increasing in it
        exact = np.mean(gap >= gap[0] - 1e-12)
        assert result.p_value == pytest.approx(exact, abs=1e-12), r


def test_auto_chooses_permutations_then_the_exact_cyclic_null_then_features(monkeypatch):
    rng = np.random.default_rng(4)
    key = jax.random.key(0)
    small = rng.standard_normal((MIN_CYCLIC_ROWS // 2, 1))
    assert bk.mmd_test(small[:-1], small, key=key).method == "permutation"   # 199 rows: too few shifts
    result = bk.mmd_test(small, small, key=key, n_permutations=399)   # 200 rows: 200 shifts, 200 reflections
    assert result.method == "cyclic" and len(result.null_samples) == 399
    assert bk.mmd_test(small, small, key=key, n_permutations=400).method == "permutation"   # 2N - 1 < B
    assert bk.mmd_test(small[:20], small[:20], key=key, n_permutations=19).method == "cyclic"   # B + 1 rows suffice
    N = FEATURES_ABOVE["mmd"]
    X, Y = rng.standard_normal((N // 2, 1)), rng.standard_normal((N // 2 + 1, 1))
    assert bk.mmd_test(X, Y[:-1], key=key, n_permutations=9).method == "cyclic"
    assert bk.mmd_test(X, Y, key=key, n_permutations=9).method == "features"
    assert bk.mmd_test(X, Y, bk.kernels.Linear(), key=key, n_permutations=9).method == "cyclic"   # not stationary
    wide = (bk.RBF(1.0),)   # from WIDE_FROM_DIM dimensions on the exact kernel is kept up to WIDE_FEATURES_ABOVE
    assert choose_method("auto", WIDE_FEATURES_ABOVE, wide, 500, dim=WIDE_FROM_DIM) == "cyclic"
    assert choose_method("auto", WIDE_FEATURES_ABOVE + 1, wide, 500, dim=WIDE_FROM_DIM) == "features"
    assert choose_method("auto", N + 1, wide, 500, dim=WIDE_FROM_DIM - 1) == "features"
    assert choose_method("auto", N + 1, wide, 500, "hsic", dim=WIDE_FROM_DIM) == "cyclic"   # hsic: FEATURES_ABOVE
    seen = []   # mmd_test hands choose_method the dimension of the points
    monkeypatch.setattr(bk.mmd, "choose_method", lambda *a, **k: seen.append(k["dim"]) or choose_method(*a, **k))
    assert bk.mmd_test(rng.standard_normal((30, 40)), rng.standard_normal((30, 40)), key=key).method == "permutation"
    assert seen == [40]
    n = FEATURES_ABOVE["hsic"]
    x = rng.standard_normal((n + 1, 1))
    assert bk.hsic_test(x[:-1], x[:-1] ** 2, key=key, n_permutations=9).method == "cyclic"
    result = bk.hsic_test(x, x**2, key=key, n_permutations=9)
    assert result.method == "features" and result.reject(0.15)


def test_the_aggregated_feature_test_finds_a_weak_perturbation_and_shows_progress(capsys):
    """The aggregated feature test rejects a perturbed uniform density (two perturbations per dimension, scale 0.7)
    at n = 3000 per sample; progress_bar=True writes a bar to stderr."""
    X, Y = bk.datasets.perturbed_uniform(3000, 1, 2, 0.7, seed=5)
    key = jax.random.key(1)
    features = bk.mmd_test(X, Y, "bayes", key=key, method="features", progress_bar=True)
    assert features.reject(0.05) and features.method == "features"
    assert "MMD (random features)" in capsys.readouterr().err
