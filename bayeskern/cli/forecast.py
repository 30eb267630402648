"""``bayeskern forecast DATA.csv --column y --steps 12``: the next steps of a series with a band per horizon."""

import time
from pathlib import Path

import numpy as np

from ._io import CLIError, add_seed_and_out, check, pyplot, report, write_summary

__all__ = ["add_parsers"]


def _forecaster(fc) -> str:
    """The summary's words for the forecaster of ``fc``: a baseline, one filter, or an average of designs' filters,
    the first's averaged over NUTS draws with ``--bayesian``."""
    if fc.design is None:
        return f"{fc.fallback} (no filter beat it on validation)"
    count = len(fc.tuning.members)
    line = f"kernel Bayes filters of {count} designs, averaged" if count > 1 else "kernel Bayes filter"
    if fc.mcmc is not None:
        line += (", the first's filter" if count > 1 else "") + " averaged over NUTS draws of its hyperparameters"
    return line


def _run(args):
    import warnings

    import jax

    from bayeskern.inference import forecast_ahead

    series = _read_series(args.data, args.column, args.date)
    check(args.validation is None or args.validation <= series.shape[0] // 2,
          f"--validation must be at most half the series ({series.shape[0] // 2} of {series.shape[0]} steps)")
    check(args.backtest is None or args.steps <= args.backtest < series.shape[0] // 2,
          f"--backtest must hold out at least --steps ({args.steps}) and less than half the series "
          f"({series.shape[0] // 2} of {series.shape[0]} steps)")
    report(f"read {series.shape[0]} values of {series.name!r}"
           + (f", {_label(series.index[0])} to {_label(series.index[-1])}" if _dated(series) else "")
           + f"; tuning the forecaster and calibrating {args.steps} horizons")
    t0 = time.perf_counter()
    sampling = dict(bayesian=True, key=jax.random.key(args.seed), num_chains=args.chains, num_warmup=args.warmup,
                    num_samples=args.samples, progress_bar=True) if args.bayesian else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fc = forecast_ahead(series, args.steps, level=args.level, lags=args.lags, season=args.season,
                            n_val=args.validation, **sampling)
    notes = _notes(caught)
    for note in notes:
        report(note)
    out = Path(args.out)
    frame = fc.to_frame()
    frame.index.name = frame.index.name or ("date" if fc.index is not None and _dated(series) else "step")
    table = out / "forecast.csv"
    frame.to_csv(table)
    figure = _plot(series, fc, args.history, out / "forecast.png")
    design = fc.design
    averaged = [member.design.label for member in fc.tuning.members]
    summary = {"title": f"{args.steps}-step forecast of {series.name!r} in {args.data}", "observations": int(
        series.shape[0]), "steps": args.steps, "level": args.level,
        "first_forecast": _label(frame.index[0]), "last_forecast": _label(frame.index[-1]),
        "forecaster": _forecaster(fc),
        "lags": list(design.lags) if design else None, "design": design.label if design else None,
        "averaged_designs": averaged,
        "validation_steps": int(fc.tuning.num_validation),
        "calibration_errors_per_horizon": fc.calibration_counts.tolist(),
        "tail_rule_horizons": (np.flatnonzero(fc.widened.any(axis=1)) + 1).tolist(),
        "clipped_steps": (np.flatnonzero(fc.clipped) + 1).tolist(), "warnings": notes}
    if fc.mcmc is not None:       # a single chain has no split R-hat: null
        summary.update(max_split_rhat=_finite(fc.mcmc.max_rhat), min_ess_bulk=_finite(fc.mcmc.min_ess_bulk),
                       divergences=int(fc.mcmc.divergences))
    written = [table, figure]
    if args.backtest is not None:
        summary["backtest"], files = _backtest(series, args, sampling, out)
        written += files
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    write_summary(out, summary, written)
    return summary


