"""Compiler options for the library's heaviest programs on a CPU.

XLA's CPU compiler builds them (while loops around kernel sums, pivoted factorisations, NUTS tree doublings) about
twice as fast with its classic elemental emitters as with its newer fusion emitters, and they run as fast or
faster (benchmarks/RESULTS.md): a first call spends most of its time compiling. JAX takes compiler options only
for programs compiled at the top level (not for a jitted function called inside another trace), so the quick
options apply where a program is the outermost one and the plain ``jax.jit`` is used everywhere else.
"""

import functools

import jax
import numpy as np

__all__ = ["compiler_options", "quick_jit", "top_level_jit"]

_CPU_OPTIONS = {"xla_cpu_use_fusion_emitters": False}


@functools.cache
def compiler_options(backend: str):
    """The quick-compiling options on a CPU when this XLA knows them (probed once with a trivial program), None
    (XLA's defaults) on other backends or where it does not."""
    if backend != "cpu":
        return None
    try:
        jax.jit(lambda x: x + 1, compiler_options=_CPU_OPTIONS)(np.zeros(1)).block_until_ready()
    except jax.errors.JaxRuntimeError:   # "No such compile option": an XLA without the option
        return None
    return _CPU_OPTIONS


def top_level_jit(fn, **jit_kwargs):
    """``jax.jit(fn)`` with the quick options of the default backend, for a program that is always compiled at the
    top level (a driver's own programs)."""
    return jax.jit(fn, compiler_options=compiler_options(jax.default_backend()), **jit_kwargs)


def quick_jit(fn):
    """``jax.jit(fn)`` (usable as a decorator) that, called at the top level, compiles with the quick options of the
    default backend, and inside a trace (jit, grad, vmap, eval_shape) is the plain jit, inlined by the outer one."""
    plain = jax.jit(fn)
    quick = {}

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not _at_top_level():   # first: probing the options compiles a program, itself only at the top level
            return plain(*args, **kwargs)
        backend = jax.default_backend()
        options = compiler_options(backend)
        if options is None:
            return plain(*args, **kwargs)
        if backend not in quick:
            quick[backend] = jax.jit(fn, compiler_options=options)
        return quick[backend](*args, **kwargs)

    return call


def _at_top_level() -> bool:
    """Whether no JAX trace is active (JAX's own test, where this JAX has it; otherwise False: the plain jit)."""
    try:
        from jax._src.core import trace_ctx
        return bool(trace_ctx.is_top_level())
    except (ImportError, AttributeError):
        return False
