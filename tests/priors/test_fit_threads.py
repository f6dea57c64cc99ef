"""jaxclp.fit_threads: the rule for how many fits run at once, the helper that runs them, and a tuned grid whose
specs run side by side giving bit for bit the sequential grid."""

import threading

import jax
import numpy as np
import pytest

from jaxclp import fit_threads as F
from jaxclp.gnn import fit_gnn_grid, grid as grid_module, tuned_grid
from jaxclp.train import TrainConfig

from files import features_graph


def test_run_each_runs_the_calls_at_once_and_keeps_their_order():
    """Two calls that each wait for the other (a barrier of 2) finish only side by side; results in call order."""
    barrier = threading.Barrier(2, timeout=30)

    def call(i):
        return lambda: (barrier.wait(), i)[1]

    assert F.run_each([call(0), call(1)], threads=2) == [0, 1]
    assert F.run_each([lambda: 3, lambda: 4], threads=1) == [3, 4]
    assert F.run_each([], threads=2) == []


def test_run_each_raises_the_first_error_in_call_order():
    def fail(message):
        def call():
            raise ValueError(message)
        return call

    with pytest.raises(ValueError, match="first"):
        F.run_each([lambda: 1, fail("first"), fail("second")], threads=2)


def test_fit_threads_rule(monkeypatch):
    """min(cores, MAX_THREADS) on the CPU up to MAX_NODES nodes; 1 above it, on one core, on an accelerator and
    inside a worker."""
    monkeypatch.setattr(F, "cores", lambda: 2)
    monkeypatch.setattr(F.jax, "default_backend", lambda: "gpu")
    assert F.fit_threads(300) == 1
    monkeypatch.setattr(F.jax, "default_backend", lambda: "cpu")
    assert F.fit_threads(300) == 2 and F.fit_threads(F.MAX_NODES) == 2
    assert F.fit_threads(F.MAX_NODES + 1) == 1
    assert F.run_each([lambda: F.fit_threads(300)] * 2, threads=2) == [1, 1]  # no threads inside threads
    assert F.fit_threads(300) == 2  # the worker's flag does not leak into the calling thread
    monkeypatch.setattr(F, "cores", lambda: 64)
    assert F.fit_threads(300) == F.MAX_THREADS
    monkeypatch.setattr(F, "cores", lambda: 1)
    assert F.fit_threads(300) == 1


@pytest.mark.parametrize("rungs,min_val", [((), 0), ((4, 8), 0)])
def test_grid_specs_side_by_side_are_the_sequential_grid_bit_for_bit(monkeypatch, rungs, min_val):
    """fit_gnn_grid with its specs in 2 threads (and halving's rounds) returns exactly what it returns in one."""
    g, x, y, tm, vm = features_graph(n=90, d=6)
    specs = tuned_grid("gcn", depths=(1, 2), plain_depths=(1, 2), hidden=8)
    cfg = TrainConfig(lr=0.01, epochs=16, patience=5, weight_decay=0.0)

    def fit(threads):
        monkeypatch.setattr(grid_module, "fit_threads", lambda n: threads)
        return fit_gnn_grid(jax.random.key(1), g, x, y, tm, vm, num_classes=3, specs=specs, cfg=cfg, rungs=rungs,
                            rungs_min_val=min_val)

    one, two = fit(1), fit(2)
    leaves = lambda fits: jax.tree_util.tree_leaves([(f.prior, f.params, f.info) for f in fits])
    assert len(leaves(one)) == len(leaves(two))
    for a, b in zip(leaves(one), leaves(two)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_no_threads_under_a_jax_setting_a_new_thread_would_not_see(monkeypatch):
    """jax.enable_x64 / default_matmul_precision set the calling thread's settings only: the fits then run in
    order (a worker would trace in the global settings); the caller's context variables reach the workers."""
    import contextvars

    monkeypatch.setattr(F, "cores", lambda: 2)
    monkeypatch.setattr(F.jax, "default_backend", lambda: "cpu")
    assert F.fit_threads(300) == 2
    with jax.enable_x64(not jax.config.jax_enable_x64):
        assert F.fit_threads(300) == 1
    with jax.default_matmul_precision("highest"):
        assert F.fit_threads(300) == 1
    var = contextvars.ContextVar("probe", default="unset")
    token = var.set("caller's")
    try:
        assert F.run_each([var.get, var.get], threads=2) == ["caller's", "caller's"]
    finally:
        var.reset(token)
