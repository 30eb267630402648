"""Low-rank JDL problem and solvers against the full n^2 problem and a generic QP."""

import jax.numpy as jnp
import jaxopt
import numpy as np
import pytest

from bayeskern.jdl import (box_bounds, fit_jdl, jdl_bases, jdl_problem, objective, positivity_margin, solve_normalised,
                           solve_positive, solve_unconstrained)
from bayeskern.kernels import RBF


def _sample(rng, n, d=1):
    X = rng.standard_normal((n, d))
    return X, 0.7 * X + 0.5 * rng.standard_normal((n, d))


def _Q(basis, n):
    Q = np.zeros((n, basis.R.shape[0]))
    Q[np.asarray(basis.pivots)] = np.asarray(basis.R)
    return Q


def _full_objective(H, K_x, K_y, lam):
    """R_lambda(H) of (14) on full matrices."""
    n = K_x.shape[0]
    grid = K_y @ H @ K_x
    return (np.trace(H.T @ K_y @ K_y @ H @ K_x @ K_x) / n**2 - 2 / n * np.trace(grid) + 2 / n**2 * grid.sum()
            + lam * np.trace(H.T @ K_y @ H @ K_x))


def _full_solutions(K_x, K_y, lam):
    """Small-n reference: (lam I + K_X (x) K_Y / n^2) vec H = rhs, unconstrained and normalised; grid values."""
    n = K_x.shape[0]
    system = lam * np.eye(n * n) + np.kron(K_x, K_y) / n**2
    E = np.ones((n, n))
    solve = lambda rhs: np.linalg.solve(system, rhs.ravel(order="F")).reshape(n, n, order="F")  # noqa: E731
    H0, H1 = solve(np.eye(n) / n - E / n**2), solve(E)
    t = lambda H: np.sum(K_y @ H @ K_x)  # noqa: E731
    return K_y @ H0 @ K_x, K_y @ (H0 - t(H0) / t(H1) * H1) @ K_x


def test_reduced_objective_equals_full_objective_and_loss_identity(rng):
    n, lam = 30, 1e-3
    X, Y = _sample(rng, n)
    kx, ky = RBF(0.8), RBF(1.1)
    b = jdl_bases(X, Y, kx, ky, tol=1e-6)
    p = jdl_problem(b.basis_x, b.basis_y, lam)
    K_x, K_y = np.asarray(kx.gram(X)), np.asarray(ky.gram(Y))
    Ht = rng.standard_normal(np.asarray(p.W).shape)
    H = _Q(b.basis_y, n) @ Ht @ _Q(b.basis_x, n).T
    full = _full_objective(H, K_x, K_y, lam)
    assert float(objective(p, jnp.asarray(Ht))) == pytest.approx(full, rel=1e-9)
    grid = K_y @ H @ K_x  # (grid)_{ij} = h(x_j, y_i)
    loss = np.mean((n * np.eye(n) - 1 - grid) ** 2) + lam * np.trace(H.T @ K_y @ H @ K_x)
    assert loss == pytest.approx(full + n - 1, rel=1e-10)


def test_low_rank_solution_converges_to_the_full_problem(rng):
    """ε -> 0 at n = 40: grid values of the unconstrained and normalised solutions -> the n^2 solution."""
    n, lam = 40, 1e-3
    X, Y = _sample(rng, n)
    kx, ky = RBF(1.0), RBF(1.0)
    K_x, K_y = np.asarray(kx.gram(X)), np.asarray(ky.gram(Y))
    full = _full_solutions(K_x, K_y, lam)
    errors = []
    for tol in (1e-4, 1e-8, 1e-15):
        b = jdl_bases(X, Y, kx, ky, tol=tol)
        p = jdl_problem(b.basis_x, b.basis_y, lam)
        A_x, A_y = np.asarray(b.basis_x.A), np.asarray(b.basis_y.A)
        errors.append([np.linalg.norm(A_y @ s.H @ A_x.T - ref) / np.linalg.norm(ref)
                       for s, ref in zip((solve_unconstrained(p), solve_normalised(p)), full)])
    errors = np.array(errors)
    assert np.all(np.diff(errors, axis=0) < 0)  # monotone in ε
    assert errors[-1].max() <= 1e-9


