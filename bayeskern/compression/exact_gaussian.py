"""The exact Gaussian setting: X ~ N(0, s_x^2 I_d), Y | x ~ N(a.x + b, s^2), RBF kernels.

Closed-form kernel expectations (E1)-(E4), the exact AMCMD^2 against the true conditional family, and the exact
JKIP/ACKIP objectives, which need no data at all (O(m^3) per evaluation).
"""

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_finite_array, as_real_array, check_count, check_key, check_positive, is_concrete
from ..kernels import RBF
from ..linalg.dense import cho_solve_unchecked
from ..optim import adam, minimise, static_partial
from .objectives import compressed_factor

__all__ = ["GaussianSetting", "feature_expectation", "joint_expectation", "conditional_self_term", "joint_constant",
           "exact_amcmd2", "exact_ackip_objective", "exact_jkip_objective", "exact_herding_score", "exact_kip", "sample"]


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class GaussianSetting:
    """The model X ~ N(0, s_x^2 I_d), Y | x ~ N(a.x + b, s^2) with RBF kernels; defaults d = 1, s_x = 1, a = 1.5,
    b = 0, s = 0.5, l = 1.

    Attributes:
        a: (d,) regression coefficients.
        b: intercept.
        sigma: noise sd s > 0.
        sigma_x: feature sd s_x > 0.
        ell_x: lengthscale of the feature kernel.
        ell_y: lengthscale of the response kernel.
        d: the feature dimension.
        kernels: (RBF(ell_x), RBF(ell_y)).

    Raises:
        TypeError: for parameters that are not real numbers.
        ValueError: for non-finite parameters, a that is not a non-empty vector, or scales that are not positive.
    """

    a: jax.Array = field(default_factory=lambda: jnp.array([1.5]))
    b: float = 0.0
    sigma: float = 0.5
    sigma_x: float = 1.0
    ell_x: float = 1.0
    ell_y: float = 1.0

    def __post_init__(self):
        values = (self.a, self.b, self.sigma, self.sigma_x, self.ell_x, self.ell_y)
        # a user's setting is checked; JAX's copies (tracers, or placeholders while it rebuilds pytrees) pass through
        if is_concrete(values) and all(isinstance(v, (int, float, str, list, np.ndarray, jax.Array)) for v in values):
            a = as_finite_array(self.a, "a")
            if a.ndim != 1 or a.shape[0] == 0:
                raise ValueError(f"a must be a vector (d,), got shape {a.shape}")
            as_finite_array(self.b, "b")
            for name in ("sigma", "sigma_x", "ell_x", "ell_y"):
                check_positive(as_real_array(getattr(self, name), name), name)

    @property
    def d(self) -> int:
        """The feature dimension."""
        return self.a.shape[0]

    @property
    def kernels(self):
        """(RBF(ell_x), RBF(ell_y)), the kernels on features and responses."""
        return RBF(self.ell_x), RBF(self.ell_y)


def sample(setting: GaussianSetting, n: int, key):
    """Draws from the model.

    Args:
        setting: the :class:`GaussianSetting`.
        n: number of pairs.
        key: PRNG key.

    Returns:
        (x (n, d), y (n, 1)).

    Raises:
        TypeError: for n not an integer or a key that is not a PRNG key.
        ValueError: for n below 1.
    """
    n, key = check_count(n, "n"), check_key(key)
    kx, ky = jax.random.split(key)
    x = setting.sigma_x * jax.random.normal(kx, (n, setting.d))
    y = x @ setting.a + setting.b + setting.sigma * jax.random.normal(ky, (n,))
    return x, y[:, None]


def feature_expectation(setting: GaussianSetting, cx, cx2, sigma_nu=None):
    """M(x~, x~') = E_x[k(x~, x) k(x, x~')] with x ~ N(0, s^2 I), s = sigma_nu or sigma_x (Broadbent et al. 2025, E1).

    Args:
        setting: the :class:`GaussianSetting`.
        cx: (m, d) points.
        cx2: (m', d) points.
        sigma_nu: sd of the averaging law nu = N(0, sigma_nu^2 I) (default sigma_x: nu = P_X).

    Returns:
        (m, m') array.

    Raises:
        TypeError: for points that are not real numbers.
        ValueError: for non-finite points or points of another dimension than the setting's.
    """
    cx, cx2 = _points(cx, "cx", setting), _points(cx2, "cx2", setting)
    s2 = (setting.sigma_x if sigma_nu is None else sigma_nu) ** 2
    l2 = setting.ell_x**2
    diff = jnp.sum((cx[:, None, :] - cx2[None, :, :]) ** 2, -1)
    tot = jnp.sum((cx[:, None, :] + cx2[None, :, :]) ** 2, -1)
    return (l2 / (l2 + 2 * s2)) ** (setting.d / 2) * jnp.exp(-diff / (4 * l2) - tot / (4 * (l2 + 2 * s2)))


