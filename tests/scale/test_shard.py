"""Node-sharded graphs (jaxclp.partition, jaxclp.halo_plan, jaxclp.sharded_graph, jaxclp.halo, jaxclp.sharded_clp):
partition and halo plan on the host, products on a device mesh.

Host tests check the plan (node order, blocks, send lists, the [local | halo] sender encoding) against
hand-computed cases and a dense reference. The device test runs in ONE fresh process with four forced host
CPU devices (``XLA_FLAGS`` must be set before jax starts) and float64, and checks every sharded product,
degree, normalization, the boundary conversions and the end-to-end propagate/solve against dense numpy
references and the unsharded library, plus the sharding of every output and the collectives XLA emits.
"""

import contextlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import jaxclp
from jaxclp import halo, halo_plan, sharded_clp, sharded_graph
from jaxclp.partition import _structure, node_order
from reference import host_devices_env

REPO = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------------------- host: the plan
def _path_graph(n, labels=None):
    """Undirected path 0-1-...-(n-1), optionally relabelled: node i of the path gets id labels[i]."""
    lab = np.arange(n) if labels is None else np.asarray(labels)
    ei = np.stack([lab[:-1], lab[1:]])
    return jaxclp.Graph.from_edge_index(ei, n)


def _decode_senders(plan):
    """Internal sender id of every (shard, edge) decoded from the [local | halo] encoding."""
    P, b = plan.num_shards, plan.block
    out = np.empty_like(plan.senders)
    for q in range(P):
        for e, ext in enumerate(plan.senders[q]):
            if ext < b:
                out[q, e] = q * b + ext
                continue
            slot = ext - b
            (d, base, _), = [o for o in plan.offsets if o[1] <= slot < o[1] + o[2]]
            p = (q - d) % P
            assert slot - base < plan.send_counts[p, q], "halo slot beyond the send list"
            out[q, e] = p * b + plan.send_offsets[p, slot]
    return out


