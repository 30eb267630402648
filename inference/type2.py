"""Type-II maximum likelihood (BKL) for the BKE pseudolikelihood, respecting multimodality."""

import warnings

import jax
import jax.numpy as jnp
import jaxopt
import numpy as np
import scipy.optimize

from bayeskern._validation import as_real_array, check_count, check_key, check_positive
from bayeskern.fitted import fitted, static
from bayeskern.bke.objective import SEPseudolikelihood
from bayeskern.kernels import RBF, median_heuristic

__all__ = ["Type2Result", "fit_type2", "log_grid", "tau2_profile"]

_TAU2_BOUNDS = (1e-8, 1e4)


@fitted
class Type2Result:
    """Outcome of :func:`fit_type2`; ``kernel()`` is the RBF at the optimum.

    Attributes:
        lengthscale: the maximiser (float, or (D,) for ARD).
        log_likelihood: the pseudolikelihood L there.
        tau2: the noise variance used (learned only with ``learn_tau2=True``).
        local_maxima: refined (lengthscale, L) pairs of every grid-local maximum, best first.
        grid: the log-spaced lengthscale grid (isotropic fits; else None).
        curve: L on the grid.
        m: number of inducing points (report it with the result: m changes the answer).
        n: number of likelihood points.
        convention: the model variant.
    """

    lengthscale: float | np.ndarray
    log_likelihood: float
    tau2: float
    local_maxima: list
    grid: np.ndarray | None
    curve: np.ndarray | None
    m: int
    n: int
    convention: str = static()

    def kernel(self) -> RBF:
        """The BKL kernel RBF(lengthscale).

        Returns:
            RBF: the kernel at the type-II lengthscale.

        Raises:
            ValueError: for a lengthscale that is not positive and finite (a damaged result).
        """
        return RBF(jnp.asarray(self.lengthscale))


def log_grid(X, Z=None, *, size: int = 161, low: float = 0.01, high: float = 3.0) -> np.ndarray:
    """The default lengthscale grid of :func:`fit_type2`: log-spaced points on [low, high] x median distance.

    Args:
        X: (n, D) points.
        Z: optional (m, D) points pooled with X for the median.
        size: number of grid points.
        low: lower end, in units of the median pairwise distance.
        high: upper end, in the same units.

    Returns:
        (size,) array.

    Raises:
        TypeError: for size not an integer or points that are not real numbers.
        ValueError: for size below 1, low or high not positive, low >= high, or non-finite points.
    """
    size = check_count(size, "size")
    check_positive(low, "low"), check_positive(high, "high")
    if not low < high:
        raise ValueError(f"low must be below high, got low = {low}, high = {high}")
    med = float(median_heuristic(X, Z))
    return np.geomspace(low * med, high * med, size)


@jax.jit
def _log_likelihood(objective, log_theta, tau2):
    return objective(jnp.exp(log_theta), tau2)


def _curve(objective, log_thetas, tau2):
    """L at each log theta: one compiled scalar evaluation, reused by the refinement (no gradient to compile)."""
    return np.array([float(_log_likelihood(objective, r, tau2)) for r in np.asarray(log_thetas, float)])


def _refine(objective, tau2, lo, hi, tol):
    """Brent's bounded search for the maximiser of L over log theta in [lo, hi], to width ``tol``."""
    def negative(r):
        value = float(_log_likelihood(objective, r, tau2))
        return -value if np.isfinite(value) else 1e300

    result = scipy.optimize.minimize_scalar(negative, bounds=(lo, hi), method="bounded", options=dict(xatol=tol))
    return float(result.x), -float(result.fun)


def _negative(params, objective, tau2):
    log_theta, log_tau2 = params
    t2 = tau2 if log_tau2 is None else jnp.exp(log_tau2)
    value = objective(jnp.exp(log_theta), t2)
    return -jnp.where(jnp.isfinite(value), value, -1e300)


_negative_value_and_grad = jax.jit(jax.value_and_grad(_negative))  # compiled once per data shape


def _maximise(objective, tau2, start, bounds, tol, maxiter=200):
    """Bounded L-BFGS-B (jaxopt's SciPy wrapper; value and gradient jitted) of L in log-hyperparameters.

    ``start`` = (log_theta, log_tau2 | None); ``tol`` bounds the projected gradient (relative to |L|).
    """
    solver = jaxopt.ScipyBoundedMinimize(fun=_negative_value_and_grad, value_and_grad=True, jit=False,
                                         method="L-BFGS-B", maxiter=maxiter, options=dict(gtol=tol, ftol=1e-15))
    result = solver.run(start, bounds=bounds, objective=objective, tau2=tau2)
    return result.params, -float(result.state.fun_val)


def _grid_local_maxima(curve):
    c = np.where(np.isfinite(curve), curve, -np.inf)
    left = np.concatenate([[-np.inf], c[:-1]])
    right = np.concatenate([c[1:], [-np.inf]])
    return [i for i in range(len(c)) if np.isfinite(c[i]) and c[i] >= left[i] and c[i] > right[i]]


