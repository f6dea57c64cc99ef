"""GNN baselines (GCN, H2GCN): hand-computed layers on tiny graphs, 2-hop sets, training and vmapping."""

import functools
import time

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np

import jaxclp
import pytest

from jaxclp.gnn import (GCN, H2GCN, GNNResult, TwoHopTooLarge, aggregate, fit_gcn, fit_gcn_splits, fit_h2gcn,
                        fit_h2gcn_splits, gcn_normalized_graph, gnn_param_count, h2gcn_normalized_graphs,
                        tuned_grid, two_hop_graph)
from jaxclp.graph import Graph
from jaxclp.train import TrainConfig, blank_state

RTOL = 1e-5  # float32 model arithmetic vs float64 numpy; structural mistakes are O(1)
S6, S3, S2 = np.sqrt(6.0), np.sqrt(3.0), np.sqrt(2.0)


# --------------------------------------------------------------------------------------------- helpers
def undirected(edges, n, **kw):
    return Graph.from_edge_index(np.asarray(edges).T, n, **kw)


def path4():
    return undirected([(0, 1), (1, 2), (2, 3)], 4)


def triangle_pendant():
    """Triangle 0-1-2 with the pendant 3 attached to 2."""
    return undirected([(0, 1), (1, 2), (0, 2), (2, 3)], 4)


def dense(gt, n):
    """Dense ``M[r, s] = sum of edges[e]`` of a GraphsTuple (independent of the library's densifier)."""
    m = np.zeros((n, n))
    np.add.at(m, (np.asarray(gt.receivers), np.asarray(gt.senders)), np.asarray(gt.edges, np.float64))
    return m


def sym_norm(a):
    """D_in^-1/2 A D_out^-1/2 with zero rows/columns for zero degrees (dense numpy)."""
    din, dout = a.sum(1), a.sum(0)
    ri = np.where(din > 0, 1 / np.sqrt(np.where(din > 0, din, 1)), 0)
    ro = np.where(dout > 0, 1 / np.sqrt(np.where(dout > 0, dout, 1)), 0)
    return ri[:, None] * a * ro[None, :]


def in_neighbours(g):
    """{receiver: set(senders)} of a Graph (edges with positive weight)."""
    out = {v: set() for v in range(g.num_nodes)}
    for s, r, w in zip(np.asarray(g.senders), np.asarray(g.receivers), np.asarray(g.weights)):
        if w > 0:
            out[int(r)].add(int(s))
    return out


# The small tests jit their calls: one compilation per test instead of one per eager primitive.
normalized_gcn = jax.jit(gcn_normalized_graph)
normalized_h2gcn = jax.jit(h2gcn_normalized_graphs)  # pass two_hop explicitly (host-side)


def apply(model, params, *graphs, **kw):
    return jax.jit(model.apply, static_argnames=("train", "mutable"))(params, *graphs, **kw)


def init_shapes(model, *graphs):
    return jax.eval_shape(lambda: model.init(jax.random.key(0), *graphs, train=False))


def same_structure(a, b):
    """Same pytree structure and leaf shapes (``b`` may hold ShapeDtypeStructs)."""
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        assert np.shape(x) == np.shape(y)


# ------------------------------------------------------------------------------------- GCN normalization
def test_gcn_normalized_adjacency_path_by_hand():
    g = path4()
    ahat = dense(normalized_gcn(g), 4)
    # degrees of A + I: [2, 3, 3, 2]
    expected = np.array([
        [1 / 2, 1 / S6, 0, 0],
        [1 / S6, 1 / 3, 1 / 3, 0],
        [0, 1 / 3, 1 / 3, 1 / S6],
        [0, 0, 1 / S6, 1 / 2],
    ])
    np.testing.assert_allclose(ahat, expected, rtol=RTOL, atol=1e-7)


def test_gcn_normalization_weighted_loops_and_user_graph_untouched():
    ei = np.array([[0, 1, 0, 2, 4], [1, 2, 2, 3, 4]])  # 4 -> 4 is a loop (dropped by default); 4 isolated
    w = np.array([2.0, 0.5, 1.0, 3.0, 7.0])
    g = Graph.from_edge_index(ei, 5, weights=w)
    before = [np.asarray(x).copy() for x in (g.senders, g.receivers, g.weights)]
    gt = normalized_gcn(g)
    a = np.zeros((5, 5))
    for s, r, wj in zip(*ei, w):
        if s != r:
            a[r, s] = a[s, r] = wj
    np.testing.assert_allclose(dense(gt, 5), sym_norm(a + np.eye(5)), rtol=RTOL, atol=1e-7)
    assert dense(gt, 5)[4, 4] == pytest.approx(1.0)  # isolated node: only its loop, no NaN
    assert np.all(np.diff(np.asarray(gt.receivers)) >= 0)
    for x, y in zip(before, (g.senders, g.receivers, g.weights)):
        np.testing.assert_array_equal(x, np.asarray(y))
    assert g.num_edges == 8

    # A graph that already holds one loop per node is not double-looped: same operator.
    g_loops = Graph.from_edge_index(ei, 5, weights=w, self_loops="add")
    np.testing.assert_allclose(dense(normalized_gcn(g_loops), 5), dense(gt, 5), rtol=RTOL, atol=1e-7)


# -------------------------------------------------------------------------------------------- GCN layers
def test_gcn_one_layer_output_by_hand():
    g = path4()
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0]], np.float32)
    w = np.array([[1.0, 2.0, 0.0], [-1.0, 0.5, 1.0]], np.float32)
    b = np.array([0.1, -2.0, -0.5], np.float32)  # outputs of both signs: no ReLU on the last layer
    model = GCN(hidden=(), num_classes=3, dropout=0.5)
    gt = normalized_gcn(g, jnp.asarray(x))
    params = {"params": {"conv0": {"kernel": jnp.asarray(w), "bias": jnp.asarray(b)}}}
    same_structure(params, init_shapes(model, gt))
    out = np.asarray(apply(model, params, gt, train=False), np.float64)
    a = np.zeros((4, 4))
    a[[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]] = 1
    expected = sym_norm(a + np.eye(4)) @ (x @ w) + b
    assert expected.min() < -0.1 and expected.max() > 0.1
    np.testing.assert_allclose(out, expected, rtol=RTOL, atol=1e-6)
    # node 0 by hand: (1/2) x0 W + (1/sqrt 6) x1 W + b
    np.testing.assert_allclose(out[0], 0.5 * x[0] @ w + x[1] @ w / S6 + b, rtol=RTOL, atol=1e-6)


def test_gcn_two_layers_relu_and_dropout():
    g = triangle_pendant()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    w0 = rng.normal(size=(3, 5)).astype(np.float32)
    rng.normal(size=5)
    w1 = rng.normal(size=(5, 2)).astype(np.float32)
    b0 = np.array([0.5, 0.2, -0.1, 1.0, 0.3], np.float32)  # hidden pre-activations of both signs
    b1 = np.array([-0.7, -1.5], np.float32)  # logits of both signs
    model = GCN(hidden=(5,), num_classes=2, dropout=0.5)
    gt = normalized_gcn(g, jnp.asarray(x))
    params = {"params": {"conv0": {"kernel": w0, "bias": b0}, "conv1": {"kernel": w1, "bias": b1}}}
    same_structure(params, init_shapes(model, gt))
    a = np.asarray(g.to_dense("none"), np.float64)
    ahat = sym_norm(a + np.eye(4))
    h = np.maximum(ahat @ (x @ w0) + b0, 0)
    expected = ahat @ (h @ w1) + b1
    pre = ahat @ (x @ w0) + b0
    assert pre.min() < -0.1 and pre.max() > 0.1  # the hidden ReLU matters...
    assert expected.min() < -0.1 and expected.max() > 0.1  # ...and one at the end would change the logits
    out = apply(model, params, gt, train=False)
    np.testing.assert_allclose(np.asarray(out, np.float64), expected, rtol=RTOL, atol=1e-5)
    # dropout is active in training mode only
    trained = apply(model, params, gt, train=True, rngs={"dropout": jax.random.key(1)})
    assert not np.allclose(np.asarray(trained), np.asarray(out))


# ---------------------------------------------------------------------------------------- 2-hop graphs
@pytest.mark.parametrize("builder,expected", [
    (path4, {0: {2}, 1: {3}, 2: {0}, 3: {1}}),
    (triangle_pendant, {0: {3}, 1: {3}, 2: set(), 3: {0, 1}}),
    (lambda: undirected([(i, (i + 1) % 5) for i in range(5)], 5),  # 5-cycle
     {i: {(i + 2) % 5, (i + 3) % 5} for i in range(5)}),
    (lambda: undirected([(0, 1), (1, 2), (2, 3), (3, 0)], 4),  # 4-cycle: 2 paths to the opposite node
     {0: {2}, 1: {3}, 2: {0}, 3: {1}}),
    (lambda: undirected([(0, 1), (1, 2), (0, 0), (1, 1)], 4, self_loops="keep"),  # loops ignored, 3 isolated
     {0: {2}, 1: set(), 2: {0}, 3: set()}),
])
def test_two_hop_exact_sets(builder, expected):
    th = two_hop_graph(builder())
    assert in_neighbours(th) == expected
    assert np.all(np.asarray(th.weights) == 1.0)
    assert np.all(np.diff(np.asarray(th.receivers)) >= 0)


