"""The kernel Bayes filter (Xu et al. 2022, Algorithm 2) and its hyperparameter protocol (user guide, KBR)."""

import dataclasses
import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._config import require_x64
from .._validation import as_finite_array, as_points, check_count, check_positive, check_same_length, is_concrete
from ..fitted import fitted, load_as, static
from ..kernels.base import Kernel
from ..kernels.heuristics import median_heuristic
from ..kernels.stationary import RBF
from ..linalg import jittered_cholesky, spd_solve
from .features import FeatureKernel, nystrom_features
from .lowrank import Factored, factored_kulsif, factored_transition, filter_landmarks, landmark_ridges
from .loo import select_eta_loo, successor_priors
from .readout import clipped_posterior_mean
from .weights import gram_factor, kbr_iw_weights, kbr_iw_weights_features, kbr_original_weights

__all__ = ["KernelBayesFilter", "FilterState", "TuneResult", "tune_kbf", "tune_feature_filter", "ETA_GRID",
           "LAMBDA_GRIDS", "LOO_MAX_T", "filter_mse", "OutOfRangeWarning", "ReadoutWarning", "TuningWarning",
           "RANGE_MARGIN"]

_METHODS = ("iw", "original")
_READOUTS = ("raw", "clipped")
ETA_GRID = (5e-5, 1e-4, 5e-4, 1e-3, 5e-3)
"""KuLSIF ridges eta (operator scale) searched by the leave-one-out score in :func:`tune_kbf`."""
# five decades each: the three-value grids ({1e-4, 1e-3, 1e-2} / {1e-8, 1e-6, 1e-4}) kept selecting their edge values
LAMBDA_GRIDS = {"iw": (1e-5, 1e-4, 1e-3, 1e-2, 1e-1), "original": (1e-10, 1e-8, 1e-6, 1e-4, 1e-2)}
"""KBR ridges lam (operator scale) validated by :func:`tune_kbf`, per method: five decades each."""
LOO_MAX_T = 1000
""":func:`tune_kbf` scores eta by leave-one-out on at most this many (the last) training latents: O(T^3) otherwise."""


@fitted
class FilterState:
    """Where a kernel Bayes filter stands in a sequence: :meth:`KernelBayesFilter.update` consumes and returns it.

    A pytree (``jit``-, ``vmap``-able) with ``.save``, so a live filter can be checkpointed and resumed.

    Attributes:
        predicted: (T,) weights of the one-step predictive embedding on the training atoms (uniform at the start).
        filtered: (T,) weights of the last filtered embedding (the predictive ones before the first update).
        step: number of observations consumed.
    """

    predicted: jax.Array
    filtered: jax.Array
    step: jax.Array


