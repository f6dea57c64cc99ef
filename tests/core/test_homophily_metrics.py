"""Homophily measures, true compatibility and metrics against brute-force numpy."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
import reference as ref
from jaxclp.homophily import compatibility_counts
from jaxclp.homophily import node_homophily_per_node


def _graph(rng, n=50, k=3):
    ei = ref.random_edge_index(rng, n, 2 * n, isolated=4)
    return jaxclp.Graph.from_edge_index(ei, n), rng.integers(0, k, n)


def test_edge_and_node_homophily(rng):
    g, y = _graph(rng)
    s, r = np.asarray(g.senders), np.asarray(g.receivers)
    und = {(min(a, b), max(a, b)) for a, b in zip(s, r) if a != b}
    expected = np.mean([y[a] == y[b] for a, b in und])
    assert float(jaxclp.edge_homophily(g, jnp.asarray(y))) == pytest.approx(expected, abs=1e-12)
    h, ok = node_homophily_per_node(g, jnp.asarray(y))
    for v in range(g.num_nodes):
        nb = [a for a, b in zip(s, r) if b == v and a != v]
        assert bool(ok[v]) == (len(nb) > 0)
        if nb:
            assert float(h[v]) == pytest.approx(np.mean([y[u] == y[v] for u in nb]), abs=1e-12)
    assert float(jaxclp.node_homophily(g, jnp.asarray(y))) == pytest.approx(float(np.asarray(h)[np.asarray(ok)].mean()))
    # an unlabelled end (label -1) takes the edge out of the count
    y_unl = np.where(rng.random(g.num_nodes) < 0.3, -1, y)
    kept = [(a, b) for a, b in und if y_unl[a] >= 0 and y_unl[b] >= 0]
    assert 0 < len(kept) < len(und)
    assert float(jaxclp.edge_homophily(g, jnp.asarray(y_unl))) == pytest.approx(
        np.mean([y_unl[a] == y_unl[b] for a, b in kept]), abs=1e-12)


def test_true_compatibility(rng):
    g, y = _graph(rng)
    a = ref.graph_dense(g)
    yoh = ref.one_hot(y, 3)
    c = yoh.T @ a @ yoh
    np.testing.assert_allclose(compatibility_counts(g, jnp.asarray(y), 3), c, atol=1e-12)
    np.testing.assert_allclose(jaxclp.true_compatibility(g, jnp.asarray(y), 3, normalize="row"),
                               c / c.sum(1, keepdims=True), atol=1e-12)
    hs = np.asarray(jaxclp.true_compatibility(g, jnp.asarray(y), 3))
    np.testing.assert_allclose(hs.sum(0), 1, atol=1e-5)
    np.testing.assert_allclose(hs.sum(1), 1, atol=1e-5)
    assert float(jaxclp.compatibility_distance(jnp.asarray(hs), jnp.asarray(hs))) == 0.0


def _auc_bruteforce(s, y):
    pos, neg = s[y == 1], s[y == 0]
    return np.mean([(p > q) + 0.5 * (p == q) for p in pos for q in neg])


def test_roc_auc_with_ties_and_mask(rng):
    n = 200
    s = np.round(rng.random(n), 1)  # many ties
    y = rng.integers(0, 2, n)
    m = rng.random(n) < 0.6
    got = float(jaxclp.roc_auc(jnp.asarray(s), jnp.asarray(y), jnp.asarray(m)))
    assert got == pytest.approx(_auc_bruteforce(s[m], y[m]), abs=1e-12)
    scores2 = np.stack([1 - s, s], 1)
    assert float(jaxclp.roc_auc(jnp.asarray(scores2), jnp.asarray(y), jnp.asarray(m))) == pytest.approx(got)


def test_accuracy(rng):
    scores = rng.random((30, 4))
    y = rng.integers(0, 4, 30)
    m = rng.random(30) < 0.5
    exp = (scores.argmax(1) == y)[m].mean()
    assert float(jaxclp.accuracy(jnp.asarray(scores), jnp.asarray(y), jnp.asarray(m))) == pytest.approx(exp)
