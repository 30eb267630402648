"""The kernel Bayes forecaster: lag designs, seasons, the validated choice, conformal bands and forecast_series."""

import math
import pickle
import statistics
import threading

import jax
import numpy as np
import pytest
import scipy.stats

from bayeskern import kbr
from bayeskern.inference import CalibrationWarning, forecast_series
from bayeskern.kbr.forecast import (ForecastDesign, ForecastTuning, _aic_order, _design_rows, _designs,
                                    _phase_means_p_value, _standardised, conformal_band, lag_design, seasonal_period,
                                    tune_forecaster)
from bayeskern.kbr.multistep import _forecast_path

FAST = dict(c_grid=(1.0,), lam_grid=(1e-3, 1.0), eta_grid=(1e-3,))


def nonlinear_ar(T, seed, noise=0.3):
    """y_t = 0.9 sin(2 y_{t-1}) ... a threshold-like nonlinear autoregression an AR(1) fits badly."""
    rng = np.random.default_rng(seed)
    y = np.zeros(T)
    for t in range(1, T):
        y[t] = 2.0 * np.sin(1.5 * y[t - 1]) + noise * rng.standard_normal()
    return y


def ar1(T, seed, a=0.7):
    rng = np.random.default_rng(seed)
    y = np.zeros(T)
    for t in range(1, T):
        y[t] = a * y[t - 1] + rng.standard_normal()
    return y