@fitted
class KernelBayesFilter:
    """A fitted kernel Bayes filter: training pairs, bandwidths, regularisers and the precomputed maps.

    Build with :meth:`fit` (median bandwidths times multipliers) or :meth:`build` (explicit bandwidths,
    pure and differentiable in every hyperparameter). ``filter(X_test)`` runs the recursion with
    ``lax.scan``; ``jax.vmap(kbf.filter)(X_batch)`` filters several sequences at once. For live data,
    ``state = kbf.initial_state()`` then ``state, mean = kbf.update(state, x_t)`` consume one observation at a
    time and give the same means as ``filter``.

    An exact filter stores T x T matrices and a step costs O(T^3); a low-rank filter (``rank``, the default
    above :data:`~bayeskern.kbr.lowrank.EXACT_MAX_T` steps) stores (T, p) Nystrom features and factored maps,
    and a step costs O(T p^2). :attr:`rank` reports the numbers of features.

    Attributes:
        X: (T, d_x) training observations.
        Z: (T, d_z) training latents (the atoms).
        kernel_x: the observation kernel: RBF(sigma_x), or FeatureKernel(psi) for learned or Nystrom features.
        sigma_z: () latent bandwidth.
        lam: () KBR ridge (operator scale).
        eta: () KuLSIF ridge.
        lam_prime: () transition ridge.
        G_X: (T, T) observation Gram matrix (kernel filters), or None.
        features: (T, p) observation features of the training set (feature filters), or None.
        K_eta: the (T, T) KuLSIF map, gamma = K_eta w (a Factored map for a low-rank filter).
        transition: the (T, T) transition map: row 1 zero, rows 2..T (G_{Z-1} + (T-1) lam' I)^{-1} G~_{Z-1}
            (Factored for a low-rank filter).
        factor: (T, r) factor of G_X for the original KBR with a kernel, or None.
        method: ``"iw"`` or ``"original"``.
        original_solver: ``"eigh"`` (concrete hyperparameters) or ``"cholesky"`` (traced, differentiable).
        smooth_truncation: t of the smooth truncation t softplus(gamma / t), or None for max(0, gamma).
        rank: (p_x, p_z) numbers of Nystrom features, or None for an exact filter.
    """

    X: jax.Array
    Z: jax.Array
    kernel_x: Kernel
    sigma_z: jax.Array
    lam: jax.Array
    eta: jax.Array
    lam_prime: jax.Array
    G_X: jax.Array | None
    features: jax.Array | None
    K_eta: jax.Array | Factored
    transition: jax.Array | Factored
    factor: jax.Array | None
    method: str = static(default="iw")
    original_solver: str = static(default="eigh")
    smooth_truncation: float | None = static(default=None)

    @classmethod
    def build(cls, X, Z, sigma_x, sigma_z, lam, eta, lam_prime=None, *, method: str = "iw",
              smooth_truncation: float | None = None, Z_prev=None, rank="auto",
              landmarks=None) -> "KernelBayesFilter":
        """Precompute a filter from training pairs with explicit bandwidths (pure and differentiable).

        Precomputes the observation Gram matrix (or features), the KuLSIF map K_eta = T (G_Z + T eta I)^{-1} G_Z
        and the transition (row 1 zero, rows 2..T = (G_{Z_-1} + (T - 1) lam' I)^{-1} k(Z_{1..T-1}, Z)). A low-rank
        filter replaces k_X and k_Z by Nystrom approximations at landmarks and applies these maps as products
        of (T, p) factors, never forming a T x T matrix. Traceable when the landmarks are given (or the filter is
        exact): under ``jit`` / ``grad`` the original KBR uses a Cholesky solve instead of eigendecompositions.

        Args:
            X: (T, d_x) observations.
            Z: (T, d_z) latents: one trajectory (the transition is learned from consecutive rows), or the targets
                of T transitions ``Z_prev[j] -> Z[j]`` observed as X[j] when ``Z_prev`` is given.
            sigma_x: Gaussian observation bandwidth > 0, or any observation kernel, e.g.
                ``kbr.FeatureKernel(psi)`` with learned features (the IW(NN) filter); with p features a step
                costs O(T p^2) instead of O(T^3).
            sigma_z: Gaussian latent bandwidth > 0.
            lam: KBR ridge (operator scale), > 0.
            eta: KuLSIF ridge (operator scale), > 0.
            lam_prime: transition ridge (operator scale); default ``eta``.
            method: ``"iw"`` or ``"original"``.
            smooth_truncation: replace max(0, gamma) by t softplus(gamma / t) with this t (smooth gradients for
                NUTS).
            Z_prev: (T, d_z) sources of the transitions (e.g. a compressed training set,
                :func:`bayeskern.models.compress_split`).
            rank: ``None`` (exact), an integer p (p Nystrom landmarks per kernel, the first pivots of a pivoted
                Cholesky factorisation) or ``"auto"`` (exact up to ``EXACT_MAX_T`` steps, then as many
                landmarks as the trace-error rule of :func:`bayeskern.kbr.filter_landmarks` asks for).
            landmarks: explicit ``(landmarks_x, landmarks_z)`` ((p, d_x) or None for a feature kernel, (q, d_z));
                overrides ``rank`` and keeps the build traceable in the bandwidths.

        Returns:
            KernelBayesFilter: the precomputed filter.

        Raises:
            ValueError: for an unknown method, non-positive bandwidths or ridges, ``Z_prev`` of another shape
                than Z, an invalid rank, or ``rank`` needing landmarks while the hyperparameters are traced.
        """
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        Z = _as_float(as_points(Z, "Z"))
        X = _as_observations(X, "X", points=not isinstance(sigma_x, FeatureKernel))
        check_same_length(X, Z, "X and Z")
        lam_prime = eta if lam_prime is None else lam_prime
        if Z_prev is not None:
            Z_prev = _as_float(as_points(Z_prev, "Z_prev"))
            if Z_prev.shape != Z.shape:
                raise ValueError(f"Z_prev must have the shape of Z {Z.shape}, got {Z_prev.shape}")
        kernel_x = sigma_x if isinstance(sigma_x, Kernel) else RBF(check_positive(sigma_x, "sigma_x"))
        for value, name in ((sigma_z, "sigma_z"), (lam, "lam"), (eta, "eta"),
                            (lam_prime, "lam_prime")):
            check_positive(value, name)
        has_features = isinstance(kernel_x, FeatureKernel)
        if landmarks is None:
            landmarks = filter_landmarks(None if has_features else kernel_x, RBF(sigma_z), X, Z, rank,
                                         *landmark_ridges(method, lam, eta, lam_prime))
        landmarks_z = None
        if landmarks is not None:
            landmarks_x, landmarks_z = landmarks
            if landmarks_x is not None and not has_features:
                kernel_x = FeatureKernel(nystrom_features(kernel_x, landmarks_x))
        G_X, features, K_eta, transition = _precompute(X, Z, kernel_x, sigma_z, eta, lam_prime, Z_prev, landmarks_z)
        factor, solver = None, "eigh"
        if not is_concrete((G_X, features)):  # differentiable path (e.g. NUTS over hyperparameters): eigenvector
            solver = "cholesky"  # derivatives at repeated (near-)zero eigenvalues are NaN, Cholesky ones are not
        if method == "original" and G_X is not None:
            # truncated eigen-factor, O(T r^2) per step; traced: a Cholesky factor
            factor = gram_factor(G_X) if solver == "eigh" else jittered_cholesky(G_X)[0]
        return cls(X, Z, kernel_x, jnp.asarray(sigma_z), jnp.asarray(lam), jnp.asarray(eta),
                   jnp.asarray(lam_prime), G_X, features, K_eta, transition, factor, method, solver,
                   smooth_truncation)

    @classmethod
    def fit(cls, X, Z, *, c: float = 1.0, c_x: float | None = None, c_z: float | None = None, lam: float = 1e-3,
            eta: float = 1e-4, lam_prime: float | None = None, method: str = "iw",
            rank="auto") -> "KernelBayesFilter":
        """Build a filter from one training trajectory with bandwidths sigma = c x median pairwise distance.

        Args:
            X: (T, d_x) observations of the training trajectory, T >= 3.
            Z: (T, d_z) latent states, row t paired with X[t].
            c: bandwidth multiplier shared by X and Z.
            c_x: multiplier for X, overriding ``c``.
            c_z: multiplier for Z, overriding ``c``.
            lam: KBR ridge (operator scale), > 0.
            eta: KuLSIF ridge (operator scale), > 0.
            lam_prime: transition ridge (operator scale); default ``eta``.
            method: ``"iw"`` (importance-weighted KBR) or ``"original"``.
            rank: ``None`` (exact), an integer number of Nystrom landmarks per kernel, or ``"auto"`` (exact up to
                ``EXACT_MAX_T`` training steps, low rank by the trace-error rule above); see :meth:`build`.

        Returns:
            KernelBayesFilter: the precomputed filter; ``filter(X_test)`` runs it.

        Raises:
            ValueError: for unpaired or non-finite inputs, T < 3, non-positive multipliers or ridges, an unknown
                method or an invalid rank.
            RuntimeError: when float64 is off.
        """
        require_x64("KernelBayesFilter")
        X, Z = _training_pairs(X, Z)
        c_x, c_z = (c if c_x is None else c_x), (c if c_z is None else c_z)
        check_positive(c_x, "c_x")
        check_positive(c_z, "c_z")
        return cls.build(X, Z, c_x * _median_scale(X, "X"), c_z * _median_scale(Z, "Z"), lam, eta, lam_prime,
                         method=method, rank=rank)

    @property
    def rank(self) -> tuple[int | None, int | None] | None:
        """(p_x, p_z): observation features and latent landmarks (None for a side that is exact); None when the
        latent maps are exact."""
        if not isinstance(self.K_eta, Factored):
            return None
        return (None if self.features is None else int(self.features.shape[1])), int(self.K_eta.right.shape[1])

    def observation_gram(self, X_test):
        """The observation kernel between training and new observations, k_X(x_i, x~_t).

        Args:
            X_test: (T~, d_x) observations (or what the feature kernel takes).

        Returns:
            (T, T~) array.

        Nothing is inspected (the unchecked path of :meth:`filter`, for traced code).
        """
        return self.kernel_x.evaluate(self.X, X_test)

    def filter(self, X_test, *, return_weights: bool = False, readout: str = "raw"):
        """Filter a test sequence: the posterior mean of the state after each observation.

        The recursion starts from uniform weights and runs in one compiled ``lax.scan``; it ``vmap``s over
        sequences.

        Args:
            X_test: (T~, d_x) observations, in order.
            return_weights: also return the posterior weights on the training atoms.
            readout: ``"raw"``, the papers' sum_i w_i z_i, or ``"clipped"``, sum_i w_i^+ z_i / sum_i w_i^+
                (:func:`clipped_posterior_mean`): always a convex combination of the training latents, where
                negative importance weights can throw the raw mean out of their range. At a step with no positive
                weight the clipped mean is undefined and the raw one is returned (with a warning).

        Returns:
            (T~, d_z) filtered means, or (means, W) with W of shape (T~, T) when ``return_weights``.

        Raises:
            ValueError: for non-finite observations, observations of another dimension than the training ones, or
                an unknown readout.

        Warns:
            OutOfRangeWarning: observations so far from every training observation that the kernel sees none of
                them (largest k(x_t, x_i) below 1e-12 of its training scale): Bayes' rule then has nothing to
                weigh, the weights collapse to zero and the mean printed at those steps carries no information.
                The warning names the steps.
            ReadoutWarning: a raw mean outside the training latents' range widened by ``RANGE_MARGIN`` on each
                side (negative weights have thrown it out), or a clipped one with no positive weight; it names the
                steps.
        """
        X_test = _as_observations(X_test, "X_test", points=self.X.ndim == 2)
        if X_test.shape[1:] != self.X.shape[1:]:
            raise ValueError(f"X_test must hold observations of shape {self.X.shape[1:]} like the training X, got "
                             f"{X_test.shape[1:]}")
        if readout not in _READOUTS:
            raise ValueError(f"readout must be one of {_READOUTS}, got {readout!r}")
        out, support, flagged = _run_filter(self, X_test, return_weights, readout)
        if is_concrete(support):
            unseen = np.flatnonzero(np.asarray(support) < 1e-12)
            if unseen.size:
                warnings.warn(f"{unseen.size} of {support.shape[0]} observations lie outside the training range "
                              f"(steps {_steps(unseen)}): the kernel gives them no similarity to any training "
                              "observation, so their posterior weights collapse to zero", OutOfRangeWarning,
                              stacklevel=2)
            flagged = np.flatnonzero(np.asarray(flagged))
            if flagged.size and readout == "raw":
                warnings.warn(f"the mean sum_i w_i z_i leaves the training latents' range at {flagged.size} of "
                              f"{support.shape[0]} steps (steps {_steps(flagged)}): negative weights threw it out; "
                              "readout='clipped' keeps every mean a convex combination of the training latents",
                              ReadoutWarning, stacklevel=2)
            elif flagged.size:
                warnings.warn(f"no posterior weight is positive at {flagged.size} of {support.shape[0]} steps "
                              f"(steps {_steps(flagged)}): the clipped mean is undefined there and the raw mean "
                              "sum_i w_i z_i is returned", ReadoutWarning, stacklevel=2)
        return out

    def initial_state(self) -> FilterState:
        """The state before any observation: uniform predictive weights 1/T on the training atoms.

        Returns:
            FilterState: weights 1/T and step 0.
        """
        w0 = _uniform_weights(self)
        return FilterState(w0, w0, jnp.zeros((), jnp.int32))

    def update(self, state: FilterState, x):
        """Consume one observation: Bayes' rule on the predictive embedding, then the transition.

        One compiled step of constant cost (the same step as :meth:`filter`, so running it over a sequence gives
        the batch means); ``jit``- and ``vmap``-able.

        Args:
            state: the current :class:`FilterState` (from :meth:`initial_state` or a previous update).
            x: (d_x,) the next observation.

        Returns:
            (state, mean): the new state and the (d_z,) filtered posterior mean sum_i w_i z_i.
            ``kbr.posterior_spread(state.filtered[:, None], kbf.Z)`` gives a spread of the same posterior and
            ``kbr.clipped_posterior_mean(state.filtered[:, None], kbf.Z)`` its clipped read-out.

        Raises:
            ValueError: for a non-finite observation or one of another dimension than the training ones.
        """
        if not isinstance(state, FilterState):
            raise TypeError(f"state must be a FilterState (from initial_state() or update), got {type(state).__name__}")
        x = _as_float(as_points(jnp.reshape(x, (1, -1)) if jnp.ndim(x) <= 1 else x, "x"))
        if x.shape != (1, self.X.shape[1]):
            raise ValueError(f"x must be one observation of dimension {self.X.shape[1]}, got shape {jnp.shape(x)}")
        return _stream_update(self, state, x)