def test_two_hop_matches_networkx_distance_two():
    nxg = nx.gnp_random_graph(40, 0.08, seed=3)
    th = two_hop_graph(Graph.from_networkx(nxg, nodelist=range(40)))
    dist = dict(nx.all_pairs_shortest_path_length(nxg, cutoff=2))
    expected = {v: {u for u, d in dist[v].items() if d == 2} for v in range(40)}
    assert in_neighbours(th) == expected
    assert th.symmetric


def test_two_hop_directed():
    g = Graph.from_edge_index(np.array([[0, 1, 3, 0], [1, 2, 1, 4]]), 5, symmetrize=False)
    th = two_hop_graph(g)  # walks 0->1->2 and 3->1->2; 0 -> 4 has no 2-walk
    assert in_neighbours(th) == {0: set(), 1: set(), 2: {0, 3}, 3: set(), 4: set()}


def test_two_hop_limit_and_blocks(monkeypatch):
    """A hub of degree d makes d(d-1) 2-hop pairs among its leaves: a star on 1 + 30 nodes has exactly 870.
    ``max_edges`` = 870 passes, 869 raises TwoHopTooLarge (a ValueError) naming the limit; and the product formed
    in blocks of receivers (tiny blocks forced) gives the same graph as one block, on a random directed graph."""
    from jaxclp import gnn

    star = undirected([(0, i) for i in range(1, 31)], 31)
    assert two_hop_graph(star, max_edges=870).num_edges == 870 == two_hop_graph(star, max_edges=None).num_edges
    with pytest.raises(gnn.TwoHopTooLarge, match="more than 869 pairs"):
        two_hop_graph(star, max_edges=869)
    assert issubclass(TwoHopTooLarge, ValueError)
    g = Graph.from_edge_index(np.random.default_rng(0).integers(0, 200, (2, 1500)), 200, symmetrize=False)
    whole = two_hop_graph(g)
    monkeypatch.setattr(gnn.two_hop, "_TWO_HOP_BLOCK_WALKS", 37)
    blocked = two_hop_graph(g)
    for f in ("senders", "receivers", "weights"):
        np.testing.assert_array_equal(np.asarray(getattr(blocked, f)), np.asarray(getattr(whole, f)))
    with pytest.raises(gnn.TwoHopTooLarge):  # the count stops in an early block
        two_hop_graph(g, max_edges=whole.num_edges - 1)
    with pytest.raises(gnn.TwoHopTooLarge):  # fit_h2gcn builds it with the default limit
        monkeypatch.setattr(gnn.two_hop, "MAX_TWO_HOP_EDGES", 10)
        fit_h2gcn(jax.random.key(0), star, np.eye(31, dtype=np.float32), np.arange(31) % 2,
                  np.arange(31) < 10, np.arange(31) >= 20, num_classes=2)


def test_check_two_hop_size_counts_only_past_the_walk_bound(monkeypatch):
    """4-cycle: 16 length-2 walks, 4 exact-2-hop pairs (each node's opposite, reached twice): limit 4 passes
    (walks exceed it, the count does not), 3 raises; within the walk bound nothing is counted at all."""
    from jaxclp import gnn

    c4 = undirected([(0, 1), (1, 2), (2, 3), (3, 0)], 4)
    gnn.check_two_hop_size(c4, max_edges=4)
    with pytest.raises(gnn.TwoHopTooLarge, match="more than 3 pairs"):
        gnn.check_two_hop_size(c4, max_edges=3)
    monkeypatch.setattr(gnn.two_hop, "_two_hop_pairs", lambda *a, **k: pytest.fail("counted within the walk bound"))
    gnn.check_two_hop_size(c4, max_edges=16)
    monkeypatch.setattr(gnn.two_hop, "MAX_TWO_HOP_EDGES", 16)  # the default limit is read at call time
    gnn.check_two_hop_size(c4)


def test_two_hop_refuses_traced_graph():
    with pytest.raises(ValueError, match="host"):
        jax.jit(two_hop_graph)(path4())


# ----------------------------------------------------------------------------------------------- H2GCN
# triangle 0-1-2 + pendant 3-2. A1 degrees [2, 2, 3, 1]; 2-hop pairs {0,3}, {1,3}: degrees [1, 1, 0, 2].
A1_TP = np.array([
    [0, 1 / 2, 1 / S6, 0],
    [1 / 2, 0, 1 / S6, 0],
    [1 / S6, 1 / S6, 0, 1 / S3],
    [0, 0, 1 / S3, 0],
])
A2_TP = np.array([
    [0, 0, 0, 1 / S2],
    [0, 0, 0, 1 / S2],
    [0, 0, 0, 0],
    [1 / S2, 1 / S2, 0, 0],
])


def test_h2gcn_normalized_graphs_by_hand():
    g = triangle_pendant()
    hop1, hop2 = normalized_h2gcn(g, two_hop_graph(g))
    np.testing.assert_allclose(dense(hop1, 4), A1_TP, rtol=RTOL, atol=1e-7)
    np.testing.assert_allclose(dense(hop2, 4), A2_TP, rtol=RTOL, atol=1e-7)


def test_h2gcn_drops_self_loops_from_aggregation():
    g_loops = undirected([(0, 1), (1, 2), (0, 2), (2, 3), (0, 0), (3, 3)], 4, self_loops="keep")
    hop1, hop2 = normalized_h2gcn(g_loops, two_hop_graph(g_loops))
    np.testing.assert_allclose(dense(hop1, 4), A1_TP, rtol=RTOL, atol=1e-7)
    np.testing.assert_allclose(dense(hop2, 4), A2_TP, rtol=RTOL, atol=1e-7)


