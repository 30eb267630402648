"""The kernel Bayes filter (Algorithm 2, spec kbr.md §6) and its hyperparameter protocol (§6.4)."""

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp

from .._config import require_x64
from .._validation import as_points, check_positive, check_same_length, is_concrete
from ..fitted import fitted, load_as, static
from ..kernels.base import Kernel
from ..kernels.heuristics import median_heuristic
from ..kernels.stationary import RBF
from ..linalg import jittered_cholesky, spd_solve
from .features import FeatureKernel
from .loo import select_eta_loo, successor_priors
from .weights import gram_factor, kbr_iw_weights, kbr_iw_weights_features, kbr_original_weights

__all__ = ["KernelBayesFilter", "TuneResult", "tune_kbf", "tune_feature_filter", "ETA_GRID", "LAMBDA_GRIDS",
           "filter_mse"]

_METHODS = ("iw", "original")
ETA_GRID = (5e-5, 1e-4, 5e-4, 1e-3, 5e-3)
# the spec's extended grids: the small ones ({1e-4, 1e-3, 1e-2} / {1e-8, 1e-6, 1e-4}) select edge values (§11)
LAMBDA_GRIDS = {"iw": (1e-5, 1e-4, 1e-3, 1e-2, 1e-1), "original": (1e-10, 1e-8, 1e-6, 1e-4, 1e-2)}


@fitted
class KernelBayesFilter:
    """A fitted kernel Bayes filter: training pairs, bandwidths, regularisers and the precomputed matrices.

    Build with :meth:`fit` (median bandwidths times multipliers) or :meth:`build` (explicit bandwidths,
    pure and differentiable in every hyperparameter). ``filter(X_test)`` runs the recursion with
    ``lax.scan``; ``jax.vmap(kbf.filter)(X_batch)`` filters several sequences at once.
    """

    X: jax.Array  # (T, d_x) training observations
    Z: jax.Array  # (T, d_z) training latents (the atoms)
    kernel_x: Kernel  # observation kernel: RBF(sigma_x), or FeatureKernel(psi) for learned features
    sigma_z: jax.Array
    lam: jax.Array
    eta: jax.Array
    lam_prime: jax.Array
    G_X: jax.Array  # (T, T)
    K_eta: jax.Array  # (T, T): gamma = K_eta w
    transition: jax.Array  # (T, T): row 1 zero, rows 2..T (G_{Z-1} + (T-1) lam' I)^{-1} G~_{Z-1}
    factor: jax.Array | None  # (T, p) factor of G_X for the original KBR
    method: str = static(default="iw")
    original_solver: str = static(default="eigh")
    smooth_truncation: float | None = static(default=None)

    @classmethod
    def build(cls, X, Z, sigma_x, sigma_z, lam, eta, lam_prime=None, *, method: str = "iw",
              smooth_truncation: float | None = None, Z_prev=None) -> "KernelBayesFilter":
        """Precompute the filter for training pairs X (T, d_x), Z (T, d_z) with explicit bandwidths.

        The pairs are one trajectory (the transition model learns z_t -> z_{t+1} from consecutive rows), or,
        with ``Z_prev`` (T, d_z), T transitions Z_prev[j] -> Z[j] observed as X[j] (e.g. a compressed training
        set, :func:`bayeskern.models.compress_split`): transition (G_prev + T lam' I)^{-1} k(Z_prev, Z).

        ``sigma_x`` is the Gaussian observation bandwidth, or any observation kernel (e.g.
        ``kbr.FeatureKernel(psi)`` with features learned by ``kbr.train_features`` (the IW(NN) filter) or
        Nystrom features ``kbr.nystrom_features(RBF(sigma), landmarks)``; with a FeatureKernel of p features the
        IW update costs O(T p^2) per step instead of O(T^3).

        Operator-scale regularisers: lam (KBR), eta (KuLSIF), lam_prime (transition, default eta).
        Traceable: under ``jit``/``grad`` the original KBR uses a Cholesky factor of G_X and a Cholesky
        solve (differentiable) instead of the truncated eigen-factor. ``smooth_truncation=tau`` replaces
        max(0, gamma) by tau softplus(gamma / tau) (smooth gradients for NUTS).
        """
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        lam_prime = eta if lam_prime is None else lam_prime
        if Z_prev is not None and jnp.shape(Z_prev) != jnp.shape(Z):
            raise ValueError(f"Z_prev must have the shape of Z {jnp.shape(Z)}, got {jnp.shape(Z_prev)}")
        kernel_x = sigma_x if isinstance(sigma_x, Kernel) else RBF(sigma_x)
        for value, name in ((sigma_z, "sigma_z"), (lam, "lam"), (eta, "eta"),
                            (lam_prime, "lam_prime")):
            check_positive(value, name)
        G_X, K_eta, transition = _precompute(X, Z, kernel_x, sigma_z, eta, lam_prime, Z_prev)
        factor, solver = None, "eigh"
        if method == "original":
            if is_concrete(G_X):
                factor = gram_factor(G_X)  # truncated eigen-factor: O(T p^2) per step
            else:  # differentiable path (e.g. NUTS over hyperparameters): eigenvector derivatives at the
                # repeated (near-)zero eigenvalues of G_X and C are NaN, Cholesky derivatives are not
                factor, solver = jittered_cholesky(G_X)[0], "cholesky"
        return cls(X, Z, kernel_x, jnp.asarray(sigma_z), jnp.asarray(lam), jnp.asarray(eta),
                   jnp.asarray(lam_prime), G_X, K_eta, transition, factor, method, solver, smooth_truncation)

    @classmethod
    def fit(cls, X, Z, *, c: float = 1.0, c_x: float | None = None, c_z: float | None = None, lam: float = 1e-3,
            eta: float = 1e-4, lam_prime: float | None = None, method: str = "iw") -> "KernelBayesFilter":
        """Filter on one training trajectory with bandwidths sigma = c * median pairwise distance (spec §1).

        X: (T, d_x) observations, Z: (T, d_z) latents, T >= 3; c_x / c_z override the shared multiplier c.
        """
        require_x64("KernelBayesFilter")
        X, Z = _training_pairs(X, Z)
        c_x, c_z = (c if c_x is None else c_x), (c if c_z is None else c_z)
        check_positive(c_x, "c_x")
        check_positive(c_z, "c_z")
        return cls.build(X, Z, c_x * median_heuristic(X), c_z * median_heuristic(Z), lam, eta, lam_prime, method=method)

    def observation_gram(self, X_test):
        """k_X(x_i, x~_t): (T, T~)."""
        return self.kernel_x.evaluate(self.X, X_test)

    def filter(self, X_test, *, return_weights: bool = False):
        """Filtered posterior means sum_i w_i^(t,t) z_i for a test sequence X_test (T~, d_x): (T~, d_z).

        Starts from uniform weights; with ``return_weights=True`` also returns W (T~, T).
        """
        X_test = as_points(X_test, "X_test")  # finite-value check when concrete
        return _run_filter(self, X_test, return_weights)


