"""Forecasting ahead: the recursive forecasts, bands per horizon, pandas dates and the forecast command."""

import json

import jax
import numpy as np
import pandas as pd
import pytest

from bayeskern.cli import main
from bayeskern.inference import CalibrationWarning, backtest, forecast_ahead, forecast_series
from bayeskern.kbr import ForecastDesign
from bayeskern.kbr.forecast import _build_filter, _design_rows, _location_scale, _standardised, tune_forecaster
from bayeskern.kbr.multistep import _forecast_path, iterated_forecasts
from test_forecast import FAST, nonlinear_ar



def _by_hand_base(history, difference, seasonal):
    """y_t - u_t from the earlier values history[-1] = y_{t-1}, history[-2], ... for each transform, written out."""
    if difference and seasonal:
        return history[-1] + history[-seasonal] - history[-seasonal - 1]
    if seasonal:
        return history[-seasonal]
    return history[-1] if difference else 0.0 * history[-1]


@pytest.mark.parametrize("difference, seasonal, intercepts",
                         [(False, 0, 0), (True, 0, 0), (False, 4, 0), (True, 4, 0), (False, 0, 4), (True, 0, 5)])
def test_multistep_forecasts_run_the_autoregression_on_forecasts_and_the_filter_by_its_transition(difference,
                                                                                                  seasonal,
                                                                                                  intercepts):
    """Horizon 1 is the one-step forecaster. Beyond it, by hand with the public streaming filter: the lags hold the
    forecasts, the residual is read from the predictive embedding carried by the transition (no update on
    forecast lags), for levels, first differences, seasonal differences and both, and with seasonal intercepts
    (each step's intercept the one of its phase)."""
    y = (5.0 + nonlinear_ar(220, seed=1))[:, None] + (intercepts > 0) * np.sin(np.arange(220) * 2.0)[:, None]
    tuning = tune_forecaster(y[:180], lags=(1, 2), n_val=40, workers=1, **FAST)
    b = tuning.best._replace(design=ForecastDesign((1, 2), difference, seasonal, intercepts))
    chosen = tuning._replace(best=b, members=(b,))
    one_step, _ = _forecast_path(y[:180], y[180:], chosen)
    paths, clipped = iterated_forecasts(y, chosen, 180, np.arange(180, 220), 3)
    np.testing.assert_allclose(paths[:, 0], one_step, rtol=0, atol=1e-10)

    s = _standardised(y[:180], y)
    centre, scale = _location_scale(y[:180])
    X, Z, _, offset = _design_rows(s, b.design)
    n_fit = 180 - offset
    kbf, ar, (low, high), _ = _build_filter(X[:n_fit], Z[:n_fit], b.c, b.lam, "auto", b.design)
    assert ar.intercepts.shape == (max(intercepts, 1), 1)
    o = 190
    state = kbf.initial_state()
    for row in range(n_fit - 20, o - offset + 1):          # the burn-in, then the observed lags of step o
        state, mean = kbf.update(state, X[row])
    u = {t: s[t] - _by_hand_base(s[:t], difference, seasonal) for t in (o - 2, o - 1)}
    readout = np.clip(np.asarray(mean)[:1], low, high)
    forecasts, lags_now, history = [], [u[o - 1], u[o - 2]], list(s[:o])
    weights = np.asarray(state.predicted)
    for h in range(3):
        x = np.concatenate(lags_now)
        step = ar(x[None, :], start=o + h - offset)[0] + readout
        history.append(step + _by_hand_base(history, difference, seasonal))
        forecasts.append(history[-1] * scale + centre)
        lags_now = [step, lags_now[0]]
        readout = np.clip((weights @ np.asarray(kbf.Z))[:1], low, high)
        weights = np.asarray(kbf.transition) @ weights
    np.testing.assert_allclose(paths[o - 180], np.array(forecasts), rtol=0, atol=1e-9)


def test_the_members_forecasts_are_averaged_and_share_one_compiled_program():
    """Three members of different widths and reaches: the forecast is the mean of each member's alone, built on
    the fit rows the furthest-reaching member has (max_fit), and the members run one compiled iteration."""
    import bayeskern.kbr.multistep as multistep

    y = (5.0 + nonlinear_ar(230, seed=3))[:, None]
    tuning = tune_forecaster(y[:180], lags=(1, 2), n_val=40, workers=1, **FAST)
    b = tuning.best
    members = (b._replace(design=ForecastDesign((1, 2), False)), b._replace(design=ForecastDesign((1,), True)),
               b._replace(design=ForecastDesign((1, 2), False, 4), lam=1.0))
    together = tuning._replace(best=members[0], members=members)
    before = multistep._iterate._cache_size()
    paths, clipped = iterated_forecasts(y, together, 180, np.arange(170, 220), 4)
    assert multistep._iterate._cache_size() - before <= 1
    window = 180 - 6                                          # lags (1, 2) on seasonal differences reach back 6
    alone = [iterated_forecasts(y, tuning._replace(best=m, members=(m,)), 180, np.arange(170, 220), 4,
                                max_fit=window) for m in members]
    np.testing.assert_allclose(paths, np.mean([a[0] for a in alone], axis=0), rtol=0, atol=1e-10)
    assert np.array_equal(clipped, np.any([a[1] for a in alone], axis=0))
    assert not np.allclose(alone[0][0], alone[1][0])            # the members forecast differently