def joint_expectation(setting: GaussianSetting, x, y, sigma_nu=None):
    """Gamma(x~, y~) = E[k(x~, X) l(y~, Y)] with X ~ N(0, s^2 I), Y | X from the model (Broadbent et al. 2025, E2).

    Args:
        setting: the :class:`GaussianSetting`.
        x: (p, d) feature points x~.
        y: (p,) response points y~, paired with x.
        sigma_nu: sd of the averaging law nu = N(0, sigma_nu^2 I) (default sigma_x: nu = P_X).

    Returns:
        (p,) array.

    Raises:
        TypeError: for points that are not real numbers.
        ValueError: for non-finite points or points of another dimension than the setting's.
    """
    x, y = _points(x, "x", setting), _responses(y, "y", x.shape[0])
    s2 = (setting.sigma_x if sigma_nu is None else sigma_nu) ** 2
    l2, ly2 = setting.ell_x**2, setting.ell_y**2
    a = setting.a
    D = ly2 + setting.sigma**2 + s2 * l2 * jnp.dot(a, a) / (l2 + s2)
    shift = y - setting.b - s2 * (x @ a) / (l2 + s2)
    return (l2 / (l2 + s2)) ** (setting.d / 2) * jnp.sqrt(ly2 / D) * jnp.exp(
        -jnp.sum(x**2, -1) / (2 * (l2 + s2)) - shift**2 / (2 * D))


def conditional_self_term(setting: GaussianSetting):
    """c* = E_x ||mu_{Y|X=x}||^2 = l_y / sqrt(l_y^2 + 2 s^2) (Broadbent et al. 2025, E3).

    Args:
        setting: the :class:`GaussianSetting`.

    Returns:
        () array.

    Raises:
        TypeError: for a setting that is not a GaussianSetting.
    """
    _check_setting(setting)
    return setting.ell_y / jnp.sqrt(setting.ell_y**2 + 2 * setting.sigma**2)


def joint_constant(setting: GaussianSetting):
    """E[k(X, X') l(Y, Y')] for independent draws from the model: the JMMD data-data term (Broadbent et al. 2025,
    E4).

    Args:
        setting: the :class:`GaussianSetting`.

    Returns:
        () array.

    Raises:
        TypeError: for a setting that is not a GaussianSetting.
    """
    _check_setting(setting)
    l2, ly2, s2 = setting.ell_x**2, setting.ell_y**2, setting.sigma_x**2
    D2 = ly2 + 2 * setting.sigma**2 + 2 * s2 * l2 * jnp.dot(setting.a, setting.a) / (l2 + 2 * s2)
    return (l2 / (l2 + 2 * s2)) ** (setting.d / 2) * jnp.sqrt(ly2 / D2)


def exact_ackip_objective(cx, cy, setting: GaussianSetting, lam_c, sigma_nu=None):
    """F_exact = tr(L_CC W M W) - 2 sum(W o H), H_jj' = Gamma(x~_j', y~_j), W = (K_CC + m lam_C I)^{-1}: the ACKIP
    objective against the exact law.

    Args:
        cx: (m, d) compressed features.
        cy: (m,) or (m, 1) compressed responses.
        setting: the :class:`GaussianSetting`.
        lam_c: ridge lam_C > 0.
        sigma_nu: sd of the averaging law nu = N(0, sigma_nu^2 I) (default sigma_x: nu = P_X).

    Returns:
        () array.

    Raises:
        TypeError: for points that are not real numbers.
        ValueError: for non-finite points or points of another dimension than the setting's.
    """
    cx = _points(cx, "cx", setting)
    cy, m = _responses(cy, "cy", cx.shape[0]), cx.shape[0]
    check_positive(lam_c, "lam_c")
    kx, ky = setting.kernels
    y = cy.reshape(m)
    L, _ = compressed_factor(kx, cx, m * lam_c)
    M = feature_expectation(setting, cx, cx, sigma_nu)
    H = jax.vmap(lambda yj: joint_expectation(setting, cx, jnp.full(m, yj), sigma_nu))(y)
    WM = cho_solve_unchecked(L, M)
    WMW = cho_solve_unchecked(L, WM.T)
    return jnp.sum(ky.evaluate(cy.reshape(m, 1), cy.reshape(m, 1)) * WMW) - 2.0 * jnp.trace(cho_solve_unchecked(L, H.T))


def exact_amcmd2(cx, cy, setting: GaussianSetting, lam_c, sigma_nu=None):
    """AMCMD^2(P, C; nu) of a compressed set against the true conditional family: c* + F_exact, >= 0.

    Args:
        cx: (m, d) compressed features.
        cy: (m,) or (m, 1) compressed responses.
        setting: the :class:`GaussianSetting`.
        lam_c: ridge lam_C > 0.
        sigma_nu: sd of the averaging law nu = N(0, sigma_nu^2 I) (default sigma_x: nu = P_X).

    Returns:
        () array.

    Raises:
        TypeError: for points that are not real numbers.
        ValueError: for non-finite points or points of another dimension than the setting's.
    """
    return conditional_self_term(setting) + exact_ackip_objective(cx, cy, setting, lam_c, sigma_nu)