def test_lag_design_matches_the_definition():
    u = np.arange(20.0).reshape(10, 2)
    X, Z = lag_design(u, (1, 3))
    assert X.shape == (7, 4) and Z.shape == (7, 6)
    for r in range(7):
        t = r + 3
        np.testing.assert_array_equal(X[r], np.concatenate([u[t - 1], u[t - 3]]))
        np.testing.assert_array_equal(Z[r], np.concatenate([u[t], u[t - 1], u[t - 3]]))
    X1, Z1 = lag_design(np.arange(5.0), (1,))  # a (T,) series is one coordinate
    np.testing.assert_array_equal(X1[:, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(Z1[:, 0], [1, 2, 3, 4])


@pytest.mark.parametrize("lags", [(), (0, 1), (2, 1), (1, 1), (1.5,), 10])
def test_lag_design_refuses_bad_lags(lags):
    with pytest.raises(ValueError, match="lags|largest lag"):
        lag_design(np.zeros(10), lags)


def test_seasonal_period_finds_a_monthly_season_and_none_in_noise():
    rng = np.random.default_rng(0)
    t = np.arange(240)
    seasonal = np.sin(2 * np.pi * t / 12) + 0.01 * t + 0.2 * rng.standard_normal(240)
    assert seasonal_period(seasonal, 40) == 12
    assert seasonal_period(rng.standard_normal(240), 40) is None
    assert seasonal_period(seasonal[:10], 40) is None  # too short for any period >= 4


def test_seasonal_period_of_a_sinusoid_under_autocorrelated_noise():
    """A sinusoidal season's autocorrelation is a flat-topped cosine: noise moves its highest peak to 11, 13, 23, 25
    or 36 (on about half of these series), where the F test of the phase means still finds 12. A random profile
    that repeats every 12 steps is found as well; the F test is checked against its definition."""
    rng, t = np.random.default_rng(8), np.arange(192)
    found = {"sinusoid": 0, "profile": 0}
    for _ in range(50):
        noise = ar1(192, seed=int(rng.integers(1 << 30)), a=0.7)
        found["sinusoid"] += seasonal_period(2 * np.sin(2 * np.pi * t / 12) + noise, 48) == 12
        found["profile"] += seasonal_period(np.tile(rng.normal(0, 1.5, 12), 16) + noise, 48) == 12
    assert found["sinusoid"] >= 45 and found["profile"] >= 48
    u = rng.standard_normal((60, 2))
    u -= u.mean(axis=0)
    groups = [u[np.arange(60) % 5 == k] for k in range(5)]
    between = sum(g.shape[0] * np.sum(g.mean(axis=0) ** 2) for g in groups)
    F = (between / 8) / ((np.sum(u**2) - between) / 110)
    assert _phase_means_p_value(u, 5) == pytest.approx(scipy.stats.f.sf(F, 8, 110), rel=1e-9)


def test_seasonal_period_rarely_finds_a_season_in_noise():
    """The largest of ~50 white-noise autocorrelations exceeds the one-lag band 2 / sqrt(T) in most series; the
    band corrected for the number of lags searched keeps false seasons near its 2.5 % (1.25 expected in 50; on
    these series the one-lag band finds 44 and 29 of 50)."""
    rng = np.random.default_rng(3)
    noise = [rng.standard_normal(240) for _ in range(50)]
    walks = [np.cumsum(rng.standard_normal(240)) for _ in range(25)] + [ar1(240, seed) for seed in range(25)]
    assert sum(seasonal_period(y, 60) is not None for y in noise) <= 4
    assert sum(seasonal_period(y, 60) is not None for y in walks) <= 4


def test_dickey_fuller_t_is_the_t_statistic_of_the_lagged_level():
    """Against the whole regression solved with its normal equations, per coordinate, for a given number of lagged
    differences and for the number of smallest AIC among 0..15 (all fitted on the changes from the 16th on); a random
    walk keeps its unit root, a stationary autoregression rejects it, a constant coordinate has no statistic."""
    rng = np.random.default_rng(4)
    walk, stationary = np.cumsum(rng.standard_normal(200)), ar1(200, seed=5, a=0.5)
    changes = np.zeros(200)     # changes that follow an AR(3): the AIC wants three lagged differences
    for t in range(3, 200):
        changes[t] = 0.5 * changes[t - 1] - 0.4 * changes[t - 2] + 0.3 * changes[t - 3] + rng.standard_normal()

    def regression(y, k, first):    # (t statistic of rho, AIC) over the changes from index first
        dy = np.diff(y)
        A = np.column_stack([np.ones(dy.size - first), y[first:-1]]
                            + [dy[first - j: dy.size - j] for j in range(1, k + 1)])
        beta = np.linalg.solve(A.T @ A, A.T @ dy[first:])
        resid = dy[first:] - A @ beta
        var = resid @ resid / (A.shape[0] - A.shape[1]) * np.linalg.solve(A.T @ A, np.eye(A.shape[1])[1])[1]
        return beta[1] / math.sqrt(var), A.shape[0] * math.log(resid @ resid / A.shape[0]) + 2 * A.shape[1]

    chosen = []
    for y in (walk, stationary, np.cumsum(changes)):
        for k in (0, 2, 3):
            assert kbr.dickey_fuller_t(y, lagged_differences=k)[0] == pytest.approx(regression(y, k, k)[0], rel=1e-9)
        k = min(range(16), key=lambda k: regression(y, k, 15)[1])
        assert kbr.dickey_fuller_t(y)[0] == pytest.approx(regression(y, k, k)[0], rel=1e-9)
        chosen.append(k)
    assert chosen[2] >= 3 and chosen[0] < chosen[2]
    stats = kbr.dickey_fuller_t(np.column_stack([walk, stationary, np.full(200, 2.0)]))
    assert stats[0] > -2.86 and stats[1] < -2.86 and np.isnan(stats[2])
    for scale, level in ((1e-8, 0.0), (1e-3, 1e6), (1e5, 0.0)):   # units do not matter (the tuning passes raw y)
        scaled = level + scale * np.column_stack([walk, stationary])
        np.testing.assert_allclose(kbr.dickey_fuller_t(scaled), stats[:2], rtol=1e-6)
    # near-exact fits: mean reversion far below the critical value, explosive growth far above it
    assert kbr.dickey_fuller_t(2 + 0.5 ** np.arange(30.0), lagged_differences=0)[0] < -1e6
    assert kbr.dickey_fuller_t(1.1 ** np.arange(30.0), lagged_differences=0)[0] > 1e6
    with pytest.raises(ValueError, match="too short"):
        kbr.dickey_fuller_t(walk[:4])
    with pytest.raises(ValueError, match="too short"):
        kbr.dickey_fuller_t(walk[:8], lagged_differences=2)


def test_automatic_designs_drop_differences_where_a_unit_root_test_rejects_one():
    """The automatic designs take no first differences where a Dickey-Fuller test rejects a unit root, and both
    with and without them where it does not; with a season the seasonal differences stay either way; explicit lags
    validate both."""
    rng = np.random.default_rng(6)
    walk, stationary = np.cumsum(rng.standard_normal(200))[:, None], ar1(200, seed=7, a=0.5)[:, None]
    assert {d.difference for d in _designs(walk, "auto", None, None)} == {False, True}
    assert {d.difference for d in _designs(stationary, "auto", None, None)} == {False}
    assert {d.difference for d in _designs(np.hstack([walk, stationary]), "auto", None, None)} == {False, True}
    assert {d.difference for d in _designs(stationary, (1, 2), None, None)} == {False, True}
    season = np.sin(2 * np.pi * np.arange(200) / 12)[:, None]
    seasonal = _designs(stationary + season, "auto", 12, None)
    assert {(d.difference, d.seasonal) for d in seasonal} == {(False, 0), (False, 12)}
    seasonal = _designs(walk + season, "auto", 12, None)
    assert {(d.difference, d.seasonal) for d in seasonal} == {(False, 0), (True, 0), (False, 12), (True, 12)}


def test_the_unit_root_test_reads_the_validation_steps_too(monkeypatch):
    """The designs are read off the fit steps, the unit-root test off the whole training series (it fits nothing
    to the validation errors)."""
    import bayeskern.kbr.forecast as forecast

    read = []
    test = forecast.dickey_fuller_t
    monkeypatch.setattr(forecast, "dickey_fuller_t", lambda y, **kw: read.append(len(y)) or test(y, **kw))
    monkeypatch.setattr(forecast, "_scored_designs", lambda designs, setting, workers: [])   # no filter: a baseline
    assert tune_forecaster(ar1(150, seed=3, a=0.5), n_val=30, season=None, workers=1).fallback is not None
    assert read == [150]


def test_seasonal_period_is_the_shortest_period_not_a_multiple_of_it():
    """Here the differences' autocorrelation peaks highest at 24 by chance; 12 is the period."""
    t = np.arange(150)
    y = 3 * np.sin(2 * np.pi * t / 12) + np.random.default_rng(1).standard_normal(150)
    u = np.diff(y) - np.diff(y).mean()
    acf = np.array([np.sum(u[s:] * u[:-s]) / np.sum(u**2) for s in range(1, 38)])
    assert np.argmax(acf[3:]) + 4 == 24
    assert seasonal_period(y, 37) == 12


@pytest.mark.parametrize("difference, seasonal", [(False, 0), (True, 0), (False, 12), (True, 12)])
def test_design_rows_rebuild_the_series_from_its_differences(difference, seasonal):
    """u = (1 - B)^a (1 - B^s)^b y, each forecast step's base = y_t - u_t from earlier values only, and the rows
    start at the design's offset."""
    y = np.random.default_rng(4).standard_normal((80, 2)).cumsum(axis=0)
    design = ForecastDesign((1, 3), difference, seasonal)
    X, Z, base, offset = _design_rows(y, design)
    u = np.diff(y, axis=0, prepend=np.nan) if difference else y.copy()
    if seasonal:
        u = np.concatenate([np.full((seasonal, 2), np.nan), u[seasonal:] - u[:-seasonal]])
    assert offset == 3 + int(difference) + seasonal and X.shape == (80 - offset, 4)
    np.testing.assert_allclose(Z[:, :2], u[offset:], atol=1e-12)
    np.testing.assert_allclose(X, np.hstack([u[offset - 1: -1], u[offset - 3: -3]]), atol=1e-12)
    np.testing.assert_allclose(base + Z[:, :2], y[offset:], atol=1e-12)
    assert ForecastDesign((1, 2), True, 12).label == "lags 1-2, first and seasonal (12) differences"
    assert ForecastDesign((1,), False, 0, 4).label == "lags (1,), levels, seasonal (4) intercepts"


def test_aic_order_recovers_an_ar2():
    rng = np.random.default_rng(1)
    y = np.zeros(3000)
    for t in range(2, 3000):
        y[t] = 0.5 * y[t - 1] - 0.4 * y[t - 2] + rng.standard_normal()
    assert _aic_order(y[:, None], 8) == 2


def test_automatic_designs_include_the_season_and_both_transforms():
    t = np.arange(300)   # a season on a wandering level: no unit-root test rejects
    y = (np.sin(2 * np.pi * t / 12) + 0.05 * np.cumsum(np.random.default_rng(2).standard_normal(300)))[:, None]
    designs = _designs(y, "auto", None, None)
    lag_sets = {d.lags for d in designs}
    assert (1, 2, 12) in lag_sets and (1, 2, 11, 12, 13) in lag_sets
    assert {(d.difference, d.seasonal) for d in designs} == {(False, 0), (True, 0), (False, 12), (True, 12)}
    assert all(max(lags) <= 13 for lags in lag_sets)


def test_levels_and_differences_take_seasonal_intercepts_where_the_aic_of_their_autoregression_says_so():
    """A fixed monthly profile on a random walk: the short lag sets of levels and differences take one intercept
    per month; seasonal differences keep one. White noise given a season of 12: no design takes them."""
    rng = np.random.default_rng(3)
    noise = np.cumsum(rng.standard_normal(240))
    profile = np.tile(3 * rng.standard_normal(12), 20)
    designs = {(d.lags, d.difference, d.seasonal): d.intercepts for d in _designs((profile + noise)[:, None],
                                                                                  "auto", 12, None)}
    assert designs[(1,), False, 0] == designs[(1,), True, 0] == 12
    assert all(p == 0 for (lags, difference, seasonal), p in designs.items() if seasonal)
    white = rng.standard_normal((240, 1))
    assert {d.intercepts for d in _designs(white, "auto", 12, None)} == {0}


def test_seasonal_lags_need_four_seasons_and_runs_of_lags_ten_steps_per_lag():
    """Ten years of monthly data before validation offer lags 12 and 13 (a quarter of the steps) but runs of
    consecutive lags only up to 10 (a tenth); four years offer no seasonal lag, though still seasonal differences."""
    y = np.sin(2 * np.pi * np.arange(100) / 12)[:, None]
    lag_sets = {d.lags for d in _designs(y, "auto", 12, None)}
    assert {(1, 2, 12), (1, 2, 11, 12, 13)} <= lag_sets
    assert max(max(lags) for lags in lag_sets if lags == tuple(range(1, max(lags) + 1))) <= 10
    short = _designs(y[:48], "auto", 12, None)
    assert all(max(d.lags) <= 4 for d in short) and {d.seasonal for d in short} == {0, 12}
    assert all(max(d.lags) <= 6 for d in _designs(y, "auto", 12, 6))   # an explicit max_lag caps both


def test_conformal_band_is_the_rank_quantile_of_the_known_scores():
    calibration = np.arange(1.0, 10.0)[:, None]  # 9 scores: rank ceil(10 * 0.8) = 8 -> 8.0
    mean = np.zeros((3, 1))
    errors = np.array([[100.0], [0.5], [0.5]])
    band, widened = conformal_band(mean, np.ones_like(mean), calibration, errors, 0.8, gamma=0.0)
    assert band[1, 0, 0] == 8.0 and band[0, 0, 0] == -8.0
    assert band[1, 1, 0] == 9.0  # 10 scores known (100 added): rank ceil(11 * 0.8) = 9 -> 9.0
    assert not widened.any()


def test_conformal_band_is_finite_by_its_tail_rule_where_the_scores_are_too_few():
    """2 scores cannot give a 90 % band (rank ceil(3 * 0.9) = 3 > 2): the half-width is the larger of the largest
    score and the Gaussian quantile of the level times the scores' root mean square."""
    mean, scores = np.zeros((3, 1)), np.array([[1.0], [2.0]])
    band, widened = conformal_band(mean, np.ones_like(mean), scores, np.zeros((3, 1)), 0.9, gamma=0.0)
    z = statistics.NormalDist().inv_cdf(0.95)
    assert widened.all() and band[1, 0, 0] == pytest.approx(z * np.sqrt(2.5))   # 2.08 > 2
    assert band[1, 2, 0] == 2.0   # 4 scores 0, 0, 1, 2 (rank 5 > 4): z sqrt(1.25) = 1.84 < 2
    band, widened = conformal_band(mean, np.ones_like(mean), scores, np.zeros((3, 1)), 0.5, gamma=0.0)
    assert not widened.any() and band[1, 0, 0] == 2.0   # rank ceil(3 * 0.5) = 2


def test_conformal_band_stays_finite_after_a_run_of_misses():
    """Misses drive the adaptive alpha below zero, where the exact band is the whole line; the tail rule's quantile
    is then that of (1 - level) / 10."""
    mean = np.zeros((30, 1))
    errors = 10.0 ** np.arange(1.0, 31.0)[:, None]   # each ten times the last: every step is missed
    band, widened = conformal_band(mean, np.ones_like(mean), np.ones((20, 1)), errors, 0.9, gamma=0.05)
    assert np.all(np.isfinite(band)) and np.all(np.abs(errors) > band[1]) and widened[3:].all()
    known = np.concatenate([np.ones(20), errors[:-1, 0]])
    z = statistics.NormalDist().inv_cdf(1 - 0.005)
    assert band[1, -1, 0] == pytest.approx(max(known.max(), z * np.sqrt(np.mean(known**2))))


def test_conformal_band_covers_exchangeable_errors_and_adapts_to_a_jump():
    rng = np.random.default_rng(3)
    misses_plain, misses_adaptive, misses_static = [], [], []
    for _ in range(40):
        calibration = np.abs(rng.standard_normal((50, 1)))
        errors = rng.standard_normal((200, 1))
        band = conformal_band(np.zeros((200, 1)), np.ones((200, 1)), calibration, errors, 0.9, gamma=0.0).band
        misses_plain.append(np.mean(np.abs(errors) > band[1]))
        jump = errors * np.where(np.arange(200) < 50, 1.0, 3.0)[:, None]  # the errors triple after step 50
        for gamma, out in ((0.05, misses_adaptive), (0.0, misses_static)):
            band = conformal_band(np.zeros((200, 1)), np.ones((200, 1)), calibration, jump, 0.9, gamma=gamma).band
            out.append(np.mean(np.abs(jump[100:]) > band[1, 100:]))
    assert abs(np.mean(misses_plain) - 0.1) < 0.015  # exchangeable: level holds (MC s.e. about 0.004)
    assert abs(np.mean(misses_adaptive) - 0.1) < 0.03  # adaptive: back near 10 % after the jump
    assert np.mean(misses_static) > 0.15  # without adaptation the old scores keep the band too narrow


@pytest.mark.parametrize("gamma", [0.0, 0.05])
def test_conformal_band_with_a_delay_uses_only_the_revealed_scores(gamma):
    """h-step errors from consecutive origins are revealed h steps later: with ``delay`` 3, step t's band is the
    rank quantile of the calibration and of the scores of steps up to t - 3, and the adaptation after step t uses the
    miss of step t - 2 (by hand); no later error changes it."""
    rng = np.random.default_rng(11)
    calibration, errors = np.abs(rng.standard_normal((12, 1))), 1.5 * rng.standard_normal((40, 1))
    mean, scale = np.zeros((40, 1)), np.ones((40, 1))
    band = conformal_band(mean, scale, calibration, errors, 0.8, gamma=gamma, delay=3).band
    alpha, q = 0.2, np.empty(40)
    for t in range(40):
        known = np.sort(np.concatenate([calibration[:, 0], np.abs(errors[:max(0, t - 2), 0])]))
        q[t] = known[math.ceil((known.size + 1) * (1 - alpha)) - 1]
        if t >= 2:
            alpha += gamma * (0.2 - (abs(errors[t - 2, 0]) > q[t - 2]))
    np.testing.assert_allclose(band[1, :, 0], q, rtol=0, atol=0)
    later = errors.copy()
    later[20:] *= 10.0
    np.testing.assert_array_equal(conformal_band(mean, scale, calibration, later, 0.8, gamma=gamma, delay=3)
                                  .band[:, :22], band[:, :22])


@pytest.mark.parametrize("kwargs, match", [(dict(level=1.0), "level"), (dict(gamma=-0.1), "gamma"),
                                           (dict(scale=np.zeros((3, 1))), "scale"),
                                           (dict(errors=np.zeros((2, 1))), "shape"), (dict(delay=0), "delay")])
def test_conformal_band_refuses_bad_input(kwargs, match):
    args = dict(mean=np.zeros((3, 1)), scale=np.ones((3, 1)), calibration=np.ones((5, 1)), errors=np.zeros((3, 1)),
                level=0.9)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        conformal_band(**args)


def test_tuned_forecaster_beats_the_baselines_on_validation_and_test():
    y = nonlinear_ar(260, seed=4)
    tuning = tune_forecaster(y[:200], lags=(1, 2), n_val=50, **FAST)
    assert isinstance(tuning, ForecastTuning) and tuning.best is not None
    assert tuning.best.mse < min(tuning.persistence_mse, tuning.prior_mean_mse)
    assert tuning.validation_errors.shape == (50, 1) and len(tuning.candidates) == 2  # levels and differences
    assert np.isclose(np.mean(tuning.validation_errors**2), tuning.best.mse)
    forecast, clipped = _forecast_path(y[:200, None], y[200:, None], tuning)
    assert not clipped.any()
    rmse = np.sqrt(np.mean((forecast[:, 0] - y[200:]) ** 2))
    persistence = np.sqrt(np.mean((y[199:-1] - y[200:]) ** 2))
    coefs = np.polyfit(y[:199], y[1:200], 1)  # least-squares AR(1) on the training steps
    ar = np.sqrt(np.mean((np.polyval(coefs, y[199:-1]) - y[200:]) ** 2))
    assert rmse < 0.8 * ar and rmse < 0.8 * persistence  # the kernel part sees the nonlinearity


def test_a_baseline_forecasts_when_it_is_chosen():
    y = np.cumsum(np.random.default_rng(5).standard_normal(60))[:, None]
    for fallback, expected in (("persistence", y[39:59]), ("prior mean", np.full((20, 1), y[:40].mean()))):
        tuning = ForecastTuning(None, fallback, (), 1.0, 1.0, np.zeros((10, 1)), 10)
        np.testing.assert_allclose(_forecast_path(y[:40], y[40:], tuning)[0], expected)


def test_forecaster_drops_candidates_that_lose_to_persistence():
    y = np.cumsum(np.random.default_rng(6).standard_normal(200))  # a random walk: persistence is optimal
    tuning = tune_forecaster(y, lags=(1,), n_val=60, c_grid=(0.2,), lam_grid=(1e-4,), eta_grid=(1e-3,))
    if tuning.best is None:
        assert tuning.fallback == "persistence"
    else:
        assert tuning.best.mse < tuning.persistence_mse
    # with no admissible candidate the errors reported are the baseline's own
    if tuning.best is None:
        s = _standardised(y[:140, None], y[:, None])
        np.testing.assert_allclose(tuning.validation_errors, s[139:-1] - s[140:])


def test_forecast_series_is_causal_and_shaped():
    y = nonlinear_ar(200, seed=7)
    first = forecast_series(y[:150], y[150:], bayesian=False, lags=(1, 2), n_val=40)
    assert first.mean.shape == (50, 1) and first.band.shape == (2, 50, 1) and first.mcmc is None
    assert first.design.lags == (1, 2)
    assert np.all(first.band[0] <= first.mean) and np.all(first.mean <= first.band[1])
    changed = y.copy()
    changed[170] += 5.0  # test step 20: forecasts of rows 0..20 may not see it
    second = forecast_series(y[:150], changed[150:], bayesian=False, lags=(1, 2), n_val=40)
    np.testing.assert_allclose(second.mean[:21], first.mean[:21], rtol=0, atol=1e-12)
    assert not np.allclose(second.mean[21:23], first.mean[21:23])
    np.testing.assert_allclose(second.band[:, :21], first.band[:, :21], rtol=0, atol=1e-12)


def test_forecast_series_band_covers_about_its_level():
    hits = []
    for seed in range(3):
        y = ar1(300, seed=10 + seed)
        fc = forecast_series(y[:150], y[150:], bayesian=False, lags=(1,), n_val=50)
        hits.append(np.mean((y[150:, None] >= fc.band[0]) & (y[150:, None] <= fc.band[1])))
    assert 0.83 <= np.mean(hits) <= 0.97  # 450 test steps: MC s.e. of the coverage about 0.014


def test_forecast_series_takes_several_coordinates():
    rng = np.random.default_rng(8)
    y = np.stack([ar1(160, 20), ar1(160, 21, a=0.3)], axis=1) + 0.01 * rng.standard_normal((160, 2))
    fc = forecast_series(y[:120], y[120:], bayesian=False, lags=(1,), n_val=30)
    assert fc.mean.shape == (40, 2) and fc.band.shape == (2, 40, 2)


def test_the_bayesian_forecaster_samples_refits_on_its_window_and_keeps_the_phase_of_seasonal_intercepts(
        monkeypatch):
    """A fixed monthly profile (sd about 3) under AR(1) noise, 150 training steps, the model's window of fit steps
    set to 100. The model and every draw's refitted filter are low rank (the larger landmark count) and use the last
    100 fit steps; the calibration forecasts refit on the rows before the 30 calibration steps (150 - 30 - 30 steps,
    89 rows of lag 1). The chosen design carries seasonal intercepts, and the Bayesian one-step forecasts, whose
    autoregression starts at the first test step's phase, are about as accurate as the tuned ones (intercepts one
    phase off would cost about the profile's size)."""
    import bayeskern.inference.forecast as forecast

    monkeypatch.setattr(forecast, "FORECAST_MAX_FIT", 100)
    fitted_rows, split, predictive = [], forecast.split_for_validation, forecast.posterior_predictive_filter

    def recorded_split(*args, **kwargs):
        result = split(*args, **kwargs)
        fitted_rows.append(len(result.X_fit))
        return result

    monkeypatch.setattr(forecast, "split_for_validation", recorded_split)
    monkeypatch.setattr(forecast, "posterior_predictive_filter",
                        lambda draws, X, Z, *a, **k: fitted_rows.append((len(X), k["rank"]))
                        or predictive(draws, X, Z, *a, **k))
    rng = np.random.default_rng(5)
    noise = np.zeros(180)
    for t in range(1, 180):
        noise[t] = 0.5 * noise[t - 1] + rng.standard_normal()
    y = np.tile(3 * rng.standard_normal(12), 15) + noise
    setting = dict(lags=(1,), season=12, n_val=30, workers=1)
    plain = forecast_series(y[:150], y[150:], **setting)
    assert plain.design.intercepts == 12
    fc = forecast_series(y[:150], y[150:], key=jax.random.key(0), bayesian=True, num_chains=1, num_warmup=30,
                         num_samples=30, num_landmarks=(6, 10), **setting)
    assert fitted_rows == [100, (89, 10), (100, 10)]
    assert fc.design == plain.design and fc.mcmc is not None
    assert fc.calibration.shape == (30, 1) and np.all(fc.calibration >= 0)
    assert fc.mean.shape == (30, 1) and np.all(fc.scale > 0)
    assert np.all(fc.band[0] <= fc.mean) and np.all(fc.mean <= fc.band[1])

    def rmse(forecast):
        return np.sqrt(np.mean((forecast.mean[:, 0] - y[150:]) ** 2))

    assert rmse(plain) < 1.5 and rmse(fc) < 1.2 * rmse(plain)


def test_the_bayesian_one_step_forecaster_averages_the_chosen_designs_draws_with_the_other_members(monkeypatch):
    """With three members, the Bayesian one-step forecast is the average of the chosen design's Bayesian forecast
    (its draws' filters averaged, as when it forecasts alone) and the other two members' validated forecasts, with
    equal weights (fixed draws given in place of the sampler's)."""
    import types

    import bayeskern.inference.forecast as forecast

    y = (5.0 + nonlinear_ar(230, seed=3))[:, None]
    tuning = tune_forecaster(y[:180], lags=(1, 2), n_val=40, workers=1, **FAST)
    b = tuning.best
    members = (b, b._replace(design=ForecastDesign((1,), True)), b._replace(design=ForecastDesign((1, 2), False, 4)))
    hyper = np.log([[0.8, 1.0, 1e-3, 1e-4, 0.3], [1.3, 0.7, 1e-2, 3e-4, 0.4], [1.0, 1.5, 0.1, 1e-3, 0.5]])
    draws = dict(zip(("log_cx", "log_cz", "log_lam", "log_eta", "log_s"), hyper.T))
    run = types.SimpleNamespace(draws=lambda: draws, diagnostics=None)
    monkeypatch.setattr(forecast, "_hyperparameter_posterior", lambda *args: run)
    fits = {}
    for name, chosen in (("all", members), ("alone", members[:1])):
        picked = tuning._replace(members=chosen)
        monkeypatch.setattr(forecast, "tune_forecaster", lambda *args, **kwargs: picked)
        fits[name] = forecast_series(y[:180], y[180:], key=jax.random.key(0), bayesian=True, n_val=40)
    others, _ = _forecast_path(y[:180], y[180:], tuning._replace(members=members[1:]))
    np.testing.assert_allclose(fits["all"].mean, (fits["alone"].mean + 2 * others) / 3, rtol=0, atol=1e-10)
    assert np.mean(np.abs(fits["alone"].mean - others)) > 1e-2            # the members forecast differently
    assert np.all(fits["all"].scale < fits["alone"].scale)   # a third of the draws' spread; the same noise


def test_the_chains_start_at_the_posterior_mode_uphill_of_the_validated_choice(monkeypatch, caplog):
    """The climb ends at a stationary point of the model's potential, lower than the start's; a climb that ends
    anywhere not finite leaves the start as it was. Start, climb and scores are one program (initialising and
    scoring the model operation by operation compiled 129), which other data of the same shapes reuse."""
    from numpyro.infer import init_to_value
    from numpyro.infer.util import initialize_model

    import bayeskern.inference.forecast as forecast

    y = nonlinear_ar(140, seed=9)[:, None]
    design = ForecastDesign((1, 2), False)
    X, Z, _, _ = _design_rows(_standardised(y, y), design)
    R, _ = forecast._residual_latents(X, Z, 100, design)
    split = forecast.split_for_validation(X, R, n_val=30, burn_in=0, num_landmarks=(6, 10), max_fit=60)
    start = {"log_cx": np.log(0.5), "log_cz": np.log(0.5), "log_lam": 0.0, "log_eta": np.log(1e-4),
             "log_s": np.log(0.5)}

    def potential_and_gradient(values):
        info = initialize_model(jax.random.key(0), forecast.kbf_hyper_model, model_args=(split,),
                                init_strategy=init_to_value(values=values))
        value, grad = jax.value_and_grad(info.potential_fn)(info.param_info.z)
        return float(value), np.sqrt(sum(float(np.sum(g**2)) for g in grad.values()))

    with jax.log_compiles(True), caplog.at_level("WARNING"):
        mode = forecast._posterior_mode(split, start)
    compiled = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Compiling jit(")]
    assert len(compiled) <= 20 and any(m.startswith("Compiling jit(_start_and_climb)") for m in compiled), compiled
    (u0, g0), (u1, g1) = potential_and_gradient(start), potential_and_gradient(mode)
    assert set(mode) == set(start) and u1 < u0 - 10 and g0 > 1 and g1 < 1e-6 * g0
    other = split._replace(X_val=split.X_val[::-1], Z_val=split.Z_val[::-1])   # other data, the same shapes
    with jax.log_compiles(True), caplog.at_level("WARNING"):
        caplog.clear()
        forecast._posterior_mode(other, start)
    assert not [r for r in caplog.records if r.getMessage().startswith("Compiling jit(")]
    # the line search's values are the potential's (arguments as _posterior_mode passes them: no recompilation)
    _, values, u, u_start = forecast._start_and_climb(split, {name: np.asarray(v) for name, v in start.items()})
    assert float(u) == pytest.approx(potential_and_gradient(values)[0], rel=1e-10)
    assert float(u_start) == pytest.approx(u0, rel=1e-10)
    monkeypatch.setattr(forecast, "_climb", lambda potential, x: (jax.tree.map(lambda v: v * np.nan, x), 0.0, 1.0))
    climb = forecast._start_and_climb.__wrapped__   # traced afresh (a new function), so with the climb above
    monkeypatch.setattr(forecast, "_start_and_climb", jax.jit(lambda split, start: climb(split, start)))
    assert forecast._posterior_mode(split, start) is start


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(level=0.0), ValueError, "level"),
    (dict(gamma=-1.0), ValueError, "gamma"),
    (dict(bayesian=True), TypeError, "key"),
    (dict(y_test=np.zeros((5, 2))), ValueError, "dimension"),
    (dict(y_train=np.r_[np.zeros(50), np.nan]), ValueError, "y_train"),
    (dict(lags=(2, 1)), ValueError, "lags"),
    (dict(lags="seasonal"), ValueError, "lags"),
])
def test_forecast_series_refuses_bad_input(kwargs, error, match):
    args = dict(y_train=np.sin(np.arange(60.0)), y_test=np.zeros(5), bayesian=False)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        forecast_series(args.pop("y_train"), args.pop("y_test"), **args)


