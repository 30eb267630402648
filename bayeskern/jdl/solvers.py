"""Solvers for the low-rank JDL problem: closed forms and the exact two-multiplier dual.

All solvers minimise sum(W H^2 - 2 Gamma H) over H (m_Y, m_X). The constrained solver works in NumPy float64:
it is a pair of nested monotone piecewise-linear root searches over O(m_X m_Y) arrays, a few tens of
evaluations in total, which compiled code would not speed up.
"""

from typing import NamedTuple

import numpy as np

from ..fitted import saveable
from .._validation import as_matrix
from .problem import JDLProblem, check_problem

__all__ = ["JDLSolution", "solve_unconstrained", "solve_normalised", "solve_positive", "positivity_margin"]

_REL_TOL = 1e-13


@saveable
class JDLSolution(NamedTuple):
    """Coefficients H with the certificate of the solver; ``None`` marks what does not apply to the constraint.

    Attributes:
        H: (m_Y, m_X) coefficients of the model.
        mu: multiplier of the normalisation <S, H> = 0; None where it was not imposed, or for a solver that
            reports no multipliers (JPDL's interior-point program).
        nu: multiplier of the positivity constraint (0.0 where it is inactive); None without one.
        normalisation: the relative residual |<S, H>| / sum|S * H| (whether or not it was imposed).
        positivity: the positivity margin (g(H) of the single-inequality tightening, the worst grid value minus
            the margin for the grid constraint, the smallest eigenvalue of the sum-of-squares Gram matrix for
            JPDL); None without a positivity constraint.
        iterations: root-search evaluations, cutting-plane rounds or interior-point iterations (0 in closed form).
    """

    H: np.ndarray
    mu: float | None
    nu: float | None
    normalisation: float
    positivity: float | None
    iterations: int


def positivity_margin(H, C_lo, C_hi) -> float:
    """g(H) = 1 + sum min(C_lo H, C_hi H), the left side of the single-inequality tightening (Filipović et al.
    2021, eq. 29).

    Args:
        H: (m_Y, m_X) coefficients.
        C_lo: (m_Y, m_X) lower bounds.
        C_hi: (m_Y, m_X) upper bounds.

    Returns:
        float.

    Raises:
        TypeError: for inputs that are not real numbers.
        ValueError: for non-finite inputs or shapes that do not match.
    """
    H = np.asarray(as_matrix(H, "H"))
    C_lo, C_hi = np.asarray(as_matrix(C_lo, "C_lo", H.shape)), np.asarray(as_matrix(C_hi, "C_hi", H.shape))
    return float(1.0 + np.sum(np.minimum(C_lo * H, C_hi * H)))


def _normalisation_residual(S, H) -> float:
    scale = np.sum(np.abs(S * H))
    return float(abs(np.sum(S * H)) / scale) if scale > 0 else 0.0


def _arrays(problem: JDLProblem):
    check_problem(problem)
    return np.asarray(problem.W, np.float64), np.asarray(problem.Gamma, np.float64), np.asarray(problem.S, np.float64)


def solve_unconstrained(problem: JDLProblem) -> JDLSolution:
    """Unconstrained JDL: H = Gamma / W.

    Args:
        problem: the JDLProblem (:func:`~bayeskern.jdl.jdl_problem`).

    Returns:
        JDLSolution: H and its certificate.

    Raises:
        TypeError: for a problem that is not a JDLProblem.
    """
    W, Gamma, S = _arrays(problem)
    H = Gamma / W
    return JDLSolution(H, None, None, _normalisation_residual(S, H), None, 0)


def solve_normalised(problem: JDLProblem) -> JDLSolution:
    """JDL with the normalisation <S, H> = 0: H = (Gamma - mu S) / W in closed form.

    Args:
        problem: the JDLProblem (:func:`~bayeskern.jdl.jdl_problem`).

    Returns:
        JDLSolution: H and its certificate.

    Raises:
        TypeError: for a problem that is not a JDLProblem.
    """
    W, Gamma, S = _arrays(problem)
    denom = np.sum(S * S / W)
    mu = float(np.sum(S * Gamma / W) / denom) if denom > 0 else 0.0
    H = (Gamma - mu * S) / W
    return JDLSolution(H, mu, None, _normalisation_residual(S, H), None, 0)


