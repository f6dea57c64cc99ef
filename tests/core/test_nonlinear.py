"""The nonlinear step (jaxclp.nonlinear, the authors' code) vs a hand-written loop of its semantics, the deprecated
``authors`` aliases, and the direction of H.

The reference below is written from the published code's behaviour (zhiqiangzhongddu/TMLR-CLP,
``label_prop_heterophily.py``): per layer, messages over every edge s -> r with per-class weights
``W[r, s] * (b0[s] @ H)[k] * b0[r, k]``, minus the echo messages (weights ``gcn[r, s] (b0[s] @ H @ H)[k]
b0[r, k]``) from the second layer on, a signed L1 normalization per node, the residual ``(1 - a) S`` and the
post step. Loops over edges and nodes in numpy, nothing shared with the library code.
"""

import numpy as np
import pytest

import jax.numpy as jnp

import reference as ref
import jaxclp
from jaxclp import Graph, estimate_compatibility
from jaxclp.nonlinear import (NONLINEAR_ALPHAS, STARTS, nonlinear_grid, nonlinear_propagate, nonlinear_starts,
                              nonlinear_values)


def ref_layers(edges, n, b0, H, start, alpha, num_layers, post, echo, weight):
    """(L, n, K) every layer of the nonlinear step, edge by edge. ``edges``: list of (s, r) with weight 1."""
    k = b0.shape[1]
    din = np.zeros(n)
    for s, r in edges:
        din[r] += 1.0
    gcn = {e: 1.0 / np.sqrt(din[e[1]] * din[e[0]]) if din[e[0]] > 0 and din[e[1]] > 0 else 0.0 for e in edges}
    g1 = b0 @ H
    g2 = b0 @ H @ H
    out = start.copy()
    layers = []
    for t in range(1, num_layers + 1):
        msg = np.zeros((n, k))
        for (s, r) in edges:
            w = 1.0 if weight == "none" else gcn[(s, r)]
            for c in range(k):
                msg[r, c] += w * g1[s, c] * b0[r, c] * out[s, c]
                if echo and t > 1:
                    msg[r, c] -= gcn[(s, r)] * g2[s, c] * b0[r, c] * out[s, c]
        for i in range(n):
            msg[i] = msg[i] / max(np.abs(msg[i]).sum(), 1e-12)
        new = alpha * msg + (1.0 - alpha) * start
        if post == "softmax":
            e = np.exp(new - new.max(axis=1, keepdims=True))
            new = e / e.sum(axis=1, keepdims=True)
        else:
            new = np.clip(new, 0.0, 1.0)
        out = new
        layers.append(out.copy())
    return np.stack(layers)


