"""Precision switches. Nothing here runs on import: the user opts in."""

import jax

__all__ = ["enable_x64", "x64_enabled", "require_x64"]


def enable_x64(use_x64: bool = True) -> None:
    """Make JAX default to float64 (as ``numpyro.enable_x64``); importing bayeskern never does this itself.

    Call once at program start, before creating arrays. Kernel linear algebra (Cholesky factors,
    log-determinants, Gram solves) in bayeskern refuses to run in float32.

    Args:
        use_x64: True for float64, False to return to JAX's float32 default.
    """
    jax.config.update("jax_enable_x64", bool(use_x64))


def x64_enabled() -> bool:
    """Whether JAX currently creates float64 arrays by default."""
    return bool(jax.config.jax_enable_x64)


def require_x64(what: str) -> None:
    """Raise if float64 is off: ``what`` names the computation that needs it."""
    if not x64_enabled():
        raise RuntimeError(
            f"{what} solves a kernel Gram system, which bayeskern does only in float64; "
            "call bayeskern.enable_x64() once at program start"
        )
