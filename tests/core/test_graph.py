"""Graph construction, conversion, normalization and sparse products vs the numpy reference."""

import itertools

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

import reference as ref
from jaxclp.graph import Graph, edge_values, spmm, spmm_transpose

NORMS = ("sym", "row", "none")
# Semantics tests: a wrong normalization/orientation is an O(1) error, so 1e-6 is a sharp test (and it
# stays independent of the float32 weight storage reported in test_weights_keep_float64_precision).
RTOL = 1e-6


def dyadic_weights(rng, m):
    """Random weights exactly representable in float32 (multiples of 1/8 in [0.125, 4])."""
    return rng.integers(1, 33, size=m) / 8.0


def graph_triples(g):
    return (np.asarray(g.senders, np.int64), np.asarray(g.receivers, np.int64),
            np.asarray(g.weights, np.float64))


def sorted_triples(s, r, w):
    order = np.lexsort((w, s, r))
    return s[order], r[order], w[order]


def assert_sorted_by_receiver(g):
    s, r, _ = graph_triples(g)
    key = r * g.num_nodes + s
    assert np.all(np.diff(r) >= 0), "edges are not sorted by receiver"
    assert np.all(np.diff(key) >= 0), "edges are not sorted by (receiver, sender)"


# ------------------------------------------------------------------------------------ from_edge_index
@pytest.mark.parametrize("symmetrize,deduplicate,self_loops",
                         list(itertools.product([True, False], [True, False], ["drop", "keep", "add"])))
def test_from_edge_index_matches_reference(rng, symmetrize, deduplicate, self_loops):
    n = 40
    ei = ref.random_edge_index(rng, n, 120, loops=6, duplicates=15, isolated=5)
    w = dyadic_weights(rng, ei.shape[1])
    g = Graph.from_edge_index(ei, n, weights=w, symmetrize=symmetrize, deduplicate=deduplicate,
                              self_loops=self_loops)
    rs, rr, rw = ref.build_edges(ei, n, w, symmetrize=symmetrize, deduplicate=deduplicate,
                                 self_loops=self_loops)
    assert g.num_nodes == n
    assert g.num_edges == rs.size
    assert_sorted_by_receiver(g)
    s, r, wg = sorted_triples(*graph_triples(g))
    es, er, ew = sorted_triples(rs, rr, rw)
    np.testing.assert_array_equal(s, es)
    np.testing.assert_array_equal(r, er)
    np.testing.assert_allclose(wg, ew, rtol=0, atol=0)
    a = ref.dense_adjacency(rs, rr, rw, n)
    a_sym = bool(np.array_equal(a, a.T))
    if g.symmetric:  # soundness: CG relies on it
        assert a_sym
    if deduplicate:  # unique edges: edge-list symmetry <=> matrix symmetry
        assert g.symmetric == a_sym
    if symmetrize:  # every edge got its reverse with the same weight
        assert g.symmetric, "symmetrized graph not flagged symmetric"
    # isolated nodes: no edge at all (except the added self-loop)
    iso = np.arange(n - 5, n)
    deg = a.sum(0) + a.sum(1)
    expected_iso_deg = 2.0 if self_loops == "add" else 0.0
    np.testing.assert_array_equal(deg[iso], expected_iso_deg)
    if self_loops == "add":
        np.testing.assert_array_equal(np.diag(a), np.ones(n))
    if self_loops == "drop":
        assert np.all(np.diag(a) == 0)


def test_from_edge_index_duplicates_keep_largest_weight():
    ei = np.array([[0, 0, 0, 1], [1, 1, 1, 2]])
    g = Graph.from_edge_index(ei, 3, weights=[1.0, 3.0, 2.0, 0.5], symmetrize=False)
    np.testing.assert_array_equal(np.asarray(g.senders), [0, 1])
    np.testing.assert_array_equal(np.asarray(g.receivers), [1, 2])
    np.testing.assert_array_equal(np.asarray(g.weights), [3.0, 0.5])
    g2 = Graph.from_edge_index(ei, 3, weights=[1.0, 3.0, 2.0, 0.5], symmetrize=False, deduplicate=False)
    assert g2.num_edges == 4
    np.testing.assert_array_equal(np.asarray(g2.to_dense()), [[0, 0, 0], [6.0, 0, 0], [0, 0.5, 0]])


def test_symmetric_flag_with_repeated_edges():
    """Symmetrizing a list with a repeated edge of different weights gives a symmetric edge multiset
    (every s->r has r->s with the same weight) and a symmetric A: the flag must say so."""
    g = Graph.from_edge_index(np.array([[0, 0, 1], [1, 1, 0]]), 2, weights=[1.0, 2.0, 3.0],
                              symmetrize=True, deduplicate=False)
    np.testing.assert_array_equal(np.asarray(g.to_dense()), [[0.0, 6.0], [6.0, 0.0]])
    assert g.symmetric