def fit_type2(X, Z, tau2=1.0, *, grid=None, ard: bool = False, learn_tau2: bool = False, n_starts: int = 4,
              key=None, tol: float = 1e-7, convention: str = "exact", volume: str | None = "closed",
              nu: str = "lebesgue", eta=None, center=None, r_scale: str | None = None) -> Type2Result:
    """Type-II maximum likelihood (BKL): maximise the BKE pseudolikelihood over the SE lengthscale, tau2 fixed.

    The criterion (Flaxman et al. 2016, eq. 15, with the corrections described in the BKE guide) is often
    multimodal: every grid-local maximum is refined and reported, not only the best.

    Args:
        X: (n, D) points entering the likelihood.
        Z: (m, D) inducing points, none of them in X (see :func:`bayeskern.bke.hold_out_inducing`).
        tau2: the fixed noise variance tau^2 > 0.
        grid: lengthscales to evaluate (default :func:`log_grid`: 161 points on [median/100, 3 median]); each
            grid-local maximum is refined by Brent's bounded search in log theta between its neighbours.
        ard: one lengthscale per dimension: multi-start bounded L-BFGS in log theta_d from the isotropic optimum
            and ``n_starts - 1`` random starts in the grid box (drawn with ``key``, default key 0).
        learn_tau2: also maximise over tau2, which is unbounded for m > D (warns when it runs to a bound).
        n_starts: ARD starts.
        key: PRNG key for the ARD starts.
        tol: width of the final bracket (isotropic) or projected-gradient tolerance (ARD).
        convention: ``"exact"`` (default) or a reproduction convention of the paper's Stan program, see
            :class:`bayeskern.bke.SEPseudolikelihood`.
        volume: how the log-volume term is computed (``"closed"`` or ``"autodiff"``; None drops it).
        nu: the measure of the prior covariance, ``"lebesgue"`` or ``"gaussian"``.
        eta: scale of the Gaussian measure.
        center: centre of the Gaussian measure.
        r_scale: ``"exact"`` or ``"unit"`` scale of the prior covariance.

    Returns:
        Type2Result: the optimum ``lengthscale`` (scalar, or (D,) with ``ard``), its ``log_likelihood``, ``tau2``,
        all ``local_maxima`` (best first), the ``grid`` and ``curve``, and the point counts ``m``, ``n``.

    Raises:
        ValueError: for non-finite inputs, m < D, or inducing points that are also points of X.
        RuntimeError: when float64 is off.

    Examples:
        >>> import jax, numpy as np, bayeskern as bk
        >>> from bayeskern.bke import hold_out_inducing
        >>> from bayeskern.inference import fit_type2
        >>> XP, XQ = bk.datasets.normal_vs_laplace(100, seed=0)
        >>> X, Z = hold_out_inducing(np.vstack([XP, XQ]), jax.random.key(0), m=10)
        >>> fit = fit_type2(X, Z)
        >>> fit.m, fit.n, bool(0 < fit.lengthscale < 10)
        (10, 190, True)
    """
    tau2 = float(check_positive(tau2, "tau2"))
    n_starts = check_count(n_starts, "n_starts")
    if key is not None:
        check_key(key)
    objective = SEPseudolikelihood.build(X, Z, convention=convention, volume=volume, nu=nu, eta=eta, center=center,
                                         r_scale=r_scale)
    grid = log_grid(objective.X, objective.Z) if grid is None else np.asarray(check_positive(grid, "grid"), float)
    if grid.ndim != 1 or len(grid) < 3:
        raise ValueError(f"grid must be a 1-D array of at least 3 lengthscales, got shape {grid.shape}")
    grid = np.sort(grid)
    rho = np.log(grid)
    curve = _curve(objective, rho, tau2)
    if not np.any(np.isfinite(curve)):
        raise FloatingPointError("the pseudolikelihood is -inf on the whole grid (R_zz + tau2/n I never factorised)")
    peaks = _grid_local_maxima(curve)
    local = []
    for i in peaks:
        r, value = _refine(objective, tau2, rho[max(i - 1, 0)], rho[min(i + 1, len(rho) - 1)], tol)
        if value < curve[i]:  # keep the grid point if the refinement did not improve on it
            r, value = rho[i], float(curve[i])
        local.append((float(np.exp(r)), float(value)))
    local.sort(key=lambda t: -t[1])
    best_theta, best_value = local[0]
    if np.argmax(np.where(np.isfinite(curve), curve, -np.inf)) in (0, len(grid) - 1):
        warnings.warn(f"the best lengthscale {best_theta:.4g} lies at the edge of the grid "
                      f"[{grid[0]:.4g}, {grid[-1]:.4g}]; widen the grid", RuntimeWarning, stacklevel=2)
    result = dict(lengthscale=best_theta, log_likelihood=best_value, tau2=tau2, local_maxima=local,
                  grid=grid, curve=curve)
    if ard:
        result.update(_fit_ard(objective, tau2, best_theta, rho[0], rho[-1], n_starts, key, tol))
    if learn_tau2:
        starts = [result["lengthscale"]] + [t for t, _ in local[1:]] + [grid[-2]]
        result.update(_fit_tau2(objective, tau2, starts, rho[0], rho[-1], tol))
    return Type2Result(**result, m=objective.Z.shape[0], n=objective.X.shape[0], convention=convention)