def test_public_names_are_exported():
    assert kbr.tune_forecaster is tune_forecaster and kbr.conformal_band is conformal_band


def test_a_validation_block_over_half_the_series_is_refused_by_name():
    y = ar1(80, seed=13)
    tuning = tune_forecaster(y, lags=(1,), n_val=40, **FAST)  # half: taken
    assert tuning.num_validation == 40 and tuning.validation_errors.shape == (40, 1)
    with pytest.raises(ValueError, match="n_val must be at most half the series"):
        tune_forecaster(y[:60], n_val=100)


def test_designs_scored_together_score_as_each_alone(monkeypatch):
    """The automatic search pads every design's lag vectors with zero columns to the widest design's, so all its
    filters have one set of shapes (compiled once); each design's validation error is the one it has alone. (The
    filters are built on the last 60 fit steps, a window that the longest design's reach does not shorten here.)"""
    import bayeskern.kbr.forecast as forecast

    shapes, filter_means = set(), forecast._filter_means
    monkeypatch.setattr(forecast, "_filter_means",
                        lambda X, *a: shapes.add(X.shape) or filter_means(X, *a))
    y, options = nonlinear_ar(150, seed=11), dict(n_val=30, max_fit=60, workers=1, **FAST)
    together = {cand.design: cand for cand in tune_forecaster(y, lags="auto", **options).candidates}
    assert len({len(design.lags) for design in together}) >= 3 and len(shapes) == 1
    # the automatic search validates levels only on this stationary series (Dickey-Fuller); lags (1, 2) both
    shared = [cand for cand in tune_forecaster(y, lags=(1, 2), **options).candidates if cand.design in together]
    assert [cand.design.difference for cand in shared] == [False]
    for cand in shared:
        match = together[cand.design]
        assert (match.c, match.lam, match.eta, match.in_range) == (cand.c, cand.lam, cand.eta, cand.in_range)
        assert match.mse == pytest.approx(cand.mse, rel=1e-10)