def test_from_edge_index_direction_and_sorting():
    # edges 2->0, 0->1, 1->0 given unsorted; A[r, s]
    g = Graph.from_edge_index(np.array([[2, 0, 1], [0, 1, 0]]), 3, symmetrize=False)
    np.testing.assert_array_equal(np.asarray(g.receivers), [0, 0, 1])
    np.testing.assert_array_equal(np.asarray(g.senders), [1, 2, 0])
    np.testing.assert_array_equal(np.asarray(g.to_dense()), [[0, 1, 1], [1, 0, 0], [0, 0, 0]])
    assert not g.symmetric


def test_from_edge_index_empty_and_single_node():
    g = Graph.from_edge_index(np.zeros((2, 0), dtype=np.int64), 4)
    assert g.num_edges == 0 and g.num_nodes == 4 and g.symmetric
    for norm in NORMS:
        d = np.asarray(g.to_dense(norm))
        assert d.shape == (4, 4) and np.all(d == 0)
    x = jnp.ones((4, 3))
    np.testing.assert_array_equal(np.asarray(spmm(g, edge_values(g, "sym"), x)), np.zeros((4, 3)))
    g1 = Graph.from_edge_index(np.array([[0], [0]]), 1, self_loops="keep")
    assert g1.num_edges == 1
    np.testing.assert_allclose(np.asarray(g1.to_dense("sym")), [[1.0]])


@pytest.mark.parametrize("bad", [
    dict(edge_index=np.array([[0, 5], [1, 2]]), n=5),          # 5 >= n
    dict(edge_index=np.array([[0, 1], [-1, 2]]), n=5),         # negative
    dict(edge_index=np.array([[0, 1, 2]]), n=5),               # shape (1, 3)
    dict(edge_index=np.array([[0, 1], [1, 2], [2, 3]]), n=5),  # shape (3, 2)
    dict(edge_index=np.array([[0.5, 1.0], [1.0, 2.0]]), n=5),  # non-integer
    dict(edge_index=np.array([[0, 1], [1, 2]]), n=0),          # no nodes
    dict(edge_index=np.array([[0, 1], [1, 2]]), n=5, weights=[1.0, -1.0]),
    dict(edge_index=np.array([[0, 1], [1, 2]]), n=5, weights=[1.0, np.nan]),
    dict(edge_index=np.array([[0, 1], [1, 2]]), n=5, weights=[1.0, np.inf]),
    dict(edge_index=np.array([[0, 1], [1, 2]]), n=5, weights=[1.0, 2.0, 3.0]),
    dict(edge_index=np.array([[0, 1], [1, 2]]), n=5, self_loops="bogus"),
])
def test_from_edge_index_rejects_bad_input(bad):
    kwargs = {k: v for k, v in bad.items() if k not in ("edge_index", "n")}
    with pytest.raises(ValueError):
        Graph.from_edge_index(bad["edge_index"], bad["n"], **kwargs)


def test_out_of_range_message_names_range():
    with pytest.raises(ValueError, match=r"out of range.*\[0, 3\)"):
        Graph.from_edge_index(np.array([[0, 7], [1, 2]]), 3)


def test_weights_keep_float64_precision():
    """With jax_enable_x64 the edge weights (and Ahat) must be float64, not rounded to float32."""
    w = np.array([0.1, 0.3, 1.0 / 3.0, 0.7])
    ei = np.array([[0, 1, 2, 3], [1, 2, 3, 0]])
    g = Graph.from_edge_index(ei, 4, weights=w, symmetrize=False)
    assert g.weights.dtype == jnp.float64, f"weights stored as {g.weights.dtype} under x64"
    np.testing.assert_allclose(np.asarray(g.weights, np.float64), w[np.argsort(ei[1])], rtol=1e-15)
    for norm in NORMS:
        expect = ref.normalize(ref.dense_adjacency(ei[0], ei[1], w, 4), norm)
        np.testing.assert_allclose(np.asarray(g.to_dense(norm), np.float64), expect, rtol=1e-13, atol=0)


# ------------------------------------------------------------------------------------ from_scipy
@pytest.mark.parametrize("fmt", ["csr", "coo", "dense"])
def test_from_scipy_directed(rng, fmt):
    n = 30
    a = sp.random(n, n, density=0.1, random_state=np.random.RandomState(1), format="coo")
    a.data = dyadic_weights(rng, a.nnz)
    a.setdiag(0)
    a.eliminate_zeros()
    m = {"csr": a.tocsr(), "coo": a.tocoo(), "dense": a.toarray()}[fmt]
    g = Graph.from_scipy(m, symmetrize=False)
    np.testing.assert_array_equal(np.asarray(g.to_dense()), a.toarray())
    assert_sorted_by_receiver(g)
    # direction: A[r, s] = weight of s -> r
    for s, r, w in zip(*graph_triples(g)):
        assert a.toarray()[r, s] == w


