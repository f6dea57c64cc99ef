"""Log-domain Sinkhorn: doubly stochastic output, diagnostics, hard inputs, validation, no recompiles."""

import inspect
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
from jaxclp import sinkhorn

TOL = 1e-6  # library default


def assert_doubly_stochastic(p, tol=TOL):
    p = np.asarray(p)
    assert np.all(np.isfinite(p)), "NaN/inf in P"
    assert np.all(p >= 0)
    row = np.max(np.abs(p.sum(axis=1) - 1.0))
    col = np.max(np.abs(p.sum(axis=0) - 1.0))
    assert row <= tol and col <= tol, f"row-sum error {row:.3g}, column-sum error {col:.3g} > {tol:g}"


DEFAULT_MAX_ITERS = inspect.signature(sinkhorn).parameters["max_iters"].default


def check_info(p, info, max_iters=DEFAULT_MAX_ITERS, tol=TOL):
    it = int(info.iterations)
    assert 1 <= it <= max_iters
    err = float(info.error)
    # error is the row-sum defect of the returned P
    np.testing.assert_allclose(err, np.max(np.abs(np.asarray(p).sum(axis=1) - 1.0)), rtol=1e-6, atol=1e-14)
    assert bool(info.converged) == (err <= tol)
    if not bool(info.converged):
        assert it == max_iters


@pytest.mark.parametrize("k", [2, 5, 17])
def test_random_positive_vs_reference(rng, k):
    c = rng.random((k, k)) * rng.uniform(0.1, 10.0)
    p, info = sinkhorn(jnp.asarray(c))
    assert p.dtype == jnp.float64
    assert_doubly_stochastic(p)
    check_info(p, info)
    assert bool(info.converged)
    assert np.all(np.asarray(p) > 0)
    # P = diag(u) C_s diag(v) exactly (up to rounding), for the smoothed matrix C/mean(C) + 1e-6
    assert ref.cross_ratio_defect(np.asarray(p), ref.smoothed(c)) < 1e-8
    # and it is the doubly-stochastic limit (reference iterated to 1e-13)
    np.testing.assert_allclose(np.asarray(p), ref.sinkhorn(c), atol=5 * TOL, rtol=0)


def test_known_2x2_closed_form():
    # for a positive 2x2 matrix the doubly-stochastic scaling is [[p, 1-p], [1-p, p]] with
    # p^2 / (1-p)^2 = (c00 c11) / (c01 c10)
    c = np.array([[4.0, 1.0], [2.0, 3.0]])
    p, _ = sinkhorn(jnp.asarray(c), smoothing=0.0, tol=1e-12)
    t = np.sqrt(4.0 * 3.0 / (1.0 * 2.0))
    q = t / (1.0 + t)
    np.testing.assert_allclose(np.asarray(p), [[q, 1 - q], [1 - q, q]], atol=1e-11)


def test_scale_invariance_and_extreme_global_scale(rng):
    c = rng.random((5, 5))
    p, _ = sinkhorn(jnp.asarray(c))
    for s in (1e-30, 1e30, 1e-300, 1e300):
        ps, info = sinkhorn(jnp.asarray(c * s))
        assert_doubly_stochastic(ps)
        assert bool(info.converged)
        np.testing.assert_allclose(np.asarray(ps), np.asarray(p), atol=1e-9)


def test_diagonal_scaling_invariance_log_domain(rng):
    """Without smoothing, P is invariant to row/column scalings (here 1e-30 .. 1e30): the log-domain
    iteration must handle this range without under/overflow."""
    k = 6
    c = rng.random((k, k)) + 0.1
    d1 = 10.0 ** rng.uniform(-30, 30, size=k)
    d2 = 10.0 ** rng.uniform(-30, 30, size=k)
    cs = d1[:, None] * c * d2[None, :]
    p, info = sinkhorn(jnp.asarray(c), smoothing=0.0, tol=1e-10)
    ps, info_s = sinkhorn(jnp.asarray(cs), smoothing=0.0, tol=1e-10)
    assert bool(info.converged) and bool(info_s.converged)
    assert_doubly_stochastic(ps, tol=1e-10)
    np.testing.assert_allclose(np.asarray(ps), np.asarray(p), atol=1e-8)


def test_all_zeros_gives_uniform():
    for k in (2, 5, 17):
        p, info = sinkhorn(jnp.zeros((k, k)))
        np.testing.assert_allclose(np.asarray(p), np.full((k, k), 1.0 / k), rtol=1e-12)
        assert bool(info.converged)
        check_info(p, info)


def test_near_singular_rank_one(rng):
    # a positive rank-one matrix u v^T scales to the uniform matrix 1/K
    for k in (2, 5, 17):
        u, v = rng.random(k) + 0.01, rng.random(k) + 0.01
        c = np.outer(u, v) + 1e-12
        p, info = sinkhorn(jnp.asarray(c))
        assert_doubly_stochastic(p)
        assert bool(info.converged)
        # (row sums within 1e-6 bound the entries' distance to the limit only loosely)
        np.testing.assert_allclose(np.asarray(p), np.full((k, k), 1.0 / k), atol=1e-5)


