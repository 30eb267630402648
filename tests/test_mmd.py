
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayeskern as bk
from bayeskern import RBF, Matern32


def _brute_mmd2(X, Y, k, unbiased):
    Kxx, Kyy, Kxy = (np.asarray(k.cross(a, b)) for a, b in ((X, X), (Y, Y), (X, Y)))
    n, m = len(X), len(Y)
    if unbiased:
        return (Kxx.sum() - np.trace(Kxx)) / (n * (n - 1)) + (Kyy.sum() - np.trace(Kyy)) / (m * (m - 1)) - 2 * Kxy.mean()
    return Kxx.mean() + Kyy.mean() - 2 * Kxy.mean()


@pytest.mark.parametrize("k", [RBF(0.8), Matern32(jnp.array([0.5, 2.0])), bk.Polynomial(degree=2)])
def test_estimators_match_brute_force(k, rng):
    """Blocks of 7 leave rows over in both samples; the within-sample sums use only the blocks on and above the
    diagonal (the polynomial kernel takes the generic evaluate path)."""
    X, Y = rng.standard_normal((31, 2)), rng.standard_normal((17, 2)) + 0.3
    for block in (7, 1024):
        assert float(bk.mmd2_unbiased(X, Y, k, block_size=block)) == pytest.approx(_brute_mmd2(X, Y, k, True), rel=1e-12)
        assert float(bk.mmd2_biased(X, Y, k, block_size=block)) == pytest.approx(_brute_mmd2(X, Y, k, False), rel=1e-12)
    assert float(bk.witness(X, Y, k).norm2()) == pytest.approx(_brute_mmd2(X, Y, k, False), rel=1e-12)
    lin = np.mean([
        float(k.cross(X[2 * i][None], X[2 * i + 1][None])[0, 0] + k.cross(Y[2 * i][None], Y[2 * i + 1][None])[0, 0]
              - k.cross(X[2 * i][None], Y[2 * i + 1][None])[0, 0] - k.cross(X[2 * i + 1][None], Y[2 * i][None])[0, 0])
        for i in range(8)
    ])
    assert float(bk.mmd2_linear(X, Y, k)) == pytest.approx(lin, rel=1e-12)


def _rbf_sums_in_numpy(A, B, ls):
    return np.exp(-((A[:, None, :] - B[None, :, :]) ** 2).sum(-1) / (2 * ls**2))


def test_fused_block_sums_equal_an_explicit_double_sum(rng):
    """The symmetric block sum (each off-diagonal block once, doubled) and the cross sum (each block's evaluation
    fused with its sum) against exp(-|x - y|^2 / 2l^2) summed in NumPy, for sizes below, at and around multiples of
    the block size, in both samples."""
    from bayeskern.kernels import kernel_sum

    for n in (5, 16, 33):
        X, Y = rng.standard_normal((n, 3)), rng.standard_normal((n + 4, 3))
        for A, B in ((X, X), (X, Y), (Y, X)):
            other = B if B is not A else None
            total = _rbf_sums_in_numpy(A, B, 0.7).sum()
            assert float(kernel_sum(RBF(0.7), A, other, block_size=8)) == pytest.approx(total, rel=1e-13)


def test_fused_row_sums_equal_an_explicit_double_sum(rng):
    """Row sums (each block's evaluation fused with its row sums; the rows padding Y's last blocks taken off after)
    against NumPy, for sizes that leave 0 to 3 padded rows in X's and in Y's blocks."""
    from bayeskern.kernels import kernel_row_sums

    for n, m in ((5, 9), (16, 20), (33, 37), (37, 16)):   # blocks of 8: Y padded by 1, 1, 3, 0 rows
        X, Y = rng.standard_normal((n, 3)), rng.standard_normal((m, 3))
        np.testing.assert_allclose(kernel_row_sums(RBF(0.7), X, Y, block_size=8), _rbf_sums_in_numpy(X, Y, 0.7).sum(1),
                                   rtol=1e-13)
    np.testing.assert_allclose(kernel_row_sums(RBF(0.7), X, block_size=8), _rbf_sums_in_numpy(X, X, 0.7).sum(1),
                               rtol=1e-13)