def _backtest(series, args, sampling, out):
    """The forecaster fitted without the last ``--backtest`` steps, run over them (bayeskern.inference.backtest):
    (its summary, the paths of backtest.csv, one row per origin and horizon, and backtest.png)."""
    import warnings

    import pandas as pd

    from bayeskern.inference import backtest

    start = series.shape[0] - args.backtest
    report(f"backtest: the forecaster fitted on the first {start} steps, forecasting 1-{args.steps} steps ahead "
           f"from each of the last {args.backtest - args.steps + 1} origins")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = backtest(series, args.steps, start=start, level=args.level, lags=args.lags, season=args.season,
                       n_val=args.validation, **sampling)
    notes = _notes(caught)
    for note in notes:
        report(f"backtest: {note}")
    origins, horizons = np.meshgrid(run.origins, np.arange(1, args.steps + 1), indexing="ij")
    targets = series.index[(origins + horizons - 1).ravel()]
    name = series.index.name or ("date" if _dated(series) else "step")
    frame = pd.DataFrame({f"origin_{name}": series.index[origins.ravel()], "horizon": horizons.ravel(),
                          name: targets, "mean": run.mean[..., 0].ravel(), "lower": run.band[0, ..., 0].ravel(),
                          "upper": run.band[1, ..., 0].ravel(), "value": run.truth[..., 0].ravel()})
    table = out / "backtest.csv"
    frame.to_csv(table, index=False)
    figure = _plot_backtest(series, run, start, out / "backtest.png")
    coverage, se, rmse = run.coverage()[:, 0], run.coverage_se()[:, 0], run.rmse()[:, 0]
    report(f"backtest: coverage of the {args.level:.0%} bands {coverage.min():.2f}-{coverage.max():.2f} over the "
           f"horizons (bootstrap se up to {se.max():.2f}), RMSE {rmse[0]:.4g} at 1 step, {rmse[-1]:.4g} at "
           f"{args.steps}")
    return {"fitted_on": start, "origins": int(run.origins.size), "first_origin": _label(series.index[start]),
            "coverage_per_horizon": coverage.round(4).tolist(), "coverage_se_per_horizon": se.round(4).tolist(),
            "rmse_per_horizon": rmse.tolist(),
            "warnings": notes}, [table, figure]


def _plot_backtest(series, run, start: int, path):
    """The held-out span (and as many steps before it) observed, with the backtest's forecasts one step and
    ``steps`` steps ahead and their bands, each drawn at the step it forecasts."""
    plt = pyplot()
    from bayeskern.plotting import save_figure

    steps = run.mean.shape[1]
    shown = series.iloc[max(0, 2 * start - series.shape[0]):]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    ax.plot(shown.index, shown.to_numpy(), color="k", lw=1.2, label="observed")
    for h, color in ((steps, "C1"), (1, "C0")) if steps > 1 else ((1, "C0"),):
        when = series.index[run.origins + h - 1]
        cover = run.coverage()[h - 1, 0]
        ax.fill_between(when, run.band[0, :, h - 1, 0], run.band[1, :, h - 1, 0], color=color, alpha=0.2, lw=0)
        ax.plot(when, run.mean[:, h - 1, 0], color=color, lw=1.2,
                label=f"{h} step{'s' if h > 1 else ''} ahead (band covers {cover:.0%})")
    ax.axvline(series.index[start], color="0.5", lw=0.8, ls=":")
    ax.set(ylabel=str(series.name), title=f"backtest: fitted on the first {start} steps, {run.level:.0%} bands")
    ax.legend(frameon=False, fontsize=8, loc="upper left")
    return save_figure(fig, path)


def _notes(caught) -> list:
    """The library's warnings among those caught, one line each, without repeats."""
    return sorted({f"{w.category.__name__}: {w.message}" for w in caught
                   if w.category.__module__.startswith(("bayeskern", "inference"))})


def _finite(value):
    """A float for JSON, or None where it is not finite."""
    return float(value) if np.isfinite(value) else None


