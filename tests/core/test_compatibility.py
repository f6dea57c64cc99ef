"""Initial beliefs, compatibility estimation and CLP edge weights vs the numpy reference."""

import functools
from decimal import ROUND_HALF_UP, Decimal

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import reference as ref
from jaxclp import Graph, edge_weights, estimate_compatibility, initial_beliefs

TOL = 1e-6


N = 40
KIND_MAP = {"undirected": "undirected", "directed": "directed", "dups_loops": "undirected_loops"}


@functools.lru_cache(maxsize=None)
def _graph(kind, n):
    ei, kw = ref.graph_spec(KIND_MAP[kind], seed=44, n=n)
    return Graph.from_edge_index(ei, n, **kw)


def make_graph(rng, kind, n=N):
    """Module-wide graphs of equal size (eager ops compile once). ``rng`` unused: kept for symmetry."""
    return _graph(kind, n)


def graph_dense(g):
    return ref.graph_dense(g)


# ------------------------------------------------------------------------------------ initial beliefs
def test_initial_beliefs_vs_reference(rng):
    n, k = 30, 5
    prior, labels, mask = ref.random_problem(rng, n, k)
    b0 = initial_beliefs(jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(mask))
    np.testing.assert_array_equal(np.asarray(b0), ref.initial_beliefs(prior, labels, mask))
    # labels outside the mask are never read
    lab2 = np.where(mask, labels, -1).astype(np.int32)
    b0b = initial_beliefs(jnp.asarray(prior), jnp.asarray(lab2), jnp.asarray(mask))
    np.testing.assert_array_equal(np.asarray(b0b), np.asarray(b0))


# ------------------------------------------------------------------------------------ compatibility
@pytest.mark.parametrize("kind", ["undirected", "directed", "dups_loops"])
@pytest.mark.parametrize("k", [2, 5, 17])
def test_estimate_compatibility_vs_reference(rng, kind, k):
    n = N
    g = make_graph(rng, kind, n)
    prior, labels, mask = ref.random_problem(rng, n, k, train_frac=0.4)
    h, info = estimate_compatibility(g, jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(mask))
    h = np.asarray(h)
    assert h.shape == (k, k) and h.dtype == np.float64
    assert np.all(np.isfinite(h)) and np.all(h > 0)
    counts = ref.compatibility_counts(graph_dense(g), prior, labels, mask)
    # exact structural check: H = diag(u) (C/mean C + eps) diag(v) for the reference counts C
    # (independent of how far the Sinkhorn iteration got)
    assert ref.cross_ratio_defect(h, ref.smoothed(counts)) < 1e-7
    np.testing.assert_allclose(h.sum(axis=0), 1.0, atol=TOL)
    # doubly stochastic within the default tolerance, and the right limit
    assert bool(info.converged), f"Sinkhorn not converged: {info}"
    np.testing.assert_allclose(h.sum(axis=1), 1.0, atol=TOL)
    np.testing.assert_allclose(h, ref.sinkhorn(counts), atol=1e-5)


def test_compatibility_small_directed_hand_example():
    """Edges 1->0, 1->2 (directed). Train: node 1 (class 0), node 0 (class 1). The count row of class 0 is
    the mass of node 1's receivers: B0[0] + B0[2] = [0.3, 1.7]; class 1 (node 0) sends to nobody."""
    g = Graph.from_edge_index(np.array([[1, 1], [0, 2]]), 3, symmetrize=False)
    prior = np.array([[0.5, 0.5], [0.5, 0.5], [0.3, 0.7]])
    labels = np.array([1, 0, 0], np.int32)
    mask = np.array([True, True, False])
    counts = np.array([[0.3, 1.7], [0.0, 0.0]])
    np.testing.assert_allclose(ref.compatibility_counts(graph_dense(g), prior, labels, mask), counts)
    h, _ = estimate_compatibility(g, jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(mask), tol=1e-12,
                                  max_iters=100_000)
    cs = ref.smoothed(counts)
    t = np.sqrt(cs[0, 0] * cs[1, 1] / (cs[0, 1] * cs[1, 0]))
    q = t / (1 + t)
    np.testing.assert_allclose(np.asarray(h), [[q, 1 - q], [1 - q, q]], atol=1e-9)


