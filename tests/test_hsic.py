import itertools

import jax
import numpy as np
import pytest

import bayeskern as bk
from bayeskern import RBF, Indicator, Matern52


def _dense_biased(K, L):
    n = len(K)
    H = np.eye(n) - 1.0 / n
    return np.trace(K @ H @ L @ H) / n**2


def _brute_unbiased(K, L):
    """U-statistic over ordered 4-tuples of distinct indices (Gretton et al. 2005 h-kernel)."""
    n = len(K)
    total = 0.0
    for i, j, q, r in itertools.permutations(range(n), 4):
        total += K[i, j] * L[i, j] + K[i, j] * L[q, r] - 2 * K[i, j] * L[i, q]
    return total / (n * (n - 1) * (n - 2) * (n - 3))


def test_estimators_match_dense_and_brute_force(rng):
    X, Y = rng.standard_normal((7, 2)), rng.standard_normal((7, 1))
    kx, ky = RBF(0.9), Matern52(1.3)
    K, L = np.asarray(kx.gram(X)), np.asarray(ky.gram(Y))
    for block in (3, 1024):
        assert float(bk.hsic_biased(X, Y, kx, ky, block_size=block)) == pytest.approx(_dense_biased(K, L), rel=1e-12)
        assert float(bk.hsic_unbiased(X, Y, kx, ky, block_size=block)) == pytest.approx(_brute_unbiased(K, L), rel=1e-11)


def test_discrete_labels_with_indicator_kernel(rng):
    labels = rng.integers(0, 3, 40)
    X = rng.standard_normal((40, 1)) + labels[:, None]
    K, L = np.asarray(RBF(1.0).gram(X)), np.asarray(Indicator().gram(labels))
    assert float(bk.hsic_biased(X, labels, RBF(1.0), Indicator())) == pytest.approx(_dense_biased(K, L), rel=1e-12)
    assert bk.hsic_test(X, labels, RBF(1.0), Indicator(), key=jax.random.key(0), n_permutations=99).reject(0.05)


def test_dense_and_matrix_free_nulls_agree(rng):
    X, Y = rng.standard_normal((30, 2)), rng.standard_normal((30, 2))
    key = jax.random.key(2)
    dense = bk.hsic_test(X, Y, RBF(1.0), RBF(0.7), key=key, n_permutations=20, method="permutation")
    free = bk.hsic_test(X, Y, RBF(1.0), RBF(0.7), key=key, n_permutations=20, method="permutation",
                        dense_max=0, block_size=8)
    np.testing.assert_allclose(free.null_samples, dense.null_samples, rtol=1e-10)
    assert free.statistic == pytest.approx(float(bk.hsic_biased(X, Y, RBF(1.0), RBF(0.7))), rel=1e-12)
    perm = np.asarray(jax.random.permutation(jax.random.split(key, 20)[0], 30))
    assert dense.null_samples[0] == pytest.approx(float(bk.hsic_biased(X, Y[perm], RBF(1.0), RBF(0.7))), rel=1e-10)


def _rates(slope, reps, n, seed, **kw):
    rng = np.random.default_rng(seed)
    keys = jax.random.split(jax.random.key(seed), reps)
    out = []
    for r in range(reps):
        X = rng.standard_normal((n, 1))
        Y = slope * X + rng.standard_normal((n, 1))
        out.append(bk.hsic_test(X, Y, key=keys[r], **kw).reject(0.05))
    return np.mean(out)


def test_permutation_test_size_is_controlled():
    assert 0.018 <= _rates(0.0, 300, 30, seed=31, n_permutations=199) <= 0.085


def test_gamma_test_size_is_roughly_controlled():
    assert 0.018 <= _rates(0.0, 300, 100, seed=32, method="gamma") <= 0.085


@pytest.mark.parametrize("method", ["permutation", "gamma"])
def test_power_under_linear_dependence(method):
    assert _rates(0.5, 40, 100, seed=33, method=method, n_permutations=199) > 0.9


def test_bad_inputs(rng):
    X = rng.standard_normal((10, 2))
    with pytest.raises(ValueError, match="X and Y must have the same number of points"):
        bk.hsic_biased(X, X[:5], RBF(1.0), RBF(1.0))
    with pytest.raises(ValueError, match="X needs at least 4 points"):
        bk.hsic_unbiased(X[:3], X[:3], RBF(1.0), RBF(1.0))
    with pytest.raises(ValueError, match="needs a PRNG key"):
        bk.hsic_test(X, X, RBF(1.0), RBF(1.0))
    with pytest.raises(ValueError, match="method must be one of"):
        bk.hsic_test(X, X, RBF(1.0), RBF(1.0), method="spectral")
    with pytest.raises(ValueError, match="integer class labels"):
        bk.hsic_biased(X, rng.standard_normal(10), RBF(1.0), Indicator())
