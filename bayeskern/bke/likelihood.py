"""BKE marginal pseudolikelihood: the Kronecker Gaussian term plus the log-volume term, streamed over the points or
by a fused pass (:mod:`.fused`), with the checks of its inputs."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero
from jax.flatten_util import ravel_pytree

from .._config import require_x64
from .._validation import as_points, check_positive, is_concrete, num_points, row_keys
from ..sharding import RowShards, any_process, local_rows, shard_map_rows
from ..kernels.base import Kernel
from ..kernels.stationary import RBF, RBFFull
from ..linalg import CholeskyError
from .convolved import ConvolvedSE
from .fused import _fused_form, _se_1d_pseudolikelihood, _se_narrow_pseudolikelihood, _se_wide_pseudolikelihood, \
    _narrow_inputs, _wide_inputs, one_dimensional_distances
from .kron import _kron_loglik_from_stats, kron_loglik_as_printed
from .volume import _CACHE_ENTRIES, _LAPACK_INLINE_FLOPS, _features_and_log_volume, _log_volume_points

__all__ = ["log_pseudolikelihood", "check_inducing_points"]

_CONVENTIONS = ("exact", "stan_conventions", "stan_as_printed")


def check_inducing_points(X, Z):
    """Validate inducing points against the likelihood points: distinct, none of them in X.

    Args:
        X: (n, D) likelihood points, or a :class:`~bayeskern.sharding.RowShards` (each process checks its own rows).
        Z: (m, D) inducing points.

    Returns:
        (X, Z) as float arrays (X stays a RowShards).

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for non-finite points, dimensions that differ, duplicated inducing points or inducing points
            that are points of X.
    """
    sharded = isinstance(X, RowShards)
    X = X.with_values(as_points(X.values, "X")) if sharded else as_points(X, "X")
    Z = as_points(Z, "Z")
    dim = X.values.shape[1] if sharded else X.shape[1]
    if Z.shape[1] != dim:
        raise ValueError(f"Z has dimension {Z.shape[1]} but X has dimension {dim}")
    if is_concrete((X, Z)):
        Zn = row_keys(Z)
        if len(np.unique(Zn)) < len(Zn):
            raise ValueError("Z contains duplicated inducing points; they must be distinct (general position)")
        shared = np.isin(row_keys(local_rows(X) if sharded else X), Zn).any()
        if any_process(shared) if sharded else shared:
            raise ValueError("some inducing points Z are also points of X: hold them out of the likelihood")
    return X, Z


def log_pseudolikelihood(
    X,
    Z,
    kernel: Kernel,
    tau2=1.0,
    *,
    prior_cov: Kernel | None = None,
    volume: str = "closed",
    convention: str = "exact",
):
    """The BKE marginal pseudolikelihood L(theta, tau2) (Flaxman et al. 2016, eq. 15, corrected).

    L = log N(vec K_zx; 0, 11^T (x) R_zz + tau2 I) + sum_i log gamma(x_i): the Kronecker Gaussian term in
    O(m^3 + n m) and the log-volume term sum_i (1/2) log det(J(x_i)^T J(x_i)). X is streamed in chunks (memory
    O(chunk x m), never m x n); derivatives in the kernel hyperparameters come from forward mode inside that
    pass, so gradients and Hessians are cheap. For one isotropic SE lengthscale with n m <= 2^22 (and the exact
    convention) a fused pass is used instead, equal to rounding (the forms of
    :class:`~bayeskern.bke.SEPseudolikelihood`: D = 1, m <= D and m > D). Traceable in (kernel, tau2).

    Args:
        X: (n, D) points entering the likelihood; or a :class:`~bayeskern.sharding.RowShards` (rows spread over
            devices and processes: each streams its own rows, and the sufficient statistics are merged).
        Z: (m, D) inducing points, m >= D, distinct and none of them in X.
        kernel: the embedding kernel k_theta.
        tau2: noise variance tau^2 > 0.
        prior_cov: the prior covariance r_theta (default ``ConvolvedSE(kernel)`` with Lebesgue measure; required
            for kernels other than the squared exponential).
        volume: ``"closed"`` (SE kernels, log-space closed form) or ``"autodiff"`` (any differentiable kernel).
        convention: ``"exact"`` (default); ``"stan_conventions"`` (unit-scale r and the volume term of the
            paper's Stan program) or ``"stan_as_printed"`` (also the literal Appendix B likelihood,
            :func:`kron_loglik_as_printed`; 1-D, reproduction only).

    Returns:
        Scalar array, the log pseudolikelihood.

    Raises:
        ValueError: for an unknown convention, invalid inducing points, tau2 <= 0, a non-SE kernel without
            ``prior_cov``, or points of X whose volume term is -inf (differences to Z linearly dependent).
        CholeskyError: when R_zz + (tau2 / n) I cannot be factorised even with jitter.
        RuntimeError: when float64 is off.
    """
    require_x64("log_pseudolikelihood")
    if convention not in _CONVENTIONS:
        raise ValueError(f"convention must be one of {_CONVENTIONS}, got {convention!r}")
    X, Z = check_inducing_points(X, Z)
    if isinstance(X, RowShards) and convention == "stan_as_printed":
        raise ValueError("convention='stan_as_printed' forms K_zx whole: pass X on one process, not a RowShards")
    check_positive(tau2, "tau2")
    if prior_cov is None:
        if not isinstance(kernel, (RBF, RBFFull)):
            raise ValueError(f"prior_cov (r_theta) is required for a non-SE kernel {type(kernel).__name__}")
        prior_cov = ConvolvedSE(kernel, r_scale="exact" if convention == "exact" else "unit")
    value = _log_pseudolikelihood(kernel, prior_cov, X, Z, tau2, volume, convention, True)
    if is_concrete(value) and not np.isfinite(float(value)):
        if not isinstance(X, RowShards):
            flat = ~np.isfinite(np.asarray(_log_volume_points(X, Z, kernel, volume, "exact")))
            if flat.any():
                raise ValueError(f"{int(flat.sum())} points of X (the first: row {int(np.argmax(flat))}) have a volume "
                                 "term of -inf: their differences to the inducing points Z are linearly dependent, "
                                 "so det(J J^T) = 0; hold them out of X, choose other inducing points, or use "
                                 "SEPseudolikelihood with an isotropic lengthscale (its m x m form takes a "
                                 "pseudo-determinant)")
        raise CholeskyError("R_zz + tau2/n I is not positive definite even with jitter (check Z and the lengthscale)")
    return value


_CHUNK_ENTRIES = 1 << 18  # points per chunk x m: a chunk of K_zx is at most 2 MiB in float64


@partial(jax.custom_jvp, nondiff_argnums=(3, 4, 5))
def _streamed_statistics(kernel, X, Z, volume, volume_convention, with_volume):
    """One pass over X in chunks: feature mean mu (m,), centred sum of squares e2, sum_i log gamma(x_i).

    Only a (chunk, m) block of K_zx exists at a time; chunk means and centred sums of squares are merged
    by Chan's parallel formula, which stays accurate where sum k^2 - n |mu|^2 would cancel. Derivatives
    in the kernel hyperparameters (a handful of numbers) are taken by forward mode inside the same pass,
    so reverse mode stores an (m + 2) x p Jacobian instead of recomputing or storing the chunks.
    """
    return _stream(kernel, X, Z, volume, volume_convention, with_volume)


def _streamed_statistics_jvp(volume, volume_convention, with_volume, primals, tangents):
    kernel, X, Z = primals
    t_kernel, t_X, t_Z = tangents
    stream = partial(_stream, volume=volume, volume_convention=volume_convention, with_volume=with_volume)

    def zero(t):
        return all(isinstance(leaf, SymbolicZero) for leaf in jax.tree.leaves(t, is_leaf=_is_zero))

    if not (zero(t_X) and zero(t_Z)):  # the data move too: plain JVP
        def dense(t):
            return jax.tree.map(lambda t: jnp.zeros(t.shape, t.dtype) if _is_zero(t) else t, t, is_leaf=_is_zero)

        return jax.jvp(stream, (kernel, X, Z), (dense(t_kernel), dense(t_X), dense(t_Z)))
    theta, unravel = ravel_pytree(kernel)
    t_leaves = jax.tree.leaves(t_kernel, is_leaf=lambda t: isinstance(t, SymbolicZero))
    t_theta = jnp.concatenate([jnp.zeros(t.shape, t.dtype).ravel() if isinstance(t, SymbolicZero) else jnp.ravel(t)
                               for t in t_leaves]) if t_leaves else jnp.zeros(0, theta.dtype)
    out, jacobian = jax.vmap(lambda d: jax.jvp(lambda th: stream(unravel(th), X, Z), (theta,), (d,)),
                             out_axes=(None, -1))(jnp.eye(theta.size, dtype=theta.dtype))
    return out, jax.tree.map(lambda J: J @ t_theta, jacobian)


_streamed_statistics.defjvp(_streamed_statistics_jvp, symbolic_zeros=True)


def _is_zero(t):
    return isinstance(t, SymbolicZero)


def _stream(kernel, X, Z, volume, volume_convention, with_volume):
    """(mu, e2, sum log gamma) over the real rows of X (plain or RowShards): chunk statistics merged by Chan's
    formula; a RowShards streams each shard on its device and merges the chunks of all shards."""
    if isinstance(X, RowShards):
        def local(x, keep, k, z):
            return _chunk_statistics(k, x, keep, z, volume, volume_convention, with_volume)

        chunks = shard_map_rows(local, 2, X.mesh, True)(X.values, X.mask, kernel, Z)
    else:
        chunks = _chunk_statistics(kernel, X, jnp.ones(X.shape[0], bool), Z, volume, volume_convention, with_volume)
    counts, means, m2s, lvs = chunks
    n = num_points(X)
    mu = (counts @ means) / n
    e2 = jnp.sum(m2s) + jnp.sum(counts * jnp.sum((means - mu) ** 2, axis=1))
    return mu, e2, jnp.sum(lvs)


def _chunk_size(n, m, dim, with_volume):
    """Rows of X per chunk: the (size, m, D) differences stay small, and with the log-volume of the m x m side
    (m <= D) the batched QRs stay under jaxlib's inline size."""
    size = max(1, min(n, _CHUNK_ENTRIES // (m * max(1, dim // 16))))
    if with_volume and 1 < m <= dim:   # the QR of the m x m side (m > D takes no LAPACK call)
        size = max(1, min(size, _LAPACK_INLINE_FLOPS // (2 * dim * m * m)))
    elif with_volume and dim > 1:
        size = max(1, min(size, _CACHE_ENTRIES // (m * dim)))
    return size


def _chunk_statistics(kernel, X, keep, Z, volume, volume_convention, with_volume):
    """Per chunk of rows of X (where ``keep``): counts, feature means (chunks, m), centred sums of squares and
    log-volume sums."""
    n, dim = X.shape
    size = _chunk_size(n, Z.shape[0], dim, with_volume)
    chunks = -(-n // size)
    padded = jnp.concatenate([X, jnp.broadcast_to(X[:1], (chunks * size - n, dim))])
    valid = jnp.concatenate([keep, jnp.zeros(chunks * size - n, bool)]).reshape(chunks, size)

    @jax.checkpoint  # matters only when X or Z are differentiated (reverse mode through the plain pass)
    def chunk(args):
        Xc, keep = args
        w = keep.astype(X.dtype)
        K, lv = _features_and_log_volume(Xc, Z, kernel, volume, volume_convention, with_volume)  # (size, m), (size,)
        count = jnp.sum(w)
        mean = (w @ K) / jnp.maximum(count, 1.0)
        m2 = jnp.sum(w[:, None] * (K - mean) ** 2)
        return count, mean, m2, jnp.sum(jnp.where(keep, lv, 0.0))

    return jax.lax.map(chunk, (padded.reshape(chunks, size, dim), valid))


def _log_pseudolikelihood(kernel, prior_cov, X, Z, tau2, volume, convention, with_volume, distances=None):
    """L for checked inputs; a fused form where it applies (decided here, where the prior covariance is known to be
    built on this very kernel: inside the compiled function the two are separate copies)."""
    fused = _fused_form(kernel, prior_cov, X, Z, volume, convention, with_volume)
    return _compiled_log_pseudolikelihood(kernel, prior_cov, X, Z, tau2, volume, convention, with_volume, fused,
                                          distances)


@partial(jax.jit, static_argnames=("volume", "convention", "with_volume", "fused"))
def _compiled_log_pseudolikelihood(kernel, prior_cov, X, Z, tau2, volume, convention, with_volume, fused, distances):
    lengthscale = jnp.reshape(kernel.lengthscale, ()) if fused else None
    if fused == "one_dimensional":
        d2, d2min = one_dimensional_distances(X, Z) if distances is None else distances
        return _se_1d_pseudolikelihood(lengthscale, d2, d2min, Z[:, 0], jnp.asarray(tau2))
    if fused == "wide":
        d2, dz2, constant = _wide_inputs(X, Z) if distances is None else distances
        return _se_wide_pseudolikelihood(lengthscale, d2, dz2, constant, jnp.asarray(tau2), X.shape[1])
    if fused == "narrow":
        inputs = _narrow_inputs(X, Z) if distances is None else distances
        return _se_narrow_pseudolikelihood(lengthscale, *inputs, jnp.asarray(tau2), X.shape[1])
    Rzz = prior_cov.evaluate(Z, Z)
    volume_convention = "exact" if convention == "exact" else "stan"
    if convention == "stan_as_printed":
        gaussian = kron_loglik_as_printed(kernel.evaluate(Z, X), Rzz, tau2)
        lv = jnp.sum(_log_volume_points(X, Z, kernel, volume, volume_convention)) if with_volume else 0.0
        return gaussian + lv
    mu, e2, lv = _streamed_statistics(kernel, X, Z, volume, volume_convention, with_volume)
    return _kron_loglik_from_stats(mu, e2, num_points(X), Rzz, tau2) + lv