def test_gaussian_closed_form_against_quadrature():
    # 1-D: E k(X, Y) for X ~ N(a, s^2), Y ~ N(b, t^2) by Gauss–Hermite quadrature
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    ls, a, s, b, t = 0.7, 0.3, 1.2, -0.4, 0.6

    def ek(m1, s1, m2, s2):
        x, y = m1 + s1 * nodes[:, None], m2 + s2 * nodes[None, :]
        return np.sum(weights[:, None] * weights[None, :] * np.exp(-((x - y) ** 2) / (2 * ls**2)))

    quad = ek(a, s, a, s) + ek(b, t, b, t) - 2 * ek(a, s, b, t)
    closed = bk.mmd2_gaussians(a, s**2, b, t**2, ls)
    assert float(closed) == pytest.approx(quad, rel=1e-10)
    assert float(bk.mmd2_gaussians(np.zeros(2), np.eye(2), np.zeros(2), np.eye(2), 1.0)) == pytest.approx(0.0, abs=1e-15)


def test_unbiased_estimator_is_unbiased():
    """Mean of the U-statistic over many sample pairs = population MMD^2 of two Gaussians."""
    rng = np.random.default_rng(7)
    reps, n, m, d = 4000, 12, 9, 2
    mean_q = np.array([0.6, -0.2])
    cov_q = np.array([[1.5, 0.3], [0.3, 0.8]])
    Xs = rng.standard_normal((reps, n, d))
    Ys = mean_q + rng.standard_normal((reps, m, d)) @ np.linalg.cholesky(cov_q).T
    ls = jnp.array([0.9, 1.4])
    k = RBF(ls)
    pop = float(bk.mmd2_gaussians(np.zeros(d), np.eye(d), mean_q, cov_q, ls))
    u = np.asarray(jax.vmap(lambda X, Y: bk.mmd2_unbiased(X, Y, k))(Xs, Ys))
    v = np.asarray(jax.vmap(lambda X, Y: bk.mmd2_biased(X, Y, k))(Xs, Ys))
    se = u.std(ddof=1) / np.sqrt(reps)
    assert abs(u.mean() - pop) < 3.5 * se
    # the V-statistic at this n is visibly biased: the check above has power
    assert v.mean() - pop > 10 * se


def test_gradient_wrt_lengthscale_matches_finite_differences(rng):
    X, Y = rng.standard_normal((40, 2)), rng.standard_normal((35, 2)) * 1.3
    for est in (bk.mmd2_unbiased, bk.mmd2_biased):
        f = jax.jit(lambda ls, est=est: est(X, Y, RBF(ls), block_size=16))
        grad = jax.jit(jax.grad(f))  # one compilation for the three lengthscales
        for ls in (0.4, 1.0, 2.5):
            g = float(grad(ls))
            h = 1e-5
            fd = (float(f(ls + h)) - float(f(ls - h))) / (2 * h)
            assert g == pytest.approx(fd, rel=1e-6, abs=1e-12)
    ard = jnp.array([0.7, 1.3])
    g = jax.grad(lambda ls: bk.mmd2_unbiased(X, Y, RBF(ls)))(ard)
    e = jnp.array([1e-5, 0.0])
    fd = (bk.mmd2_unbiased(X, Y, RBF(ard + e)) - bk.mmd2_unbiased(X, Y, RBF(ard - e))) / 2e-5
    assert float(g[0]) == pytest.approx(float(fd), rel=1e-6)


def test_permutation_null_is_exact_relabelling(rng):
    """Each null statistic equals the statistic recomputed on the relabelled pooled sample."""
    X, Y = rng.standard_normal((9, 2)), rng.standard_normal((6, 2))
    k = RBF(1.1)
    key = jax.random.key(4)
    res = bk.mmd_test(X, Y, k, key=key, n_permutations=5, method="permutation",
                      max_label_columns=15 * 2)  # 2 columns per batch
    assert res.statistic == pytest.approx(float(bk.mmd2_unbiased(X, Y, k)), rel=1e-12)
    Z = np.vstack([X, Y])
    keys = jax.random.split(key, 6)
    for b in range(5):
        perm = np.asarray(jax.random.permutation(keys[b + 1], 15))
        assert res.null_samples[b] == pytest.approx(float(bk.mmd2_unbiased(Z[perm[:9]], Z[perm[9:]], k)), rel=1e-10)
    assert res.p_value == (1 + np.sum(res.null_samples >= res.statistic)) / 6
    biased = bk.mmd_test(X, Y, k, key=key, n_permutations=5, estimator="biased", method="permutation")
    assert biased.statistic == pytest.approx(float(bk.mmd2_biased(X, Y, k)), rel=1e-12)