def _as_observations(X, name: str, points: bool):
    """Observations as (T, d_x) points, or any real finite array (e.g. images) for a feature kernel."""
    return _as_float(as_points(X, name) if points else as_finite_array(X, name))


def _as_float(A):
    """``A`` in the default float (float64 with x64 on): float32 data are filtered like float64 data."""
    return A.astype(jnp.result_type(float))


def _uniform_weights(kbf: KernelBayesFilter):
    """The filter's start: weight 1/T on every training atom, (T,)."""
    return jnp.full(kbf.Z.shape[0], 1.0 / kbf.Z.shape[0], dtype=kbf.Z.dtype)


def _observations(kbf: KernelBayesFilter, X_new):
    """What an update needs of new observations (q, d_x): their features (q, p) or Gram columns (q, T)."""
    return kbf.kernel_x.features(X_new) if kbf.features is not None else kbf.observation_gram(X_new).T


def _step(kbf: KernelBayesFilter, w_pred, g):
    """One filter step from predictive weights w_pred (T,) and one observation's g: (next predictive, filtered)."""
    gamma = kbf.K_eta @ w_pred
    if kbf.features is not None and kbf.method == "iw":  # O(T p^2)
        w = kbr_iw_weights_features(kbf.features, gamma, g[None, :], kbf.lam, smooth_truncation=kbf.smooth_truncation)
        w = w.weights[:, 0]
    elif kbf.features is not None:  # the features are a factor of the observation Gram matrix
        w = kbr_original_weights(None, gamma, (kbf.features @ g)[:, None], kbf.lam, factor=kbf.features,
                                 solver=kbf.original_solver).weights[:, 0]
    elif kbf.method == "iw":
        w = kbr_iw_weights(kbf.G_X, gamma, g[:, None], kbf.lam, smooth_truncation=kbf.smooth_truncation)
        w = w.weights[:, 0]
    else:
        w = kbr_original_weights(kbf.G_X, gamma, g[:, None], kbf.lam, factor=kbf.factor,
                                 solver=kbf.original_solver).weights[:, 0]
    return kbf.transition @ w, w