def test_h2gcn_aggregation_and_concatenation_by_hand():
    p, k = 2, 3
    x = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0], [1.0, 1.0, 0.0], [-1.0, 2.0, 1.0]], np.float32)
    we = np.array([[1.0, -1.0], [0.5, 2.0], [1.0, 0.0]], np.float32)
    rng = np.random.default_rng(1)
    wc = rng.normal(size=(7 * p, k)).astype(np.float32)
    bc = np.array([0.1, 0.0, -0.3], np.float32)
    model = H2GCN(hidden=p, num_classes=k, dropout=0.5)
    g = triangle_pendant()
    hop1, hop2 = normalized_h2gcn(g, two_hop_graph(g), jnp.asarray(x))
    params = {"params": {"embed": {"kernel": we}, "classify": {"kernel": wc, "bias": bc}}}
    same_structure(params, init_shapes(model, hop1, hop2))
    logits, state = apply(model, params, hop1, hop2, train=False, mutable=("intermediates",))
    inter = {name: np.asarray(v[0], np.float64) for name, v in state["intermediates"].items()}

    r0 = np.maximum(x @ we, 0)  # x @ we = [[3, -1], [-0.5, 2], [1.5, 1], [1, 5]]
    np.testing.assert_allclose(r0, [[3, 0], [0, 2], [1.5, 1], [1, 5]])
    r1 = np.concatenate([A1_TP @ r0, A2_TP @ r0], axis=1)
    r2 = np.concatenate([A1_TP @ r1, A2_TP @ r1], axis=1)
    final = np.concatenate([r0, r1, r2], axis=1)
    assert inter["r0"].shape == (4, p) and inter["r1"].shape == (4, 2 * p) and inter["r2"].shape == (4, 4 * p)
    assert inter["final"].shape == (4, 7 * p)
    np.testing.assert_allclose(inter["r0"], r0, rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(inter["r1"], r1, rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(inter["r2"], r2, rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(inter["final"], final, rtol=RTOL, atol=1e-6)
    # by hand: node 3's 1-hop part of r1 is r0[2] / sqrt(3); its 2-hop part (r0[0] + r0[1]) / sqrt(2)
    np.testing.assert_allclose(inter["r1"][3], np.r_[r0[2] / S3, (r0[0] + r0[1]) / S2], rtol=RTOL)
    np.testing.assert_allclose(inter["r1"][2, p:], 0.0)  # node 2 has no 2-hop neighbour
    np.testing.assert_allclose(np.asarray(logits, np.float64), final @ wc + bc, rtol=RTOL, atol=1e-5)


def test_aggregate_matches_dense():
    g = triangle_pendant()
    gt = normalized_gcn(g)
    h = jnp.asarray(np.random.default_rng(2).normal(size=(4, 3)), jnp.float32)
    for sorted_ in (False, True):
        out = jax.jit(aggregate, static_argnames="receivers_sorted")(gt, h, receivers_sorted=sorted_)
        np.testing.assert_allclose(np.asarray(out), dense(gt, 4) @ np.asarray(h), rtol=RTOL, atol=1e-6)


def test_param_counts():
    d, k = 10, 3
    assert gnn_param_count("gcn", d, k) == d * 64 + 64 + 64 * k + k
    assert gnn_param_count("gcn", d, k, hidden=(8, 4)) == d * 8 + 8 + 8 * 4 + 4 + 4 * k + k
    assert gnn_param_count("h2gcn", d, k) == d * 64 + 7 * 64 * k + k
    assert gnn_param_count("h2gcn", d, k, hidden=16, num_rounds=1) == d * 16 + 3 * 16 * k + k
    with pytest.raises(ValueError, match="model"):
        gnn_param_count("gat", d, k)


# ---------------------------------------------------------------------------------------------- training
CFG = TrainConfig(epochs=150, patience=40)
K = 3


def planted_partition(seed, n=240, p_in=0.06, p_out=0.004, d=16, signal=0.6, splits=2):
    """Homophilous planted partition; features alone are weak (an MLP reaches ~65% accuracy here)."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(K), n // K)
    rng.shuffle(y)
    prob = np.where(y[:, None] == y[None, :], p_in, p_out)
    r, c = np.nonzero(np.triu(rng.random((n, n)) < prob, 1))
    g = Graph.from_edge_index(np.stack([r, c]), n)
    mu = rng.normal(size=(K, d))
    mu /= np.linalg.norm(mu, axis=1, keepdims=True)
    x = (signal * np.sqrt(d) / 2 * mu[y] + rng.normal(size=(n, d))).astype(np.float32)
    tr = np.zeros((splits, n), bool)
    va = np.zeros((splits, n), bool)
    for i in range(splits):
        perm = rng.permutation(n)
        tr[i, perm[:60]] = True
        va[i, perm[60:120]] = True
    return g, x, y, tr, va


@pytest.fixture(scope="module")
def task():
    return planted_partition(0)


def _fit(name, key, g, x, y, tr, va):
    f = fit_gcn if name == "gcn" else fit_h2gcn
    return f(key, g, x, y, tr, va, num_classes=K, cfg=CFG)


@pytest.fixture(scope="module", params=["gcn", "h2gcn"])
def fitted(request, task):
    """Per-split fits and the vmapped fit of the same splits/keys (2 compilations per model)."""
    name = request.param
    g, x, y, tr, va = task
    keys = jax.random.split(jax.random.key(42), tr.shape[0])
    t0 = time.perf_counter()
    single = [_fit(name, keys[i], g, x, y, tr[i], va[i]) for i in range(tr.shape[0])]
    jax.block_until_ready(single[-1].prior)
    t1 = time.perf_counter()
    splits_fn = fit_gcn_splits if name == "gcn" else fit_h2gcn_splits
    batched = splits_fn(keys, g, x, y, tr, va, num_classes=K, cfg=CFG)
    jax.block_until_ready(batched.prior)
    print(f"\n{name}: per-split fits {t1 - t0:.2f}s, vmapped fit {time.perf_counter() - t1:.2f}s")
    return name, keys, single, batched


def test_training_reaches_high_accuracy(task, fitted):
    name, _, single, _ = fitted
    g, x, y, tr, va = task
    for i, res in enumerate(single):
        assert isinstance(res, GNNResult)
        assert res.prior.shape == (g.num_nodes, K)
        np.testing.assert_allclose(np.asarray(res.prior).sum(1), 1.0, rtol=1e-5)
        test = ~(tr[i] | va[i])
        acc = float(np.mean(np.argmax(np.asarray(res.prior), 1)[test] == y[test]))
        assert acc >= 0.9, f"{name} split {i}: test accuracy {acc:.3f}"
        assert float(res.info.best_val_accuracy) >= 0.85
        assert 0 <= int(res.info.best_epoch) < int(res.info.epochs_run) <= CFG.epochs


@pytest.mark.cpu_bitwise
def test_vmapped_splits_equal_per_split(task, fitted):
    _, _, single, batched = fitted
    s = len(single)
    assert batched.prior.shape == (s, task[0].num_nodes, K)
    for i, res in enumerate(single):
        np.testing.assert_array_equal(np.asarray(batched.info.best_epoch[i]), np.asarray(res.info.best_epoch))
        np.testing.assert_array_equal(np.asarray(batched.info.epochs_run[i]), np.asarray(res.info.epochs_run))
        np.testing.assert_allclose(np.asarray(batched.prior[i]), np.asarray(res.prior), rtol=1e-4, atol=1e-5)
        for a, b in zip(jax.tree_util.tree_leaves(batched.params), jax.tree_util.tree_leaves(res.params)):
            np.testing.assert_allclose(np.asarray(a[i]), np.asarray(b), rtol=1e-3, atol=1e-4)


@pytest.mark.cpu_bitwise
def test_labels_outside_train_val_are_not_read(task, fitted):
    name, keys, single, _ = fitted
    g, x, y, tr, va = task
    seen = tr[0] | va[0]
    y_alt = np.where(seen, y, np.asarray((y + 1) % K))
    y_neg = np.where(seen, y, -1)
    assert np.any(y_alt != y)
    for labels in (y_alt, y_neg):
        res = _fit(name, keys[0], g, x, labels, tr[0], va[0])
        np.testing.assert_array_equal(np.asarray(res.prior), np.asarray(single[0].prior))
    # ...whereas the train labels do matter
    y_flip = np.where(tr[0], (y + 1) % K, y)
    res = _fit(name, keys[0], g, x, y_flip, tr[0], va[0])
    assert not np.allclose(np.asarray(res.prior), np.asarray(single[0].prior))


# -------------------------------------------------------------------------------------------- validation
@pytest.mark.parametrize("fit", [fit_gcn, fit_h2gcn])
def test_bad_inputs_raise(fit):
    g = path4()
    x = np.ones((4, 2), np.float32)
    y = np.array([0, 1, 0, 1])
    tr = np.array([True, True, False, False])
    va = np.array([False, False, True, False])
    key = jax.random.key(0)
    kw = dict(num_classes=2)
    with pytest.raises(ValueError, match="features"):
        fit(key, g, np.ones((5, 2)), y, tr, va, **kw)
    with pytest.raises(ValueError, match="NaN"):
        fit(key, g, np.where(np.eye(4, 2) > 0, np.nan, 1.0), y, tr, va, **kw)
    with pytest.raises(ValueError, match="labels"):
        fit(key, g, x, y[:3], tr, va, **kw)
    with pytest.raises(ValueError, match="labels"):
        fit(key, g, x, np.array([0, 2, 0, 1]), tr, va, **kw)  # train label out of range
    with pytest.raises(ValueError, match="train_mask"):
        fit(key, g, x, y, tr.astype(int), va, **kw)
    with pytest.raises(ValueError, match="train_mask"):
        fit(key, g, x, y, np.zeros(4, bool), va, **kw)
    with pytest.raises(ValueError, match="val_mask"):
        fit(key, g, x, y, tr, va[:3], **kw)
    with pytest.raises(ValueError, match="dropout"):
        fit(key, g, x, y, tr, va, dropout=1.0, **kw)
    with pytest.raises(ValueError, match="hidden"):
        fit(key, g, x, y, tr, va, hidden=8 if fit is fit_gcn else (8,), **kw)
    with pytest.raises(ValueError, match="graph"):
        fit(key, None, x, y, tr, va, **kw)


def test_bad_split_inputs_and_two_hop_raise():
    g = path4()
    x = np.ones((4, 2), np.float32)
    y = np.array([0, 1, 0, 1])
    tr = np.array([[True, True, False, False]] * 2)
    va = np.array([[False, False, True, False]] * 2)
    keys = jax.random.split(jax.random.key(0), 2)
    with pytest.raises(ValueError, match="val_masks"):
        fit_gcn_splits(keys, g, x, y, tr, va[:1], num_classes=2)
    with pytest.raises(ValueError, match="keys"):
        fit_h2gcn_splits(keys[:1], g, x, y, tr, va, num_classes=2)
    with pytest.raises(ValueError, match="train_masks"):
        fit_gcn_splits(keys, g, x, y, tr[:, :3], va, num_classes=2)
    with pytest.raises(ValueError, match="two_hop"):
        fit_h2gcn(keys[0], g, x, y, tr[0], va[0], num_classes=2, two_hop=Graph.from_edge_index(np.zeros((2, 0), int), 5))


# --------------------------------------------------------------- GraphSAGE / GAT / tuned GNN
from jax.flatten_util import ravel_pytree  # noqa: E402

from jaxclp.gnn import (GATConv, GNNSpec, SAGEConv, TunedGNN, attention_graph, fit_gnn,  # noqa: E402
                        fit_gnn_splits, mean_graph, tuned_gnn_graph, tuned_gnn_param_count)


def _np_leaky(v, slope=0.2):
    return np.where(v > 0, v, slope * v)


def test_sage_layer_by_hand():
    g = triangle_pendant()
    h = np.arange(12, dtype=np.float64).reshape(4, 3) / 7.0 - 0.5
    layer = SAGEConv(2)
    gt = mean_graph(g)
    params = layer.init(jax.random.PRNGKey(0), gt, jnp.asarray(h, jnp.float32))
    w_self = np.asarray(params["params"]["self"]["kernel"], np.float64)
    w_nb = np.asarray(params["params"]["neigh"]["kernel"], np.float64)
    b = np.asarray(params["params"]["bias"], np.float64) + 0.3
    params = jax.tree_util.tree_map(lambda x: x, params)
    params["params"]["bias"] = jnp.asarray(b, jnp.float32)
    out = np.asarray(layer.apply(params, gt, jnp.asarray(h, jnp.float32)), np.float64)
    # neighbours: 0:{1,2} 1:{0,2} 2:{0,1,3} 3:{2}; mean aggregation, no self-loop
    nb = {0: [1, 2], 1: [0, 2], 2: [0, 1, 3], 3: [2]}
    want = np.stack([h[i] @ w_self + h[nb[i]].mean(0) @ w_nb + b for i in range(4)])
    np.testing.assert_allclose(out, want, rtol=RTOL, atol=1e-6)


@pytest.mark.parametrize("sep", [False, True])
def test_gat_attention_weights_and_layer_by_hand(sep):
    g = triangle_pendant()
    rng = np.random.default_rng(3)
    h = rng.normal(size=(4, 3))
    heads, width = 2, 4
    layer = GATConv(width, heads=heads, sep=sep)
    gt = attention_graph(g, self_loops=not sep)
    params = layer.init(jax.random.PRNGKey(1), gt, jnp.asarray(h, jnp.float32))
    p = params["params"]
    out, state = layer.apply(params, gt, jnp.asarray(h, jnp.float32), mutable=["intermediates"])
    alpha = np.asarray(state["intermediates"]["alpha"][0], np.float64)  # (E, H)
    W = np.asarray(p["kernel"]["kernel"], np.float64)
    a_s, a_d = np.asarray(p["att_src"], np.float64), np.asarray(p["att_dst"], np.float64)
    wh = (h @ W).reshape(4, heads, width // heads)
    nb = {0: [1, 2], 1: [0, 2], 2: [0, 1, 3], 3: [2]}
    if not sep:
        nb = {i: sorted(v + [i]) for i, v in nb.items()}
    want = np.zeros((4, width))
    att = {}
    for i in range(4):
        for k in range(heads):
            e = np.array([_np_leaky(a_s[k] @ wh[j, k] + a_d[k] @ wh[i, k]) for j in nb[i]])
            w = np.exp(e - e.max())
            w /= w.sum()
            for j, wj in zip(nb[i], w):
                att[(j, i, k)] = wj
            want[i, k * (width // heads):(k + 1) * (width // heads)] = w @ wh[nb[i], k]
    if sep:
        want += h @ np.asarray(p["self"]["kernel"], np.float64)
    want += np.asarray(p["bias"], np.float64)
    np.testing.assert_allclose(np.asarray(out, np.float64), want, rtol=1e-5, atol=1e-6)
    # the per-edge attention weights against the hand computation; masked edges/loops get 0
    s, r, m = np.asarray(gt.senders), np.asarray(gt.receivers), np.asarray(gt.edges)
    for e in range(len(s)):
        for k in range(heads):
            expect = att.get((int(s[e]), int(r[e]), k), 0.0) if m[e] > 0 else 0.0
            assert alpha[e, k] == pytest.approx(expect, abs=1e-6)
    # weights of every receiver sum to one per head
    sums = np.zeros((4, heads))
    np.add.at(sums, r, alpha)
    np.testing.assert_allclose(sums, 1.0, rtol=1e-6)


def test_gat_sep_with_input_self_loops_ignores_them():
    g = undirected([(0, 1), (1, 2), (2, 3)], 4, self_loops="add")
    gt = attention_graph(g, self_loops=False)
    assert float(jnp.sum(jnp.where(gt.senders == gt.receivers, gt.edges, 0.0))) == 0.0
    gt2 = attention_graph(g, self_loops=True)  # exactly one active loop per node
    loops = np.asarray((gt2.senders == gt2.receivers) & (gt2.edges > 0))
    assert np.bincount(np.asarray(gt2.receivers)[loops], minlength=4).tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize("spec, d, k, want", [
    # input (d p + p) + blocks + output (p K + K)
    (GNNSpec("gcn", hidden=8, num_layers=2), 5, 3, (5 * 8 + 8) + 2 * (64 + 8) + (8 * 3 + 3)),
    (GNNSpec("gcn", hidden=8, num_layers=2, sep=True), 5, 3, 48 + 2 * (2 * 64 + 8) + 27),
    (GNNSpec("sage", hidden=8, num_layers=3, norm=True), 5, 3, 48 + 3 * (2 * 64 + 8 + 16) + 16 + 27),
    (GNNSpec("gat", hidden=8, num_layers=1, heads=2), 5, 3, 48 + (64 + 2 * 8 + 8) + 27),
    (GNNSpec("gat", hidden=8, num_layers=1, heads=2, sep=True), 5, 3, 48 + (2 * 64 + 2 * 8 + 8) + 27),
    (GNNSpec("gcn", hidden=8, num_layers=0), 5, 3, 48 + 27),
    # Platonov et al.'s feed-forward block adds a (p, p) dense layer with bias per block
    (GNNSpec("sage", hidden=8, num_layers=3, norm=True, ffn=True), 5, 3,
     48 + 3 * (2 * 64 + 8 + 16 + 64 + 8) + 16 + 27),
])
def test_tuned_param_counts(spec, d, k, want):
    assert tuned_gnn_param_count(spec, d, k) == want


def test_tuned_gnn_ffn_block_by_hand():
    """SAGE block with ``ffn`` on the triangle + pendant graph, float64, no dropout: input ReLU(x W0 + b0), then
    h + Dense(GELU(h Ws + (D^-1 A h) Wn + b)) (residual, no LayerNorm), then the output layer — by numpy."""
    from scipy.special import erf
    g = triangle_pendant()
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 3))
    model = TunedGNN(conv="sage", num_classes=2, hidden=4, num_layers=1, residual=True, dropout=0.0, ffn=True)
    gt = tuned_gnn_graph(g, "sage", False, nodes=jnp.asarray(x))
    gt = gt._replace(edges=gt.edges.astype(jnp.float64))
    params = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64),
                                    model.init(jax.random.PRNGKey(3), gt, train=False))["params"]
    got = np.asarray(model.apply({"params": params}, gt, train=False))
    mean = np.zeros((4, 4))  # the aggregation matrix of the propagation graph (D^-1 A for SAGE)
    np.add.at(mean, (np.asarray(gt.receivers), np.asarray(gt.senders)), np.asarray(gt.edges))
    np.testing.assert_allclose(mean.sum(1), 1.0)
    dense = lambda p, v: v @ p["kernel"] + p.get("bias", 0.0)  # noqa: E731
    h = np.maximum(dense(params["input"], x), 0.0)
    conv = params["conv0"]
    z = h @ conv["self"]["kernel"] + (mean @ h) @ conv["neigh"]["kernel"] + conv["bias"]
    gelu = 0.5 * z * (1.0 + erf(z / np.sqrt(2.0)))
    h = h + dense(params["ffn0"], gelu)
    want = dense(params["output"], h)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_tuned_gnn_gradient_matches_finite_differences():
    g = triangle_pendant()
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(4, 3)), jnp.float64)
    y = jnp.array([0, 1, 1, 0])
    for spec in (GNNSpec("gat", hidden=4, num_layers=2, heads=2, sep=True, residual=True, norm=True, dropout=0.0),
                 GNNSpec("gat", hidden=4, num_layers=1, heads=2, dropout=0.0),
                 GNNSpec("sage", hidden=4, num_layers=2, residual=True, dropout=0.0),
                 GNNSpec("sage", hidden=4, num_layers=2, residual=True, norm=True, dropout=0.0, ffn=True)):
        model = TunedGNN(conv=spec.conv, num_classes=2, hidden=4, num_layers=spec.num_layers, sep=spec.sep,
                         residual=spec.residual, norm=spec.norm, dropout=0.0, heads=spec.heads, ffn=spec.ffn)
        gt = tuned_gnn_graph(g, spec.conv, spec.sep, nodes=x)
        gt = gt._replace(edges=gt.edges.astype(jnp.float64))
        params = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64),
                                        model.init(jax.random.PRNGKey(2), gt, train=False))
        flat, unravel = ravel_pytree(params)
        assert flat.dtype == jnp.float64

        def loss(v):
            logits = model.apply(unravel(v), gt, train=False)
            return jnp.mean(jax.nn.logsumexp(logits, -1) - logits[jnp.arange(4), y])

        grad = np.asarray(jax.jit(jax.grad(loss))(flat))
        loss = jax.jit(loss)
        eps = 1e-6
        idx = rng.choice(flat.size, 12, replace=False)
        for i in idx:
            e = jnp.zeros_like(flat).at[i].set(eps)
            fd = (float(loss(flat + e)) - float(loss(flat - e))) / (2 * eps)
            assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("spec", [
    pytest.param(GNNSpec("sage", hidden=16, num_layers=2, residual=True, norm=True, dropout=0.1),
                 marks=pytest.mark.slow),
    GNNSpec("gat", hidden=16, num_layers=2, heads=2, sep=True, residual=True, dropout=0.1)])
def test_tuned_gnn_learns_and_vmaps(spec):
    # bipartite graph between two classes of 20 nodes; half the nodes carry a one-hot of their class, the
    # other half all-zero features: those can only be classified from their (opposite-class) neighbours
    rng = np.random.default_rng(0)
    n = 40
    y = np.repeat([0, 1], 20)
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if y[i] != y[j] and rng.random() < 0.3]
    g = undirected(edges, n)
    informative = rng.random(n) < 0.5
    x = (np.eye(2)[y] * informative[:, None]).astype(np.float32)
    perm = rng.permutation(n)
    train = np.zeros(n, bool); train[perm[:20]] = True
    val = np.zeros(n, bool); val[perm[20:30]] = True
    cfg = TrainConfig(lr=0.01, epochs=150, patience=50, weight_decay=0.0)
    res = fit_gnn(jax.random.PRNGKey(0), g, x, jnp.asarray(y), jnp.asarray(train), jnp.asarray(val), num_classes=2,
                  spec=spec, cfg=cfg)
    test = ~(train | val)
    pred = np.argmax(np.asarray(res.prior), 1)
    assert float(np.mean(pred[test] == y[test])) >= 0.9
    assert float(np.mean(pred[test & ~informative] == y[test & ~informative])) >= 0.85
    np.testing.assert_allclose(np.asarray(res.prior).sum(1), 1.0, rtol=1e-5)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    rs = fit_gnn_splits(keys, g, x, jnp.asarray(y), jnp.asarray(np.stack([train, train])),
                        jnp.asarray(np.stack([val, val])), num_classes=2, spec=spec, cfg=cfg, chunk=1)
    assert rs.prior.shape == (2, n, 2)
    one = fit_gnn(keys[1], g, x, jnp.asarray(y), jnp.asarray(train), jnp.asarray(val), num_classes=2,
                  spec=spec, cfg=cfg)
    np.testing.assert_allclose(np.asarray(rs.prior[1]), np.asarray(one.prior), atol=2e-4)


def test_tuned_gnn_bad_inputs_raise():
    g = path4()
    x = np.ones((4, 2), np.float32)
    y = jnp.array([0, 1, 0, 1])
    tm = jnp.array([True, True, False, False])
    vm = jnp.array([False, False, True, False])
    with pytest.raises(ValueError, match="conv"):
        fit_gnn(jax.random.PRNGKey(0), g, x, y, tm, vm, num_classes=2, spec=GNNSpec("gin"))
    with pytest.raises(ValueError, match="heads"):
        fit_gnn(jax.random.PRNGKey(0), g, x, y, tm, vm, num_classes=2, spec=GNNSpec("gat", hidden=6, heads=4))
    with pytest.raises(ValueError, match="dropout"):
        fit_gnn(jax.random.PRNGKey(0), g, x, y, tm, vm, num_classes=2, spec=GNNSpec("sage", dropout=1.0))
    with pytest.raises(ValueError, match="features"):
        fit_gnn(jax.random.PRNGKey(0), g, x[:3], y, tm, vm, num_classes=2, spec=GNNSpec("sage"))


@pytest.mark.parametrize("p", [2, 5])
def test_symmetric_aggregate_equals_the_gather_path_with_gradients(p):
    """aggregate(..., symmetric=True) runs the CSR kernel (p >= 3) whose gradient reuses the same CSR: equal
    values and gradients (w.r.t. h and the edge coefficients) to the gather + segment_sum path, float64."""
    from jaxclp.gnn import aggregate, gcn_normalized_graph

    rng = np.random.default_rng(3)
    n = 40
    s, r = rng.integers(0, n, 150), rng.integers(0, n, 150)
    g = jaxclp.Graph.from_edge_index(np.stack([s, r]), n, weights=rng.uniform(0.5, 2.0, 150))
    assert g.symmetric
    gt = gcn_normalized_graph(g)
    h = jnp.asarray(rng.normal(size=(n, p)))
    w = jnp.asarray(rng.normal(size=(n, p)))

    def loss(edges, h, sym):
        return jnp.sum(jnp.tanh(aggregate(gt._replace(edges=edges), h, receivers_sorted=True, symmetric=sym)) * w)

    edges = gt.edges.astype(jnp.float64)
    np.testing.assert_allclose(aggregate(gt, h, receivers_sorted=True, symmetric=True),
                               aggregate(gt, h, receivers_sorted=True), rtol=1e-12, atol=1e-12)
    for got, want in zip(jax.grad(loss, argnums=(0, 1))(edges, h, True),
                         jax.grad(loss, argnums=(0, 1))(edges, h, False)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # and under vmap over a batch of representations (how fit_*_splits trains several splits at once)
    hb = jnp.stack([h, 2 * h + 1])
    np.testing.assert_allclose(jax.vmap(lambda x: aggregate(gt, x, receivers_sorted=True, symmetric=True))(hb),
                               jax.vmap(lambda x: aggregate(gt, x, receivers_sorted=True))(hb), rtol=1e-12,
                               atol=1e-12)


def test_symmetric_flag_follows_the_graph():
    """GCN/H2GCN take the CSR path only for undirected graphs (a directed graph's matrix is not symmetric)."""
    import jaxclp.gnn as gnn

    rng = np.random.default_rng(4)
    n = 30
    ei = np.stack([rng.integers(0, n, 90), rng.integers(0, n, 90)])
    seen = []
    orig = gnn.layers.csr_matmul_symmetric
    gnn.layers.csr_matmul_symmetric = lambda *a: seen.append(1) or orig(*a)
    try:
        for symmetrize in (False, True):
            seen.clear()
            g = jaxclp.Graph.from_edge_index(ei, n, symmetrize=symmetrize)
            x = rng.normal(size=(n, 4))
            y = rng.integers(0, 3, n)
            tm = np.zeros(n, bool)
            tm[:15] = True
            vm = ~tm
            jax.clear_caches()
            fit_gcn(jax.random.PRNGKey(0), g, x, y, tm, vm, num_classes=3, hidden=(8,),
                    cfg=jaxclp.TrainConfig(epochs=3))
            fit_h2gcn(jax.random.PRNGKey(0), g, x, y, tm, vm, num_classes=3, hidden=4,
                      cfg=jaxclp.TrainConfig(epochs=3))
            assert bool(seen) == (g.symmetric and symmetrize), (symmetrize, len(seen))
    finally:
        gnn.layers.csr_matmul_symmetric = orig


def test_tuned_gcn_symmetric_path_equals_the_gather_path():
    """TunedGNN's GCN and GCN-sep blocks on an undirected graph take the CSR kernel (symmetric=True): same logits
    and parameter gradients as the gather path, float64."""
    from jaxclp.gnn import TunedGNN, tuned_gnn_graph

    rng = np.random.default_rng(5)
    n = 36
    ei = np.stack([rng.integers(0, n, 110), rng.integers(0, n, 110)])
    g = jaxclp.Graph.from_edge_index(ei, n)
    assert g.symmetric
    x = jnp.asarray(rng.normal(size=(n, 5)))
    w = jnp.asarray(rng.normal(size=(n, 3)))
    for sep in (False, True):
        gt = tuned_gnn_graph(g, "gcn", sep, nodes=x)
        gt = gt._replace(edges=gt.edges.astype(jnp.float64))
        kw = dict(conv="gcn", num_classes=3, hidden=8, num_layers=2, sep=sep, residual=True, norm=True,
                  receivers_sorted=True)
        params = TunedGNN(**kw).init(jax.random.PRNGKey(0), gt, train=False)

        @functools.partial(jax.jit, static_argnums=1)
        def loss_and_grad(p, sym):
            f = lambda p: jnp.sum(jnp.tanh(TunedGNN(**kw, symmetric=sym).apply(p, gt, train=False)) * w)  # noqa
            return jax.value_and_grad(f)(p)

        (la, ga), (lb, gb) = loss_and_grad(params, True), loss_and_grad(params, False)
        np.testing.assert_allclose(la, lb, rtol=1e-12)
        for a, b in zip(jax.tree_util.tree_leaves(ga), jax.tree_util.tree_leaves(gb)):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)



def test_fit_gnn_takes_the_symmetric_path_from_the_graph():
    """fit_gnn: GCN and GCN-sep on an undirected graph call the CSR kernel; SAGE and directed graphs do not
    (4 compiles of the training loop: slow)."""
    import jaxclp.gnn as gnn
    from jaxclp.gnn import GNNSpec, fit_gnn

    rng = np.random.default_rng(5)
    n = 36
    ei = np.stack([rng.integers(0, n, 110), rng.integers(0, n, 110)])
    g = jaxclp.Graph.from_edge_index(ei, n)
    x = rng.normal(size=(n, 5))
    seen = []
    orig = gnn.layers.csr_matmul_symmetric
    gnn.layers.csr_matmul_symmetric = lambda *a: seen.append(1) or orig(*a)
    try:
        y = rng.integers(0, 3, n)
        tm = np.zeros(n, bool)
        tm[:12] = True
        directed = jaxclp.Graph.from_edge_index(ei, n, symmetrize=False)
        for conv, sep, graph, want in (("gcn", False, g, True), ("gcn", True, g, True), ("sage", False, g, False),
                                       ("gcn", True, directed, False)):
            seen.clear()
            fit_gnn(jax.random.PRNGKey(0), graph, np.asarray(x), y, tm, ~tm, num_classes=3,
                    spec=GNNSpec(conv, hidden=8, num_layers=1, sep=sep), cfg=jaxclp.TrainConfig(epochs=1))
            assert bool(seen) == (want and bool(graph.symmetric)), (conv, sep, graph.symmetric, len(seen))
    finally:
        gnn.layers.csr_matmul_symmetric = orig


@pytest.mark.parametrize("directed", [False, True])
def test_tuned_gnn_csr_plan_equals_gather_path(directed):
    """Every conv with a transpose plan (the CSR kernel forward and in the gradient; GAT's softmax divided per
    node after one product) gives the logits and parameter gradients of the gather + segment-sum path, float64,
    on a random graph with isolated nodes (directed: a non-symmetric D^-1/2 A D^-1/2 for GCN too)."""
    from jaxclp.sparse import transpose_plan
    rng = np.random.default_rng(7)
    n = 40
    e = rng.integers(0, n - 3, (2, 150))  # nodes n-3.. have no edges
    g = Graph.from_edge_index(e, n, symmetrize=not directed)
    x = jnp.asarray(rng.normal(size=(n, 5)))
    y = jnp.asarray(rng.integers(0, 3, n))
    for spec in (GNNSpec("gat", hidden=8, num_layers=2, heads=2, residual=True, norm=True, dropout=0.0),
                 GNNSpec("gat", hidden=8, num_layers=1, heads=4, sep=True, dropout=0.0),
                 GNNSpec("sage", hidden=8, num_layers=2, residual=True, dropout=0.0, ffn=True),
                 GNNSpec("gcn", hidden=8, num_layers=2, dropout=0.0),
                 GNNSpec("gcn", hidden=8, num_layers=1, sep=True, dropout=0.0)):
        model = TunedGNN(conv=spec.conv, num_classes=3, hidden=8, num_layers=spec.num_layers, sep=spec.sep,
                         residual=spec.residual, norm=spec.norm, dropout=0.0, heads=spec.heads, ffn=spec.ffn,
                         receivers_sorted=True)
        gt = tuned_gnn_graph(g, spec.conv, spec.sep, nodes=x)
        gt = gt._replace(edges=gt.edges.astype(jnp.float64))
        plan = transpose_plan(gt.senders, gt.receivers, n)
        params = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64),
                                        model.init(jax.random.PRNGKey(2), gt, train=False))

        def loss(p, pl):
            logits = model.apply(p, gt, pl, train=False)
            return jnp.mean(jax.nn.logsumexp(logits, -1) - logits[jnp.arange(n), y]), logits

        both = jax.jit(jax.value_and_grad(loss, has_aux=True))  # one program per path (op by op compiles ~10x more)
        (l0, z0), g0 = both(params, None)
        (l1, z1), g1 = both(params, plan)
        np.testing.assert_allclose(np.asarray(z1), np.asarray(z0), rtol=1e-10, atol=1e-12, err_msg=str(spec))
        np.testing.assert_allclose(np.asarray(ravel_pytree(g1)[0]), np.asarray(ravel_pytree(g0)[0]), rtol=1e-9,
                                   atol=1e-12, err_msg=str(spec))


def test_resnet_blocks_by_hand_and_graph_free():
    """conv="none" (Platonov et al.'s ResNet): input ReLU(x W0 + b0), per block h + Dense_ffn(GELU(Dense(h))),
    output layer — by numpy, float64; the logits do not depend on the graph; parameter count by formula."""
    from scipy.special import erf
    rng = np.random.default_rng(4)
    x = rng.normal(size=(4, 3))
    model = TunedGNN(conv="none", num_classes=2, hidden=4, num_layers=2, residual=True, dropout=0.0, ffn=True)
    gt = tuned_gnn_graph(triangle_pendant(), "none", False, nodes=jnp.asarray(x))
    params = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64),
                                    model.init(jax.random.PRNGKey(5), gt, train=False))["params"]
    got = np.asarray(model.apply({"params": params}, gt, train=False))
    other = tuned_gnn_graph(path4(), "none", False, nodes=jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(model.apply({"params": params}, other, train=False)), got)
    dense = lambda p, v: v @ p["kernel"] + p.get("bias", 0.0)  # noqa: E731
    h = np.maximum(dense(params["input"], x), 0.0)
    for i in range(2):
        z = dense(params[f"conv{i}"], h)
        h = h + dense(params[f"ffn{i}"], 0.5 * z * (1.0 + erf(z / np.sqrt(2.0))))
    np.testing.assert_allclose(got, dense(params["output"], h), rtol=1e-12, atol=1e-12)
    d, p, k, layers = 7, 8, 3, 3
    spec = GNNSpec("none", hidden=p, num_layers=layers, residual=True, norm=True, ffn=True)
    assert tuned_gnn_param_count(spec, d, k) == d * p + p + layers * (2 * (p * p + p) + 2 * p) + p * k + k + 2 * p