def test_every_design_validates_on_the_same_number_of_fit_rows(monkeypatch):
    """Where the series is too short for max_fit, every design's validation filter is built on as many (the last)
    fit rows as the design with the longest reach leaves: one shape for all (compiled once), equal terms."""
    import bayeskern.kbr.forecast as forecast

    shapes, filter_means = set(), forecast._filter_means
    monkeypatch.setattr(forecast, "_filter_means",
                        lambda X, *a: shapes.add(X.shape) or filter_means(X, *a))
    T, V = 90, 20
    tuning = tune_forecaster(nonlinear_ar(T, seed=13), n_val=V, workers=1, **FAST)
    reach = max(cand.design.offset for cand in tuning.candidates)
    assert reach >= 4 and shapes == {(T - V - reach, max(len(c.design.lags) for c in tuning.candidates))}


def _spread_search_matches_the_search_here(monkeypatch, run_jobs):
    """tune_forecaster with workers=2 (three or four designs dealt out to two jobs run by ``run_jobs``, the signature of
    run_pinned) gives every candidate, the choice and the validation errors of the search in this process, in
    design order."""
    import bayeskern.kbr.forecast as forecast

    jobs = []

    def recorded(target, js, *rest):
        jobs.append(len(js))
        return run_jobs(target, js, *rest)

    monkeypatch.setattr(forecast, "run_pinned", recorded)
    y = nonlinear_ar(120, seed=12)
    here = tune_forecaster(y, max_lag=4, n_val=30, max_fit=40, workers=1, **FAST)
    spread = tune_forecaster(y, max_lag=4, n_val=30, max_fit=40, workers=2, **FAST)  # lags 1, 1-2, 1-4 on levels
    assert jobs == [2] and len(spread.candidates) == len(here.candidates) >= 3
    for a, b in zip(here.candidates + (here.best,), spread.candidates + (spread.best,)):
        assert (a.design, a.c, a.lam, a.eta, a.in_range) == (b.design, b.c, b.lam, b.eta, b.in_range)
        assert a.mse == pytest.approx(b.mse, rel=1e-10)
    np.testing.assert_allclose(spread.validation_errors, here.validation_errors, rtol=0, atol=1e-12)


