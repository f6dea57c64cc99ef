"""Closed-form CLP solvers vs the dense numpy reference (np.linalg.solve)."""

import functools
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reference as ref
from jaxclp import Graph, solve
from jaxclp.solve import SOLVERS

N = 40
K = 5


@functools.lru_cache(maxsize=None)
def make_graph(kind, n=N):
    """One graph per kind for the module with the same n and edge count, so each method's kernel compiles
    once (the normalization is traced). "undirected": isolated nodes + added self-loops; "directed":
    isolated nodes, kept self-loops, repeated edges, non-unit weights."""
    ei, kw = ref.graph_spec({"undirected": "undirected_loops", "directed": "directed"}[kind], seed=33, n=n)
    return Graph.from_edge_index(ei, n, **kw)


def make_problem(rng, n, k, h=None):
    prior, labels, mask = ref.random_problem(rng, n, k)
    b0 = ref.initial_beliefs(prior, labels, mask)
    if h is None:
        h = ref.sinkhorn(rng.random((k, k)) + 0.5 * np.eye(k))
    return b0, h, prior


def ref_ops(g, b0, h, norm):
    return ref.clp_operators(ref.normalize(ref.graph_dense(g), norm), b0, h)


def pick_alpha(ops, norm):
    if norm == "none":
        return min(0.9, 0.7 / max(ref.spectral_radii(ops).max(), 1e-3))
    return 0.85


def assert_solution_ok(sol, ops, prior, alpha, tol):
    x = np.asarray(sol.value)
    expect = ref.closed_form(ops, prior, alpha)
    scale = np.abs(expect).max()
    np.testing.assert_allclose(x, expect, rtol=1e-5, atol=1e-6 * scale)
    res, rel = ref.residual(ops, prior, x, alpha)
    rhs_norm = np.linalg.norm((1 - alpha) * prior, axis=0)
    np.testing.assert_allclose(np.asarray(sol.residual), res, rtol=1e-4, atol=1e-6 * rhs_norm.max())
    np.testing.assert_allclose(np.asarray(sol.relative_residual), np.asarray(sol.residual) / rhs_norm,
                               rtol=1e-10)
    conv = np.asarray(sol.converged)
    np.testing.assert_array_equal(conv, np.asarray(sol.relative_residual) <= tol)
    assert conv.all(), (sol.method, np.asarray(sol.relative_residual))
    rows, cols = ops.sum(axis=2).max(axis=1), ops.sum(axis=1).max(axis=1)
    np.testing.assert_allclose(np.asarray(sol.rho_bound), np.minimum(rows, cols), rtol=1e-6)


CASES = [("undirected", "sym"), ("undirected", "none"), ("undirected", "row"),
         ("directed", "sym"), ("directed", "row"), ("directed", "none")]


def cg_valid(kind, norm):
    return kind == "undirected" and norm in ("sym", "none")


@pytest.mark.parametrize("kind,norm", CASES)
@pytest.mark.parametrize("method", SOLVERS)
def test_method_agrees_with_reference(rng, method, kind, norm):
    g = make_graph(kind)
    b0, h, prior = make_problem(rng, N, K)
    ops = ref_ops(g, b0, h, norm)
    alpha = pick_alpha(ops, norm)
    args = (g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior))
    tol = 1e-9
    if method == "cg" and not cg_valid(kind, norm):
        with pytest.raises(ValueError, match="symmetric"):
            solve(*args, alpha=alpha, normalization=norm, method=method, tol=tol)
        return
    sol = solve(*args, alpha=alpha, normalization=norm, method=method, tol=tol)
    assert sol.method == method
    assert sol.value.shape == (N, K) and sol.value.dtype == jnp.float64
    assert_solution_ok(sol, ops, prior, alpha, tol)
    its = np.asarray(sol.iterations)
    assert its.shape == (K,)
    if method == "dense":
        assert np.all(its == 0)
    elif method == "gmres":
        assert np.all(its == -1)
    else:
        assert np.all(its >= 1) and np.all(its <= 10_000)


@pytest.mark.parametrize("k,methods", [(2, ("dense",)), (17, ("dense", "bicgstab"))])
def test_other_class_counts(rng, k, methods):
    g = make_graph("directed")
    b0, h, prior = make_problem(rng, N, k)
    ops = ref_ops(g, b0, h, "sym")
    for method in methods:
        sol = solve(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=0.9, method=method, tol=1e-9)
        assert sol.value.shape == (N, k)
        assert_solution_ok(sol, ops, prior, 0.9, 1e-9)


@pytest.mark.parametrize("perm", [False, True])
def test_cg_with_zero_rows_and_zero_columns(rng, perm):
    """H = I or a permutation: G = b0 H vanishes where b0 does not (zero columns of A^F_k) and b0 vanishes
    on training nodes of other classes (zero rows): the elimination in the symmetrized CG must be exact."""
    g = make_graph("undirected")
    h = np.eye(K)[np.roll(np.arange(K), 1)] if perm else np.eye(K)
    b0, h, prior = make_problem(rng, N, K, h=h)
    ops = ref_ops(g, b0, h, "sym")
    if perm:
        gm = b0 @ h
        assert np.any((b0 > 0) & (gm == 0)) and np.any((b0 == 0) & (gm > 0))
    sol = solve(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=0.9, method="cg", tol=1e-9)
    assert_solution_ok(sol, ops, prior, 0.9, 1e-9)