def test_from_scipy_default_symmetrizes_with_max(rng):
    n = 25
    a = sp.random(n, n, density=0.15, random_state=np.random.RandomState(2), format="csr")
    a.data = dyadic_weights(rng, a.nnz)
    g = Graph.from_scipy(a)
    dense = a.toarray()
    np.fill_diagonal(dense, 0.0)  # loops dropped by default
    np.testing.assert_array_equal(np.asarray(g.to_dense()), np.maximum(dense, dense.T))
    assert g.symmetric


def test_from_scipy_coo_with_repeated_entries_matches_matrix():
    """scipy semantics: repeated COO entries ADD UP; the graph must represent the same matrix."""
    data, row, col = np.array([1.0, 2.0, 5.0]), np.array([0, 0, 1]), np.array([1, 1, 0])
    m = sp.coo_matrix((data.copy(), (row.copy(), col.copy())), shape=(2, 2))
    g = Graph.from_scipy(m, symmetrize=False)
    np.testing.assert_array_equal(np.asarray(g.to_dense()), [[0.0, 3.0], [5.0, 0.0]])
    # the caller's matrix is left untouched
    assert m.nnz == 3
    np.testing.assert_array_equal(m.data, data)
    np.testing.assert_array_equal(m.row, row)
    np.testing.assert_array_equal(m.col, col)


def test_from_scipy_drops_explicit_zeros_and_rejects_non_square():
    m = sp.csr_matrix((np.array([0.0, 2.0]), (np.array([0, 1]), np.array([1, 0]))), shape=(3, 3))
    g = Graph.from_scipy(m, symmetrize=False)
    assert g.num_edges == 1
    with pytest.raises(ValueError):
        Graph.from_scipy(sp.csr_matrix(np.ones((2, 3))))


# ------------------------------------------------------------------------------------ from_networkx
def test_from_networkx_directed_with_nodelist(rng):
    G = nx.DiGraph()
    names = [f"v{i}" for i in range(12)]
    G.add_nodes_from(names)  # some stay isolated
    edges = [("v0", "v3", 2.0), ("v3", "v0", 0.5), ("v5", "v1", 1.5), ("v7", "v7", 4.0), ("v2", "v9", 1.0)]
    for u, v, w in edges:
        G.add_edge(u, v, w=w)
    nodelist = list(rng.permutation(names))
    index = {v: i for i, v in enumerate(nodelist)}
    g = Graph.from_networkx(G, nodelist=nodelist, weight="w", self_loops="keep")
    assert g.num_nodes == 12 and not g.symmetric
    expect = np.zeros((12, 12))
    for u, v, w in edges:
        expect[index[v], index[u]] = w
    np.testing.assert_array_equal(np.asarray(g.to_dense()), expect)
    # unweighted: every edge weight 1; loops dropped by default
    g1 = Graph.from_networkx(G, nodelist=nodelist)
    expect1 = (expect > 0).astype(float)
    np.fill_diagonal(expect1, 0.0)
    np.testing.assert_array_equal(np.asarray(g1.to_dense()), expect1)


def test_from_networkx_undirected_symmetrized_and_default_order():
    G = nx.Graph()
    G.add_nodes_from([10, 20, 30, 40])
    G.add_edges_from([(10, 20), (20, 30)])
    g = Graph.from_networkx(G)
    assert g.symmetric
    np.testing.assert_array_equal(np.asarray(g.to_dense()),
                                  [[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]])
    g2 = Graph.from_networkx(G, nodelist=[40, 30, 20, 10])
    np.testing.assert_array_equal(np.asarray(g2.to_dense()),
                                  [[0, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]])


def test_from_networkx_bad_nodelist():
    G = nx.path_graph(4)
    with pytest.raises(ValueError):
        Graph.from_networkx(G, nodelist=[0, 1, 2])  # node 3 missing
    with pytest.raises(ValueError):
        Graph.from_networkx(G, nodelist=[0, 1, 2, 3, 3])


# ------------------------------------------------------------------------------------ jraph
def test_jraph_roundtrip(rng):
    n = 20
    ei = ref.random_edge_index(rng, n, 50, loops=3, duplicates=4, isolated=2)
    g = Graph.from_edge_index(ei, n, weights=dyadic_weights(rng, ei.shape[1]), symmetrize=False,
                              deduplicate=False, self_loops="keep")
    gt = g.to_jraph()
    np.testing.assert_array_equal(np.asarray(gt.n_node), [n])
    np.testing.assert_array_equal(np.asarray(gt.n_edge), [g.num_edges])
    np.testing.assert_array_equal(np.asarray(gt.senders), np.asarray(g.senders))
    np.testing.assert_array_equal(np.asarray(gt.receivers), np.asarray(g.receivers))
    np.testing.assert_array_equal(np.asarray(gt.edges), np.asarray(g.weights))
    back = Graph.from_jraph(gt)
    assert back.num_nodes == n and back.symmetric == g.symmetric
    for x, y in zip(graph_triples(back), graph_triples(g)):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(np.asarray(back.to_dense("sym")), np.asarray(g.to_dense("sym")))