@pytest.mark.cpu_bitwise
def test_sparse_features_fit_like_dense():
    """Every GNN model takes scipy.sparse / SparseFeatures input (first layer a sparse product, never densified) and
    fits the same model as on the dense matrix: same parameters' shapes, priors equal to float32 rounding where
    dropout does not touch the input (Kipf's GCN drops its input features, so its run is at dropout 0). TunedGNN's
    input projection is the same layer for every conv (SAGE here; GAT and the graph-free blocks share it)."""
    import scipy.sparse as sp

    from jaxclp.features import as_features
    from jaxclp.gnn import fit_gcn, fit_h2gcn
    rng = np.random.default_rng(11)
    n, d = 60, 30
    g = Graph.from_edge_index(rng.integers(0, n, (2, 200)), n)
    x = (rng.random((n, d)) < 0.1) * rng.random((n, d))
    xs = sp.csr_matrix(x)
    y = jnp.asarray(rng.integers(0, 3, n))
    tr = jnp.asarray(np.arange(n) % 3 == 0)
    va = jnp.asarray(np.arange(n) % 3 == 1)
    cfg = TrainConfig(epochs=30, lr=0.01)
    fits = [lambda f: fit_gcn(jax.random.PRNGKey(0), g, f, y, tr, va, num_classes=3, dropout=0.0, cfg=cfg),
            lambda f: fit_h2gcn(jax.random.PRNGKey(0), g, f, y, tr, va, num_classes=3, cfg=cfg)]
    spec = GNNSpec("sage", hidden=8, num_layers=2, residual=True, norm=True, ffn=True, dropout=0.2)
    fits.append(lambda f: fit_gnn(jax.random.PRNGKey(0), g, f, y, tr, va, num_classes=3, spec=spec, cfg=cfg))
    for fit in fits:
        dense, sparse, coo = fit(jnp.asarray(x, jnp.float32)), fit(xs), fit(as_features(xs))
        assert (jax.tree_util.tree_structure(dense.params) == jax.tree_util.tree_structure(sparse.params))
        np.testing.assert_allclose(np.asarray(sparse.prior), np.asarray(dense.prior), atol=2e-5)
        np.testing.assert_array_equal(np.asarray(coo.prior), np.asarray(sparse.prior))
    drop_in = fit_gnn(jax.random.PRNGKey(0), g, xs, y, tr, va, num_classes=3, cfg=cfg,
                      spec=GNNSpec("sage", hidden=8, num_layers=1, input_dropout=True, dropout=0.5))
    assert np.all(np.isfinite(np.asarray(drop_in.prior)))
    with pytest.raises(ValueError, match=r"shape \(60, \?\) \(one row per node\)"):
        fit_gnn(jax.random.PRNGKey(0), g, sp.csr_matrix(x[:50]), y, tr, va, num_classes=3)


