"""The exact Gaussian setting: X ~ N(0, s_x^2 I_d), Y | x ~ N(a.x + b, s^2), RBF kernels.

Closed-form kernel expectations (E1)-(E4), the exact AMCMD^2 against the true conditional family, and the exact
JKIP/ACKIP objectives, which need no data at all (O(m^3) per evaluation).
"""

from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp

from ..kernels import RBF
from ..linalg import cho_solve_psd
from ..optim import adam, minimise
from .objectives import compressed_factor

__all__ = ["GaussianSetting", "feature_expectation", "joint_expectation", "conditional_self_term", "joint_constant",
           "exact_amcmd2", "exact_ackip_objective", "exact_jkip_objective", "exact_herding_score", "exact_kip", "sample"]


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class GaussianSetting:
    """Model and kernel parameters; defaults (d = 1, s_x = 1, a = 1.5, b = 0, s = 0.5, l = 1)."""

    a: jax.Array = field(default_factory=lambda: jnp.array([1.5]))
    b: float = 0.0
    sigma: float = 0.5
    sigma_x: float = 1.0
    ell_x: float = 1.0
    ell_y: float = 1.0

    @property
    def d(self) -> int:
        return self.a.shape[0]

    @property
    def kernels(self):
        return RBF(self.ell_x), RBF(self.ell_y)


def sample(setting: GaussianSetting, n: int, key):
    """n draws (x (n, d), y (n, 1)) from the model."""
    kx, ky = jax.random.split(key)
    x = setting.sigma_x * jax.random.normal(kx, (n, setting.d))
    y = x @ setting.a + setting.b + setting.sigma * jax.random.normal(ky, (n,))
    return x, y[:, None]


def feature_expectation(setting: GaussianSetting, cx, cx2, sigma_nu=None):
    """(E1) M(x~, x~') = E_x[k(x~, x) k(x, x~')] with x ~ N(0, s^2 I), s = sigma_nu or sigma_x: (m, m')."""
    s2 = (setting.sigma_x if sigma_nu is None else sigma_nu) ** 2
    l2 = setting.ell_x**2
    diff = jnp.sum((cx[:, None, :] - cx2[None, :, :]) ** 2, -1)
    tot = jnp.sum((cx[:, None, :] + cx2[None, :, :]) ** 2, -1)
    return (l2 / (l2 + 2 * s2)) ** (setting.d / 2) * jnp.exp(-diff / (4 * l2) - tot / (4 * (l2 + 2 * s2)))


def joint_expectation(setting: GaussianSetting, x, y, sigma_nu=None):
    """(E2) Gamma(x~, y~) = E[k(x~, X) l(y~, Y)] with X ~ N(0, s^2 I), Y | X from the model: (p,) for x (p, d), y (p,)."""
    s2 = (setting.sigma_x if sigma_nu is None else sigma_nu) ** 2
    l2, ly2 = setting.ell_x**2, setting.ell_y**2
    a = setting.a
    D = ly2 + setting.sigma**2 + s2 * l2 * jnp.dot(a, a) / (l2 + s2)
    shift = y - setting.b - s2 * (x @ a) / (l2 + s2)
    return (l2 / (l2 + s2)) ** (setting.d / 2) * jnp.sqrt(ly2 / D) * jnp.exp(
        -jnp.sum(x**2, -1) / (2 * (l2 + s2)) - shift**2 / (2 * D))


def conditional_self_term(setting: GaussianSetting):
    """(E3) c* = E_x ||mu_{Y|X=x}||^2 = l_y / sqrt(l_y^2 + 2 s^2)."""
    return setting.ell_y / jnp.sqrt(setting.ell_y**2 + 2 * setting.sigma**2)


def joint_constant(setting: GaussianSetting):
    """(E4) E[k(X, X') l(Y, Y')] for independent draws from the model (the JMMD data-data term)."""
    l2, ly2, s2 = setting.ell_x**2, setting.ell_y**2, setting.sigma_x**2
    D2 = ly2 + 2 * setting.sigma**2 + 2 * s2 * l2 * jnp.dot(setting.a, setting.a) / (l2 + 2 * s2)
    return (l2 / (l2 + 2 * s2)) ** (setting.d / 2) * jnp.sqrt(ly2 / D2)


def exact_ackip_objective(cx, cy, setting: GaussianSetting, lam_c, sigma_nu=None):
    """F_exact = tr(L_CC W M W) - 2 sum(W o H), H_jj' = Gamma(x~_j', y~_j), W = (K_CC + m lam_C I)^{-1}."""
    m = cx.shape[0]
    kx, ky = setting.kernels
    y = cy.reshape(m)
    L, _ = compressed_factor(kx, cx, m * lam_c)
    M = feature_expectation(setting, cx, cx, sigma_nu)
    H = jax.vmap(lambda yj: joint_expectation(setting, cx, jnp.full(m, yj), sigma_nu))(y)
    WM = cho_solve_psd(L, M)
    WMW = cho_solve_psd(L, WM.T)
    return jnp.sum(ky.evaluate(cy.reshape(m, 1), cy.reshape(m, 1)) * WMW) - 2.0 * jnp.trace(cho_solve_psd(L, H.T))


def exact_amcmd2(cx, cy, setting: GaussianSetting, lam_c, sigma_nu=None):
    """AMCMD^2(P, C; nu) against the true conditional family, nu = N(0, sigma_nu^2 I) (default P_X): >= 0."""
    return conditional_self_term(setting) + exact_ackip_objective(cx, cy, setting, lam_c, sigma_nu)


def exact_jkip_objective(cx, cy, setting: GaussianSetting):
    """J_exact = sum(K_CC o L_CC) / m^2 - (2/m) sum_j Gamma(x~_j, y~_j); JMMD^2 = J_exact + joint_constant."""
    m = cx.shape[0]
    kx, ky = setting.kernels
    cy = cy.reshape(m, 1)
    return jnp.sum(kx.evaluate(cx, cx) * ky.evaluate(cy, cy)) / m**2 - 2.0 * jnp.mean(
        joint_expectation(setting, cx, cy[:, 0]))


def exact_herding_score(x, y, cx, cy, row_mask, setting: GaussianSetting):
    """s_t^exact(z) = Gamma(x, y) - (sum_s kappa(z, z_s) + 1/2) / (t + 1) for one candidate (x (d,), y scalar)."""
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

    Returns (cx (m, d), cy (m, 1), objective trace).
    """
    if method not in ("jkip", "ackip"):
        raise ValueError(f"method must be 'jkip' or 'ackip', got {method!r}")
    k_init, k_opt = jax.random.split(key)
    params = sample(setting, m, k_init)
    fitted = minimise(partial(_exact_loss, method), params, optimizer or adam(0.01), num_steps=num_steps,
                      data=(setting, jnp.asarray(lam_c)), key=k_opt, steps_per_round=50, tol=tol)
    cx, cy = fitted.params
    return cx, cy, fitted.trace
