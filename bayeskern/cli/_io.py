"""Reading samples and writing summaries for the command line; user-facing errors are one line."""

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from ..fitted import write_atomic

__all__ = ["CLIError", "load_sample", "load_pair", "add_column_options", "sample_columns", "output_folder",
           "write_summary", "write_table", "write_netcdf", "check", "pyplot", "add_seed_and_out"]


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


_clock_start = time.perf_counter()


def start_clock() -> None:
    """Restart the progress clock (at the start of a command)."""
    global _clock_start
    _clock_start = time.perf_counter()


def report(message: str) -> None:
    """A progress line on stderr (stdout stays for results): ``bayeskern [12.3 s]: message``."""
    print(f"bayeskern [{time.perf_counter() - _clock_start:6.1f} s]: {message}", file=sys.stderr, flush=True)


def check(condition: bool, message: str) -> None:
    """Raise :class:`CLIError` with ``message`` unless ``condition``."""
    if not condition:
        raise CLIError(message)


def load_sample(path: str, name: str, columns: str | None = None, option: str = "--columns") -> np.ndarray:
    """Read a sample from .npy or .csv/.txt (comma or whitespace separated; a first row with any entry that is not a
    number is the header).

    Args:
        path: the file.
        name: the argument name that error messages use.
        columns: the columns to read, comma-separated header names or 0-based positions (default: all).
        option: the command-line option that gave ``columns`` (named in error messages).

    Returns:
        (n, d) float array with n >= 2 (a single column becomes d = 1).

    Raises:
        CLIError: for a missing or unreadable file, an unknown column, columns that do not hold numbers, empty
            cells, fewer than 2 rows, or NaN or inf values.
    """
    p = Path(path)
    if not p.is_file():
        raise CLIError(f"{name}: no such file: {path}")
    try:
        table = _read_table(p)
    except (ValueError, OSError) as e:
        raise CLIError(f"{name}: cannot read {path} ({str(e).splitlines()[0]})") from None
    if columns is not None:
        table = table[[_column(table, token.strip(), name, path, option) for token in columns.split(",")]]
    text = [c for c in table.columns if table[c].dtype.kind not in "biuf"]
    if text:
        hint = f"; choose the numeric ones with {option}" if columns is None else ""
        raise CLIError(f"{name}: columns {[str(c) for c in text]} of {path} do not hold numbers{hint}")
    empty = [str(c) for c in table.columns if table[c].isna().any()] if p.suffix != ".npy" else []
    if empty:
        raise CLIError(f"{name}: columns {empty} of {path} have empty cells; fill or drop those rows first")
    data = table.to_numpy(float)
    if data.ndim != 2 or data.shape[0] < 2 or data.shape[1] < 1:
        raise CLIError(f"{name}: expected a table of at least 2 rows (points) by d columns, got shape {data.shape}")
    if not np.all(np.isfinite(data)):
        raise CLIError(f"{name}: {path} contains NaN or inf")
    return data


def _read_table(path: Path):
    """A .npy array or a CSV / whitespace-separated text table as a pandas DataFrame (columns named by the header,
    or numbered 0, 1, ... when there is none)."""
    import pandas as pd

    if path.suffix == ".npy":
        data = np.load(path, allow_pickle=False)
        return pd.DataFrame(data[:, None] if data.ndim == 1 else data)
    sep = "," if path.suffix == ".csv" else r"\s+"
    with open(path) as f:
        first = f.readline().strip()
    header = any(not _is_number(token) for token in (first.split(",") if sep == "," else first.split()))
    return pd.read_csv(path, sep=sep, header=0 if header else None)


def _is_number(token: str) -> bool:
    try:
        float(token.strip().strip('"'))
    except ValueError:
        return False
    return True


def _column(table, token: str, name: str, path, option: str):
    """The column of ``table`` that ``token`` names: a header name, else a 0-based position."""
    names = {str(c): c for c in table.columns}
    if token in names:
        return names[token]
    if token.isdigit() and int(token) < table.shape[1]:
        return table.columns[int(token)]
    raise CLIError(f"{option}: {name} ({path}) has no column {token!r} (columns: {list(names)}, "
                   f"or positions 0-{table.shape[1] - 1})")


def load_pair(path_x: str, path_y: str, names=("X", "Y"), columns=(None, None), paired: bool = True):
    """Two samples; ``columns`` as :func:`load_sample`'s, one per file; ``paired``: the rows must match."""
    X = load_sample(path_x, names[0], columns[0])
    Y = load_sample(path_y, names[1], columns[1], "--y-columns" if columns[1] != columns[0] else "--columns")
    check(not paired or X.shape[0] == Y.shape[0], f"{names[0]} has {X.shape[0]} rows but {names[1]} has "
                                                  f"{Y.shape[0]}: the rows must be paired")
    return X, Y


def add_column_options(parser) -> None:
    """The ``--columns`` and ``--y-columns`` options of the commands that read two tables."""
    parser.add_argument("--columns", default=None,
                        help="columns to read from the files, comma-separated header names or 0-based positions "
                             "(default: every column)")
    parser.add_argument("--y-columns", default=None,
                        help="columns of the second file, when they differ from --columns (e.g. both variables of an "
                             "independence test in one file)")


def sample_columns(args) -> tuple:
    """(X's columns, Y's columns) from ``--columns`` and ``--y-columns``."""
    return args.columns, args.columns if args.y_columns is None else args.y_columns


def output_folder(path: str, names, *, force: bool) -> Path:
    """The ``--out`` folder, created if needed, before any work: none of ``names`` there is overwritten unless
    ``force`` (every output is then replaced atomically, so an interrupted run leaves the old file or none)."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out: {path} is a file, not a folder")
    existing = [name for name in names if (out / name).exists()]
    if existing and not force:
        raise CLIError(f"--out: {path} already holds {', '.join(existing)}; pass --force to overwrite")
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_table(path: Path, table, header) -> Path:
    """A CSV table with a header row, written atomically."""
    write_atomic(path, lambda f: np.savetxt(f, table, delimiter=",", header=",".join(header), comments=""))
    return path


def write_netcdf(idata, path: Path) -> Path:
    """An arviz ``InferenceData`` as netCDF, written to a temporary name beside ``path`` and renamed."""
    part = path.with_name(f".{path.name}.part")
    try:
        idata.to_netcdf(str(part))
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return path


def write_summary(out: Path, summary: dict, files) -> None:
    """Write ``summary.json`` (atomically) and print the summary and the files written."""
    write_atomic(out / "summary.json", lambda f: f.write(json.dumps(summary, indent=2).encode()))
    for name, value in summary.items():
        print(f"{name:>32}: {value}")
    print(f"{'wrote':>32}: {', '.join(str(f) for f in [out / 'summary.json', *files])}")


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend (the command line never opens windows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def add_seed_and_out(parser, seed_help: str) -> None:
    """The ``--seed`` and ``--out`` options every subcommand has."""
    parser.add_argument("--seed", type=int, default=0, help=seed_help)
    parser.add_argument("--out", default="bayeskern-out", help="folder for the outputs (default ./bayeskern-out)")
    parser.add_argument("--force", action="store_true", help="overwrite output files already in --out")