@pytest.mark.cpu_bitwise
def test_sparse_enough_dense_features_enter_as_sparse(monkeypatch):
    """as_input_features: a dense input with <= 5 % nonzeros (and >= 2^16 entries) becomes SparseFeatures, a denser
    or smaller one stays dense; fit_gnn / fit_h2gcn on such a dense matrix equal the fit on its CSR bit for bit
    (the same program), and stay within float32 rounding of the dense product."""
    import scipy.sparse as sp

    from jaxclp.features import SPARSE_INPUT_DENSITY, SparseFeatures, as_input_features
    from jaxclp.gnn import fit_h2gcn
    rng = np.random.default_rng(12)
    n, d = 60, 1200
    x = (rng.random((n, d)) < 0.02) * rng.random((n, d))
    assert np.count_nonzero(x) <= SPARSE_INPUT_DENSITY * x.size and x.size >= 1 << 16
    assert isinstance(as_input_features(x, jnp.float32), SparseFeatures)
    assert isinstance(as_input_features(jnp.asarray(x)), SparseFeatures)
    assert not isinstance(as_input_features(x[:, :100]), SparseFeatures)  # too small
    assert not isinstance(as_input_features(np.where(x > 0, x, 0.5)), SparseFeatures)  # dense
    g = Graph.from_edge_index(rng.integers(0, n, (2, 200)), n)
    y = jnp.asarray(rng.integers(0, 3, n))
    tr, va = jnp.asarray(np.arange(n) % 3 == 0), jnp.asarray(np.arange(n) % 3 == 1)
    cfg = TrainConfig(epochs=20, lr=0.01)
    spec = GNNSpec("sage", hidden=8, num_layers=1, residual=True, dropout=0.2)
    a = fit_gnn(jax.random.PRNGKey(0), g, x, y, tr, va, num_classes=3, spec=spec, cfg=cfg)
    b = fit_gnn(jax.random.PRNGKey(0), g, sp.csr_matrix(x), y, tr, va, num_classes=3, spec=spec, cfg=cfg)
    np.testing.assert_array_equal(np.asarray(a.prior), np.asarray(b.prior))
    h = fit_h2gcn(jax.random.PRNGKey(0), g, x, y, tr, va, num_classes=3, cfg=cfg)
    hs = fit_h2gcn(jax.random.PRNGKey(0), g, sp.csr_matrix(x), y, tr, va, num_classes=3, cfg=cfg)
    np.testing.assert_array_equal(np.asarray(h.prior), np.asarray(hs.prior))
    monkeypatch.setattr(jaxclp.features, "SPARSE_INPUT_DENSITY", 0.0)  # the dense product
    ad = fit_gnn(jax.random.PRNGKey(0), g, x, y, tr, va, num_classes=3, spec=spec, cfg=cfg)
    np.testing.assert_allclose(np.asarray(ad.prior), np.asarray(a.prior), atol=2e-5)


