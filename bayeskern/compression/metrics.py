"""Discrepancies between labelled samples: JMMD^2, plug-in AMCMD^2, tower KCD^2."""

import jax
import jax.numpy as jnp

from .._config import require_x64
from .._validation import as_matrix, as_points, check_positive, check_same_dim
from ..kernels import Indicator, TensorProduct, kernel_sum
from ..kernels.base import Kernel
from ..mmd import mmd2_biased
from ._inputs import check_lambda, labelled
from .kcme import kcme_weights
from .objectives import ackip_objective, data_blocks, jkip_objective

__all__ = ["jmmd2", "amcmd2", "amcmd", "kcd2_tower", "amcmd2_gaussian_truth", "mmd2_biased"]


def _pair(sample, kernel_y, name):
    if not isinstance(sample, (tuple, list)) or len(sample) != 2:
        raise ValueError(f"{name} must be a pair (x, y) of aligned arrays")
    kind = "indicator" if isinstance(kernel_y, Indicator) else "continuous"
    return labelled(*sample, kind, names=(f"{name}[0]", f"{name}[1]"))


def _two_pairs(first, second, kernel_y, names):
    """Both samples as pairs, with x of the same dimension in both and y too."""
    (x, y), (u, v) = _pair(first, kernel_y, names[0]), _pair(second, kernel_y, names[1])
    check_same_dim(x, u, f"{names[0]}[0] and {names[1]}[0]")
    check_same_dim(y, v, f"{names[0]}[1] and {names[1]}[1]")
    return x, y, u, v


def jmmd2(data, cset, kernel_x: Kernel, kernel_y: Kernel, *, block_size: int = 1024):
    """JMMD^2 between the empirical laws of a data set and a compressed set: the MMD with kernel k(x, x') l(y, y').

    The data-data term costs O(n^2) time but is streamed in blocks (memory O(block_size^2)).

    Args:
        data: ``(x, y)`` with x (n, d_x) and y (n, d_y) or (n,) labels.
        cset: ``(cx, cy)`` of m pairs, in the same units as ``data``.
        kernel_x: kernel on x.
        kernel_y: kernel on y.
        block_size: rows per block.

    Returns:
        Scalar array, the squared discrepancy (>= 0 up to rounding).

    Raises:
        ValueError: for unpaired, non-finite or dimension-mismatched inputs.
    """
    x, y, cx, cy = _two_pairs(data, cset, kernel_y, ("data", "cset"))
    const = kernel_sum(TensorProduct(kernel_x, kernel_y), (x, y), block_size=block_size) / x.shape[0] ** 2
    return const + jkip_objective(cx, cy, data_blocks(x, y, block_size), kernel_x, kernel_y)


def amcmd2(p_sample, q_sample, nu_sample, kernel_x: Kernel, kernel_y: Kernel, lam_p, lam_q):
    """Plug-in AMCMD^2 between two conditional laws: E_{x ~ nu} ||mu^P_{Y|x} - mu^Q_{Y|x}||^2.

    Both conditional mean embeddings are estimated with ridge (sample size) x lam; the average over nu is taken
    on the nu-sample. Evaluated as sum((G D) o D) / N with D = [B_P; -B_Q] and the joint response Gram G (PSD), so
    it is >= 0 up to rounding (the raw value is returned, never clamped). Cost O(n^3 + m^3 + (n + m)^2 N).

    Args:
        p_sample: ``(x, y)`` of n pairs from P.
        q_sample: ``(x', y')`` of m pairs from Q.
        nu_sample: (N, d_x) points of the averaging law nu.
        kernel_x: kernel on x.
        kernel_y: kernel on y.
        lam_p: ridge > 0 of P's embedding.
        lam_q: ridge > 0 of Q's embedding.

    Returns:
        Scalar array, the squared discrepancy.

    Raises:
        ValueError: for unpaired, non-finite or dimension-mismatched inputs, or non-positive ridges.
        RuntimeError: when float64 is off.
    """
    require_x64("amcmd2")
    x, y, xq, yq = _two_pairs(p_sample, q_sample, kernel_y, ("p_sample", "q_sample"))
    z = as_points(nu_sample, "nu_sample")
    check_same_dim(x, z, "p_sample[0] and nu_sample")
    lam_p, lam_q = check_lambda(lam_p, "lam_p"), check_lambda(lam_q, "lam_q")
    B_p, B_q = kcme_weights(x, z, kernel_x, lam_p), kcme_weights(xq, z, kernel_x, lam_q)
    return _stacked_quadratic(kernel_y, y, yq, B_p, B_q)


@jax.jit
def _stacked_quadratic(kernel_y, y, yq, B_p, B_q):
    D = jnp.concatenate([B_p, -B_q])
    Y = jnp.concatenate([y, yq])
    return jnp.sum((kernel_y.evaluate(Y, Y) @ D) * D) / D.shape[1]