def test_normalised_solution_is_stationary_with_one_multiplier(rng):
    X, Y = _sample(rng, 200, 2)
    b = jdl_bases(X, Y, RBF(1.0), RBF(1.0), tol=1e-4)
    p = jdl_problem(b.basis_x, b.basis_y, 1e-6)
    W, Gamma, S = (np.asarray(a) for a in (p.W, p.Gamma, p.S))
    unc, norm = solve_unconstrained(p), solve_normalised(p)
    np.testing.assert_allclose(2 * W * unc.H - 2 * Gamma, 0, atol=1e-14)
    assert abs(np.sum(S * norm.H)) <= 1e-12 * np.sum(np.abs(S * norm.H))
    np.testing.assert_allclose(2 * W * norm.H - 2 * Gamma + 2 * norm.mu * S, 0, atol=1e-13 * np.abs(Gamma).max())


def test_box_bounds_are_extremes_of_endpoint_products_and_lemma_4_3(rng):
    X, Y = _sample(rng, 60, 2)
    b = jdl_bases(X, Y, RBF(1.0), RBF(1.0), tol=1e-3)
    lo, hi = (np.asarray(c) for c in box_bounds(b.basis_x, b.basis_y))
    A_x, A_y = np.asarray(b.basis_x.A), np.asarray(b.basis_y.A)
    products = A_y[:, None, :, None] * A_x[None, :, None, :]  # (s, t, k, l)
    np.testing.assert_allclose(lo, products.min(axis=(0, 1)), atol=1e-15)
    np.testing.assert_allclose(hi, products.max(axis=(0, 1)), atol=1e-15)
    # Lemma 4.3: a random H scaled onto g(H) = 0 gives 1 + h >= 0 on the grid and at any point of the data boxes
    H = rng.standard_normal(lo.shape)
    assert positivity_margin(H, lo, hi) < 0  # infeasible before scaling
    H = H / (1.0 - positivity_margin(H, lo, hi))  # g(tH) = 1 + t (g(H) - 1): t = 1 / (1 - g(H))
    assert positivity_margin(H, lo, hi) == pytest.approx(0.0, abs=1e-12)
    assert (1 + A_y @ H @ A_x.T).min() >= -1e-12
    box = lambda A, size: rng.uniform(A.min(0), A.max(0), (size, A.shape[1]))  # noqa: E731
    assert (1 + box(A_y, 500) @ H @ box(A_x, 500).T).min() >= -1e-12


def _split_qp(W, Gamma, S, lo, hi):
    """The split QP (H = h+ - h-) solved by jaxopt's OSQP: z = [h+; h-] >= 0."""
    N = W.size
    w, gamma, s, clo, chi = (a.ravel() for a in (W, Gamma, S, lo, hi))
    D = np.diag(w)
    P = 2 * np.block([[D, -D], [-D, D]])
    q = np.r_[-2 * gamma, 2 * gamma]
    A_eq = np.r_[s, -s][None]
    G = np.vstack([-np.r_[clo, -chi][None], -np.eye(2 * N)])
    h = np.r_[1.0, np.zeros(2 * N)]
    sol = jaxopt.OSQP(tol=1e-12, maxiter=200000, check_primal_dual_infeasability=False).run(
        params_obj=(jnp.asarray(P), jnp.asarray(q)), params_eq=(jnp.asarray(A_eq), jnp.zeros(1)),
        params_ineq=(jnp.asarray(G), jnp.asarray(h))).params.primal
    z = np.asarray(sol)
    return (z[:N] - z[N:]).reshape(W.shape)


@pytest.mark.parametrize("normalise", [True, False])
def test_exact_dual_matches_a_generic_qp_and_kkt(rng, normalise):
    X, Y = _sample(rng, 150, 1)
    b = jdl_bases(X, Y, RBF(0.7), RBF(0.7), tol=1e-3, max_rank=5)
    p = jdl_problem(b.basis_x, b.basis_y, 1e-5)
    lo, hi = (np.asarray(c) for c in box_bounds(b.basis_x, b.basis_y))
    sol = solve_positive(p, lo, hi, normalise=normalise)
    W, Gamma, S = (np.asarray(a) for a in (p.W, p.Gamma, p.S))
    assert sol.nu > 0  # the tightening is active
    assert 0 <= sol.positivity <= 1e-12
    if normalise:
        assert sol.normalisation <= 1e-10
    # KKT: H = T(mu, nu), the soft-threshold map
    assert (sol.mu is None) == (not normalise)  # no normalisation multiplier where none was imposed
    base = Gamma - sol.mu * S if normalise else Gamma
    alpha, beta = base + sol.nu * lo, base + sol.nu * hi
    T = np.where(alpha > 0, alpha / W, np.where(beta < 0, beta / W, 0.0))
    np.testing.assert_allclose(sol.H, T, atol=1e-12 * np.abs(T).max())
    reference = _split_qp(W, Gamma, S if normalise else np.zeros_like(S), lo, hi)
    np.testing.assert_allclose(sol.H, reference, atol=1e-6 * np.abs(reference).max())
    assert float(objective(p, jnp.asarray(sol.H))) == pytest.approx(float(objective(p, jnp.asarray(reference))),
                                                                  rel=1e-8)