def test_h2gcn_takes_the_two_hop_graph_as_a_value(monkeypatch):
    """The 2-hop graph is a value, not a cache: fit_h2gcn / fit_h2gcn_splits / h2gcn_normalized_graphs build it per
    call where ``two_hop`` is omitted (nothing kept between calls: two fits, two builds) and never where it is
    passed; the fits with it passed are bit for bit those without."""
    from jaxclp import gnn

    built = []
    real = gnn.two_hop.two_hop_graph
    monkeypatch.setattr(gnn.two_hop, "two_hop_graph", lambda *a, **k: built.append(1) or real(*a, **k))
    rng = np.random.default_rng(3)
    g = Graph.from_edge_index(rng.integers(0, 30, (2, 90)), 30, symmetrize=True, self_loops="drop")
    x = rng.normal(size=(30, 4)).astype(np.float32)
    y = np.arange(30) % 3
    tr, va = np.arange(30) < 12, (np.arange(30) >= 12) & (np.arange(30) < 20)
    cfg = TrainConfig(epochs=3)
    a = fit_h2gcn(jax.random.PRNGKey(0), g, x, y, tr, va, num_classes=3, hidden=8, cfg=cfg)
    b = fit_h2gcn(jax.random.PRNGKey(0), g, x, y, ~tr & ~va, tr, num_classes=3, hidden=8, cfg=cfg)
    assert len(built) == 2  # one build per call: no state between them
    two_hop = real(g)
    built.clear()
    a2 = fit_h2gcn(jax.random.PRNGKey(0), g, x, y, tr, va, num_classes=3, hidden=8, cfg=cfg, two_hop=two_hop)
    b2 = fit_h2gcn(jax.random.PRNGKey(0), g, x, y, ~tr & ~va, tr, num_classes=3, hidden=8, cfg=cfg,
                   two_hop=two_hop)
    for got, want in ((a2, a), (b2, b)):
        np.testing.assert_array_equal(np.asarray(got.prior), np.asarray(want.prior))
    assert not np.array_equal(np.asarray(a.prior), np.asarray(b.prior))  # other masks: another fit
    keys = jax.random.split(jax.random.PRNGKey(1), 2)
    tms, vms = np.stack([tr, ~tr & ~va]), np.stack([va, tr])
    s2 = fit_h2gcn_splits(keys, g, x, y, tms, vms, num_classes=3, hidden=8, cfg=cfg, two_hop=two_hop)
    hops = h2gcn_normalized_graphs(g, two_hop)
    assert not built  # passed: never built
    s1 = fit_h2gcn_splits(keys, g, x, y, tms, vms, num_classes=3, hidden=8, cfg=cfg)
    np.testing.assert_array_equal(np.asarray(s1.prior), np.asarray(s2.prior))
    for got, want in zip(h2gcn_normalized_graphs(g), hops):
        for f in ("senders", "receivers", "edges"):
            np.testing.assert_array_equal(np.asarray(getattr(got, f)), np.asarray(getattr(want, f)))
    assert len(built) == 2
    with pytest.raises(ValueError, match="two_hop has 5 nodes"):
        fit_h2gcn(jax.random.PRNGKey(0), g, x, y, tr, va, num_classes=3, hidden=8, cfg=cfg,
                  two_hop=Graph.from_edge_index(np.zeros((2, 0), np.int64), 5))
    p = jaxclp.fit_prior("h2gcn", jax.random.PRNGKey(0), g, x, y, tr, va, 3, cfg, hidden=8, two_hop=two_hop)
    np.testing.assert_array_equal(np.asarray(p.prior), np.asarray(a.prior))  # the prior's option, passed through