# ------------------------------------------------------------------------------------ normalization
def _graph_case(rng, case, n=40):
    if case == "undirected":
        ei = ref.random_edge_index(rng, n, 100, isolated=4)
        return Graph.from_edge_index(ei, n, weights=dyadic_weights(rng, ei.shape[1]))
    if case == "directed_loops_dups":
        ei = ref.random_edge_index(rng, n, 100, loops=5, duplicates=10, isolated=4)
        return Graph.from_edge_index(ei, n, weights=dyadic_weights(rng, ei.shape[1]), symmetrize=False,
                                     deduplicate=False, self_loops="keep")
    if case == "added_loops":
        ei = ref.random_edge_index(rng, n, 80, isolated=4)
        return Graph.from_edge_index(ei, n, self_loops="add")
    raise ValueError(case)


CASES = ("undirected", "directed_loops_dups", "added_loops")


@pytest.fixture(scope="module")
def graphs():
    """One graph per case, shared by the tests below (same shapes: eager ops compile once)."""
    rng = np.random.default_rng(20220801)
    return {case: _graph_case(rng, case) for case in CASES}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("norm", NORMS)
def test_to_dense_and_edge_values_vs_reference(graphs, case, norm):
    g = graphs[case]
    s, r, w = graph_triples(g)
    a = ref.dense_adjacency(s, r, w, g.num_nodes)
    expect = ref.normalize(a, norm)
    dense = np.asarray(g.to_dense(norm))
    assert np.all(np.isfinite(dense))
    np.testing.assert_allclose(dense, expect, rtol=RTOL, atol=1e-12)
    vals = np.asarray(edge_values(g, norm))
    np.testing.assert_allclose(vals, ref.edge_normalized_values(s, r, w, g.num_nodes, norm), rtol=RTOL)
    csr = g.to_scipy(norm)
    assert sp.issparse(csr) and csr.dtype == np.float64
    np.testing.assert_allclose(csr.toarray(), expect, rtol=RTOL, atol=1e-12)
    d_in, d_out = a.sum(1), a.sum(0)
    np.testing.assert_allclose(np.asarray(g.in_degree()), d_in, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(g.out_degree()), d_out, rtol=1e-12)
    zero_in = d_in == 0
    if case != "added_loops":
        assert zero_in.any(), "test graph should have isolated nodes"
    assert np.all(dense[zero_in] == 0)
    if norm == "row":
        np.testing.assert_allclose(dense[~zero_in].sum(1), 1.0, rtol=1e-6)
    if norm == "sym" and g.symmetric:
        np.testing.assert_allclose(dense, dense.T, rtol=1e-6, atol=1e-12)
        # symmetric normalization of an undirected graph has spectral radius exactly 1
        assert abs(np.max(np.abs(np.linalg.eigvals(dense))) - 1.0) < 1e-6


def test_edge_values_known_small_graph():
    # 0 -> 1 (w=2), 2 -> 1 (w=1), 1 -> 0 (w=4); d_in = [4, 3, 0], d_out = [2, 4, 1]
    g = Graph.from_edge_index(np.array([[0, 2, 1], [1, 1, 0]]), 3, weights=[2.0, 1.0, 4.0], symmetrize=False)
    # edges sorted by receiver: 1->0, 0->1, 2->1
    np.testing.assert_allclose(np.asarray(edge_values(g, "none")), [4.0, 2.0, 1.0])
    np.testing.assert_allclose(np.asarray(edge_values(g, "row")), [1.0, 2.0 / 3.0, 1.0 / 3.0], rtol=1e-7)
    np.testing.assert_allclose(np.asarray(edge_values(g, "sym")),
                               [4.0 / np.sqrt(4 * 4), 2.0 / np.sqrt(3 * 2), 1.0 / np.sqrt(3 * 1)], rtol=1e-7)


def test_bad_normalization_rejected():
    g = Graph.from_edge_index(np.array([[0], [1]]), 2)
    with pytest.raises(ValueError):
        edge_values(g, "column")
    with pytest.raises(ValueError):
        g.to_dense("l1")