def _read_series(path: str, column, date):
    """The column of a CSV file (comma-separated, or semicolon-separated with decimal points or commas) as a pandas
    Series, indexed by its date column (given, or the first column whose every entry reads as a date) at the
    frequency pandas infers, else by row number; rows whose dates decrease (newest first) are read oldest first."""
    import pandas as pd

    if not Path(path).is_file():
        raise CLIError(f"DATA: no such file: {path}")
    try:
        table = pd.read_csv(path)
        if table.shape[1] == 1 and ";" in str(table.columns[0]):    # the semicolons of a decimal-comma locale
            table = pd.read_csv(path, sep=";")
            if not any(pd.api.types.is_numeric_dtype(table[c]) for c in table.columns):
                table = pd.read_csv(path, sep=";", decimal=",")
            report(f"DATA: read {path} as semicolon-separated")
    except (ValueError, OSError) as e:
        raise CLIError(f"DATA: cannot read {path} as CSV ({str(e).splitlines()[0]})") from None
    numeric = [c for c in table.columns if pd.api.types.is_numeric_dtype(table[c])]
    if column is None:
        check(len(numeric) == 1, f"--column: {path} has numeric columns {numeric}; name the one to forecast")
        column = numeric[0]
    check(column in table.columns, f"--column: no column {column!r} in {path} (columns: {list(table.columns)})")
    check(pd.api.types.is_numeric_dtype(table[column]), f"--column: {column!r} does not hold numbers")
    values = table[column]
    check(bool(values.notna().all()), f"--column: {column!r} has {int(values.isna().sum())} empty or non-numeric "
                                      "entries; fill or drop them first")
    if date is None:
        date = next((c for c in table.columns if c != column and not pd.api.types.is_numeric_dtype(table[c])
                     and _all_dates(table[c])), None)
    elif date not in table.columns or not _all_dates(table[date]):
        raise CLIError(f"--date: {date!r} is not a column of dates in {path}")
    if date is None:
        return pd.Series(values.to_numpy(float), name=column)
    month_first = pd.DatetimeIndex(pd.to_datetime(table[date], format="mixed"), name=date)
    if len(month_first) > 1 and month_first.is_monotonic_decreasing and month_first.is_unique:
        report(f"--date: the dates in {date!r} decrease; read the rows oldest first")
        table, month_first = table.iloc[::-1].reset_index(drop=True), month_first[::-1]
        values = table[column]
    index = _regular(month_first)
    if index is None:        # 03/04/2000 reads month first; day first may be the regular reading
        index = _regular(pd.DatetimeIndex(pd.to_datetime(table[date], format="mixed", dayfirst=True), name=date))
        if index is not None:
            i = int(np.argmax(month_first != index))
            report(f"--date: read the dates in {date!r} day first ({table[date].iloc[i]} is "
                   f"{index[i].strftime('%Y-%m-%d')})")
    if index is None:
        unordered = np.flatnonzero(np.diff(month_first.to_numpy()) <= np.timedelta64(0))
        if unordered.size:
            i, dates = int(unordered[0]) + 1, table[date]
            where = "repeats the date before it" if month_first[i] == month_first[i - 1] else \
                f"is earlier than the date before it, {dates.iloc[i - 1]}"
            raise CLIError(f"--date: the dates in {date!r} must increase: data row {i + 1}, {dates.iloc[i]}, {where}")
        raise CLIError(f"--date: the dates in {date!r} have no regular frequency (gaps or irregular steps)")
    return pd.Series(values.to_numpy(float), index=index, name=column)


def _regular(index):
    """The DatetimeIndex with the frequency pandas infers, or None when its dates do not increase at one."""
    import pandas as pd

    if len(index) < 3 or not (index.is_monotonic_increasing and index.is_unique):
        return None
    index = pd.DatetimeIndex(index, freq="infer")
    return index if index.freq is not None else None


def _all_dates(column) -> bool:
    import pandas as pd

    try:
        return bool(pd.to_datetime(column, errors="coerce", format="mixed").notna().all())
    except (TypeError, ValueError):
        return False


def _dated(series) -> bool:
    import pandas as pd

    return isinstance(series.index, pd.DatetimeIndex)


def _label(value) -> str:
    """A date without its time of day when that is midnight; anything else as str."""
    if hasattr(value, "normalize") and value == value.normalize():
        return value.strftime("%Y-%m-%d")
    return str(value)


def _lags(text: str):
    if text == "auto":
        return "auto"
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise CLIError(f"--lags must be 'auto' or comma-separated integers such as 1,2,12, got {text!r}") from None