@partial(jax.jit, static_argnames="return_weights")
def _run_filter(kbf: KernelBayesFilter, X_test, return_weights: bool):
    """The recursion of spec §6.3, compiled once per filter structure and shapes."""
    T = kbf.Z.shape[0]
    features = kbf.method == "iw" and isinstance(kbf.kernel_x, FeatureKernel)  # O(T p^2) updates
    if features:
        Psi = kbf.kernel_x.features(kbf.X)  # (T, p)
        G_q = kbf.kernel_x.features(X_test)  # (T~, p): per-step features psi(x~_t)
    else:
        G_q = kbf.observation_gram(X_test).T  # (T~, T)

    def step(w_pred, g):
        gamma = kbf.K_eta @ w_pred
        if features:
            w = kbr_iw_weights_features(Psi, gamma, g[None, :], kbf.lam,
                                        smooth_truncation=kbf.smooth_truncation).weights[:, 0]
        elif kbf.method == "iw":
            w = kbr_iw_weights(kbf.G_X, gamma, g[:, None], kbf.lam, smooth_truncation=kbf.smooth_truncation)
            w = w.weights[:, 0]
        else:
            w = kbr_original_weights(kbf.G_X, gamma, g[:, None], kbf.lam, factor=kbf.factor,
                                     solver=kbf.original_solver)[:, 0]
        return kbf.transition @ w, (w @ kbf.Z, w)

    w0 = jnp.full(T, 1.0 / T, dtype=kbf.G_X.dtype)
    _, (means, weights) = jax.lax.scan(step, w0, G_q)
    return (means, weights) if return_weights else means


@jax.jit
def _precompute(X, Z, kernel_x, sigma_z, eta, lam_prime, Z_prev=None):
    """G_X, the KuLSIF map K_eta = T (G_Z + T eta I)^{-1} G_Z and the transition matrix (spec §6.2)."""
    T = Z.shape[0]
    k_z = RBF(sigma_z)
    G_X, G_Z = kernel_x.evaluate(X, X), k_z.evaluate(Z, Z)
    eye = jnp.eye(T, dtype=G_Z.dtype)
    K_eta = T * spd_solve(G_Z + T * eta * eye, G_Z)
    if Z_prev is not None:  # T transitions Z_prev[j] -> Z[j]: every atom is a destination
        return G_X, K_eta, spd_solve(k_z.evaluate(Z_prev, Z_prev) + T * lam_prime * eye, k_z.evaluate(Z_prev, Z))
    rows = spd_solve(G_Z[:-1, :-1] + (T - 1) * lam_prime * eye[:-1, :-1], G_Z[:-1, :])
    return G_X, K_eta, jnp.concatenate([jnp.zeros((1, T), G_Z.dtype), rows])


def _training_pairs(X, Z):
    X, Z = as_points(X, "X"), as_points(Z, "Z")
    check_same_length(X, Z, "X and Z")
    if X.shape[0] < 3:
        raise ValueError(f"a kernel Bayes filter needs a training sequence of at least 3 steps, got {X.shape[0]}")
    return X, Z