# ------------------------------------------------------------------------------------ spmm
@pytest.mark.parametrize("k", [2, 5, 17])
@pytest.mark.parametrize("case", CASES)
def test_spmm_and_transpose_vs_dense(graphs, rng, k, case):
    g = graphs[case]
    n = g.num_nodes
    s, r, w = graph_triples(g)
    for norm in NORMS:
        vals = edge_values(g, norm)
        ahat = ref.normalize(ref.dense_adjacency(s, r, w, n), norm)
        x = rng.normal(size=(n, k))
        # |x| ~ 1 and Ahat ~ 1: absolute 1e-6 is far below any semantic error
        np.testing.assert_allclose(np.asarray(spmm(g, vals, jnp.asarray(x))), ahat @ x, rtol=RTOL, atol=1e-6)
        np.testing.assert_allclose(np.asarray(spmm_transpose(g, vals, jnp.asarray(x))), ahat.T @ x,
                                   rtol=RTOL, atol=1e-6)
        v = x[:, 0]
        np.testing.assert_allclose(np.asarray(spmm(g, vals, jnp.asarray(v))), ahat @ v, rtol=RTOL, atol=1e-6)
        np.testing.assert_allclose(np.asarray(spmm_transpose(g, vals, jnp.asarray(v))), ahat.T @ v,
                                   rtol=RTOL, atol=1e-6)
    # per-class (m, K) edge values: column c uses the matrix with entries vals[:, c]
    ev = rng.random((g.num_edges, k))
    x = rng.normal(size=(n, k))
    out = np.asarray(spmm(g, jnp.asarray(ev), jnp.asarray(x)))
    out_t = np.asarray(spmm_transpose(g, jnp.asarray(ev), jnp.asarray(x)))
    for c in range(k):
        mc = ref.dense_adjacency(s, r, ev[:, c], n)
        np.testing.assert_allclose(out[:, c], mc @ x[:, c], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(out_t[:, c], mc.T @ x[:, c], rtol=1e-12, atol=1e-12)


def test_spmm_is_jittable_graph_is_pytree(graphs, rng):
    g = graphs["undirected"]
    x = jnp.asarray(rng.normal(size=(g.num_nodes, 3)))
    f = jax.jit(lambda gr, xx: spmm(gr, edge_values(gr, "sym"), xx))
    np.testing.assert_allclose(np.asarray(f(g, x)), np.asarray(spmm(g, edge_values(g, "sym"), x)),
                               rtol=1e-12)
    leaves, treedef = jax.tree_util.tree_flatten(g)
    assert len(leaves) == 6  # senders, receivers, weights, indptr, transpose_perm, transpose_indptr
    g2 = jax.tree_util.tree_unflatten(treedef, leaves)
    assert g2.num_nodes == g.num_nodes and g2.symmetric == g.symmetric
    np.testing.assert_array_equal(g2.indptr, g.indptr)
    np.testing.assert_array_equal(g2.transpose_perm, g.transpose_perm)
    bare = Graph(senders=g.senders, receivers=g.receivers, weights=g.weights, num_nodes=g.num_nodes)
    assert len(jax.tree_util.tree_leaves(bare)) == 3  # the optional fields are None: no leaves


@pytest.mark.parametrize("n,m", [(1, 0), (7, 0), (30, 150), (200, 40)])
def test_cached_row_pointers_match_csr_and_spmm_without_them(n, m):
    """Constructors store the CSR row pointers (edge counts per receiver, cumulated; parallel edges kept); a
    Graph built from bare arrays (indptr None) recomputes them per product and gives the same result."""
    rng = np.random.default_rng(n + m)
    g = Graph.from_edge_index(rng.integers(0, n, (2, m)), n, symmetrize=False, deduplicate=False)
    counts = np.bincount(np.asarray(g.receivers), minlength=n)
    np.testing.assert_array_equal(np.asarray(g.indptr), np.concatenate([[0], np.cumsum(counts)]))
    csr = sp.csr_matrix((np.ones(g.num_edges), (np.asarray(g.receivers), np.asarray(g.senders))), shape=(n, n))
    assert g.indptr.dtype == jnp.int32 and g.indptr.shape == (n + 1,)
    bare = Graph(senders=g.senders, receivers=g.receivers, weights=g.weights, num_nodes=n)
    assert bare.indptr is None
    x = jnp.asarray(rng.random((n, 5)))
    v = edge_values(g, "none")
    np.testing.assert_allclose(spmm(bare, v, x), spmm(g, v, x), atol=1e-12)
    np.testing.assert_allclose(spmm(g, v, x), csr @ np.asarray(x), atol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 9])
