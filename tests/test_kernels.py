import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayeskern as bk
from bayeskern.kernels import (
    RBF,
    Indicator,
    Linear,
    Matern12,
    Matern32,
    Matern52,
    Polynomial,
    RationalQuadratic,
    TensorProduct,
    kernel_matvec,
    kernel_row_sums,
    kernel_sum,
)

VECTOR_KERNELS = {
    "rbf": lambda: RBF(0.7),
    "rbf_ard": lambda: RBF(jnp.array([0.5, 1.3, 2.0])),
    "matern12": lambda: Matern12(0.8),
    "matern32": lambda: Matern32(jnp.array([0.6, 1.0, 1.5])),
    "matern52": lambda: Matern52(1.1),
    "rq": lambda: RationalQuadratic(0.9, alpha=2.5),
    "linear": lambda: Linear(),
    "poly": lambda: Polynomial(3, offset=0.5),
    "sum": lambda: RBF(0.5) + Matern32(2.0),
    "product": lambda: RBF(1.5) * Polynomial(2, 1.0),
    "scaled": lambda: 2.5 * Matern52(0.4),
}


def _assert_psd(K):
    K = np.asarray(K)
    np.testing.assert_allclose(K, K.T, rtol=0, atol=1e-12 * np.abs(K).max())
    eig = np.linalg.eigvalsh(K)
    assert eig.min() >= -1e-10 * eig.max()


@pytest.mark.parametrize("name", sorted(VECTOR_KERNELS))
def test_gram_symmetric_psd_and_consistent(name, rng):
    k = VECTOR_KERNELS[name]()
    X = rng.standard_normal((60, 3))
    Y = rng.standard_normal((25, 3))
    K = k.gram(X)
    _assert_psd(K)
    np.testing.assert_allclose(k.diag(X), np.diag(K), rtol=1e-14, atol=1e-14)
    C = k.cross(X, Y)
    assert C.shape == (60, 25)
    np.testing.assert_allclose(k.paired(X[:25], Y), np.diag(np.asarray(C)[:25]), rtol=1e-13)


