import os
import subprocess
import sys

# Compile time dominates this suite: about 10^4 small programs, each compiled once, and compiling and lowering
# them takes three quarters of a one-process run. XLA's CPU backend compiles them about a third faster with its
# classic elemental emitters than with the newer fusion emitters, and LLVM's optimisation level 0 takes another
# 30 % off (the programs are small and run briefly; the arithmetic is the same IEEE arithmetic, so every
# tolerance still holds). Generating each program's machine code in one piece rather than in parallel parts takes
# another 15 % off the backend's compile time (a worker has one core: the parts would only take turns; whole suite
# 800 -> 666 s of backend compiling). Probed once in a subprocess (an unknown XLA flag is fatal in a future
# jaxlib) and set before jax is imported; xdist workers and the CLI subprocesses inherit the environment.
_FAST_COMPILE = ("--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0"
                 " --xla_cpu_parallel_codegen_split_count=1")
if "BAYESKERN_TEST_XLA_PROBED" not in os.environ:
    os.environ["BAYESKERN_TEST_XLA_PROBED"] = "1"
    flags = f"{os.environ.get('XLA_FLAGS', '')} {_FAST_COMPILE}".strip()
    probe = subprocess.run([sys.executable, "-c", "import jax.numpy as jnp; jnp.zeros(1).block_until_ready()"],
                           env={**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}, capture_output=True)
    if probe.returncode == 0:
        os.environ["XLA_FLAGS"] = flags

# An xdist worker keeps to one core of its own: two JAX processes whose thread pools share both cores slow each
# other down (threads contend and migrate), and most of this suite is single-threaded compilation anyway.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and hasattr(os, "sched_setaffinity"):
    _cores = sorted(os.sched_getaffinity(0))
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) <= len(_cores):
        os.sched_setaffinity(0, {_cores[int(_WORKER.removeprefix("gw")) % len(_cores)]})

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import bayeskern  # noqa: E402

bayeskern.enable_x64()


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """The suite runs on every core (pytest-xdist's ``-n auto``) unless ``-n`` is given or xdist is disabled
    (``-p no:xdist`` runs it in this one process). Tests go out in contiguous runs of a file, and an idle worker
    takes half of another's queue (``--dist worksteal``): a worker compiles what its file's tests share once, and
    neither waits alone at the end (measured on 2 cores: 432 s against 448 s with ``--dist load``)."""
    if config.pluginmanager.hasplugin("xdist") and config.getoption("numprocesses", None) is None \
            and not hasattr(config, "workerinput"):
        config.option.numprocesses = "auto"
        if config.getoption("dist", "no") == "no":
            config.option.dist = "worksteal"


# xdist hands tests out in collection order; the files whose tests run longest (two-process runs, NUTS in the
# README's blocks, the docs build) go first, so that none of them is left running alone at the end of the suite.
_LONG_FILES = ("test_distributed.py", "test_readme.py", "test_docs.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(_LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: the order within a file is kept


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# Every compiled program JAX keeps alive holds about ten memory mappings on a CPU (its machine code and data,
# mapped by XLA's JIT). JAX caches each jitted function's programs for the life of the process, so a single process
# that compiles the whole suite's ~10^4 programs passes Linux's per-process limit of mappings
# (vm.max_map_count, 65530 by default) and XLA aborts while mapping the next one. Between test files, once the
# process holds more than half of that limit, the caches are cleared: later files recompile what they use.
def _map_budget():
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read()) // 2
    except (OSError, ValueError):
        return None  # not Linux: no such limit to keep under


_MAP_BUDGET = _map_budget()


def _memory_maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


@pytest.fixture(autouse=True, scope="module")
def _bounded_compiled_programs():
    yield
    if _MAP_BUDGET is not None and _memory_maps() > _MAP_BUDGET:
        import jax

        jax.clear_caches()
