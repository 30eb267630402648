"""Cholesky factorisation with escalating jitter, and solves built on it.

Traceable functions return a success flag instead of raising; the eager
wrappers turn a failure into :class:`CholeskyError` (never a NaN result).
"""

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import cho_solve, solve_triangular

from ._validation import is_concrete

__all__ = ["CholeskyError", "jittered_cholesky", "cholesky", "cho_solve_psd", "logdet_from_cholesky", "whiten"]


class CholeskyError(np.linalg.LinAlgError):
    """A matrix that should be positive definite could not be factorised, even with jitter."""


def jittered_cholesky(A, *, jitter: float = 1e-10, max_tries: int = 8):
    """Lower Cholesky factor of a symmetric PSD matrix, adding jitter only if needed.

    Tries ``A``, then ``A + jitter * 10^t * mean(diag A) * I`` for t = 0..max_tries-1,
    stopping at the first finite factor. Returns ``(L, added, ok)``: the factor,
    the jitter actually added, and whether a finite factor was found. Traceable.
    """
    A = 0.5 * (A + A.T)
    scale = jnp.maximum(jnp.mean(jnp.diag(A)), jnp.finfo(A.dtype).tiny)
    eye = jnp.eye(A.shape[0], dtype=A.dtype)

    def attempt(t):
        added = jnp.where(t == 0, 0.0, jitter * 10.0 ** (t - 1) * scale)
        L = jnp.linalg.cholesky(A + added * eye)
        return L, added, jnp.all(jnp.isfinite(L))

    def cond(state):
        t, _, _, ok = state
        return (~ok) & (t < max_tries + 1)

    def body(state):
        t, _, _, _ = state
        L, added, ok = attempt(t)
        return t + 1, L, added, ok

    L0, added0, ok0 = attempt(0)
    _, L, added, ok = lax.while_loop(cond, body, (jnp.asarray(1), L0, added0, ok0))
    return L, added, ok


def cholesky(A, *, what: str = "matrix", jitter: float = 1e-10, max_tries: int = 8):
    """Eager :func:`jittered_cholesky` that raises :class:`CholeskyError` on failure.

    Under tracing it returns the factor unchecked (the caller propagates ``ok``).
    """
    A = jnp.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{what} must be a square matrix, got shape {A.shape}")
    L, added, ok = jittered_cholesky(A, jitter=jitter, max_tries=max_tries)
    if is_concrete(ok) and not bool(ok):
        raise CholeskyError(
            f"{what} is not positive definite: Cholesky failed even with jitter "
            f"{jitter * 10.0 ** (max_tries - 1):.1e} x mean diagonal (check for NaN, duplicates or a bad kernel)"
        )
    return L


def cho_solve_psd(L, B):
    """Solve (L L^T) X = B given the lower Cholesky factor L."""
    return cho_solve((L, True), B)


def logdet_from_cholesky(L):
    """log det(L L^T)."""
    return 2.0 * jnp.sum(jnp.log(jnp.diag(L)))


def whiten(L, B):
    """L^{-1} B for lower-triangular L."""
    return solve_triangular(L, B, lower=True)