@pytest.mark.parametrize("name", sorted(VECTOR_KERNELS))
def test_blockwise_equals_dense(name, rng):
    k = VECTOR_KERNELS[name]()
    X = rng.standard_normal((203, 3))
    Y = rng.standard_normal((97, 3))
    V = rng.standard_normal((97, 4))
    dense = np.asarray(k.cross(X, Y))
    for block in (50, 1000):  # a ragged last block (203 = 4 x 50 + 3), and one block larger than n
        np.testing.assert_allclose(kernel_matvec(k, X, Y, V, block_size=block), dense @ V, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(kernel_row_sums(k, X, Y, block_size=block), dense.sum(1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kernel_sum(k, X, block_size=32), np.asarray(k.gram(X)).sum(), rtol=1e-12)


def test_matvec_of_a_vector_is_a_vector(rng):
    """A 1-D V gives a 1-D product (the kernel plays no part in this: one kernel is enough)."""
    k = Matern32(0.6)
    X, Y, v = rng.standard_normal((203, 3)), rng.standard_normal((97, 3)), rng.standard_normal(97)
    dense = np.asarray(k.cross(X, Y)) @ v
    for block in (50, 1000):
        out = kernel_matvec(k, X, Y, v, block_size=block)
        assert out.shape == (203,)
        np.testing.assert_allclose(out, dense, rtol=1e-12, atol=1e-12)


def test_closed_forms_against_formulas(rng):
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    r = np.linalg.norm(x - y)
    ls = 0.7
    def k(kern):
        return float(kern.cross(x[None], y[None])[0, 0])
    assert k(RBF(ls)) == pytest.approx(np.exp(-(r**2) / (2 * ls**2)), rel=1e-14)
    assert k(Matern12(ls)) == pytest.approx(np.exp(-r / ls), rel=1e-14)
    s = np.sqrt(3) * r / ls
    assert k(Matern32(ls)) == pytest.approx((1 + s) * np.exp(-s), rel=1e-14)
    s = np.sqrt(5) * r / ls
    assert k(Matern52(ls)) == pytest.approx((1 + s + s**2 / 3) * np.exp(-s), rel=1e-14)
    assert k(RationalQuadratic(ls, 1.5)) == pytest.approx((1 + r**2 / (2 * 1.5 * ls**2)) ** -1.5, rel=1e-14)
    assert k(Polynomial(3, 0.5)) == pytest.approx((x @ y + 0.5) ** 3, rel=1e-14)
    ard = np.array([0.3, 1.0, 2.0])
    assert k(RBF(ard)) == pytest.approx(np.exp(-0.5 * np.sum(((x - y) / ard) ** 2)), rel=1e-14)
    assert k(3.0 * RBF(ls) + Linear()) == pytest.approx(3 * np.exp(-(r**2) / (2 * ls**2)) + x @ y, rel=1e-14)


def test_indicator_and_tensor_product(rng):
    labels = np.array([0, 1, 1, 2, 0])
    K = np.asarray(Indicator().gram(labels))
    np.testing.assert_array_equal(K, (labels[:, None] == labels[None, :]).astype(float))
    _assert_psd(K)
    np.testing.assert_array_equal(Indicator().gram(labels.astype(float)), K)
    X = rng.standard_normal((5, 2))
    kxy = TensorProduct(RBF(1.0), Indicator())
    G = np.asarray(kxy.gram((X, labels)))
    np.testing.assert_allclose(G, np.asarray(RBF(1.0).gram(X)) * K, rtol=1e-15)
    _assert_psd(G)
    V = rng.standard_normal(5)
    np.testing.assert_allclose(kernel_matvec(kxy, (X, labels), (X, labels), V, block_size=2), G @ V, rtol=1e-12)


def test_hyperparameters_are_pytree_leaves(rng):
    X = jnp.asarray(rng.standard_normal((10, 2)))
    k = 2.0 * RBF(jnp.array([0.5, 1.5])) + Matern32(1.0)
    leaves = jax.tree.leaves(k)
    assert len(leaves) == 3
    jitted = jax.jit(lambda kern: kern.gram(X))(k)
    np.testing.assert_allclose(jitted, k.gram(X), rtol=1e-14)
    grads = jax.grad(lambda kern: jnp.sum(kern.gram(X)))(k)
    assert isinstance(grads, type(k)) and all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
    stacked = jax.vmap(lambda ls: RBF(ls).gram(X))(jnp.array([0.5, 1.0, 2.0]))
    np.testing.assert_allclose(stacked[1], RBF(1.0).gram(X), rtol=1e-14)


@pytest.mark.parametrize("cls", [RBF, Matern12, Matern32, Matern52])
def test_lengthscale_gradient_finite_on_diagonal(cls, rng):
    X = jnp.asarray(rng.standard_normal((8, 2)))
    g = jax.grad(lambda ls: jnp.sum(cls(ls).gram(X)))(0.9)
    eps = 1e-6
    fd = (jnp.sum(cls(0.9 + eps).gram(X)) - jnp.sum(cls(0.9 - eps).gram(X))) / (2 * eps)
    assert np.isfinite(g) and g == pytest.approx(float(fd), rel=1e-6)


def test_median_heuristic_conventions(rng):
    X = rng.standard_normal((40, 2))
    d = np.linalg.norm(X[:, None] - X[None], axis=-1)[np.triu_indices(40, 1)]
    assert float(bk.median_heuristic(X)) == pytest.approx(np.median(d), rel=1e-12)
    assert float(bk.median_heuristic(X, convention="sq")) == pytest.approx(np.median(d) / np.sqrt(2), rel=1e-12)
    Y = rng.standard_normal((30, 2)) + 1
    Z = np.vstack([X, Y])
    dz = np.linalg.norm(Z[:, None] - Z[None], axis=-1)[np.triu_indices(70, 1)]
    assert float(bk.median_heuristic(X, Y)) == pytest.approx(np.median(dz), rel=1e-12)
    # subsampling above the size limit is seeded and close to the full median
    big = rng.standard_normal((5000, 2))
    a = bk.median_heuristic(big, max_points=1500, key=jax.random.key(3))
    assert a == bk.median_heuristic(big, max_points=1500, key=jax.random.key(3))
    assert float(a) == pytest.approx(np.sqrt(2) * np.sqrt(2 * np.log(2)) * 1.0, rel=0.05)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: RBF(-1.0), "lengthscale must be positive"),
        (lambda: RBF(0.0), "lengthscale must be positive"),
        (lambda: Matern32(jnp.array([1.0, np.nan])), "lengthscale must be positive"),
        (lambda: RationalQuadratic(1.0, alpha=0.0), "alpha must be positive"),
        (lambda: Polynomial(0), "degree must be >= 1"),
        (lambda: Polynomial(2, offset=-1.0), "offset must be non-negative"),
        (lambda: 0.0 * RBF(1.0), "scale must be positive"),
    ],
)
def test_bad_hyperparameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_inputs(rng):
    k = RBF(1.0)
    X = rng.standard_normal((5, 2))
    with pytest.raises(ValueError, match="X contains 1 non-finite"):
        k.gram(np.where(np.arange(10).reshape(5, 2) == 3, np.nan, X))
    with pytest.raises(ValueError, match="X and Y must have points of the same dimension"):
        k.cross(X, rng.standard_normal((4, 3)))
    with pytest.raises(ValueError, match="X is empty"):
        k.gram(np.zeros((0, 2)))
    with pytest.raises(ValueError, match=r"X must have shape \(n, d\)"):
        k.gram(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="ARD lengthscale has 3 entries"):
        RBF(jnp.ones(3)).gram(X)
    with pytest.raises(ValueError, match="integer class labels"):
        Indicator().gram(np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="X and Y must have the same number of points"):
        k.paired(X, X[:3])
    with pytest.raises(ValueError, match=r"pair \(X, Y\)"):
        TensorProduct(k, k).gram(X)
    with pytest.raises(ValueError, match="Y and V must have the same number"):
        kernel_matvec(k, X, X, np.ones(4))
    with pytest.raises(ValueError, match="every pooled point is the same point"):
        bk.median_heuristic(np.zeros((5, 1)))
    with pytest.raises(ValueError, match="needs at least 2 points"):
        bk.median_heuristic(np.zeros((1, 1)))