def test_the_forecaster_averages_the_designs_validation_cannot_tell_from_the_best():
    """Within two paired standard errors of the chosen candidate's squared errors, each design at its own
    one-standard-error pick, closest first, at most FORECAST_MAX_MEMBERS in all."""
    from bayeskern.kbr import FORECAST_MAX_MEMBERS, Candidate
    from bayeskern.kbr.forecast import _members

    rng = np.random.default_rng(0)
    base = rng.standard_normal((50, 1))
    chosen = Candidate(ForecastDesign((1,), False), 1.0, 1.0, 1e-3, float(np.mean(base**2)), True)

    def run(lags, lam, err):
        return Candidate(ForecastDesign(lags, True), 1.0, lam, 1e-3, float(np.mean(err**2)), True), err

    close = [run((1, k), 1.0, base + 0.05 * k * rng.standard_normal((50, 1))) for k in range(2, 14)]
    far = run((1, 20), 1.0, 3.0 * base)
    # one design whose grid holds a slightly better small ridge: its one-SE pick is the larger ridge
    grid = [run((1, 30), 1e-3, 0.99 * base), run((1, 30), 10.0, 0.99 * base + 0.02 * rng.standard_normal((50, 1)))]
    runs = [(chosen, base)] + close + [far] + grid
    members = _members(chosen, base, runs)

    def excess(err):                                     # mean and standard error of the paired difference
        diff = np.mean(err**2, axis=1) - np.mean(base**2, axis=1)
        return np.mean(diff), np.std(diff, ddof=1) / np.sqrt(diff.size)

    within = sorted((excess(err)[0], i) for i, (_, err) in enumerate(close) if excess(err)[0] < 2 * excess(err)[1])
    assert len(within) >= FORECAST_MAX_MEMBERS - 1 and len(within) < len(close)   # the rule and the cap both bite
    assert members[0] == chosen and len(members) == FORECAST_MAX_MEMBERS
    assert members[1] == grid[1][0]                                       # the closest, at its larger ridge
    assert far[0] not in members and grid[0][0] not in members
    assert list(members[2:]) == [close[i][0] for _, i in within[: FORECAST_MAX_MEMBERS - 2]]


def test_a_baseline_is_iterated_as_itself():
    y = np.cumsum(np.random.default_rng(2).standard_normal(100))[:, None]
    tuning = tune_forecaster(y[:80], lags=(1,), n_val=20, workers=1, **FAST)
    for fallback, expected in (("persistence", y[79]), ("prior mean", y[:80].mean(axis=0))):
        chosen = tuning._replace(best=None, fallback=fallback)
        paths, _ = iterated_forecasts(y, chosen, 80, [80, 90], 3)
        assert paths.shape == (2, 3, 1) and np.allclose(paths[0], expected)
    assert np.allclose(iterated_forecasts(y, tuning._replace(best=None, fallback="persistence"), 80, [90], 2)[0],
                       y[89])


def test_forecast_ahead_gives_finite_bands_per_horizon_that_widen_on_a_random_walk():
    """On a random walk the h-step error grows like sqrt(h): the band at horizon 9 is about three times the band
    at horizon 1 (the calibration's errors say so; nothing imposes it)."""
    y = np.cumsum(np.random.default_rng(3).standard_normal(300))
    fc = forecast_ahead(y, 9, lags=(1,), workers=1)
    assert fc.mean.shape == (9, 1) and fc.band.shape == (2, 9, 1) and fc.index is None and fc.columns == ("y0",)
    assert np.all(np.isfinite(fc.band)) and np.all(fc.band[0] <= fc.mean) and np.all(fc.mean <= fc.band[1])
    half = fc.band[1, :, 0] - fc.mean[:, 0]
    assert 2.0 < half[8] / half[0] < 4.5
    V = fc.tuning.num_validation
    C = max(V, 18)
    np.testing.assert_array_equal(fc.calibration_counts, C - np.arange(9))
    frame = fc.to_frame()
    assert list(frame.columns) == ["mean", "lower", "upper"] and list(frame.index) == list(range(1, 10))


def _isotonic_by_definition(values, weights):
    """The non-decreasing weighted least-squares fit in closed form: at i, the largest over j <= i of the smallest
    over k >= i of the weighted mean of values[j..k] (written out, O(n^3))."""
    n = len(values)

    def mean(j, k):
        return np.sum(weights[j:k + 1] * values[j:k + 1]) / np.sum(weights[j:k + 1])

    return np.array([max(min(mean(j, k) for k in range(i, n)) for j in range(i + 1)) for i in range(n)])


def test_the_monotone_fit_of_the_bands_is_the_isotonic_regression():
    """Along the horizon axis of (origins, horizons, series) arrays, with weights per origin and horizon: equal to
    the closed form of the isotonic regression, whatever the length (1 to 13), ties and sorted input included."""
    from bayeskern.inference.ahead import _nondecreasing

    rng = np.random.default_rng(5)
    for n in range(1, 14):
        values, weights = rng.standard_normal((3, n, 2)), rng.uniform(0.5, 30.0, (3, n, 1))
        values[1, :, 0] = np.sort(values[1, :, 0])                        # already non-decreasing: unchanged
        values[2, :, 1] = np.round(values[2, :, 1])                       # ties
        fit = _nondecreasing(values, weights, axis=1)
        np.testing.assert_array_equal(fit[1, :, 0], values[1, :, 0])
        for o in range(3):
            for j in range(2):
                np.testing.assert_allclose(fit[o, :, j], _isotonic_by_definition(values[o, :, j], weights[o, :, 0]),
                                           rtol=1e-12, atol=1e-12)


