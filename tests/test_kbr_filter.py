"""KuLSIF LOO, the kernel Bayes filter and its baselines."""

import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayeskern as bk
from bayeskern import kbr
from bayeskern.kernels import RBF


def _brute_force_loo(Z, U, alpha, eta, kz, L):
    """Refit KuLSIF without pair i (data z_i and atom u_i), evaluate the untruncated ratio at both."""
    n = Z.shape[0]
    rho, nu = [], []
    for i in range(L):
        keep_z, keep_u = np.arange(n) != i, np.arange(U.shape[0]) != i
        Zi, Ui, ai = Z[keep_z], U[keep_u], alpha[keep_u] / (1 - alpha[i])
        gamma = (n - 1) * np.linalg.solve(kz.gram(Zi) + (n - 1) * eta * np.eye(n - 1), kz.cross(Zi, Ui) @ ai)
        ratio = lambda z: (np.asarray(kz.cross(z[None], Ui))[0] @ ai - np.asarray(kz.cross(z[None], Zi))[0] @ gamma / (n - 1)) / eta
        rho.append(ratio(Z[i]))
        nu.append(ratio(U[i]))
    rho, nu, a = np.array(rho), np.array(nu), alpha[:L]
    return 0.5 * np.mean(rho**2) - np.sum(a * nu) / np.sum(a)


def test_loo_closed_form_equals_brute_force_refits(rng):
    kz, eta = RBF(0.8), 0.03
    Z = rng.standard_normal((15, 2))
    U = rng.standard_normal((12, 2)) * 0.8 + 0.3
    alpha = rng.uniform(0.2, 1.0, 12)
    alpha /= alpha.sum()
    closed = kbr.kulsif_loo_score(kz.gram(Z), kz.cross(Z, U), kz.gram(U), alpha, eta)
    assert float(closed) == pytest.approx(_brute_force_loo(Z, U, alpha, eta, kz, 12), abs=1e-10)
    # atoms are the data: general formula with U = Z, and the eigen-path grid evaluation
    alpha = rng.uniform(0.0, 1.0, 15)
    alpha /= alpha.sum()
    G = kz.gram(Z)
    expected = _brute_force_loo(Z, Z, alpha, eta, kz, 15)
    assert float(kbr.kulsif_loo_score(G, G, G, alpha, eta)) == pytest.approx(expected, abs=1e-10)
    eig = jnp.linalg.eigh(G)
    assert float(kbr.kulsif_loo_score_atoms_are_data(eig, alpha, eta)) == pytest.approx(expected, abs=1e-10)
    batch = kbr.kulsif_loo_score_atoms_are_data(eig, jnp.stack([alpha, jnp.full(15, 1 / 15)]), eta)
    assert float(batch[0]) == pytest.approx(expected, abs=1e-10)


def test_successor_priors_and_eta_selection(rng):
    Z = rng.standard_normal((60, 2))
    priors = np.asarray(kbr.successor_priors(Z, num_priors=5, k=10))
    assert priors.shape == (5, 60) and np.allclose(priors.sum(1), 1.0) and np.all(priors[:, 0] == 0)
    eta, scores = kbr.select_eta_loo(RBF(0.5).gram(Z), jnp.asarray(priors), kbr.ETA_GRID)
    assert eta in kbr.ETA_GRID and scores.shape == (5,) and eta == kbr.ETA_GRID[int(np.argmin(scores))]
    with pytest.raises(ValueError, match="at least k"):
        kbr.successor_priors(Z[:5], k=10)


