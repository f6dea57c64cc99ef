"""Shape buckets (jaxclp.buckets): the bucket rule, the padded graph's structure, priors fitted on padded inputs equal
to the unpadded fits to rounding, and one compiled program for two graphs of one bucket."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
from files import compiled_programs, features_graph

import jaxclp
from jaxclp import buckets, priors
from jaxclp.features import as_features, matmul
from jaxclp.gnn import default_two_hop_graph
from jaxclp.graph import edge_values, spmm, spmm_transpose
from jaxclp.sparse import row_pointers


def test_bucket_rule():
    sizes = np.arange(1, 5000)
    got = np.array([buckets.bucket(int(s)) for s in sizes])
    assert np.all(got >= sizes)
    assert np.all(np.diff(got) >= 0)  # monotone
    assert np.all(got[sizes > 4] < 1.25 * sizes[sizes > 4])  # at most 25 % padding
    allowed = {m << e for m in buckets.MANTISSAS for e in range(16)} | {1, 2, 3}
    assert set(got.tolist()) <= allowed
    assert [buckets.bucket(s) for s in (5, 8, 9, 900, 1024, 1025, 2200)] == [5, 8, 10, 1024, 1024, 1280, 2560]
    assert buckets.bucket(3, minimum=64) == 64
    assert buckets.node_bucket(1023) == 1024 and buckets.node_bucket(1024) == 1280  # always one padding node


def _graph(n=50, m=160, seed=0, symmetrize=True):
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, size=(2, m))
    w = rng.random(m).astype(np.float32) + 0.5
    return jaxclp.Graph.from_edge_index(ei, n, weights=w, symmetrize=symmetrize)


@pytest.mark.parametrize("symmetrize", [True, False])
def test_pad_graph_keeps_every_real_row(symmetrize):
    g = _graph(symmetrize=symmetrize)
    p = buckets.pad_graph(g)
    n, nb = g.num_nodes, p.num_nodes
    assert nb == buckets.node_bucket(n) and p.num_edges == buckets.bucket(g.num_edges, buckets.MIN_EDGES)
    assert p.symmetric == g.symmetric
    extra = p.num_edges - g.num_edges
    assert extra > 0
    # the padding edges: weight-0 loops on the last node, appended; the CSR pointers agree with the receivers
    np.testing.assert_array_equal(np.asarray(p.senders)[g.num_edges:], nb - 1)
    np.testing.assert_array_equal(np.asarray(p.receivers)[g.num_edges:], nb - 1)
    np.testing.assert_array_equal(np.asarray(p.weights)[g.num_edges:], 0.0)
    np.testing.assert_array_equal(np.asarray(p.indptr), np.asarray(row_pointers(p.receivers, nb)))
    perm = np.asarray(p.transpose_perm)
    np.testing.assert_array_equal(np.sort(perm), np.arange(p.num_edges))
    ts = np.asarray(p.senders)[perm]
    assert np.all(np.diff(ts) >= 0)
    np.testing.assert_array_equal(np.asarray(p.transpose_indptr), np.asarray(row_pointers(jnp.asarray(ts), nb)))
    # products with the normalized adjacency: the real rows bit for bit, nothing reaches them from padding
    x = np.random.default_rng(1).normal(size=(n, 4)).astype(np.float32)
    xp = np.concatenate([x, np.full((nb - n, 4), 7.0, np.float32)])
    for norm in ("sym", "row", "none"):
        np.testing.assert_array_equal(np.asarray(edge_values(p, norm))[:g.num_edges], np.asarray(edge_values(g, norm)))
        for product in (spmm, spmm_transpose):
            want = np.asarray(product(g, edge_values(g, norm), jnp.asarray(x)))
            got = np.asarray(product(p, edge_values(p, norm), jnp.asarray(xp)))[:n]
            np.testing.assert_array_equal(got, want)


def test_pad_graph_refuses_no_room():
    g = _graph()
    with pytest.raises(ValueError, match="padding edges need a padding node"):
        buckets.pad_graph(g, g.num_nodes, g.num_edges + 10)
    assert buckets.pad_graph(g, g.num_nodes, g.num_edges) is g


def test_pad_sparse_features():
    rng = np.random.default_rng(0)
    dense = (rng.random((30, 12)) < 0.2) * rng.normal(size=(30, 12))
    x = as_features(scipy.sparse.csr_matrix(dense.astype(np.float32)))
    p = buckets.pad_features(x, 64)
    assert p.shape == (64, 12) and p.nnz == buckets.bucket(x.nnz, buckets.MIN_EDGES)
    w = rng.normal(size=(12, 5)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(matmul(p, jnp.asarray(w)))[:30], np.asarray(matmul(x, jnp.asarray(w))))
    np.testing.assert_array_equal(np.asarray(matmul(p, jnp.asarray(w)))[30:], 0.0)


FIT = {"mlp": {}, "link": {}, "linkx": {}, "gcn": {}, "h2gcn": {}, "sage": {},
       "gcn_tuned": {"grid": jaxclp.gnn.tuned_grid("gcn", depths=(1,), plain_depths=(2,))},
       "sage_tuned": {"grid": jaxclp.gnn.tuned_grid("sage", depths=(1,), plain_depths=())}}


@pytest.mark.parametrize("name", buckets.BUCKETED_PRIORS)
def test_bucketed_priors_equal_the_exact_fit(name):
    """Every predictor of BUCKETED_PRIORS fitted on padded inputs gives the unpadded fit's prior to rounding, the
    same validation score and best epoch."""
    assert set(FIT) == set(buckets.BUCKETED_PRIORS)
    g, x, y, tm, vm = features_graph(seed=3, n=90, k=3, d=6, h=0.3)
    labels = np.where(tm | vm, y, -1)
    cfg = jaxclp.TrainConfig(epochs=40, patience=10)
    key = jax.random.key(5)
    two_hop = default_two_hop_graph(g) if name == "h2gcn" else None
    extra = {"two_hop": two_hop} if two_hop is not None else {}
    exact = priors.fit_prior(name, key, g, x, labels, tm, vm, 3, cfg, **FIT[name], **extra)
    p = buckets.pad_inputs(g, jnp.asarray(x), labels, tm, vm, two_hop)
    assert p.graph.num_nodes == 96 and p.features.shape == (96, 6)
    extra = {"two_hop": p.two_hop} if two_hop is not None else {}
    if name in buckets.NODE_COUNT_PRIORS:  # LINK's and LINKX's first layer is as wide as the graph
        extra["num_nodes"] = g.num_nodes
    padded = priors.fit_prior(name, key, p.graph, p.features, p.labels, p.train_mask, p.val_mask, 3, cfg,
                              **FIT[name], **extra)
    got = np.asarray(buckets.unpad_nodes(padded.prior, g.num_nodes))
    np.testing.assert_allclose(got, np.asarray(exact.prior), atol=2e-6)
    assert padded.val_score == exact.val_score and padded.best_epoch == exact.best_epoch


def test_graphs_of_one_bucket_share_the_gcn_program():
    """Two graphs of 141 and 148 nodes (bucket 160; 564 and 592 edges, bucket 640): the second GCN fit compiles no
    training program."""
    fits = []
    for n in (141, 148):
        rng = np.random.default_rng(n)
        i = np.arange(n)
        g = jaxclp.Graph.from_edge_index(np.concatenate([[i, (i + 1) % n], [i, (i + 2) % n]], axis=1), n)
        y = rng.integers(0, 3, n)
        tm, vm = i % 4 == 0, i % 4 == 1
        p = buckets.pad_inputs(g, jnp.asarray(rng.normal(size=(n, 5)), jnp.float32), np.where(tm | vm, y, -1), tm,
                               vm)
        assert (p.graph.num_nodes, p.graph.num_edges) == (160, 640)
        with compiled_programs() as names:
            priors.fit_prior("gcn", jax.random.key(0), p.graph, p.features, p.labels, p.train_mask, p.val_mask, 3,
                             jaxclp.TrainConfig(epochs=3))
        fits.append(names)
    assert any("_step_chunk" in name for name in fits[0]), fits[0]
    assert not any("_step_chunk" in name for name in fits[1]), fits[1]


def test_fit_prior_and_clp_on_shape_buckets():
    """``fit_prior(..., shape_buckets=True)`` pads and unpads itself (dense and sparse features); ``jaxclp.CLP`` passes
    its ``shape_buckets`` on: the same predictions as on the graph's own shapes."""
    g, x, y, tm, vm = features_graph(seed=4, n=75, k=3, d=6, h=0.3)
    labels = np.where(tm | vm, y, -1)
    cfg = jaxclp.TrainConfig(epochs=30, patience=10)
    for feats in (x, scipy.sparse.csr_matrix(np.where(np.abs(x) > 1.0, x, 0.0))):
        exact = priors.fit_prior("mlp", jax.random.key(1), g, feats, labels, tm, vm, 3, cfg)
        padded = priors.fit_prior("mlp", jax.random.key(1), g, feats, labels, tm, vm, 3, cfg, shape_buckets=True)
        assert padded.prior.shape == (75, 3)
        np.testing.assert_allclose(np.asarray(padded.prior), np.asarray(exact.prior), atol=2e-6)
        assert padded.val_score == exact.val_score
    # float32 training on padded and on exact shapes sums in another order: LINKX's chunked fit ends ~3e-6 apart
    # after 30 epochs (the suite's XLA flags); a padding row reaching a loss or a normalization moves priors by 1e-2
    tol = 1e-5
    for name, feats in (("link", None), ("linkx", x), ("h2gcn", x), ("gat", x)):  # GAT: not bucketed, exact
        padded = priors.fit_prior(name, jax.random.key(1), g, feats, labels, tm, vm, 3, cfg, shape_buckets=True)
        exact = priors.fit_prior(name, jax.random.key(1), g, feats, labels, tm, vm, 3, cfg)
        np.testing.assert_allclose(np.asarray(padded.prior), np.asarray(exact.prior), atol=0 if name == "gat" else tol,
                                   err_msg=name)
    far = time.perf_counter() + 3600  # the chunked fit of a time limit, on padded inputs too
    padded = priors.fit_prior("linkx", jax.random.key(1), g, x, labels, tm, vm, 3, cfg, shape_buckets=True,
                              deadline=far)
    exact = priors.fit_prior("linkx", jax.random.key(1), g, x, labels, tm, vm, 3, cfg, deadline=far)
    np.testing.assert_allclose(np.asarray(padded.prior), np.asarray(exact.prior), atol=tol)
    fast = dict(epochs=30, patience=10, alphas=(0.5, 0.9))
    a = jaxclp.CLP(**fast).fit(g, x, y, tm, vm)
    b = jaxclp.CLP(shape_buckets=True, **fast).fit(g, x, y, tm, vm)
    np.testing.assert_allclose(np.asarray(b.beliefs_), np.asarray(a.beliefs_), atol=1e-5)
    assert b.alpha_ == a.alpha_
    with pytest.raises(ValueError, match="shape_buckets must be True or False"):
        jaxclp.CLP(shape_buckets="yes")