@partial(jax.jit, static_argnames=("return_weights", "readout"))
def _run_filter(kbf: KernelBayesFilter, X_test, return_weights: bool, readout: str = "raw"):
    """The filtering recursion (gamma = K_eta w, KBR update, read-out, w = T w), compiled once per filter structure,
    read-out and shapes. Returns (means or (means, W), support (T~,), flagged (T~,)): flagged marks raw means out of
    the widened training range, or clipped ones with no positive weight."""
    low, high = _widened_range(kbf.Z)

    def step(w_pred, g):
        w_next, w = _step(kbf, w_pred, g)
        raw = w @ kbf.Z
        if readout == "raw":
            return w_next, (raw, w, jnp.any((raw < low) | (raw > high)))
        clipped = clipped_posterior_mean(w[:, None], kbf.Z)
        empty = clipped.undefined[0]
        return w_next, (jnp.where(empty, raw, clipped.mean[0]), w, empty)

    G = _observations(kbf, X_test)
    _, (means, weights, flagged) = jax.lax.scan(step, _uniform_weights(kbf), G)
    return ((means, weights) if return_weights else means), _support(kbf, G), flagged


def _widened_range(Z):
    """Per-coordinate bounds (d_z,), (d_z,) of the training latents, widened by RANGE_MARGIN of the range each side."""
    low, high = jnp.min(Z, axis=0), jnp.max(Z, axis=0)
    return low - RANGE_MARGIN * (high - low), high + RANGE_MARGIN * (high - low)