def _plot(series, fc, history: int, path):
    """The fan chart: the last ``history`` observations, the forecasts and their band."""
    plt = pyplot()
    from bayeskern.plotting import save_figure

    past = series.iloc[-history:]
    future = fc.index if fc.index is not None else np.arange(series.shape[0], series.shape[0] + fc.mean.shape[0])
    fig, ax = plt.subplots(figsize=(9, 3.6))
    ax.plot(past.index, past.to_numpy(), color="k", lw=1.2, label="observed")
    ax.fill_between(future, fc.band[0, :, 0], fc.band[1, :, 0], color="C0", alpha=0.25, lw=0,
                    label=f"{fc.level:.0%} band")
    ax.plot(future, fc.mean[:, 0], color="C0", lw=1.5, marker=".", label="forecast")
    ax.set(ylabel=str(series.name), title=f"{fc.mean.shape[0]}-step forecast")
    ax.legend(frameon=False, fontsize=8, loc="upper left")
    return save_figure(fig, path)


def _check(args):
    args.lags = _lags(args.lags)
    check(args.steps >= 1, "--steps must be >= 1")
    check(0 < args.level < 1, "--level must lie in (0, 1)")
    check(args.history >= 1, "--history must be >= 1")
    check(args.validation is None or args.validation >= 1, "--validation must be >= 1")
    check(args.season is None or args.season >= 2, "--season must be >= 2")
    check(args.backtest is None or args.backtest >= 1, "--backtest must be >= 1")
    check(min(args.chains, args.warmup, args.samples) >= 1, "--chains, --warmup and --samples must be >= 1")


def add_parsers(sub) -> None:
    p = sub.add_parser("forecast", help="forecast the next steps of a series in a CSV file, with bands",
                       description="Forecasts the next --steps values of one column of a CSV file (one row per "
                                   "time step, oldest first) with the validated kernel Bayes forecaster "
                                   "(bayeskern.inference.forecast_ahead) and a conformal band per horizon calibrated "
                                   "on held-out origins. A column of dates (found by itself, or --date) dates the forecasts "
                                   "at its frequency. Writes forecast.csv (mean, lower, upper per future step), "
                                   "forecast.png (a fan chart) and summary.json; progress on stderr.")
    p.add_argument("data", help="CSV file with a header row")
    p.add_argument("--column", default=None, help="the column to forecast (default: the only numeric column)")
    p.add_argument("--date", default=None, help="the column of dates (default: the first column of dates, if any)")
    p.add_argument("--steps", type=int, default=12, help="future steps to forecast (default 12)")
    p.add_argument("--level", type=float, default=0.9, help="band level at each horizon (default 0.9)")
    p.add_argument("--lags", default="auto", help="'auto' (default) or comma-separated lags such as 1,2,12")
    p.add_argument("--validation", type=int, default=None,
                   help="validation steps (default min(200, max(20, T/5)))")
    p.add_argument("--season", type=int, default=None,
                   help="seasonal period, e.g. 12 for monthly data (default: detected, kbr.seasonal_period)")
    p.add_argument("--history", type=int, default=120, help="observed steps shown in the fan chart (default 120)")
    p.add_argument("--bayesian", action="store_true",
                   help="average the forecasts over NUTS draws of the filter's hyperparameters (slower)")
    p.add_argument("--backtest", type=int, default=None, metavar="K",
                   help="also fit without the last K steps and forecast 1..--steps ahead from each of them, bands "
                        "learning from the errors seen so far (bayeskern.inference.backtest): backtest.csv, "
                        "backtest.png and the coverage and RMSE per horizon in summary.json")
    p.add_argument("--chains", type=int, default=2, help="--bayesian: NUTS chains (default 2)")
    p.add_argument("--warmup", type=int, default=200, help="--bayesian: NUTS warm-up iterations per chain (default 200)")
    p.add_argument("--samples", type=int, default=200, help="--bayesian: NUTS draws per chain (default 200)")
    add_seed_and_out(p, "--bayesian: seed of the sampler (default 0)")
    p.set_defaults(run=_run, check=_check, outputs=lambda a: ["summary.json", "forecast.csv", "forecast.png"]
                   + (["backtest.csv", "backtest.png"] if a.backtest is not None else []))