def filter_mse(means, Z_true):
    """Mean over time of the squared error summed over coordinates (spec §6.3)."""
    return float(jnp.mean(jnp.sum((jnp.asarray(means) - jnp.asarray(Z_true)) ** 2, axis=-1)))


def load_filter(path) -> KernelBayesFilter:
    """Read a filter saved with ``kbf.save(path)`` (an alias of :func:`bayeskern.load`); it filters identically."""
    return load_as(path, KernelBayesFilter)


@fitted
class TuneResult:
    """Selected hyperparameters, the refitted filter and the validation MSE per (c, lam) (spec §6.4)."""

    filter: KernelBayesFilter
    c: float
    lam: float
    eta: float
    validation_mse: dict


def _validation_split(X, Z, n_val, k):
    """(X_fit, Z_fit, X_val, Z_val): the last V = min(n_val, T // 2) steps validate (spec §6.4)."""
    T = X.shape[0]
    V = min(n_val, T // 2)
    if T - V < k + 1:
        raise ValueError(f"training sequence too short for a validation split: T = {T}, V = {V} leaves {T - V} "
                         f"fit pairs, need at least {k + 1}")
    return X[: T - V], Z[: T - V], X[T - V:], Z[T - V:]


def _loo_eta(Z, sigma_z, eta_grid, num_priors, k):
    G_Z = RBF(sigma_z).evaluate(Z, Z)
    return select_eta_loo(G_Z, successor_priors(Z, num_priors, k), eta_grid)[0]


def tune_kbf(X, Z, *, method: str = "iw", c_grid=(0.5, 1.0, 2.0), lam_grid=None, eta_grid=ETA_GRID,
             n_val: int = 200, num_priors: int = 20, k: int = 10) -> TuneResult:
    """The §6.4 protocol: fit on steps 1..T-V, validate on the last V steps (V = min(n_val, T // 2)),
    eta by the KuLSIF LOO over kNN-successor priors for every c, (c, lam) by validation MSE, then refit on
    all T pairs (medians and eta re-selected)."""
    require_x64("tune_kbf")
    X, Z = _training_pairs(X, Z)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    lam_grid = LAMBDA_GRIDS[method] if lam_grid is None else lam_grid
    X_fit, Z_fit, X_val, Z_val = _validation_split(X, Z, n_val, k)
    med_x, med_z = median_heuristic(X_fit), median_heuristic(Z_fit)
    scores = {}
    for c in c_grid:
        eta = _loo_eta(Z_fit, c * med_z, eta_grid, num_priors, k)
        base = KernelBayesFilter.build(X_fit, Z_fit, c * med_x, c * med_z, lam_grid[0], eta, method=method)
        for lam in lam_grid:  # lam enters only the update step: the precomputed matrices are shared
            check_positive(lam, "lam")
            kbf = dataclasses.replace(base, lam=jnp.asarray(lam))
            scores[(float(c), float(lam))] = (filter_mse(kbf.filter(X_val), Z_val), eta)
    (c, lam), _ = min(scores.items(), key=lambda item: item[1][0])
    med_x, med_z = median_heuristic(X), median_heuristic(Z)
    eta = _loo_eta(Z, c * med_z, eta_grid, num_priors, k)
    kbf = KernelBayesFilter.build(X, Z, c * med_x, c * med_z, lam, eta, method=method)
    return TuneResult(kbf, c, lam, eta, {key: value[0] for key, value in scores.items()})


def tune_feature_filter(X, Z, train, *, c: float = 1.0, lam_grid=LAMBDA_GRIDS["iw"], eta_grid=ETA_GRID,
                        n_val: int = 200, num_priors: int = 20, k: int = 10) -> TuneResult:
    """IW(NN) with the §6.4 protocol (spec §8.3): for every lam, ``train(X_fit, Z_fit, lam, sigma_z)`` learns
    observation features psi (a callable (n, d_x) -> (n, p), e.g. :func:`bayeskern.kbr.train_image_features`
    with lam equal to the KBR lam, §5), the IW filter on FeatureKernel(psi) filters the validation steps, and the
    lam with the smallest validation MSE is refitted on all T pairs. sigma_z = c * median; eta by KuLSIF LOO.
    """
    require_x64("tune_feature_filter")
    X, Z = _training_pairs(X, Z)
    X_fit, Z_fit, X_val, Z_val = _validation_split(X, Z, n_val, k)
    check_positive(c, "c")

    def fitted(X, Z, lam):
        sigma_z = c * median_heuristic(Z)
        eta = _loo_eta(Z, sigma_z, eta_grid, num_priors, k)
        psi = train(X, Z, lam, sigma_z)
        return KernelBayesFilter.build(X, Z, FeatureKernel(psi), sigma_z, lam, eta), eta

    scores = {}
    for lam in lam_grid:
        check_positive(lam, "lam")
        kbf, _ = fitted(X_fit, Z_fit, lam)
        scores[(float(c), float(lam))] = filter_mse(kbf.filter(X_val), Z_val)
    (_, lam), _ = min(scores.items(), key=lambda item: item[1])
    kbf, eta = fitted(X, Z, lam)
    return TuneResult(kbf, float(c), lam, eta, scores)