def test_cg_rejected_for_directed_graph_and_row_normalization(rng):
    b0, h, prior = make_problem(rng, N, K)
    args = (jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior))
    gd = make_graph("directed")
    assert not gd.symmetric
    for norm in ("sym", "none", "row"):
        with pytest.raises(ValueError):
            solve(gd, *args, alpha=0.5, normalization=norm, method="cg")
    gu = make_graph("undirected")
    assert gu.symmetric
    with pytest.raises(ValueError):
        solve(gu, *args, alpha=0.5, normalization="row", method="cg")


def test_auto_returns_valid_method(rng):
    for kind, norm in CASES[:2] + CASES[3:4]:
        g = make_graph(kind)
        b0, h, prior = make_problem(rng, N, K)
        ops = ref_ops(g, b0, h, norm)
        alpha = pick_alpha(ops, norm)
        sol = solve(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=alpha, normalization=norm)
        assert sol.method in SOLVERS
        assert_solution_ok(sol, ops, prior, alpha, 1e-6)


def test_choose_method_is_the_benchmarked_rule():
    """The rule benchmarks/results/solvers.md measured best: Neumann iff alpha * rho_bound <= 0.4, else dense
    LU for n <= 300, else CG where valid (symmetric graph with sym/none), else BiCGStab."""
    from jaxclp.solve import DENSE_MAX_NODES, NEUMANN_MAX_CONTRACTION, choose_method

    assert NEUMANN_MAX_CONTRACTION == 0.4 and DENSE_MAX_NODES == 300
    ring = np.stack([np.arange(400), (np.arange(400) + 1) % 400])
    small = make_graph("undirected")
    big = Graph.from_edge_index(ring, 400)
    directed_big = Graph.from_edge_index(ring, 400, symmetrize=False)
    assert big.symmetric and not directed_big.symmetric
    assert choose_method(big, "sym", 0.4) == "neumann"
    assert choose_method(big, "row", 0.05) == "neumann"
    assert choose_method(small, "sym", 0.41) == "dense"
    assert choose_method(small, "sym", None) == "dense"  # no concrete bound (traced alpha)
    assert choose_method(big, "sym", 0.41) == "cg"
    assert choose_method(big, "none", 0.99) == "cg"
    assert choose_method(big, "row", 0.9) == "bicgstab"  # D^-1 A is not symmetrizable
    assert choose_method(directed_big, "sym", 0.9) == "bicgstab"


@pytest.mark.parametrize("method", ["neumann", "jacobi", "bicgstab"])
def test_residual_is_recomputed_from_value(rng, method):
    """With a one-iteration budget the answer is inaccurate: the reported residual must be the true
    residual of the returned value, and converged must be False."""
    g = make_graph("directed")
    b0, h, prior = make_problem(rng, N, K)
    ops = ref_ops(g, b0, h, "sym")
    alpha = 0.99
    with pytest.raises(ValueError, match=rf"did not converge: method '{method}'.*max_iters = 1"):
        solve(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=alpha, method=method,
              max_iters=1, tol=1e-12)
    sol = solve(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=alpha, method=method,
                max_iters=1, tol=1e-12, throw=False)
    res, rel = ref.residual(ops, prior, np.asarray(sol.value), alpha)
    assert np.all(rel > 1e-10)
    rhs_norm = np.linalg.norm((1 - alpha) * prior, axis=0)
    # (absolute slack: 1e-8 of ||rhs||, far below the residuals themselves)
    np.testing.assert_allclose(np.asarray(sol.residual), res, rtol=1e-4, atol=1e-8 * rhs_norm.max())
    np.testing.assert_allclose(np.asarray(sol.relative_residual), rel, rtol=1e-4, atol=1e-8)
    assert not np.any(np.asarray(sol.converged))
    # neumann/jacobi: one step applied + the product that measured the returned value's residual
    assert np.all(np.asarray(sol.iterations) == (2 if method in ("neumann", "jacobi") else 1))


