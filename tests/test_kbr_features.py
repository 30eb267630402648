"""Random Fourier features and adaptive observation features."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskern import kbr
from bayeskern.kernels import RBF


def test_random_fourier_features_approximate_the_gaussian_kernel(rng):
    Z = rng.standard_normal((40, 2))
    rff = kbr.random_fourier_features(jax.random.key(0), 2, 0.8, num_features=20_000)
    Phi = rff(Z)
    np.testing.assert_allclose(Phi @ Phi.T, RBF(0.8).gram(Z), atol=0.03)
    with pytest.raises(ValueError, match="sigma must be positive"):
        kbr.random_fourier_features(jax.random.key(0), 2, -1.0)


def test_adaptive_loss_equals_the_profiled_minimum_and_the_trace_formula(rng):
    n, p, F, lam = 40, 5, 30, 0.01
    Psi, Phi = rng.standard_normal((n, p)), rng.standard_normal((n, F))
    r = np.maximum(rng.standard_normal(n) + 0.7, 0)
    D = np.diag(r)
    # brute force: minimise (1/n) sum r_i |phi_i - E^T psi_i|^2 + lam |E|_F^2 over E by the normal equations
    E = np.linalg.solve(Psi.T @ D @ Psi + n * lam * np.eye(p), Psi.T @ D @ Phi)
    brute = (np.sum(r[:, None] * (Phi - Psi @ E) ** 2) / n) + lam * np.sum(E**2)
    value = float(kbr.adaptive_feature_loss(Psi, Phi, lam, r_hat=r))
    assert value == pytest.approx(brute, rel=1e-10)
    # Gram-matrix form with G_Z = Phi Phi^T
    G = Phi @ Phi.T
    gram = (np.trace(G @ D) - np.trace(G @ D @ Psi @ np.linalg.solve(Psi.T @ D @ Psi + n * lam * np.eye(p), Psi.T @ D))) / n
    assert value == pytest.approx(gram, rel=1e-10)
    # gradient in the features matches central differences
    g = jax.grad(lambda P: kbr.adaptive_feature_loss(P, Phi, lam, r_hat=r))(jnp.asarray(Psi))
    h, (i, j) = 1e-6, (3, 2)
    bump = np.zeros_like(Psi)
    bump[i, j] = h
    fd = (float(kbr.adaptive_feature_loss(Psi + bump, Phi, lam, r_hat=r))
          - float(kbr.adaptive_feature_loss(Psi - bump, Phi, lam, r_hat=r))) / (2 * h)
    assert float(g[i, j]) == pytest.approx(fd, rel=1e-6)


def test_trained_features_lower_the_loss_and_drive_a_filter():
    seq = kbr.data.circle_dynamics(150, jax.random.key(1), T_test=20)
    net, trace = kbr.train_features(jax.random.key(2), seq.X, seq.Z, lam=1e-3, sigma_z=0.7, hidden=(32, 16), steps=60)
    trace = np.asarray(trace)
    assert trace.shape == (60,) and np.all(np.isfinite(trace)) and trace[-1] < 0.7 * trace[0]
    kbf = kbr.KernelBayesFilter.build(seq.X, seq.Z, kbr.FeatureKernel(net), 0.7, 1e-3, 1e-4)
    assert kbf.G_X is None  # a feature filter stores (T, p) features, no T x T Gram matrix
    np.testing.assert_allclose(kbf.features, net(seq.X), atol=1e-12)
    means = kbf.filter(seq.X_test)
    assert kbr.filter_mse(means, seq.Z_test) < kbr.filter_mse(seq.X_test, seq.Z_test)  # 0.105 vs 0.120
    with pytest.raises(ValueError, match="X_test contains"):
        kbf.filter(seq.X_test.at[0, 0].set(jnp.inf))


def test_nystrom_features_reproduce_the_kernel_at_landmarks_and_select_pivots(rng):
    X = rng.normal(size=(60, 2))
    kernel = RBF(0.8)
    landmarks = kbr.select_landmarks(kernel, X, 25)
    assert landmarks.shape == (25, 2) and len({tuple(row) for row in np.asarray(landmarks)}) == 25
    psi = kbr.nystrom_features(kernel, landmarks)
    np.testing.assert_allclose(psi(landmarks) @ psi(X).T, kernel.cross(landmarks, X), atol=1e-6)
    # the Nystrom residual K - Psi Psi^T is PSD and shrinks as landmarks are added
    residual = [float(jnp.trace(kernel.gram(X) - f(X) @ f(X).T)) for f in
                (kbr.nystrom_features(kernel, kbr.select_landmarks(kernel, X, p)) for p in (5, 15, 25))]
    assert residual[0] > residual[1] > residual[2] > -1e-6
    for bad in (0, 61):
        with pytest.raises(ValueError, match="num"):
            kbr.select_landmarks(kernel, X, bad)


def test_feature_kernel_filter_uses_the_low_rank_update_and_equals_the_dense_filter():
    """A FeatureKernel filter updates in feature space (O(T p^2)); the result equals the dense update on the
    Gram matrix Psi Psi^T, and Nystrom features on every training observation reproduce the exact filter."""
    seq = kbr.data.circle_dynamics(70, jax.random.key(3), T_test=25)
    features = kbr.random_fourier_features(jax.random.key(4), 2, 0.7, num_features=30)
    fast = kbr.KernelBayesFilter.build(seq.X, seq.Z, kbr.FeatureKernel(features), 0.7, 1e-3, 1e-4)
    W = fast.filter(seq.X_test, return_weights=True)[1]
    # the dense recursion on the same Gram matrix, step by step (kbr_iw_weights with G_X = Psi Psi^T)
    Psi, Psi_q = features(seq.X), features(seq.X_test)
    w = jnp.full(70, 1 / 70)
    for t in range(25):
        w_t = kbr.kbr_iw_weights(Psi @ Psi.T, fast.K_eta @ w, (Psi @ Psi_q[t])[:, None], 1e-3).weights[:, 0]
        np.testing.assert_allclose(W[t], w_t, atol=1e-9)
        w = fast.transition @ w_t
    exact = kbr.KernelBayesFilter.build(seq.X, seq.Z, 0.9, 0.7, 1e-3, 1e-4).filter(seq.X_test)
    nystrom = kbr.FeatureKernel(kbr.nystrom_features(RBF(0.9), seq.X, jitter=1e-13))
    low_rank = kbr.KernelBayesFilter.build(seq.X, seq.Z, nystrom, 0.7, 1e-3, 1e-4).filter(seq.X_test)
    np.testing.assert_allclose(low_rank, exact, atol=1e-6)


@pytest.fixture(scope="module")
def small_sprites():
    return kbr.data.sprite_sequence(80, jax.random.key(5), T_test=20, size=32)


def test_image_network_is_spectrally_normalised_with_frozen_batch_norm(small_sprites):
    seq = small_sprites
    kw = dict(lam=1e-3, sigma_z=0.8, num_features=8, hidden=(32, 16, 16), steps=30)
    net, trace = kbr.train_image_features(jax.random.key(6), seq.X, seq.Z, **kw)
    trace = np.asarray(trace)
    assert trace.shape == (30,) and np.all(np.isfinite(trace)) and trace[-1] < trace[0]
    assert [W.shape for W, _ in net.layers] == [(1024, 32), (32, 16), (16, 16), (16, 8)]
    for W, _ in net.layers:  # one power iteration per step converges to the top singular vector
        assert np.linalg.norm(np.asarray(W), 2) == pytest.approx(1.0, abs=0.05)
    # inference-mode batch norm: the frozen statistics are the training batch's, so on the training images the
    # normalised 512-layer (here 32) activations have mean offset and variance scale^2 (up to eps)
    scale, offset, mean, var = net.batch_norm
    H = jax.nn.relu(seq.X @ net.layers[0][0] + net.layers[0][1]) @ net.layers[1][0] + net.layers[1][1]
    normalised = (H - mean) / jnp.sqrt(var + 1e-5) * scale + offset
    np.testing.assert_allclose(normalised.mean(0), offset, atol=1e-8)
    Psi = net(seq.X)
    assert Psi.shape == (80, 8) and bool(jnp.all(Psi >= 0))
    # dropout is a training-time regulariser: deterministic given the key, different from no dropout
    a = kbr.train_image_features(jax.random.key(6), seq.X, seq.Z, dropout=0.5, **kw)[0](seq.X)
    b = kbr.train_image_features(jax.random.key(6), seq.X, seq.Z, dropout=0.5, **kw)[0](seq.X)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, Psi)
    with pytest.raises(ValueError, match="dropout"):
        kbr.train_image_features(jax.random.key(6), seq.X, seq.Z, dropout=1.0, **kw)


def _conv_same_brute_force(image, kernel, stride):
    """'Same' convolution (cross-correlation) by loops: out size ceil(in / stride), total padding
    max((out - 1) stride + k - in, 0), the smaller half before."""
    (h, w, _), k = image.shape, kernel.shape[0]
    out_h, out_w = -(-h // stride), -(-w // stride)
    pad_h, pad_w = max((out_h - 1) * stride + k - h, 0), max((out_w - 1) * stride + k - w, 0)
    padded = np.pad(image, ((pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2), (0, 0)))
    return np.array([[np.einsum("abc,abcd->d", padded[i * stride:i * stride + k, j * stride:j * stride + k], kernel)
                      for j in range(out_w)] for i in range(out_h)])


def test_image_cnn_convolves_channels_last_images_and_drives_a_filter(small_sprites):
    rng = np.random.default_rng(8)
    net = kbr.init_image_cnn(jax.random.key(0), (5, 6, 2), 3, channels=(4,), kernel_size=3, stride=2, hidden=7)
    images = rng.standard_normal((2, 5, 6, 2))
    kernel, bias = (np.asarray(a) for a in net.convs[0])
    hidden = np.stack([np.maximum(_conv_same_brute_force(im, kernel, 2) + bias, 0).reshape(-1) for im in images])
    for W, b in net.dense:
        hidden = np.maximum(hidden @ np.asarray(W) + np.asarray(b), 0)
    np.testing.assert_allclose(net(images.reshape(2, -1)), hidden, rtol=1e-12, atol=1e-12)

    seq = small_sprites
    kw = dict(image_shape=(32, 32, 1), lam=1e-3, sigma_z=0.8, num_features=6, channels=(4, 4), hidden=16, steps=15)
    net, trace = kbr.train_image_cnn(jax.random.key(3), seq.X, seq.Z, **kw)
    trace = np.asarray(trace)
    assert trace.shape == (15,) and np.all(np.isfinite(trace)) and trace[-1] < trace[0]
    assert [k.shape for k, _ in net.convs] == [(5, 5, 1, 4), (5, 5, 4, 4)] and net.dense[0][0].shape == (8 * 8 * 4, 16)
    Psi = net(seq.X)
    assert Psi.shape == (80, 6) and bool(jnp.all(Psi >= 0))
    kbf = kbr.KernelBayesFilter.build(seq.X, seq.Z, kbr.FeatureKernel(net), 0.8, 1e-3, 1e-4)
    assert np.all(np.isfinite(np.asarray(kbf.filter(seq.X_test))))
    with pytest.raises(ValueError, match="image_shape"):
        kbr.train_image_cnn(jax.random.key(3), seq.X, seq.Z, **{**kw, "image_shape": (32, 32, 3)})
    with pytest.raises(ValueError, match="stride"):
        kbr.init_image_cnn(jax.random.key(0), (32, 32, 1), stride=0)
    with pytest.raises(ValueError, match="steps"):
        kbr.train_image_cnn(jax.random.key(3), seq.X, seq.Z, **{**kw, "steps": 0})


def test_feature_filter_tuning_validates_lambda_and_refits(small_sprites):
    seq = small_sprites
    calls = []

    def train(X, Z, lam, sigma_z):
        calls.append((X.shape[0], lam))
        return kbr.train_image_features(jax.random.key(7), X, Z, lam=lam, sigma_z=sigma_z, num_features=8,
                                        hidden=(16, 8, 8), steps=10)[0]

    tuned = kbr.tune_feature_filter(seq.X, seq.Z, train, lam_grid=(1e-3, 1e-1), n_val=30, num_priors=5)
    assert calls == [(50, 1e-3), (50, 1e-1), (80, tuned.lam)]
    assert tuned.lam == min(tuned.validation_mse, key=tuned.validation_mse.get)[1]
    assert isinstance(tuned.filter.kernel_x, kbr.FeatureKernel) and tuned.filter.X.shape == (80, 1024)
    # a validation score is the MSE of the filter built directly from the same features
    X_fit, Z_fit = seq.X[:50], seq.Z[:50]
    sigma_z = float(kbr.filter.median_heuristic(Z_fit))
    eta = kbr.filter._loo_eta(Z_fit, sigma_z, kbr.ETA_GRID, 5, 10)
    kbf = kbr.KernelBayesFilter.build(X_fit, Z_fit, kbr.FeatureKernel(train(X_fit, Z_fit, 1e-1, sigma_z)), sigma_z,
                                      1e-1, eta)
    assert tuned.validation_mse[(1.0, 0.1)] == pytest.approx(kbr.filter_mse(kbf.filter(seq.X[50:]), seq.Z[50:]),
                                                             rel=1e-9)
