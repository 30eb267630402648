"""Weighted kernel mean embeddings, witness functions and the S-KMSE shrinkage estimator."""

import jax
import jax.numpy as jnp

from ._config import require_x64
from .fitted import fitted
from ._validation import as_finite_array, check_positive, check_same_length, is_concrete, num_points
from .kernels.base import Kernel
from .kernels.blockwise import DEFAULT_BLOCK_SIZE, check_kernel, kernel_matvec
from .linalg import cho_solve_psd, cholesky

__all__ = ["KernelEmbedding", "mean_embedding", "witness", "skmse"]


@fitted
class KernelEmbedding:
    """An RKHS function mu(.) = sum_i weights[i] k(points[i], .), e.g. a mean embedding or a witness function.

    Calling it evaluates it blockwise at new points; ``inner`` and ``norm2`` are RKHS inner products, and
    embeddings add, subtract and scale. A pytree, so it passes through ``jit``.

    Attributes:
        kernel: the kernel k.
        points: n inputs of the kernel ((n, d), or a pair for tensor-product kernels).
        weights: (n,) weights; uniform 1/n give the empirical mean embedding, signed weights witness functions.
    """

    kernel: Kernel
    points: object
    weights: jax.Array

    def __call__(self, T, *, block_size: int = DEFAULT_BLOCK_SIZE):
        """Evaluate mu at the points T: (s,). Matrix-free in n and s.

        Args:
            T: (s, d) points (a pair for tensor-product kernels).
            block_size: rows per block.

        Returns:
            (s,) array of mu(t).

        Raises:
            ValueError: for non-finite points or points of another dimension.
        """
        return kernel_matvec(self.kernel, T, self.points, self.weights, block_size=block_size)

    def inner(self, other: "KernelEmbedding", *, block_size: int = DEFAULT_BLOCK_SIZE):
        """RKHS inner product <self, other> = w^T K(X, X') w', matrix-free.

        Args:
            other: an embedding with the same kernel.
            block_size: rows per block.

        Returns:
            () array.

        Raises:
            ValueError: when the embeddings use different kernels (they live in different RKHSs).
        """
        _check_same_kernel(self.kernel, other.kernel)
        return jnp.dot(self.weights, other(self.points, block_size=block_size))

    def norm2(self, *, block_size: int = DEFAULT_BLOCK_SIZE):
        """Squared RKHS norm ||mu||^2 (for a witness mu_P - mu_Q: the biased MMD^2).

        Args:
            block_size: rows per block.

        Returns:
            () array, >= 0 up to rounding.

        Raises:
            TypeError: for a block_size that is not an integer.
        """
        return self.inner(self, block_size=block_size)

    def __add__(self, other: "KernelEmbedding"):
        _check_same_kernel(self.kernel, other.kernel)
        points = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), self.points, other.points)
        return KernelEmbedding(self.kernel, points, jnp.concatenate([self.weights, other.weights]))

    def __neg__(self):
        return KernelEmbedding(self.kernel, self.points, -self.weights)

    def __sub__(self, other: "KernelEmbedding"):
        return self + (-other)

    def __mul__(self, c):
        return KernelEmbedding(self.kernel, self.points, c * self.weights)

    __rmul__ = __mul__


def _check_same_kernel(k1: Kernel, k2: Kernel):
    leaves1, tree1 = jax.tree.flatten(k1)
    leaves2, tree2 = jax.tree.flatten(k2)
    if is_concrete(leaves1 + leaves2):
        same = k1 == k2  # kernel equality: class, settings and hyperparameters
    else:  # traced hyperparameters: what can be compared is the structure
        same = tree1 == tree2 and all(jnp.shape(a) == jnp.shape(b) for a, b in zip(leaves1, leaves2))
    if not same:
        raise ValueError(f"embeddings use different kernels ({k1!r} vs {k2!r}); combine only embeddings in one RKHS")


def mean_embedding(X, kernel: Kernel, weights=None) -> KernelEmbedding:
    """Empirical mean embedding mu(.) = (1/n) sum_i k(x_i, .), or sum_i w_i k(x_i, .) with given weights.

    Args:
        X: (n, d) float array (or the input the kernel takes, e.g. a pair for a tensor-product kernel).
        kernel: the kernel k.
        weights: optional (n,) real weights (signed weights give witness functions).

    Returns:
        KernelEmbedding: a callable RKHS function; ``mu(T)`` evaluates it at (q, d) points blockwise.

    Raises:
        TypeError: for a kernel that is not a bayeskern kernel.
        ValueError: for non-finite inputs or weights of the wrong shape.

    Examples:
        >>> import numpy as np, bayeskern as bk
        >>> X = np.random.default_rng(0).standard_normal((100, 2))
        >>> mu = bk.mean_embedding(X, bk.RBF(1.0))
        >>> mu(np.zeros((3, 2))).shape
        (3,)
    """
    X = check_kernel(kernel).prepare(X, "X")
    n = num_points(X)
    if weights is None:
        weights = jnp.full((n,), 1.0 / n)
    else:
        weights = as_finite_array(weights, "weights").astype(jnp.result_type(float))
        if weights.ndim != 1:
            raise ValueError(f"weights must have shape (n,), got {weights.shape}")
        check_same_length(X, weights, "X and weights")
    return KernelEmbedding(kernel, X, weights)


def witness(X, Y, kernel: Kernel) -> KernelEmbedding:
    """Unnormalised witness function mu_X - mu_Y of two samples; its squared RKHS norm is the biased MMD^2.

    Args:
        X: (n, d) float array, the first sample.
        Y: (m, d) float array, the second sample.
        kernel: the kernel k.

    Returns:
        KernelEmbedding: positive where X has more mass than Y (as seen through k).

    Raises:
        ValueError: for non-finite inputs or samples of different dimension.
    """
    X, Y = kernel.prepare_pair(X, Y)
    return mean_embedding(X, kernel) - mean_embedding(Y, kernel)


def skmse(X, kernel: Kernel, lam) -> KernelEmbedding:
    """Spectral kernel mean shrinkage estimator (Muandet et al. 2016).

    mu_lam = Sigma (Sigma + lam I)^{-1} mu_hat = sum_i beta_i k(x_i, .) with beta = (K + n lam I)^{-1} K 1 / n:
    the posterior mean of a Bayesian kernel embedding whose prior covariance is k, with lam = tau2 / n^2.

    Args:
        X: (n, d) float array.
        kernel: the kernel k.
        lam: shrinkage lam > 0.

    Returns:
        KernelEmbedding: the shrunk embedding.

    Raises:
        ValueError: for non-finite inputs or lam <= 0.
        CholeskyError: when K + n lam I cannot be factorised even with jitter.
        RuntimeError: when float64 is off.
    """
    require_x64("skmse")
    lam = check_positive(jnp.asarray(lam, dtype=jnp.result_type(float)), "lam")
    X = kernel.prepare(X, "X")
    n = num_points(X)
    K = kernel.evaluate(X, X)
    L = cholesky(K + n * lam * jnp.eye(n, dtype=K.dtype), what="K + n lam I (skmse)")
    beta = cho_solve_psd(L, jnp.mean(K, axis=1))
    return KernelEmbedding(kernel, X, beta)
