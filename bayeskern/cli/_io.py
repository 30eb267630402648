"""Reading samples and writing summaries for the command line; user-facing errors are one line."""

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from ..fitted import write_atomic

__all__ = ["CLIError", "load_sample", "load_pair", "output_folder", "write_summary", "write_table", "write_netcdf",
           "check", "pyplot", "add_seed_and_out"]


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


def load_sample(path: str, name: str) -> np.ndarray:
    """Read a sample from .npy or .csv/.txt (comma or whitespace separated, optional header row).

    Args:
        path: the file.
        name: the argument name that error messages use.

    Returns:
        (n, d) float array with n >= 2 (a single column becomes d = 1).

    Raises:
        CLIError: for a missing or unreadable file, fewer than 2 rows, or NaN or inf values.
    """
    p = Path(path)
    if not p.is_file():
        raise CLIError(f"{name}: no such file: {path}")
    try:
        if p.suffix == ".npy":
            data = np.load(p, allow_pickle=False)
        else:
            delimiter = "," if p.suffix == ".csv" else None
            try:
                data = np.loadtxt(p, delimiter=delimiter, ndmin=2)
            except ValueError:
                data = np.loadtxt(p, delimiter=delimiter, ndmin=2, skiprows=1)
    except (ValueError, OSError) as e:
        raise CLIError(f"{name}: cannot read {path} as numbers ({str(e).splitlines()[0]})") from None
    data = np.asarray(data, dtype=float)
    if data.ndim == 1:
        data = data[:, None]
    if data.ndim != 2 or data.shape[0] < 2:
        raise CLIError(f"{name}: expected a table of at least 2 rows (points) by d columns, got shape {data.shape}")
    if not np.all(np.isfinite(data)):
        raise CLIError(f"{name}: {path} contains NaN or inf")
    return data


def load_pair(path_x: str, path_y: str, names=("X", "Y")):
    """Two samples of paired rows (same number of points)."""
    X, Y = load_sample(path_x, names[0]), load_sample(path_y, names[1])
    check(X.shape[0] == Y.shape[0], f"{names[0]} has {X.shape[0]} rows but {names[1]} has {Y.shape[0]}: "
                                    "the rows must be paired")
    return X, Y


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
