"""Process-wide switches (precision, compilation cache). Nothing here runs on import: the user opts in."""

import os
from pathlib import Path

import jax

__all__ = ["enable_x64", "x64_enabled", "require_x64", "enable_compilation_cache"]


def enable_x64(use_x64: bool = True) -> None:
    """Make JAX default to float64 (as ``numpyro.enable_x64``); importing bayeskern never does this itself.

    Call once at program start, before creating arrays. Kernel linear algebra (Cholesky factors,
    log-determinants, Gram solves) in bayeskern refuses to run in float32.

    Args:
        use_x64: True for float64, False to return to JAX's float32 default.
    """
    jax.config.update("jax_enable_x64", bool(use_x64))


def x64_enabled() -> bool:
    """Whether JAX currently creates float64 arrays by default.

    Returns:
        True when float64 is on (after :func:`enable_x64`).
    """
    return bool(jax.config.jax_enable_x64)


def require_x64(what: str) -> None:
    """Raise if float64 is off: ``what`` names the computation that needs it."""
    if not x64_enabled():
        raise RuntimeError(
            f"{what} solves a kernel Gram system, which bayeskern does only in float64; "
            "call bayeskern.enable_x64() once at program start"
        )


def enable_compilation_cache(path=None) -> Path:
    """Keep JAX's compiled programs on disk, so a later process with the same shapes skips compilation.

    Every first call of a compiled bayeskern computation (a NUTS chunk, a likelihood gradient, a solver) spends
    seconds in XLA; with the cache a second process loads the program instead (JAX's persistent compilation cache,
    keyed on the program, the shapes, jax/jaxlib versions and the device). Call once at program start. Opt-in:
    the folder grows with every new program (delete it at any time).

    Args:
        path: cache folder; default ``$BAYESKERN_CACHE`` or ``~/.cache/bayeskern/jax``.

    Returns:
        The folder (created if needed).

    Raises:
        TypeError: path is not a path.
        ValueError: path exists and is not a folder.
    """
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a folder path (str or os.PathLike), got {type(path).__name__}")
    folder = Path(path or os.environ.get("BAYESKERN_CACHE") or Path.home() / ".cache" / "bayeskern" / "jax")
    folder = folder.expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"path must be a folder for the compilation cache, got the file {folder}")
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)   # small programs add up too
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder
