"""Closed-form paired leave-one-out score of KuLSIF for choosing eta."""

import jax
import jax.numpy as jnp
import numpy as np

from .._config import require_x64
from .._validation import as_finite_array, as_matrix, as_points, check_count, check_positive

__all__ = ["kulsif_loo_score", "kulsif_loo_score_atoms_are_data", "successor_priors", "select_eta_loo"]

_ALPHA_GUARD = 0.1  # pairs with 1 - alpha_i < 0.1 are excluded from the score


def _resolvent(G, c):
    """B = (G + c I)^{-1} through eigh (only its diagonal and products are used): (n, n)."""
    s, V = jnp.linalg.eigh(0.5 * (G + G.T))
    return (V / (s + c)) @ V.T


def kulsif_loo_score(G_Z, K_ZU, K_UU, alpha, eta):
    """Paired LOO of KuLSIF for a general prior (U, alpha): remove z_i and u_i, refit, score (operator-scale eta).

    Pairs i = 1..min(n, m) in the given order (shuffle the atoms first). Smaller is better: the held-out
    J(r) = E_P[r^2] / 2 - E_pi[r].

    Args:
        G_Z: (n, n) Gram matrix of the data atoms.
        K_ZU: (n, m) cross-kernel between data and prior atoms.
        K_UU: (m, m) Gram matrix of the prior atoms.
        alpha: (m,) prior weights.
        eta: KuLSIF ridge > 0 (operator scale).

    Returns:
        () array, the score.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs, shapes that do not match or eta not positive.
        RuntimeError: when float64 is off.
    """
    require_x64("kulsif_loo_score")
    G_Z = as_matrix(G_Z, "G_Z", square=True)
    K_ZU = as_matrix(K_ZU, "K_ZU", (G_Z.shape[0], None))
    K_UU = as_matrix(K_UU, "K_UU", (K_ZU.shape[1], K_ZU.shape[1]))
    alpha = as_matrix(alpha, "alpha", (K_ZU.shape[1],))
    check_positive(eta, "eta")
    n, m = K_ZU.shape
    L = min(n, m)
    c = (n - 1) * eta
    B = _resolvent(G_Z, c)
    BK = B @ K_ZU  # (n, m)
    h = K_ZU @ alpha
    Bh = B @ h
    a = alpha[:L]
    idx = jnp.arange(L)
    bii, bk_ii = jnp.diag(B)[:L], BK[idx, idx]
    Bb_i = (Bh[:L] - a * bk_ii) / (1 - a)  # (B b^(i))_i
    kBb = (K_ZU[:, :L].T @ Bh - a * jnp.sum(K_ZU[:, :L] * BK[:, :L], axis=0)) / (1 - a)  # k_i^T B b^(i)
    q = K_UU @ alpha
    rho = Bb_i / (eta * bii)
    nu = ((q[:L] - a * jnp.diag(K_UU)[:L]) / (1 - a) - kBb + bk_ii * Bb_i / bii) / eta
    return _score(rho, nu, a)


def _score(rho, nu, a):
    use = (1 - a) >= _ALPHA_GUARD
    count = jnp.maximum(jnp.sum(use), 1)
    return 0.5 * jnp.sum(jnp.where(use, rho**2, 0.0)) / count - jnp.sum(jnp.where(use, a * nu, 0.0)) / jnp.sum(
        jnp.where(use, a, 0.0))


def kulsif_loo_score_atoms_are_data(eig_G, alphas, eta):
    """Paired LOO when the prior atoms are the data (U = Z, the filter case), for one or more priors.

    O(n^2) per prior and eta.

    Args:
        eig_G: (s, V), the eigenvalues (n,) and eigenvectors (n, n) of G_Z from ``jnp.linalg.eigh``.
        alphas: (n,) or (S, n) prior weights on the atoms.
        eta: KuLSIF ridge > 0 (operator scale).

    Returns:
        The score per prior: () or (S,).

    Raises:
        TypeError: for alphas that are not real numbers.
        ValueError: for non-finite alphas or alphas of another length than the atoms.
        RuntimeError: when float64 is off.
    """
    require_x64("kulsif_loo_score_atoms_are_data")
    s, V = eig_G
    alphas = as_finite_array(alphas, "alphas")
    if alphas.ndim not in (1, 2) or alphas.shape[-1] != V.shape[0]:
        raise ValueError(f"alphas must have shape ({V.shape[0]},) or (S, {V.shape[0]}) to match G_Z, got {alphas.shape}")
    return _atoms_are_data_scores(s, V, alphas, eta)


@jax.jit
def _atoms_are_data_scores(s, V, alphas, eta):
    n = V.shape[0]
    c = (n - 1) * eta
    bii = jnp.sum(V**2 / (s + c), axis=1)
    Gs = s[:, None] * V.T  # V^T G = diag(s) V^T

    def one(alpha):
        Bh = V @ ((Gs @ alpha) / (s + c))
        rho = (Bh - alpha * (1 - c * bii)) / (eta * bii * (1 - alpha))
        return _score(rho, rho, alpha)

    return one(alphas) if alphas.ndim == 1 else jax.vmap(one)(alphas)


def successor_priors(Z, num_priors: int = 20, k: int = 10):
    """The representative priors of the filter's eta selection: each puts 1/k on the successors z_{i+1} of the k
    nearest previous atoms z_i (i <= T-1, ties by index) of an anchor z_j; the anchors spread over the sequence.

    Args:
        Z: (T, d) atoms, in time order.
        num_priors: S, the number of priors.
        k: neighbours per prior.

    Returns:
        (S, T) prior weights.

    Raises:
        TypeError: for atoms that are not real numbers or counts that are not integers.
        ValueError: for non-finite atoms, counts below 1 or fewer than k + 1 atoms.
    """
    Z = np.asarray(as_points(Z, "Z"))
    num_priors, k = check_count(num_priors, "num_priors"), check_count(k, "k")
    T = Z.shape[0]
    if T < k + 1:
        raise ValueError(f"successor_priors needs at least k + 1 = {k + 1} atoms, got {T}")
    anchors = np.round(np.linspace(0, T - 2, num_priors)).astype(int)
    previous = Z[: T - 1]
    out = np.zeros((num_priors, T))
    for s, j in enumerate(anchors):
        d = np.sum((previous - Z[j]) ** 2, axis=1)
        nearest = np.argsort(d, kind="stable")[:k]
        out[s, nearest + 1] = 1.0 / k
    return jax.device_put(out)


def select_eta_loo(G_Z, priors, eta_grid):
    """eta* = the argmin over the grid of the mean atoms-are-data LOO score over the priors.

    Args:
        G_Z: (T, T) Gram matrix of the atoms.
        priors: (S, T) prior weights (e.g. :func:`successor_priors`).
        eta_grid: candidate ridges > 0.

    Returns:
        (eta*, scores): the chosen ridge and the (len(eta_grid),) mean scores.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for an empty grid, ridges that are not positive, or shapes that do not match.
        RuntimeError: when float64 is off.
    """
    for eta in eta_grid:
        check_positive(eta, "eta_grid entries")
    if len(eta_grid) == 0:
        raise ValueError("eta_grid is empty: give at least one eta")
    G_Z = as_matrix(G_Z, "G_Z", square=True)
    priors = as_matrix(priors, "priors", (None, G_Z.shape[0]))
    scores = _mean_scores(G_Z, priors, np.asarray(eta_grid, float))
    return float(np.asarray(eta_grid)[int(np.argmin(np.asarray(scores)))]), scores


@jax.jit
def _mean_scores(G_Z, priors, etas):
    s, V = jnp.linalg.eigh(0.5 * (G_Z + G_Z.T))
    return jax.vmap(lambda eta: jnp.mean(_atoms_are_data_scores(s, V, priors, eta)))(etas)
