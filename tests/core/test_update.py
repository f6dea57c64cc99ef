"""Warm updates (jaxclp.update, the solvers' x0): equal to a cold solve and to a dense numpy reference."""

import functools

import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
from jaxclp import Graph, estimate_compatibility, solve
from jaxclp.solve import SOLVERS
from jaxclp.update import update_beliefs

N, K, ALPHA = 50, 3, 0.8


@functools.lru_cache(maxsize=None)
def problem(kind="undirected_loops"):
    """A graph, a prior, labels, the fitted train mask, the fitted H, and the new mask (3 labels added)."""
    ei, kw = ref.graph_spec(kind, seed=7, n=N)
    g = Graph.from_edge_index(ei, N, **kw)
    rng = np.random.default_rng(3)
    prior, labels, mask = ref.random_problem(rng, N, K)
    h, _ = estimate_compatibility(g, prior, labels, mask)
    new = mask.copy()
    new[np.flatnonzero(~mask)[[0, 4, 9]]] = True
    return g, prior, labels, mask, np.asarray(h), new


def dense_closed_form(g, prior, labels, mask, h, alpha, norm="sym", prior_source="mlp"):
    """(n, K) ``(1 - a)(I - a A^F_k)^{-1} D_k`` from numpy, with B0 and F built from ``mask``."""
    b0 = ref.initial_beliefs(prior, labels, mask)
    ops = ref.clp_operators(ref.normalize(ref.graph_dense(g), norm), b0, h)
    return ref.closed_form(ops, prior if prior_source == "mlp" else b0, alpha)


@pytest.mark.parametrize("method", SOLVERS)
def test_warm_update_equals_cold_and_dense(method):
    g, prior, labels, mask, h, new = problem()
    before = solve(g, ref.initial_beliefs(prior, labels, mask), h, prior, alpha=ALPHA, method=method, tol=1e-10)
    res = update_beliefs(g, prior, labels, new, h, ALPHA, before.value, method=method, tol=1e-10, cold=True)
    dense = dense_closed_form(g, prior, labels, new, h, ALPHA)
    assert res.method == method and res.warm.method == method and res.cold.method == method
    np.testing.assert_allclose(np.asarray(res.beliefs), dense, atol=1e-9)
    np.testing.assert_allclose(np.asarray(res.cold.value), dense, atol=1e-9)
    np.testing.assert_allclose(np.asarray(res.beliefs), np.asarray(res.cold.value), atol=1e-9)
    # the cold solve of update_beliefs is jaxclp.solve's, bit for bit (the default start is unchanged)
    plain = solve(g, ref.initial_beliefs(prior, labels, new), h, prior, alpha=ALPHA, method=method, tol=1e-10)
    np.testing.assert_array_equal(np.asarray(res.cold.value), np.asarray(plain.value))
    np.testing.assert_array_equal(np.asarray(res.cold.iterations), np.asarray(plain.iterations))
    assert bool(np.all(res.warm.converged)) and np.asarray(res.warm.relative_residual).max() <= 1e-10
    warm, cold = res.iterations
    if method in ("cg", "bicgstab", "jacobi", "neumann"):  # 3 of 50 labels changed: fewer steps from the old value
        assert warm.sum() < cold.sum(), (warm, cold)
    elif method == "dense":
        assert warm.tolist() == cold.tolist() == [0] * K


@pytest.mark.parametrize("method", SOLVERS)
def test_start_at_the_solution_stops_at_once(method):
    # x0 = the dense solution: the Krylov methods make no step, the stationary ones one measuring product
    g, prior, labels, mask, h, _ = problem()
    b0 = ref.initial_beliefs(prior, labels, mask)
    exact = dense_closed_form(g, prior, labels, mask, h, ALPHA)
    sol = solve(g, b0, h, prior, alpha=ALPHA, method=method, tol=1e-10, x0=exact)
    np.testing.assert_allclose(np.asarray(sol.value), exact, atol=1e-12)
    expected = {"dense": 0, "cg": 0, "bicgstab": 0, "gmres": -1, "jacobi": 1, "neumann": 1}[method]
    assert np.asarray(sol.iterations).tolist() == [expected] * K