def _threshold(base, W, C_lo, C_hi, nu):
    """Soft-threshold minimiser T of the separable Lagrangian for Gamma - mu S = base, and the active bounds."""
    alpha, beta = base + nu * C_lo, base + nu * C_hi
    up, down = alpha > 0, beta < 0
    T = np.where(up, alpha / W, np.where(down, beta / W, 0.0))
    C_act = np.where(up, C_lo, np.where(down, C_hi, 0.0))
    return T, C_act, up | down


def _decreasing_root(f, x, lo=None, hi=None, step=1.0, maxiter=300):
    """Root of a continuous non-increasing piecewise-linear f (returning value, slope, tolerance) by Newton steps
    on the current linear piece, bisection when a step leaves the bracket; returns (x, evaluations)."""
    best = x
    for it in range(1, maxiter + 1):
        v, slope, tol = f(x)
        best = x
        if abs(v) <= tol:
            return x, it
        if v > 0:
            lo = x
        else:
            hi = x
        cand = x - v / slope if slope < 0 else np.nan
        if lo is not None and hi is not None:
            if not lo < cand < hi:
                cand = 0.5 * (lo + hi)
            if hi - lo <= 4 * np.finfo(float).eps * max(abs(lo), abs(hi), 1e-300):
                return best, it
        elif not np.isfinite(cand) or cand == x:
            cand = x + (step if v > 0 else -step)
            step *= 2.0
        x = cand
    raise RuntimeError(f"JDL dual root search did not converge in {maxiter} evaluations")


