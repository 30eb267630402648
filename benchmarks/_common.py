"""Shared helpers of the benchmark scripts: a machine header line and post-compilation timing."""

import os
import platform
import time

import jax


def machine_line(details: str) -> str:
    """'# cpu, cores, jax version, backend, <details>' for the top of a benchmark's output."""
    return (f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}, "
            f"backend {jax.default_backend()}, {details}")


def timed(fn):
    """(seconds, result) of the second call of ``fn``; the first call compiles."""
    jax.block_until_ready(fn())
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - t0, out