def _steps(indices) -> str:
    """The first ten step indices of a warning."""
    return f"{indices[:10].tolist()}{' ...' if indices.size > 10 else ''}"


def _support(kbf: KernelBayesFilter, G):
    """How much the kernel sees of each new observation, relative to the training ones: max_i k(x_t, x_i) over
    max k(x_i, x_i) for Gram columns, ||psi(x_t)||^2 over max ||psi(x_i)||^2 for features. (T~,)"""
    if kbf.features is None:
        return jnp.max(jnp.abs(G), axis=1) / jnp.max(jnp.abs(jnp.diag(kbf.G_X)))
    return jnp.sum(G**2, axis=1) / jnp.max(jnp.sum(kbf.features**2, axis=1))


class OutOfRangeWarning(UserWarning):
    """Observations far outside the training data: the filter's weights collapsed at some steps."""


class ReadoutWarning(UserWarning):
    """A filtered mean left the training latents' range (raw read-out) or had no positive weight (clipped)."""


@jax.jit
def _stream_update(kbf: KernelBayesFilter, state: FilterState, x):
    w_next, w = _step(kbf, state.predicted, _observations(kbf, x)[0])
    return FilterState(w_next, w, state.step + 1), w @ kbf.Z


@jax.jit
def _precompute(X, Z, kernel_x, sigma_z, eta, lam_prime, Z_prev=None, landmarks_z=None):
    """(G_X or None, observation features or None, the KuLSIF map K_eta, the transition map)."""
    T = Z.shape[0]
    k_z = RBF(sigma_z)
    if isinstance(kernel_x, FeatureKernel):
        G_X, features = None, kernel_x.features(X)
    else:
        G_X, features = kernel_x.evaluate(X, X), None
    if landmarks_z is not None:  # Nystrom latent features: factored maps, O(T p) memory
        phi = nystrom_features(k_z, landmarks_z)
        Phi = phi(Z)
        if Z_prev is not None:
            transition = factored_transition(Phi, phi(Z_prev), lam_prime, first_row_zero=False)
        else:
            transition = factored_transition(Phi, Phi[:-1], lam_prime, first_row_zero=True)
        return G_X, features, factored_kulsif(Phi, eta), transition
    G_Z = k_z.evaluate(Z, Z)
    eye = jnp.eye(T, dtype=G_Z.dtype)
    K_eta = T * spd_solve(G_Z + T * eta * eye, G_Z)
    if Z_prev is not None:  # T transitions Z_prev[j] -> Z[j]: every atom is a destination
        return G_X, features, K_eta, spd_solve(k_z.evaluate(Z_prev, Z_prev) + T * lam_prime * eye,
                                               k_z.evaluate(Z_prev, Z))
    rows = spd_solve(G_Z[:-1, :-1] + (T - 1) * lam_prime * eye[:-1, :-1], G_Z[:-1, :])
    return G_X, features, K_eta, jnp.concatenate([jnp.zeros((1, T), G_Z.dtype), rows])