def _grid_problem(n=30, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < (0.25 if y[i] == y[j] else 0.05)]
    x = (np.eye(3)[y] + rng.normal(0, 1.0, (n, 3))).astype(np.float32)
    train = rng.random(n) < 0.5
    val = ~train & (rng.random(n) < 0.5)
    return undirected(edges, n), x, jnp.asarray(y), jnp.asarray(train), jnp.asarray(val)


@pytest.mark.parametrize("conv,sep", [("gcn", False), pytest.param("sage", False, marks=pytest.mark.slow),
                                      pytest.param("gat", True, marks=pytest.mark.slow)])
# sage: 20 s of compiling, gat (a second conv + sep, not in clp's search) 17 s: kept by benchmarks/slow_tests.py
def test_fit_gnn_grid_trains_each_spec_as_fit_gnn(conv, sep):
    """Without dropout, the one-program grid is fit_gnn spec by spec: the same initial parameters (the union
    model's blocks are initialized by name), the same steps, the same early stop (float rounding apart); the
    returned parameters are the spec's own tree. Two specs: a plain one-block model inside the union of a
    three-block residual + LayerNorm + feed-forward one (the blocks it lacks, and the flags, masked out)."""
    from jaxclp.gnn import fit_gnn_grid

    g, x, y, tm, vm = _grid_problem()
    specs = [s._replace(dropout=0.0, hidden=8) for s in tuned_grid(conv, sep, depths=(3,),
                                                                   plain_depths=(1,))]
    cfg = TrainConfig(lr=0.01, epochs=25, patience=10, weight_decay=0.0)
    fits = fit_gnn_grid(jax.random.key(3), g, x, y, tm, vm, num_classes=3, specs=specs, cfg=cfg)
    for spec, got in zip(specs, fits):
        ref = fit_gnn(jax.random.key(3), g, x, y, tm, vm, num_classes=3, spec=spec, cfg=cfg)
        assert jax.tree_util.tree_structure(got.params) == jax.tree_util.tree_structure(ref.params), spec
        np.testing.assert_allclose(np.asarray(got.prior), np.asarray(ref.prior), atol=1e-4, err_msg=str(spec))
        assert int(got.info.best_epoch) == int(ref.info.best_epoch)