@pytest.mark.cpu_bitwise
def test_compatibility_ignores_non_training_labels(rng):
    n, k = N, 5
    g = make_graph(rng, "directed", n)
    prior, labels, mask = ref.random_problem(rng, n, k)
    h1, _ = estimate_compatibility(g, jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(mask))
    other = labels.copy()
    other[~mask] = rng.integers(0, k, size=int((~mask).sum()))
    assert np.any(other != labels)
    h2, _ = estimate_compatibility(g, jnp.asarray(prior), jnp.asarray(other), jnp.asarray(mask))
    np.testing.assert_array_equal(np.asarray(h2), np.asarray(h1))
    # even invalid values outside the mask are never read
    junk = labels.copy()
    junk[~mask] = 999
    h3, _ = estimate_compatibility(g, jnp.asarray(prior), jnp.asarray(junk), jnp.asarray(mask))
    np.testing.assert_array_equal(np.asarray(h3), np.asarray(h1))
    junk[~mask] = -7
    h4, _ = estimate_compatibility(g, jnp.asarray(prior), jnp.asarray(junk), jnp.asarray(mask))
    np.testing.assert_array_equal(np.asarray(h4), np.asarray(h1))
    # but a training label does matter
    flip = labels.copy()
    i = int(np.flatnonzero(mask)[k])  # a training node beyond the guaranteed one-per-class
    flip[i] = (flip[i] + 1) % k
    h5, _ = estimate_compatibility(g, jnp.asarray(prior), jnp.asarray(flip), jnp.asarray(mask))
    assert np.max(np.abs(np.asarray(h5) - np.asarray(h1))) > 1e-6


def test_compatibility_uses_raw_adjacency_scale_free(rng):
    """H uses the RAW A: a global weight scale cancels; a non-uniform reweighting does not."""
    n, k = N, 3
    ei, _ = ref.graph_spec("directed", seed=44, n=n)
    prior, labels, mask = ref.random_problem(rng, n, k)
    args = (jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(mask))
    w = rng.integers(1, 5, size=ei.shape[1]).astype(float)
    g1 = Graph.from_edge_index(ei, n, weights=w, symmetrize=False)
    g4 = Graph.from_edge_index(ei, n, weights=4.0 * w, symmetrize=False)
    h1, _ = estimate_compatibility(g1, *args)
    h4, _ = estimate_compatibility(g4, *args)
    np.testing.assert_allclose(np.asarray(h4), np.asarray(h1), atol=1e-12)
    ref_h = ref.sinkhorn(ref.compatibility_counts(graph_dense(g1), prior, labels, mask))
    np.testing.assert_allclose(np.asarray(h1), ref_h, atol=1e-5)


@pytest.mark.parametrize("bad", ["prior_shape", "prior_negative", "prior_nan", "empty_mask", "int_mask",
                                 "train_label_out_of_range", "train_label_negative", "float_labels",
                                 "labels_shape"])
def test_estimate_compatibility_rejects_bad_input(rng, bad):
    n, k = N, 3
    g = make_graph(rng, "undirected", n)
    prior, labels, mask = ref.random_problem(rng, n, k)
    if bad == "prior_shape":
        prior = prior[:-1]
    elif bad == "prior_negative":
        prior[3, 1] = -0.1
    elif bad == "prior_nan":
        prior[3, 1] = np.nan
    elif bad == "empty_mask":
        mask = np.zeros(n, bool)
    elif bad == "int_mask":
        mask = mask.astype(np.int32)
    elif bad == "train_label_out_of_range":
        labels[np.flatnonzero(mask)[0]] = k
    elif bad == "train_label_negative":
        labels[np.flatnonzero(mask)[0]] = -1
    elif bad == "float_labels":
        labels = labels.astype(np.float64)
    elif bad == "labels_shape":
        labels = labels[:-2]
    with pytest.raises(ValueError):
        estimate_compatibility(g, jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(mask))


def test_estimate_compatibility_refuses_a_prior_whose_rows_do_not_sum_to_one(rng):
    g = make_graph(rng, "undirected", N)
    prior, labels, mask = ref.random_problem(rng, N, 3)
    with pytest.raises(ValueError, match=r"prior rows must sum to 1 .* row 0 sums to 5\. Normalize it first: prior / prior\.sum\(axis=1"):
        estimate_compatibility(g, jnp.asarray(5.0 * prior), jnp.asarray(labels), jnp.asarray(mask))
    off = prior.copy()
    off[7] *= 1.01  # a row 1 % off
    with pytest.raises(ValueError, match="row 7 sums to 1.01"):
        estimate_compatibility(g, jnp.asarray(off), jnp.asarray(labels), jnp.asarray(mask))
    near = prior * (1 + 1e-5)  # float32 rounding of a softmax: accepted, and H as for the exact prior
    np.testing.assert_allclose(np.asarray(estimate_compatibility(g, jnp.asarray(near), jnp.asarray(labels),
                                                                 jnp.asarray(mask))[0]),
                               np.asarray(estimate_compatibility(g, jnp.asarray(prior), jnp.asarray(labels),
                                                                 jnp.asarray(mask))[0]), atol=1e-6)


