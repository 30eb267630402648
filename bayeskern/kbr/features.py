"""Explicit features for KBR: random Fourier features and adaptive neural-network observation features."""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..fitted import saveable
from ..optim import adamw, minimise
from .._validation import (as_finite_array, as_matrix, as_points, check_count, check_key, check_positive,
                           check_same_dim, check_same_length)
from ..kernels.base import Kernel
from ..linalg import jittered_cholesky, pivoted_cholesky, spd_solve
from ..linalg.dense import whiten_unchecked
from .weights import gram_coefficient

__all__ = ["RandomFourierFeatures", "random_fourier_features", "MLPFeatures", "init_mlp", "NystromFeatures",
           "nystrom_features", "select_landmarks", "FeatureKernel", "adaptive_feature_loss", "train_features"]


@saveable
class RandomFourierFeatures(NamedTuple):
    """phi(z) = sqrt(2 / F) cos(Omega z + b): E[phi(z) . phi(z')] = exp(-|z - z'|^2 / (2 sigma^2)).

    Calling it on points Z (n, d) gives their features (n, F).

    Attributes:
        omega: (F, d) frequencies Omega.
        offset: (F,) phases b.
    """

    omega: jax.Array
    offset: jax.Array

    def __call__(self, Z):
        """Features (n, F) of points Z (n, d)."""
        Z = _inputs(Z, "Z", self.omega.shape[1])
        return jnp.sqrt(2.0 / self.offset.shape[0]) * jnp.cos(Z @ self.omega.T + self.offset)


def random_fourier_features(key, dim: int, sigma, num_features: int = 100) -> RandomFourierFeatures:
    """Random Fourier features sqrt(2/F) cos(Omega z + b) of the Gaussian kernel of bandwidth sigma on R^dim.

    Rows of Omega are N(0, I / sigma^2) and b ~ U[0, 2 pi), so E[phi(z) . phi(z')] = k(z, z').

    Args:
        key: PRNG key of the draw (part of the model: keep it to reproduce a filter).
        dim: input dimension.
        sigma: bandwidth > 0.
        num_features: F >= 1.

    Returns:
        RandomFourierFeatures: callable (n, dim) -> (n, F).

    Raises:
        ValueError: for sigma <= 0 or num_features < 1.
    """
    check_key(key)
    check_positive(sigma, "sigma")
    dim, num_features = check_count(dim, "dim"), check_count(num_features, "num_features")
    k1, k2 = jax.random.split(key)
    omega = jax.random.normal(k1, (num_features, dim)) / sigma
    return RandomFourierFeatures(omega, jax.random.uniform(k2, (num_features,), maxval=2 * jnp.pi))


@saveable
class MLPFeatures(NamedTuple):
    """psi_theta(x): a ReLU multilayer perceptron (ReLU after every layer); calling it on observations X (n, d_x)
    gives features (n, p).

    Attributes:
        layers: ((W, b), ...) weights (d_in, d_out) and biases (d_out,) of each layer.
    """

    layers: tuple

    def __call__(self, X):
        """Features (n, p) of observations X (n, d_x)."""
        H = _inputs(X, "X", self.layers[0][0].shape[0])
        for W, b in self.layers:
            H = jax.nn.relu(H @ W + b)
        return H


def init_mlp(key, sizes) -> MLPFeatures:
    """A He-initialised MLP.

    Args:
        key: PRNG key.
        sizes: layer widths (d_x, h_1, ..., p).

    Returns:
        MLPFeatures: the network.

    Raises:
        TypeError: for a key that is not a PRNG key or widths that are not integers.
        ValueError: for fewer than two widths or a width below 1.
    """
    check_key(key)
    if len(sizes) < 2:
        raise ValueError(f"sizes must list at least the input and output widths, got {sizes!r}")
    sizes = [check_count(size, "sizes") for size in sizes]
    keys = jax.random.split(key, len(sizes) - 1)
    return MLPFeatures(tuple((jax.random.normal(k, (a, b)) * jnp.sqrt(2.0 / a), jnp.zeros(b))
                             for k, a, b in zip(keys, sizes[:-1], sizes[1:])))


@saveable
class NystromFeatures(NamedTuple):
    """psi(x) = L^{-1} k(landmarks, x) with L L^T = k(landmarks, landmarks) (+ a small jitter): psi(x) . psi(x')
    is the Nystrom approximation of k(x, x'), exact (up to the jitter) whenever x or x' is a landmark. Calling it
    on points X (n, d) gives their features (n, p).

    Attributes:
        kernel: the kernel k.
        landmarks: (p, d) landmarks.
        factor: (p, p) lower Cholesky factor L of k(landmarks, landmarks).
    """

    kernel: Kernel
    landmarks: jax.Array
    factor: jax.Array

    def __call__(self, X):
        """Features (n, p) of points X (n, d) (of the landmarks' dimension)."""
        X = self.kernel.prepare(X, "X")
        check_same_dim(X, self.landmarks, "X and the landmarks")
        return whiten_unchecked(self.factor, self.kernel.evaluate(self.landmarks, X)).T