def _compilations(call):
    """The number of XLA programs compiled while ``call()`` runs."""
    events = []

    def listen(event, seconds, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            events.append(seconds)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        jax.block_until_ready(call())
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    return len(events)


def test_first_calls_compile_one_program_not_one_per_operation():
    """Outside jit every JAX operation compiles a program per new shape, and so does jnp.asarray of a NumPy array:
    entry points move NumPy inputs to the device without compiling and run their arithmetic as one program.
    Shapes used nowhere else in the suite, so that nothing is cached yet."""
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(53, 3)), rng.normal(size=(41, 3))
    key = jax.random.key(0)
    assert _compilations(lambda: bk.kernels.squared_distances(X, Y)) == 1
    assert _compilations(lambda: bk.kernels.squared_distances(X, Y)) == 0
    assert _compilations(lambda: bk.bke.hold_out_inducing(rng.normal(size=(59, 3)), key, 7)) == 1
    assert _compilations(lambda: bk.linalg.pivoted_cholesky(RBF(1.0), rng.normal(size=(61, 3)), max_rank=5)) <= 3
    Z = rng.normal(size=(43, 2))
    G, priors = np.exp(-np.sum((Z[:, None] - Z[None]) ** 2, -1)), np.full((4, 43), 1 / 43)   # a NumPy Gram matrix
    assert _compilations(lambda: bk.kbr.select_eta_loo(G, priors, (0.1, 1.0))) == 1   # every eta in one program


def test_quick_compiler_options_apply_at_the_top_level_only(monkeypatch):
    """A first call's heaviest programs compile with the quick CPU options when they are the outermost program;
    inside jit, vmap, grad or eval_shape (JAX takes compiler options only at the top level) the plain jit runs and
    gives the same values. Shown with an option XLA does not know: only the top-level call passes it on."""
    import bayeskern._compile as compile_options

    def f(x):
        return jnp.sum(jnp.sin(x) ** 2)

    quick, x = compile_options.quick_jit(f), jnp.linspace(0.0, 1.0, 7)
    expected = float(f(x))
    compile_options.compiler_options.cache_clear()   # a first call inside a trace: the options are not probed there
    assert float(jax.jit(compile_options.quick_jit(f))(x)) == pytest.approx(expected, rel=1e-15)
    assert float(quick(x)) == pytest.approx(expected, rel=1e-15) and compile_options.compiler_options("gpu") is None
    nested = (jax.jit(quick)(x), jax.vmap(quick)(x[None])[0], jax.eval_shape(quick, x).shape,
              jax.grad(quick)(x) @ jnp.ones(7))
    assert float(nested[0]) == pytest.approx(expected, rel=1e-15) and float(nested[1]) == pytest.approx(expected)
    assert nested[2] == () and float(nested[3]) == pytest.approx(float(jnp.sum(jnp.sin(2 * x))), rel=1e-12)
    if jax.default_backend() == "cpu":
        monkeypatch.setattr(compile_options, "compiler_options", lambda backend: {"xla_no_such_option": True})
        bogus = compile_options.quick_jit(f)
        with pytest.raises(jax.errors.JaxRuntimeError, match="xla_no_such_option"):
            bogus(x)
        assert float(jax.jit(bogus)(x)) == pytest.approx(expected, rel=1e-15)