def test_fit_gnn_grid_halving_keeps_the_better_half_and_resumes_it_exactly():
    """Successive halving (rungs): at each rung the better half (rounded up) of the specs still training goes on,
    ranked by validation score so far (then loss); a spec that goes to the end gives bit for bit the result it gives
    without rungs, a halved one stops at its rung with its best parameters so far; bad rungs raise."""
    from jaxclp import gnn

    g, x, y, tm, vm = _grid_problem(n=40, seed=2)
    specs = tuned_grid("gcn", depths=(1, 2, 3), plain_depths=(1, 2), hidden=8)
    cfg = TrainConfig(lr=0.01, epochs=60, patience=15, weight_decay=0.0)
    key = jax.random.key(0)
    full = gnn.fit_gnn_grid(key, g, x, y, tm, vm, num_classes=3, specs=specs, cfg=cfg)
    rungs = (5, 10, 20)
    half = gnn.fit_gnn_grid(key, g, x, y, tm, vm, num_classes=3, specs=specs, cfg=cfg, rungs=rungs)
    # the same specs cut at each rung, to read the scores halving ranked on
    st = dict(num_classes=3, spec=gnn.grid._grid_union(specs), cfg=cfg)
    xf = jnp.asarray(x, jnp.float32)

    def cut_at(r, s):
        f = jnp.asarray([s.num_layers, s.residual, s.norm, s.ffn], jnp.int32)
        blank = blank_state(gnn.grid._grid_start, key, g, xf, y, tm, vm, f, key=key, **st)
        return gnn.grid._grid_chunk_jit(blank, np.bool_(True), np.int32(r), key, g, xf, y, tm, vm, f, **st)[1]

    cut = {r: [cut_at(r, s) for s in specs] for r in rungs}
    going = list(range(len(specs)))
    for r in rungs:
        going = [i for i in going if int(cut[r][i].info.epochs_run) == r]  # not early-stopped before the rung
        score = lambda i: (-float(cut[r][i].info.best_val_metric), float(cut[r][i].info.best_val_loss), i)
        kept = sorted(sorted(going, key=score)[:(len(going) + 1) // 2])
        for i in set(going) - set(kept):
            assert int(half[i].info.epochs_run) == r
            np.testing.assert_array_equal(np.asarray(half[i].prior), np.asarray(cut[r][i].prior))
        going = kept
    assert going, "some spec goes to the end"
    for i in range(len(specs)):
        if i in going or int(full[i].info.epochs_run) <= rungs[0]:
            np.testing.assert_array_equal(np.asarray(half[i].prior), np.asarray(full[i].prior))
            assert int(half[i].info.epochs_run) == int(full[i].info.epochs_run)
    assert sum(int(r.info.epochs_run) for r in half) < sum(int(r.info.epochs_run) for r in full)
    # below rungs_min_val validation nodes no spec is halved: the plain grid, bit for bit
    n_val = int(np.asarray(vm).sum())
    for min_val, want in ((n_val + 1, full), (n_val, half)):
        got = gnn.fit_gnn_grid(key, g, x, y, tm, vm, num_classes=3, specs=specs, cfg=cfg, rungs=rungs,
                               rungs_min_val=min_val)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(np.asarray(a.prior), np.asarray(b.prior))
    for bad in ((10, 5), (0, 5), (5, 5)):
        with pytest.raises(ValueError, match="rungs must be ascending positive"):
            gnn.fit_gnn_grid(key, g, x, y, tm, vm, num_classes=3, specs=specs, cfg=cfg, rungs=bad)
    # a deadline: a grid that ends before it is the grid without one, bit for bit (rounds of DEADLINE_EPOCHS,
    # rungs or not); one already past stops every spec after the first round with its best parameters so far
    from jaxclp.train import DEADLINE_EPOCHS, stopped_at

    later = time.perf_counter() + 1e6
    for rg, want in (((), full), (rungs, half)):
        got = gnn.fit_gnn_grid(key, g, x, y, tm, vm, num_classes=3, specs=specs, cfg=cfg, rungs=rg, deadline=later)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(np.asarray(a.prior), np.asarray(b.prior))
            assert int(a.info.epochs_run) == int(b.info.epochs_run)
        assert stopped_at([f.info for f in got], cfg) is None
    r = DEADLINE_EPOCHS
    assert rungs[-1] < r < cfg.epochs
    past = gnn.fit_gnn_grid(key, g, x, y, tm, vm, num_classes=3, specs=specs, cfg=cfg, deadline=0.0)
    for i, s in enumerate(specs):
        ref = cut_at(r, s)
        assert int(past[i].info.epochs_run) == int(ref.info.epochs_run) == min(r, int(full[i].info.epochs_run))
        np.testing.assert_array_equal(np.asarray(past[i].prior), np.asarray(ref.prior))
    assert stopped_at([f.info for f in past], cfg) == r


def test_halving_replay_is_what_fit_gnn_grid_does():
    """benchmarks/halving.py replays halving (beside the test above: the same compiled programs) on specs trained without it; on a small grid the replay's choice, its
    validation score and its epochs are those of fit_gnn_grid(..., rungs) chosen as tuned_gnn_prior chooses; the
    full replay (no rungs) is the plain grid's; and every spec's end point is its plain fit."""
    from jaxclp import gnn
    from benchmarks import halving

    g, x, y, tm, vm = _grid_problem(n=40, seed=2)
    te = ~(tm | vm)
    specs = tuned_grid("gcn", depths=(1, 2, 3), plain_depths=(1, 2), hidden=8)
    cfg = TrainConfig(lr=0.01, epochs=60, patience=15, weight_decay=0.0)
    key = jax.random.key(0)
    xf = jnp.asarray(x, jnp.float32)
    trajs = halving.grid_trajectories(key, g, xf, y, tm, vm, y, te, "accuracy", 3, specs, cfg, (5, 10, 20))
    recs = [dict(points=p) for p in trajs]

    def chosen(fits):
        best = 0
        for j, r in enumerate(fits):
            if not float(r.info.best_val_metric) <= float(fits[best].info.best_val_metric):
                best = j
        return best, float(fits[best].info.best_val_metric), sum(int(r.info.epochs_run) for r in fits)

    for rungs in ((), (5, 10, 20), (10,)):
        fits = gnn.fit_gnn_grid(key, g, x, y, tm, vm, num_classes=3, specs=specs, cfg=cfg, rungs=rungs)
        got = halving.replay(recs, rungs)
        assert (got["spec"], got["val"], got["epochs"]) == chosen(fits), rungs
    plain = gnn.fit_gnn_grid(key, g, x, y, tm, vm, num_classes=3, specs=specs, cfg=cfg)
    assert [p[-1]["epoch"] for p in trajs] == [int(r.info.epochs_run) for r in plain]


def test_fit_gnn_grid_params_give_its_prior_and_compile_once():
    """With dropout: each result's parameters, applied by TunedGNN(spec), give its prior (the masked forward is
    the model's); a grid of specs differing in depth / residual / LayerNorm / feed-forward is one program (one
    entry in the jit cache), a second static group (other hidden width) a second."""
    from jaxclp import gnn
    from jaxclp.features import as_input_features

    g, x, y, tm, vm = _grid_problem(n=26, seed=1)
    specs = tuned_grid("sage", depths=(1, 2, 4), plain_depths=(1, 3), hidden=12)
    specs.append(specs[0]._replace(hidden=4))
    before = gnn.grid._grid_chunk_jit._cache_size()
    fits = gnn.fit_gnn_grid(jax.random.key(0), g, x, y, tm, vm, num_classes=3, specs=specs,
                            cfg=TrainConfig(epochs=15, patience=0))
    assert gnn.grid._grid_chunk_jit._cache_size() - before == 2
    gt = gnn.tuned_gnn_graph(g, "sage", False, nodes=as_input_features(x, jnp.float32))
    plan = jaxclp.sparse.transpose_plan(gt.senders, gt.receivers, g.num_nodes)
    for spec, r in zip(specs, fits):
        logits = jax.jit(functools.partial(gnn.models._model(spec, 3, True).apply, train=False))(r.params, gt, plan)
        np.testing.assert_allclose(np.asarray(jax.nn.softmax(logits, -1)), np.asarray(r.prior), atol=1e-5)
    depths = [int(r.info.epochs_run) for r in fits]
    assert depths == [15] * len(specs)
    with pytest.raises(ValueError, match="specs is empty"):
        gnn.fit_gnn_grid(jax.random.key(0), g, x, y, tm, vm, num_classes=3, specs=[])


def test_grid_program_traces_one_block_whatever_its_depth(monkeypatch):
    """The blocks of a grid program are one function under ``lax.cond`` (their index and parameters operands), so
    JAX traces a block (and differentiates it) once per pass, not once per block: lowering a 4-block union calls
    the convolution as often as lowering a 1-block one."""
    import jaxclp.gnn.grid as grid

    calls = []

    class Counting:
        def __init__(self, module):
            self.module = module

        def apply(self, *args, **kwargs):
            calls.append(1)
            return self.module.apply(*args, **kwargs)

    real = grid._conv_module
    monkeypatch.setattr(grid, "_conv_module", lambda spec, symmetric: Counting(real(spec, symmetric)))
    g, x, y, tm, vm = _grid_problem()
    x = jnp.asarray(x, jnp.result_type(float))  # the graph's dtype (float64 under x64): no block promotes its input
    cfg = TrainConfig(lr=0.01, epochs=3, patience=0, weight_decay=0.0)
    key = jax.random.key(0)
    counts = {}
    for depth in (1, 4):
        union = grid._grid_union(tuned_grid("gcn", depths=(depth,), plain_depths=(1,), hidden=12))
        flags = jnp.asarray([depth, 1, 1, 1], jnp.int32)
        static = dict(num_classes=3, spec=union, cfg=cfg)
        blank = blank_state(grid._grid_start, key, g, x, y, tm, vm, flags, key=key, **static)
        calls.clear()
        grid._grid_chunk_jit.lower(blank, np.bool_(True), np.int32(3), key, g, x, y, tm, vm, flags, **static)
        counts[depth] = len(calls)
    assert counts[1] > 0 and counts[4] == counts[1], counts
