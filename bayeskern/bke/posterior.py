"""Closed-form BKE posterior of the embedding and of the two-sample witness function."""

from collections.abc import Mapping
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._config import require_x64
from .._validation import as_points, as_real_array, check_positive, is_concrete
from ..fitted import fitted
from ..kernels.base import Kernel
from ..kernels.blockwise import kernel_row_sums
from ..kernels.stationary import RBF
from ..linalg import cho_solve_psd, cholesky, whiten
from .convolved import ConvolvedSE

__all__ = ["EmbeddingPosterior", "embedding_posterior", "WitnessPosterior", "witness_posterior"]

_NEG_VAR_TOL = 1e-10


@fitted
class EmbeddingPosterior:
    """Gaussian posterior of mu_theta given the empirical embedding at locations T (Flaxman et al. 2016, eqs. 7-8).

    Predictions at s points cost O(p^2 s).

    Attributes:
        prior_cov: the prior covariance kernel r_theta.
        T: (p, D) conditioning locations.
        chol: (p, p) Cholesky factor of A = R_TT + tau2/n I.
        alpha: (p,) A^{-1} y, y the empirical embedding at T.
    """

    prior_cov: Kernel
    T: jax.Array
    chol: jax.Array
    alpha: jax.Array

    def mean(self, Xs):
        """Posterior mean R_*T alpha.

        Args:
            Xs: (s, D) query points.

        Returns:
            (s,) array.

        Raises:
            TypeError: for points that are not real numbers.
            ValueError: for non-finite points or points of another dimension.
        """
        return self.prior_cov.cross(Xs, self.T) @ self.alpha

    def _whitened_cross(self, Xs):
        return whiten(self.chol, self.prior_cov.cross(self.T, Xs))

    def var(self, Xs):
        """Pointwise posterior variance r(x, x) - ||L^{-1} R_T*||^2.

        Args:
            Xs: (s, D) query points.

        Returns:
            (s,) array, >= 0.

        Raises:
            TypeError: for points that are not real numbers.
            ValueError: for non-finite points or points of another dimension.
            ArithmeticError: for a variance clearly below zero (a numerically unstable R_TT).
        """
        prior = self.prior_cov.diag(Xs)
        v = prior - jnp.sum(self._whitened_cross(Xs) ** 2, axis=0)
        _check_variances(v, prior)
        return jnp.maximum(v, 0.0)

    def cov(self, Xs):
        """Joint posterior covariance R_** - V^T V.

        Args:
            Xs: (s, D) query points.

        Returns:
            (s, s) symmetric array.

        Raises:
            TypeError: for points that are not real numbers.
            ValueError: for non-finite points or points of another dimension.
            ArithmeticError: for a variance clearly below zero (a numerically unstable R_TT).
        """
        V = self._whitened_cross(Xs)
        C = self.prior_cov.gram(Xs) - V.T @ V
        _check_variances(jnp.diag(C), self.prior_cov.diag(Xs))
        return 0.5 * (C + C.T)

    def sample(self, key, Xs, n_draws: int = 1):
        """Joint posterior draws of mu at query points, via the Cholesky factor of C + 1e-10 max(diag C) I.

        Args:
            key: PRNG key.
            Xs: (s, D) query points.
            n_draws: number of draws.

        Returns:
            (n_draws, s) array.

        Raises:
            TypeError: for points that are not real numbers.
            ValueError: for non-finite points or points of another dimension.
            CholeskyError: when the posterior covariance cannot be factorised.
        """
        m, C = self.mean(Xs), self.cov(Xs)
        L = cholesky(C + 1e-10 * jnp.max(jnp.diag(C)) * jnp.eye(C.shape[0]), what="posterior covariance")
        return m + jax.random.normal(key, (n_draws, m.shape[0])) @ L.T


def _check_variances(v, prior):
    if is_concrete(v) and np.any(np.asarray(v) < -_NEG_VAR_TOL * np.asarray(prior)):
        raise ArithmeticError(f"posterior variance below zero (min {float(jnp.min(v)):.3e}): numerically unstable R_TT")