def test_designs_dealt_out_to_workers_score_as_here(monkeypatch):
    """The jobs as the workers get them (target and job through a pickle round trip), run here one after another."""
    def run_here(target, jobs, cores, progress):
        runs = [pickle.loads(pickle.dumps((target, job))) for job in jobs]
        return [run(job, None, threading.Event()) for run, job in runs], False

    _spread_search_matches_the_search_here(monkeypatch, run_here)


@pytest.mark.slow  # suite time: two worker processes start JAX and compile (about 10 s); the dealing is checked above
def test_designs_scored_in_worker_processes_score_as_here(monkeypatch):
    """The same with real worker processes (both pinned to this test's core)."""
    from bayeskern._workers import run_pinned

    _spread_search_matches_the_search_here(monkeypatch, run_pinned)


def test_a_stopped_worker_scores_no_further_design():
    import bayeskern.kbr.forecast as forecast

    stop = threading.Event()
    stop.set()   # as the parent's Ctrl-C sets it
    designs = [forecast.ForecastDesign((1,), False), forecast.ForecastDesign((1,), True)]
    setting = (np.sin(np.arange(60.0))[:, None], 20, 1, 5, 40, (1.0,), (1e-3,), (1e-3,), "auto")
    assert forecast._score_designs((designs, setting), None, stop) == []