def test_transition_matrix_and_one_step_filter_equal_algorithm_1(rng):
    seq = kbr.data.circle_dynamics(40, jax.random.key(0), T_test=1)
    kbf = kbr.KernelBayesFilter.build(seq.X, seq.Z, 0.7, 0.6, 1e-3, 1e-3, 2e-3)
    T = 40
    assert np.all(np.asarray(kbf.transition)[0] == 0)
    # operator form: C_next,prev (C_prev,prev + lam')^{-1} with explicit (random Fourier) features
    F = 500
    Phi = np.asarray(kbr.random_fourier_features(jax.random.key(5), 2, 0.6, F)(seq.Z))
    G = Phi @ Phi.T
    rows = np.linalg.solve(G[:-1, :-1] + (T - 1) * 2e-3 * np.eye(T - 1), G[:-1, :])
    prev, nxt = Phi[:-1], Phi[1:]
    w = rng.standard_normal(T)
    op = np.linalg.solve(prev.T @ prev / (T - 1) + 2e-3 * np.eye(F), Phi.T @ w) @ (prev.T @ nxt / (T - 1))
    np.testing.assert_allclose(Phi[1:].T @ (rows @ w), op, atol=1e-10)  # same predictive embedding
    # one test step from uniform weights = Algorithm 1 with the uniform prior
    means, W = kbf.filter(seq.X_test, return_weights=True)
    G_Z = RBF(0.6).gram(seq.Z)
    gamma = kbr.kulsif_gamma(G_Z, G_Z @ jnp.full(T, 1 / T), 1e-3)
    w1 = kbr.kbr_iw_weights(kbf.G_X, gamma, RBF(0.7).cross(seq.X, seq.X_test), 1e-3).weights[:, 0]
    np.testing.assert_allclose(W[0], w1, atol=1e-12)
    np.testing.assert_allclose(means[0], w1 @ seq.Z, atol=1e-12)


def test_transitions_given_as_triples_match_the_trajectory_and_the_cme_formula(tmp_path):
    seq = kbr.data.circle_dynamics(40, jax.random.key(0), T_test=12)
    trajectory = kbr.KernelBayesFilter.build(seq.X, seq.Z, 0.7, 0.6, 1e-3, 1e-3, 2e-3)
    # the trajectory's T - 1 transitions as triples: the transition on atoms 2..T is the trajectory's
    triples = kbr.KernelBayesFilter.build(seq.X[1:], seq.Z[1:], 0.7, 0.6, 1e-3, 1e-3, 2e-3, Z_prev=seq.Z[:-1])
    np.testing.assert_allclose(triples.transition, np.asarray(trajectory.transition)[1:, 1:], atol=1e-12)
    # arbitrary triples (a compressed set): (G_prev + m lam' I)^{-1} k(Z_prev, Z)
    rng = np.random.default_rng(4)
    Z_prev, Z, X = (rng.standard_normal((15, 2)) for _ in range(3))
    kbf = kbr.KernelBayesFilter.build(X, Z, 0.7, 0.6, 1e-3, 1e-3, 2e-3, Z_prev=Z_prev)
    expected = np.linalg.solve(RBF(0.6).gram(Z_prev) + 15 * 2e-3 * np.eye(15), RBF(0.6).cross(Z_prev, Z))
    np.testing.assert_allclose(kbf.transition, expected, atol=1e-12)
    kbf.save(tmp_path / "f.npz")  # the transition is stored: the loaded filter needs no Z_prev
    np.testing.assert_array_equal(kbr.load_filter(tmp_path / "f.npz").filter(seq.X_test), kbf.filter(seq.X_test))
    with pytest.raises(ValueError, match="Z_prev must have the shape of Z"):
        kbr.KernelBayesFilter.build(X, Z, 0.7, 0.6, 1e-3, 1e-3, Z_prev=Z_prev[:-1])


def _filters(seq, num_landmarks):
    """One filter per observation model: IW and original KBR on the Gaussian kernel, IW on Nystrom features."""
    landmarks = kbr.select_landmarks(RBF(0.5), seq.X, num_landmarks)
    return {"iw": kbr.KernelBayesFilter.fit(seq.X, seq.Z, lam=1e-3, eta=1e-4),
            "original": kbr.KernelBayesFilter.fit(seq.X, seq.Z, lam=1e-6, eta=1e-4, method="original"),
            "nystrom": kbr.KernelBayesFilter.build(seq.X, seq.Z, kbr.FeatureKernel(
                kbr.nystrom_features(RBF(0.5), landmarks)), 0.6, 1e-3, 1e-4),
            "low-rank iw": kbr.KernelBayesFilter.fit(seq.X, seq.Z, lam=1e-3, eta=1e-4, rank=num_landmarks),
            "low-rank original": kbr.KernelBayesFilter.fit(seq.X, seq.Z, lam=1e-6, eta=1e-4, method="original",
                                                           rank=num_landmarks)}


