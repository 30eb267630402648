"""A small convolutional observation-feature network for IW(NN) filtering on images, in plain JAX.

image (H, W, C) -> conv k x k, stride s, c_1 channels -> ReLU -> conv k x k, stride s, c_2 channels -> ReLU ->
flatten -> dense -> ReLU -> dense p -> ReLU ("same" padding; channels-last images flattened row-major, as the
image generators of ``bayeskern.kbr.data`` return them). Trained like the MLP features: full-batch AdamW on the unweighted adaptive loss.
The convolutions see local pixel structure that the MLP must learn from 10^3-10^4 inputs per unit.
"""


import math

import jax
import jax.numpy as jnp

from ..fitted import fitted, static
from .._validation import as_finite_array, as_points, check_count, check_key
from .features import fit_feature_network

__all__ = ["ConvFeatures", "init_image_cnn", "train_image_cnn", "CNN_CHANNELS"]

CNN_CHANNELS = (16, 32)
"""Channels of the two convolution layers of the default image CNN."""
_DIMENSIONS = ("NHWC", "HWIO", "NHWC")


@fitted
class ConvFeatures:
    """A small convolutional feature network; calling it on flattened images X (n, H W C) gives features (n, p).

    Attributes:
        convs: ((kernel (k, k, c_in, c_out), bias (c_out,)), ...) of the convolutions.
        dense: ((W, b), ...) of the dense layers.
        image_shape: (H, W, C) of the flattened inputs.
        stride: the stride of every convolution.
    """

    convs: tuple
    dense: tuple
    image_shape: tuple = static()
    stride: int = static()

    def __call__(self, X):
        """Features (n, p) of flattened images X (n, H W C)."""
        X = as_finite_array(X, "X")
        if X.ndim != 2 or X.shape[1] != math.prod(self.image_shape):
            raise ValueError(f"X must have shape (n, {math.prod(self.image_shape)}) (flattened {self.image_shape} "
                             f"images), got {X.shape}")
        H = X.reshape((X.shape[0],) + tuple(self.image_shape))
        for kernel, bias in self.convs:
            H = jax.nn.relu(_conv(H, kernel, self.stride) + bias)
        H = H.reshape(H.shape[0], -1)
        for W, b in self.dense:
            H = jax.nn.relu(H @ W + b)
        return H


def _conv(H, kernel, stride):
    return jax.lax.conv_general_dilated(H, kernel, (stride, stride), "SAME", dimension_numbers=_DIMENSIONS)


def _check_image_shape(image_shape, d_x: int | None = None) -> tuple:
    image_shape = tuple(int(s) for s in image_shape)
    if len(image_shape) != 3 or min(image_shape) < 1:
        raise ValueError(f"image_shape must be (height, width, channels) of positive sizes, got {image_shape}")
    if d_x is not None and image_shape[0] * image_shape[1] * image_shape[2] != d_x:
        raise ValueError(f"image_shape {image_shape} has {image_shape[0] * image_shape[1] * image_shape[2]} pixel "
                         f"values but the images X have d_x = {d_x}")
    return image_shape


def init_image_cnn(key, image_shape, num_features: int = 32, *, channels=CNN_CHANNELS, kernel_size: int = 5,
                   stride: int = 2, hidden: int = 128) -> ConvFeatures:
    """He-initialised :class:`ConvFeatures` for images of a given shape.

    Args:
        key: PRNG key.
        image_shape: (H, W, C).
        num_features: p, the output width.
        channels: output channels of each convolution.
        kernel_size: side of the square convolution kernels.
        stride: the stride of every convolution ("same" padding).
        hidden: width of the dense hidden layer.

    Returns:
        ConvFeatures: the network.

    Raises:
        TypeError: for a key that is not a PRNG key or sizes that are not integers.
        ValueError: for an invalid image shape, empty or non-positive channels, or sizes below 1.
    """
    height, width, c_in = image_shape = _check_image_shape(image_shape)
    if not channels or min(channels) < 1:
        raise ValueError(f"channels must be a non-empty sequence of positive integers, got {channels}")
    check_key(key)
    for name, value in (("kernel_size", kernel_size), ("stride", stride), ("hidden", hidden),
                        ("num_features", num_features)):
        check_count(value, name)
    keys = jax.random.split(key, len(channels) + 2)
    convs = []
    for k, c_out in zip(keys, channels):
        fan_in = kernel_size * kernel_size * c_in
        convs.append((jax.random.normal(k, (kernel_size, kernel_size, c_in, c_out)) * jnp.sqrt(2.0 / fan_in),
                      jnp.zeros(c_out)))
        height, width, c_in = -(-height // stride), -(-width // stride), c_out  # "same" padding
    sizes = (height * width * c_in, hidden, num_features)
    dense = tuple((jax.random.normal(k, (a, b)) * jnp.sqrt(2.0 / a), jnp.zeros(b))
                  for k, a, b in zip(keys[len(channels):], sizes[:-1], sizes[1:]))
    return ConvFeatures(tuple(convs), dense, image_shape, stride)


def train_image_cnn(key, X, Z, *, image_shape, lam, sigma_z, num_features: int = 32, channels=CNN_CHANNELS,
                    kernel_size: int = 5, stride: int = 2, hidden: int = 128, steps: int = 100,
                    learning_rate: float = 1e-2, weight_decay: float = 1e-2, num_rff: int = 100):
    """Learn :class:`ConvFeatures` by full-batch AdamW on the unweighted adaptive loss (latent kernel: random
    Fourier features), the MLP recipe with a convolutional network.

    Args:
        key: PRNG key.
        X: (n, H W C) flattened images.
        Z: (n, d_z) latents, paired with X.
        image_shape: (H, W, C) of the images.
        lam: ridge > 0 of the loss.
        sigma_z: bandwidth of the random Fourier features on Z.
        num_features: p, the output width.
        channels: output channels of each convolution.
        kernel_size: side of the convolution kernels.
        stride: the stride of every convolution.
        hidden: width of the dense hidden layer.
        steps: optimiser steps.
        learning_rate: AdamW step size.
        weight_decay: AdamW weight decay.
        num_rff: number of random Fourier features.

    Returns:
        (ConvFeatures, loss trace (steps,)).

    Raises:
        TypeError: for a key that is not a PRNG key, data that are not real numbers or sizes that are not integers.
        ValueError: for non-finite or unpaired data, an image shape that does not match X, lam not positive or
            sizes below 1.
    """
    X = as_points(X, "X")
    image_shape = _check_image_shape(image_shape, X.shape[1])
    return fit_feature_network(key, lambda k: init_image_cnn(k, image_shape, num_features, channels=channels,
                                                             kernel_size=kernel_size, stride=stride, hidden=hidden),
                               X, Z, lam=lam, sigma_z=sigma_z, num_rff=num_rff, steps=steps,
                               learning_rate=learning_rate, weight_decay=weight_decay)