def _training_pairs(X, Z):
    X, Z = as_points(X, "X"), as_points(Z, "Z")
    check_same_length(X, Z, "X and Z")
    if X.shape[0] < 3:
        raise ValueError(f"a kernel Bayes filter needs a training sequence of at least 3 steps, got {X.shape[0]}")
    return X, Z


def filter_mse(means, Z_true):
    """Filtering error: the mean over time of the squared error summed over coordinates.

    Args:
        means: (T~, d_z) filtered means.
        Z_true: (T~, d_z) true latent states.

    Returns:
        float.

    Raises:
        ValueError: for arrays of different shapes (no broadcasting) or non-finite values.
    """
    means, Z_true = as_points(means, "means"), as_points(Z_true, "Z_true")
    if means.shape != Z_true.shape:
        raise ValueError(f"means and Z_true must have the same shape, got {means.shape} and {Z_true.shape}")
    return _mse(means, Z_true)


def _mse(means, Z_true) -> float:
    return float(jnp.mean(jnp.sum((means - Z_true) ** 2, axis=-1)))


def _validation_mse(means, Z_val) -> float:
    """filter_mse of a tuning candidate; +inf when its filter diverged, so such a candidate is never selected."""
    mse = _mse(means, Z_val)
    return mse if np.isfinite(mse) else float("inf")


def load_filter(path) -> KernelBayesFilter:
    """Read a filter saved with ``kbf.save(path)``: :func:`bayeskern.load` that checks the class.

    Args:
        path: the ``.npz`` file.

    Returns:
        KernelBayesFilter: the filter; it filters identically.

    Raises:
        FileNotFoundError: when the file does not exist.
        FileFormatError: for a file holding anything else, or not a bayeskern save.
    """
    return load_as(path, KernelBayesFilter)


@fitted
class TuneResult:
    """Selected hyperparameters, the refitted filter and the validation MSE per (c, lam).

    Attributes:
        filter: the filter refitted on all training pairs with the selection.
        c: the selected bandwidth multiplier.
        lam: the selected KBR ridge.
        eta: the KuLSIF ridge chosen by leave-one-out.
        validation_mse: {(c, lam): the validation MSE of that candidate}.
        rejected: {(c, lam): why that candidate could not be chosen: ``"out of range"`` (a validation mean left
            the training latents' range widened by ``RANGE_MARGIN``) or ``"loses to a baseline"`` (persistence
            or the training mean did as well on validation)}.
        baseline_mse: {"persistence": validation MSE of z_t estimated by z_{t-1}, "prior mean": of the training
            mean}; empty when not computed.
    """

    filter: KernelBayesFilter
    c: float
    lam: float
    eta: float
    validation_mse: dict
    rejected: dict = static(default_factory=dict)
    baseline_mse: dict = static(default_factory=dict)