def _check_plan_against_dense(graph, plan):
    """The plan's edges are the graph's, permuted; send lists are exactly the remote rows each shard reads."""
    n, P, b = graph.num_nodes, plan.num_shards, plan.block
    s, r, w = (np.asarray(a) for a in (graph.senders, graph.receivers, graph.weights))
    assert sorted(plan.order[plan.order >= 0].tolist()) == list(range(n))
    np.testing.assert_array_equal(plan.order[plan.rank], np.arange(n))
    assert plan.counts.sum() == n and plan.num_edges.sum() == s.shape[0]
    # dense adjacency in internal order rebuilt from the plan == the user's, permuted
    a_user = np.zeros((n, n))
    np.add.at(a_user, (r, s), w)
    a_int = np.zeros((P * b, P * b))
    rows = np.arange(P)[:, None] * b + plan.receivers
    np.add.at(a_int, (rows, plan.senders_global), plan.weights)
    np.testing.assert_array_equal(a_int[np.ix_(plan.rank, plan.rank)], a_user)
    pad = plan.order < 0
    assert not a_int[pad].any() and not a_int[:, pad].any()
    # padding edges carry zero weight and sit after the real ones (receivers stay sorted)
    for q in range(P):
        assert np.all(np.diff(plan.receivers[q]) >= 0)
        assert not plan.weights[q, plan.num_edges[q]:].any()
    np.testing.assert_array_equal(_decode_senders(plan)[plan.weights != 0], plan.senders_global[plan.weights != 0])
    # halo lists == the dense reference: the rows of other shards that shard q's edges read
    nz_r, nz_s = np.nonzero(a_int)
    for q in range(P):
        for p in range(P):
            want = np.unique(nz_s[(nz_r // b == q) & (nz_s // b == p)]) - p * b if p != q else np.array([], int)
            got = plan.send[p, q, :plan.send_counts[p, q]]
            np.testing.assert_array_equal(got, want, err_msg=f"send list {p} -> {q}")
    assert plan.halo == max(1, int(plan.send_counts.max()))
    # the lists by offset (ppermute rounds) are the same lists, each offset padded to its own longest one
    want_offsets = []
    for d in range(1, P):
        h_d = max(int(plan.send_counts[p, (p + d) % P]) for p in range(P))
        if h_d:
            base = sum(o[2] for o in want_offsets)
            want_offsets.append((d, base, h_d))
            for p in range(P):
                c = plan.send_counts[p, (p + d) % P]
                np.testing.assert_array_equal(plan.send_offsets[p, base:base + c], plan.send[p, (p + d) % P, :c])
    assert plan.offsets == tuple(want_offsets)
    for q in range(P):  # all_to_all: halo slot (offset d, j) of shard q is row j of the block from (q - d) % P
        for d, base, h_d in plan.offsets:
            np.testing.assert_array_equal(plan.recv_slots[q, base:base + h_d],
                                          ((q - d) % P) * plan.halo + np.arange(h_d))
    assert plan.send_offsets.shape == (P, sum(o[2] for o in want_offsets))


def test_plan_path_graph_hand_computed():
    g = _path_graph(6)
    plan = halo_plan.build_plan(g, 2)
    assert (plan.block, plan.halo) == (3, 1)
    np.testing.assert_array_equal(plan.counts, [3, 3])
    # shard 0 holds nodes 0..2 and reads node 3 (row 0 of shard 1); shard 1 reads node 2 (row 2 of shard 0)
    np.testing.assert_array_equal(plan.send_counts, [[0, 1], [1, 0]])
    assert plan.send[0, 1, 0] == 2 and plan.send[1, 0, 0] == 0
    # one ppermute round (offset 1, one row); shard 0's in-edges: 1->0, 0->1, 2->1, 1->2, 3->2, the last
    # one reads halo slot b + 0 = 3
    assert plan.offsets == ((1, 0, 1),)
    np.testing.assert_array_equal(plan.receivers[0], [0, 1, 1, 2, 2])
    np.testing.assert_array_equal(plan.senders[0], [1, 0, 2, 1, 3])
    st = plan.halo_stats(num_classes=10, itemsize=4)
    assert st["halo_rows"] == 2 and st["padded_rows"] == 2 and st["padded_bytes"] == 80
    assert st["ppermute_rows"] == 2 and st["received_fraction"] == pytest.approx(2 / 6)
    assert st["allgather_bytes"] == 2 * 3 * 40 and st["edge_cut"] == pytest.approx(2 / 10)
    assert st["remote_fraction"] == pytest.approx(2 / 6)
    _check_plan_against_dense(g, plan)


def test_plan_padding_and_shard_without_edges():
    # n = 7 over 4 shards: b = 2, the last shard has 1 node, 1 padding row; nodes 4..6 are isolated
    ei = np.array([[0, 1, 2], [1, 2, 3]])
    g = jaxclp.Graph.from_edge_index(ei, 7)
    plan = halo_plan.build_plan(g, 4)
    assert plan.block == 2
    np.testing.assert_array_equal(plan.counts, [2, 2, 2, 1])
    np.testing.assert_array_equal(plan.num_edges, [3, 3, 0, 0])
    np.testing.assert_array_equal(plan.order, [0, 1, 2, 3, 4, 5, 6, -1])
    _check_plan_against_dense(g, plan)
    # more shards than nodes: empty shards are all padding
    plan = halo_plan.build_plan(g, 8)
    assert plan.block == 1 and plan.counts.tolist() == [1] * 7 + [0]
    _check_plan_against_dense(g, plan)
    # no edge crosses shards: no halo at all
    plan = halo_plan.build_plan(jaxclp.Graph.from_edge_index(np.array([[0, 2], [1, 3]]), 4), 2)
    assert plan.offsets == () and plan.send_offsets.shape == (2, 0) and plan.send_counts.sum() == 0
    _check_plan_against_dense(jaxclp.Graph.from_edge_index(np.array([[0, 2], [1, 3]]), 4), plan)


@pytest.mark.parametrize("partition", ["none", "rcm", "bfs"])
@pytest.mark.parametrize("balance", ["rows", "edges"])
def test_plan_random_graph_against_dense(partition, balance):
    rng = np.random.default_rng(3)
    n = 53
    s, r = rng.integers(0, 40, 120), rng.integers(0, 40, 120)  # nodes 40..52 isolated
    w = rng.uniform(0.5, 2.0, 120)
    g = jaxclp.Graph.from_edge_index(np.stack([s, r]), n, weights=w, symmetrize=False, self_loops="keep")
    for P in (1, 3, 4):
        _check_plan_against_dense(g, halo_plan.build_plan(g, P, partition=partition, balance=balance))


def test_rcm_and_bfs_recover_a_relabelled_path():
    # a path with random labels: contiguous blocks of the user order cut ~every edge; RCM/BFS put the path
    # back in order, and then each shard reads exactly one row from each neighbouring shard
    n, P = 40, 4
    labels = np.random.default_rng(0).permutation(n)
    g = _path_graph(n, labels)
    none = halo_plan.build_plan(g, P)
    assert none.send_counts.sum() > 20
    for partition in ("rcm", "bfs"):
        plan = halo_plan.build_plan(g, P, partition=partition)
        assert plan.halo == 1
        want = np.zeros((P, P), int)
        for p in range(P - 1):
            want[p, p + 1] = want[p + 1, p] = 1
        np.testing.assert_array_equal(plan.send_counts, want)
        assert plan.offsets == ((1, 0, 1), (P - 1, 1, 1))  # two ppermute rounds of one row
        assert plan.halo_stats()["ppermute_rows"] == 2 * P
        _check_plan_against_dense(g, plan)


def test_bfs_order_components_and_isolated_nodes():
    # two components (a triangle 5-6-7 and an edge 1-3) and isolated nodes 0, 2, 4, 8
    ei = np.array([[5, 6, 7, 1], [6, 7, 5, 3]])
    g = jaxclp.Graph.from_edge_index(ei, 9)
    order, parts = node_order(g, "bfs")
    assert parts is None
    assert sorted(order[:3].tolist()) == [5, 6, 7]  # largest component first, contiguous
    assert sorted(order[3:5].tolist()) == [1, 3]
    assert order[5:].tolist() == [0, 2, 4, 8]  # isolated nodes last, in id order


def test_balance_edges_evens_out_a_skewed_graph():
    # node 0 has 60 in-edges, the others ~1: equal rows put all of them on shard 0
    n = 64
    hub = np.stack([np.arange(1, 61), np.zeros(60, int)])
    chain = np.stack([np.arange(1, n - 1), np.arange(2, n)])
    g = jaxclp.Graph.from_edge_index(np.concatenate([hub, chain], axis=1), n, symmetrize=False)
    rows = halo_plan.build_plan(g, 4, balance="rows")
    edges = halo_plan.build_plan(g, 4, balance="edges")
    assert rows.num_edges.max() == 60 + 14  # the hub and the chain edges into nodes 2..15
    assert edges.num_edges.max() < rows.num_edges.max()
    assert edges.num_edges.max() <= 62  # the hub's shard: its 60 edges and about the hub alone
    _check_plan_against_dense(g, edges)


def test_plan_bad_arguments():
    g = _path_graph(5)
    with pytest.raises(ValueError, match="partition"):
        halo_plan.build_plan(g, 2, partition="spectral")
    with pytest.raises(ValueError, match="num_shards"):
        halo_plan.build_plan(g, 0)
    with pytest.raises(ValueError, match="balance"):
        halo_plan.build_plan(g, 2, balance="nodes")
    with pytest.raises(ValueError, match="order"):
        halo_plan.build_plan(g, 2, order=[0, 1, 2, 3, 3])


def test_metis_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymetis", None)  # import pymetis -> ImportError
    with pytest.raises(ImportError, match=r"jaxclp\[scale\]"):
        node_order(_path_graph(5), "metis", 2)


def test_metis_partition():
    pytest.importorskip("pymetis")
    # two 20-cliques joined by one edge: METIS cuts that edge
    a = [(i, j) for i in range(20) for j in range(i + 1, 20)]
    ei = np.array(a + [(i + 20, j + 20) for i, j in a] + [(0, 20)]).T
    g = jaxclp.Graph.from_edge_index(ei, 40)
    plan = halo_plan.build_plan(g, 2, partition="metis")
    assert plan.send_counts.sum() == 2
    _check_plan_against_dense(g, plan)


def test_plan_index_dtypes_and_parallel_edges_in_input_order():
    # the per-edge tables are int32 when the ids fit (the ShardedGraph's dtype; half of int64's host memory),
    # and parallel edges keep their input order (two stable counting sorts, as np.lexsort)
    ei = np.array([[1, 1, 2, 1, 0, 3], [0, 0, 1, 0, 2, 2]])
    g = jaxclp.Graph.from_edge_index(ei, 4, weights=np.array([1.0, 2.0, 5.0, 3.0, 6.0, 7.0]), symmetrize=False,
                                     deduplicate=False)
    for P in (1, 2):
        plan = halo_plan.build_plan(g, P)
        for name in ("receivers", "senders", "senders_global", "order", "rank", "send", "send_offsets",
                     "recv_slots"):
            assert getattr(plan, name).dtype == np.int32, name
        _check_plan_against_dense(g, plan)
    plan = halo_plan.build_plan(g, 2)  # shard 0: rows 0, 1; the edges 1 -> 0 (weights 1, 2, 3 in input order)
    np.testing.assert_array_equal(plan.receivers[0, :4], [0, 0, 0, 1])
    np.testing.assert_array_equal(plan.weights[0, :4], [1.0, 2.0, 3.0, 5.0])


def test_structure_keeps_an_edge_with_many_parallel_copies():
    # 128 parallel copies each way of 0 - 1 (deduplicate=False): a byte counter of the copies wraps to 0 and
    # would drop the edge; the structure is boolean. Declared symmetric or not, the structure is the same.
    ei = np.concatenate([np.tile([[0], [1]], 128), np.tile([[1], [0]], 128), [[1, 2], [2, 1]]], axis=1)
    g = jaxclp.Graph.from_edge_index(ei, 3, symmetrize=False, deduplicate=False)
    assert g.symmetric
    s, r = np.asarray(g.senders), np.asarray(g.receivers)
    for sym in (True, False):
        a = _structure(s, r, 3, sym)
        np.testing.assert_array_equal(a.toarray(), [[0, 1, 0], [1, 0, 1], [0, 1, 0]])
        assert a.has_sorted_indices


# ----------------------------------------------------------------------------------------- the local CSR
def test_local_csr_tables_rebuild_each_shard_and_its_transpose():
    """indptr / t_perm / t_indptr of every shard: the CSR (b rows, b + S columns) and its transpose rebuild the
    shard's [local | halo] block of the adjacency, padding edges included (weight 0)."""
    import jax
    from jax.sharding import Mesh

    rng = np.random.default_rng(3)
    g = jaxclp.Graph.from_edge_index(rng.integers(0, 30, (2, 80)), 30)
    plan = halo_plan.build_plan(g, 3, partition="rcm")
    b, S = plan.block, plan.send_offsets.shape[1]
    indptr, t_perm, t_indptr = sharded_graph._csr_tables(plan.receivers, plan.senders, b, S)
    assert indptr.shape == (3, b + 1) and t_perm.shape == plan.senders.shape and t_indptr.shape == (3, b + S + 1)
    for q in range(3):
        rows = np.repeat(np.arange(b), np.diff(indptr[q]))
        np.testing.assert_array_equal(rows, plan.receivers[q])  # every edge, padding ones on row b - 1
        want = np.zeros((b, b + S))
        np.add.at(want, (plan.receivers[q], plan.senders[q]), plan.weights[q])
        t_rows = np.repeat(np.arange(b + S), np.diff(t_indptr[q]))
        np.testing.assert_array_equal(t_rows, plan.senders[q, t_perm[q]])
        got_t = np.zeros((b + S, b))
        np.add.at(got_t, (t_rows, plan.receivers[q, t_perm[q]]), plan.weights[q, t_perm[q]])
        np.testing.assert_array_equal(got_t, want.T)
    # shard_graph stores the same tables (one device: P = 1, no halo)
    sg = jaxclp.shard_graph(g, Mesh(np.array(jax.devices()[:1]), ("nodes",)), "nodes", partition="rcm")
    p1 = halo_plan.build_plan(g, 1, partition="rcm")
    for got, want in zip((sg.indptr, sg.t_perm, sg.t_indptr), sharded_graph._csr_tables(p1.receivers, p1.senders,
                                                                                 p1.block, 0)):
        np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("kw, match", [
    (dict(prior_source="labels"), "prior_source"), (dict(compat="dce"), "compat"),
    (dict(compat="refined", l1_normalize=True), "refined"), (dict(spectral_scale=True, l1_normalize=True),
                                                             "spectral_scale"),
    (dict(normalization="rw"), "normalization")])
def test_clp_beliefs_rejects_a_variant_that_does_not_exist_on_both_paths(kw, match):
    """The sharded and the single-device clp_beliefs refuse the same variants with the same message."""
    import jax
    from jax.sharding import Mesh

    g = _path_graph(12)
    sg = jaxclp.shard_graph(g, Mesh(np.array(jax.devices()[:1]), ("nodes",)), "nodes", partition="rcm")
    prior = np.full((12, 3), 1 / 3, np.float32)
    labels, train = np.arange(12) % 3, np.arange(12) < 6
    for gr in (g, sg):
        with pytest.raises(ValueError, match=match):
            jaxclp.clp_beliefs(gr, prior, labels, train, alphas=(0.5,), **kw)


@pytest.mark.parametrize("path", ["kernel", "xla"])
def test_sharded_product_memory_does_not_scale_with_edges_times_classes(path):
    """One compiled sharded product (and its transpose, the operator's matvec / rmatvec) needs no (E, K)
    temporary: XLA's temp memory stays below half of E * K * 8 bytes on a graph where E * K dominates (the
    gather + segment_sum product needed E * K * 8 plus change); values against the dense product."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh

    from jaxclp import sparse

    if path == "kernel" and not sparse.kernel_available():
        pytest.skip("the fused CPU kernel is not built or JAXCLP_NO_FFI is set")
    rng = np.random.default_rng(4)
    n, m = 1500, 40000
    K = 16 if path == "kernel" else 24  # another shape: the jitted products trace anew on the XLA path
    g = jaxclp.Graph.from_edge_index(rng.integers(0, n, (2, m)), n)
    sg = jaxclp.shard_graph(g, Mesh(np.array(jax.devices()[:1]), ("nodes",)), "nodes", partition="rcm")
    ev = sharded_graph.edge_values(sg, "sym")
    x = rng.normal(size=(n, K))
    xi = sharded_graph.to_internal(sg, jnp.asarray(x))
    a = np.zeros((n, n))
    np.add.at(a, (np.asarray(g.receivers), np.asarray(g.senders)), np.asarray(jaxclp.graph.edge_values(g, "sym")))
    op = sharded_clp.ShardedOperator(sg, ev, xi, 2.0 * xi)
    edges_k = sg.weights.shape[1] * K * 8
    calls = {"spmm": (lambda v, x_: halo.sharded_spmm(sg, v, x_), a @ x),
             "spmm_transpose": (lambda v, x_: halo.sharded_spmm_transpose(sg, v, x_), a.T @ x),
             "matvec": (lambda v, x_: op._replace(values=v).matvec(x_), x * (a @ (2 * x * x))),
             "rmatvec": (lambda v, x_: op._replace(values=v).rmatvec(x_), 2 * x * (a.T @ (x * x)))}
    ctx = sparse.xla_path() if path == "xla" else contextlib.nullcontext()
    with ctx:
        for name, (f, want) in calls.items():
            compiled = jax.jit(f).lower(ev, xi).compile()
            temp = compiled.memory_analysis().temp_size_in_bytes
            assert temp < edges_k / 2, f"{name}: temp {temp} B vs E * K * 8 = {edges_k} B"
            got = np.asarray(compiled(ev, xi))[np.asarray(sg.rank)]
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)
        # the gradient through the local CSR (csr_matmul's rule, rectangular b x (b + S)) = the transpose
        w = rng.normal(size=(n, K))
        wi = sharded_graph.to_internal(sg, jnp.asarray(w))
        gx = jax.grad(lambda x_: jnp.sum(wi * halo.sharded_spmm(sg, ev, x_)))(xi)
        np.testing.assert_allclose(np.asarray(gx)[np.asarray(sg.rank)], a.T @ w, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------------------- devices
SCRIPT = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np, jax.numpy as jnp, jaxclp
    from jax.sharding import Mesh, PartitionSpec as P
    from jaxclp import halo, sharded_clp, sharded_graph
    assert len(jax.devices()) == 4
    mesh = Mesh(np.array(jax.devices()), ("nodes",))
    ROWS = P("nodes")
    rng = np.random.default_rng(0)

    def dense_ahat(g, norm):
        n = g.num_nodes
        a = np.zeros((n, n))
        np.add.at(a, (np.asarray(g.receivers), np.asarray(g.senders)), np.asarray(g.weights))
        if norm == "none":
            return a
        din, dout = a.sum(1), a.sum(0)
        inv = lambda d, p: np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0) ** p, 0.0)
        if norm == "row":
            return inv(din, 1.0)[:, None] * a
        return inv(din, 0.5)[:, None] * a * inv(dout, 0.5)[None, :]

    def user(sg, y):  # internal -> user order on the host (from_internal itself is tested once per plan)
        return np.asarray(y)[np.asarray(sg.rank)]

    def close(a, b, what):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12, err_msg=what)

    graphs = {}
    # undirected, weighted, isolated nodes 30..36, n = 37 not divisible by 4
    s, r = rng.integers(0, 30, 90), rng.integers(0, 30, 90)
    graphs["undirected_n37"] = jaxclp.Graph.from_edge_index(np.stack([s, r]), 37, weights=rng.uniform(0.5, 2, 90))
    # directed with self-loops (out-degree != in-degree, a diagonal)
    s, r = rng.integers(0, 41, 150), rng.integers(0, 41, 150)
    graphs["directed_loops"] = jaxclp.Graph.from_edge_index(np.stack([s, r]), 41, symmetrize=False,
                                                             self_loops="keep")
    # edges only among nodes 0..9 of 40: in the user order shards 1..3 have no edges and nothing crosses shards
    s, r = rng.integers(0, 10, 30), rng.integers(0, 10, 30)
    graphs["empty_shards"] = jaxclp.Graph.from_edge_index(np.stack([s, r]), 40)
    parts = ["none", "rcm", "bfs"]
    try:
        import pymetis  # noqa: F401
        parts.append("metis")
    except ImportError:
        pass

    # (graph, partition, balance): every partitioner and balance on one graph, the others once or twice (each
    # new plan compiles every product anew); "full" runs every normalization and both exchanges
    cases = [("undirected_n37", p, "rows") for p in parts] + [("undirected_n37", "rcm", "edges"),
             ("directed_loops", "rcm", "rows"), ("directed_loops", "bfs", "edges"), ("empty_shards", "rcm", "rows"),
             ("empty_shards", "none", "rows")]
    K = 3
    for gname, part, balance in cases:
        g = graphs[gname]
        n = g.num_nodes
        x = rng.normal(size=(n, K))
        xv = rng.normal(size=n)
        sg = jaxclp.shard_graph(g, mesh, "nodes", partition=part, balance=balance)
        if gname == "empty_shards" and part == "none":
            assert (np.asarray(sg.weights) != 0).sum(axis=1).tolist() == [g.num_edges, 0, 0, 0]
            assert sg.offsets == ()
        tag = f"{gname}/{part}/{balance}"
        xi = sharded_graph.to_internal(sg, x)
        assert xi.shape == (sg.padded_nodes, K) and xi.sharding.spec == ROWS, xi.sharding
        pad = np.asarray(sg.order) < 0
        assert not np.asarray(xi)[pad].any()
        close(sharded_graph.from_internal(sg, xi), x, tag + " round trip")
        close(user(sg, sharded_graph.in_degree(sg)), dense_ahat(g, "none").sum(1), tag + " d_in")
        d_out = sharded_graph.out_degree(sg)
        assert d_out.sharding.spec == ROWS
        close(user(sg, d_out), dense_ahat(g, "none").sum(0), tag + " d_out")
        full = part == "rcm" and balance == "rows"  # every normalization and both exchanges, once per graph
        for norm in (("sym", "row", "none") if full else ("sym",)):
            a = dense_ahat(g, norm)
            ev = sharded_graph.edge_values(sg, norm)
            assert ev.shape == sg.weights.shape and ev.sharding.spec == ROWS
            if full:
                ev_ag = sharded_graph.edge_values(sg, norm, exchange="allgather")
                close(ev, ev_ag, tag + " edge values halo vs allgather")
                for ex in ("all_to_all", "allgather"):
                    close(user(sg, sharded_graph.out_degree(sg, exchange=ex)), dense_ahat(g, "none").sum(0),
                          tag + " d_out")
            for ex in ("ppermute", "all_to_all", "allgather") if full else ("ppermute",):
                y = halo.sharded_spmm(sg, ev, xi, exchange=ex)
                yt = halo.sharded_spmm_transpose(sg, ev, xi, exchange=ex)
                assert y.sharding.spec == ROWS and yt.sharding.spec == ROWS, (y.sharding, yt.sharding)
                close(user(sg, y), a @ x, f"{tag}/{norm}/{ex} spmm")
                close(user(sg, yt), a.T @ x, f"{tag}/{norm}/{ex} spmm_transpose")
            if full:
                gv = jaxclp.graph.edge_values(g, norm)
                close(user(sg, halo.sharded_spmm(sg, ev, xi)),
                      jaxclp.graph.spmm(g, gv, jnp.asarray(x)), tag + " vs jaxclp.graph.spmm")
                close(user(sg, halo.sharded_spmm_transpose(sg, ev, xi)),
                      jaxclp.graph.spmm_transpose(g, gv, jnp.asarray(x)), tag + " vs jaxclp.graph.spmm_transpose")
                vi = sharded_graph.to_internal(sg, xv)  # a vector (n,)
                close(user(sg, halo.sharded_spmm(sg, ev, vi)), a @ xv, tag + " vector")
                close(user(sg, halo.sharded_spmm_transpose(sg, ev, vi)), a.T @ xv,
                      tag + " vector transpose")
                evk = ev[..., None] * jnp.arange(1.0, K + 1)  # per-class (P, E, K) values
                close(user(sg, halo.sharded_spmm(sg, evk, xi)),
                      (a @ x) * np.arange(1.0, K + 1), tag + " per-class values")

    # the factored operator, propagate and solve against the unsharded library
    g = graphs["undirected_n37"]
    n = g.num_nodes
    b0 = jax.nn.softmax(jnp.asarray(rng.normal(size=(n, K))))
    prior = jax.nn.softmax(jnp.asarray(rng.normal(size=(n, K))))
    H = jnp.asarray(rng.dirichlet(np.ones(K), size=K))
    H = (H + H.T) / 2  # a symmetric compatibility; rows need not sum to one here
    sg = jaxclp.shard_graph(g, mesh, "nodes", partition="bfs")
    op = sharded_clp.clp_operator(sg, sharded_graph.to_internal(sg, b0), H, normalization="sym")
    ref = jaxclp.clp_operator(g, b0, H, normalization="sym")
    z = jnp.asarray(rng.normal(size=(n, K)))
    mv = op.matvec(sharded_graph.to_internal(sg, z))
    assert mv.sharding.spec == ROWS
    close(sharded_graph.from_internal(sg, mv), ref.matvec(z), "matvec")
    close(sharded_graph.from_internal(sg, op.rmatvec(sharded_graph.to_internal(sg, z))), ref.rmatvec(z), "rmatvec")
    # the FactoredOperator protocol: jaxclp.operator's own functions take the sharded operator as it is
    from jaxclp.operator import a_priori_bound, norm_bounds, operator_spectral_radius, spectral_scale
    for got_, want_ in zip(norm_bounds(op), norm_bounds(ref)):
        close(got_, want_, "norm_bounds")
    assert a_priori_bound(op, "sym") == a_priori_bound(ref, "sym") == 1.0
    assert a_priori_bound(op._replace(left=2 * op.left), "sym") == float("inf")
    (sc, rho_sc), (sc_ref, rho_ref) = spectral_scale(op), spectral_scale(ref)
    np.testing.assert_allclose(np.asarray(rho_sc), np.asarray(rho_ref), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(sharded_graph.from_internal(sg, sc.matvec(sharded_graph.to_internal(sg, z)))),
                               np.asarray(sc_ref.matvec(z)), rtol=1e-9, atol=1e-12)
    info = operator_spectral_radius(op, tol=1e-10)
    np.testing.assert_allclose(np.asarray(info.rho), np.asarray(operator_spectral_radius(ref, tol=1e-10).rho),
                               rtol=1e-9)
    # the exchange is static data of the operator: a jit argument, one product per exchange
    op_a2a = sharded_clp.clp_operator(sg, sharded_graph.to_internal(sg, b0), H, normalization="sym",
                                      exchange="all_to_all")
    assert op_a2a.exchange == "all_to_all"
    assert len(jax.tree_util.tree_leaves(op_a2a)) == len(jax.tree_util.tree_leaves(sg)) + 3  # not a leaf
    close(sharded_graph.from_internal(sg, jax.jit(lambda o, x: o.matvec(x))(op_a2a, sharded_graph.to_internal(sg, z))),
          ref.matvec(z), "matvec all_to_all under jit")
    for norm in ("none", "sym"):
        got, want = (f(gr, b0, H, normalization=norm, tol=1e-10)
                     for f, gr in ((sharded_clp.spectral_radius, sg), (jaxclp.spectral_radius, g)))
        for field in ("rho", "lower", "upper", "row_sum_bound", "col_sum_bound"):
            np.testing.assert_allclose(np.asarray(getattr(got, field)), np.asarray(getattr(want, field)),
                                       rtol=1e-9, err_msg=f"spectral_radius {norm} {field}")
        assert np.abs(np.asarray(got.iterations) - np.asarray(want.iterations)).max() <= 1
    labels, train = rng.integers(0, K, n), rng.random(n) < 0.4
    for gname in ("undirected_n37", "directed_loops"):  # loops are excluded, padding edges never counted
        gg = graphs[gname]
        lab = rng.integers(-1, 2, gg.num_nodes)  # -1: unlabelled ends, not counted
        hom = sharded_clp.edge_homophily(jaxclp.shard_graph(gg, mesh, "nodes", partition="bfs"), lab)
        close(hom, jaxclp.edge_homophily(gg, lab), "edge_homophily " + gname)
    h_got, info = sharded_clp.estimate_compatibility(sg, prior, labels, train)
    h_want, _ = jaxclp.estimate_compatibility(g, prior, labels, train)
    assert float(np.abs(np.asarray(h_want) - np.eye(K) / K).max()) > 0.01 and bool(info.converged)
    close(h_got, h_want, "estimate_compatibility")
    for l1 in (False, True):
        for norm in ("sym", "row"):
            got = sharded_clp.propagate(sg, b0, H, prior, alpha=0.8, num_iters=9, normalization=norm, l1_normalize=l1)
            want = jaxclp.propagate(g, b0, H, prior, alpha=0.8, num_iters=9, normalization=norm, l1_normalize=l1)
            close(got, want, f"propagate l1={l1} {norm}")
    want = jaxclp.solve(g, b0, H, prior, alpha=0.9, method="dense").value
    for method in ("neumann", "bicgstab", "cg", "auto"):
        sol = sharded_clp.solve(sg, b0, H, prior, alpha=0.9, method=method, tol=1e-11)
        np.testing.assert_allclose(np.asarray(sol.value), np.asarray(want), rtol=1e-8, atol=1e-10,
                                   err_msg=method)
        assert bool(sol.converged.all()) and sol.value.shape == (n, K)
    unsh = jaxclp.solve(g, b0, H, prior, alpha=0.9, method="neumann", tol=1e-11)
    sol = sharded_clp.solve(sg, b0, H, prior, alpha=0.9, method="neumann", tol=1e-11)
    np.testing.assert_array_equal(np.asarray(sol.iterations), np.asarray(unsh.iterations))
    close(sol.rho_bound, unsh.rho_bound, "rho bound")
    # self-loops: jacobi differs from neumann and still matches the dense solve
    gl = graphs["directed_loops"]
    sgl = jaxclp.shard_graph(gl, mesh, "nodes", partition="rcm")
    bl = jax.nn.softmax(jnp.asarray(rng.normal(size=(gl.num_nodes, K))))
    wl = jaxclp.solve(gl, bl, H, bl, alpha=0.9, normalization="row", method="dense").value
    sol = sharded_clp.solve(sgl, bl, H, bl, alpha=0.9, normalization="row", method="jacobi", tol=1e-11)
    np.testing.assert_allclose(np.asarray(sol.value), np.asarray(wl), rtol=1e-8, atol=1e-10)
    # divergence is reported as in jaxclp.propagate
    try:
        sharded_clp.propagate(sgl, bl, H * 50, bl, alpha=0.9, normalization="none")
        raise AssertionError("no divergence error")
    except ValueError as err:
        assert "diverges" in str(err), err

    # n divisible by the device count: user-order results stay row-sharded
    g40 = graphs["empty_shards"]
    sg40 = jaxclp.shard_graph(g40, mesh, "nodes", partition="rcm")
    b40 = jax.nn.softmax(jnp.asarray(rng.normal(size=(40, K))))
    out = sharded_clp.propagate(sg40, b40, H, b40, alpha=0.5, num_iters=3)
    assert out.sharding.spec == ROWS, out.sharding
    close(out, jaxclp.propagate(g40, b40, H, b40, alpha=0.5, num_iters=3), "propagate n=40")

    # the halo product moves only the send lists (one all-to-all), never the whole state
    ev = sharded_graph.edge_values(sg, "sym")
    xi = sharded_graph.to_internal(sg, z)
    hlo = {ex: jax.jit(lambda v, x, ex=ex: halo.sharded_spmm(sg, v, x, exchange=ex)).lower(ev, xi).compile().as_text()
           for ex in halo.EXCHANGES}
    collectives = ("collective-permute", "all-to-all", "all-gather")
    for ex, op in zip(halo.EXCHANGES, collectives):
        assert op in hlo[ex] and not any(o in hlo[ex] for o in collectives if o != op), ex
    assert hlo["ppermute"].count(" collective-permute(") == len(sg.offsets) > 0  # one round per offset
    # the ShardedGraph is a pytree: it passes through jax.jit as an argument
    jitted = jax.jit(lambda sg_, v, x: halo.sharded_spmm(sg_, v, x))(sg, ev, xi)
    assert jitted.sharding.spec == ROWS
    close(jitted, halo.sharded_spmm(sg, ev, xi), "jit with the graph as argument")
    # a bad argument names itself
    for call, word in ((lambda: sharded_graph.to_internal(sg, z[:5]), "x"),
                       (lambda: halo.sharded_spmm(sg, ev[:, :3], xi), "values"),
                       (lambda: halo.sharded_spmm(sg, ev, xi, exchange="p2p"), "exchange"),
                       (lambda: jaxclp.shard_graph(g, mesh, "rows"), "axis"),
                       (lambda: sharded_clp.solve(sg, b0, H, prior, alpha=0.9, method="dense"), "method")):
        try:
            call()
            raise AssertionError(f"no error for {word}")
        except ValueError as err:
            assert word in str(err), err

    # shard_graph_local (one process: every shard is local) from raw edges == shard_graph of the Graph
    assert sharded_graph.local_shards(mesh) == [0, 1, 2, 3]
    for gname in ("directed_loops", "undirected_n37"):
        gg = graphs[gname]
        ref = jaxclp.shard_graph(gg, mesh, "nodes")
        perm = rng.permutation(gg.num_edges)  # the input order does not matter
        loc = jaxclp.shard_graph_local(*(np.asarray(a)[perm] for a in (gg.senders, gg.receivers, gg.weights)),
                                      gg.num_nodes, mesh, "nodes", symmetric=gg.symmetric)
        assert (loc.block, loc.halo, loc.offsets, loc.symmetric) == (ref.block, ref.halo, ref.offsets, ref.symmetric)
        for f in ("receivers", "senders", "senders_global", "weights", "num_edges", "send", "send_offsets",
                  "recv_slots", "order", "rank"):
            np.testing.assert_array_equal(np.asarray(getattr(loc, f)), np.asarray(getattr(ref, f)), err_msg=f)
            assert getattr(loc, f).sharding == getattr(ref, f).sharding, f
    try:
        jaxclp.shard_graph_local([0], [37], [1.0], 37, mesh, "nodes")
        raise AssertionError("no error for an out-of-range id")
    except ValueError as err:
        assert "node ids" in str(err), err

    # the public functions take the ShardedGraph in place of the Graph and return the unsharded results
    close(jaxclp.propagate(sg, b0, H, prior, alpha=0.8, num_iters=9, normalization="row"),
          jaxclp.propagate(g, b0, H, prior, alpha=0.8, num_iters=9, normalization="row"), "jaxclp.propagate(sg)")
    for method in ("neumann", "cg", "auto"):
        got = jaxclp.solve(sg, b0, H, prior, alpha=0.9, method=method, tol=1e-11)
        want = jaxclp.solve(g, b0, H, prior, alpha=0.9, method=method, tol=1e-11)
        assert got.method == want.method, (got.method, want.method)
        np.testing.assert_allclose(np.asarray(got.value), np.asarray(want.value), rtol=1e-9, atol=1e-11,
                                   err_msg="jaxclp.solve(sg) " + method)
    # a vector of alphas: (A, n, K), the method auto picks for the largest alpha, as the unsharded (vmapped) solve
    got = jaxclp.solve(sg, b0, H, prior, alpha=jnp.array([0.3, 0.9]), tol=1e-11)
    want = jaxclp.solve(g, b0, H, prior, alpha=jnp.array([0.3, 0.9]), method=got.method, tol=1e-11)
    assert got.value.shape == (2, n, K) and got.converged.shape == want.converged.shape
    np.testing.assert_allclose(np.asarray(got.value), np.asarray(want.value), rtol=1e-9, atol=1e-11,
                               err_msg="jaxclp.solve(sg) vector alpha")
    close(jaxclp.estimate_compatibility(sg, prior, labels, train)[0], h_want, "jaxclp.estimate_compatibility(sg)")
    lab = rng.integers(0, 2, n)
    close(jaxclp.edge_homophily(sg, lab), jaxclp.edge_homophily(g, lab), "jaxclp.edge_homophily(sg)")
    # the mesh JAX's docs tell users to make (jax.make_mesh: Explicit axes by default) works as the hand-built
    # Mesh(np.array(jax.devices()), ("nodes",)) does, in the same process: same compatibility, same solve
    made = jax.make_mesh((4,), ("nodes",))
    assert made.axis_types == (jax.sharding.AxisType.Explicit,)
    sgm = jaxclp.shard_graph(g, made, partition="bfs")
    assert isinstance(sgm, jaxclp.GraphLike) and not sgm.has_edge_list  # the graph protocol, jaxclp/protocol.py
    hand = jaxclp.shard_graph(g, Mesh(np.array(jax.devices()), ("nodes",)), partition="bfs")
    for gr in (sgm, hand):
        close(jaxclp.estimate_compatibility(gr, prior, labels, train)[0], h_want, "make_mesh compat")
        sol_m = jaxclp.solve(gr, b0, H, prior, alpha=0.9, method="neumann", tol=1e-11)
        close(sol_m.value, unsh.value, "make_mesh solve")
        assert bool(sol_m.converged.all())
        close(jaxclp.propagate(gr, b0, H, prior, alpha=0.8, num_iters=9),
              jaxclp.propagate(g, b0, H, prior, alpha=0.8, num_iters=9), "make_mesh propagate")
    # one pipeline: implicit differentiation (custom_linear_solve) runs through a sharded solve as well
    w_grad = jnp.asarray(np.random.default_rng(99).normal(size=(n, K)))
    for m in ("neumann", "cg"):
        def loss(gr, p, a, m=m):
            return jnp.sum(w_grad * jaxclp.solve(gr, b0, H, p, alpha=a, method=m, tol=1e-12).value)
        (gp_s, ga_s), (gp_p, ga_p) = (jax.grad(loss, argnums=(1, 2))(gr, prior, 0.9) for gr in (sg, g))
        np.testing.assert_allclose(np.asarray(gp_s), np.asarray(gp_p), rtol=1e-9, atol=1e-12, err_msg=m)
        np.testing.assert_allclose(float(ga_s), float(ga_p), rtol=1e-9, err_msg=m)
    np.testing.assert_allclose(np.asarray(jaxclp.spectral_radius(sg, b0, H, tol=1e-10).rho),
                               np.asarray(jaxclp.spectral_radius(g, b0, H, tol=1e-10).rho), rtol=1e-8,
                               err_msg="jaxclp.spectral_radius(sg)")
    # the baselines: closed-form LP (every normalization, CG / BiCGStab / auto) and CLP*
    for norm, method in (("sym", "auto"), ("sym", "cg"), ("row", "bicgstab")):
        got = jaxclp.label_propagation(sg, labels, train, K, alpha=0.9, normalization=norm, method=method,
                                       tol=1e-11)
        want = jaxclp.label_propagation(g, labels, train, K, alpha=0.9, normalization=norm, method="dense")
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-8, atol=1e-10,
                                   err_msg=f"label_propagation {norm} {method}")
    close(jaxclp.clp_star(sg, prior, b0, H, alpha=0.7, num_iters=7, normalization="row"),
          jaxclp.clp_star(g, prior, b0, H, alpha=0.7, num_iters=7, normalization="row"), "clp_star")
    # one pipeline: propagate's edgewise engine and its diagnostics run on the sharded graph too
    close(jaxclp.propagate(sg, b0, H, prior, alpha=0.8, num_iters=9, engine="edgewise"),
          jaxclp.propagate(g, b0, H, prior, alpha=0.8, num_iters=9, engine="edgewise"), "propagate edgewise")
    (got_b, got_info), (want_b, want_info) = (
        jaxclp.propagate(gr, b0, H, prior, alpha=0.8, num_iters=9, return_info=True) for gr in (sg, g))
    close(got_b, want_b, "propagate return_info")
    close(got_info.residual, want_info.residual, "propagate residual")
    # methods the sharded graph does not have raise, naming the option and ShardedGraph
    for call, word, exc in (
            (lambda: jaxclp.solve(sg, b0, H, prior, alpha=0.9, method="dense"), "method", ValueError),
            (lambda: jaxclp.solve(sg, b0, H, prior, alpha=0.9, method="gmres"), "method", ValueError),
            (lambda: jaxclp.label_propagation(sg, labels, train, K, alpha=0.9, method="dense"), "method",
             ValueError)):
        try:
            call()
            raise AssertionError(f"no error for {word}")
        except exc as err:
            assert word in str(err) and "ShardedGraph" in str(err), err

    # with a real halo (4 shards): no (E, K) temporary per device in either exchange, product or transpose
    gm = jaxclp.Graph.from_edge_index(rng.integers(0, 1200, (2, 30000)), 1200)
    sgm = jaxclp.shard_graph(gm, mesh, "nodes", partition="rcm")
    evm = sharded_graph.edge_values(sgm, "sym")
    xm = sharded_graph.to_internal(sgm, jnp.asarray(rng.normal(size=(1200, 16))))
    assert sgm.offsets
    for ex in ("ppermute", "all_to_all"):
        for f in (halo.sharded_spmm, halo.sharded_spmm_transpose):
            temp = jax.jit(lambda v, x, f=f, ex=ex: f(sgm, v, x, exchange=ex)).lower(evm, xm).compile(
            ).memory_analysis().temp_size_in_bytes
            assert temp < sgm.weights.shape[1] * 16 * 8 / 2, (ex, f.__name__, temp, sgm.weights.shape)
    print("OK")
""")


BASELINES_SCRIPT = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    import jax
    jax.config.update("jax_enable_x64", True)
    import numpy as np, jax.numpy as jnp, jaxclp
    from jax.sharding import Mesh
    FULL = sys.argv[1] == "full"  # the slow test: every variant; else one of each kind
    mesh = Mesh(np.array(jax.devices()), ("nodes",))
    rng = np.random.default_rng(0)
    n, K = 37, 3  # n not divisible by 4: a padding row; nodes 30..36 isolated
    s, r = rng.integers(0, 30, 90), rng.integers(0, 30, 90)
    g = jaxclp.Graph.from_edge_index(np.stack([s, r]), n, weights=rng.uniform(0.5, 2, 90))
    sg = jaxclp.shard_graph(g, mesh, "nodes", partition="bfs")
    labels, train = rng.integers(0, K, n), rng.random(n) < 0.4
    val = ~train & (rng.random(n) < 0.5)
    prior = jax.nn.softmax(jnp.asarray(rng.normal(size=(n, K))))
    x0 = jnp.asarray(rng.normal(size=(n, K)))
    A2 = jnp.array([0.3, 0.9])

    def close(a, b, what, rtol=1e-12, atol=1e-12):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, err_msg=what)

    def raises(call, *words):
        try:
            call()
        except ValueError as err:
            assert all(w in str(err) for w in words), err
        else:
            raise AssertionError(f"no ValueError naming {words}")

    # propagate_labels, iterated (num_layers / clamp / reset): the same arithmetic, every field equal
    iterated = [dict(alpha=A2, num_layers=4, clamp=(-0.5, 0.5), reset_mask=train)]
    if FULL:
        iterated += [dict(alpha=1.0, num_layers=3), dict(alpha=A2, clamp=(0.1, 0.6)),
                     dict(alpha=0.7, clamp=(0.0, 1.0), reset_mask=train)]
    for kw in iterated:
        got, want = (jaxclp.baselines.propagate_labels(gr, x0, tol=1e-10, **kw) for gr in (sg, g))
        assert got.method == want.method == "iterate" and got.value.shape == want.value.shape
        for f in ("value", "iterations", "residual", "relative_residual", "rho_bound", "converged"):
            close(getattr(got, f), getattr(want, f), f"propagate_labels {sorted(kw)} {f}", rtol=1e-10)
    # closed form (no dense method on a sharded graph): the dense solve is the reference
    closed = [dict(alpha=A2, reset_mask=train)]
    if FULL:
        closed += [dict(alpha=A2), dict(alpha=0.8, reset_mask=train, normalization="row", method="bicgstab"),
                   dict(alpha=0.9, method="jacobi")]
    for kw in closed:
        got = jaxclp.baselines.propagate_labels(sg, x0, tol=1e-11, **kw)
        want = jaxclp.baselines.propagate_labels(g, x0, tol=1e-11, **(kw | dict(method="dense")))
        close(got.value, want.value, f"propagate_labels {sorted(kw)}", rtol=1e-8, atol=1e-10)
        for f in ("converged", "rho_bound", "residual"):
            assert getattr(got, f).shape == getattr(want, f).shape, f
        assert bool(got.converged.all()) and float(got.residual.max()) < 1e-9
    # C&S: autoscale, a fixed scale with a vector of smoothing alphas, PyG's layered settings
    cs = [dict()]
    if FULL:
        cs += [dict(scale=0.7, alpha_smooth=A2),
               dict(correct_layers=5, smooth_layers=4, clamp=True, clip_corrected=False),
               dict(alpha_correct=1.0, scale=2.0, autoscale_cap=None)]
    for kw in cs:
        kw = dict(alpha_correct=0.6, alpha_smooth=0.7) | kw
        got = jaxclp.correct_and_smooth(sg, prior, labels, train, tol=1e-11, **kw)
        want = jaxclp.correct_and_smooth(g, prior, labels, train, tol=1e-11, method="dense", **kw)
        assert got.shape == want.shape
        close(got, want, f"correct_and_smooth {sorted(kw)}", rtol=1e-8, atol=1e-9)
    close(jaxclp.label_propagation(sg, labels, train, K, alpha=A2, num_layers=4, clamp=(-0.5, 0.5),
                                   reset_train=True),
          jaxclp.label_propagation(g, labels, train, K, alpha=A2, num_layers=4, clamp=(-0.5, 0.5), reset_train=True),
          "LP layers")
    H = jnp.asarray(rng.dirichlet(np.ones(K), size=K))
    close(jaxclp.clp_star(sg, prior, prior, H, alpha=A2, num_iters=4),
          jaxclp.clp_star(g, prior, prior, H, alpha=A2, num_iters=4), "clp_star alphas")

    # clp_beliefs: every variant, against the unsharded one with the same method
    grid = (0.3, 0.9, 0.99)
    variants = [dict(compat="refined")]
    if FULL:
        variants += [dict(), dict(l1_normalize=True, normalization="row"), dict(spectral_scale=True, compat="refined"),
                     dict(normalization="none", prior_source="b0", compat="refined"),
                     dict(spectral_scale=True, normalization="none")]
    for kw in variants:
        got, want = (jaxclp.clp_beliefs(gr, prior, labels, train, alphas=grid, method="bicgstab", tol=1e-11, **kw)
                     for gr in (sg, g))
        tag = f"clp_beliefs {sorted(kw.items())}"
        close(got.beliefs, want.beliefs, tag, rtol=1e-8, atol=1e-10)
        np.testing.assert_array_equal(got.valid, want.valid)
        close(got.H, want.H, tag + " H")
        assert got.method == want.method and got.beliefs.shape == (len(grid), n, K)
        if want.H_refined is not None:
            close(got.H_refined, want.H_refined, tag + " H_refined", rtol=1e-7, atol=1e-9)
        if want.spectral is not None:
            close(got.spectral.rho, want.spectral.rho, tag + " rho", rtol=1e-6)
    # "none" normalization beyond the bounds: validity from the sharded power iteration's Collatz-Wielandt bound
    if FULL:
        got = jaxclp.clp_beliefs(sg, prior, labels, train, alphas=(0.5, 0.99), normalization="none", method="auto",
                                 tol=1e-11)
        want = jaxclp.clp_beliefs(g, prior, labels, train, alphas=(0.5, 0.99), normalization="none",
                                  method="bicgstab", tol=1e-11)
        assert got.valid.tolist() == want.valid.tolist() == [True, False], want.valid
        close(got.beliefs, want.beliefs, "clp_beliefs none", rtol=1e-8, atol=1e-10)

    # jaxclp.CLP on the sharded graph: a float64 prior array (exact), then the MLP prior (float32 by design)
    fit = dict(alphas=(0.5, 0.9), normalization=["sym", "row"], l1_normalize=[False, True] if FULL else False,
               method="bicgstab")
    a, b = (jaxclp.CLP(prior=np.asarray(prior), **fit).fit(gr, None, labels, train, val) for gr in (sg, g))
    assert a.val_scores_.keys() == b.val_scores_.keys()
    close([a.val_scores_[k] for k in b.val_scores_], list(b.val_scores_.values()), "val scores")
    assert (a.alpha_, a.normalization_, a.l1_normalize_) == (b.alpha_, b.normalization_, b.l1_normalize_)
    close(a.predict_proba(), b.predict_proba(), "CLP predict_proba", rtol=1e-9, atol=1e-11)
    np.testing.assert_array_equal(a.predict(), b.predict())
    close(a.H_, b.H_, "CLP H")
    close(a.spectral_.rho, b.spectral_.rho, "CLP rho", rtol=1e-6)
    x = rng.normal(size=(n, 4)) + np.eye(K, 4)[labels]
    mlp = dict(epochs=10, patience=10, hidden=(8,), alphas=(0.5, 0.9), method="bicgstab", seed=1,
               normalization="row")
    a, b = (jaxclp.CLP(**mlp).fit(gr, x, labels, train, val) for gr in (sg, g))
    close(a.prior_, b.prior_, "MLP prior")  # the MLP never sees the graph: the same seed, the same prior
    assert a.val_scores_ == b.val_scores_ and a.alpha_ == b.alpha_
    close(a.predict_proba(), b.predict_proba(), "CLP(mlp) predict_proba", rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(a.predict(), b.predict())

    # what the sharded path does not have raises, naming the option and ShardedGraph
    raises(lambda: jaxclp.baselines.propagate_labels(sg, x0, alpha=0.5, method="dense"), "method", "ShardedGraph")
    raises(lambda: jaxclp.correct_and_smooth(sg, prior, labels, train, alpha_correct=0.5, alpha_smooth=0.5,
                                             method="gmres"), "method", "ShardedGraph")
    raises(lambda: jaxclp.clp_beliefs(sg, prior, labels, train, method="dense"), "method", "ShardedGraph")
    for bad in ("link", "gcn", lambda *args: prior):
        raises(lambda: jaxclp.CLP(prior=bad, epochs=2).fit(sg, x, labels, train, val), "prior", "ShardedGraph")
    print("OK")
""")


def _run_baselines(mode):
    env = host_devices_env()  # the script forces its host devices
    done = subprocess.run([sys.executable, "-c", BASELINES_SCRIPT, mode], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith("OK")


def test_sharded_baselines_and_clp_on_four_devices():
    """propagate_labels, correct_and_smooth, LP with layers, CLP* with alphas, clp_beliefs and jaxclp.CLP on a
    ShardedGraph equal the unsharded calls in float64 (one variant of each kind)."""
    _run_baselines("quick")


@pytest.mark.slow
def test_sharded_baselines_and_clp_every_variant():
    _run_baselines("full")


@pytest.mark.slow  # ~50 s in a subprocess (nine sharding plans, each compiling every product); in slow_tests
def test_sharded_products_on_four_devices():
    env = host_devices_env()  # the script forces its host devices
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip().endswith("OK")


def test_halo_benchmark_quick(tmp_path):
    """benchmarks/halo.py in quick mode (host plans only): RCM finds the locality of a geometric graph (few
    rows received, far fewer bytes than an all-gather); a random graph has none to find."""
    from benchmarks import halo

    payload = halo.main(["--quick", "--out", str(tmp_path)])
    rows = {(r["graph"], r["partition"]): r for r in payload["plans"] if r["num_shards"] == 8}
    assert rows[("random", "none")]["received_fraction"] > 0.8
    geo = rows[("geometric", "rcm")]
    assert geo["received_fraction"] < 0.2 and geo["ppermute_bytes"] < 0.2 * geo["allgather_bytes"]
    assert (tmp_path / "halo_quick.md").read_text().startswith("# Halo sizes")
