"""Kernel Bayes' rule weights and read-outs: identities on small problems."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskern import kbr
from bayeskern.kernels import RBF


def _problem(rng, n=30, m=25, d=2, q=7, shift=0.0):
    X = rng.standard_normal((n, d))
    Z = X @ rng.standard_normal((d, d)) * 0.5 + 0.3 * rng.standard_normal((n, d))
    U = rng.standard_normal((m, d)) * 0.7 + shift
    Xq = rng.standard_normal((q, d))
    kx, kz = RBF(1.2), RBF(0.9)
    return dict(X=X, Z=Z, U=U, Xq=Xq, G_X=kx.gram(X), G_Z=kz.gram(Z), K_ZU=kz.cross(Z, U), K_UU=kz.gram(U),
                G_Xq=kx.cross(X, Xq), alpha=np.full(m, 1.0 / m), kz=kz, kx=kx)


def _features(sigma, F=400, seed=0):
    """An explicit finite feature map (random Fourier features): the identities hold exactly for G = Phi Phi^T."""
    return kbr.random_fourier_features(jax.random.key(seed), 2, sigma, F)


def test_kulsif_gram_form_equals_operator_form(rng):
    p = _problem(rng)
    phi = _features(0.9)
    Phi, Phi_U = phi(p["Z"]), phi(p["U"])
    n, eta = Phi.shape[0], 0.05
    gamma = kbr.kulsif_gamma(Phi @ Phi.T, Phi @ Phi_U.T @ p["alpha"], eta)
    operator = Phi @ np.linalg.solve(Phi.T @ Phi / n + eta * np.eye(Phi.shape[1]), Phi_U.T @ p["alpha"])
    np.testing.assert_allclose(gamma, operator, rtol=1e-10, atol=1e-10)
    # the ratio function at the data reproduces gamma
    r = kbr.kulsif_ratio(p["G_Z"], p["K_ZU"], p["alpha"], kbr.kulsif_gamma(p["G_Z"], p["K_ZU"] @ p["alpha"], eta), eta)
    np.testing.assert_allclose(r, kbr.kulsif_gamma(p["G_Z"], p["K_ZU"] @ p["alpha"], eta), rtol=1e-9)


def test_iw_forms_agree_including_negative_gamma(rng):
    p = _problem(rng)
    n, lam = 30, 0.01
    gamma = rng.standard_normal(n) + 0.5
    assert (gamma < 0).any()
    W = kbr.kbr_iw_weights(p["G_X"], gamma, p["G_Xq"], lam).weights
    D = np.diag(np.maximum(gamma, 0))
    np.testing.assert_allclose(W, D @ np.linalg.solve(p["G_X"] @ D + n * lam * np.eye(n), p["G_Xq"]), atol=1e-10)
    psi = _features(1.2, seed=1)
    Psi, Psi_q = psi(p["X"]), psi(p["Xq"])
    W_feat = kbr.kbr_iw_weights_features(Psi, gamma, Psi_q, lam).weights
    np.testing.assert_allclose(W_feat, kbr.kbr_iw_weights(Psi @ Psi.T, gamma, Psi @ Psi_q.T, lam).weights, atol=1e-10)
    # reg_scale="gram" with n lam equals the operator-scale call
    np.testing.assert_allclose(kbr.kbr_iw_weights(p["G_X"], gamma, p["G_Xq"], n * lam, reg_scale="gram").weights, W,
                               atol=1e-12)


def test_original_forms_agree(rng):
    p = _problem(rng)
    n, lam = 30, 1e-4
    gamma = rng.standard_normal(n) + 1.0
    G, g = p["G_X"], p["G_Xq"]
    Gam = np.diag(gamma)
    literal = Gam @ G @ np.linalg.solve(Gam @ G @ Gam @ G + n**2 * lam * np.eye(n), Gam @ g)
    for solver in ("eigh", "cholesky"):
        W = kbr.kbr_original_weights(G, gamma, g, lam, solver=solver).weights
        np.testing.assert_allclose(W, literal, rtol=1e-8, atol=1e-10)
    # operator form (2) with 1/n-normalised weighted covariances and explicit features
    psi = _features(1.2, F=60, seed=2)
    Psi, Psi_q = psi(p["X"]), psi(p["Xq"])
    C = Psi.T @ Gam @ Psi / n
    E_star = (np.linalg.solve(C @ C + lam * np.eye(60), C @ Psi_q.T))  # (C^2 + lam)^{-1} C psi(x)
    operator = Gam @ Psi @ E_star / n
    W = kbr.kbr_original_weights(Psi @ Psi.T, gamma, Psi @ Psi_q.T, lam).weights
    np.testing.assert_allclose(W, operator, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(kbr.kbr_original_weights(G, gamma, g, n**2 * lam, reg_scale="gram").weights,
                               kbr.kbr_original_weights(G, gamma, g, lam).weights, atol=1e-12)


def test_truncated_factor_equals_dense_original_kbr_on_a_300_point_filtering_problem():
    """The truncated eigen-factor (rank << n) against the untruncated factor and the literal
    dense formula on the 5.2 rotation data, posterior means to 1e-8 relative."""
    seq = kbr.data.circle_dynamics(300, jax.random.key(0), T_test=50, setting="rotation")
    X, Z = np.asarray(seq.X), np.asarray(seq.Z)
    G = np.asarray(RBF(float(kbr.filter.median_heuristic(X))).gram(X))
    G_Z = np.asarray(RBF(float(kbr.filter.median_heuristic(Z))).gram(Z))
    alpha = np.r_[np.full(150, 1 / 150), np.zeros(150)]  # a prior on the first half of the atoms
    gamma = np.asarray(kbr.kulsif_gamma(G_Z, G_Z @ alpha, 1e-4))
    g = np.asarray(RBF(float(kbr.filter.median_heuristic(X))).cross(X, seq.X_test))
    s, U = np.linalg.eigh(G)
    assert kbr.gram_factor(G).shape[1] < 100  # the truncation is real
    for lam in (1e-6, 1e-4):
        truncated = np.asarray(kbr.kbr_original_weights(G, gamma, g, lam).weights).T @ Z
        full = np.asarray(kbr.kbr_original_weights(G, gamma, g, lam, factor=U * np.sqrt(np.maximum(s, 0))).weights).T @ Z
        Gam = np.diag(gamma)
        literal = (Gam @ G @ np.linalg.solve(Gam @ G @ Gam @ G + 300**2 * lam * np.eye(300), Gam @ g)).T @ Z
        for reference in (full, literal):
            assert np.abs(truncated - reference).max() <= 1e-8 * np.abs(reference).max()


def test_reduction_to_the_cme(rng):
    p = _problem(rng)
    n, lam = 30, 0.02
    cme = kbr.cme_weights(p["G_X"], p["G_Xq"], lam)
    np.testing.assert_allclose(kbr.kbr_iw_weights(p["G_X"], jnp.ones(n), p["G_Xq"], lam).weights, cme, atol=1e-12)
    # data-marginal prior, well separated atoms, eta -> 0: gamma -> 1 and IW -> CME
    Z = np.linspace(-6, 6, n)[:, None]
    G_Z = RBF(0.3).gram(Z)
    assert np.linalg.cond(G_Z) < 1e4
    gamma = kbr.kulsif_gamma(G_Z, G_Z @ np.full(n, 1.0 / n), 1e-10)
    np.testing.assert_allclose(gamma, 1.0, atol=1e-6)
    np.testing.assert_allclose(kbr.kbr_iw_weights(p["G_X"], gamma, p["G_Xq"], lam).weights, cme, atol=1e-8)


def test_scale_covariance_and_permutation_equivariance(rng):
    p = _problem(rng)
    eta, lam, kappa = 0.05, 0.01, 3.0
    g_pi = p["K_ZU"] @ p["alpha"]
    gamma = kbr.kulsif_gamma(p["G_Z"], g_pi, eta)
    np.testing.assert_allclose(kbr.kulsif_gamma(p["G_Z"], kappa * g_pi, eta), kappa * gamma, rtol=1e-10)
    iw = lambda gm, lm: kbr.kbr_iw_weights(p["G_X"], gm, p["G_Xq"], lm).weights
    np.testing.assert_allclose(iw(kappa * gamma, lam), iw(gamma, lam / kappa), atol=1e-10)
    org = lambda gm, lm: kbr.kbr_original_weights(p["G_X"], gm, p["G_Xq"], lm).weights
    np.testing.assert_allclose(org(kappa * gamma, 1e-4), org(gamma, 1e-4 / kappa**2), atol=1e-10)
    perm = rng.permutation(30)
    G_X, G_Z = p["G_X"][np.ix_(perm, perm)], p["G_Z"][np.ix_(perm, perm)]
    gamma_p = kbr.kulsif_gamma(G_Z, g_pi[perm], eta)
    np.testing.assert_allclose(gamma_p, gamma[perm], atol=1e-10)
    W, W_p = iw(gamma, lam), kbr.kbr_iw_weights(G_X, gamma_p, p["G_Xq"][perm], lam).weights
    np.testing.assert_allclose(W_p, W[perm], atol=1e-10)
    np.testing.assert_allclose(kbr.posterior_mean(W_p, p["Z"][perm]), kbr.posterior_mean(W, p["Z"]), atol=1e-10)


def test_iw_is_finite_and_bounded_where_the_original_fails(rng):
    n = 30
    for shift in (2.0, 8.0):  # prior away from / far from the data (tiny ratios, possibly all truncated)
        p = _problem(rng, shift=shift)
        gamma = kbr.kulsif_gamma(p["G_Z"], p["K_ZU"] @ p["alpha"], 1e-3)
        for lam in (1e-12, 1e-6, 1.0):
            W = np.asarray(kbr.kbr_iw_weights(p["G_X"], gamma, p["G_Xq"], lam, zero_weight_policy="zeros").weights)
            assert np.all(np.isfinite(W))
            r = np.maximum(np.asarray(gamma), 0)
            bound = r.max() * np.linalg.norm(p["G_Xq"], axis=0) / (n * lam)
            assert np.all(np.linalg.norm(W, axis=0) <= bound * (1 + 1e-9))
    X_dup = np.repeat(p["X"][:10], 3, axis=0)  # rank-deficient G_X
    G = RBF(1.2).gram(X_dup)
    gamma = np.abs(rng.standard_normal(n)) + 0.1
    literal = lambda: np.diag(gamma) @ G @ np.linalg.solve(np.diag(gamma) @ G @ np.diag(gamma) @ G,
                                                            np.diag(gamma) @ p["G_Xq"])
    with np.errstate(all="ignore"):
        try:
            failed = not np.all(np.isfinite(literal()))
        except np.linalg.LinAlgError:
            failed = True
    assert failed  # lam = 0 Original breaks on a rank-deficient Gram matrix ...
    assert np.all(np.isfinite(kbr.kbr_iw_weights(G, gamma, p["G_Xq"], 1e-8).weights))  # ... IW does not


def test_all_truncated_weights_follow_the_policy(rng):
    p = _problem(rng)
    gamma = -np.abs(rng.standard_normal(30))
    prior = np.full(30, 1.0 / 30)
    cme = kbr.cme_weights(p["G_X"], p["G_Xq"], 0.01)
    out = kbr.kbr_iw_weights(p["G_X"], gamma, p["G_Xq"], 0.01)
    assert bool(out.degenerate) and np.allclose(out.weights, cme, atol=1e-12)
    out = kbr.kbr_iw_weights(p["G_X"], gamma, p["G_Xq"], 0.01, zero_weight_policy="prior", prior_weights=prior)
    assert bool(out.degenerate) and np.allclose(out.weights, prior[:, None])
    out = kbr.kbr_iw_weights(p["G_X"], gamma, p["G_Xq"], 0.01, zero_weight_policy="zeros")
    assert bool(out.degenerate) and np.all(np.asarray(out.weights) == 0)
    assert not bool(kbr.kbr_iw_weights(p["G_X"], np.abs(gamma), p["G_Xq"], 0.01).degenerate)
    with pytest.raises(ValueError, match="prior_weights"):
        kbr.kbr_iw_weights(p["G_X"], gamma, p["G_Xq"], 0.01, zero_weight_policy="prior")


def test_an_all_zero_gamma_in_the_original_kbr_is_flagged_and_follows_the_policy(rng):
    """Without the flag every weight would be zero (posterior mean 0, a plausible-looking number)."""
    p = _problem(rng)
    zero, prior = np.zeros(30), np.full(30, 1.0 / 30)
    G, g = p["G_X"], p["G_Xq"]
    out = kbr.kbr_original_weights(G, zero, g, 1e-4)
    uniform = kbr.kbr_original_weights(G, np.ones(30), g, 1e-4)  # gamma = 1: the data marginal as the prior
    assert bool(out.degenerate) and not bool(uniform.degenerate)
    np.testing.assert_allclose(out.weights, uniform.weights, atol=1e-12)
    out = kbr.kbr_original_weights(G, zero, g, 1e-4, zero_weight_policy="prior", prior_weights=prior)
    assert bool(out.degenerate) and np.allclose(out.weights, prior[:, None])
    out = kbr.kbr_original_weights(G, zero, g, 1e-4, zero_weight_policy="zeros")
    assert bool(out.degenerate) and np.all(np.asarray(out.weights) == 0)
    assert not bool(kbr.kbr_original_weights(G, -np.ones(30), g, 1e-4).degenerate)  # signed gamma is not degenerate


def test_gradients_are_finite_with_truncated_weights(rng):
    p = _problem(rng, shift=1.5)
    X, Z, Xq, U = (jnp.asarray(p[k]) for k in ("X", "Z", "Xq", "U"))

    def mean(log_lam, log_eta, log_c):
        kx, kz = RBF(jnp.exp(log_c)), RBF(jnp.exp(log_c) * 0.8)
        gamma = kbr.kulsif_gamma(kz.gram(Z), kz.cross(Z, U) @ jnp.full(U.shape[0], 1 / U.shape[0]), jnp.exp(log_eta))
        W = kbr.kbr_iw_weights(kx.gram(X), gamma, kx.cross(X, Xq), jnp.exp(log_lam)).weights
        return jnp.sum(kbr.posterior_mean(W, Z) ** 2), gamma

    (_, gamma), grads = jax.value_and_grad(mean, argnums=(0, 1, 2), has_aux=True)(np.log(0.01), np.log(0.05), 0.0)
    assert (np.asarray(gamma) <= 0).any()  # some ratios are truncated
    assert all(np.isfinite(float(g)) for g in grads)


def test_bad_regularisers_are_rejected(rng):
    p = _problem(rng)
    with pytest.raises(ValueError, match="lam must be positive"):
        kbr.kbr_iw_weights(p["G_X"], np.ones(30), p["G_Xq"], 0.0)
    with pytest.raises(ValueError, match="eta must be positive"):
        kbr.kulsif_gamma(p["G_Z"], np.ones(30), -1.0)
    with pytest.raises(ValueError, match="reg_scale"):
        kbr.cme_weights(p["G_X"], p["G_Xq"], 0.1, reg_scale="bogus")


def test_readouts_stay_in_the_convex_hull(rng):
    p = _problem(rng)
    W = np.abs(rng.standard_normal((30, 5)))
    Z = p["Z"]
    normalized = kbr.normalized_posterior_mean(W, Z)
    assert not np.asarray(normalized.undefined).any()
    lo, hi = Z.min(0), Z.max(0)
    mode = kbr.decode_mode(W, Z, 0.5)
    for point in (normalized.mean, mode):
        assert np.all((np.asarray(point) >= lo - 1e-12) & (np.asarray(point) <= hi + 1e-12))
    # LP feasibility of convex-hull membership for the mode decoder, small n
    from scipy.optimize import linprog

    for z in np.asarray(mode):
        res = linprog(np.zeros(30), A_eq=np.vstack([Z.T, np.ones(30)]), b_eq=np.append(z, 1.0), bounds=(0, None))
        assert res.status == 0
    np.testing.assert_allclose(normalized.mean, (W / W.sum(0)).T @ Z, atol=1e-12)
    zero = kbr.normalized_posterior_mean(np.zeros((30, 1)), Z)
    assert bool(zero.undefined[0])
    signed = rng.standard_normal((30, 4)) * 5.0                     # negative weights: the raw mean can leave the hull
    clipped = kbr.clipped_posterior_mean(np.column_stack([signed, -np.ones(30)]), Z)
    P = np.maximum(signed, 0.0)
    np.testing.assert_allclose(clipped.mean[:4], P.T @ Z / P.sum(0)[:, None], atol=1e-12)
    np.testing.assert_allclose(clipped.mass[:4], P.sum(0), atol=1e-12)
    assert np.all((np.asarray(clipped.mean[:4]) >= lo - 1e-12) & (np.asarray(clipped.mean[:4]) <= hi + 1e-12))
    assert bool(clipped.undefined[4]) and not np.asarray(clipped.undefined[:4]).any()   # no positive weight
    c = rng.standard_normal(4)
    V = rng.standard_normal((4, 2))
    np.testing.assert_allclose(kbr.posterior_expectation(W, p["kz"].cross(Z, V), c),
                               W.T @ (np.asarray(p["kz"].cross(Z, V)) @ c), atol=1e-12)
    spread = np.asarray(kbr.posterior_spread(W, Z))
    assert spread.shape == (5, 2, 2) and np.all(np.linalg.eigvalsh(spread) >= -1e-12)


def test_spd_solve_value_and_derivatives_match_a_dense_solve(rng):
    from bayeskern.linalg import spd_solve

    M, B = rng.standard_normal((6, 6)), rng.standard_normal((6, 2))
    A = lambda t: M @ M.T * t + jnp.eye(6)
    f_fast = lambda t, B: jnp.sum(jnp.sin(spd_solve(A(t), B)))
    f_dense = lambda t, B: jnp.sum(jnp.sin(jnp.linalg.solve(A(t), B)))
    assert float(f_fast(0.7, B)) == pytest.approx(float(f_dense(0.7, B)), rel=1e-12)
    for argnums in (0, 1):
        np.testing.assert_allclose(jax.grad(f_fast, argnums)(0.7, B), jax.grad(f_dense, argnums)(0.7, B), rtol=1e-9)


def test_spd_solve_adds_jitter_only_where_needed_also_under_vmap(rng):
    from bayeskern.linalg import spd_solve

    V = rng.standard_normal((6, 3))
    singular = V @ V.T  # rank 3: the plain Cholesky fails, a jittered one succeeds
    regular = singular + np.eye(6)
    b = rng.standard_normal((6, 1))
    x = np.asarray(jax.vmap(spd_solve)(jnp.stack([regular, singular]), jnp.stack([b, b])))
    np.testing.assert_allclose(x[0], np.linalg.solve(regular, b), rtol=1e-10)  # no jitter on the regular one
    # the singular one gets the first jitter, 1e-10 x mean diagonal, and is solved exactly with it
    jittered = singular + 1e-10 * np.mean(np.diag(singular)) * np.eye(6)
    np.testing.assert_allclose(x[1], np.linalg.solve(jittered, b), rtol=1e-5)