def test_forecast_ahead_bands_are_the_monotone_fit_of_the_conformal_quantiles(monkeypatch):
    """White noise: every horizon's errors are alike, so the per-horizon conformal quantiles (from 24 down to 13
    scores) go up and down by chance. The band's half-widths are their isotonic regression on the horizon, weighted
    by the number of scores: never narrower than the horizon before, and, unlike a running maximum, no wider on the
    whole than the quantiles (the weighted sums agree), so the far bands are not biased upwards."""
    from bayeskern.inference import ahead

    seen, fit = [], ahead._nondecreasing

    def spy(values, weights, axis):
        seen.append((np.array(values), np.array(weights)))
        return fit(values, weights, axis)

    monkeypatch.setattr(ahead, "_nondecreasing", spy)
    y = np.random.default_rng(7).standard_normal(200)
    fc = forecast_ahead(y, 12, lags=(1,), workers=1)
    half = fc.band[1, :, 0] - fc.mean[:, 0]
    (quantiles, weights), = seen
    quantiles, weights = quantiles[:, 0], weights[:, 0]
    np.testing.assert_array_equal(weights, fc.calibration_counts)
    assert np.any(np.diff(quantiles) < 0)                                # the quantiles dip somewhere
    np.testing.assert_allclose(half, _isotonic_by_definition(quantiles, weights), rtol=1e-12)
    assert np.all(np.diff(half) >= 0) and half[-1] < quantiles.max()   # a running maximum would reach the max
    np.testing.assert_allclose(np.sum(weights * half), np.sum(weights * quantiles), rtol=1e-12)


def test_forecast_ahead_bands_cover_about_their_level_at_every_horizon():
    """20 AR(1) series of 120 steps, the next 6 steps each: coverage near 0.9 for horizons 1-2, 3-4 and 5-6 (40
    checks each: binomial s.e. about 0.05)."""
    hits = []
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        y = np.zeros(126)
        for t in range(1, 126):
            y[t] = 0.8 * y[t - 1] + rng.standard_normal()
        fc = forecast_ahead(y[:120], 6, lags=(1,), workers=1)
        hits.append((y[120:] >= fc.band[0, :, 0]) & (y[120:] <= fc.band[1, :, 0]))
    hits = np.array(hits)
    for h in (slice(0, 2), slice(2, 4), slice(4, 6)):
        assert 0.8 <= hits[:, h].mean() <= 0.98


def test_dates_of_a_pandas_series_are_continued_at_their_frequency():
    y = 10 + nonlinear_ar(150, seed=4)
    monthly = pd.Series(y, index=pd.date_range("2010-01-01", periods=150, freq="MS"), name="sales")
    fc = forecast_ahead(monthly, 12, lags=(1,), workers=1)
    assert list(fc.index) == list(pd.date_range("2022-07-01", periods=12, freq="MS"))
    frame = fc.to_frame()
    assert list(frame.columns) == ["mean", "lower", "upper"] and frame.index.equals(fc.index)
    np.testing.assert_allclose(frame["mean"], fc.mean[:, 0])
    quarterly = pd.Series(y, index=pd.period_range("1980Q1", periods=150, freq="Q"))
    assert str(forecast_ahead(quarterly, 2, lags=(1,), workers=1).index[0]) == "2017Q3"
    two = pd.DataFrame({"a": y, "b": np.roll(y, 3)}, index=monthly.index)
    frame = forecast_ahead(two, 3, lags=(1,), workers=1).to_frame()
    assert list(frame.columns) == ["a_mean", "a_lower", "a_upper", "b_mean", "b_lower", "b_upper"]
    irregular = monthly.copy()
    irregular.index = monthly.index.delete(5).append(pd.DatetimeIndex(["2030-01-01"]))
    with pytest.raises(ValueError, match="without a regular frequency"):
        forecast_ahead(irregular, 3, lags=(1,))
    with pytest.raises(ValueError, match="dates must increase strictly"):
        forecast_ahead(monthly[::-1], 3, lags=(1,))          # newest first: the "next" dates would be the past


def test_forecast_ahead_refuses_bad_input_and_warns_when_the_calibration_is_thin():
    y = nonlinear_ar(120, seed=5)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        forecast_ahead(y, 0)
    with pytest.raises(ValueError, match="level must lie in"):
        forecast_ahead(y, 3, level=1.5)
    with pytest.raises(ValueError, match="y of 40 steps is too short"):
        forecast_ahead(y[:40], 3)
    with pytest.raises(TypeError, match="y must hold real numbers, got dtype"):
        forecast_ahead(pd.Series(["a"] * 120), 3)
    with pytest.raises(ValueError, match="y contains 1 non-finite"):   # a nullable integer column with a gap
        forecast_ahead(pd.Series(np.arange(120), dtype="Int64").mask(np.arange(120) == 7), 3)
    with pytest.warns(CalibrationWarning, match="tail rule"):
        fc = forecast_ahead(y, 12, lags=(1,), n_val=20, level=0.99, workers=1)
    assert fc.widened.any() and np.all(np.isfinite(fc.band))


def test_the_forecast_command_writes_dated_forecasts_a_fan_chart_and_a_summary(tmp_path):
    y = 50 + 3 * nonlinear_ar(140, seed=6)
    dates = pd.date_range("2000-01-01", periods=140, freq="MS").strftime("%Y-%m-%d")
    pd.DataFrame({"month": dates, "visitors": y, "flag": np.arange(140) % 2}).to_csv(tmp_path / "d.csv", index=False)
    argv = ["forecast", str(tmp_path / "d.csv"), "--column", "visitors", "--steps", "6", "--lags", "1",
            "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    table = pd.read_csv(tmp_path / "out" / "forecast.csv")
    assert list(table.columns) == ["month", "mean", "lower", "upper"]
    assert list(table["month"]) == [f"2011-{m:02d}-01" for m in range(9, 13)] + ["2012-01-01", "2012-02-01"]
    assert np.all(table["lower"] < table["mean"]) and np.all(table["mean"] < table["upper"])
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["steps"] == 6 and summary["lags"] == [1] and summary["first_forecast"] == "2011-09-01"
    assert (tmp_path / "out" / "forecast.png").stat().st_size > 10_000
    fc = forecast_ahead(pd.Series(y, index=pd.DatetimeIndex(dates, freq="MS")), 6, lags=(1,), workers=1)
    np.testing.assert_allclose(table["mean"], fc.mean[:, 0], rtol=1e-12)
    assert summary["averaged_designs"] == [member.design.label for member in fc.tuning.members]


def test_the_forecast_command_backtests_the_last_steps_on_request(tmp_path):
    """--backtest 20 fits without the last 20 months and forecasts 1-6 ahead from each of the 15 origins that leave
    6 values: backtest.csv has one dated row per origin and horizon with the value forecast and its band, and the
    summary their coverage, RMSE per horizon and warnings (99 % bands on few errors follow the tail rule)."""
    y = 50 + 3 * nonlinear_ar(140, seed=6)
    dates = pd.date_range("2000-01-01", periods=140, freq="MS")
    pd.DataFrame({"month": dates.strftime("%Y-%m-%d"), "visitors": y}).to_csv(tmp_path / "d.csv", index=False)
    argv = ["forecast", str(tmp_path / "d.csv"), "--steps", "6", "--lags", "1", "--backtest", "20", "--level", "0.99",
            "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    table = pd.read_csv(tmp_path / "out" / "backtest.csv")
    assert list(table.columns) == ["origin_month", "horizon", "month", "mean", "lower", "upper", "value"]
    assert (tmp_path / "out" / "backtest.png").stat().st_size > 10_000
    assert len(table) == 15 * 6 and table["origin_month"].iloc[0] == "2010-01-01"
    assert table["month"].iloc[7] == "2010-03-01"                       # origin 2 (February), horizon 2
    np.testing.assert_allclose(table["value"], y[np.repeat(np.arange(120, 135), 6) + np.tile(np.arange(6), 15)])
    assert np.all(table["lower"] < table["mean"]) and np.all(table["mean"] < table["upper"])
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["backtest"]
    assert summary["fitted_on"] == 120 and summary["origins"] == 15 and summary["first_origin"] == "2010-01-01"
    hits = (table["lower"] <= table["value"]) & (table["value"] <= table["upper"])
    np.testing.assert_allclose(summary["coverage_per_horizon"], hits.groupby(table["horizon"]).mean(), atol=1e-4)
    se = np.array(summary["coverage_se_per_horizon"])
    assert se.shape == (6,) and np.all((se >= 0) & (se < 0.5))
    assert np.all(se[np.array(summary["coverage_per_horizon"]) == 1.0] == 0.0)     # every band held: no spread
    errors = (table["value"] - table["mean"]) ** 2
    np.testing.assert_allclose(summary["rmse_per_horizon"], np.sqrt(errors.groupby(table["horizon"]).mean()),
                               rtol=1e-10)
    assert any(note.startswith("CalibrationWarning") for note in summary["warnings"])   # 0.99: the tail rule


def test_the_forecast_command_reads_day_first_dates_when_month_first_is_irregular(tmp_path, capsys):
    """01/02/2000 read month first is January 2, which makes monthly dates irregular; read day first they are the
    first of each month, and the command says which reading it took."""
    y = 50 + 3 * nonlinear_ar(100, seed=6)
    dates = pd.date_range("2000-01-01", periods=100, freq="MS")
    pd.DataFrame({"month": dates.strftime("%d/%m/%Y"), "visitors": y}).to_csv(tmp_path / "d.csv", index=False)
    assert main(["forecast", str(tmp_path / "d.csv"), "--steps", "2", "--lags", "1", "--out", str(tmp_path / "o")]) == 0
    assert "read the dates in 'month' day first (01/02/2000 is 2000-02-01)" in capsys.readouterr().err
    assert list(pd.read_csv(tmp_path / "o" / "forecast.csv")["month"]) == ["2008-05-01", "2008-06-01"]


@pytest.mark.parametrize("sep, decimal", [(";", "."), (";", ",")])
def test_the_forecast_command_reads_semicolons_and_dates_newest_first(tmp_path, capsys, sep, decimal):
    """A semicolon-separated export (with decimal points or commas) whose rows run newest first reads as the same
    series, oldest first, at its monthly frequency; the command says how it read the file."""
    from bayeskern.cli.forecast import _read_series

    dates = pd.date_range("2000-01-01", periods=30, freq="MS")
    y = np.round(50 + 3 * nonlinear_ar(30, seed=6), 3)
    pd.DataFrame({"month": dates.strftime("%Y-%m-%d"), "visitors": y})[::-1].to_csv(
        tmp_path / "d.csv", index=False, sep=sep, decimal=decimal)
    series = _read_series(str(tmp_path / "d.csv"), "visitors", None)
    err = capsys.readouterr().err
    assert "semicolon-separated" in err and "decrease; read the rows oldest first" in err
    assert series.index.equals(pd.DatetimeIndex(dates, freq="MS", name="month"))
    np.testing.assert_array_equal(series.to_numpy(), y)


@pytest.mark.parametrize("argv, message", [
    (["--column", "nope"], "no column 'nope'"),
    (["--column", "month"], "does not hold numbers"),
    ([], "name the one to forecast"),
    (["--column", "visitors", "--lags", "1,x"], "--lags must be"),
    (["--column", "visitors", "--steps", "0"], "--steps must be >= 1"),
    (["--column", "visitors", "--validation", "2"], "--validation must be at most half the series"),
    (["--column", "visitors", "--season", "1"], "--season must be >= 2"),
    (["--column", "visitors", "--bayesian", "--chains", "0"], "--chains, --warmup and --samples must be >= 1"),
    (["--column", "visitors", "--backtest", "0"], "--backtest must be >= 1"),
    (["--column", "visitors", "--steps", "3", "--backtest", "2"], "--backtest must hold out at least --steps"),
])
def test_the_forecast_command_explains_bad_arguments_in_one_line(tmp_path, argv, message, capsys):
    pd.DataFrame({"month": ["2000-01-01", "2000-02-01", "2000-03-01"], "visitors": [1.0, 2.0, 3.0],
                  "other": [1, 2, 3]}).to_csv(tmp_path / "d.csv", index=False)
    assert main(["forecast", str(tmp_path / "d.csv"), *argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


@pytest.mark.parametrize("dates, message", [
    (["2000-01-01", "2000-02-01", "2000-02-01", "2000-03-01"], "data row 3, 2000-02-01, repeats the date before it"),
    (["2000-01-01", "2000-03-01", "2000-02-01", "2000-04-01"],
     "data row 3, 2000-02-01, is earlier than the date before it, 2000-03-01"),
])
def test_the_forecast_command_names_the_first_date_out_of_order(tmp_path, dates, message, capsys):
    pd.DataFrame({"month": dates, "visitors": [1.0, 2.0, 3.0, 4.0]}).to_csv(tmp_path / "d.csv", index=False)
    assert main(["forecast", str(tmp_path / "d.csv"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--date: the dates in 'month' must increase: " + message in err[0]


def test_the_forecast_command_passes_bayesian_and_reports_the_sampler(tmp_path, monkeypatch):
    """--bayesian calls forecast_ahead(bayesian=True) with the command's seed and sampler settings, and the summary
    reports the sampler's diagnostics (a single chain has no split R-hat: null). The sampler itself is tested with
    forecast_ahead below; here its result is the validated forecaster's with a single-chain diagnosis and a second
    member, whose designs the summary lists."""
    import bayeskern.inference
    from bayeskern.inference import Diagnostics

    calls, forecast = [], bayeskern.inference.forecast_ahead

    def recorded(y, steps, **kwargs):
        calls.append(kwargs)
        plain = {k: v for k, v in kwargs.items() if k not in ("bayesian", "key", "num_chains", "num_warmup",
                                                               "num_samples", "progress_bar")}
        fc = forecast(y, steps, **plain)
        members = (fc.tuning.best, fc.tuning.best._replace(design=ForecastDesign((1, 2), True)))
        return fc._replace(mcmc=Diagnostics(float("nan"), 12.5, 9.0, 0, 10), tuning=fc.tuning._replace(members=members))

    monkeypatch.setattr(bayeskern.inference, "forecast_ahead", recorded)
    y = 50 + 3 * nonlinear_ar(120, seed=7)
    pd.DataFrame({"visitors": y}).to_csv(tmp_path / "d.csv", index=False)
    argv = ["forecast", str(tmp_path / "d.csv"), "--steps", "3", "--lags", "1", "--validation", "25", "--bayesian",
            "--chains", "1", "--warmup", "10", "--samples", "10", "--seed", "3", "--season", "4",
            "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    (kwargs,) = calls
    assert kwargs["bayesian"] and (kwargs["num_chains"], kwargs["num_warmup"], kwargs["num_samples"]) == (1, 10, 10)
    assert kwargs["season"] == 4 and np.array_equal(jax.random.key_data(kwargs["key"]),
                                                    jax.random.key_data(jax.random.key(3)))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    members = summary["averaged_designs"]
    assert summary["forecaster"] == ("kernel Bayes filters of 2 designs, averaged, the first's filter averaged over "
                                     "NUTS draws of its hyperparameters")
    assert members == [summary["design"], "lags 1-2, differences"]
    assert (summary["max_split_rhat"], summary["min_ess_bulk"], summary["divergences"]) == (None, 12.5, 0)


@pytest.mark.parametrize("members, sampled, words", [
    (0, False, "persistence (no filter beat it on validation)"),
    (1, False, "kernel Bayes filter"),
    (3, False, "kernel Bayes filters of 3 designs, averaged"),
    (1, True, "kernel Bayes filter averaged over NUTS draws of its hyperparameters"),
    (3, True, "kernel Bayes filters of 3 designs, averaged, the first's filter averaged over NUTS draws of its "
              "hyperparameters")])
def test_the_forecast_summary_names_the_forecaster(members, sampled, words):
    from types import SimpleNamespace

    from bayeskern.cli.forecast import _forecaster

    fc = SimpleNamespace(design=ForecastDesign((1,), False) if members else None, fallback="persistence",
                         tuning=SimpleNamespace(members=(None,) * members), mcmc=object() if sampled else None)
    assert _forecaster(fc) == words


def test_the_bayesian_forecaster_averages_posterior_draws_and_calibrates_each_horizon(monkeypatch):
    """NUTS samples the hyperparameters; each of num_draws draws' forecasters (built with that draw's bandwidths and
    ridges, low rank on the landmarks) forecasts the calibration origins and the future; the mean averages them."""
    import bayeskern.inference.ahead as ahead

    built = []
    iterate = ahead.iterated_forecasts
    monkeypatch.setattr(ahead, "iterated_forecasts", lambda *a, **k: built.append(k.get("hyper")) or iterate(*a, **k))
    y = 5.0 + nonlinear_ar(150, seed=8)
    fc = forecast_ahead(y, 4, bayesian=True, key=jax.random.key(0), lags=(1,), n_val=25, num_chains=1,
                        num_warmup=30, num_samples=30, num_landmarks=(6, 10), num_draws=5, workers=1)
    assert fc.mcmc is not None and fc.mean.shape == (4, 1) and np.all(np.isfinite(fc.band))
    assert len(built) == 10 and all(h is not None and len(h) == 4 and min(h) > 0 for h in built)
    assert np.all(fc.band[0] < fc.mean) and np.all(fc.mean < fc.band[1])
    plain = forecast_ahead(y, 4, lags=(1,), n_val=25, workers=1)
    assert np.max(np.abs(fc.mean - plain.mean)) < 1.0   # the same design, averaged over nearby hyperparameters
    with pytest.raises(TypeError, match="key"):
        forecast_ahead(y, 4, bayesian=True)


def test_the_bayesian_forecaster_averages_the_chosen_designs_draws_with_the_other_members():
    """With several members the chosen design's forecast is the mean of its draws' forecasters (each built with its
    draw's hyperparameters) and the other members forecast with their validated filters, all with equal weights;
    the scale is the spread of that average over the draws (a third of the chosen design's here) with the mean
    noise sd. Draws given directly, no sampler."""
    from bayeskern.inference.ahead import _posterior_fans
    from bayeskern.kbr import FORECAST_MAX_FIT

    y = (5.0 + nonlinear_ar(230, seed=3))[:, None]
    tuning = tune_forecaster(y[:180], lags=(1, 2), n_val=40, workers=1, **FAST)
    b = tuning.best
    members = (b, b._replace(design=ForecastDesign((1,), True)), b._replace(design=ForecastDesign((1, 2), False, 4)))
    together = tuning._replace(members=members)
    hyper = np.array([[0.8, 1.0, 1e-3, 1e-4], [1.3, 0.7, 1e-2, 3e-4], [1.0, 1.5, 0.1, 1e-3]])
    log_s = np.log([0.3, 0.4, 0.5])
    draws = dict(zip(("log_cx", "log_cz", "log_lam", "log_eta"), np.log(hyper).T), log_s=log_s)
    origins, cal_origins = np.arange(180, 220), np.arange(140, 150)
    (cal_mean, cal_scale), (mean, scale, clipped) = _posterior_fans(y, together, draws, (140, cal_origins),
                                                                    (180, origins), 4, 3, None, "auto")
    for fit_end, at, m, sc in ((180, origins, mean, scale), (140, cal_origins, cal_mean, cal_scale)):
        series = y[:180] if fit_end == 140 else y
        chosen = np.array([iterated_forecasts(series, together, fit_end, at, 4, hyper=h, max_fit=FORECAST_MAX_FIT)[0]
                           for h in hyper])
        others, _ = iterated_forecasts(series, together._replace(members=members[1:]), fit_end, at, 4)
        np.testing.assert_allclose(m, (chosen.mean(axis=0) + 2 * others) / 3, rtol=0, atol=1e-10)
        noise = np.mean(np.exp(2 * log_s)) * _location_scale(y[:180])[1] ** 2
        np.testing.assert_allclose(sc, np.sqrt(chosen.var(axis=0) / 9 + noise), rtol=1e-10)
        assert np.all(chosen.std(axis=0) > 1e-4)                            # the draws forecast differently
    alone = _posterior_fans(y, together._replace(members=members[:1]), draws, (140, cal_origins), (180, origins), 4,
                            3, None, "auto")[1]
    assert np.all(alone[1] > scale)                     # alone, the chosen design's spread counts in full


def test_a_backtest_starts_from_the_forecast_of_its_fit_and_sees_no_value_before_its_time(monkeypatch):
    """The first origin's forecasts and bands are ``forecast_ahead(y[:start])``'s; every origin's means and bands
    depend on the values before it only (changing y from step 150 on leaves the origins up to 150 unchanged), and
    ``truth`` holds the values forecast. Each origin's fan is made monotone with the scores behind each band as
    weights: the calibration errors of its horizon and those revealed before the origin (h-step errors of origins
    up to o - h)."""
    from bayeskern.inference import ahead

    y = 5.0 + nonlinear_ar(170, seed=12)
    weights, fit = [], ahead._nondecreasing
    monkeypatch.setattr(ahead, "_nondecreasing", lambda v, w, axis: weights.append(np.array(w)) or fit(v, w, axis))
    run = backtest(y, 4, start=140, lags=(1,), workers=1)
    fc = forecast_ahead(y[:140], 4, lags=(1,), workers=1)
    revealed = np.maximum(0, np.arange(27)[:, None] - np.arange(4))
    np.testing.assert_array_equal(weights[0][..., 0], fc.calibration_counts + revealed)
    assert run.origins.tolist() == list(range(140, 167)) and run.dates is None
    assert run.mean.shape == run.truth.shape == (27, 4, 1) and run.band.shape == (2, 27, 4, 1)
    np.testing.assert_allclose(run.mean[0], fc.mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.band[:, 0], fc.band, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(run.truth[:, 2, 0], y[142:169])
    assert np.all(np.diff(run.band[1] - run.mean, axis=1) > -1e-12)       # no band narrower than the horizon before
    changed = y.copy()
    changed[150:] += 3.0
    with pytest.warns(CalibrationWarning, match="tail rule"):    # a jump of 3 sds: misses drive the level to the tail
        other = backtest(changed, 4, start=140, lags=(1,), workers=1)
    np.testing.assert_array_equal(other.mean[:11], run.mean[:11])
    np.testing.assert_array_equal(other.band[:, :11], run.band[:, :11])
    assert not np.allclose(other.band[:, 12:], run.band[:, 12:])
    covered = (run.band[0] <= run.truth) & (run.truth <= run.band[1])
    np.testing.assert_allclose(run.coverage(), covered.mean(axis=0))
    np.testing.assert_allclose(run.rmse()[:, 0], np.sqrt(np.mean((run.truth - run.mean)[..., 0] ** 2, axis=0)))


def _backtest_of_hits(hits):
    """A Backtest whose bands hold the truth exactly where ``hits`` (O, steps) is True."""
    from bayeskern.inference import Backtest

    O, steps = hits.shape
    truth = np.zeros((O, steps, 1))
    band = np.stack([np.where(hits[..., None], -1.0, 1.0), np.ones_like(truth)])
    return Backtest(np.arange(O), None, truth, band, truth, 0.9, None, np.zeros(truth.shape, bool),
                    np.zeros((O, steps), bool), None, 0.0)


def test_the_coverage_standard_error_is_the_moving_block_bootstrap_over_origins():
    """Equal to the bootstrap written out (blocks of consecutive origins strung together and cut at O); for
    independent hits with blocks of one origin near the binomial sqrt(p (1 - p) / O); for hits in runs of six
    origins (as overlapping 6-step errors give) about sqrt(6) times that with the default blocks (the horizon
    count), where the binomial formula would understate it; zero when every band holds."""
    rng = np.random.default_rng(3)
    independent = rng.uniform(size=(600, 6)) < 0.9
    runs = np.repeat(rng.uniform(size=(100, 6)) < 0.9, 6, axis=0)                    # (600, 6), runs of six

    def written_out(hits, block, draws=2000, seed=0):
        O = hits.shape[0]
        starts = np.random.default_rng(seed).integers(0, O - block + 1, size=(draws, -(-O // block)))
        rows = (starts[:, :, None] + np.arange(block)).reshape(draws, -1)[:, :O]
        return hits[rows].mean(axis=1).std(axis=0, ddof=1)

    for block in (1, 5, 6, 7, 600):
        np.testing.assert_allclose(_backtest_of_hits(runs).coverage_se(block)[:, 0], written_out(runs, block),
                                   rtol=1e-12, atol=1e-15)
    p = independent.mean(axis=0)
    binomial = np.sqrt(p * (1 - p) / 600)
    np.testing.assert_allclose(_backtest_of_hits(independent).coverage_se(1)[:, 0], binomial, rtol=0.1)
    p = runs.mean(axis=0)
    ratio = _backtest_of_hits(runs).coverage_se()[:, 0] / np.sqrt(p * (1 - p) / 600)
    assert np.all((1.8 < ratio) & (ratio < 3.1))                                     # sqrt(6) = 2.45
    assert np.all(_backtest_of_hits(np.ones((30, 4), bool)).coverage_se() == 0.0)
    with pytest.raises(ValueError, match="block"):
        _backtest_of_hits(runs).coverage_se(0)
    with pytest.raises(ValueError, match="block"):
        _backtest_of_hits(runs).coverage_se(601)
    with pytest.raises(ValueError, match="draws"):
        _backtest_of_hits(runs).coverage_se(draws=1)


def test_backtest_bands_learn_from_the_errors_revealed_when_the_noise_grows():
    """An AR(1) whose noise sd doubles after its fit span: the fit's band (the first origin's, the same at every
    origin without the backtest) covers about 60 % of the held-out steps; the backtest's bands add the revealed
    errors to their scores and adapt their level, and cover near the 90 % asked (5 horizons, 176 origins)."""
    rng = np.random.default_rng(200)
    y = np.zeros(380)
    for t in range(1, 380):
        y[t] = 0.7 * y[t - 1] + (1.0 if t < 200 else 2.0) * rng.standard_normal()
    run = backtest(y, 5, start=200, lags=(1,), workers=1)
    half = run.band[1, 0] - run.mean[0]
    assert np.mean(np.abs(run.truth - run.mean) <= half) < 0.7
    assert 0.8 < run.coverage().mean() < 0.95


@pytest.mark.slow
def test_a_bayesian_backtest_starts_from_the_bayesian_forecast_of_its_fit():
    """With ``bayesian=True`` the backtest samples on y[:start] as forecast_ahead does on it (the same key): its
    first origin's means and bands are forecast_ahead's, the scales of later origins the draws' spread there."""
    y = 5.0 + nonlinear_ar(170, seed=8)
    options = dict(bayesian=True, key=jax.random.key(0), lags=(1,), n_val=25, num_chains=1, num_warmup=30,
                   num_samples=30, num_landmarks=(6, 10), num_draws=5, workers=1)
    run = backtest(y, 4, start=150, **options)
    fc = forecast_ahead(y[:150], 4, **options)
    assert run.mcmc is not None and run.mean.shape == (17, 4, 1)
    np.testing.assert_allclose(run.mean[0], fc.mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(run.band[:, 0], fc.band, rtol=0, atol=1e-10)
    assert np.all(np.isfinite(run.band)) and np.all(run.band[0] < run.mean) and np.all(run.mean < run.band[1])


def test_backtest_keeps_dates_and_refuses_bad_input_by_name():
    y = 10 + nonlinear_ar(150, seed=13)
    monthly = pd.Series(y, index=pd.date_range("2010-01-01", periods=150, freq="MS"))
    run = backtest(monthly, 3, start=140, lags=(1,), workers=1)
    assert list(run.dates) == list(monthly.index[140:148])
    with pytest.raises(ValueError, match="start must be at most len.y. - steps = 147"):
        backtest(y, 3, start=148, lags=(1,))
    with pytest.raises(TypeError, match="unknown options \\['lag'\\]"):
        backtest(y, 3, start=140, lag=(1,))
    with pytest.raises(ValueError, match="gamma"):
        backtest(y, 3, start=140, gamma=-1.0)
    with pytest.raises(ValueError, match="start"):
        backtest(y, 3, start=0)
    with pytest.raises(ValueError, match="y\\[:start\\] of 40 steps is too short"):
        backtest(y, 3, start=40, lags=(1,))
    with pytest.warns(CalibrationWarning, match="bands .origins x horizons. had too few known errors for level 0.99"):
        thin = backtest(y, 3, start=140, level=0.99, lags=(1,), workers=1)
    assert thin.widened[0].all() and np.all(np.isfinite(thin.band))


def test_too_few_calibration_steps_for_the_horizon_are_refused_by_name():
    """y of 80 steps, V = 20, 30 steps ahead: T >= V + steps + 24 holds but lags up to 8 leave fewer than 30
    calibration steps."""
    y = 5.0 + nonlinear_ar(80, seed=9)
    with pytest.raises(ValueError, match="y of 80 steps leaves .* calibration steps for lags 1-8, levels"):
        forecast_ahead(y, 30, lags=(1, 2, 3, 4, 5, 6, 7, 8), n_val=20, workers=1)


def test_a_member_of_longer_reach_does_not_cost_a_short_series_its_bands(monkeypatch):
    """60 steps, 6 ahead, V = 20, 23 fit rows before the calibration block: the chosen design (lag 1, levels) leaves
    60 - 20 - 1 - 23 = 16 calibration steps, a member with lags 1-2 in differences (reach 3) 14 and one with lags
    1-12 in differences (reach 13) only 4, too few for 6 horizons (before, the whole forecast was refused). That
    member leaves the average, the other stays, and the calibration block has the 14 steps both can give."""
    import bayeskern.inference.ahead as ahead
    from bayeskern.kbr.forecast import _MIN_FIT_STEPS, _calibration

    y = 5.0 + nonlinear_ar(60, seed=4)
    tuning = tune_forecaster(y, lags=(1,), n_val=20, workers=1, **FAST)
    best = tuning.best
    near, far = (best._replace(design=ForecastDesign(lags, True)) for lags in ((1, 2), tuple(range(1, 13))))
    tuning = tuning._replace(members=(best, far, near))
    kept, C = _calibration(60, tuning, min_fit=_MIN_FIT_STEPS - 1, wanted=20, needed=6)
    assert C == 14 and kept.members == (best, near)
    assert _calibration(60, tuning, min_fit=_MIN_FIT_STEPS - 1, wanted=20) == (tuning, 4)   # each leaves a step
    monkeypatch.setattr(ahead, "tune_forecaster", lambda *args, **kwargs: tuning)
    fc = forecast_ahead(y, 6, lags=(1,), n_val=20, workers=1)
    assert fc.tuning.members == (best, near) and np.all(np.isfinite(fc.band)) and fc.calibration_counts[0] == 14


def test_constant_and_exactly_periodic_series_are_forecast_exactly_with_zero_width_bands():
    """Lag vectors that are one point have no distance scale (the filter takes the standardised unit): a constant
    series is forecast by persistence, a strictly periodic one exactly by its autoregression, each with a band of
    zero width; ``bayesian=True`` then has no noise to sample and says so."""
    with pytest.warns(UserWarning, match="persistence forecasts") as caught:
        flat = forecast_ahead(np.full(80, 3.0), 4, lags=(1, 2, 3, 4), workers=1)
    assert flat.fallback == "persistence" and np.all(flat.band == 3.0)
    assert caught[0].filename == __file__                               # the warning points at the caller's line
    with pytest.warns(UserWarning, match="persistence forecasts") as caught:
        run = backtest(np.full(80, 3.0), 4, start=76, lags=(1, 2, 3, 4), workers=1)
    assert np.all(run.band == 3.0) and caught[0].filename == __file__
    with pytest.warns(UserWarning, match="persistence forecasts"):
        one_step = forecast_series(np.full(80, 3.0), np.full(5, 3.0), lags=(1, 2, 3, 4), workers=1)
    assert np.all(one_step.mean == 3.0) and np.all(one_step.band == 3.0)
    cycle = np.tile([1.0, 3.0, 2.0, 5.0], 20)
    fc = forecast_ahead(cycle, 6, lags=(1, 2, 3, 4), workers=1)
    np.testing.assert_allclose(fc.mean[:, 0], [1.0, 3.0, 2.0, 5.0, 1.0, 3.0], atol=1e-9)
    np.testing.assert_allclose(fc.band - fc.mean, 0.0, atol=1e-9)
    with pytest.warns(UserWarning, match="validation steps exactly: there is no noise to sample"):
        exact = forecast_ahead(cycle, 6, lags=(1, 2, 3, 4), bayesian=True, key=jax.random.key(0), workers=1)
    assert exact.mcmc is None and np.all(np.isfinite(exact.band))
    np.testing.assert_allclose(exact.mean, fc.mean)