def _problem(rng, n=12, k=3, directed=True):
    pairs = set()
    while len(pairs) < 30:
        s, r = (int(v) for v in rng.integers(0, n, 2))
        if s != r:
            pairs.add((s, r))
            if not directed:
                pairs.add((r, s))
    edges = sorted(pairs)
    ei = np.array(edges, dtype=np.int64).T
    g = Graph.from_edge_index(ei, n, symmetrize=False)
    prior = rng.dirichlet(np.ones(k), size=n)
    labels = rng.integers(0, k, n).astype(np.int32)
    labels[:k] = np.arange(k)
    train = np.zeros(n, bool)
    train[: n // 3] = True
    val = np.zeros(n, bool)
    val[n // 3: 2 * n // 3] = True
    return g, edges, prior, labels, train, val


@pytest.mark.parametrize("post,echo,weight", [("clamp", False, "none"), ("softmax", True, "sym"),
                                              ("clamp", True, "none"), ("softmax", False, "sym")])
@pytest.mark.parametrize("directed", [True, False])
def test_nonlinear_layers_match_reference_loop(rng, post, echo, weight, directed):
    g, edges, prior, labels, train, val = _problem(rng, directed=directed)
    n, k = prior.shape
    H, _ = estimate_compatibility(g, jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(train))
    H = np.asarray(H)
    starts = np.asarray(nonlinear_starts(jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(train)))
    b0 = starts[1]
    # the starts, by hand
    y = np.zeros((n, k))
    y[np.flatnonzero(train), labels[train]] = 1.0
    np.testing.assert_array_equal(starts[0], prior)
    np.testing.assert_array_equal(starts[1], np.where(train[:, None], y, prior))
    np.testing.assert_array_equal(starts[2], y)
    np.testing.assert_array_equal(starts[3], np.where(train[:, None], prior, 0.0))
    for si, alpha in ((0, 0.3), (2, 1.0), (3, 0.7)):
        got = nonlinear_propagate(g, jnp.asarray(b0), jnp.asarray(H), jnp.asarray(starts[si]), alpha=alpha,
                                num_layers=6, post=post, echo=echo, weight=weight)
        want = ref_layers(edges, n, b0, H, starts[si], alpha, 6, post, echo, weight)
        assert got.shape == (6, n, k)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-13)


def test_nonlinear_sym_weight_is_edge_values_sym_on_undirected(rng):
    g, *_ = _problem(rng, directed=False)
    np.testing.assert_allclose(np.asarray(nonlinear_values(g, "sym")), np.asarray(jaxclp.graph.edge_values(g, "sym")),
                               rtol=1e-14)


@pytest.mark.cpu_bitwise
def test_nonlinear_grid_selects_best_validation_layer(rng):
    g, edges, prior, labels, train, val = _problem(rng, n=15, k=3)
    n, k = prior.shape
    vis = np.where(train | val, labels, -1).astype(np.int32)
    res = nonlinear_grid(g, jnp.asarray(prior), jnp.asarray(vis), jnp.asarray(train), jnp.asarray(val),
                       alphas=(0.4, 1.0), num_layers=5)
    assert len(res.configs) == 2 * len(STARTS) * 2 * 2 * 2 == res.beliefs.shape[0]
    H = np.asarray(res.H)
    starts = np.asarray(nonlinear_starts(jnp.asarray(prior), jnp.asarray(vis), jnp.asarray(train)))
    for c, (start, alpha, post, echo, weight) in enumerate(res.configs):
        layers = ref_layers(edges, n, starts[1], H, starts[STARTS.index(start)], alpha, 5, post, echo, weight)
        acc = np.array([(lay.argmax(1) == labels)[val].mean() for lay in layers])
        np.testing.assert_allclose(np.asarray(res.val_score[c]), acc, atol=1e-12)
        best = int(np.argmax(acc))  # first best layer, as the authors' strict ">" keeps it
        assert int(res.layer[c]) == best + 1
        np.testing.assert_allclose(np.asarray(res.beliefs[c]), layers[best], rtol=1e-12, atol=1e-13)
    # test labels never enter: scrambling the labels outside train|val changes nothing
    scrambled = np.where(train | val, labels, (labels + 1) % k).astype(np.int32)
    with pytest.raises(ValueError, match="val_mask"):
        nonlinear_grid(g, jnp.asarray(prior), jnp.asarray(np.where(train, labels, -1).astype(np.int32)),
                     jnp.asarray(train), jnp.asarray(val), alphas=(0.4,), num_layers=2)
    res2 = nonlinear_grid(g, jnp.asarray(prior), jnp.asarray(np.where(train | val, scrambled, -1)),
                        jnp.asarray(train), jnp.asarray(val), alphas=(0.4, 1.0), num_layers=5)
    np.testing.assert_array_equal(np.asarray(res2.beliefs), np.asarray(res.beliefs))


def test_nonlinear_rejects_bad_input(rng):
    g, edges, prior, labels, train, val = _problem(rng)
    b0 = jnp.asarray(prior)
    H = jnp.eye(3) * 0.5 + 0.5 / 3
    with pytest.raises(ValueError, match="alpha"):
        nonlinear_propagate(g, b0, H, b0, alpha=1.5)
    with pytest.raises(ValueError, match="alpha"):
        nonlinear_propagate(g, b0, H, b0, alpha=0.0)
    with pytest.raises(ValueError, match="post"):
        nonlinear_propagate(g, b0, H, b0, alpha=0.5, post="relu")
    with pytest.raises(ValueError, match="weight"):
        nonlinear_propagate(g, b0, H, b0, alpha=0.5, weight="row")
    with pytest.raises(ValueError, match="num_layers"):
        nonlinear_propagate(g, b0, H, b0, alpha=0.5, num_layers=0)
    with pytest.raises(ValueError, match="starts"):
        nonlinear_grid(g, b0, jnp.asarray(labels), jnp.asarray(train), jnp.asarray(val), starts=("zeros",))
    assert NONLINEAR_ALPHAS == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


# ------------------------------------------------------------------ direction of the compatibility estimate
def test_compatibility_direction_directed_hand_example():
    """Edges 0->1, 0->2, 1->2, 2->0; train: node 0 class 0, node 1 class 1; node 2 prior [0.25, 0.75].

    The paper's counts (M*Y)^T A B0 with A[i, j] = 1 for i -> j sum over each training node's RECEIVERS:
    class 0 (node 0 -> 1, 2): B0[1] + B0[2] = [0.25, 1.75]; class 1 (node 1 -> 2): B0[2] = [0.25, 0.75].
    (The transposed, in-neighbour estimate would give [[0.25, 0.75], [1, 0]].)
    For a 2x2 count matrix Sinkhorn keeps the cross ratio: H = [[q, 1-q], [1-q, q]], q = t / (1 + t),
    t = sqrt(c00 c11 / (c01 c10)) of the smoothed counts C / mean(C) + 1e-6.
    """
    g = Graph.from_edge_index(np.array([[0, 0, 1, 2], [1, 2, 2, 0]]), 3, symmetrize=False)
    prior = np.array([[0.5, 0.5], [0.5, 0.5], [0.25, 0.75]])
    labels = np.array([0, 1, -1], np.int32)
    mask = np.array([True, True, False])
    h, info = estimate_compatibility(g, jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(mask), tol=1e-13)
    c = np.array([[0.25, 1.75], [0.25, 0.75]])
    cs = c / c.mean() + 1e-6
    t = np.sqrt(cs[0, 0] * cs[1, 1] / (cs[0, 1] * cs[1, 0]))
    q = t / (1 + t)
    assert bool(info.converged)
    np.testing.assert_allclose(np.asarray(h), [[q, 1 - q], [1 - q, q]], atol=1e-10)
    assert abs(q - 0.3956) < 1e-3  # = 0.3956..., far from the transposed estimate's q


@pytest.mark.parametrize("directed", [True, False])
def test_compatibility_counts_sender_by_receiver(rng, directed):
    """H = Sinkhorn((M*Y)^T A B0) with A[i, j] = weight of i -> j; on undirected graphs = the transposed one."""
    g, edges, prior, labels, train, val = _problem(rng, n=14, k=3, directed=directed)
    a_paper = ref.graph_dense(g).T  # graph_dense is A[r, s]; the paper's A[i, j] is for i -> j
    b0 = ref.initial_beliefs(prior, labels, train)
    my = ref.one_hot(labels, 3) * train[:, None]
    counts = my.T @ a_paper @ b0
    h, _ = estimate_compatibility(g, jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(train), tol=1e-13)
    np.testing.assert_allclose(np.asarray(h), ref.sinkhorn(counts, tol=1e-14), atol=1e-9)
    transposed = my.T @ a_paper.T @ b0
    if directed:
        assert np.abs(counts - transposed).max() > 0.1
    else:
        np.testing.assert_allclose(counts, transposed, atol=1e-12)


def test_nonlinear_grid_roc_auc_layer_scores(rng):
    """Binary graphs (Twitch) pick the layer on validation ROC-AUC: the scan's scores equal the metric."""
    g, edges, prior, labels, train, val = _problem(rng, n=16, k=2)
    vis = np.where(train | val, labels, -1).astype(np.int32)
    res = nonlinear_grid(g, jnp.asarray(prior), jnp.asarray(vis), jnp.asarray(train), jnp.asarray(val),
                       alphas=(0.5,), starts=("b0",), posts=("clamp",), echo=(False,), weights=("none",),
                       num_layers=4, metric="roc_auc")
    starts = np.asarray(nonlinear_starts(jnp.asarray(prior), jnp.asarray(vis), jnp.asarray(train)))
    layers = ref_layers(edges, 16, starts[1], np.asarray(res.H), starts[1], 0.5, 4, "clamp", False, "none")
    want = []
    for lay in layers:  # AUC by pair counting over validation nodes (ties one half)
        pos, neg = lay[val & (labels == 1), 1], lay[val & (labels == 0), 1]
        want.append(np.mean([(p > q) + 0.5 * (p == q) for p in pos for q in neg]))
    np.testing.assert_allclose(np.asarray(res.val_score[0]), want, atol=1e-12)
    assert int(res.layer[0]) == int(np.argmax(want)) + 1


@pytest.mark.cpu_bitwise
def test_nonlinear_grid_chunks_give_the_same_grid(rng, monkeypatch):
    """Configurations run in vmapped chunks when a chunk of all of them would pass GRID_CHUNK_BYTES (a large
    graph): forced to chunks of 3 of the 16 per kernel (the last one short), the grid is the same up to rounding
    (the same layers chosen); and the runner's method_clp_authors, one adjacency weight per call (half the peak
    memory), returns the same candidates as one call with both weights."""
    import jaxclp.nonlinear as A
    from jaxclp.experiments import candidates, methods as M

    g, edges, prior, labels, train, val = _problem(rng, n=15, k=3)
    vis = jnp.asarray(np.where(train | val, labels, -1).astype(np.int32))
    args = (g, jnp.asarray(prior), vis, jnp.asarray(train), jnp.asarray(val))
    whole = nonlinear_grid(*args, alphas=(0.4, 1.0), num_layers=5)
    monkeypatch.setattr(A, "GRID_CHUNK_BYTES", 3 * 8 * 15 * 3 * 8)  # 3 configurations of (15, 3) float64
    chunked = nonlinear_grid(*args, alphas=(0.4, 1.0), num_layers=5)
    assert chunked.configs == whole.configs  # a vmapped batch of another size: equal up to rounding (1 ulp seen)
    for f in ("layer", "H"):
        np.testing.assert_array_equal(np.asarray(getattr(chunked, f)), np.asarray(getattr(whole, f)))
    for f in ("beliefs", "val_score"):
        np.testing.assert_allclose(np.asarray(getattr(chunked, f)), np.asarray(getattr(whole, f)), rtol=1e-13,
                                   atol=1e-15)
    ctx = candidates.Context(graph=g, features=None, labels=vis, train=jnp.asarray(train), val=jnp.asarray(val),
                             num_classes=3, metric="accuracy", key=None, priors={1: jnp.asarray(prior)}, mlp_depth=1)
    got = M.method_clp_authors(ctx, echo=(False,), alphas=(0.4, 1.0), num_layers=5)
    monkeypatch.setattr(A, "GRID_CHUNK_BYTES", 1 << 30)
    res = nonlinear_grid(*args, echo=(False,), alphas=(0.4, 1.0), num_layers=5)
    assert len(got) == len(res.configs) == 2 * len(STARTS) * 2 * 2
    for i, (key, b) in enumerate(got.items()):
        start, a, post, echo, w = res.configs[i]
        assert key == ("normalization", f"authors-{w}", "l1", "authors", "prior", start, "alpha", a, "post", post,
                       "echo", echo, "layer", int(res.layer[i]))
        np.testing.assert_array_equal(np.asarray(b), np.asarray(res.beliefs[i]))