def exact_jkip_objective(cx, cy, setting: GaussianSetting):
    """J_exact = sum(K_CC o L_CC) / m^2 - (2/m) sum_j Gamma(x~_j, y~_j); JMMD^2 = J_exact + :func:`joint_constant`.

    Args:
        cx: (m, d) compressed features.
        cy: (m,) or (m, 1) compressed responses.
        setting: the :class:`GaussianSetting`.

    Returns:
        () array.

    Raises:
        TypeError: for points that are not real numbers.
        ValueError: for non-finite points or points of another dimension than the setting's.
    """
    cx = _points(cx, "cx", setting)
    cy, m = _responses(cy, "cy", cx.shape[0]), cx.shape[0]
    kx, ky = setting.kernels
    cy = cy.reshape(m, 1)
    return jnp.sum(kx.evaluate(cx, cx) * ky.evaluate(cy, cy)) / m**2 - 2.0 * jnp.mean(
        joint_expectation(setting, cx, cy[:, 0]))


def exact_herding_score(x, y, cx, cy, row_mask, setting: GaussianSetting):
    """The exact joint-herding score s_t(z) = Gamma(x, y) - (sum_s kappa(z, z_s) + 1/2) / (t + 1) of one candidate.

    Args:
        x: (d,) the candidate's features.
        y: its scalar response.
        cx: (m, d) slots of the set so far.
        cy: (m,) or (m, 1) their responses.
        row_mask: (m,) bool, the t slots already chosen.
        setting: the :class:`GaussianSetting`.

    Returns:
        () array.

    Raises:
        TypeError: for points that are not real numbers.
        ValueError: for non-finite points or points of another dimension than the setting's.
    """
    x = as_finite_array(x, "x")
    if x.shape != (setting.d,):
        raise ValueError(f"x must be one candidate of shape ({setting.d},), got {x.shape}")
    cx = _points(cx, "cx", setting)
    cy = _responses(cy, "cy", cx.shape[0])
    kx, ky = setting.kernels
    t = jnp.sum(row_mask)
    chosen = jnp.sum(kx.evaluate(x[None], cx)[0] * ky.evaluate(jnp.reshape(y, (1, 1)), cy.reshape(-1, 1))[0] * row_mask)
    return joint_expectation(setting, x[None], jnp.reshape(y, (1,)))[0] - (chosen + 0.5) / (t + 1)


def _exact_loss(method, params, labels, context, key):
    setting, lam_c = context
    cx, cy = params
    value = exact_jkip_objective(cx, cy, setting) if method == "jkip" else exact_ackip_objective(cx, cy, setting, lam_c)
    return value, labels


def exact_kip(setting: GaussianSetting, m: int, *, method: str, key, lam_c=1e-3, num_steps: int = 1000,
              optimizer=None, tol: float = 1e-9):
    """JKIP or ACKIP against the exact law (no data): minimise J_exact or F_exact from one draw of m pairs.

    Args:
        setting: the :class:`GaussianSetting`.
        m: size of the set.
        method: ``"jkip"`` or ``"ackip"``.
        key: PRNG key of the starting draw.
        lam_c: ridge lam_C > 0 (ACKIP).
        num_steps: optimiser steps.
        optimizer: an optax transformation (default Adam, learning rate 1e-2).
        tol: stop once the objective changes by at most this (relative) over 50 steps.

    Returns:
        (cx (m, d), cy (m, 1), objective trace).

    Raises:
        TypeError: for m not an integer or a key that is not a PRNG key.
        ValueError: for an unknown method, m below 1 or lam_c not positive.
    """
    if method not in ("jkip", "ackip"):
        raise ValueError(f"method must be 'jkip' or 'ackip', got {method!r}")
    m, key = check_count(m, "m"), check_key(key)
    check_positive(lam_c, "lam_c")
    k_init, k_opt = jax.random.split(key)
    params = sample(setting, m, k_init)
    fitted = minimise(static_partial(_exact_loss, method), params, optimizer or adam(0.01), num_steps=num_steps,
                      data=(setting, jnp.asarray(lam_c)), key=k_opt, steps_per_round=50, tol=tol)
    cx, cy = fitted.params
    return cx, cy, fitted.trace


def _points(c, name, setting):
    """Points (m, d) of the setting's dimension (a 1-D array is m points when d = 1)."""
    c = as_finite_array(c, name)
    if c.ndim == 1 and setting.d == 1:
        c = c[:, None]
    if c.ndim != 2 or c.shape[1] != setting.d:
        raise ValueError(f"{name} must have shape (m, {setting.d}), got {c.shape}")
    return c


def _responses(c, name, m):
    """Scalar responses of m points: (m,) or (m, 1)."""
    c = as_finite_array(c, name)
    if c.size != m or c.ndim > 2 or (c.ndim == 2 and c.shape[1] != 1):
        raise ValueError(f"{name} must have shape ({m},) or ({m}, 1) to match the points, got {c.shape}")
    return c


def _check_setting(setting):
    if not isinstance(setting, GaussianSetting):
        raise TypeError(f"setting must be a GaussianSetting, got {type(setting).__name__}")
