"""The image feature network of Xu et al. (2022, Section 5.3) for IW(NN) filtering on pixels, in plain JAX.

d_x -> 1024 -> 512 -> 128 -> p (p = 32), ReLU after every layer, spectral normalisation on every linear layer
(one power iteration per training step, Miyato et al. 2018), batch normalisation after the second (512) layer,
optional dropout on the hidden layers during training. Trained full batch with AdamW on the unweighted
adaptive loss (:func:`bayeskern.kbr.adaptive_feature_loss`, D = I), the library's training recipe (user guide, kernel Bayes' rule).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..fitted import saveable
from ..optim import adamw, minimise, static_partial
from .._validation import as_points, check_count, check_key, check_positive, check_same_length
from .features import adaptive_feature_loss, random_fourier_features

__all__ = ["ImageFeatures", "init_image_mlp", "train_image_features", "IMAGE_HIDDEN"]

IMAGE_HIDDEN = (1024, 512, 128)
"""Hidden widths of the image feature network: d_x -> 1024 -> 512 -> 128 -> p."""
_BN_LAYER = 1  # batch norm after the second linear layer (the 512 layer)
_BN_EPS = 1e-5


@saveable
class ImageFeatures(NamedTuple):
    """The trained network in inference mode: spectrally normalised weights and frozen batch-norm statistics.
    Calling it on flattened images X (n, d_x) gives their features (n, p).

    Attributes:
        layers: ((W (a, b), bias (b,)), ...) of each layer.
        batch_norm: (scale, offset, mean, var) of the second layer's batch norm.
    """

    layers: tuple
    batch_norm: tuple

    def __call__(self, X):
        """Features (n, p) of flattened images X (n, d_x)."""
        H = X
        for i, (W, b) in enumerate(self.layers):
            H = H @ W + b
            if i == _BN_LAYER:
                H = _normalise(H, *self.batch_norm)
            H = jax.nn.relu(H)
        return H


def _normalise(H, scale, offset, mean, var):
    return (H - mean) / jnp.sqrt(var + _BN_EPS) * scale + offset


def init_image_mlp(key, d_x: int, num_features: int = 32, hidden=IMAGE_HIDDEN):
    """He-initialised parameters of the image network and its power-iteration vectors.

    Args:
        key: PRNG key.
        d_x: the number of pixels (input width).
        num_features: p, the output width.
        hidden: hidden widths (at least one).

    Returns:
        (params, vectors): {"layers": ((W, b), ...), "batch_norm": (scale, offset)} and one (a,) vector per layer.

    Raises:
        TypeError: for a key that is not a PRNG key or widths that are not integers.
        ValueError: for widths below 1 or no hidden layer.
    """
    check_key(key)
    sizes = (check_count(d_x, "d_x"),) + tuple(check_count(h, "hidden") for h in hidden) + \
        (check_count(num_features, "num_features"),)
    if len(sizes) < 3:
        raise ValueError("the image network needs at least one hidden layer (batch norm follows the second)")
    keys = jax.random.split(key, 2 * (len(sizes) - 1))
    layers = tuple((jax.random.normal(k, (a, b)) * jnp.sqrt(2.0 / a), jnp.zeros(b))
                   for k, a, b in zip(keys[::2], sizes[:-1], sizes[1:]))
    vectors = tuple(_unit(jax.random.normal(k, (a,))) for k, a in zip(keys[1::2], sizes[:-1]))
    width = sizes[_BN_LAYER + 1]
    return {"layers": layers, "batch_norm": (jnp.ones(width), jnp.zeros(width))}, vectors


def _unit(v):
    return v / jnp.linalg.norm(v)


def _spectral(W, u):
    """W / sigma_max(W) by one power iteration from u (a, ); the singular vectors carry no gradient."""
    v = _unit(W.T @ u)
    u = _unit(W @ v)
    u, v = jax.lax.stop_gradient(u), jax.lax.stop_gradient(v)
    return W / (u @ W @ v), u


def _forward(params, vectors, X, key, dropout: float):
    """Training-mode pass (batch statistics in the batch norm): (features, new power-iteration vectors)."""
    H, new_vectors = X, []
    last = len(params["layers"]) - 1
    for i, ((W, b), u) in enumerate(zip(params["layers"], vectors)):
        W, u = _spectral(W, u)
        new_vectors.append(u)
        H = H @ W + b
        if i == _BN_LAYER:
            H = _normalise(H, *params["batch_norm"], jnp.mean(H, axis=0), jnp.var(H, axis=0))
        H = jax.nn.relu(H)
        if dropout > 0 and i < last:
            key, sub = jax.random.split(key)
            H = jnp.where(jax.random.bernoulli(sub, 1.0 - dropout, H.shape), H / (1.0 - dropout), 0.0)
    return H, tuple(new_vectors)


def _image_loss(dropout, params, vectors, data, key):
    """The adaptive loss of the training-mode network; the power-iteration vectors are carried, not learned."""
    X, Phi, lam = data
    Psi, vectors = _forward(params, vectors, X, key, dropout)
    return adaptive_feature_loss(Psi, Phi, lam), vectors


def train_image_features(key, X, Z, *, lam, sigma_z, num_features: int = 32, hidden=IMAGE_HIDDEN,
                         dropout: float = 0.0, steps: int = 100, learning_rate: float = 1e-2,
                         weight_decay: float = 1e-2, num_rff: int = 100):
    """Learn the image network on flattened images X (n, d_x) and latents Z (n, d_z) by full-batch AdamW on the
    unweighted adaptive loss (latent kernel: ``num_rff`` random Fourier features of bandwidth sigma_z).

    The frozen batch-norm statistics are those of X under the final weights (full-batch training: the training
    batch is X).

    Args:
        key: PRNG key (initial network, random features, dropout).
        X: (n, d_x) flattened images.
        Z: (n, d_z) latents, paired with X.
        lam: ridge > 0 of the loss.
        sigma_z: bandwidth of the random Fourier features on Z.
        num_features: p, the output width.
        hidden: hidden widths.
        dropout: dropout rate in [0, 1).
        steps: optimiser steps.
        learning_rate: AdamW step size.
        weight_decay: AdamW weight decay.
        num_rff: number of random Fourier features.

    Returns:
        (ImageFeatures, loss trace (steps,)).

    Raises:
        TypeError: for a key that is not a PRNG key, data that are not real numbers or counts that are not
            integers.
        ValueError: for non-finite or unpaired data, lam not positive, dropout outside [0, 1) or counts below 1.
    """
    X, Z = as_points(X, "X"), as_points(Z, "Z")
    check_same_length(X, Z, "X and Z")
    check_positive(lam, "lam")
    if not 0 <= dropout < 1:
        raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
    steps = check_count(steps, "steps")
    check_key(key)
    k_net, k_rff, k_drop = jax.random.split(key, 3)
    Phi = random_fourier_features(k_rff, Z.shape[1], sigma_z, num_rff)(Z)
    params, vectors = init_image_mlp(k_net, X.shape[1], num_features, hidden)
    fitted = minimise(static_partial(_image_loss, float(dropout)), params, adamw(learning_rate, weight_decay),
                      num_steps=steps, data=(X, Phi, jnp.asarray(lam)), carry=vectors, key=k_drop)
    params, vectors, trace = fitted.params, fitted.carry, fitted.trace
    layers = tuple((_spectral(W, u)[0], b) for (W, b), u in zip(params["layers"], vectors))
    H = X
    for W, b in layers[:_BN_LAYER]:
        H = jax.nn.relu(H @ W + b)
    W, b = layers[_BN_LAYER]
    pre = H @ W + b  # the batch-norm layer's input under the final weights
    stats = (jnp.mean(pre, axis=0), jnp.var(pre, axis=0))
    return ImageFeatures(layers, tuple(params["batch_norm"]) + stats), trace