def test_a_vector_of_alphas_and_the_shape_check():
    g, prior, labels, mask, h, _ = problem()
    b0 = ref.initial_beliefs(prior, labels, mask)
    alphas = np.array([0.5, 0.8])
    exact = np.stack([dense_closed_form(g, prior, labels, mask, h, a) for a in alphas])
    sol = solve(g, b0, h, prior, alpha=alphas, method="bicgstab", tol=1e-10, x0=exact)
    np.testing.assert_allclose(np.asarray(sol.value), exact, atol=1e-12)
    assert np.asarray(sol.iterations).max() == 0
    with pytest.raises(ValueError, match=r"x0 must have the value's shape \(2, 50, 3\)"):
        solve(g, b0, h, prior, alpha=alphas, x0=exact[0])


@pytest.mark.parametrize("kind", ["undirected_loops", "directed"])
@pytest.mark.parametrize("options", [dict(normalization="row", prior_source="b0"), dict(normalization="none"),
                                     dict(prior_source="b0")])
def test_variants_equal_dense(kind, options):
    g, prior, labels, mask, h, new = problem(kind)
    norm, source = options.get("normalization", "sym"), options.get("prior_source", "mlp")
    alpha = 0.5
    if norm == "none":  # unnormalized: half of 1 / rho of the new operators (numpy's eigenvalues)
        b0 = ref.initial_beliefs(prior, labels, new)
        alpha = 0.5 / ref.spectral_radii(ref.clp_operators(ref.graph_dense(g), b0, h)).max()
    before = dense_closed_form(g, prior, labels, mask, h, alpha, norm, source)
    res = update_beliefs(g, prior, labels, new, h, alpha, before, method="bicgstab", tol=1e-11, **options)
    dense = dense_closed_form(g, prior, labels, new, h, alpha, norm, source)
    np.testing.assert_allclose(np.asarray(res.beliefs), dense, atol=1e-9)
    assert res.sinkhorn is None and np.array_equal(np.asarray(res.H), h)


def test_reestimate_compatibility_and_spectral_scale():
    g, prior, labels, mask, h, new = problem()
    res = update_beliefs(g, prior, labels, new, h, ALPHA, prior, reestimate_compatibility=True, method="cg",
                         tol=1e-11)
    h_new, _ = estimate_compatibility(g, prior, labels, new)
    np.testing.assert_allclose(np.asarray(res.H), np.asarray(h_new), atol=1e-12)
    assert res.sinkhorn is not None
    np.testing.assert_allclose(np.asarray(res.beliefs), dense_closed_form(g, prior, labels, new, np.asarray(h_new),
                                                                          ALPHA), atol=1e-9)
    # spectral scaling: the new operators divided by their own spectral radii (numpy's eigenvalues)
    b0 = ref.initial_beliefs(prior, labels, new)
    ops = ref.clp_operators(ref.normalize(ref.graph_dense(g), "sym"), b0, h)
    rho = ref.spectral_radii(ops)
    scaled = ref.closed_form(ops / rho[:, None, None], prior, 0.9)
    res = update_beliefs(g, prior, labels, new, h, 0.9, prior, spectral_scale=True, method="bicgstab", tol=1e-11)
    np.testing.assert_allclose(np.asarray(res.beliefs), scaled, atol=1e-6)  # the power iteration's rho: 1e-10


def test_float32_and_bad_input():
    g, prior, labels, mask, h, new = problem()
    p32 = jnp.asarray(prior, jnp.float32)
    res = update_beliefs(g, p32, labels, new, jnp.asarray(h, jnp.float32), ALPHA, p32, method="neumann")
    assert res.beliefs.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(res.beliefs), dense_closed_form(g, prior, labels, new, h, ALPHA),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="alpha must lie in"):
        update_beliefs(g, prior, labels, new, h, 1.0, prior)
    with pytest.raises(ValueError, match="previous"):
        update_beliefs(g, prior, labels, new, h, ALPHA, prior[:10])
    with pytest.raises(ValueError, match="train_mask"):
        update_beliefs(g, prior, labels, np.zeros(N, bool), h, ALPHA, prior)
    with pytest.raises(ValueError, match="alpha \\* rho >= 1"):  # "none": the unnormalized operators diverge
        update_beliefs(g, prior, labels, new, h, 0.99, prior, normalization="none")