def embedding_posterior(X, kernel: Kernel, tau2=1.0, *, T=None, prior_cov: Kernel | None = None) -> EmbeddingPosterior:
    """Posterior of the mean embedding of a sample for fixed hyperparameters (Flaxman et al. 2016, eqs. 7-8).

    The GP prior mu ~ GP(0, r) is conditioned on the empirical embedding y = mu_hat(T) at locations T with noise
    variance tau2 / n; one Cholesky factor of R_TT + (tau2 / n) I, O(p^3) once and O(p^2) per query point.

    Args:
        X: (n, D) float array, the sample.
        kernel: the embedding kernel k_theta.
        tau2: noise variance tau^2 > 0 of the empirical embedding.
        T: (p, D) conditioning locations (default X).
        prior_cov: the prior covariance r (default ``ConvolvedSE(kernel)``); passing ``kernel`` itself (not a
            valid RKHS prior) reproduces the S-KMSE estimator with lambda = tau2 / n^2.

    Returns:
        EmbeddingPosterior: ``mean(X_new)``, ``var(X_new)``, ``cov(X_new)`` and joint ``sample(key, X_new)``.

    Raises:
        ValueError: for non-finite inputs or tau2 <= 0.
        RuntimeError: when float64 is off.
    """
    require_x64("embedding_posterior")
    X = as_points(X, "X")
    T = X if T is None else as_points(T, "T")
    check_positive(tau2, "tau2")
    prior_cov = ConvolvedSE(kernel) if prior_cov is None else prior_cov
    n = X.shape[0]
    y = kernel_row_sums(kernel, T, X) / n
    A = prior_cov.gram(T) + tau2 / n * jnp.eye(T.shape[0])
    L = cholesky(A, what="R_TT + tau2/n I")
    return EmbeddingPosterior(prior_cov, T, L, cho_solve_psd(L, y))


@fitted
class WitnessPosterior:
    """Posterior of the witness mu_P - mu_Q on a grid of G points.

    Attributes:
        grid: (G, D) the grid.
        mean: (G,) posterior mean.
        lower: (G,) lower end of the pointwise band.
        upper: (G,) upper end of the pointwise band.
        band: the band's probability mass.
        draws: (S, G) posterior draws over hyperparameter draws; None for fixed hyperparameters.
        cov: (G, G) the exact Gaussian covariance for fixed hyperparameters; None with draws.
        excludes_zero: (G,) bool, where the band lies entirely above or below 0.
        fraction_excluding_zero: the share of the grid where it does.
    """

    grid: np.ndarray
    mean: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    band: float
    draws: np.ndarray | None = None
    cov: np.ndarray | None = None

    @property
    def excludes_zero(self) -> np.ndarray:
        """Boolean (G,): where the band lies entirely above or below 0."""
        return (self.lower > 0) | (self.upper < 0)

    @property
    def fraction_excluding_zero(self) -> float:
        """The share of grid points whose band excludes 0."""
        return float(np.mean(self.excludes_zero))


def witness_posterior(XP, XQ, kernel: Kernel | None = None, tau2=1.0, *, grid, hyper_draws=None, make_kernel=None,
                      band: float = 0.8, key=None, prior_cov=None) -> WitnessPosterior:
    """Posterior of the witness function mu_P - mu_Q on a grid, with a pointwise credible band.

    mu_P and mu_Q get independent BKE posteriors (noise tau2 / n_P and tau2 / n_Q). With fixed hyperparameters the
    witness posterior is Gaussian (mean m_P - m_Q, covariance C_P + C_Q) and the band comes from normal
    quantiles; with hyperparameter draws, each draw contributes one joint sample of mu_P and mu_Q on the grid and
    the band comes from empirical quantiles.

    Args:
        XP: (n_P, D) sample of P.
        XQ: (n_Q, D) sample of Q.
        kernel: the kernel for fixed hyperparameters (omit with ``hyper_draws``).
        tau2: noise variance tau^2 > 0.
        grid: (G, D) evaluation points.
        hyper_draws: dict of arrays with leading dimension S (e.g. ``MCMCResult.draws()``); each draw becomes
            ``(RBF(draw["lengthscale"]), draw.get("tau2", tau2))``, or ``make_kernel(draw)``.
        make_kernel: ``draw -> (kernel, tau2)`` (traceable) for kernels other than the RBF.
        band: probability mass of the pointwise band, in (0, 1).
        key: PRNG key; needed with ``hyper_draws``.
        prior_cov: the prior covariance kernel (default the convolved SE kernel of ``kernel``).

    Returns:
        WitnessPosterior: ``grid``, ``mean`` (G,), ``lower`` and ``upper`` (G,), the draws (S, G) or the covariance
        (G, G), and ``fraction_excluding_zero``.

    Raises:
        TypeError: for hyper_draws that are not a non-empty dict of arrays.
        ValueError: for samples or a grid of different dimensions, neither or both of ``kernel`` and
            ``hyper_draws``, draws without a lengthscale (and no ``make_kernel``), empty, unequal-length, non-finite or
            non-positive draws, a missing key, or a band outside (0, 1).
        ArithmeticError: when a witness draw is not finite (a posterior covariance could not be factorised).

    Examples:
        >>> import numpy as np, bayeskern as bk
        >>> from bayeskern.bke import witness_posterior
        >>> rng = np.random.default_rng(0)
        >>> XP, XQ = rng.normal(-1, 1, (200, 1)), rng.normal(1, 1, (200, 1))
        >>> post = witness_posterior(XP, XQ, bk.RBF(1.0), grid=np.linspace(-4, 4, 81)[:, None])
        >>> post.mean.shape, bool(post.mean[20] > 0 > post.mean[60]), bool(post.fraction_excluding_zero > 0.5)
        ((81,), True, True)
    """
    if not 0 < band < 1:
        raise ValueError(f"band must lie in (0, 1), got {band}")
    grid = as_points(grid, "grid")
    lo_q, hi_q = (1 - band) / 2, (1 + band) / 2
    if hyper_draws is None:
        if kernel is None:
            raise ValueError("pass kernel (and tau2) for fixed hyperparameters, or hyper_draws")
        pP = embedding_posterior(XP, kernel, tau2, prior_cov=prior_cov)
        pQ = embedding_posterior(XQ, kernel, tau2, prior_cov=prior_cov)
        mean = np.asarray(pP.mean(grid) - pQ.mean(grid))
        cov = np.asarray(pP.cov(grid) + pQ.cov(grid))
        sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
        z = float(jax.scipy.stats.norm.ppf(hi_q))
        return WitnessPosterior(np.asarray(grid), mean, mean - z * sd, mean + z * sd, band, None, cov)
    if key is None:
        raise ValueError("hyper_draws need a PRNG key (key=...) for the embedding draws")
    if prior_cov is not None:
        raise ValueError("prior_cov applies to fixed hyperparameters only; with hyper_draws r_theta follows each draw")
    if kernel is not None:
        raise ValueError("kernel applies to fixed hyperparameters only: with hyper_draws each draw makes the kernel "
                         "(pass make_kernel for kernels other than the RBF)")
    default_kernel = make_kernel is None
    draws = _checked_draws(hyper_draws, positive=("lengthscale", "tau2") if default_kernel else ())
    S = len(next(iter(draws.values())))
    if default_kernel:  # a module-level make_kernel: the compiled draws are reused by later calls
        if "lengthscale" not in draws:
            raise ValueError(f"hyper_draws need a 'lengthscale' entry (or pass make_kernel), got {sorted(draws)}")
        draws.setdefault("tau2", jnp.full(S, check_positive(tau2, "tau2"), dtype=jnp.result_type(float)))
        make_kernel = _se_kernel_from_draw
    XP, XQ = as_points(XP, "XP"), as_points(XQ, "XQ")
    out = np.asarray(_witness_draws(make_kernel, draws, XP, XQ, grid, jax.random.split(key, S)))
    failed = np.flatnonzero(~np.isfinite(out).all(1))
    if failed.size:
        raise ArithmeticError(f"{failed.size} of {S} witness draws are not finite (hyper_draws at draws "
                              f"{failed[:10].tolist()}): a posterior covariance could not be factorised there")
    return WitnessPosterior(np.asarray(grid), out.mean(0), np.quantile(out, lo_q, axis=0),
                            np.quantile(out, hi_q, axis=0), band, out, None)