def solve_positive(problem: JDLProblem, C_lo, C_hi, *, normalise: bool = True) -> JDLSolution:
    """JDL under the positivity tightening g(H) = 1 + sum min(C_lo H, C_hi H) >= 0 (Filipović et al. 2021, eq. 29),
    and by default the normalisation <S, H> = 0 (eq. 20), by an exact dual method.

    Two nested monotone searches: mu*(nu) makes <S, T(mu, nu)> = 0, and nu >= 0 makes g(T(mu*(nu), nu)) = 0
    (or nu = 0 when the normalised solution is already feasible); the final pattern is polished by the 2 x 2
    KKT system and round-off infeasibility is removed by scaling H / (1 + delta).

    Args:
        problem: the JDLProblem.
        C_lo: (m_Y, m_X) lower bounds of the tightening (:func:`~bayeskern.jdl.box_bounds` or
            :func:`~bayeskern.jdl.kernel_bounds`).
        C_hi: (m_Y, m_X) upper bounds, >= C_lo.
        normalise: also impose <S, H> = 0.

    Returns:
        JDLSolution: H with its multipliers and margins.

    Raises:
        TypeError: for a problem that is not a JDLProblem.
        ValueError: for bounds of another shape or C_lo > C_hi somewhere.
        RuntimeError: when the dual root search does not converge.
    """
    W, Gamma, S = _arrays(problem)
    C_lo, C_hi = np.asarray(C_lo, np.float64), np.asarray(C_hi, np.float64)
    if C_lo.shape != W.shape or C_hi.shape != W.shape:
        raise ValueError(f"C_lo and C_hi must have the problem's shape {W.shape}, got {C_lo.shape} and {C_hi.shape}")
    if np.any(C_lo > C_hi):
        raise ValueError("C_lo must not exceed C_hi entrywise (the bounds are the min and max of basis products)")
    S_data = S
    if not normalise:
        S = np.zeros_like(S)
    count = [0]

    def inner(nu, mu0=0.0):
        """mu*(nu): the root of phi(mu) = <S, T(mu, nu)>."""
        if not np.any(S):
            return 0.0

        def phi(mu):
            count[0] += 1
            T, _, active = _threshold(Gamma - mu * S, W, C_lo, C_hi, nu)
            slope = -np.sum(np.where(active, S * S / W, 0.0))
            return np.sum(S * T), slope, _REL_TOL * np.sum(np.abs(S * T))

        step = max(1.0, abs(mu0)) * 1e-3 + np.max(np.abs(Gamma)) / np.max(np.abs(S))
        return _decreasing_root(phi, mu0, step=step)[0]

    mu0 = inner(0.0)
    H0 = _threshold(Gamma - mu0 * S, W, C_lo, C_hi, 0.0)[0]
    if positivity_margin(H0, C_lo, C_hi) >= 0:
        return JDLSolution(H0, mu0 if normalise else None, 0.0, _normalisation_residual(S_data, H0),
                           positivity_margin(H0, C_lo, C_hi), count[0])

    state = {"mu": mu0}

    def minus_psi(nu):
        count[0] += 1
        mu = inner(nu, state["mu"])
        state["mu"] = mu
        T, C_act, active = _threshold(Gamma - mu * S, W, C_lo, C_hi, nu)
        g = positivity_margin(T, C_lo, C_hi)
        s_ss = np.sum(np.where(active, S * S / W, 0.0))
        s_sc = np.sum(np.where(active, S * C_act / W, 0.0))
        s_cc = np.sum(np.where(active, C_act**2 / W, 0.0))
        slope = s_cc - (s_sc**2 / s_ss if s_ss > 0 else 0.0)
        return -g, -slope, _REL_TOL

    scale = np.max(np.abs(Gamma)) / max(np.max(np.abs(C_lo)), np.max(np.abs(C_hi)), 1e-300)
    nu, _ = _decreasing_root(minus_psi, scale, lo=0.0, step=scale)
    mu = inner(nu, state["mu"])
    H, C_act, active = _threshold(Gamma - mu * S, W, C_lo, C_hi, nu)
    mu, nu, H = _polish(Gamma, W, S, C_lo, C_hi, C_act, active, mu, nu, H)
    g = positivity_margin(H, C_lo, C_hi)
    if g < 0:  # round-off: scaling keeps <S, H> = 0 (homogeneous) and makes g = 0
        H = H / (1.0 - g)
        g = positivity_margin(H, C_lo, C_hi)
    return JDLSolution(H, float(mu) if normalise else None, float(nu), _normalisation_residual(S_data, H), g,
                       count[0])


def _polish(Gamma, W, S, C_lo, C_hi, C_act, active, mu, nu, H):
    """Solve the 2 x 2 KKT system on the final sign pattern; keep it if the pattern is unchanged."""
    r_s = np.sum(np.where(active, S * Gamma / W, 0.0))
    r_c = np.sum(np.where(active, C_act * Gamma / W, 0.0))
    s_ss = np.sum(np.where(active, S * S / W, 0.0))
    s_sc = np.sum(np.where(active, S * C_act / W, 0.0))
    s_cc = np.sum(np.where(active, C_act**2 / W, 0.0))
    if s_ss > 0:
        system = np.array([[-s_ss, s_sc], [-s_sc, s_cc]])
        rhs = np.array([-r_s, -1.0 - r_c])
    else:  # no normalisation (or S vanishes on the pattern): g = 1 + r_c + nu s_cc = 0
        system, rhs = np.array([[1.0, 0.0], [0.0, s_cc]]), np.array([mu, -1.0 - r_c])
    try:
        new_mu, new_nu = np.linalg.solve(system, rhs)
    except np.linalg.LinAlgError:
        return mu, nu, H
    if not (np.isfinite(new_mu) and np.isfinite(new_nu) and new_nu >= 0):
        return mu, nu, H
    T, _, new_active = _threshold(Gamma - new_mu * S, W, C_lo, C_hi, new_nu)
    if np.array_equal(new_active, active) and np.array_equal(T > 0, H > 0):
        return new_mu, new_nu, T
    return mu, nu, H