def _fit_ard(objective, tau2, iso_theta, rho_lo, rho_hi, n_starts, key, tol):
    D = objective.dim
    key = jax.random.key(0) if key is None else key
    starts = [np.full(D, np.log(iso_theta))]
    if n_starts > 1:
        starts += list(np.asarray(jax.random.uniform(key, (n_starts - 1, D), minval=rho_lo, maxval=rho_hi)))
    bounds = ((jnp.full(D, rho_lo), None), (jnp.full(D, rho_hi), None))
    fits = [_maximise(objective, tau2, (jnp.asarray(s), None), bounds, tol) for s in starts]
    (best, _), value = max(fits, key=lambda f: f[1])
    ends = sorted(((np.exp(np.asarray(p[0])), v) for p, v in fits), key=lambda t: -t[1])
    return dict(lengthscale=np.exp(np.asarray(best)), log_likelihood=value, local_maxima=ends, grid=None, curve=None)


def _fit_tau2(objective, tau2, starts, rho_lo, rho_hi, tol):
    """Joint (theta, tau2) from each start lengthscale (the local maxima and the top of the grid); best kept."""
    t_lo, t_hi = np.log(_TAU2_BOUNDS[0]), np.log(_TAU2_BOUNDS[1])
    fits = []
    for theta in starts:
        r0 = jnp.log(jnp.asarray(theta, dtype=float))
        bounds = ((jnp.full_like(r0, rho_lo), jnp.asarray(t_lo)), (jnp.full_like(r0, rho_hi), jnp.asarray(t_hi)))
        fits.append(_maximise(objective, None, (r0, jnp.log(jnp.asarray(tau2))), bounds, tol))
    (r, t), value = max(fits, key=lambda f: f[1])
    tau2_hat, theta_hat = float(np.exp(t)), np.exp(np.asarray(r))
    if float(t) <= t_lo + 1e-3 or np.any(np.asarray(r) >= rho_hi - 1e-3):
        warnings.warn(f"joint (theta, tau2) optimisation ran to the boundary (theta = {theta_hat}, tau2 = {tau2_hat:.3g}): "
                      "the BKE pseudolikelihood is unbounded along theta -> inf, tau2 ~ theta^-4 for m > D; "
                      "fix tau2 instead", RuntimeWarning, stacklevel=3)
    theta_out = float(theta_hat) if theta_hat.ndim == 0 else theta_hat
    return dict(lengthscale=theta_out, tau2=tau2_hat, log_likelihood=value)


def tau2_profile(X, Z, lengthscales, *, tau2_bounds=(1e-14, 1e4), convention: str = "exact"):
    """The tau2-profile max_tau2 L(theta, tau2) at each lengthscale: why tau2 is fixed by default.

    For m > D inducing points this profile grows like 2 (m - D) n log theta (the pseudolikelihood is unbounded
    along theta -> inf, tau2 ~ theta^-4); plot it against log theta to see the ridge on your data.

    Args:
        X: (n, D) likelihood points.
        Z: (m, D) inducing points.
        lengthscales: (k,) lengthscales > 0.
        tau2_bounds: the search interval of tau2.
        convention: the model variant (see :func:`bayeskern.bke.log_pseudolikelihood`).

    Returns:
        (values, tau2_star): two (k,) arrays, the profile and its maximiser.

    Raises:
        ValueError: for lengthscales that are not positive, invalid inducing points or an unknown convention.
        RuntimeError: when float64 is off.
    """
    objective = SEPseudolikelihood.build(X, Z, convention=convention)
    lo, hi = np.log(tau2_bounds[0]), np.log(tau2_bounds[1])
    values, tau2_star = [], []
    for theta in np.atleast_1d(np.asarray(check_positive(as_real_array(lengthscales, "lengthscales"), "lengthscales"), float)):
        grid = np.linspace(lo, hi, 65)
        curve = np.asarray(_tau2_curve(objective, jnp.asarray(theta), jnp.asarray(grid)))
        i = int(np.nanargmax(np.where(np.isfinite(curve), curve, -np.inf)))
        bounds = ((jnp.asarray(np.log(theta)), jnp.asarray(grid[max(i - 1, 0)])),
                  (jnp.asarray(np.log(theta)), jnp.asarray(grid[min(i + 1, len(grid) - 1)])))
        (_, t), value = _maximise(objective, None, (jnp.asarray(np.log(theta)), jnp.asarray(grid[i])), bounds, 1e-9)
        values.append(value)
        tau2_star.append(float(np.exp(t)))
    return np.asarray(values), np.asarray(tau2_star)


@jax.jit
def _tau2_curve(objective, theta, log_tau2s):
    return jax.lax.map(lambda t: objective(theta, jnp.exp(t)), log_tau2s)