def test_spmm_paths_values_grads_and_vmap(k):
    """Both spmm paths (segment_sum for K < 3, native CSR kernel for K >= 3): value, gradients w.r.t. the
    edge values AND the block, and vmap over blocks / over edge values, against dense numpy."""
    rng = np.random.default_rng(k)
    n = 30
    g = Graph.from_edge_index(rng.integers(0, n, (2, 150)), n, symmetrize=False, deduplicate=False)
    v = jnp.asarray(rng.random(g.num_edges))
    a = np.zeros((n, n))
    np.add.at(a, (np.asarray(g.receivers), np.asarray(g.senders)), np.asarray(v))
    x = jnp.asarray(rng.random((n, k)))
    np.testing.assert_allclose(spmm(g, v, x), a @ np.asarray(x), atol=1e-12)
    w = rng.random((n, k))
    # d/dx sum(w * (A x)) = A^T w ; d/dv_e = sum_k w[r_e, k] x[s_e, k]
    gv, gx = jax.grad(lambda vv, xx: jnp.sum(jnp.asarray(w) * spmm(g, vv, xx)), argnums=(0, 1))(v, x)
    np.testing.assert_allclose(gx, a.T @ w, atol=1e-12)
    expected_gv = np.sum(w[np.asarray(g.receivers)] * np.asarray(x)[np.asarray(g.senders)], axis=1)
    np.testing.assert_allclose(gv, expected_gv, atol=1e-12)
    xb = jnp.asarray(rng.random((3, n, k)))
    np.testing.assert_allclose(jax.vmap(lambda xx: spmm(g, v, xx))(xb), np.einsum("ij,bjk->bik", a, xb),
                               atol=1e-12)
    vb = jax.jit(jax.vmap(lambda vv: spmm(g, vv, x)))(jnp.stack([v, 2 * v]))
    np.testing.assert_allclose(vb[1], 2 * a @ np.asarray(x), atol=1e-12)


def test_direct_construction_rejects_out_of_range_node_ids():
    """A Graph built directly from arrays with an id >= n (or < 0) used to run silently: the segment sums
    drop the edge (and a negative id wraps around). It now raises naming the argument; traced and
    placeholder leaves (jit, vmap, tree unflattening) are not checked, and a valid graph passes through jit."""
    g = Graph.from_edge_index(np.array([[0, 1, 2], [1, 2, 3]]), 4)
    ok = Graph(senders=g.senders, receivers=g.receivers, weights=g.weights, num_nodes=4)
    assert ok.num_edges == g.num_edges
    with pytest.raises(ValueError, match=r"receivers has node ids out of range \[0, num_nodes=4\).*\[4\]"):
        Graph(senders=g.senders, receivers=g.receivers.at[-1].set(4), weights=g.weights, num_nodes=4)
    with pytest.raises(ValueError, match=r"senders has node ids out of range .*\[-1\]"):
        Graph(senders=np.array([0, -1]), receivers=np.array([1, 1]), weights=np.ones(2), num_nodes=4)
    with pytest.raises(ValueError, match=r"senders must hold integer node ids"):
        Graph(senders=np.array([0.0, 1.0]), receivers=np.array([1, 1]), weights=np.ones(2), num_nodes=4)
    back = jax.jit(lambda gg: gg)(ok)
    np.testing.assert_array_equal(back.receivers, ok.receivers)
    leaves, tree = jax.tree.flatten(ok)
    assert jax.tree.unflatten(tree, [None] * len(leaves)).num_nodes == 4


# ------------------------------------------------------------------------------------ lean construction and
# the transposed CSR
def _lexsort_reference(ei, n, w, *, symmetrize, deduplicate, self_loops):
    """The constructor's semantics written the slow, obvious way (int64, np.lexsort, dedup by max, the
    symmetric flag from multiset equality of (s, r, w) and (r, s, w)): the edge ORDER, including the order of
    parallel edges (input order), is pinned, not only the edge set."""
    ei = np.asarray(ei, np.int64)
    w = np.ones(ei.shape[1]) if w is None else np.asarray(w, np.float64)
    s, r = ei[0], ei[1]
    if self_loops in ("drop", "add"):
        keep = s != r
        s, r, w = s[keep], r[keep], w[keep]
    if symmetrize:
        s, r, w = np.concatenate([s, r]), np.concatenate([r, s]), np.concatenate([w, w])
    if self_loops == "add":
        loop = np.arange(n)
        s, r, w = np.concatenate([s, loop]), np.concatenate([r, loop]), np.concatenate([w, np.ones(n)])
    order = np.lexsort((s, r))
    s, r, w = s[order], r[order], w[order]
    if deduplicate and s.size:
        key = r * n + s
        first = np.r_[True, key[1:] != key[:-1]]
        wmax = np.full(int(first.sum()), -np.inf)
        np.maximum.at(wmax, np.cumsum(first) - 1, w)
        s, r, w = s[first], r[first], wmax
    fwd, bwd = np.lexsort((w, s, r)), np.lexsort((w, r, s))
    sym = bool(np.array_equal(s[fwd], r[bwd]) and np.array_equal(r[fwd], s[bwd]) and np.allclose(w[fwd], w[bwd]))
    return s, r, w, sym


def assert_transpose_fields(g):
    """transpose_perm orders the edges by (sender, receiver), ties in edge order; transpose_indptr are the
    sender row pointers (the graph's own indptr object for a symmetric graph)."""
    s, r = np.asarray(g.senders, np.int64), np.asarray(g.receivers, np.int64)
    assert g.transpose_perm.dtype == jnp.int32 and g.transpose_indptr.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(g.transpose_perm), np.lexsort((r, s)))
    np.testing.assert_array_equal(np.asarray(g.transpose_indptr),
                                  np.r_[0, np.cumsum(np.bincount(s, minlength=g.num_nodes))])
    if g.symmetric:
        assert g.transpose_indptr is g.indptr


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("symmetrize,deduplicate,self_loops",
                         list(itertools.product([True, False], [True, False], ["drop", "keep", "add"])))