def test_design_offsets_count_the_lags_and_the_difference():
    assert kbr.ForecastDesign((1, 2, 12), False).offset == 12 and kbr.ForecastDesign((1,), True).offset == 2


def test_design_workers_default_to_one_per_usable_core_and_design(monkeypatch):
    import bayeskern.kbr.forecast as forecast

    monkeypatch.setattr(forecast, "usable_cores", lambda: [0, 1, 2, 3])
    assert forecast._design_workers(None, 14) == 4 and forecast._design_workers(None, 2) == 2
    assert forecast._design_workers(3, 14) == 3 and forecast._design_workers(8, 2) == 2
    monkeypatch.setattr(forecast, "usable_cores", lambda: [5])
    assert forecast._design_workers(None, 14) == 1


def test_the_band_calibrates_on_steps_neither_the_fit_nor_the_choice_saw():
    """The calibration scores are the errors of the chosen forecaster on the C = V steps just before the validation
    block, refitted on the steps before them, in the units of y."""
    y = 3.0 + 2.0 * nonlinear_ar(230, seed=11)
    fc = forecast_series(y[:200], y[200:], bayesian=False, lags=(1, 2), n_val=40)
    assert fc.calibration.shape == (40, 1) and fc.fallback is None
    block = y[120:160, None]
    refit, _ = _forecast_path(y[:120, None], block, fc.tuning)
    np.testing.assert_allclose(fc.calibration, np.abs(block - refit), rtol=1e-10)
    # not the validation errors of the winner (standardised, and optimistic)
    assert not np.allclose(fc.calibration[:, 0], np.abs(fc.tuning.validation_errors[:, 0]) * y[:200].std())