def _checked_draws(hyper_draws, positive):
    """``hyper_draws`` as a dict of float arrays with one common leading length S >= 1, every value finite and the
    entries named in ``positive`` > 0; errors name the entry and the offending draws."""
    if not isinstance(hyper_draws, Mapping) or not hyper_draws:
        raise TypeError(f"hyper_draws must be a non-empty dict of arrays with leading dimension S, got {hyper_draws!r}")
    draws, lengths = {}, set()
    for name, value in hyper_draws.items():
        what = f"hyper_draws[{name!r}]"
        value = as_real_array(value, what)
        if value.ndim == 0 or value.shape[0] == 0:
            raise ValueError(f"{what} must hold S >= 1 draws along its first axis, got shape {value.shape}")
        flat = np.asarray(value).reshape(value.shape[0], -1)
        bad = ~np.isfinite(flat).all(1) | ((flat <= 0).any(1) if name in positive else False)
        if bad.any():
            kind = "non-finite or non-positive" if name in positive else "non-finite"
            raise ValueError(f"{what} holds {int(bad.sum())} {kind} draw(s) (at draws "
                             f"{np.flatnonzero(bad)[:10].tolist()}); each draw must be finite"
                             f"{' and > 0' if name in positive else ''}")
        draws[name] = value
        lengths.add(value.shape[0])
    if len(lengths) > 1:
        raise ValueError(f"hyper_draws entries must share their number of draws S, got "
                         f"{ {name: int(value.shape[0]) for name, value in draws.items()} }")
    return draws


def _se_kernel_from_draw(draw):
    return RBF(draw["lengthscale"]), draw["tau2"]


@partial(jax.jit, static_argnums=0)
def _witness_draws(make_kernel, draws, XP, XQ, grid, keys):
    """Joint draws of mu_P(grid) - mu_Q(grid), one per hyperparameter draw: (S, G), sequentially (memory O(n^2))."""

    def one(args):
        draw, key = args
        kernel, tau2 = make_kernel(draw)
        kP, kQ = jax.random.split(key)
        fP = embedding_posterior(XP, kernel, tau2).sample(kP, grid)[0]
        fQ = embedding_posterior(XQ, kernel, tau2).sample(kQ, grid)[0]
        return fP - fQ

    return jax.lax.map(one, (draws, keys))