def amcmd(p_sample, q_sample, nu_sample, kernel_x: Kernel, kernel_y: Kernel, lam_p, lam_q):
    """sqrt(max(AMCMD^2, 0)) of :func:`amcmd2`, a metric on conditional families (Broadbent et al. 2025, Thm 4.1).

    Args:
        p_sample: ``(x, y)`` of n pairs from P.
        q_sample: ``(x', y')`` of m pairs from Q.
        nu_sample: (N, d_x) points of the averaging law nu.
        kernel_x: kernel on x.
        kernel_y: kernel on y.
        lam_p: ridge > 0 of P's embedding.
        lam_q: ridge > 0 of Q's embedding.

    Returns:
        Scalar array >= 0.

    Raises:
        ValueError: for unpaired, non-finite or dimension-mismatched inputs, or non-positive ridges.
        RuntimeError: when float64 is off.
    """
    return jnp.sqrt(jnp.maximum(amcmd2(p_sample, q_sample, nu_sample, kernel_x, kernel_y, lam_p, lam_q), 0.0))


def kcd2_tower(data, cset, kernel_x: Kernel, kernel_y: Kernel, lam_c, lam_p=None, *, block_size: int = 1024):
    """In-sample tower estimate of KCD^2 = AMCMD^2(data, cset; data features): F(C), plus c_hat with ``lam_p``.

    Without ``lam_p`` this is the ACKIP/ACKH objective F(C) itself (linear in n). c_hat, the mean squared norm of
    the full-data embedding at the data, costs O(n^3) and is for reporting only; the tower estimate is not a
    squared norm and may be slightly negative.

    Args:
        data: ``(x, y)`` of n pairs.
        cset: ``(cx, cy)`` of m pairs, in the same units.
        kernel_x: kernel on x.
        kernel_y: kernel on y.
        lam_c: ridge > 0 of the compressed set's embedding.
        lam_p: ridge > 0 of the full-data embedding; adds c_hat.
        block_size: rows per block.

    Returns:
        Scalar array.

    Raises:
        ValueError: for unpaired, non-finite or dimension-mismatched inputs, or non-positive ridges.
        RuntimeError: when float64 is off.
    """
    require_x64("kcd2_tower")
    x, y, cx, cy = _two_pairs(data, cset, kernel_y, ("data", "cset"))
    lam_c = check_lambda(lam_c, "lam_c")
    F = _ackip(cx, cy, data_blocks(x, y, block_size), kernel_x, kernel_y, lam_c)
    if lam_p is None:
        return F
    B = kcme_weights(x, x, kernel_x, lam_p)
    return F + jnp.sum((kernel_y.gram(y) @ B) * B) / x.shape[0]


_ackip = jax.jit(ackip_objective)


def amcmd2_gaussian_truth(cset, kernel_x: Kernel, kernel_y, lam_c, nodes, weights, mean, sd):
    """AMCMD^2(P, C; nu) against a true family Y | x ~ N(mean(x), sd(x)^2) (scalar Y, RBF ``kernel_y``), by
    quadrature over nu: ``nodes`` (Q, d_x) with ``weights`` (Q,) summing to 1, ``mean`` and ``sd`` (Q,) there.

    Uses the per-x Gaussian integrals E l(y~, Y) = l_y / sqrt(l_y^2 + s^2) exp(-(y~ - f)^2 / (2 (l_y^2 + s^2)))
    and E l(Y, Y') = l_y / sqrt(l_y^2 + 2 s^2). All quantities in the kernels' (standardised) units.

    Args:
        cset: ``(cx, cy)`` the compressed set, m pairs with scalar responses.
        kernel_x: kernel on x.
        kernel_y: an RBF kernel on the scalar y.
        lam_c: ridge > 0 of the set's embedding.
        nodes: (Q, d_x) quadrature nodes of nu.
        weights: (Q,) quadrature weights summing to 1.
        mean: (Q,) true conditional means at the nodes.
        sd: (Q,) true conditional standard deviations, > 0.

    Returns:
        Scalar array, the squared discrepancy.

    Raises:
        ValueError: for non-finite inputs, arrays of mismatched lengths, sd not positive or lam_c not positive.
        RuntimeError: when float64 is off.
    """
    cx, cy = _pair(cset, kernel_y, "cset")
    nodes = as_points(nodes, "nodes")
    q = (nodes.shape[0],)
    weights, mean, sd = as_matrix(weights, "weights", q), as_matrix(mean, "mean", q), as_matrix(sd, "sd", q)
    check_positive(sd, "sd")
    ell2 = jnp.asarray(kernel_y.lengthscale) ** 2
    alpha = kcme_weights(cx, nodes, kernel_x, lam_c)
    var = ell2 + jnp.asarray(sd) ** 2
    m_vec = jnp.sqrt(ell2 / var) * jnp.exp(-((cy[:, :1] - jnp.asarray(mean)[None]) ** 2) / (2 * var))
    self_term = jnp.sqrt(ell2 / (ell2 + 2 * jnp.asarray(sd) ** 2))
    per_x = self_term - 2 * jnp.sum(alpha * m_vec, 0) + jnp.sum(alpha * (kernel_y.gram(cy) @ alpha), 0)
    return jnp.sum(jnp.asarray(weights) * per_x)