def test_a_level_the_calibration_cannot_support_gets_a_finite_band_and_a_warning():
    y = ar1(120, seed=12)
    with pytest.warns(CalibrationWarning, match="20 calibration scores support a band of level at most 0.952"):
        fc = forecast_series(y[:100], y[100:], bayesian=False, lags=(1,), n_val=20, level=0.99)
    assert np.all(np.isfinite(fc.band)) and fc.widened[0, 0]


def test_a_baseline_forecaster_is_flagged_and_warned_and_nothing_is_sampled(monkeypatch):
    import bayeskern.inference.forecast as forecast

    def fallback(y, **kwargs):
        return ForecastTuning(None, "persistence", (), 1.0, 2.0, np.zeros((kwargs["n_val"], 1)), kwargs["n_val"])

    monkeypatch.setattr(forecast, "tune_forecaster", fallback)
    monkeypatch.setattr(forecast, "run_nuts", lambda *a, **k: pytest.fail("no filter to sample"))
    y = ar1(100, seed=14)
    with pytest.warns(kbr.TuningWarning, match="persistence forecasts .no Bayesian average"):
        fc = forecast_series(y[:80], y[80:], key=jax.random.key(0), bayesian=True, n_val=20)
    assert fc.fallback == "persistence" and fc.design is None and fc.mcmc is None
    np.testing.assert_allclose(fc.mean[:, 0], y[79:-1])
    np.testing.assert_allclose(fc.calibration[:, 0], np.abs(np.diff(y[39:60])))   # persistence on steps 40..59