def nystrom_features(kernel: Kernel, landmarks, *, jitter: float = 1e-8) -> NystromFeatures:
    """Nystrom features psi(x) = L^{-1} k(landmarks, x), L L^T = k(landmarks, landmarks) + jitter x mean diag x I.

    psi(x) . psi(x') approximates k(x, x'), exactly (up to the jitter) when x or x' is a landmark. Traceable; the
    gradients in the kernel's parameters stay finite however close the landmarks are (the relative jitter bounds
    the factor's condition number).

    Args:
        kernel: the kernel to approximate.
        landmarks: (p, d) points (e.g. from :func:`select_landmarks`).
        jitter: relative jitter.

    Returns:
        NystromFeatures: callable (n, d) -> (n, p); ``FeatureKernel(features)`` makes it a filter's kernel.

    Raises:
        TypeError: for landmarks that are not real numbers.
        ValueError: for non-finite landmarks or jitter not positive.
    """
    landmarks = kernel.prepare(landmarks, "landmarks")
    check_positive(jitter, "jitter")
    return NystromFeatures(kernel, landmarks, jittered_cholesky(_jittered_gram(kernel, landmarks, jitter))[0])


@jax.jit
def _jittered_gram(kernel, landmarks, jitter):
    K = kernel.evaluate(landmarks, landmarks)
    return K + jitter * jnp.mean(jnp.diag(K)) * jnp.eye(K.shape[0], dtype=K.dtype)


def select_landmarks(kernel: Kernel, X, num: int):
    """Landmarks for Nystrom features: the first pivots of the pivoted Cholesky factorisation of k(X, X).

    Greedy and space-filling in the kernel's metric; O(n num) kernel evaluations, no n x n matrix.

    Args:
        kernel: the kernel.
        X: (n, d) candidate points.
        num: number of landmarks, 1 <= num <= n.

    Returns:
        (num, d) array.

    Raises:
        ValueError: for non-finite points or num out of range.
    """
    X = as_points(X, "X")
    num = check_count(num, "num")
    if not num <= X.shape[0]:
        raise ValueError(f"num must lie in [1, n = {X.shape[0]}], got {num}")
    return X[pivoted_cholesky(kernel, X, tol=0.0, max_rank=num).pivots]


class FeatureKernel(Kernel):
    """The linear kernel on learned, random or Nystrom features: k(x, x') = psi(x) . psi(x').

    As a filter's observation kernel it makes the IW update O(T p^2) per step instead of O(T^3).

    Args:
        features: a callable pytree psi, (n, ...) -> (n, p): MLPFeatures, RandomFourierFeatures,
            NystromFeatures, or a trained image network.

    Attributes:
        features: the feature map psi.

    Raises:
        TypeError: for features that are not callable.
    """

    _leaves = ("features",)

    def __init__(self, features):
        if not callable(features):
            raise TypeError(f"features must be a callable feature map psi (n, ...) -> (n, p), got {features!r}")
        self.features = features

    def evaluate(self, X, Y):
        return self.features(X) @ self.features(Y).T

    def evaluate_paired(self, X, Y):
        return jnp.sum(self.features(X) * self.features(Y), axis=-1)


def adaptive_feature_loss(Psi, Phi, lam, *, r_hat=None, reg_scale: str = "operator"):
    """Profiled IW loss of observation features, without any n x n matrix: O(n (p + F) p + p^3).

    l = (1/n) [ ||D^{1/2} Phi||_F^2 - tr(M^T (Psi^T D Psi + n lam I)^{-1} M) ], M = Psi^T D Phi, with Psi (n, p)
    the observation features, Phi (n, F) explicit (e.g. random Fourier) latent features, D = diag(r_hat)
    (None: the unweighted loss D = I used to learn filter features).

    Args:
        Psi: (n, p) observation features.
        Phi: (n, F) latent features.
        lam: ridge > 0.
        r_hat: optional (n,) importance weights (None: D = I).
        reg_scale: ``"operator"`` or ``"gram"``.

    Returns:
        () array, the loss.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs, shapes that do not match, lam not positive or an unknown reg_scale.
        RuntimeError: when float64 is off.
    """
    Psi = as_matrix(Psi, "Psi")
    n, p = Psi.shape
    Phi = as_matrix(Phi, "Phi", (n, None))
    c = gram_coefficient(lam, n, 1, reg_scale, "lam")
    r = jnp.ones(n, Psi.dtype) if r_hat is None else as_matrix(r_hat, "r_hat", (n,))
    M = Psi.T @ (r[:, None] * Phi)
    A = Psi.T @ (r[:, None] * Psi) + c * jnp.eye(p, dtype=Psi.dtype)  # SPD: eigenvalues >= c > 0
    return (jnp.sum(r[:, None] * Phi**2) - jnp.sum(M * spd_solve(A, M))) / n


