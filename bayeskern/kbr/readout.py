"""Reading out a posterior embedding m = sum_i w_i phi(z_i)."""

import jax
import jax.numpy as jnp

from .._validation import as_matrix, as_points, check_positive
from ..conditional import ConditionalExpectation, self_normalised_expectation
from ..kernels.blockwise import kernel_matvec
from ..kernels.stationary import RBF

__all__ = ["posterior_mean", "normalized_posterior_mean", "clipped_posterior_mean", "posterior_expectation",
           "posterior_spread", "decode_mode"]


def _weights_and_atoms(W, Z):
    """W (n, q) posterior weights and Z (n, d_z) atoms, checked (one weight per atom)."""
    Z = as_points(Z, "Z")
    return as_matrix(W, "W", (Z.shape[0], None)), Z


def posterior_mean(W, Z):
    """Posterior-mean estimate sum_i w_i z_i of Xu et al. (2022): the weights are used as they are (not normalised).

    Args:
        W: (n, q) posterior weights, one column per conditioning point.
        Z: (n, d_z) atoms.

    Returns:
        (q, d_z) array.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs or W with another number of rows than Z.
    """
    W, Z = _weights_and_atoms(W, Z)
    return W.T @ Z


def normalized_posterior_mean(W, Z) -> ConditionalExpectation:
    """Self-normalised posterior mean sum_i w_i z_i / sum_i w_i.

    Args:
        W: (n, q) posterior weights.
        Z: (n, d_z) atoms.

    Returns:
        ConditionalExpectation: ``mean`` (q, d_z), ``mass`` sum_i w_i (q,); NaN and flagged ``undefined`` where
        |sum_i w_i| <= 1e-12.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs or W with another number of rows than Z.
    """
    W, Z = _weights_and_atoms(W, Z)
    return self_normalised_expectation(W.T @ Z, jnp.sum(W, axis=0))


def clipped_posterior_mean(W, Z) -> ConditionalExpectation:
    """Clipped posterior mean sum_i w_i^+ z_i / sum_i w_i^+: negative weights set to zero, the rest normalised.

    A convex combination of the atoms, so it never leaves their convex hull, where negative importance weights
    can throw the plain sum_i w_i z_i far outside the training range.

    Args:
        W: (n, q) posterior weights.
        Z: (n, d_z) atoms.

    Returns:
        ConditionalExpectation: ``mean`` (q, d_z), ``mass`` sum_i w_i^+ (q,); NaN and flagged ``undefined`` where no
        weight is positive (mass <= 1e-12).

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs or W with another number of rows than Z.
    """
    W, Z = _weights_and_atoms(W, Z)
    P = jnp.maximum(W, 0.0)
    return self_normalised_expectation(P.T @ Z, jnp.sum(P, axis=0))


def posterior_expectation(W, K_ZV, c):
    """E[f(Z) | x] for the RKHS function f = sum_l c_l k_Z(., v_l): W^T K_ZV c. For functions outside the RKHS use
    the plug-in W^T h(Z).

    Args:
        W: (n, q) posterior weights.
        K_ZV: (n, L) k_Z(z_i, v_l).
        c: (L,) coefficients of f.

    Returns:
        (q,) array.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs or shapes that do not match.
    """
    W = as_matrix(W, "W")
    K_ZV = as_matrix(K_ZV, "K_ZV", (W.shape[0], None))
    c = as_matrix(c, "c", (K_ZV.shape[1],))
    return W.T @ (K_ZV @ c)


def posterior_spread(W, Z):
    """A spread of the posterior: the covariance of the atoms under the normalised positive part of the weights.

    A heuristic (the weights are not a probability vector); zero for a column without positive weights.

    Args:
        W: (n, q) posterior weights.
        Z: (n, d_z) atoms.

    Returns:
        (q, d_z, d_z) array of positive semidefinite matrices.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs or W with another number of rows than Z.
    """
    W, Z = _weights_and_atoms(W, Z)
    V = jnp.maximum(W, 0.0)
    V = V / jnp.where(jnp.sum(V, axis=0) > 0, jnp.sum(V, axis=0), 1.0)
    mean = V.T @ Z
    centred = Z[None, :, :] - mean[:, None, :]  # (q, n, d)
    return jnp.einsum("iq,qid,qie->qde", V, centred, centred)


def decode_mode(W, Z, sigma_z, *, tol: float = 1e-8, max_iter: int = 100):
    """Point decoding by Gaussian mean shift on the positive weights v = max(w, 0).

    Starts at the atom with the largest sum_i v_i k(z_i, z_j) and iterates
    z <- sum v_i k(z_i, z) z_i / sum v_i k(z_i, z) until the step is below ``tol``. Columns whose
    positive weights all vanish fall back to the posterior mean sum_i w_i z_i.

    Args:
        W: (n, q) posterior weights.
        Z: (n, d_z) atoms.
        sigma_z: bandwidth > 0 of the Gaussian kernel.
        tol: step size that ends the iteration.
        max_iter: the most iterations.

    Returns:
        (q, d_z) array.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs or W with another number of rows than Z.
            Also for sigma_z not positive.
    """
    check_positive(sigma_z, "sigma_z")
    kernel = RBF(sigma_z)
    W, Z = _weights_and_atoms(W, Z)
    V = jnp.maximum(W, 0.0)
    starts = jnp.argmax(kernel_matvec(kernel, Z, Z, V), axis=0)  # best atom per column, no n x n matrix

    def one(w, v, start):
        def step(state):
            z, _, it = state
            k = v * kernel.evaluate(Z, z[None])[:, 0]
            total = jnp.sum(k)
            new = jnp.where(total > 0, k @ Z / jnp.where(total > 0, total, 1.0), z)
            return new, jnp.linalg.norm(new - z), it + 1

        z, _, _ = jax.lax.while_loop(lambda s: (s[1] >= tol) & (s[2] < max_iter), step, (Z[start], jnp.inf, 0))
        return jnp.where(jnp.sum(v) > 0, z, w @ Z)

    return jax.vmap(one, in_axes=(1, 1, 0))(W, V, starts)