def test_objective_ordering_and_constrained_model_is_a_proper_law(rng):
    X, Y = _sample(rng, 300, 2)
    b = jdl_bases(X, Y, RBF(1.2), RBF(1.2), tol=1e-3)
    p = jdl_problem(b.basis_x, b.basis_y, 1e-6)
    values = [float(objective(p, jnp.asarray(s.H))) for s in
              (solve_unconstrained(p), solve_normalised(p), solve_positive(p, *box_bounds(b.basis_x, b.basis_y)))]
    assert values[0] <= values[1] <= values[2]
    model = fit_jdl(None, None, None, None, 1e-6, constraint="data_box", bases=b)
    assert float(model.min_grid_weight(block_size=64)) >= -1e-12  # (21) on the whole training grid
    assert float(model.total_mass()) == pytest.approx(1.0, abs=1e-12)
    assert float(model.marginal_x().sum()) == pytest.approx(1.0, abs=1e-12)
    assert float(model.marginal_y().sum()) == pytest.approx(1.0, abs=1e-12)
    weights = model.conditional_weights(X)
    assert float(weights.mean.min()) >= -1e-14
    np.testing.assert_allclose(weights.mean.sum(axis=1), 1.0, atol=1e-12)
    M = model.conditional_expectation(X, lambda Y: Y[:, :, None] * Y[:, None, :]).mean
    eig = np.linalg.eigvalsh(np.asarray(M))
    assert np.all(eig[:, 0] >= -1e-10 * np.abs(eig).max(axis=1))


@pytest.mark.parametrize("tol", [1e-2, 1e-4])
def test_lemma_4_4_error_bound(rng, tol):
    n, lam = 40, 1e-3
    X, Y = _sample(rng, n)
    kx, ky = RBF(0.8), RBF(0.8)
    K_x, K_y = np.asarray(kx.gram(X)), np.asarray(ky.gram(Y))
    system = lam * np.eye(n * n) + np.kron(K_x, K_y) / n**2
    E = np.ones((n, n))
    H = np.linalg.solve(system, (np.eye(n) / n - E / n**2).ravel(order="F")).reshape(n, n, order="F")
    b = jdl_bases(X, Y, kx, ky, tol=tol)
    Ht = solve_unconstrained(jdl_problem(b.basis_x, b.basis_y, lam)).H
    Q_x, Q_y = _Q(b.basis_x, n), _Q(b.basis_y, n)
    L_x = np.asarray(b.basis_x.A)  # L V: (30) uses V^T L^T H L V
    L_y = np.asarray(b.basis_y.A)
    projection = L_y.T @ H @ L_x
    D = H - Q_y @ Ht @ Q_x.T
    middle = np.trace(D.T @ K_y @ D @ K_x)
    eps_x = np.trace(K_x) - np.sum(L_x**2)
    eps_y = np.trace(K_y) - np.sum(L_y**2)
    lower = np.sum((projection - Ht) ** 2)
    upper = np.sum(H**2) * (eps_x * np.trace(K_y) + eps_y * np.trace(K_x)) + lower
    assert lower <= middle * (1 + 1e-8) + 1e-14 and middle <= upper * (1 + 1e-8)


def test_bad_inputs(rng):
    X, Y = _sample(rng, 30)
    with pytest.raises(ValueError, match="tol"):
        jdl_bases(X, Y, RBF(1.0), RBF(1.0), tol=0.0)
    with pytest.raises(ValueError, match="X and Y"):
        jdl_bases(X, Y[:20], RBF(1.0), RBF(1.0))
    with pytest.raises(ValueError, match="max_rank"):
        jdl_bases(X, Y, RBF(1.0), RBF(1.0), max_rank=31)
    with pytest.raises(ValueError, match="Y contains"):
        jdl_bases(X, np.where(Y > 1, np.inf, Y), RBF(1.0), RBF(1.0))
    b = jdl_bases(X, Y, RBF(1.0), RBF(1.0))
    with pytest.raises(ValueError, match="lam"):
        fit_jdl(None, None, None, None, 0.0, bases=b)
    with pytest.raises(ValueError, match="constraint"):
        fit_jdl(None, None, None, None, 1e-3, constraint="pointwise", bases=b)
    lo, hi = box_bounds(b.basis_x, b.basis_y)
    with pytest.raises(ValueError, match="C_lo"):
        solve_positive(jdl_problem(b.basis_x, b.basis_y, 1e-3), hi, lo)
