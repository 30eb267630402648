"""Kernel Bayes' rule weights: CME, KuLSIF ratios, original and importance-weighted KBR.

Every posterior embedding is a weighted sum of training features, m = sum_i w_i phi(z_i); the
functions here return the weights W (n, q), one column per conditioning point. Regularisers are in
operator scale by default (they multiply the identity next to 1/n-normalised covariance operators, so
Gram systems carry n lam, n^2 lam or n eta): ``reg_scale="gram"`` inserts the value verbatim in the Gram-matrix
system instead (the values printed in Xu et al. 2022, Algorithm 1).
All functions are pure and jit/vmap/grad-friendly; solves use Cholesky or eigh, never inverses.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .._config import require_x64
from .._validation import as_matrix, as_points, check_positive
from ..linalg import spd_solve

__all__ = ["Prior", "KBRWeights", "gram_coefficient", "kulsif_gamma", "kulsif_ratio", "cme_weights",
           "gram_factor", "kbr_original_weights", "kbr_iw_weights", "kbr_iw_weights_features"]

_REG_SCALES = ("operator", "gram")
_ZERO_WEIGHT_POLICIES = ("cme", "prior", "zeros")


class Prior(NamedTuple):
    """A prior embedding sum_j weights_j phi(atoms_j).

    Attributes:
        atoms: (m, d_z) the prior's atoms.
        weights: (m,) their weights.
    """

    atoms: jax.Array
    weights: jax.Array

    @classmethod
    def from_samples(cls, U) -> "Prior":
        """The empirical prior of i.i.d. samples: weights 1/m.

        Args:
            U: (m, d_z) samples of the prior.

        Returns:
            Prior: atoms U with weights 1/m.

        Raises:
            TypeError: for samples that are not real numbers.
            ValueError: for non-finite or empty samples.
        """
        U = as_points(U, "U")
        return cls(U, jnp.full(U.shape[0], 1.0 / U.shape[0], dtype=U.dtype))


class KBRWeights(NamedTuple):
    """Posterior weights of a KBR update, with the flag of a degenerate prior.

    Attributes:
        weights: (n, q) posterior weights on the n training atoms, one column per conditioning point.
        degenerate: () bool, True when every ratio was zero (truncated to zero for IW, gamma = 0 for the
            original KBR) and ``zero_weight_policy`` decided the weights.
    """

    weights: jax.Array
    degenerate: jax.Array


def gram_coefficient(value, n: int, power: int, reg_scale: str, name: str):
    """The coefficient of I in the Gram system: n^power * value (operator scale) or value itself (gram).

    Every KBR solve goes through here, which also refuses to run with float64 disabled.
    """
    require_x64("kernel Bayes' rule")
    if reg_scale not in _REG_SCALES:
        raise ValueError(f"reg_scale must be one of {_REG_SCALES}, got {reg_scale!r}")
    check_positive(value, name)
    return value * n**power if reg_scale == "operator" else value


def kulsif_gamma(G_Z, g_prior, eta, *, reg_scale: str = "operator"):
    """KuLSIF ratio values at the data, gamma = n (G_Z + n eta I)^{-1} g_prior, untruncated.

    gamma_i approximates pi(z_i) / p(z_i): O(1), sums to about n, may be negative.

    Args:
        G_Z: (n, n) latent Gram matrix.
        g_prior: (n,) the prior embedding at the data, K_ZU alpha.
        eta: KuLSIF ridge > 0.
        reg_scale: ``"operator"`` (the system holds n eta) or ``"gram"`` (eta inserted verbatim).

    Returns:
        (n,) array gamma.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs, shapes that do not match, a ridge that is not positive or an unknown
            reg_scale.
        RuntimeError: when float64 is off.
    """
    G_Z = as_matrix(G_Z, "G_Z", square=True)
    n = G_Z.shape[0]
    g_prior = as_matrix(g_prior, "g_prior", (n,))
    c = gram_coefficient(eta, n, 1, reg_scale, "eta")
    return n * spd_solve(G_Z + c * jnp.eye(n, dtype=G_Z.dtype), g_prior)


def kulsif_ratio(K_zZ, K_zU, alpha, gamma, eta, *, reg_scale: str = "operator"):
    """The KuLSIF ratio r~(z) = (m_prior(z) - sum_k gamma_k k_Z(z_k, z) / n) / eta at new points.

    Equals gamma_i at z = z_i.

    Args:
        K_zZ: (q, n) k_Z(z, z_i).
        K_zU: (q, m) k_Z(z, u_j).
        alpha: (m,) prior weights.
        gamma: (n,) from :func:`kulsif_gamma` with the same eta.
        eta: KuLSIF ridge > 0.
        reg_scale: ``"operator"`` or ``"gram"``.

    Returns:
        (q,) array.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs, shapes that do not match, a ridge that is not positive or an unknown
            reg_scale.
        RuntimeError: when float64 is off.
    """
    K_zZ = as_matrix(K_zZ, "K_zZ")
    K_zU = as_matrix(K_zU, "K_zU", (K_zZ.shape[0], None))
    alpha = as_matrix(alpha, "alpha", (K_zU.shape[1],))
    gamma = as_matrix(gamma, "gamma", (K_zZ.shape[1],))
    n = K_zZ.shape[1]
    eta_op = gram_coefficient(eta, n, 1, reg_scale, "eta") / n
    return (K_zU @ alpha - K_zZ @ gamma / n) / eta_op


def cme_weights(G_X, G_Xq, lam, *, reg_scale: str = "operator"):
    """Conditional mean embedding weights (G_X + n lam I)^{-1} G_Xq: the posterior embedding when the prior is the
    data marginal P(Z).

    Args:
        G_X: (n, n) observation Gram matrix of the training pairs.
        G_Xq: (n, q) cross-Gram between training and conditioning observations.
        lam: ridge > 0.
        reg_scale: ``"operator"`` (the system holds n lam) or ``"gram"``.

    Returns:
        (n, q) array.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs, shapes that do not match, a ridge that is not positive or an unknown
            reg_scale.
        RuntimeError: when float64 is off.
        CholeskyError: when the system cannot be factorised.
    """
    G_X, G_Xq = _grams(G_X, G_Xq)
    n = G_X.shape[0]
    c = gram_coefficient(lam, n, 1, reg_scale, "lam")
    return spd_solve(G_X + c * jnp.eye(n, dtype=G_X.dtype), G_Xq)


def _grams(G_X, G_Xq):
    """The (n, n) Gram and (n, q) cross-Gram matrices of a weight computation, checked and in float64."""
    G_X = as_matrix(G_X, "G_X", square=True)
    return G_X, as_matrix(G_Xq, "G_Xq", (G_X.shape[0], None))


def gram_factor(G, *, rtol: float = 1e-12):
    """A factor L with G = L L^T from eigh, dropping eigenvalues below rtol * max.

    Concrete G: the dropped columns are removed (p <= n, O(n p^2) KBR updates). Under tracing the
    shape must stay static, so the dropped columns are zeroed instead (same weights).

    Args:
        G: (n, n) symmetric positive semidefinite matrix.
        rtol: relative eigenvalue cut-off.

    Returns:
        (n, p) array (p = n under tracing).

    Raises:
        TypeError: for G not real.
        ValueError: for G not a finite square matrix.
    """
    G = as_matrix(G, "G", square=True)
    s, U = jnp.linalg.eigh(0.5 * (G + G.T))
    keep = s > rtol * jnp.max(s)
    L = U * jnp.sqrt(jnp.where(keep, s, 0.0))
    if isinstance(keep, jax.core.Tracer):
        return L
    return L[:, keep]


def kbr_original_weights(G_X, gamma, G_Xq, lam, *, reg_scale: str = "operator", solver: str = "eigh", factor=None,
                         zero_weight_policy: str = "cme", prior_weights=None) -> KBRWeights:
    """Original KBR (Fukumizu, Song & Gretton 2013): W = Gamma G_X ((Gamma G_X)^2 + n^2 lam I)^{-1} Gamma G_Xq.

    Computed in the symmetric form W = Gamma L (C^2 + n^2 lam I)^{-1} L^T Gamma G_Xq with C = L^T Gamma L and
    G_X = L L^T (eigenvalues below 1e-12 max dropped), O(n p^2) per prior. An all-zero gamma (a prior with no mass
    on the training atoms) would make every weight zero; it is flagged and handled by ``zero_weight_policy`` like
    the truncated ratios of :func:`kbr_iw_weights`.

    Args:
        G_X: (n, n) observation Gram matrix of the training pairs (unused, may be None, when ``factor`` is given).
        gamma: (n,) untruncated KuLSIF values of the prior (:func:`kulsif_gamma`); may be negative.
        G_Xq: (n, q) cross-Gram between training and conditioning observations.
        lam: ridge > 0 (operator scale: the system holds n^2 lam).
        reg_scale: ``"operator"`` or ``"gram"`` (lam inserted verbatim).
        solver: ``"eigh"`` (default, robust to the squared condition number) or ``"cholesky"`` (a jittered SPD
            solve of C^2 + n^2 lam I; cheaper, less accurate when lam is tiny).
        factor: a precomputed (n, p) factor L with G_X = L L^T (from :func:`gram_factor`, or observation features).
        zero_weight_policy: what happens when gamma is all zero: ``"cme"`` (gamma = 1, the data marginal as
            prior), ``"prior"`` (``prior_weights`` unchanged) or ``"zeros"``.
        prior_weights: (n,) prior weights on the training atoms, for ``zero_weight_policy="prior"``.

    Returns:
        KBRWeights: ``weights`` (n, q) and the flag ``degenerate`` (gamma was all zero).

    Raises:
        ValueError: for lam <= 0, an unknown reg_scale, solver or policy, or ``"prior"`` without prior weights.
        RuntimeError: when float64 is off.
    """
    gamma = as_matrix(gamma, "gamma", (None,))
    n = gamma.shape[0]
    G_Xq = as_matrix(G_Xq, "G_Xq", (n, None))
    c = gram_coefficient(lam, n, 2, reg_scale, "lam")
    gamma, degenerate = _zero_weight_policy(gamma, prior_weights, zero_weight_policy)
    L = gram_factor(G_X) if factor is None else as_matrix(factor, "factor", (n, None))
    Lg = L * gamma[:, None]  # Gamma L
    C = L.T @ Lg
    rhs = Lg.T @ G_Xq  # L^T Gamma g
    if solver == "eigh":
        mu, V = jnp.linalg.eigh(0.5 * (C + C.T))
        y = V @ ((V.T @ rhs) / (mu**2 + c)[:, None])
    elif solver == "cholesky":
        y = spd_solve(C @ C + c * jnp.eye(C.shape[0], dtype=C.dtype), rhs)
    else:
        raise ValueError(f"solver must be 'eigh' or 'cholesky', got {solver!r}")
    return KBRWeights(_finish(Lg @ y, degenerate, prior_weights, zero_weight_policy), degenerate)


def _safe_sqrt(r):
    positive = r > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, r, 1.0)), 0.0)


def _truncate(gamma, smooth_truncation):
    if smooth_truncation is None:
        return jnp.maximum(gamma, 0.0)
    check_positive(smooth_truncation, "smooth_truncation")
    return smooth_truncation * jax.nn.softplus(gamma / smooth_truncation)


def _zero_weight_policy(r, prior_weights, policy):
    """(ratios to use, degenerate flag): all-zero ratios r (n,) fall back as ``zero_weight_policy`` says."""
    if policy not in _ZERO_WEIGHT_POLICIES:
        raise ValueError(f"zero_weight_policy must be one of {_ZERO_WEIGHT_POLICIES}, got {policy!r}")
    if policy == "prior":
        if prior_weights is None:
            raise ValueError("zero_weight_policy='prior' needs prior_weights (n,) on the training atoms")
        prior_weights = as_matrix(prior_weights, "prior_weights", r.shape)
    degenerate = jnp.sum(jnp.abs(r)) < 1e-12 * r.shape[0]
    if policy == "cme":
        r = jnp.where(degenerate, jnp.ones_like(r), r)
    return r, degenerate


def _finish(W, degenerate, prior_weights, policy):
    if policy == "prior":
        return jnp.where(degenerate, prior_weights[:, None], W)
    if policy == "zeros":
        return jnp.where(degenerate, 0.0, W)
    return W


def kbr_iw_weights(G_X, gamma, G_Xq, lam, *, reg_scale: str = "operator", zero_weight_policy: str = "cme",
                   prior_weights=None, smooth_truncation=None) -> KBRWeights:
    """Importance-weighted KBR (Xu et al. 2022, Algorithm 1): posterior weights on the training atoms.

    W = sqrt(D) (sqrt(D) G_X sqrt(D) + n lam I)^{-1} sqrt(D) G_Xq with D = diag(r), r = max(0, gamma). The system
    is SPD with smallest eigenvalue >= n lam, so W is finite for any finite input and lam > 0, with
    ||w|| <= max r ||g|| / (n lam); gradients through zero ratios are 0, not NaN.

    Args:
        G_X: (n, n) observation Gram matrix of the training pairs.
        gamma: (n,) untruncated KuLSIF values of the prior (:func:`kulsif_gamma`).
        G_Xq: (n, q) cross-Gram between training and conditioning observations.
        lam: ridge > 0 (operator scale unless ``reg_scale="gram"``).
        reg_scale: ``"operator"`` (the system holds n lam) or ``"gram"`` (lam inserted verbatim).
        zero_weight_policy: what happens when every r_i is 0: ``"cme"`` (plain CME weights), ``"prior"``
            (``prior_weights`` unchanged) or ``"zeros"``.
        prior_weights: (n,) prior weights on the training atoms, for ``zero_weight_policy="prior"``.
        smooth_truncation: replace max(0, gamma) by t softplus(gamma / t) with this t (smooth gradients).

    Returns:
        KBRWeights: ``weights`` (n, q) and the flag ``degenerate`` (all ratios truncated to zero).

    Raises:
        ValueError: for lam <= 0, an unknown reg_scale or policy, or ``"prior"`` without prior weights.
        RuntimeError: when float64 is off.
    """
    G_X, G_Xq = _grams(G_X, G_Xq)
    n = G_X.shape[0]
    gamma = as_matrix(gamma, "gamma", (n,))
    c = gram_coefficient(lam, n, 1, reg_scale, "lam")
    r, degenerate = _zero_weight_policy(_truncate(gamma, smooth_truncation), prior_weights, zero_weight_policy)
    s = _safe_sqrt(r)
    S = s[:, None] * G_X * s[None, :] + c * jnp.eye(n, dtype=G_X.dtype)  # SPD with eigenvalues >= c > 0
    W = s[:, None] * spd_solve(S, s[:, None] * G_Xq)
    return KBRWeights(_finish(W, degenerate, prior_weights, zero_weight_policy), degenerate)


def kbr_iw_weights_features(Psi, gamma, Psi_q, lam, *, reg_scale: str = "operator", zero_weight_policy: str = "cme",
                            prior_weights=None, smooth_truncation=None) -> KBRWeights:
    """IW-KBR with explicit observation features: W = D Psi (Psi^T D Psi + n lam I_p)^{-1} Psi_q^T, O(n p^2).

    Same truncation and zero-weight policy as :func:`kbr_iw_weights`.

    Args:
        Psi: (n, p) training features (rows psi(x_i)).
        gamma: (n,) untruncated KuLSIF values of the prior.
        Psi_q: (q, p) features of the conditioning points.
        lam: ridge > 0.
        reg_scale: ``"operator"`` or ``"gram"``.
        zero_weight_policy: ``"cme"``, ``"prior"`` or ``"zeros"`` (see :func:`kbr_iw_weights`).
        prior_weights: (n,) prior weights for ``"prior"``.
        smooth_truncation: replace max(0, gamma) by t softplus(gamma / t) with this t.

    Returns:
        KBRWeights: ``weights`` (n, q) and the flag ``degenerate``.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs, shapes that do not match, a ridge that is not positive or an unknown
            reg_scale.
        RuntimeError: when float64 is off.
    """
    Psi = as_matrix(Psi, "Psi")
    n, p = Psi.shape
    gamma, Psi_q = as_matrix(gamma, "gamma", (n,)), as_matrix(Psi_q, "Psi_q", (None, p))
    c = gram_coefficient(lam, n, 1, reg_scale, "lam")
    r, degenerate = _zero_weight_policy(_truncate(gamma, smooth_truncation), prior_weights, zero_weight_policy)
    DPsi = r[:, None] * Psi
    W = DPsi @ spd_solve(Psi.T @ DPsi + c * jnp.eye(p, dtype=Psi.dtype), Psi_q.T)
    return KBRWeights(_finish(W, degenerate, prior_weights, zero_weight_policy), degenerate)