def test_estimate_compatibility_no_recompile(rng, compile_counter):
    n, k = N, 4
    g = make_graph(rng, "undirected", n)
    p1, l1, m1 = ref.random_problem(rng, n, k)
    p2, l2, m2 = ref.random_problem(rng, n, k)
    a1 = tuple(map(jnp.asarray, (p1, l1, m1)))
    a2 = tuple(map(jnp.asarray, (p2, l2, m2)))
    jax.block_until_ready(estimate_compatibility(g, *a1))
    with compile_counter() as cc:
        h2, _ = estimate_compatibility(g, *a2)
        jax.block_until_ready(h2)
    assert cc.count == 0


# ------------------------------------------------------------------------------------ edge weights
@pytest.mark.parametrize("k", [2, 5, 17])
@pytest.mark.parametrize("kind", ["undirected", "directed", "dups_loops"])
def test_edge_weights_vs_reference(rng, kind, k):
    n = N
    g = make_graph(rng, kind, n)
    prior, labels, mask = ref.random_problem(rng, n, k)
    b0 = ref.initial_beliefs(prior, labels, mask)
    h = ref.sinkhorn(rng.random((k, k)))
    f = np.asarray(edge_weights(g, jnp.asarray(b0), jnp.asarray(h)))
    s, r = np.asarray(g.senders), np.asarray(g.receivers)
    np.testing.assert_allclose(f, ref.edge_weights(s, r, b0, h), rtol=1e-12, atol=1e-15)
    # a non doubly-stochastic H is used as given
    h2 = rng.random((k, k)) * 3.0
    f2 = np.asarray(edge_weights(g, jnp.asarray(b0), jnp.asarray(h2)))
    np.testing.assert_allclose(f2, ref.edge_weights(s, r, b0, h2), rtol=1e-12, atol=1e-15)


def _round_half_up(x, places=2):
    return float(Decimal(repr(round(float(x), 10))).quantize(Decimal(10) ** -places, rounding=ROUND_HALF_UP))


def test_paper_appendix_example():
    """The worked example of the paper's appendix: H = [[.2,.8],[.8,.2]], B = [[.4,.6],[.2,.8],[.7,.3]],
    directed edges 0->1 and 0->2."""
    h = jnp.asarray([[0.2, 0.8], [0.8, 0.2]])
    b = jnp.asarray([[0.4, 0.6], [0.2, 0.8], [0.7, 0.3]])
    g = Graph.from_edge_index(np.array([[0, 0], [1, 2]]), 3, symmetrize=False)
    assert not g.symmetric
    f = np.asarray(edge_weights(g, b, h))
    s, r = np.asarray(g.senders), np.asarray(g.receivers)
    e01 = int(np.flatnonzero((s == 0) & (r == 1))[0])
    e02 = int(np.flatnonzero((s == 0) & (r == 2))[0])
    np.testing.assert_allclose(f[e01], [0.112, 0.352], atol=1e-12)
    np.testing.assert_allclose(f[e02], [0.56 * 0.7, 0.44 * 0.3], atol=1e-12)
    bn = np.asarray(b)
    msg01 = f[e01] * bn[0] / np.sum(f[e01] * bn[0])
    msg02 = f[e02] * bn[0] / np.sum(f[e02] * bn[0])
    assert [_round_half_up(x) for x in msg01] == [0.18, 0.83]
    assert [_round_half_up(x) for x in msg02] == [0.66, 0.34]
    np.testing.assert_allclose(msg01, [0.175, 0.825], atol=1e-12)


def test_edge_weights_shape_validation(rng):
    g = make_graph(rng, "undirected")
    with pytest.raises(ValueError):
        edge_weights(g, jnp.ones((N - 1, 3)), jnp.eye(3))
    with pytest.raises(ValueError):
        edge_weights(g, jnp.ones((N, 3)), jnp.eye(2))
