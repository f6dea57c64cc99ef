"""Exact explanations of CLP's closed form (jaxclp.explain) vs the dense numpy inverse."""

import functools

import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
from jaxclp import Graph, clp_beliefs, estimate_compatibility
from jaxclp.explain import explain, hops, top_sources

N, K = 40, 3
NODES = [0, 5, 17, 33]


@functools.lru_cache(maxsize=None)
def graph(kind):
    ei, kw = ref.graph_spec({"undirected": "undirected_loops", "directed": "directed"}[kind], seed=7, n=N)
    return Graph.from_edge_index(ei, N, **kw)


@functools.lru_cache(maxsize=None)
def problem(kind):
    rng = np.random.default_rng(3)
    prior, labels, mask = ref.random_problem(rng, N, K)
    g = graph(kind)
    h, _ = estimate_compatibility(g, prior, labels, mask)
    return g, prior, labels, mask, np.asarray(h)


def dense_terms(g, prior, labels, mask, h, alpha, norm, prior_source, nodes):
    """(Q, n, K) ``(1 - a) [(I - a A^F_k)^{-1}]_{ij} D_jk`` from a dense numpy inverse of the same operators."""
    b0 = ref.initial_beliefs(prior, labels, mask)
    ops = ref.clp_operators(ref.normalize(ref.graph_dense(g), norm), b0, h)
    d = prior if prior_source == "mlp" else b0
    inv = np.stack([np.linalg.inv(np.eye(N) - alpha * ops[k]) for k in range(K)])  # (K, n, n)
    return (1 - alpha) * np.transpose(inv[:, nodes, :], (1, 2, 0)) * d[None], ref.closed_form(ops, d, alpha)


@pytest.mark.parametrize("kind", ["undirected", "directed"])
@pytest.mark.parametrize("norm", ["sym", "row", "none"])
@pytest.mark.parametrize("prior_source", ["mlp", "b0"])
def test_complete_and_equal_to_dense_inverse(kind, norm, prior_source):
    g, prior, labels, mask, h = problem(kind)
    alpha = 0.8 if norm != "none" else 0.5 / max(ref.spectral_radii(ref.clp_operators(
        ref.normalize(ref.graph_dense(g), norm), ref.initial_beliefs(prior, labels, mask), h)).max(), 1e-3)
    alpha = min(alpha, 0.9)
    ex = explain(g, prior, labels, mask, h, alpha, NODES, normalization=norm, prior_source=prior_source,
                 method="bicgstab", tol=1e-10)
    terms, closed = dense_terms(g, prior, labels, mask, h, alpha, norm, prior_source, NODES)
    c = np.asarray(ex.contributions)
    assert c.shape == (len(NODES), N, K)
    np.testing.assert_allclose(c, terms, atol=1e-9)
    assert c.min() >= -1e-12  # every term is nonnegative
    # completeness: the terms sum to the closed form's score
    np.testing.assert_allclose(np.asarray(ex.scores), closed[NODES], atol=1e-9)
    np.testing.assert_allclose(c.sum(axis=1), np.asarray(ex.scores), atol=1e-9)
    np.testing.assert_allclose(np.asarray(ex.labelled_term + ex.prior_term), np.asarray(ex.scores), atol=1e-9)
    np.testing.assert_allclose(np.asarray(ex.labelled_term), terms[:, mask].sum(axis=1), atol=1e-9)
    assert np.asarray(ex.completeness).max() < 1e-9 and bool(np.all(ex.converged))
    if prior_source == "b0":  # labelled rows of D are one-hot labels: a labelled node adds to its own class only
        own = np.eye(K, dtype=bool)[labels[mask]]
        assert np.abs(c[:, mask][:, ~own]).max() == 0.0


@pytest.mark.parametrize("method", ["auto", "dense", "neumann", "jacobi", "bicgstab", "gmres", "cg"])
def test_every_method_is_complete(method):
    g, prior, labels, mask, h = problem("undirected")
    ex = explain(g, prior, labels, mask, h, 0.7, NODES, method=method, tol=1e-9)
    terms, closed = dense_terms(g, prior, labels, mask, h, 0.7, "sym", "mlp", NODES)
    np.testing.assert_allclose(np.asarray(ex.contributions), terms, atol=1e-7)
    np.testing.assert_allclose(np.asarray(ex.contributions).sum(axis=1), np.asarray(ex.scores), atol=1e-7)
    assert ex.method != "auto"


def test_matches_clp_beliefs_and_is_deterministic():
    g, prior, labels, mask, h = problem("undirected")
    res = clp_beliefs(g, prior, labels, mask, alphas=(0.9,), spectral_scale=True, prior_source="b0")
    ex1 = explain(g, prior, labels, mask, res.H, 0.9, NODES, spectral_scale=True, prior_source="b0")
    ex2 = explain(g, prior, labels, mask, res.H, 0.9, NODES, spectral_scale=True, prior_source="b0")
    np.testing.assert_allclose(np.asarray(ex1.scores), np.asarray(res.beliefs[0])[NODES], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(ex1.contributions).sum(axis=1), np.asarray(ex1.scores), rtol=1e-5)
    for a, b in zip(ex1, ex2):  # two calls: identical results
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_alpha_zero_is_the_start_alone():
    g, prior, labels, mask, h = problem("undirected")
    ex = explain(g, prior, labels, mask, h, 0.0, [1, 2])
    np.testing.assert_allclose(np.asarray(ex.scores), prior[[1, 2]])
    c = np.asarray(ex.contributions)
    assert c[0, 1].sum() == pytest.approx(1.0) and np.abs(c).sum() == pytest.approx(2.0)
    assert ex.method == "identity"


def test_float32_completeness_and_a_batch_one_query():
    g, prior, labels, mask, h = problem("directed")
    ex = explain(g, jnp.asarray(prior, jnp.float32), labels, mask, jnp.asarray(h, jnp.float32), 0.6, 9,
                 normalization="row")
    assert ex.contributions.dtype == jnp.float32 and ex.contributions.shape == (1, N, K)
    np.testing.assert_allclose(np.asarray(ex.contributions).sum(axis=1), np.asarray(ex.scores), rtol=1e-5,
                               atol=1e-6)


def test_bad_input():
    g, prior, labels, mask, h = problem("undirected")
    with pytest.raises(ValueError, match="nodes must be node indices in"):
        explain(g, prior, labels, mask, h, 0.5, [N])
    with pytest.raises(ValueError, match="alpha must lie in"):
        explain(g, prior, labels, mask, h, 1.0, [0])
    with pytest.raises(ValueError, match="prior_source"):
        explain(g, prior, labels, mask, h, 0.5, [0], prior_source="x")


def test_hops_and_top_sources():
    # a directed path 0 -> 1 -> 2 -> 3 and an isolated node 4: sources reach 3 along the edges
    g = Graph.from_edge_index(np.array([[0, 1, 2], [1, 2, 3]]), 5, symmetrize=False)
    np.testing.assert_array_equal(hops(g, 3), [3, 2, 1, 0, -1])
    np.testing.assert_array_equal(hops(g, 0), [0, -1, -1, -1, -1])
    np.testing.assert_array_equal(hops(g, 3, max_hops=1), [-1, -1, 1, 0, -1])
    gp, prior, labels, mask, h = problem("undirected")
    ex = explain(gp, prior, labels, mask, h, 0.7, NODES)
    top = top_sources(ex, 0, 1, 3)
    assert len(top) == 3 and all(mask[j] for j, _ in top)
    assert [v for _, v in top] == sorted((v for _, v in top), reverse=True)