@pytest.mark.parametrize("case", ["zero_row", "zero_col", "zero_row_and_col_k17", "single_entry_k3",
                                  "log_uniform_1e-30_1e30"])
def test_hard_inputs_default_settings(rng, case):
    """Zero rows/columns and badly scaled entries: the default call must still return a doubly stochastic
    matrix within the default tolerance (the docstring promises a scaling exists for every input)."""
    if case == "zero_row":
        c = rng.random((5, 5))
        c[2] = 0.0
    elif case == "zero_col":
        c = rng.random((5, 5))
        c[:, 4] = 0.0
    elif case == "zero_row_and_col_k17":
        c = rng.random((17, 17))
        c[3] = 0.0
        c[:, 7] = 0.0
    elif case == "single_entry_k3":
        c = np.diag([1.0, 0.0, 0.0])
    else:
        c = 10.0 ** rng.uniform(-30, 30, size=(5, 5))
    p, info = sinkhorn(jnp.asarray(c))
    assert np.all(np.isfinite(np.asarray(p))) and np.all(np.asarray(p) > 0)
    check_info(p, info)
    assert_doubly_stochastic(p)
    assert bool(info.converged), f"not converged after {int(info.iterations)} sweeps, error {float(info.error):.3g}"


@pytest.mark.parametrize("case", ["zero_row_and_col_k17", "single_entry_k3", "log_uniform_1e-30_1e30"])
def test_hard_inputs_converge_with_enough_sweeps(rng, case):
    """The same hard inputs with a large sweep budget: converged, and the correct smoothed scaling."""
    if case == "zero_row_and_col_k17":
        c = rng.random((17, 17))
        c[3] = 0.0
        c[:, 7] = 0.0
    elif case == "single_entry_k3":
        c = np.diag([1.0, 0.0, 0.0])
    else:
        c = 10.0 ** rng.uniform(-30, 30, size=(5, 5))
    p, info = sinkhorn(jnp.asarray(c), max_iters=100_000)
    assert bool(info.converged)
    check_info(p, info, max_iters=100_000)
    assert_doubly_stochastic(p)
    assert ref.cross_ratio_defect(np.asarray(p), ref.smoothed(c)) < 1e-6
    np.testing.assert_allclose(np.asarray(p), ref.sinkhorn(c), atol=1e-4)


def test_info_when_budget_exhausted():
    c = np.diag([1.0, 0.0, 0.0])
    p, info = sinkhorn(jnp.asarray(c), max_iters=3)
    assert int(info.iterations) == 3
    assert not bool(info.converged)
    assert float(info.error) > TOL
    check_info(p, info, max_iters=3)
    # columns are exact after the last column scaling even when not converged
    np.testing.assert_allclose(np.asarray(p).sum(axis=0), 1.0, atol=1e-12)


def test_smaller_tolerance_is_honoured(rng):
    c = rng.random((5, 5))
    p, info = sinkhorn(jnp.asarray(c), tol=1e-12)
    assert bool(info.converged)
    assert_doubly_stochastic(p, tol=1e-12)
    p6, info6 = sinkhorn(jnp.asarray(c), tol=1e-3)
    assert int(info6.iterations) <= int(info.iterations)


@pytest.mark.parametrize("bad", [
    np.array([[1.0, -1e-9], [0.5, 1.0]]),
    np.array([[1.0, np.nan], [0.5, 1.0]]),
    np.array([[1.0, np.inf], [0.5, 1.0]]),
    np.ones((2, 3)),
    np.ones(4),
])
def test_rejects_bad_input(bad):
    with pytest.raises(ValueError):
        sinkhorn(jnp.asarray(bad))


def test_integer_input_is_accepted():
    p, _ = sinkhorn(jnp.asarray(np.array([[2, 1], [1, 2]])))
    assert jnp.issubdtype(p.dtype, jnp.floating)
    assert_doubly_stochastic(p)


def test_works_under_user_jit(rng):
    c = jnp.asarray(rng.random((5, 5)))
    p = jax.jit(lambda x: sinkhorn(x)[0])(c)
    np.testing.assert_allclose(np.asarray(p), np.asarray(sinkhorn(c)[0]), atol=1e-12)


def test_no_recompile_same_shape(rng, compile_counter):
    c1 = jnp.asarray(rng.random((5, 5)))
    c2 = jnp.asarray(rng.random((5, 5)))
    c3 = jnp.asarray(rng.random((13, 13)))  # a shape no other test uses
    jax.block_until_ready(sinkhorn(c1))  # warm-up compile
    with compile_counter() as cc:
        jax.block_until_ready(sinkhorn(c2))
        jax.block_until_ready(sinkhorn(c2, tol=1e-8, max_iters=500))  # tol/max_iters are not static
    assert cc.count == 0, f"{cc.count} recompilation(s) for the same shape"
    with compile_counter() as cc:  # the counter itself works: a new shape compiles
        jax.block_until_ready(sinkhorn(c3))
    assert cc.count > 0