def train_features(key, X, Z, *, lam, sigma_z, hidden=(128, 64), num_rff: int = 100, steps: int = 100,
                   learning_rate: float = 1e-2, weight_decay: float = 1e-2, r_hat=None):
    """Learn MLP observation features psi_theta for IW(NN) filtering by full-batch AdamW on the adaptive loss.

    The latent kernel is approximated by ``num_rff`` random Fourier features of bandwidth sigma_z; the loss is
    :func:`adaptive_feature_loss` (weighted by ``r_hat`` if given).

    Args:
        key: PRNG key (initialisation and Fourier features).
        X: (n, d_x) observations.
        Z: (n, d_z) latents, row i paired with X[i].
        lam: KBR ridge > 0 (operator scale).
        sigma_z: latent bandwidth > 0.
        hidden: hidden widths of the MLP (the last one is the number of features p).
        num_rff: random Fourier features of the latent kernel.
        steps: AdamW steps >= 1.
        learning_rate: AdamW learning rate.
        weight_decay: AdamW weight decay.
        r_hat: optional (n,) importance weights of the loss.

    Returns:
        (features, losses): the trained :class:`MLPFeatures` and the loss trace (steps,).

    Raises:
        ValueError: for unpaired or non-finite inputs, lam <= 0 or steps < 1.
    """
    X = as_points(X, "X")
    return fit_feature_network(key, lambda k: init_mlp(k, (X.shape[1],) + tuple(hidden)), X, Z, lam=lam,
                               sigma_z=sigma_z, num_rff=num_rff, steps=steps, learning_rate=learning_rate,
                               weight_decay=weight_decay, r_hat=r_hat)


def fit_feature_network(key, init, X, Z, *, lam, sigma_z, num_rff: int = 100, steps: int = 100,
                        learning_rate: float = 1e-2, weight_decay: float = 1e-2, r_hat=None):
    """Train a feature network by full-batch AdamW on :func:`adaptive_feature_loss`, with random Fourier features
    of the latents as targets.

    Args:
        key: PRNG key (initial network, random features).
        init: ``init(key)`` returning the network, a callable pytree (n, d_x) -> (n, p) (e.g. a partial of
            :func:`init_mlp`).
        X: (n, d_x) observations.
        Z: (n, d_z) latents, paired with X.
        lam: ridge > 0 of the loss.
        sigma_z: bandwidth of the random Fourier features on Z.
        num_rff: number of random Fourier features.
        steps: optimiser steps.
        learning_rate: AdamW step size.
        weight_decay: AdamW weight decay.
        r_hat: optional (n,) importance weights of the loss.

    Returns:
        (trained network, loss trace (steps,)).

    Raises:
        TypeError: for a key that is not a PRNG key, data that are not real numbers or steps not an integer.
        ValueError: for non-finite or unpaired data, lam or sigma_z not positive, or steps below 1.
    """
    X, Z = as_points(X, "X"), as_points(Z, "Z")
    check_same_length(X, Z, "X and Z")
    check_positive(lam, "lam")
    steps = check_count(steps, "steps")
    check_key(key)
    k_net, k_rff = jax.random.split(key)
    Phi = random_fourier_features(k_rff, Z.shape[1], sigma_z, num_rff)(Z)
    fitted = minimise(_network_loss, init(k_net), adamw(learning_rate, weight_decay), num_steps=steps,
                      data=(X, Phi, jnp.asarray(lam), r_hat))  # one compiled loop per shapes, reused across lam
    return fitted.params, fitted.trace


def _network_loss(net, carry, data, key):
    X, Phi, lam, r_hat = data
    return adaptive_feature_loss(net(X), Phi, lam, r_hat=r_hat), carry


def _inputs(X, name, dim):
    """Inputs (n, dim) of a feature map: real, finite when concrete, of the map's input dimension."""
    X = as_finite_array(X, name)
    if X.ndim != 2 or X.shape[1] != dim:
        raise ValueError(f"{name} must have shape (n, {dim}) for these features, got {X.shape}")
    return X