@pytest.mark.cpu_bitwise
def test_converged_flag_is_relative_residual_below_tol_or_backward_error_at_roundoff(rng):
    """``converged = relative_residual <= tol | backward_error <= 4 eps``, with the backward error
    ``||r|| / (||M|| ||x|| + ||b||)`` and ``||M||`` the row/column-sum bound (checked against numpy). Dense LU
    in float64 is backward stable: below eps, so a tol no float64 residual meets still converges, while a
    100x larger floor than the backward error would be needed to pass a value that is far off."""
    from jaxclp.solve import precision_floor

    g = make_graph("directed")
    b0, h, prior = make_problem(rng, N, K)
    args = (g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior))
    ref_sol = solve(*args, alpha=0.8, method="dense")
    rel, eta = np.asarray(ref_sol.relative_residual), np.asarray(ref_sol.backward_error)
    assert np.all(rel > 0) and np.all(rel < 1e-10)
    ops = ref_ops(g, b0, h, "sym")
    m_norm = np.sqrt((1 + 0.8 * ops.sum(axis=2).max(axis=1)) * (1 + 0.8 * ops.sum(axis=1).max(axis=1)))
    x = np.asarray(ref_sol.value)
    want = np.asarray(ref_sol.residual) / (m_norm * np.linalg.norm(x, axis=0)
                                           + np.linalg.norm(0.2 * prior, axis=0))
    np.testing.assert_allclose(eta, want, rtol=1e-12)
    floor = precision_floor(np.float64)
    assert floor == 4 * np.finfo(np.float64).eps and np.all(eta <= floor)
    for tol in (0.5 * rel.max(), 0.999 * np.median(rel), 2.0 * rel.max(), 1e-30):
        sol = solve(*args, alpha=0.8, method="dense", tol=float(tol), throw=False)
        np.testing.assert_array_equal(np.asarray(sol.relative_residual), rel)
        np.testing.assert_array_equal(np.asarray(sol.converged), (rel <= tol) | (eta <= floor))
    # a value that is not a solution: one Neumann step from a 1e-12 target is far above the floor
    sol = solve(*args, alpha=0.8, method="neumann", tol=1e-12, max_iters=1, throw=False)
    assert np.all(np.asarray(sol.backward_error) > 100 * floor) and not np.any(np.asarray(sol.converged))


def test_jacobi_uses_the_diagonal():
    """A^F_k diagonal (a graph of self-loops only): Jacobi is exact after one step, Neumann is not."""
    n, k = 6, 2
    g = Graph.from_edge_index(np.stack([np.arange(n), np.arange(n)]), n, self_loops="keep")
    b0 = np.full((n, k), 0.5)
    h = np.full((k, k), 0.5)
    prior = np.linspace(0.1, 0.9, n * k).reshape(n, k)
    args = (g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior))
    ops = ref_ops(g, b0, h, "none")
    jac = solve(*args, alpha=0.9, normalization="none", method="jacobi", tol=1e-12)
    neu = solve(*args, alpha=0.9, normalization="none", method="neumann", tol=1e-12)
    for sol in (jac, neu):
        np.testing.assert_allclose(np.asarray(sol.value), ref.closed_form(ops, prior, 0.9), rtol=1e-10)
    assert np.all(np.asarray(jac.iterations) <= 2), np.asarray(jac.iterations)
    assert np.all(np.asarray(neu.iterations) > 5)