@pytest.mark.parametrize("setting", ["rotation", "oscillatory"])
def test_low_rank_filter_matches_the_exact_one_without_any_T_by_T_array(setting):
    seq = kbr.data.circle_dynamics(600, jax.random.key(3), T_test=80, setting=setting)
    exact = kbr.KernelBayesFilter.fit(seq.X, seq.Z, rank=None)
    assert exact.rank is None and exact.G_X.shape == (600, 600)
    auto = kbr.KernelBayesFilter.fit(seq.X, seq.Z)  # T > EXACT_MAX_T: the trace-error rule picks the rank
    p_x, p_z = auto.rank
    assert 10 <= p_x <= 100 and 10 <= p_z <= 100
    assert all(600 not in np.shape(leaf)[1:] for leaf in jax.tree.leaves(auto))  # memory O(T p)
    mse_exact = kbr.filter_mse(exact.filter(seq.X_test), seq.Z_test)
    mse_auto = kbr.filter_mse(auto.filter(seq.X_test), seq.Z_test)
    assert abs(mse_auto - mse_exact) <= 0.02 * mse_exact
    if setting == "rotation":  # suite time: the original KBR and the threshold once
        original = [kbr.KernelBayesFilter.fit(seq.X, seq.Z, lam=1e-6, method="original", rank=rank)
                    for rank in (None, 60)]
        mse = [kbr.filter_mse(f.filter(seq.X_test), seq.Z_test) for f in original]
        assert abs(mse[1] - mse[0]) <= 0.02 * mse[0]
        small = kbr.data.circle_dynamics(kbr.EXACT_MAX_T, jax.random.key(3), T_test=5)
        assert kbr.KernelBayesFilter.fit(small.X, small.Z).rank is None  # small T stays exact


def test_low_rank_maps_are_the_exact_formulas_on_the_nystrom_gram_matrices(rng):
    X, Z = rng.normal(size=(40, 2)), rng.normal(size=(40, 2))
    T, eta, lam_prime = 40, 1e-3, 3e-3
    landmarks = (X[::4], Z[::5])
    kbf = kbr.KernelBayesFilter.build(X, Z, 0.8, 0.9, 1e-3, eta, lam_prime, landmarks=landmarks)
    assert kbf.rank == (10, 8) and isinstance(kbf.K_eta, kbr.Factored)
    phi = kbr.nystrom_features(RBF(0.9), landmarks[1])
    G = phi(Z) @ phi(Z).T  # the Nystrom approximation of the latent Gram matrix
    np.testing.assert_allclose(kbf.K_eta.dense(), T * np.linalg.solve(G + T * eta * np.eye(T), G), atol=1e-9)
    rows = np.linalg.solve(G[:-1, :-1] + (T - 1) * lam_prime * np.eye(T - 1), G[:-1])
    np.testing.assert_allclose(kbf.transition.dense(), np.vstack([np.zeros(T), rows]), atol=1e-9)
    psi = kbr.nystrom_features(RBF(0.8), landmarks[0])
    np.testing.assert_allclose(kbf.features, psi(X), atol=1e-12)
    half = kbr.KernelBayesFilter.build(X, Z, 0.8, 0.9, 1e-3, eta, lam_prime, landmarks=(None, landmarks[1]))
    assert half.rank == (None, 8) and half.G_X.shape == (T, T)  # exact observation side, low-rank latent maps
    np.testing.assert_allclose(half.K_eta.dense(), kbf.K_eta.dense(), atol=1e-12)
    assert np.all(np.isfinite(half.filter(X[:5])))
    # explicit landmarks keep the build traceable: gradients of a filtered mean in the bandwidths are finite
    mean = lambda s: kbr.KernelBayesFilter.build(X, Z, s, 0.9, 1e-3, eta, landmarks=landmarks).filter(X[:5])[-1, 0]
    assert np.isfinite(jax.grad(mean)(0.8))
    with pytest.raises(ValueError, match="concrete hyperparameters"):
        jax.grad(lambda s: kbr.KernelBayesFilter.build(X, Z, s, 0.9, 1e-3, eta, rank=5).filter(X[:5])[-1, 0])(0.8)
    for bad in (0, -3, 2.5, "full", True):
        with pytest.raises(ValueError, match="rank must be None, 'auto' or a positive integer"):
            kbr.KernelBayesFilter.build(X, Z, 0.8, 0.9, 1e-3, eta, rank=bad)


