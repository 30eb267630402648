"""Property-based checks (hypothesis) of shape and dtype handling: kernels, MMD/HSIC and the filters agree with
their dense formulas for any sizes, dimensions and real dtypes, and refuse what is not real data."""

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bayeskern as bk
from bayeskern import kbr
from bayeskern.kernels import kernel_matvec

SETTINGS = settings(max_examples=6, deadline=None, derandomize=True,  # reproducible in CI
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
DTYPES = st.sampled_from([np.float64, np.float32, np.int64, np.int32, np.bool_])
KERNELS = st.sampled_from([bk.RBF, bk.Matern12, bk.Matern32, bk.Matern52, bk.RationalQuadratic])


def _points(seed, n, d, dtype):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * 2
    return X.astype(dtype) if dtype is not np.bool_ else X > 0


@SETTINGS
@given(seed=st.integers(0, 2**16), n=st.integers(1, 12), m=st.integers(1, 12), d=st.integers(1, 4),
       dtype=DTYPES, kernel=KERNELS, ell=st.floats(0.1, 10.0))
def test_gram_shapes_symmetry_and_dtype(seed, n, m, d, dtype, kernel, ell):
    X, Y = _points(seed, n, d, dtype), _points(seed + 1, m, d, dtype)
    k = kernel(ell)
    K, G = k.cross(X, Y), k.gram(X)
    assert K.shape == (n, m) and G.shape == (n, n)
    assert K.dtype == jnp.float64 and bool(jnp.all(jnp.isfinite(K)))
    np.testing.assert_allclose(G, G.T, atol=1e-12)
    np.testing.assert_allclose(k.diag(X), np.diag(np.asarray(G)), atol=1e-12)
    v = np.arange(m, dtype=float)
    np.testing.assert_allclose(kernel_matvec(k, X, Y, v, block_size=3), np.asarray(K) @ v, rtol=1e-10, atol=1e-10)


@SETTINGS
@given(seed=st.integers(0, 2**16), n=st.integers(2, 15), m=st.integers(2, 15), d=st.integers(1, 3),
       dtype=DTYPES, block=st.integers(1, 20))
def test_mmd_equals_the_dense_formula_for_any_sizes(seed, n, m, d, dtype, block):
    X, Y = _points(seed, n, d, dtype), _points(seed + 7, m, d, dtype)
    k = bk.RBF(1.3)
    Kxx, Kyy, Kxy = (np.asarray(k.cross(A, B)) for A, B in ((X, X), (Y, Y), (X, Y)))
    dense = ((Kxx.sum() - np.trace(Kxx)) / (n * (n - 1)) + (Kyy.sum() - np.trace(Kyy)) / (m * (m - 1))
             - 2 * Kxy.mean())
    assert float(bk.mmd2_unbiased(X, Y, k, block_size=block)) == pytest.approx(dense, rel=1e-9, abs=1e-12)


@SETTINGS
@given(seed=st.integers(0, 2**16), n=st.integers(4, 15), dx=st.integers(1, 3), dy=st.integers(1, 3),
       block=st.integers(1, 20))
def test_hsic_equals_the_dense_formula_for_any_sizes(seed, n, dx, dy, block):
    X, Y = _points(seed, n, dx, np.float64), _points(seed + 3, n, dy, np.float64)
    kx, ky = bk.RBF(1.0), bk.RBF(0.7)
    K, L = np.asarray(kx.gram(X)), np.asarray(ky.gram(Y))
    H = np.eye(n) - 1.0 / n
    assert float(bk.hsic_biased(X, Y, kx, ky, block_size=block)) == pytest.approx(np.trace(K @ H @ L @ H) / n**2,
                                                                                   rel=1e-9, abs=1e-12)


@SETTINGS
@given(seed=st.integers(0, 2**16), T=st.sampled_from([3, 17]), steps=st.sampled_from([1, 5]), dx=st.integers(1, 3),
       dz=st.integers(1, 3))  # few distinct shapes: each compiles the filter once
def test_filter_output_shapes_and_streaming_agree(seed, T, steps, dx, dz):
    X, Z = _points(seed, T, dx, np.float64), _points(seed + 5, T, dz, np.float64)
    kbf = kbr.KernelBayesFilter.build(X, Z, 1.0, 1.0, 1e-2, 1e-2, rank=None)
    X_test = 0.5 * _points(seed + 9, steps, dx, np.float64)  # inside the training range
    means = kbf.filter(X_test)
    assert means.shape == (steps, dz) and bool(jnp.all(jnp.isfinite(means)))
    state = kbf.initial_state()
    for t in range(steps):
        state, mean = kbf.update(state, X_test[t])
        np.testing.assert_allclose(mean, means[t], atol=1e-10)


@SETTINGS
@given(kind=st.sampled_from(["U3", "O", "c16"]), n=st.integers(1, 5))
def test_non_real_data_is_refused_everywhere(kind, n):
    bad = np.zeros((n, 2), dtype=kind) if kind != "O" else np.array([[object()] * 2] * n)
    ok = np.zeros((3, 2))
    for call in (lambda: bk.RBF(1.0).gram(bad), lambda: bk.mmd2_biased(bad, ok, bk.RBF(1.0)),
                 lambda: bk.hsic_biased(bad, bad, bk.RBF(1.0), bk.RBF(1.0)),
                 lambda: kbr.KernelBayesFilter.build(bad, bad, 1.0, 1.0, 1e-2, 1e-2)):
        with pytest.raises(TypeError, match="[XZ] must"):
            call()