@pytest.mark.parametrize("method", ["dense", "neumann", "cg"])
def test_vector_of_alphas_equals_separate_solves(rng, method):
    g = make_graph("undirected")
    b0, h, prior = make_problem(rng, N, K)
    args = (g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior))
    alphas = np.array([0.3, 0.6, 0.9])
    sol = solve(*args, alpha=jnp.asarray(alphas), method=method, tol=1e-10)
    assert sol.value.shape == (3, N, K)
    for name in ("converged", "iterations", "residual", "relative_residual"):
        assert np.shape(getattr(sol, name)) == (3, K), name
    ops = ref_ops(g, b0, h, "sym")
    for i, a in enumerate(alphas):
        one = solve(*args, alpha=float(a), method=method, tol=1e-10)
        np.testing.assert_allclose(np.asarray(sol.value[i]), np.asarray(one.value), rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(np.asarray(sol.value[i]), ref.closed_form(ops, prior, a), rtol=1e-5,
                                   atol=1e-7)
        np.testing.assert_array_equal(np.asarray(sol.converged[i]), np.asarray(one.converged))
        np.testing.assert_allclose(np.asarray(sol.residual[i]), ref.residual(ops, prior, one.value, a)[0],
                                   atol=1e-6 * np.linalg.norm(prior, axis=0).max())
    assert np.asarray(sol.converged).all()


# Chunking the alphas is the solver's bookkeeping, the same whichever product kernel runs: the suite checks it once,
# the core tests' second run on XLA's own sparse path (JAXCLP_NO_FFI=1, .ci/run) leaves it out (~40 s there).
_SAME_ON_EITHER_KERNEL = pytest.mark.skipif(os.environ.get("JAXCLP_NO_FFI") == "1",
                                            reason="kernel-independent; run by the suite without JAXCLP_NO_FFI")


@_SAME_ON_EITHER_KERNEL
@pytest.mark.parametrize("method", ["neumann", "jacobi", "cg", "bicgstab",
                                    pytest.param("gmres", marks=pytest.mark.slow)])  # gmres: 20 s of compiling
def test_alphas_past_the_working_set_budget_are_solved_in_chunks(rng, monkeypatch, method):
    """Past SOLVE_CHUNK_BYTES the alphas are solved a few at a time (5 alphas, 2 per chunk: shapes 2, 2, 1):
    the same Solution as all at once, one method for all (the one "auto" picks for the largest alpha)."""
    import importlib

    S = importlib.import_module("jaxclp.solve")
    g = make_graph("undirected")
    b0, h, prior = make_problem(rng, N, K)
    args = (g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior))
    alphas = jnp.asarray([0.1, 0.3, 0.5, 0.7, 0.9])
    whole = solve(*args, alpha=alphas, method=method, tol=1e-10)
    calls = []
    real = S._solve_jit
    monkeypatch.setattr(S, "_solve_jit",
                        lambda op, p, a, *r: (calls.append(a.shape[0] if a.ndim else 0), real(op, p, a, *r))[1])
    per_alpha = S.WORKING_VECTORS[method] * N * K * 8
    monkeypatch.setattr(S, "SOLVE_CHUNK_BYTES", float("inf"))
    assert S.alpha_chunk(method, (N, K), jnp.float64) == 2**31
    assert S.alpha_chunk(method, (-(-S.SOLVE_CHUNK_MIN_SIZE // K), K), jnp.float64) == S.SOLVE_CHUNK_ALPHAS == 4
    assert S.alpha_chunk("iterate_l1", (-(-S.SOLVE_CHUNK_MIN_SIZE // K), K), jnp.float64) == 2**31  # no early exit
    monkeypatch.setattr(S, "SOLVE_CHUNK_BYTES", 2 * per_alpha + per_alpha // 2)
    assert S.alpha_chunk(method, (N, K), jnp.float64) == 2
    assert S.alpha_chunk(method, (N, K), jnp.float32) == 5  # half the bytes per alpha
    part = solve(*args, alpha=alphas, method=method, tol=1e-10)
    assert calls == [2, 2, 1]
    assert part.method == whole.method == method
    for name in ("value", "converged", "iterations", "residual", "relative_residual"):
        a, b = np.asarray(getattr(part, name)), np.asarray(getattr(whole, name))
        assert a.shape == b.shape, name
        if a.dtype == bool or name == "iterations":
            np.testing.assert_array_equal(a, b, err_msg=name)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-13, err_msg=name)
    ops = ref_ops(g, b0, h, "sym")
    for i, a in enumerate(np.asarray(alphas)):
        np.testing.assert_allclose(np.asarray(part.value[i]), ref.closed_form(ops, prior, a), rtol=1e-5, atol=1e-7)
    calls.clear()
    monkeypatch.setattr(S, "SOLVE_CHUNK_BYTES", float("inf"))  # a large graph: SOLVE_CHUNK_ALPHAS at a time
    monkeypatch.setattr(S, "SOLVE_CHUNK_MIN_SIZE", N * K)
    monkeypatch.setattr(S, "SOLVE_CHUNK_ALPHAS", 3)
    capped = solve(*args, alpha=alphas, method=method, tol=1e-10)
    assert calls == [3, 2]
    np.testing.assert_allclose(np.asarray(capped.value), np.asarray(whole.value), rtol=1e-9, atol=1e-13)
    monkeypatch.setattr(S, "SOLVE_CHUNK_MIN_SIZE", N * K + 1)  # below it: one vmapped solve
    calls.clear()
    solve(*args, alpha=alphas, method=method, tol=1e-10)
    assert calls == [5]
    calls.clear()
    monkeypatch.setattr(S, "SOLVE_CHUNK_BYTES", 0)  # at least one alpha per chunk; "auto" resolved once
    auto = solve(*args, alpha=alphas, method="auto", tol=1e-10)
    assert calls == [1] * 5 and auto.method == solve(*args, alpha=0.9, method="auto", tol=1e-10).method

    def loss(p, a):
        return jnp.sum(solve(args[0], args[1], args[2], p, alpha=a, method=method, tol=1e-10).value ** 2)

    monkeypatch.setattr(S, "SOLVE_CHUNK_BYTES", 2 * per_alpha + per_alpha // 2)
    gp, ga = jax.grad(loss, argnums=(0, 1))(args[3], alphas)
    monkeypatch.setattr(S, "SOLVE_CHUNK_BYTES", 1 << 40)
    wp, wa = jax.grad(loss, argnums=(0, 1))(args[3], alphas)
    np.testing.assert_allclose(np.asarray(gp), np.asarray(wp), rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(np.asarray(ga), np.asarray(wa), rtol=1e-7, atol=1e-12)


@_SAME_ON_EITHER_KERNEL
@pytest.mark.parametrize("variant", ["l1", "scaled", "paper"])
def test_clp_beliefs_past_the_budget_equal_all_alphas_at_once(monkeypatch, variant):
    """clp_beliefs' alpha grid past SOLVE_CHUNK_BYTES (budget 0: one alpha at a time): the per-step L1 iteration,
    the spectrally scaled and the paper's closed form give the beliefs of all alphas at once (400 nodes: an
    iterative method, not "dense")."""
    import importlib

    import jaxclp
    from jaxclp import clp as C

    S = importlib.import_module("jaxclp.solve")
    ds = jaxclp.datasets.synthetic(0.3, avg_degree=6, num_classes=4, nodes_per_class=100, seed=1, features=None)
    rng = np.random.default_rng(5)
    n, k = ds.num_nodes, 4
    tm = rng.random(n) < 0.3
    prior = jnp.asarray(rng.dirichlet(np.ones(k), n))
    y = jnp.asarray(np.where(tm, np.asarray(ds.labels), -1))
    kw = {"l1": {"l1_normalize": True}, "scaled": {"spectral_scale": True, "alphas": (0.5, 0.9, 0.95, 0.99)},
          "paper": {"normalization": "row"}}[variant]
    whole = jaxclp.clp_beliefs(ds.graph, prior, y, jnp.asarray(tm), spectrum=False, **kw)
    traced = []
    real = C._iterate_jit
    monkeypatch.setattr(C, "_iterate_jit", lambda *a, **k_: (traced.append(1), real(*a, **k_))[1])
    monkeypatch.setattr(S, "SOLVE_CHUNK_BYTES", 0)
    part = jaxclp.clp_beliefs(ds.graph, prior, y, jnp.asarray(tm), spectrum=False, **kw)
    assert part.method == whole.method and (variant == "l1" or whole.method != "dense"), whole.method
    assert len(traced) == (len(whole.alphas) if variant == "l1" else 0)
    np.testing.assert_array_equal(np.asarray(part.valid), np.asarray(whole.valid))
    np.testing.assert_allclose(np.asarray(part.beliefs), np.asarray(whole.beliefs), rtol=1e-9, atol=1e-12)
    assert np.abs(np.asarray(whole.beliefs)).max() > 0


@pytest.mark.parametrize("bad", ["method", "alpha_2d", "alpha_vec_out", "alpha_one", "prior_shape",
                                 "h_shape", "prior_nan", "b0_negative", "normalization"])
def test_solve_rejects_bad_input(rng, bad):
    g = make_graph("undirected")
    b0, h, prior = make_problem(rng, N, K)
    kw = dict(alpha=0.5)
    if bad == "method":
        kw["method"] = "lu"
    elif bad == "alpha_2d":
        kw["alpha"] = jnp.full((2, 2), 0.5)
    elif bad == "alpha_vec_out":
        kw["alpha"] = jnp.asarray([0.5, 1.2])
    elif bad == "alpha_one":
        kw["alpha"] = 1.0
    elif bad == "prior_shape":
        prior = prior[:, :-1]
    elif bad == "h_shape":
        h = h[:-1]
    elif bad == "prior_nan":
        prior[0, 0] = np.nan
    elif bad == "b0_negative":
        b0[0, 0] = -1.0
    elif bad == "normalization":
        kw["normalization"] = "left"
    with pytest.raises(ValueError):
        solve(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), **kw)


def test_solve_second_call_does_not_recompile(rng, compile_counter):
    g = make_graph("directed")
    p1 = tuple(map(jnp.asarray, make_problem(rng, N, K)))
    p2 = tuple(map(jnp.asarray, make_problem(rng, N, K)))
    for method in ("dense", "bicgstab"):
        jax.block_until_ready(solve(g, *p1, alpha=0.5, method=method).value)
        with compile_counter() as cc:
            jax.block_until_ready(solve(g, *p2, alpha=0.7, method=method, tol=1e-8).value)
        assert cc.count == 0, f"{method}: {cc.count} recompilation(s)"


# ------------------------------------------------------------------------------------ property test
HN, HK, HPAIRS = 8, 3, 8  # fixed shapes (n, K, m = 2 * HPAIRS): one compilation for all examples
ALL_PAIRS = [(i, j) for i in range(HN) for j in range(HN)]


@st.composite
def small_problems(draw):
    directed = draw(st.booleans())
    if directed:  # 2*HPAIRS distinct directed pairs (self-loops allowed)
        pairs = draw(st.lists(st.sampled_from(ALL_PAIRS), min_size=2 * HPAIRS, max_size=2 * HPAIRS,
                              unique=True))
    else:  # HPAIRS distinct unordered pairs, symmetrized
        pairs = draw(st.lists(st.sampled_from([p for p in ALL_PAIRS if p[0] <= p[1]]), min_size=HPAIRS,
                              max_size=HPAIRS, unique=True))
    weights = draw(st.lists(st.integers(1, 8), min_size=len(pairs), max_size=len(pairs)))
    prior = np.array(draw(st.lists(st.lists(st.floats(0.01, 1.0), min_size=HK, max_size=HK),
                                   min_size=HN, max_size=HN)))
    labels = np.array(draw(st.lists(st.integers(0, HK - 1), min_size=HN, max_size=HN)), np.int32)
    mask = np.array(draw(st.lists(st.booleans(), min_size=HN, max_size=HN)))
    hraw = np.array(draw(st.lists(st.lists(st.floats(0.05, 1.0), min_size=HK, max_size=HK),
                                  min_size=HK, max_size=HK)))
    norm = draw(st.sampled_from(["sym", "row", "none"]))
    a0 = draw(st.floats(0.05, 0.95))
    return directed, pairs, np.array(weights) / 2.0, prior, labels, mask, hraw, norm, a0


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(small_problems())
def test_property_closed_form_is_fixed_point(problem):
    directed, pairs, w, prior, labels, mask, hraw, norm, a0 = problem
    ei = np.array(pairs, dtype=np.int64).T
    g = Graph.from_edge_index(ei, HN, weights=w, symmetrize=not directed, deduplicate=False, self_loops="keep")
    assert g.num_edges == 2 * HPAIRS
    prior = prior / prior.sum(axis=1, keepdims=True)
    b0 = ref.initial_beliefs(prior, labels, mask)
    h = ref.sinkhorn(hraw)
    ops = ref_ops(g, b0, h, norm)
    rho = ref.spectral_radii(ops).max()
    alpha = a0 / max(1.0, rho)  # alpha * rho < 1 always
    sol = solve(g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior), alpha=alpha, normalization=norm,
                method="dense")
    x = np.asarray(sol.value)
    # fixed point of the iteration: B = (1 - a) D + a A^F_k B for every class
    fixed = np.stack([(1 - alpha) * prior[:, c] + alpha * ops[c] @ x[:, c] for c in range(HK)], axis=1)
    np.testing.assert_allclose(x, fixed, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(x, ref.closed_form(ops, prior, alpha), rtol=1e-6, atol=1e-9)
    assert np.asarray(sol.converged).all()


# ------------------------------------------------------------------------------------ throw
@pytest.mark.parametrize("method", ["dense", "bicgstab"])
def test_divergent_alpha_raises_naming_class_rho_and_inverse(rng, method):
    """alpha * rho >= 1 ("none" normalization): the linear system is still solvable (dense LU, BiCGStab
    report converged=True), but the propagation it stands for diverges, so the value is not CLP's fixed
    point. ``solve`` raises by default (like ``propagate``) naming the class, rho and 1/rho; ``throw=False``
    returns the value with the diagnostics as before."""
    n = 24  # complete graph, raw 0/1 adjacency: rho(A^F_k) of order n * b0 * G, well above 1
    g = Graph.from_edge_index(np.array([(i, j) for i in range(n) for j in range(i)]).T, n)
    b0, h, prior = make_problem(rng, n, K)
    ops = ref_ops(g, b0, h, "none")
    rho = ref.spectral_radii(ops)  # numpy eigenvalues
    alpha = 1.2 / rho.max()
    assert alpha * rho.max() >= 1.0 and alpha < 1.0
    args = (g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior))
    with pytest.raises(ValueError, match=r"alpha \* rho >= 1 for class \d+: spectral radius rho") as e:
        solve(*args, alpha=alpha, normalization="none", method=method)
    msg = str(e.value)
    cls, r, inv = re.search(r"class (\d+): spectral radius rho = ([\d.e+-]+).*1/rho = ([\d.e+-]+)", msg).groups()
    bad = np.flatnonzero(alpha * rho >= 1.0)
    assert int(cls) == bad[0]
    np.testing.assert_allclose(float(r), rho[int(cls)], rtol=1e-4)
    np.testing.assert_allclose(float(inv), 1.0 / rho[int(cls)], rtol=1e-4)
    sol = solve(*args, alpha=alpha, normalization="none", method=method, throw=False)
    if method == "dense":  # the solvable linear system, not the fixed point of a convergent propagation
        assert np.asarray(sol.converged).all()
        np.testing.assert_allclose(np.asarray(sol.value), ref.closed_form(ops, prior, alpha), rtol=1e-6,
                                   atol=1e-9)


def test_throw_default_does_not_raise_where_the_bound_proves_convergence(rng):
    """sym/row: rho <= 1 a priori, so any alpha < 1 is accepted without a power iteration, and a converged
    solve returns normally under the default throw=True."""
    g = make_graph("directed")
    b0, h, prior = make_problem(rng, N, K)
    args = (g, jnp.asarray(b0), jnp.asarray(h), jnp.asarray(prior))
    for norm in ("sym", "row"):
        sol = solve(*args, alpha=0.99, normalization=norm, method="dense")
        assert np.asarray(sol.converged).all()
    # a vector of alphas: non-convergence names the alpha
    with pytest.raises(ValueError, match=r"did not converge.*alpha = 0\.9, class"):
        solve(*args, alpha=jnp.asarray([0.1, 0.9]), method="neumann", max_iters=2, tol=1e-5)
    sol = solve(*args, alpha=jnp.asarray([0.1, 0.9]), method="neumann", max_iters=2, tol=1e-5, throw=False)
    conv = np.asarray(sol.converged)
    assert conv[0].all() and not conv[1].any()


@pytest.mark.parametrize("method", ["neumann", "jacobi", "bicgstab"])
def test_stationary_solves_make_no_separate_residual_product(rng, method):
    """neumann/jacobi take the returned value's residual from the loop's last product: the traced solve has
    ONE operator product (the loop body; no residual product after it), and the residual is still exactly the
    value's. bicgstab still recomputes it (one product after its loop)."""
    import jaxclp.operator as operator_module
    from jaxclp.operator import clp_operator
    from jaxclp.solve import _solve_kernel

    g = make_graph("directed")
    b0, h, prior = make_problem(rng, N, K)
    op = clp_operator(g, jnp.asarray(b0), jnp.asarray(h))
    calls = []
    orig = operator_module.FactoredOperator.matvec
    operator_module.FactoredOperator.matvec = lambda self, x: calls.append(1) or orig(self, x)
    try:  # un-jitted: every product in the program is traced exactly once
        x, its, res, rel, _ = _solve_kernel(op, jnp.asarray(prior), jnp.asarray(0.9), method, 1e-10, 10_000)
    finally:
        operator_module.FactoredOperator.matvec = orig
    assert len(calls) == (1 if method != "bicgstab" else 3), len(calls)  # bicgstab: 2 per step + residual
    ops = ref_ops(g, b0, h, "sym")
    want, want_rel = ref.residual(ops, prior, np.asarray(x), 0.9)
    np.testing.assert_allclose(np.asarray(res), want, rtol=1e-6, atol=1e-14)
    assert np.all(want_rel <= 1e-10) and np.all(np.asarray(rel) <= 1e-10)


# ------------------------------------------------------------ float32: converged where the precision allows
PRECISION_ALPHAS = (0.9, 0.99, 0.999)


@functools.lru_cache(maxsize=None)
def knn_problem(n, k=4, confidence=8.0):
    """A slowly mixing graph with confident priors and a near-identity H: the CLP operators have spectral
    radius near 1, so ``I - alpha A^F_k`` is ill-conditioned near alpha = 1 (float32).

    Symmetrized 5-nearest-neighbour graph of n random points in the unit square, labels = quadrant, prior
    softmax(confidence * one_hot + N(0, 1)), H = 0.97 I + 0.03 / k. Returns ``(graph, prior, H, a)`` with
    the float64 prior and H and the raw adjacency ``A[r, s]`` as a float64 scipy CSR (from the edges)."""
    import scipy.sparse as sp
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(7)
    pts = rng.random((n, 2))
    lab = (pts[:, 0] > 0.5).astype(int) * 2 + (pts[:, 1] > 0.5)
    _, nb = cKDTree(pts).query(pts, 6)
    s, r = np.repeat(np.arange(n), 5), nb[:, 1:].reshape(-1)
    g = Graph.from_edge_index(np.stack([s, r]), n)  # symmetrized, deduplicated
    a = sp.csr_matrix((np.asarray(g.weights, np.float64), (np.asarray(g.receivers), np.asarray(g.senders))),
                      shape=(n, n))
    logits = confidence * np.eye(k)[lab] + rng.normal(size=(n, k))
    prior = np.exp(logits - logits.max(axis=1, keepdims=True))
    prior /= prior.sum(axis=1, keepdims=True)
    return g, prior, 0.97 * np.eye(k) + 0.03 / k, a


def sparse_residual(a, normalization, b0, h, prior, x, alpha):
    """(K,) float64 residual norms of the CLP systems for a value x (scipy; ``a`` the raw adjacency, degrees
    without zeros)."""
    import scipy.sparse as sp

    d_in, d_out = np.asarray(a.sum(axis=1)).ravel(), np.asarray(a.sum(axis=0)).ravel()
    ahat = (sp.diags(1 / np.sqrt(d_in)) @ a @ sp.diags(1 / np.sqrt(d_out)) if normalization == "sym"
            else sp.diags(1 / d_in) @ a)
    x = np.asarray(x, np.float64)
    ax = b0 * (ahat @ ((b0 @ h) * x))
    return np.linalg.norm((1 - alpha) * prior - (x - alpha * ax), axis=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("method", SOLVERS)
def test_every_method_converges_to_what_its_precision_allows(method, dtype):
    """alpha 0.9 / 0.99 / 0.999 in float32 and float64, every method, against numpy's dense solve.

    The value must be converged (``converged`` all True at the default tol), its reported residual must be the
    true one (float64 residual of the returned value, up to the rounding of computing it in ``dtype``), and its
    error is then bounded by the conditioning: ``||x - x*|| <= ||M^-1||_2 ||r||`` with ``||r|| <= max(tol ||b||,
    4 eps (||M|| ||x|| + ||b||))`` (the convergence test) plus that rounding."""
    from jaxclp.solve import BACKWARD_ERROR_ULPS

    g, prior, h, a_raw = knn_problem(64)
    n, k = prior.shape
    ops = ref.clp_operators(ref.normalize(a_raw.toarray(), "sym"), prior, h)
    alphas = np.array(PRECISION_ALPHAS)
    sol = solve(g, jnp.asarray(prior, dtype), jnp.asarray(h, dtype), jnp.asarray(prior, dtype),
                alpha=jnp.asarray(alphas, dtype), method=method)  # throw=True: raises unless all converged
    assert np.asarray(sol.converged).all() and sol.value.dtype == dtype
    eps = float(np.finfo(dtype).eps)
    for i, a in enumerate(alphas):
        x = np.asarray(sol.value[i], np.float64)
        for c in range(k):
            m = np.eye(n) - a * ops[c]
            b = (1 - a) * prior[:, c]
            want = np.linalg.solve(m, b)
            r_true = np.linalg.norm(b - m @ x[:, c])
            m_norm = np.sqrt((1 + a * ops[c].sum(1).max()) * (1 + a * ops[c].sum(0).max()))
            scale = m_norm * np.linalg.norm(x[:, c]) + np.linalg.norm(b)
            rounding = 16 * eps * scale  # computing the residual in dtype (a handful of terms per row)
            assert abs(float(sol.residual[i, c]) - r_true) <= rounding, (a, c, float(sol.residual[i, c]), r_true)
            assert r_true <= max(1e-6 * np.linalg.norm(b), BACKWARD_ERROR_ULPS * eps * scale) + rounding
            inv_norm = 1.0 / np.linalg.svd(m, compute_uv=False).min()
            bound = inv_norm * (max(1e-6 * np.linalg.norm(b), BACKWARD_ERROR_ULPS * eps * scale) + rounding)
            err = np.linalg.norm(x[:, c] - want)
            assert err <= bound, (a, c, err, bound)
    if dtype == np.float64:  # float64: the floor (~1e-15) never decides, tol does
        np.testing.assert_array_equal(np.asarray(sol.converged), np.asarray(sol.relative_residual) <= 1e-6)


@pytest.mark.parametrize("normalization,method,alpha", [("sym", "cg", 0.99), ("row", "bicgstab", 0.9),
                                                        ("row", "bicgstab", 0.99)])
def test_float32_default_solve_converges_where_relative_residual_cannot(normalization, method, alpha):
    """A failure users met: ``jaxclp.solve(graph, B0, H, prior, alpha=0.99)`` in float32 raised "did not
    converge: method 'cg' reached relative residual 7.49e-06 > tol = 1e-06" (BiCGStab: converged=False).

    On a 3000-node graph the float32 solves end with relative residuals above 1e-6 (checked: the old criterion
    fails here) but backward errors within a few eps: the default call (``method="auto"``, ``throw=True``) now
    returns, reports the true residual, and the value matches the float64 solve to the accuracy the
    conditioning allows."""
    from jaxclp.solve import precision_floor

    g, prior, h, a_raw = knn_problem(3000)
    args = (g, jnp.asarray(prior, jnp.float32), jnp.asarray(h, jnp.float32), jnp.asarray(prior, jnp.float32))
    sol = solve(*args, alpha=alpha, normalization=normalization)
    assert sol.method == method and sol.value.dtype == jnp.float32
    assert np.asarray(sol.converged).all()
    rel = np.asarray(sol.relative_residual)
    assert rel.max() > 1e-6, rel  # the old criterion (relative residual <= tol) fails on this problem
    assert np.asarray(sol.backward_error).max() <= precision_floor(np.float32)
    true = sparse_residual(a_raw, normalization, prior, h, prior, sol.value, alpha)  # the value's own residual
    b = np.linalg.norm((1 - alpha) * prior, axis=0)
    np.testing.assert_allclose(np.asarray(sol.residual), true, rtol=0, atol=1e-6 * b.max())
    ref64 = solve(*(jnp.asarray(v, jnp.float64) if i else v for i, v in enumerate(args)), alpha=alpha,
                  normalization=normalization, tol=1e-12)
    err = np.linalg.norm(np.asarray(sol.value, np.float64) - np.asarray(ref64.value), axis=0)
    # ||x - x*|| <= ||M^-1|| ||r||, ||M^-1||_2 <= 1 / (1 - alpha rho) <= 1 / (1 - alpha) for "sym" (rho <= 1);
    # for "row" the 2-norm is not bounded by rho: allow a factor 10 on the same estimate
    factor = 1.0 if normalization == "sym" else 10.0
    assert np.all(err <= factor * np.asarray(sol.residual) / (1 - alpha) + 1e-12), (err, np.asarray(sol.residual))


@pytest.mark.parametrize("method", ["neumann", "jacobi"])
def test_stationary_methods_stop_at_the_precision_floor(method):
    """tol = 1e-10 is out of float32's reach at alpha = 0.99: the stationary iteration stops once its exact
    residual is below the floor (4 eps (||M|| ||x|| + ||b||)) and stalls, with that residual reported, instead
    of running on rounding noise (the old loop ran until the rounded map's fixed point, ~40% more products here,
    and reported a residual of exactly 0). In float64 the floor never decides: tol is met."""
    from jaxclp.solve import precision_floor

    g, prior, h, a_raw = knn_problem(64)
    ops = ref.clp_operators(ref.normalize(a_raw.toarray(), "sym"), prior, h)
    f32 = [jnp.asarray(v, jnp.float32) for v in (prior, h, prior)]
    sol = solve(g, *f32, alpha=0.99, method=method, tol=1e-10)  # throw=True: converged
    assert np.all(np.asarray(sol.iterations) < 200)
    assert np.all(np.asarray(sol.relative_residual) > 1e-10)  # tol itself is not met ...
    assert np.all(np.asarray(sol.backward_error) <= precision_floor(np.float32))  # ... the floor is
    true, _ = ref.residual(ops, prior, np.asarray(sol.value, np.float64), 0.99)
    b = np.linalg.norm(0.01 * prior, axis=0)
    np.testing.assert_allclose(np.asarray(sol.residual), true, rtol=0, atol=1e-6 * b.max())
    assert np.all(true > 0)
    sol64 = solve(g, jnp.asarray(prior), jnp.asarray(h), jnp.asarray(prior), alpha=0.99, method=method, tol=1e-10)
    assert np.all(np.asarray(sol64.relative_residual) <= 1e-10)