def test_saved_filters_load_exactly_for_every_observation_model(tmp_path):
    seq = kbr.data.circle_dynamics(50, jax.random.key(2), T_test=15)
    filters = _filters(seq, 8)
    filters["mlp"] = kbr.KernelBayesFilter.build(seq.X, seq.Z, kbr.FeatureKernel(
        kbr.init_mlp(jax.random.key(0), (2, 4))), 0.6, 1e-3, 1e-4)
    for name, kbf in filters.items():
        kbf.save(tmp_path / f"{name}.npz")
        loaded = kbr.load_filter(tmp_path / f"{name}.npz")
        assert loaded.method == kbf.method and type(loaded.kernel_x) is type(kbf.kernel_x)
        np.testing.assert_array_equal(loaded.filter(seq.X_test), kbf.filter(seq.X_test))
    custom = jax.tree_util.Partial(jnp.tanh)  # a user's own feature map is code, which a data file does not hold
    with pytest.raises(TypeError, match="cannot save a value of type Partial"):
        kbr.KernelBayesFilter.build(seq.X, seq.Z, kbr.FeatureKernel(custom), 0.6, 1e-3, 1e-4).save(tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()  # nothing half-written


def test_the_clipped_readout_stays_among_the_atoms_and_raw_escapes_are_flagged():
    """A tiny ridge lets negative importance weights throw sum_i w_i z_i out of the training range: the raw
    read-out warns, naming the steps; the clipped one is sum_i w_i^+ z_i / sum_i w_i^+ of the same weights."""
    seq = kbr.data.circle_dynamics(120, jax.random.key(0), T_test=60)
    kbf = kbr.KernelBayesFilter.fit(seq.X, seq.Z, c=0.5, lam=1e-7, eta=1e-4)
    Z = np.asarray(seq.Z)
    low, high = Z.min(0), Z.max(0)
    with pytest.warns(kbr.ReadoutWarning, match=r"leaves the training latents' range at (\d+) of 60 steps") as caught:
        raw, W = kbf.filter(seq.X_test, return_weights=True)
    raw, W = np.asarray(raw), np.asarray(W)
    np.testing.assert_allclose(raw, W @ Z, atol=1e-12)
    margin = kbr.RANGE_MARGIN * (high - low)
    outside = np.any((raw < low - margin) | (raw > high + margin), axis=1)
    assert outside.sum() >= 3 and f"at {outside.sum()} of 60 steps" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kbr.ReadoutWarning)   # every step has a positive weight: no warning
        clipped = np.asarray(kbf.filter(seq.X_test, readout="clipped"))
    P = np.maximum(W, 0.0)
    np.testing.assert_allclose(clipped, P @ Z / P.sum(1, keepdims=True), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(clipped, kbr.clipped_posterior_mean(W.T, Z).mean, rtol=1e-10, atol=1e-12)
    assert np.all((clipped >= low - 1e-12) & (clipped <= high + 1e-12))
    state = kbf.initial_state()
    for x in seq.X_test[:5]:   # streaming: the same read-out of the last filtered weights
        state, _ = kbf.update(state, x)
    np.testing.assert_allclose(kbr.clipped_posterior_mean(state.filtered[:, None], Z).mean[0], clipped[4], rtol=1e-9)
    assert np.sqrt(np.mean((clipped - np.asarray(seq.Z_test)) ** 2)) < np.sqrt(np.mean((raw - np.asarray(seq.Z_test)) ** 2))
    far = np.asarray(seq.X_test[:3]) + 1e3   # the kernel sees nothing: every weight is zero, the clipped mean undefined
    with pytest.warns(kbr.ReadoutWarning, match="no posterior weight is positive at 3 of 3 steps"):
        with pytest.warns(kbr.OutOfRangeWarning):
            fallback = np.asarray(kbf.filter(far, readout="clipped"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw_far = np.asarray(kbf.filter(far))
    assert np.all(np.isfinite(fallback)) and np.array_equal(fallback, raw_far)   # the raw means, flagged


def test_streaming_updates_equal_batch_filtering_for_every_observation_model(tmp_path):
    seq = kbr.data.circle_dynamics(60, jax.random.key(5), T_test=25)
    filters = _filters(seq, 10)
    for name, kbf in filters.items():
        means, weights = kbf.filter(seq.X_test, return_weights=True)
        state = kbf.initial_state()
        np.testing.assert_array_equal(state.predicted, np.full(60, 1 / 60))
        for t, x in enumerate(seq.X_test):
            state, mean = kbf.update(state, x)
            np.testing.assert_allclose(mean, means[t], rtol=0, atol=1e-10, err_msg=f"{name}, step {t}")
            np.testing.assert_allclose(state.filtered, weights[t], rtol=0, atol=1e-10)
            if t == 11:  # a live filter checkpoints and resumes exactly
                state.save(tmp_path / f"{name}.npz")
                state = bk.load(tmp_path / f"{name}.npz")
        assert int(state.step) == 25
    # a step is one compiled function of the state: it jits and vmaps over independent streams
    kbf = filters["iw"]
    states = jax.vmap(lambda _: kbf.initial_state())(jnp.arange(3))
    xs = jnp.stack([seq.X_test[0], seq.X_test[1], seq.X_test[2]])
    stepped, step_means = jax.jit(jax.vmap(kbf.update))(states, xs)
    for b in range(3):
        np.testing.assert_allclose(step_means[b], kbf.update(kbf.initial_state(), xs[b])[1], atol=1e-12)
    spread = kbr.posterior_spread(state.filtered[:, None], kbf.Z)  # per-step spread of the same posterior
    assert spread.shape == (1, 2, 2) and np.all(np.linalg.eigvalsh(np.asarray(spread[0])) >= -1e-12)
    with pytest.raises(ValueError, match="x must be one observation of dimension 2"):
        kbf.update(kbf.initial_state(), np.zeros(3))
    with pytest.raises(ValueError, match="non-finite"):
        kbf.update(kbf.initial_state(), np.array([np.nan, 0.0]))


def test_filter_traces_under_jit_and_vmaps_over_sequences():
    seq = kbr.data.circle_dynamics(60, jax.random.key(1), T_test=15)
    kbf = kbr.KernelBayesFilter.fit(seq.X, seq.Z, c=1.0, lam=1e-3, eta=1e-4)
    batch = jnp.stack([seq.X_test, seq.X_test[::-1], seq.X_test + 0.1])
    out = jax.jit(jax.vmap(kbf.filter))(batch)
    for b in range(3):
        np.testing.assert_allclose(out[b], kbf.filter(batch[b]), atol=1e-12)
    original = kbr.KernelBayesFilter.fit(seq.X, seq.Z, c=1.0, lam=1e-6, eta=1e-4, method="original")
    traced = jax.jit(lambda X, Z: kbr.KernelBayesFilter.build(X, Z, 0.5, 0.5, 1e-6, 1e-4, method="original")
                     .filter(seq.X_test))(seq.X, seq.Z)
    eager = kbr.KernelBayesFilter.build(seq.X, seq.Z, 0.5, 0.5, 1e-6, 1e-4, method="original").filter(seq.X_test)
    np.testing.assert_allclose(traced, eager, atol=1e-8)  # masked (traced) vs truncated (concrete) factor
    assert np.all(np.isfinite(np.asarray(original.filter(seq.X_test))))


def test_filter_bad_inputs():
    seq = kbr.data.circle_dynamics(30, jax.random.key(2), T_test=5)
    with pytest.raises(ValueError, match="X and Z"):
        kbr.KernelBayesFilter.fit(seq.X, seq.Z[:-1])
    with pytest.raises(ValueError, match="at least 3"):
        kbr.KernelBayesFilter.fit(seq.X[:2], seq.Z[:2])
    with pytest.raises(ValueError, match="lam must be positive"):
        kbr.KernelBayesFilter.fit(seq.X, seq.Z, lam=0.0)
    with pytest.raises(ValueError, match="X contains"):
        kbr.KernelBayesFilter.fit(seq.X.at[3, 0].set(jnp.nan), seq.Z)
    with pytest.raises(ValueError, match="method"):
        kbr.KernelBayesFilter.fit(seq.X, seq.Z, method="bogus")
    with pytest.raises(ValueError, match="too short"):
        kbr.tune_kbf(seq.X[:12], seq.Z[:12])
    constant = jnp.ones_like(seq.X)
    with pytest.raises(ValueError, match="every row of X is the same point"):
        kbr.tune_kbf(constant, seq.Z)
    with pytest.raises(ValueError, match="every row of X is the same point"):
        kbr.KernelBayesFilter.fit(constant, seq.Z)
    with pytest.raises(ValueError, match="means and Z_true must have the same shape"):  # no silent broadcasting
        kbr.filter_mse(seq.Z_test, seq.Z_test[:, :1])
    assert kbr.filter_mse(seq.Z_test + 0.5, seq.Z_test) == pytest.approx(0.5)  # summed over the 2 coordinates
    from bayeskern.kbr.filter import _validation_mse  # tuning: a diverged candidate scores +inf, never selected
    assert _validation_mse(seq.Z_test.at[0, 0].set(jnp.nan), seq.Z_test) == np.inf


def test_gaussian_posterior_task_ground_truth_by_conditioning_and_monte_carlo():
    task = kbr.data.gaussian_posterior_task(2, jax.random.key(3), n_cond=4)
    V = np.asarray(task.V)
    d = 2
    Vxx, Vxz, Vzz = V[:d, :d], V[:d, d:], V[d:, d:]
    Bx = Vxz @ np.linalg.inv(Vzz)  # X | Z = z ~ N(1 + Bx z, Sigma): assemble the joint (Z, X) of Q explicitly
    Sigma = Vxx - Bx @ Vxz.T
    Sp = Vzz / 2
    joint = np.block([[Sp, Sp @ Bx.T], [Bx @ Sp, Bx @ Sp @ Bx.T + Sigma]])  # (Z, X) under Q
    for x, truth in zip(np.asarray(task.X_cond), np.asarray(task.truth)):
        cond = joint[:d, d:] @ np.linalg.solve(joint[d:, d:], x - 1.0)
        np.testing.assert_allclose(truth, cond, atol=1e-12)
    # Monte Carlo: regress Z on X under Q with 10^6 draws, compare the conditional mean at one point
    key1, key2 = jax.random.split(jax.random.key(4))
    z = np.asarray(jax.random.multivariate_normal(key1, jnp.zeros(d), jnp.asarray(Sp), (1_000_000,)))
    x = 1.0 + z @ Bx.T + np.asarray(jax.random.multivariate_normal(key2, jnp.zeros(d), jnp.asarray(Sigma), (1_000_000,)))
    coef = np.linalg.lstsq(np.column_stack([np.ones(len(x)), x - 1.0]), z, rcond=None)[0]
    x0 = np.asarray(task.X_cond[0])
    mc = coef[0] + (x0 - 1.0) @ coef[1:]
    se = np.std(z, axis=0) / np.sqrt(len(z)) * (1 + np.linalg.norm(x0 - 1.0))
    assert np.all(np.abs(mc - np.asarray(task.truth[0])) < 3 * se + 1e-3)


@pytest.mark.parametrize("amp_phase", ["current", "next"])
def test_ekf_jacobian_equals_finite_differences(amp_phase, rng):
    f, jac = kbr.data.circle_transition("oscillatory", amp_phase)
    for z in rng.standard_normal((5, 2)):
        h = 1e-6
        fd = np.column_stack([(np.asarray(f(z + h * e)) - np.asarray(f(z - h * e))) / (2 * h) for e in np.eye(2)])
        np.testing.assert_allclose(jac(jnp.asarray(z)), fd, atol=1e-6)


def test_kalman_limit_of_the_filter():
    """Linear-Gaussian check: MSE(KBF) / MSE(Kalman) falls from T = 100 to T = 400 and is <= 1.25 at T = 400."""
    ratios = {}
    for T in (100, 400):
        r = []
        for run in range(3):
            seq = kbr.data.linear_gaussian_sequence(T, jax.random.key(100 + run))
            kbf = kbr.KernelBayesFilter.fit(seq.X, seq.Z, c=1.0, eta=1e-4, lam=1e-3)
            kalman = kbr.kalman_filter(seq.X_test, 0.9 * jnp.eye(1), jnp.array([[0.09]]), jnp.array([[0.25]]),
                                       jnp.zeros(1), jnp.array([[0.09 / 0.19]]))
            r.append(kbr.filter_mse(kbf.filter(seq.X_test), seq.Z_test) / kbr.filter_mse(kalman, seq.Z_test))
        ratios[T] = np.mean(r)
    assert ratios[400] < ratios[100] and ratios[400] <= 1.25, ratios


def test_tuning_scores_equal_filters_built_directly():
    """tune_kbf shares the lam-independent matrices across its lam grid: scores must equal fresh builds."""
    seq = kbr.data.circle_dynamics(90, jax.random.key(6), T_test=5)
    tuned = kbr.tune_kbf(seq.X, seq.Z, c_grid=(1.0,), lam_grid=(1e-4, 1e-2), n_val=30, num_priors=5)
    X_fit, Z_fit = seq.X[:60], seq.Z[:60]
    med_x, med_z = kbr.filter.median_heuristic(X_fit), kbr.filter.median_heuristic(Z_fit)
    eta = kbr.select_eta_loo(RBF(med_z).gram(Z_fit), kbr.successor_priors(Z_fit, 5, 10), kbr.ETA_GRID)[0]
    for lam in (1e-4, 1e-2):
        kbf = kbr.KernelBayesFilter.build(X_fit, Z_fit, med_x, med_z, lam, eta)
        expected = kbr.filter_mse(kbf.filter(seq.X[60:]), seq.Z[60:])
        assert tuned.validation_mse[(1.0, lam)] == pytest.approx(expected, rel=1e-10)
    assert tuned.validation_mse[(tuned.c, tuned.lam)] == min(tuned.validation_mse.values())


def test_jdl_regression_recovers_the_gaussian_conditional_mean():
    """The static JDL reference: for z ~ N(0, 1), x = z + N(0, 0.5^2), E[z | x] = 0.8 x."""
    rng = np.random.default_rng(8)
    Z = rng.standard_normal((400, 1))
    X = Z + 0.5 * rng.standard_normal((400, 1))
    model = kbr.jdl_regression(X, Z, n_val=100, scales=(0.5, 1.0), lams=(1e-6, 1e-3))
    assert model.constraint == "normalised" and model.n == 400
    grid = np.linspace(-1.2, 1.2, 25)[:, None]
    mean = np.asarray(model.conditional_expectation(grid).mean)
    error = np.abs(mean - 0.8 * grid)
    assert np.sqrt(np.mean(error**2)) < 0.1 and np.max(error) < 0.15
    with pytest.raises(ValueError, match="X and Z"):
        kbr.jdl_regression(X, Z[:-1])


def test_tuning_scores_eta_on_the_last_loo_max_t_steps_of_a_long_series(monkeypatch):
    from bayeskern.kbr.filter import _loo_eta

    Z = kbr.data.circle_dynamics(160, jax.random.key(7)).Z
    sigma = float(kbr.filter.median_heuristic(Z))
    monkeypatch.setattr(kbr.filter, "LOO_MAX_T", 60)
    window = Z[-60:]
    expected, _ = kbr.select_eta_loo(RBF(sigma).evaluate(window, window), kbr.successor_priors(window, 20, 10),
                                     kbr.ETA_GRID)
    assert _loo_eta(Z, sigma, kbr.ETA_GRID, 20, 10) == expected


def test_tuning_never_chooses_a_candidate_out_of_range_or_losing_to_a_baseline():
    seq = kbr.data.circle_dynamics(150, jax.random.key(11), T_test=5)
    tuned = kbr.tune_kbf(seq.X, seq.Z, c_grid=(0.5, 1.0), n_val=50, num_priors=5)
    assert set(tuned.baseline_mse) == {"persistence", "prior mean"}
    assert (tuned.c, tuned.lam) not in tuned.rejected
    assert tuned.validation_mse[(tuned.c, tuned.lam)] < min(tuned.baseline_mse.values())
    admissible = {k: v for k, v in tuned.validation_mse.items() if k not in tuned.rejected}
    assert tuned.validation_mse[(tuned.c, tuned.lam)] == min(admissible.values())
    Z_fit, Z_val = seq.Z[:100], seq.Z[100:150]  # the baselines are what their names say
    persistence = kbr.filter_mse(jnp.concatenate([Z_fit[-1:], Z_val[:-1]]), Z_val)
    assert tuned.baseline_mse["persistence"] == pytest.approx(persistence, rel=1e-12)
    prior = kbr.filter_mse(jnp.broadcast_to(Z_fit.mean(axis=0), Z_val.shape), Z_val)
    assert tuned.baseline_mse["prior mean"] == pytest.approx(prior, rel=1e-12)


def test_tuning_warns_when_no_candidate_beats_persistence():
    rng = np.random.default_rng(12)
    Z = np.cumsum(0.01 * rng.standard_normal((120, 1)), axis=0)  # a slow walk: persistence is nearly exact
    X = rng.standard_normal((120, 1))  # observations that carry no information about it
    with pytest.warns(kbr.TuningWarning, match="persistence"):
        tuned = kbr.tune_kbf(X, Z, c_grid=(1.0,), lam_grid=(1e-3, 1e-1), n_val=40, num_priors=5)
    assert set(tuned.rejected) == set(tuned.validation_mse)
    assert all(reason in ("out of range", "loses to a baseline") for reason in tuned.rejected.values())


def test_the_range_check_widens_each_coordinate_by_the_margin():
    from bayeskern.kbr.filter import _widened_range

    low, high = _widened_range(jnp.array([[0.0, 5.0], [1.0, 5.0], [2.0, 7.0]]))
    np.testing.assert_allclose(low, [-0.2, 4.8])   # the 10 % margin of each coordinate's range
    np.testing.assert_allclose(high, [2.2, 7.2])


def _sunspots_framing(n_test=61):
    """The framing of a filter forecasting sunspots: latent (y_t, y_{t-1}), observation y_{t-1}, y the square root
    of the yearly counts standardised on the training years; the last ``n_test`` years are held out."""
    counts = np.loadtxt(Path(__file__).parent / "data" / "sunspots_yearly.csv", delimiter=",", skiprows=2)[:, 1]
    y = np.sqrt(counts)
    y = (y - y[:-n_test].mean()) / y[:-n_test].std()
    Z, X = np.stack([y[1:], y[:-1]], axis=1), y[:-1, None]
    return X[:-n_test], Z[:-n_test], X[-n_test:], Z[-n_test:]


@pytest.mark.parametrize("n_val", [20, 49, 82])
def test_tuned_filter_never_loses_to_persistence_on_held_out_sunspots(n_val):
    """With n_val = 49 the smallest validation error belongs to c = 0.5, lam = 1e-5, whose read-outs reach 11.7
    standard deviations on the held-out years (test RMSE 2.14 against persistence's 0.75); the one-standard-error
    rule takes the most regularised candidate within the validation noise of the best. n_val from 20 to T / 3."""
    X, Z, X_test, Z_test = _sunspots_framing()
    tuned = kbr.tune_kbf(X, Z, n_val=n_val)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kbr.ReadoutWarning)   # no read-out leaves the training range
        means = np.asarray(tuned.filter.filter(X_test))
    rmse = np.sqrt(np.mean((means[:, 0] - Z_test[:, 0]) ** 2))
    persistence = np.sqrt(np.mean((Z_test[:, 1] - Z_test[:, 0]) ** 2))
    assert rmse < 0.95 * persistence


def test_tuning_takes_the_most_regularised_candidate_within_one_standard_error():
    from bayeskern.kbr.filter import _most_regularised_within_one_se

    rng = np.random.default_rng(0)
    base = rng.exponential(size=100)
    errors = {(1.0, 1e-5): base, (1.0, 1e-2): base + 0.01 * rng.standard_normal(100),   # as good, within noise
              (2.0, 1e-1): base + 1.0}                                                       # clearly worse
    scores = {key: float(e.mean()) for key, e in errors.items()}
    assert _most_regularised_within_one_se(scores, errors) == (1.0, 1e-2)
    errors[(1.0, 1e-2)] = base + 0.5
    scores[(1.0, 1e-2)] = float(errors[(1.0, 1e-2)].mean())
    assert _most_regularised_within_one_se(scores, errors) == (1.0, 1e-5)
