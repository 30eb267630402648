"""Cholesky factorisation with escalating jitter, and solves built on it.

Traceable functions return a success flag instead of raising; the eager
wrappers turn a failure into :class:`CholeskyError` (never a NaN result).
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.linalg import cho_solve, solve_triangular

from .._validation import as_finite_array, as_real_array, check_count, check_finite, check_positive, is_concrete

__all__ = ["CholeskyError", "jittered_cholesky", "cholesky", "cho_solve_psd", "spd_solve", "logdet_from_cholesky",
           "whiten"]


class CholeskyError(np.linalg.LinAlgError):
    """A matrix that should be positive definite could not be factorised, even with jitter."""


# --- LAPACK calls that stay unbatched under vmap ----------------------------------------------------------------------
# jaxlib 0.10's CPU LAPACK kernels split a batch over XLA's intra-op thread pool and block until the pieces are done.
# Inside a compiled loop (NUTS with vectorised chains vmaps the whole model) the runtime executes independent kernels
# concurrently; once every pool thread blocks in such a kernel, the pieces they wait for never run and the program
# deadlocks. The factorisations and triangular solves of this module therefore loop over a batch (one unbatched
# LAPACK call per member; a batch of chains is small) when the default backend is the CPU. They are only evaluated,
# never differentiated by JAX: derivatives come from the custom rules below, which call them again.
def _one_at_a_time(fn):
    sequential = jax.custom_batching.sequential_vmap(fn)

    def call(*args):
        return sequential(*args) if jax.default_backend() == "cpu" else fn(*args)

    return call


_potrf = _one_at_a_time(jnp.linalg.cholesky)
_trsm_lower = _one_at_a_time(lambda L, B: solve_triangular(L, B, lower=True))
_trsm_lower_t = _one_at_a_time(lambda L, B: solve_triangular(L, B, lower=True, trans=1))
_chol_solve = _one_at_a_time(lambda L, B: cho_solve((L, True), B))


def _lower_solve(L, B):
    """L^{-1} B for lower-triangular L as a linear solve: its derivatives (in B and in L) reuse the solves."""
    lower = jnp.tril(L)  # as LAPACK reads it: the entries above the diagonal take no part (nor get a derivative)
    return lax.custom_linear_solve(lambda X: lower @ X, B, lambda _, R: _trsm_lower(lower, R),
                                   lambda _, R: _trsm_lower_t(lower, R))


def jittered_cholesky(A, *, jitter: float = 1e-10, max_tries: int = 8):
    """Lower Cholesky factor of a symmetric PSD matrix, adding jitter only if needed.

    Tries ``A``, then ``A + jitter * 10^(t-1) * mean(diag A) * I`` for t = 1..max_tries, stopping at the first
    finite factor. Traceable and differentiable (``jit``, ``grad``, ``vmap``): the derivative is the Cholesky
    derivative at the factor found, with the added jitter held constant.

    Args:
        A: (n, n) symmetric positive semidefinite matrix (only its symmetric part is used).
        jitter: the first relative jitter, > 0.
        max_tries: jittered attempts after the plain one, >= 1.

    Returns:
        (L, added, ok): the (n, n) lower factor, the () jitter actually added, and the () flag whether a finite
        factor was found (False for a matrix holding NaN: a flag, not an exception, since this runs inside traced
        code).

    Raises:
        TypeError: for A not real, or max_tries not an integer.
        ValueError: for A not a square matrix, jitter not positive or max_tries below 1.
    """
    A = _square(A, "A")
    check_positive(jitter, "jitter")
    return _jittered_cholesky(A, jitter=float(jitter), max_tries=check_count(max_tries, "max_tries"))


@partial(jax.jit, static_argnames=("jitter", "max_tries"))
def _jittered_cholesky(A, *, jitter, max_tries):
    return _jittered_factor(A, jitter, max_tries)


def _square(A, name):
    """A as a real floating square matrix (values unchecked: a NaN shows in the factor's ok flag)."""
    A = as_real_array(A, name)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {A.shape}")
    return A if jnp.issubdtype(A.dtype, jnp.floating) else A.astype(jnp.result_type(float))


def _factor_and_rhs(L, B, name: str = "L"):
    """Checked (square matrix, right-hand side) for the solves: real, finite when concrete, matching rows."""
    L = check_finite(_square(L, name), name)
    B = as_finite_array(B, "B")
    if B.ndim not in (1, 2) or B.shape[0] != L.shape[0]:
        raise ValueError(f"B must have shape ({L.shape[0]},) or ({L.shape[0]}, k) to match {name}, got {B.shape}")
    return L, B


@partial(jax.custom_jvp, nondiff_argnums=(1, 2))
def _jittered_factor(A, jitter, max_tries):
    # one factorisation in a while_loop (a vmapped batch runs only the attempts some member needs); the
    # custom JVP differentiates the factor found instead of the loop, so the program holds one Cholesky
    attempt = _attempts(A, jitter)

    def failed(state):
        t, _, _, ok = state
        return ~ok & (t < max_tries)

    def retry(state):
        t = state[0] + 1
        return (t,) + attempt(t)

    start = (jnp.asarray(-1), jnp.zeros_like(A), jnp.zeros((), A.dtype), jnp.asarray(False))
    return lax.while_loop(failed, retry, start)[1:]


@_jittered_factor.defjvp
def _jittered_factor_jvp(jitter, max_tries, primals, tangents):
    (A,), (dA,) = primals, tangents
    L, added, ok = _jittered_factor(A, jitter, max_tries)
    # d(L L^T) = sym(dA)  =>  dL = L Phi(L^{-1} sym(dA) L^{-T}), Phi: lower triangle with half the diagonal
    inner = _lower_solve(L, _lower_solve(L, 0.5 * (dA + dA.T)).T)
    dL = L @ (jnp.tril(inner) - 0.5 * jnp.diag(jnp.diag(inner)))
    return (L, added, ok), (dL, jnp.zeros_like(added), np.zeros((), dtype=jax.dtypes.float0))


def cholesky(A, *, what: str = "A", jitter: float = 1e-10, max_tries: int = 8):
    """:func:`jittered_cholesky` that raises :class:`CholeskyError` on failure.

    Under tracing nothing can be raised: the factor comes back unchecked (traced callers use
    :func:`jittered_cholesky` and propagate its flag).

    Args:
        A: (n, n) symmetric positive definite matrix.
        what: the name error messages give A.
        jitter: the first relative jitter, > 0.
        max_tries: jittered attempts after the plain one, >= 1.

    Returns:
        (n, n) lower-triangular factor L with L L^T = A + added I.

    Raises:
        TypeError: for A not real.
        ValueError: for A not a finite square matrix.
        CholeskyError: when no finite factor was found, even with the largest jitter.
    """
    A = check_finite(_square(A, what), what)
    L, added, ok = jittered_cholesky(A, jitter=jitter, max_tries=max_tries)
    if is_concrete(ok) and not bool(ok):
        raise CholeskyError(
            f"{what} is not positive definite: Cholesky failed even with jitter "
            f"{jitter * 10.0 ** (max_tries - 1):.1e} x mean diagonal (check for NaN, duplicates or a bad kernel)"
        )
    return L


def cho_solve_psd(L, B):
    """Solve (L L^T) X = B given the lower Cholesky factor L.

    Args:
        L: (n, n) lower-triangular factor.
        B: (n,) or (n, k) right-hand side.

    Returns:
        X, the shape of B.

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for non-finite inputs, L not square or B of another number of rows.
    """
    return cho_solve_unchecked(*_factor_and_rhs(L, B))


def cho_solve_unchecked(L, B):
    """:func:`cho_solve_psd` without the argument checks, for traced code whose factor may carry a failure flag."""
    return cho_solve((L, True), B)


def logdet_from_cholesky(L):
    """log det(L L^T) = 2 sum_i log L_ii for a lower Cholesky factor.

    Args:
        L: (n, n) lower-triangular factor with positive diagonal.

    Returns:
        () array.

    Raises:
        TypeError: for L not real.
        ValueError: for L not a finite square matrix.
    """
    return logdet_unchecked(check_finite(_square(L, "L"), "L"))


def logdet_unchecked(L):
    """:func:`logdet_from_cholesky` without the argument checks (traced code with a failure flag)."""
    return 2.0 * jnp.sum(jnp.log(jnp.diag(L)))


def whiten(L, B):
    """L^{-1} B for lower-triangular L (differentiable in L and B, by triangular solves).

    Args:
        L: (n, n) lower-triangular matrix (entries above the diagonal are ignored).
        B: (n,) or (n, k) right-hand side.

    Returns:
        L^{-1} B, the shape of B.

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for non-finite inputs, L not square or B of another number of rows.
    """
    return _lower_solve(*_factor_and_rhs(L, B))


def whiten_unchecked(L, B):
    """:func:`whiten` without the argument checks (traced code with a failure flag)."""
    return _lower_solve(L, B)


def spd_solve(A, B):
    """Solve A X = B for symmetric positive definite A by a jittered Cholesky factor; compiled once per shape.

    Differentiated as a linear solve (``lax.custom_linear_solve``): the adjoint reuses the factor, so a
    gradient costs O(n^2) more per right-hand side instead of differentiating the O(n^3) factorisation.

    Args:
        A: (n, n) symmetric positive definite matrix.
        B: (n,) or (n, k) right-hand side.

    Returns:
        X = A^{-1} B, the shape of B.

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for non-finite inputs, A not square or B of another number of rows.
        CholeskyError: A is not positive definite even with jitter (called on concrete arrays; under ``jit`` the
            solution is NaN instead, for the caller to check).
    """
    A, B = _factor_and_rhs(A, B, "A")
    X, ok = _spd_solve(A, B)
    if is_concrete(ok) and not bool(ok):
        raise CholeskyError("spd_solve: A is not positive definite (Cholesky failed even with jitter)")
    return X


@jax.jit
def _spd_solve(A, B):
    L, _, ok = _jittered_factor(lax.stop_gradient(A), 1e-10, 8)
    return lax.custom_linear_solve(lambda X: A @ X, B, lambda _, R: _chol_solve(L, R), symmetric=True), ok


def _attempts(A, jitter):
    """attempt(t) -> (L, added, ok): Cholesky of sym(A) + added I, added = jitter 10^(t-1) mean(diag A) (0 at t = 0)."""
    A = 0.5 * (A + A.T)
    scale = jnp.maximum(jnp.mean(jnp.diag(A)), jnp.finfo(A.dtype).tiny)
    eye = jnp.eye(A.shape[0], dtype=A.dtype)

    def attempt(t):
        added = jnp.where(t > 0, jitter * 10.0 ** (t - 1) * scale, 0.0).astype(A.dtype)
        L = _potrf(A + added * eye)
        return L, added, jnp.all(jnp.isfinite(L))

    return attempt