def test_counting_sort_constructor_pins_order_and_flag(weighted, symmetrize, deduplicate, self_loops):
    """The O(m) constructor (two counting sorts, weights carried along) returns exactly the edge order,
    weights and symmetric flag of the lexsort formulation, parallel edges and random weights included,
    and the transposed CSR of the result."""
    rng = np.random.default_rng(7)
    n = 25
    ei = ref.random_edge_index(rng, n, 90, loops=5, duplicates=20, isolated=3)
    if symmetrize is False:  # also a symmetric input: the flag must come out True
        ei = np.concatenate([ei, ei[::-1]], axis=1)
    w = rng.random(ei.shape[1]) if weighted else None
    g = Graph.from_edge_index(ei, n, weights=w, symmetrize=symmetrize, deduplicate=deduplicate,
                              self_loops=self_loops)
    es, er, ew, esym = _lexsort_reference(ei, n, w, symmetrize=symmetrize, deduplicate=deduplicate,
                                          self_loops=self_loops)
    np.testing.assert_array_equal(np.asarray(g.senders), es)
    np.testing.assert_array_equal(np.asarray(g.receivers), er)
    np.testing.assert_array_equal(np.asarray(g.weights), ew)
    assert g.symmetric == esym
    assert_transpose_fields(g)


def test_int64_input_and_ids_near_n():
    """int64 (and float-typed integer) edge indices give the same graph as int32 ones; node ids up to
    n - 1 at a large n are kept (int32 storage, no overflow in the sort or the row pointers)."""
    n = 1_000_000
    ei = np.array([[n - 1, 0, n - 2, n - 1, 5], [0, n - 1, n - 1, n - 2, 5]], dtype=np.int64)
    w = np.array([2.0, 3.0, 1.0, 1.5, 4.0])
    g64 = Graph.from_edge_index(ei, n, weights=w, symmetrize=False)
    g32 = Graph.from_edge_index(ei.astype(np.int32), n, weights=w, symmetrize=False)
    gf = Graph.from_edge_index(ei.astype(np.float64), n, weights=w, symmetrize=False)
    for g in (g64, g32, gf):
        assert g.senders.dtype == jnp.int32 and g.receivers.dtype == jnp.int32
        np.testing.assert_array_equal(np.asarray(g.receivers), [0, n - 2, n - 1, n - 1])
        np.testing.assert_array_equal(np.asarray(g.senders), [n - 1, n - 1, 0, n - 2])
        np.testing.assert_array_equal(np.asarray(g.weights), [2.0, 1.5, 3.0, 1.0])  # the loop 5->5 dropped
        assert g.indptr[-1] == 4 and g.indptr[n - 2] == 1 and g.indptr[n - 1] == 2
        assert not g.symmetric
        assert_transpose_fields(g)
    # the transposed product reads the right rows at the top of the id range
    x = jnp.zeros((n, 3)).at[0].set(1.0).at[n - 1].set(10.0)
    out = np.asarray(spmm_transpose(g64, g64.weights, x))
    np.testing.assert_allclose(out[n - 1], 2.0 * 1.0 * np.ones(3))          # n-1 -> 0 (weight 2)
    np.testing.assert_allclose(out[0], 3.0 * 10.0 * np.ones(3))             # 0 -> n-1 (weight 3)
    np.testing.assert_allclose(out[n - 2], 1.0 * 10.0 * np.ones(3))         # n-2 -> n-1 (weight 1)


def test_weighted_duplicates_and_symmetric_flag():
    """Repeated edges with different weights: deduplication keeps the largest in each direction, and the
    flag compares those merged weights (symmetric only if both directions' maxima agree)."""
    ei = np.array([[0, 0, 1, 1], [1, 1, 0, 0]])
    g = Graph.from_edge_index(ei, 2, weights=[1.0, 3.0, 3.0, 2.0], symmetrize=False)
    np.testing.assert_array_equal(np.asarray(g.weights), [3.0, 3.0])
    assert g.symmetric
    g = Graph.from_edge_index(ei, 2, weights=[1.0, 3.0, 2.5, 2.0], symmetrize=False)
    np.testing.assert_array_equal(np.asarray(g.weights), [2.5, 3.0])  # edge 1->0 (receiver 0) first
    assert not g.symmetric
    # without deduplication the multisets {(0,1,1), (0,1,3)} and {(1,0,3), (1,0,2)} differ ...
    assert not Graph.from_edge_index(ei, 2, weights=[1.0, 3.0, 3.0, 2.0], symmetrize=False,
                                     deduplicate=False).symmetric
    # ... and agree here (parallel edges in a different input order)
    g = Graph.from_edge_index(ei, 2, weights=[1.0, 3.0, 3.0, 1.0], symmetrize=False, deduplicate=False)
    assert g.symmetric and g.num_edges == 4
    assert_transpose_fields(g)