def _validation_split(X, Z, n_val, k):
    """(X_fit, Z_fit, X_val, Z_val): the last V = min(n_val, T // 2) steps validate."""
    T = X.shape[0]
    V = min(check_count(n_val, "n_val"), T // 2)
    if T - V < k + 1:
        raise ValueError(f"training sequence too short for a validation split: T = {T}, V = {V} leaves {T - V} "
                         f"fit pairs, need at least {k + 1}")
    return X[: T - V], Z[: T - V], X[T - V:], Z[T - V:]


def _loo_eta(Z, sigma_z, eta_grid, num_priors, k):
    Z = Z[-LOO_MAX_T:]  # a contiguous window keeps the successor priors' transitions
    G_Z = RBF(sigma_z).gram(Z)
    return select_eta_loo(G_Z, successor_priors(Z, num_priors, k), eta_grid)[0]


def tune_kbf(X, Z, *, method: str = "iw", c_grid=(0.5, 1.0, 2.0), lam_grid=None, eta_grid=ETA_GRID,
             n_val: int = 200, num_priors: int = 20, k: int = 10, rank="auto") -> TuneResult:
    """Tune and fit a kernel Bayes filter on one training trajectory.

    Protocol: fit on steps 1..T-V and validate on the last V = min(n_val, T // 2) steps; for every bandwidth
    multiplier c (sigma = c x median pairwise distance, shared by X and Z) choose eta by the KuLSIF
    leave-one-out score averaged over ``num_priors`` successor priors (``k`` neighbours each), then (c, lam) by
    the validation MSE; finally refit on all T pairs with medians and eta re-selected. lam' = eta.

    A candidate is not chosen when one of its validation means leaves the range of the fit latents (widened by
    ``RANGE_MARGIN`` of the range on each side: the mark of exploding weights) or when it does not beat both
    persistence (z_t estimated by z_{t-1}) and the mean of the fit latents on validation (``rejected`` says
    which and why). Among the rest, the one-standard-error rule: the most regularised candidate (largest lam, then
    widest bandwidth) whose validation error is within one standard error (of the paired per-step difference) of
    the smallest. If every candidate is rejected, the same rule runs on those in range and a ``TuningWarning``
    says so.

    Args:
        X: (T, d_x) observations of the training trajectory.
        Z: (T, d_z) latent states, row t paired with X[t].
        method: ``"iw"`` (importance-weighted KBR, default) or ``"original"``.
        c_grid: bandwidth multipliers to validate.
        lam_grid: KBR ridges (operator scale); default ``LAMBDA_GRIDS[method]``.
        eta_grid: KuLSIF ridges (operator scale) for the leave-one-out score.
        n_val: number of validation steps (at most T // 2).
        num_priors: number of successor priors averaged by the leave-one-out score.
        k: neighbours per successor prior.
        rank: the filters' rank, as in :meth:`KernelBayesFilter.build` (landmarks of the validation filters are
            chosen at the smallest lam of the grid). The leave-one-out score of eta is exact on the last
            ``LOO_MAX_T`` = 1000 steps (O(min(T, 1000)^3)), so long series tune in seconds.

    Returns:
        TuneResult: the refitted ``filter`` (:class:`KernelBayesFilter`), the selected ``c``, ``lam``, ``eta``
        and ``validation_mse`` per (c, lam).

    Raises:
        ValueError: for unpaired or non-finite inputs, an unknown method, empty or non-positive grids.
        RuntimeError: when float64 is off.

    Warns:
        TuningWarning: when no candidate stays in range and beats both baselines on validation.

    Examples:
        >>> import jax, bayeskern as bk
        >>> from bayeskern import kbr
        >>> seq = kbr.data.circle_dynamics(120, jax.random.key(0))
        >>> tuned = kbr.tune_kbf(seq.X, seq.Z, c_grid=(1.0,), n_val=40)
        >>> means = tuned.filter.filter(seq.X_test)               # (200, 2) filtered posterior means
        >>> means.shape, bool(kbr.filter_mse(means, seq.Z_test) < 0.1)
        ((200, 2), True)"""
    require_x64("tune_kbf")
    X, Z = _training_pairs(X, Z)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    lam_grid = LAMBDA_GRIDS[method] if lam_grid is None else tuple(lam_grid)
    for grid, name in ((c_grid, "c_grid"), (lam_grid, "lam_grid"), (eta_grid, "eta_grid")):
        if len(grid) == 0:
            raise ValueError(f"{name} must hold at least one value, got an empty grid")
        for value in grid:
            check_positive(value, name)
    X_fit, Z_fit, X_val, Z_val = _validation_split(X, Z, n_val, k)
    med_x, med_z = _median_scale(X_fit, "X"), _median_scale(Z_fit, "Z")
    baselines = _baseline_mse(Z_fit, Z_val)
    scores, rejected, step_errors = {}, {}, {}
    for c in c_grid:
        eta = _loo_eta(Z_fit, c * med_z, eta_grid, num_priors, k)
        base = KernelBayesFilter.build(X_fit, Z_fit, c * med_x, c * med_z, min(lam_grid), eta, method=method,
                                       rank=rank)
        for lam in lam_grid:  # lam enters only the update step: the precomputed matrices are shared
            kbf = dataclasses.replace(base, lam=jnp.asarray(lam))
            means, in_range = _validation_run(kbf, X_val)
            key = (float(c), float(lam))
            scores[key] = mse = _validation_mse(means, Z_val)
            step_errors[key] = np.sum((np.asarray(means) - np.asarray(Z_val)) ** 2, axis=1)
            if not in_range:
                rejected[key] = "out of range"
            elif mse >= min(baselines.values()):
                rejected[key] = "loses to a baseline"
    admissible = {key: v for key, v in scores.items() if key not in rejected}
    if not admissible:
        warnings.warn(f"no (c, lam) candidate stays in the training range and beats persistence (validation MSE "
                      f"{baselines['persistence']:.3g}) and the training mean ({baselines['prior mean']:.3g}); "
                      "taking the best in range", TuningWarning, stacklevel=2)
        in_range = {key: v for key, v in scores.items() if rejected.get(key) != "out of range"}
        admissible = in_range or scores
    c, lam = _most_regularised_within_one_se(admissible, step_errors)
    med_x, med_z = _median_scale(X, "X"), _median_scale(Z, "Z")
    eta = _loo_eta(Z, c * med_z, eta_grid, num_priors, k)
    kbf = KernelBayesFilter.build(X, Z, c * med_x, c * med_z, lam, eta, method=method, rank=rank)
    return TuneResult(kbf, c, lam, eta, scores, rejected, baselines)


def _most_regularised_within_one_se(scores: dict, step_errors: dict) -> tuple:
    """The one-standard-error rule (Breiman et al. 1984): among the candidates (c, lam) whose validation error
    exceeds the smallest by at most one standard error of the paired per-step difference, the most regularised
    (largest lam, then widest bandwidth). The smallest of many noisy validation errors is optimistic, and a small
    ridge that wins by noise can explode on the next unusual observation."""
    best = min(scores, key=scores.get)
    if not np.isfinite(scores[best]):
        return best

    def close(key):
        diff = step_errors[key] - step_errors[best]
        return bool(np.all(np.isfinite(diff))) and diff.mean() <= diff.std(ddof=1) / np.sqrt(diff.size)

    return min((key for key in scores if key == best or close(key)), key=lambda key: (-key[1], -key[0]))


RANGE_MARGIN = 0.1
"""Tuning refuses a candidate whose validation means leave the training range by more than this share of the range
(on either side): far outside every atom, the importance weights have exploded."""


def _median_scale(A, name: str, *, default: float | None = None) -> float:
    """The median heuristic of the rows of ``A``; when they are all one point (no distance to scale a kernel by),
    ``default``, or without one a ValueError naming ``name``."""
    A = np.asarray(A)
    if np.all(A == A[:1]):
        if default is not None:
            return default
        raise ValueError(f"every row of {name} is the same point, so the median heuristic gives no bandwidth: pass "
                         "bandwidths to KernelBayesFilter.build")
    return median_heuristic(A)


class TuningWarning(UserWarning):
    """No tuning candidate passed the range and baseline checks; the best in range was taken."""


def _baseline_mse(Z_fit, Z_val) -> dict:
    """Validation MSE of persistence (z_{t-1}, the last fit latent first) and of the fit latents' mean."""
    previous = jnp.concatenate([Z_fit[-1:], Z_val[:-1]])
    return {"persistence": _mse(previous, Z_val), "prior mean": _mse(jnp.mean(Z_fit, axis=0)[None, :], Z_val)}


def _validation_run(kbf, X_val):
    """(means, in range): the raw read-out of validation steps (slices of the checked training X) and whether every
    mean stays in the training latents' range widened by RANGE_MARGIN, the flag behind :class:`ReadoutWarning`:
    tuning scores or refuses such a candidate instead of warning."""
    means, _, flagged = _run_filter(kbf, X_val, False)
    return means, not bool(jnp.any(flagged))


def tune_feature_filter(X, Z, train, *, c: float = 1.0, lam_grid=LAMBDA_GRIDS["iw"], eta_grid=ETA_GRID,
                        n_val: int = 200, num_priors: int = 20, k: int = 10) -> TuneResult:
    """IW(NN) with the protocol of :func:`tune_kbf`: for every lam, ``train(X_fit, Z_fit, lam, sigma_z)`` learns
    observation features psi (a callable (n, d_x) -> (n, p), e.g. :func:`bayeskern.kbr.train_image_features`
    with lam equal to the KBR lam), the IW filter on FeatureKernel(psi) filters the validation steps, and the
    lam with the smallest validation MSE is refitted on all T pairs. sigma_z = c * median; eta by KuLSIF LOO.

    Args:
        X: (T, d_x) training observations (e.g. flattened images).
        Z: (T, d_z) training latents.
        train: ``train(X_fit, Z_fit, lam, sigma_z)`` returning the feature map psi.
        c: latent bandwidth multiplier of the median distance.
        lam_grid: KBR ridges validated.
        eta_grid: KuLSIF ridges scored by leave-one-out.
        n_val: the most validation steps (the last min(n_val, T // 2)).
        num_priors: priors of the leave-one-out score.
        k: neighbours per prior.

    Returns:
        TuneResult: the refitted filter and the validation MSE per (c, lam).

    Raises:
        TypeError: for data that are not real numbers.
        ValueError: for non-finite or unpaired data, fewer than 3 steps, c not positive or an empty grid.
        RuntimeError: when float64 is off.
    """
    require_x64("tune_feature_filter")
    X, Z = _training_pairs(X, Z)
    X_fit, Z_fit, X_val, Z_val = _validation_split(X, Z, n_val, k)
    check_positive(c, "c")

    def fitted(X, Z, lam):
        sigma_z = c * _median_scale(Z, "Z")
        eta = _loo_eta(Z, sigma_z, eta_grid, num_priors, k)
        psi = train(X, Z, lam, sigma_z)
        return KernelBayesFilter.build(X, Z, FeatureKernel(psi), sigma_z, lam, eta), eta

    scores = {}
    for lam in lam_grid:
        check_positive(lam, "lam")
        kbf, _ = fitted(X_fit, Z_fit, lam)
        scores[(float(c), float(lam))] = _validation_mse(_validation_run(kbf, X_val)[0], Z_val)
    (_, lam), _ = min(scores.items(), key=lambda item: item[1])
    kbf, eta = fitted(X, Z, lam)
    return TuneResult(kbf, float(c), lam, eta, scores)