def test_read_outs_out_of_the_training_range_are_clipped_and_flagged(monkeypatch):
    """With the read-out's range moved to cut off only the largest read-out of the test steps, that step alone is
    clipped and flagged, its forecast moved by exactly the part cut off."""
    import bayeskern.kbr.multistep as multistep

    y = nonlinear_ar(160, seed=15)
    tuning = tune_forecaster(y[:130], lags=(1,), n_val=30, **FAST)
    tuning = tuning._replace(members=(tuning.best,))
    true_setting = multistep._filter_setting
    bounds = {}

    def with_bounds(*args, **kwargs):
        return true_setting(*args, **kwargs)[:-1] + (bounds["now"],)

    monkeypatch.setattr(multistep, "_filter_setting", with_bounds)
    paths = {}
    for name, limits in (("free", (-np.inf, np.inf)), ("zero", (0.0, 0.0))):
        bounds["now"] = (np.array([limits[0]]), np.array([limits[1]]))
        paths[name], flags = _forecast_path(y[:130, None], y[130:, None], tuning)
        assert flags.all() == (name == "zero")
    scale = y[:130].std()
    readout = (paths["free"] - paths["zero"])[:, 0] / scale            # each step's read-out, standardised
    top, second = np.sort(readout)[-1], np.sort(readout)[-2]
    high = 0.5 * (top + second)
    bounds["now"] = (np.array([-np.inf]), np.array([high]))
    forecast_values, clipped = _forecast_path(y[:130, None], y[130:, None], tuning)
    assert clipped.tolist() == (readout == top).tolist() and clipped.sum() == 1
    step = int(np.argmax(readout))
    np.testing.assert_allclose(np.delete(forecast_values, step, 0), np.delete(paths["free"], step, 0), atol=1e-12)
    np.testing.assert_allclose(forecast_values[step], paths["zero"][step] + high * scale, atol=1e-12)


def test_the_calibration_filter_keeps_enough_rows_for_the_longest_admissible_lags():
    """54 training steps, V = 20, lags 1-10 in differences (offset 11, the most the tuning admits): the calibration
    block shrinks so that its filter keeps the rows eta's leave-one-out needs."""
    from bayeskern.inference.forecast import _MIN_CALIBRATION_FIT
    from bayeskern.kbr.forecast import Candidate, ForecastDesign, _calibration
    from bayeskern.kbr.multistep import _calibration_errors

    rng = np.random.default_rng(0)
    y = np.sin(np.arange(54) * 0.7)[:, None] + 0.1 * rng.standard_normal((54, 1))
    tuning = tune_forecaster(y, lags=(1,), n_val=20, **FAST)
    longest = Candidate(ForecastDesign(tuple(range(1, 11)), True), 1.0, 1e-3, 1e-3, 0.1, True)
    tuning = tuning._replace(best=longest, members=(longest,))
    tuning, C = _calibration(54, tuning, min_fit=_MIN_CALIBRATION_FIT)
    assert C == 54 - 20 - 11 - 12 == 11 and tuning.members == (longest,)
    errors = _calibration_errors(y, tuning, C)
    assert errors.shape == (11, 1) and np.all(np.isfinite(errors))