def test_unweighted_and_weighted_storage_dtypes():
    """Weights are float64 under x64 (the tests' setting) and float32 without it: the host keeps what JAX
    stores, never a float64 copy for a float32 graph."""
    ei = np.array([[0, 1], [1, 2]], dtype=np.int32)
    assert Graph.from_edge_index(ei, 3).weights.dtype == jnp.float64
    with jax.enable_x64(False):
        g = Graph.from_edge_index(ei, 3, weights=np.array([0.5, 2.0]))
        assert g.weights.dtype == jnp.float32
        np.testing.assert_array_equal(np.asarray(g.weights), [0.5, 0.5, 2.0, 2.0])


def test_other_constructors_store_the_transposed_csr(rng):
    n = 12
    a = sp.random(n, n, density=0.3, random_state=3, format="csr")
    gs = Graph.from_scipy(a, symmetrize=False)
    gn = Graph.from_networkx(nx.gnp_random_graph(n, 0.3, seed=2, directed=True))
    gj = Graph.from_jraph(gs.to_jraph())
    for g in (gs, gn, gj):
        assert_transpose_fields(g)
    np.testing.assert_array_equal(np.asarray(gj.transpose_perm), np.asarray(gs.transpose_perm))


@pytest.mark.parametrize("k", [1, 3, 6])
@pytest.mark.parametrize("kind", ["directed", "undirected"])
def test_spmm_transpose_csr_path_values_grads_vmap(kind, k):
    """spmm_transpose through the stored transposed CSR (K >= 3) and its gather fallback (K < 3, or a Graph
    without the transposed CSR): values, gradients w.r.t. the ORIGINAL edge values and the block, vmap."""
    rng = np.random.default_rng(k + (kind == "directed"))
    n = 30
    ei = rng.integers(0, n, (2, 160))
    g = Graph.from_edge_index(ei, n, symmetrize=kind == "undirected", deduplicate=kind == "undirected")
    assert g.symmetric == (kind == "undirected")
    bare = Graph(senders=g.senders, receivers=g.receivers, weights=g.weights, num_nodes=n,
                 symmetric=g.symmetric, indptr=g.indptr)
    v = jnp.asarray(rng.random(g.num_edges))  # not symmetric even on the undirected graph
    a = np.zeros((n, n))
    np.add.at(a, (np.asarray(g.receivers), np.asarray(g.senders)), np.asarray(v))
    x = jnp.asarray(rng.random((n, k)))
    for gr in (g, bare):
        np.testing.assert_allclose(spmm_transpose(gr, v, x), a.T @ np.asarray(x), atol=1e-12)
    wt = rng.random((n, k))
    # d/dx sum(w * (A^T x)) = A w ; d/dv_e = sum_k w[s_e, k] x[r_e, k]
    gv, gx = jax.grad(lambda vv, xx: jnp.sum(jnp.asarray(wt) * spmm_transpose(g, vv, xx)), argnums=(0, 1))(v, x)
    np.testing.assert_allclose(gx, a @ wt, atol=1e-12)
    expected_gv = np.sum(wt[np.asarray(g.senders)] * np.asarray(x)[np.asarray(g.receivers)], axis=1)
    np.testing.assert_allclose(gv, expected_gv, atol=1e-12)
    xb = jnp.asarray(rng.random((2, n, k)))
    np.testing.assert_allclose(jax.jit(jax.vmap(lambda xx: spmm_transpose(g, v, xx)))(xb),
                               np.einsum("ji,bjk->bik", a, xb), atol=1e-12)


def test_too_many_nodes_for_int32_ids_rejected():
    """Ids and row pointers are stored as int32: a node count that does not fit is refused up front (it
    used to wrap around silently in the int32 conversion)."""
    with pytest.raises(ValueError, match=r"num_nodes .* must be < 2\*\*31 - 1"):
        Graph.from_edge_index(np.array([[0], [1]]), 2**31)


@pytest.mark.parametrize("shape, hint", [((5, 2), True), ((3,), False), ((3, 4), False)])
def test_edge_index_shape_error_suggests_the_transpose_of_pairs(shape, hint):
    """An (m, 2) array of pairs (a common layout) is refused with the fix named; other shapes without it."""
    ei = np.zeros(shape, np.int64)
    from jaxclp.datasets import RawData

    for build in (lambda: Graph.from_edge_index(ei, 3),
                  lambda: RawData(edge_index=ei, num_nodes=3, labels=np.zeros(3, np.int64), num_classes=1)):
        with pytest.raises(ValueError, match=r"must have shape \(2, m\)") as e:
            build()
        assert ("edge_index.T" in str(e.value)) is hint