def _rejection_rate(shift, reps, n, seed, **kw):
    rng = np.random.default_rng(seed)
    keys = jax.random.split(jax.random.key(seed), reps)
    rejections = 0
    for r in range(reps):
        X = rng.standard_normal((n, 1))
        Y = rng.standard_normal((n, 1)) + shift
        rejections += bk.mmd_test(X, Y, key=keys[r], **kw).reject(0.05)
    return rejections / reps


def test_permutation_test_size_is_controlled():
    rate = _rejection_rate(0.0, 300, 30, seed=11, n_permutations=199)
    # binomial 99% interval around 0.05 for 300 repetitions
    assert 0.018 <= rate <= 0.085


def test_permutation_test_power_under_mean_shift():
    assert _rejection_rate(0.5, 60, 200, seed=12, n_permutations=199) > 0.9


def test_linear_time_test_calibrated_and_consistent():
    rng = np.random.default_rng(5)
    null = [bk.mmd_test(rng.standard_normal((400, 1)), rng.standard_normal((400, 1)), RBF(1.0), estimator="linear").p_value
            for _ in range(300)]
    assert 0.018 <= np.mean(np.array(null) <= 0.05) <= 0.085
    alt = bk.mmd_test(rng.standard_normal((20000, 1)), rng.standard_normal((20000, 1)) + 0.5, RBF(1.0), estimator="linear")
    assert alt.method == "normal" and alt.reject(0.01)


def test_bad_inputs(rng):
    X = rng.standard_normal((10, 2))
    with pytest.raises(ValueError, match="X needs at least 2 points"):
        bk.mmd2_unbiased(X[:1], X, RBF(1.0))
    with pytest.raises(ValueError, match="Y contains"):
        bk.mmd2_biased(X, np.full((3, 2), np.inf), RBF(1.0))
    for rule in (RBF(1.0), "median", "bayes"):     # checked before a kernel rule pools the samples
        with pytest.raises(ValueError, match="X and Y must have points of the same dimension"):
            bk.mmd_test(X, X[:, :1], rule, key=jax.random.key(0))
    with pytest.raises(ValueError, match="estimator must be one of"):
        bk.mmd_test(X, X, RBF(1.0), key=jax.random.key(0), estimator="quadratic")
    with pytest.raises(ValueError, match="n_permutations must be >= 1"):
        bk.mmd_test(X, X, RBF(1.0), key=jax.random.key(0), n_permutations=0)
    with pytest.raises(ValueError, match="alpha must lie in"):
        bk.mmd_test(X, X + 1, RBF(1.0), key=jax.random.key(0), n_permutations=9).reject(1.5)


def test_mmd_and_hsic_tests_accept_a_bkl_kernel():
    from bayeskern import hsic_test, mmd_test
    from bayeskern.inference import bkl_kernel

    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((80, 2)), rng.standard_normal((80, 2)) * 1.5
    key = jax.random.key(0)
    result = mmd_test(X, Y, bkl_kernel, key=key, n_permutations=99)
    expected = bkl_kernel(X, Y, key=jax.random.fold_in(key, 0xB1))
    assert float(result.kernels[0].lengthscale) == pytest.approx(float(expected.lengthscale), rel=1e-12)
    median = mmd_test(X, Y, "median", key=key, n_permutations=99)
    assert float(median.kernels[0].lengthscale) != pytest.approx(float(expected.lengthscale), rel=1e-3)
    with pytest.raises(ValueError, match="needs a PRNG key"):
        mmd_test(X, Y, bkl_kernel, estimator="linear")
    with pytest.raises(ValueError, match="'median', 'bayes' or a kernel rule"):
        mmd_test(X, Y, "gauss", key=key)
    dep = hsic_test(X, X[:, :1] ** 2, bkl_kernel, bkl_kernel, key=key, n_permutations=99)
    assert dep.reject(0.05) and len(dep.kernels) == 2
