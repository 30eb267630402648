"""Kernel conditional mean embeddings and the choice of their ridge lambda."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._config import require_x64
from .._validation import (as_finite_array, as_labels, as_matrix, as_points, check_count, check_key, check_same_dim,
                           is_concrete)
from ..kernels import Indicator
from ..kernels.base import Kernel
from ..linalg import cholesky, jittered_cholesky
from ..linalg.dense import cho_solve_unchecked
from ._inputs import check_lambda, labelled, onehot

__all__ = ["kcme_weights", "conditional_expectation", "class_probabilities", "validation_loss", "select_lambda",
           "COARSE_LAMBDAS"]

COARSE_LAMBDAS = tuple(10.0 ** np.arange(-8, 1))


def kcme_weights(x_train, x_query, kernel_x: Kernel, lam):
    """Conditional mean embedding coefficients beta(x) = (K_XX + n lam I)^{-1} k_X(x) at every query.

    Args:
        x_train: (n, d_x) training features.
        x_query: (N, d_x) query features.
        kernel_x: feature kernel.
        lam: ridge lam > 0 (the system holds n lam).

    Returns:
        (n, N) array; column j holds the weights of the training responses at query j.

    Raises:
        ValueError: for non-finite inputs or lam <= 0.
        CholeskyError: when K_XX + n lam I cannot be factorised even with jitter.
        RuntimeError: when float64 is off.
    """
    require_x64("kcme_weights")
    x_train, x_query = as_points(x_train, "x_train"), as_points(x_query, "x_query")
    lam = check_lambda(lam, "lam")
    n = x_train.shape[0]
    L = cholesky(kernel_x.gram(x_train) + n * lam * jnp.eye(n), what="K_XX + n lam I")
    return cho_solve_unchecked(L, kernel_x.cross(x_train, x_query))


def conditional_expectation(h_values, weights):
    """Plug-in conditional expectation E[h(Y) | X = x] = h(Y)^T beta(x) (also for h outside the RKHS).

    Args:
        h_values: (n,) or (n, k) values h(y_i) on the training responses.
        weights: (n, N) coefficients from :func:`kcme_weights`.

    Returns:
        (N,) or (N, k) array.

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for non-finite inputs or h_values with another number of rows than the weights.
    """
    weights = as_matrix(weights, "weights")
    h_values = as_finite_array(h_values, "h_values")
    if h_values.ndim not in (1, 2) or h_values.shape[0] != weights.shape[0]:
        raise ValueError(f"h_values must have shape ({weights.shape[0]},) or ({weights.shape[0]}, k) to match the "
                         f"weights' rows, got {h_values.shape}")
    return weights.T @ h_values


def class_probabilities(y_train, weights, n_classes: int):
    """Class probabilities from conditional mean embedding weights, clip-normalised.

    Raw estimates p_c = sum_i beta_i(x) 1[y_i = c] can leave [0, 1] and need not sum to 1; the result is
    max(p_c, 0) / sum_c' max(p_c', 0), uniform where every p_c <= 0.

    Args:
        y_train: (n,) integer labels in 0..C-1.
        weights: (n, N) coefficients from :func:`kcme_weights`.
        n_classes: C.

    Returns:
        (N, C) array whose rows are probability vectors.

    Raises:
        TypeError: for n_classes not an integer or labels that are not whole numbers.
        ValueError: for non-finite weights or labels outside 0..C-1.
    """
    n_classes = check_count(n_classes, "n_classes")
    y_train = as_labels(y_train, "y_train")
    if is_concrete(y_train) and not bool(jnp.all((y_train >= 0) & (y_train < n_classes))):
        raise ValueError(f"y_train must hold labels in 0..{n_classes - 1} (n_classes = {n_classes})")
    p = jnp.maximum(conditional_expectation(onehot(y_train, n_classes), weights), 0.0)
    total = jnp.sum(p, axis=1, keepdims=True)
    return jnp.where(total > 0, p / jnp.where(total > 0, total, 1.0), 1.0 / n_classes)


def validation_loss(x_train, y_train, x_val, y_val, kernel_x: Kernel, kernel_y: Kernel, lam):
    """Mean ||mu_hat(x_v) - l(y_v, .)||^2 over the validation pairs (a Brier-type score for the indicator kernel).

    Args:
        x_train: (n, d_x) training features.
        y_train: (n, d_y) training responses, or (n,) labels.
        x_val: (N, d_x) validation features.
        y_val: validation responses or labels, paired with x_val.
        kernel_x: kernel on features.
        kernel_y: kernel on responses.
        lam: ridge > 0 of the training embedding (the system holds n lam).

    Returns:
        () array, the mean squared RKHS error.

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for non-finite inputs or lam not positive.
        ArithmeticError: when K_XX + n lam I cannot be factorised.
        RuntimeError: when float64 is off.
    """
    require_x64("validation_loss")
    lam = check_lambda(lam, "lam")
    x_train, x_val = as_points(x_train, "x_train"), as_points(x_val, "x_val")
    value = _grid_losses(kernel_x, kernel_y, x_train, jnp.asarray(y_train), np.arange(x_train.shape[0])[None], x_val,
                         jnp.asarray(y_val), np.array([lam], float))[0, 0]
    if not jnp.isfinite(value):
        raise ArithmeticError("validation_loss: K_XX + n lam I could not be factorised")
    return value


def select_lambda(x_train, y_train, x_val, y_val, kernel_x: Kernel, kernel_y: Kernel, *, size: int, key,
                  n_subsets: int = 10, coarse=COARSE_LAMBDAS, n_fine: int = 10):
    """Two-stage grid search of lambda: validation loss averaged over ``n_subsets`` random training subsets
    of ``size`` points, on the coarse grid, then on ``n_fine`` log-spaced values in [lam*/10, 10 lam*].
    Ties go to the larger lambda. ``size`` = m_max tunes lambda_C; ``size`` = n tunes lambda_P.

    Args:
        x_train: (n, d_x) training features.
        y_train: (n, d_y) training responses, or (n,) labels.
        x_val: (N, d_x) validation features.
        y_val: validation responses or labels, paired with x_val.
        kernel_x: kernel on features.
        kernel_y: kernel on responses (an Indicator kernel for labels).
        size: points per training subset, in [1, n].
        key: PRNG key of the subsets.
        n_subsets: random subsets averaged over (a single subset, all the data, when size = n).
        coarse: the coarse grid of lambdas.
        n_fine: values of the fine grid.

    Returns:
        float, the selected lambda.

    Raises:
        TypeError: for a key that is not a PRNG key or counts that are not integers.
        ValueError: for unpaired or non-finite data, mismatched dimensions or size outside [1, n] or n_subsets below 1.
        ArithmeticError: when a validation loss is not finite (a Gram matrix could not be factorised).
        RuntimeError: when float64 is off.
    """
    require_x64("select_lambda")
    check_key(key)
    kind = "indicator" if isinstance(kernel_y, Indicator) else "continuous"
    x_train, y_train = labelled(x_train, y_train, kind, ("x_train", "y_train"))
    x_val, y_val = labelled(x_val, y_val, kind, ("x_val", "y_val"))
    check_same_dim(x_train, x_val, "x_train and x_val")
    n = int(x_train.shape[0])
    size, n_subsets = check_count(size, "size"), check_count(n_subsets, "n_subsets")
    if size > n:
        raise ValueError(f"size must lie in [1, n = {n}], got {size}")
    subsets = np.arange(n)[None] if size == n else _random_subsets(key, n, size, n_subsets)
    x_train, x_val = jnp.asarray(x_train), jnp.asarray(x_val)
    y_train, y_val = jnp.asarray(y_train), jnp.asarray(y_val)

    def best(grid):
        grid = np.sort(np.asarray(grid, dtype=float))
        losses = np.asarray(_grid_losses(kernel_x, kernel_y, x_train, y_train, subsets, x_val, y_val, grid))
        if not np.all(np.isfinite(losses)):
            raise ArithmeticError("select_lambda: a validation loss is not finite (a Gram matrix could not be "
                                  "factorised); check the kernels and data")
        mean = losses.mean(1)
        return float(grid[np.flatnonzero(mean <= mean.min())[-1]])  # ties -> the larger lambda

    lam = best(coarse)
    return best(np.geomspace(lam / 10, lam * 10, n_fine))


@partial(jax.jit, static_argnums=(1, 2, 3))
def _random_subsets(key, n, size, count):
    """(count, size) indices: ``count`` subsets of range(n) drawn without replacement."""
    return jax.vmap(lambda k: jax.random.choice(k, n, (size,), replace=False))(jax.random.split(key, count))


@jax.jit
def _grid_losses(kernel_x, kernel_y, x_train, y_train, subsets, x_val, y_val, grid):
    """Validation losses (G, S) for every lambda in ``grid`` and training subset (x_train[s], y_train[s])."""
    xs, ys = x_train[subsets], y_train[subsets]

    def loss(x, y, lam):
        n = x.shape[0]
        chol, _, ok = jittered_cholesky(kernel_x.evaluate(x, x) + n * lam * jnp.eye(n))
        beta = cho_solve_unchecked(chol, kernel_x.evaluate(x, x_val))
        value = jnp.mean(jnp.sum(beta * (kernel_y.evaluate(y, y) @ beta), 0)
                         - 2.0 * jnp.sum(kernel_y.evaluate(y, y_val) * beta, 0)
                         + kernel_y.evaluate_paired(y_val, y_val))
        return jnp.where(ok, value, jnp.nan)

    return jax.vmap(lambda lam: jax.vmap(lambda x, y: loss(x, y, lam))(xs, ys))(grid)
