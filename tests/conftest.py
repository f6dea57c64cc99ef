"""Test configuration: float64 everywhere, plus shared fixtures.

``jax_enable_x64`` must be set before any jax array is created, so it is the first thing done here
(pytest imports conftest.py before the test modules).
"""

import os

# XLA's CPU backend at LLVM -O0 and with its elemental IR emitter for fusions (not its newer MLIR fusion emitters)
# for the tests: compiling dominates the suite (tiny graphs, thousands of distinct programs: training loops, solver
# grids; ~75 % of the tests' seconds are JAX compile events), and -O0 compiles them 2-3x faster while running the
# few large ones somewhat slower (user CPU of test_gnn -29 %, test_kernel + the MLP/estimator tests -19 %, same
# machine, same load); at -O0 the fusion emitters off cut another ~35 % (test_baselines_programs + test_features:
# 43-47 s -> 29-32 s, two runs each). At XLA's default -O2 the same flag saves nothing and runs slower
# (benchmarks/results/xla_flags.md), so users keep XLA's defaults. The arithmetic is the same IEEE arithmetic
# (results can differ from -O2 builds in the last bit, like any two programs); comparisons within the suite are
# between programs built the same way, subprocesses included (they inherit XLA_FLAGS). JAXCLP_TEST_XLA_OPT=1
# keeps XLA's default options (e.g. to test what users run).
SUITE_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")
if os.environ.get("JAXCLP_TEST_XLA_OPT", "").strip() in ("", "0") and \
        "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), *SUITE_XLA_FLAGS]).strip()

# One persistent XLA cache for the whole test run, shared by the xdist workers: the pytest process that starts
# first (the controller, or the only process without xdist) makes a fresh folder and passes it on in the
# environment; each worker reads back what the other already compiled (the same fixtures and configurations
# reach both workers), instead of compiling it again. Programs under 0.1 s of compiling are not written.
# JAXCLP_TEST_XLA_CACHE=off keeps every process on its in-memory cache only.
TEST_XLA_CACHE = "JAXCLP_TEST_XLA_CACHE"
# The lowered-program store (jaxclp.program_store) stays off: tests monkeypatch functions that programs trace and
# clear JAX's caches to count traces; tests/core/test_program_store.py and the CLI's cache test turn it on.
# JAXCLP_TEST_PROGRAM_STORE=on runs the suite with it on: two tests then fail by design (a jit-cache count the
# store bypasses; an exact MLP comparison under SUITE_XLA_FLAGS' optimization level 0, where the stored program's
# calling wrapper compiles to other float rounding; equal with JAXCLP_TEST_XLA_OPT=1).
os.environ["JAXCLP_PROGRAM_STORE"] = "on" if os.environ.get("JAXCLP_TEST_PROGRAM_STORE") == "on" else "off"
_OWN_XLA_CACHE = TEST_XLA_CACHE not in os.environ
if _OWN_XLA_CACHE:
    import tempfile

    os.environ[TEST_XLA_CACHE] = tempfile.mkdtemp(prefix="jaxclp_test_xla_")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
if os.environ[TEST_XLA_CACHE] != "off":
    jax.config.update("jax_compilation_cache_dir", os.environ[TEST_XLA_CACHE])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)

import contextlib  # noqa: E402
import sys  # noqa: E402
import zlib  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))  # `import reference` from every test module

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class CompileCounter:
    """Counts XLA backend compilations (jax.monitoring events) while active."""

    def __init__(self):
        self.count = 0

    def __call__(self, event, duration_secs, **kwargs):
        if event == COMPILE_EVENT:
            self.count += 1


@contextlib.contextmanager
def count_compiles():
    counter = CompileCounter()
    jax.monitoring.register_event_duration_secs_listener(counter)
    try:
        yield counter
    finally:
        jax.monitoring.unregister_event_duration_listener(counter)


@pytest.fixture
def compile_counter():
    """Context-manager factory: ``with compile_counter() as c: ...; c.count``."""
    return count_compiles


CHEAP_CLP_PRIORS = ("mlp", "link")


@pytest.fixture
def cheap_clp_priors(monkeypatch):
    """The runner's ``clp`` tries only :data:`CHEAP_CLP_PRIORS` (two base predictors: its choice rule still has a
    choice to make) instead of its seven, whose GNN and tuned-GNN grids compile ~20 training loops per test
    process. For tests whose assertions are about what a target does with the records (binning, pairing,
    resuming), not about which predictors ``clp`` tries: each predictor is fitted on its own in
    tests/priors/test_priors.py, the choice among them in test_priors.py and estimator/test_estimator.py."""
    from jaxclp.experiments import methods

    monkeypatch.setattr(methods, "CLP_PRIOR_CANDIDATES", CHEAP_CLP_PRIORS)
    return CHEAP_CLP_PRIORS


@pytest.fixture
def rng(request):
    """A numpy Generator seeded from the test's id (deterministic per test).

    The id is ``tests/<file name>::<test>[<params>]`` whatever folder the file is in (file names are unique across
    tests/): moving a test file between folders keeps its tests' data, and the suite's layout by layer (issue 68)
    kept the seeds the tests had in the flat tests/ folder."""
    name = request.node.nodeid.split("::", 1)[1]
    seed = zlib.crc32(f"tests/{request.node.path.name}::{name}".encode())
    return np.random.default_rng(seed)


def pytest_configure(config):
    assert jax.config.jax_enable_x64, "x64 must be enabled before tests run"
    # the parsed-dataset cache of every load in the tests goes to a fresh directory, not the user's cache
    import tempfile
    os.environ["JAXCLP_CACHE"] = tempfile.mkdtemp(prefix="jaxclp_test_cache_")
    # the CLI's persistent XLA cache stays off in-process (tests/cli/test_cli.py turns it on in a subprocess)
    os.environ["JAXCLP_XLA_CACHE"] = "off"


def pytest_unconfigure(config):
    if _OWN_XLA_CACHE and os.environ.get(TEST_XLA_CACHE, "off") != "off":
        import shutil
        shutil.rmtree(os.environ[TEST_XLA_CACHE], ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """``cpu_bitwise`` tests assert that two computations agree bit for bit (a default is exactly the explicit
    call, vmapped splits equal single fits, the C++ kernel is the CPU lowering, ...). That holds on the CPU
    backend, where CI runs them. On a GPU, XLA's scatter-adds are atomic and its fusions differ, so summation
    order varies between programs and runs: differences of 1e-16 in float64, and float32 trainings that drift by
    1e-4 over hundreds of epochs (all 22 seen on an H200, benchmarks/results/device_tests.md). There they skip."""
    if jax.default_backend() == "cpu":
        return
    skip = pytest.mark.skip(reason=f"bitwise identity is a CPU-backend property (backend: {jax.default_backend()})")
    for item in items:
        if "cpu_bitwise" in item.keywords:
            item.add_marker(skip)
