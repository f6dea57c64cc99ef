"""Node-sharded graphs: CLP's sparse products with the nodes split over a device-mesh axis.

A :class:`ShardedGraph` splits the (optionally reordered) nodes of a :class:`jaxclp.graph.Graph` into ``P``
blocks, one per device of a mesh axis, each padded to ``b`` rows. Node-indexed arrays live in the *internal
order*: shape ``(P * b, ...)``, row ``p * b + i`` is the ``i``-th node of shard ``p``, sharded by rows over the
axis (``NamedSharding(mesh, P(axis))``); padding rows are isolated nodes and stay zero. :func:`to_internal`
and :func:`from_internal` convert from and to the user's order ``(n, ...)``: reordering and padding happen
only there, at the boundary.

Each shard keeps its incoming edges (receiver in the block) with the receiver as a shard-local row and the
sender as an index into ``[local rows | halo slots]``, padded to a common edge count with zero weight (XLA
needs static shapes). One product (inside :func:`jax.shard_map`):

1. halo exchange: shard ``p`` sends shard ``q`` exactly the rows of its block that ``q``'s edges read (lists
   precomputed on the host by :func:`build_plan`). ``exchange="ppermute"`` (the default) runs one
   ``jax.lax.ppermute`` round per shard offset ``d`` (``p -> p + d mod P``) that has a nonempty list, each
   padded to the longest list of that offset ``h_d``: a banded order (RCM, BFS) needs few rounds;
   ``exchange="all_to_all"`` moves every list padded to the longest one ``h`` in one ``jax.lax.all_to_all``;
   ``exchange="allgather"`` gathers the whole state instead (the simple reference, kept for tests);
2. a local gather + sorted ``segment_sum`` over the shard's edges.

The transpose product runs the same exchange backwards (local scatter into ``[local | halo]``, the halo part
returned to its owners by the reverse exchange, scatter-added there). Communication per product and shard:
``sum_d h_d * K`` values sent and received (``ppermute``), ``(P - 1) * h * K`` (``all_to_all``), instead of
``(P - 1) * b * K`` for the all-gather.

The partition decides ``h``: ``partition="none"`` keeps the user's order, ``"rcm"`` uses scipy's reverse
Cuthill-McKee order, ``"bfs"`` a breadth-first order per connected component, ``"metis"`` a min-cut partition
from METIS (optional dependency ``pymetis``: ``pip install jaxclp[scale]``). Halo sizes per partitioner:
``python -m jaxclp.benchmarks.halo`` (``benchmarks/results/halo.md``).

Everything after :func:`shard_graph` is jit-able; outputs keep their row sharding and are never gathered.

Many processes (``jax.distributed.initialize``): the mesh spans every process's devices and the same calls
run unchanged (``tests/test_distributed.py``: two processes, two host devices each, gloo CPU collectives).
:func:`shard_graph` then needs the whole graph on every host; :func:`shard_graph_local` builds the same
:class:`ShardedGraph` from each process's own edges (the user order, equal row blocks), exchanging only the
halo read lists.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as PSpec

from jaxclp import _checks
from jaxclp.graph import Graph, Normalization, check_normalization
from jaxclp.propagate import report_divergence

__all__ = [
    "EXCHANGES", "PARTITIONS", "Plan", "ShardedGraph", "ShardedOperator", "build_plan", "clp_operator", "clp_star",
    "edge_homophily", "edge_values", "estimate_compatibility", "from_internal", "in_degree", "label_propagation",
    "local_shards", "node_order", "out_degree", "propagate", "shard_graph", "shard_graph_local", "sharded_spmm",
    "sharded_spmm_transpose", "solve", "spectral_radius", "to_internal",
]

Partition = Literal["none", "rcm", "bfs", "metis"]
PARTITIONS = ("none", "rcm", "bfs", "metis")
Balance = Literal["rows", "edges"]
Exchange = Literal["ppermute", "all_to_all", "allgather"]
EXCHANGES = ("ppermute", "all_to_all", "allgather")


# ============================================================================ host side: order and plan
def _structure(senders: np.ndarray, receivers: np.ndarray, n: int):
    """Symmetric 0/1 scipy CSR of the graph's structure (direction ignored), no diagonal."""
    import scipy.sparse as sp

    keep = senders != receivers
    s, r = senders[keep], receivers[keep]
    a = sp.csr_matrix((np.ones(s.shape[0], np.int8), (r, s)), shape=(n, n))
    a = (a + a.T).tocsr()
    a.data[:] = 1
    return a


def node_order(graph: Graph, partition: Partition = "none", num_shards: int = 1, *, seed: int = 0):
    """A node order (and, for METIS, a shard per node) computed on the host.

    Args:
        graph: the graph.
        partition: ``"none"`` (identity), ``"rcm"`` (reverse Cuthill-McKee of the symmetrized structure),
            ``"bfs"`` (breadth-first order of each connected component, largest component first, from a
            node of minimal degree), ``"metis"`` (``pymetis.part_graph`` into ``num_shards`` parts, nodes
            grouped by part).
        num_shards: number of parts (only ``"metis"`` uses it).
        seed: METIS seed.

    Returns:
        ``(order, parts)``: ``order`` (n,) int64, ``order[i]`` is the user id of the ``i``-th node in the
        internal order; ``parts`` (num_shards,) node counts of the parts for METIS (the order lists them
        part by part), else None.

    Raises:
        ValueError: unknown ``partition``.
        ImportError: ``"metis"`` without ``pymetis`` installed.
    """
    if partition not in PARTITIONS:
        raise ValueError(f"partition must be one of {PARTITIONS}; got {partition!r}")
    n = graph.num_nodes
    if partition == "none":
        return np.arange(n, dtype=np.int64), None
    s, r = np.asarray(graph.senders), np.asarray(graph.receivers)
    a = _structure(s, r, n)
    if partition == "rcm":
        from scipy.sparse.csgraph import reverse_cuthill_mckee

        return np.asarray(reverse_cuthill_mckee(a, symmetric_mode=True), dtype=np.int64), None
    if partition == "bfs":
        return _bfs_order(a), None
    try:
        import pymetis
    except ImportError as err:
        raise ImportError("partition='metis' needs the optional dependency pymetis: "
                          "pip install 'jaxclp[scale]' (or pip install pymetis); the dependency-free "
                          "alternatives are partition='rcm' and partition='bfs'") from err
    if num_shards == 1:
        return np.arange(n, dtype=np.int64), np.array([n])
    opts = pymetis.Options()  # attributes, as documented by pymetis
    opts.seed = int(seed)
    if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025 (xadj/adjncy are deprecated there)
        _, membership = pymetis.part_graph(int(num_shards), adjacency=pymetis.CSRAdjacency(a.indptr, a.indices),
                                           options=opts)
    else:
        _, membership = pymetis.part_graph(int(num_shards), xadj=a.indptr, adjncy=a.indices, options=opts)
    membership = np.asarray(membership, dtype=np.int64)
    return np.argsort(membership, kind="stable"), np.bincount(membership, minlength=num_shards)


def _bfs_order(a) -> np.ndarray:
    """Breadth-first order per connected component (largest first), each from a node of minimal degree;
    isolated nodes last."""
    from scipy.sparse.csgraph import breadth_first_order, connected_components

    n = a.shape[0]
    deg = np.diff(a.indptr)
    ncomp, labels = connected_components(a, directed=False)
    sizes = np.bincount(labels, minlength=ncomp)
    # a start node of minimal degree per component: sort nodes by (label, degree), take the first of each
    by = np.lexsort((deg, labels))
    first = np.searchsorted(labels[by], np.arange(ncomp))
    starts = by[first]
    out = []
    for c in np.argsort(-sizes, kind="stable"):
        if sizes[c] == 1:
            break  # isolated nodes: appended below in id order
        out.append(breadth_first_order(a, int(starts[c]), directed=False, return_predecessors=False))
    single = np.flatnonzero(sizes[labels] == 1)
    return np.concatenate(out + [single]).astype(np.int64) if out else single.astype(np.int64)


def _split(order: np.ndarray, num_shards: int, in_degree: np.ndarray, balance: Balance) -> np.ndarray:
    """(num_shards,) node counts of contiguous pieces of ``order``: equal rows, or about equal edges."""
    n = order.shape[0]
    if balance == "rows":
        b = -(-n // num_shards)
        return np.clip(n - b * np.arange(num_shards), 0, b)
    if balance != "edges":
        raise ValueError(f"balance must be 'rows' or 'edges'; got {balance!r}")
    # cumulative (in-edges + 1) along the order: the +1 keeps edgeless runs of nodes spread out too
    work = np.cumsum(in_degree[order] + 1.0)
    # each piece ends with the node whose cumulative work first reaches its share (a heavy node ends a piece)
    cuts = np.minimum(np.searchsorted(work, work[-1] * np.arange(1, num_shards) / num_shards, side="left") + 1, n)
    bounds = np.concatenate([[0], cuts, [n]])
    return np.diff(bounds)


class Plan(NamedTuple):
    """Host (numpy) description of a node-sharded graph; :func:`build_plan` makes it.

    Internal node ids: node ``i`` of shard ``p`` is ``p * b + i``; ``N = P * b``.

    Attributes:
        num_nodes: n.
        num_shards: P.
        block: b, rows per shard (the largest shard; smaller ones are padded).
        halo: h, the longest send list (>= 1): the common padded length of the ``all_to_all`` exchange.
        offsets: ``((d, base_d, h_d), ...)`` for every shard offset ``d`` in 1..P-1 with a nonempty send list
            (``h_d``, the longest list from a shard ``p`` to shard ``(p + d) % P``): the ``ppermute`` exchange
            runs one round per entry, moving ``h_d`` rows; ``base_d`` is the offset of its slots.
        order: (N,) user id of every internal row, -1 for padding rows.
        rank: (n,) internal id of every user node.
        counts: (P,) real nodes per shard.
        receivers: (P, E) shard-local receiver row of each edge, sorted; padding edges point at row b - 1.
        senders: (P, E) sender as an index into ``[local rows (b) | halo slots (S = sum h_d)]``: on shard
            ``q``, slot ``b + base_d + j`` holds the ``j``-th row sent by shard ``(q - d) % P``.
        senders_global: (P, E) internal id of the sender (the all-gather reference reads it).
        weights: (P, E) edge weights, 0 on padding edges.
        num_edges: (P,) real edges per shard.
        send: (P, P, h) ``send[p, q, :send_counts[p, q]]`` are the local rows of shard ``p`` that shard ``q``
            reads (sorted; padded with 0; ``send[p, p]`` is empty).
        send_counts: (P, P) lengths of the send lists.
        send_offsets: (P, S) the same lists by offset: ``send_offsets[p, base_d:base_d + h_d]`` are the rows
            shard ``p`` sends to shard ``(p + d) % P`` (padded with 0).
        recv_slots: (P, S) where each halo slot of shard ``q`` lies in the flattened (P * h) receive buffer of
            the ``all_to_all`` exchange: ``((q - d) % P) * h + j``.
        symmetric: the graph's ``symmetric`` flag.
    """

    num_nodes: int
    num_shards: int
    block: int
    halo: int
    offsets: tuple
    order: np.ndarray
    rank: np.ndarray
    counts: np.ndarray
    receivers: np.ndarray
    senders: np.ndarray
    senders_global: np.ndarray
    weights: np.ndarray
    num_edges: np.ndarray
    send: np.ndarray
    send_counts: np.ndarray
    send_offsets: np.ndarray
    recv_slots: np.ndarray
    symmetric: bool

    def halo_stats(self, num_classes: int = 1, itemsize: int = 4) -> dict:
        """Communication of one product, from the plan.

        Returns a dict: ``halo_rows`` (rows received over all shards, unpadded), ``halo_fraction``
        (halo_rows / n), ``remote_fraction`` (fraction of nodes read by at least one other shard),
        ``received_fraction`` (halo_rows / ((P - 1) n): the average fraction of the other shards' rows that a
        shard receives; 1 for an all-gather), ``ppermute_rows`` (``P sum_d h_d``: rows the ``ppermute``
        exchange moves), ``padded_rows`` (``P (P - 1) h``: rows the ``all_to_all`` moves), the same in bytes
        (``ppermute_bytes``, ``padded_bytes``) and ``allgather_bytes`` (``P (P - 1) b`` rows) for
        ``num_classes`` columns of ``itemsize`` bytes,
        ``edge_cut`` (fraction of edges whose endpoints are on different shards), ``max_edges`` /
        ``mean_edges`` per shard, ``block`` and ``halo``.
        """
        P, b, h = self.num_shards, self.block, self.halo
        sc = self.send_counts
        remote = np.zeros(P * b, bool)
        for p in range(P):
            for q in range(P):
                if sc[p, q]:
                    remote[p * b + self.send[p, q, :sc[p, q]]] = True
        cut = int(np.sum(self.senders >= b))  # padding edges have sender 0 < b
        m = int(self.num_edges.sum())
        row = num_classes * itemsize
        return dict(
            num_nodes=self.num_nodes, num_edges=m, num_shards=P, block=b, halo=h,
            halo_rows=int(sc.sum()), halo_fraction=float(sc.sum() / self.num_nodes),
            received_fraction=float(sc.sum() / max((P - 1) * self.num_nodes, 1)),
            ppermute_rows=int(P * self.send_offsets.shape[1]),
            ppermute_bytes=int(P * self.send_offsets.shape[1] * row),
            remote_fraction=float(remote.sum() / self.num_nodes),
            edge_cut=float(cut / max(m, 1)),
            padded_rows=int(P * (P - 1) * h), padded_bytes=int(P * (P - 1) * h * row),
            allgather_bytes=int(P * (P - 1) * b * row),
            max_edges=int(self.num_edges.max()), mean_edges=float(self.num_edges.mean()))


def _halo_tables(uniq: np.ndarray, P: int, b: int):
    """The exchange tables from the sorted unique remote reads ``uniq`` = ``(p * P + q) * b + row`` (shard
    ``q`` reads local row ``row`` of shard ``p != q``): ``(h, send, send_counts, offsets, send_offsets,
    recv_slots, slot_of_key)`` as in :class:`Plan`; ``slot_of_key[i]`` is the halo slot (in ``0..S-1``) where
    the receiving shard finds the row of ``uniq[i]``."""
    pair = uniq // b
    pos = np.arange(uniq.shape[0]) - np.searchsorted(pair, pair, side="left")
    h = max(int(pos.max()) + 1 if pos.size else 0, 1)
    send = np.zeros((P, P, h), np.int64)
    send[pair // P, pair % P, pos] = uniq % b
    send_counts = np.bincount(pair, minlength=P * P).reshape(P, P)
    # the same lists by shard offset d = (q - p) % P, each offset padded to its own longest list h_d
    dpair = ((pair % P) - (pair // P)) % P
    h_d = np.zeros(P, np.int64)
    np.maximum.at(h_d, dpair, pos + 1)
    base = np.concatenate([[0], np.cumsum(h_d)[:-1]])
    offsets = tuple((int(d), int(base[d]), int(h_d[d])) for d in range(1, P) if h_d[d] > 0)
    send_offsets = np.zeros((P, int(h_d.sum())), np.int64)
    send_offsets[pair // P, base[dpair] + pos] = uniq % b
    d_s = np.repeat(np.arange(P), h_d)
    j_s = np.arange(send_offsets.shape[1]) - base[d_s]
    recv_slots = ((np.arange(P)[:, None] - d_s[None, :]) % P) * h + j_s[None, :]
    return h, send, send_counts, offsets, send_offsets, recv_slots, base[dpair] + pos


def build_plan(graph: Graph, num_shards: int, *, partition: Partition = "none", balance: Balance = "rows",
               order=None, seed: int = 0) -> Plan:
    """Splits ``graph`` into ``num_shards`` node blocks and precomputes the halo exchange (host, numpy).

    Args:
        graph: the graph.
        num_shards: P >= 1.
        partition: node order, see :func:`node_order` (ignored when ``order`` is given).
        balance: ``"rows"`` (blocks of ``ceil(n / P)`` nodes) or ``"edges"`` (contiguous pieces of about
            equal in-edge count; ``b`` is then the largest piece). METIS parts are kept as they are.
        order: optional explicit (n,) permutation of the user ids (internal order).
        seed: METIS seed.

    Returns:
        A :class:`Plan`.

    Raises:
        ValueError: bad ``num_shards``, ``balance``, ``partition`` or ``order``.
    """
    if not isinstance(num_shards, (int, np.integer)) or int(num_shards) < 1:
        raise ValueError(f"num_shards must be an integer >= 1; got {num_shards!r}")
    P = int(num_shards)
    n = int(graph.num_nodes)
    s_user = np.asarray(graph.senders).astype(np.int64)
    r_user = np.asarray(graph.receivers).astype(np.int64)
    w_user = np.asarray(graph.weights)
    if order is None:
        order, parts = node_order(graph, partition, P, seed=seed)
    else:
        order, parts = np.asarray(order, dtype=np.int64), None
        if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
            raise ValueError(f"order must be a permutation of range({n})")
    if parts is None:
        counts = _split(order, P, np.bincount(r_user, minlength=n), balance)
    else:
        if balance not in ("rows", "edges"):
            raise ValueError(f"balance must be 'rows' or 'edges'; got {balance!r}")
        counts = np.asarray(parts, dtype=np.int64)
    b = max(int(counts.max()), 1)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    shard_of_pos = np.repeat(np.arange(P), counts)
    local_of_pos = np.arange(n) - starts[shard_of_pos]
    rank = np.empty(n, np.int64)
    rank[order] = shard_of_pos * b + local_of_pos
    internal_order = np.full(P * b, -1, np.int64)
    internal_order[rank] = np.arange(n)

    rs, ss = rank[r_user], rank[s_user]
    srt = np.lexsort((ss, rs))  # by receiver (shard, local row), then sender
    rs, ss, w = rs[srt], ss[srt], w_user[srt]
    q, lr = rs // b, rs % b
    p, ls = ss // b, ss % b
    ecount = np.bincount(q, minlength=P)
    E = max(int(ecount.max()), 1)

    remote = p != q
    key = (p[remote] * P + q[remote]) * b + ls[remote]
    uniq, inv = np.unique(key, return_inverse=True)
    h, send, send_counts, offsets, send_offsets, recv_slots, slot_of_key = _halo_tables(uniq, P, b)
    sender_ext = ls.copy()
    sender_ext[remote] = b + slot_of_key[inv.reshape(-1)]

    estart = np.concatenate([[0], np.cumsum(ecount)[:-1]])
    slot = np.arange(rs.shape[0]) - estart[q]
    recv_l = np.full((P, E), b - 1, np.int64)
    send_l = np.zeros((P, E), np.int64)
    send_g = np.zeros((P, E), np.int64)
    w_l = np.zeros((P, E), w.dtype)
    recv_l[q, slot], send_l[q, slot], send_g[q, slot], w_l[q, slot] = lr, sender_ext, ss, w
    return Plan(num_nodes=n, num_shards=P, block=b, halo=h, offsets=offsets, order=internal_order, rank=rank,
                counts=counts.astype(np.int64), receivers=recv_l, senders=send_l, senders_global=send_g,
                weights=w_l, num_edges=ecount, send=send, send_counts=send_counts, send_offsets=send_offsets,
                recv_slots=recv_slots,
                symmetric=bool(graph.symmetric))


# ============================================================================ the device-side graph
@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["receivers", "senders", "senders_global", "weights", "num_edges", "send", "send_offsets",
                 "recv_slots", "order", "rank"],
    meta_fields=["num_nodes", "num_shards", "block", "halo", "offsets", "axis", "mesh", "symmetric"],
)
@dataclasses.dataclass(frozen=True)
class ShardedGraph:
    """A graph whose nodes are split over the mesh axis ``axis`` (built by :func:`shard_graph`).

    Per-shard arrays have a leading axis P and live sharded over ``axis`` (``NamedSharding(mesh,
    P(axis))``); ``order`` and ``rank`` are replicated.

    Attributes:
        receivers: (P, E) int32 shard-local receiver rows (sorted per shard).
        senders: (P, E) int32 sender index into ``[local rows | halo slots]`` (length ``b + S``).
        senders_global: (P, E) int32 internal sender id (all-gather reference).
        weights: (P, E) float raw weights, 0 on padding edges.
        num_edges: (P,) int32 real edges per shard (the first ``num_edges[p]`` of row ``p``).
        send: (P, P, h) int32 send lists padded to a common length (the ``all_to_all`` exchange).
        send_offsets: (P, S) int32 send lists by shard offset (the ``ppermute`` exchange).
        recv_slots: (P, S) int32 positions of the halo slots in the ``all_to_all`` receive buffer.
        order: (N,) int32 user id of each internal row, -1 on padding rows.
        rank: (n,) int32 internal row of each user node.
        num_nodes: static n; num_shards: static P; block: static b; halo: static h; offsets: static
            ``((d, base_d, h_d), ...)`` (see :class:`Plan`).
        axis: static mesh axis name; mesh: the static :class:`jax.sharding.Mesh`.
        symmetric: static, the source graph's ``symmetric`` flag.
    """

    receivers: jax.Array
    senders: jax.Array
    senders_global: jax.Array
    weights: jax.Array
    num_edges: jax.Array
    send: jax.Array
    send_offsets: jax.Array
    recv_slots: jax.Array
    order: jax.Array
    rank: jax.Array
    num_nodes: int
    num_shards: int
    block: int
    halo: int
    offsets: tuple
    axis: str
    mesh: Mesh
    symmetric: bool = False

    @property
    def padded_nodes(self) -> int:
        """N = P * b, the length of internal-order arrays."""
        return self.num_shards * self.block

    @property
    def row_sharding(self) -> NamedSharding:
        """``NamedSharding(mesh, P(axis))``: the sharding of internal-order and per-shard arrays."""
        return NamedSharding(self.mesh, PSpec(self.axis))


def shard_graph(graph: Graph, mesh: Mesh, axis: str = "nodes", *, partition: Partition = "none",
                balance: Balance = "rows", order=None, seed: int = 0, plan: Plan | None = None) -> ShardedGraph:
    """Splits the nodes of ``graph`` over the mesh axis ``axis`` (host-side preprocessing, once per graph).

    Args:
        graph: the graph.
        mesh: a :class:`jax.sharding.Mesh`; other axes of the mesh replicate.
        axis: the mesh axis name to shard the nodes over; P = ``mesh.shape[axis]`` shards.
        partition: ``"none"``, ``"rcm"``, ``"bfs"`` or ``"metis"`` (see :func:`node_order`).
        balance: ``"rows"`` or ``"edges"`` (see :func:`build_plan`).
        order: optional explicit node order (overrides ``partition``).
        seed: METIS seed.
        plan: a precomputed :func:`build_plan` result for ``mesh.shape[axis]`` shards (then the other
            partition arguments are ignored).

    Returns:
        A :class:`ShardedGraph`.

    Raises:
        ValueError: ``axis`` not in the mesh, or a bad partition argument.
    """
    if not isinstance(mesh, Mesh):
        raise ValueError(f"mesh must be a jax.sharding.Mesh; got {type(mesh).__name__}")
    if axis not in mesh.shape:
        raise ValueError(f"axis {axis!r} is not an axis of the mesh {dict(mesh.shape)}")
    P = int(mesh.shape[axis])
    if plan is None:
        plan = build_plan(graph, P, partition=partition, balance=balance, order=order, seed=seed)
    elif plan.num_shards != P or plan.num_nodes != graph.num_nodes:
        raise ValueError(f"plan is for {plan.num_shards} shards and {plan.num_nodes} nodes; the mesh axis has "
                         f"{P} and the graph {graph.num_nodes}")
    rows = NamedSharding(mesh, PSpec(axis))
    rep = NamedSharding(mesh, PSpec())
    fdtype = jnp.asarray(graph.weights).dtype

    def put(a, sharding, dtype=jnp.int32):
        return jax.device_put(np.asarray(a).astype(dtype), sharding)

    return ShardedGraph(
        receivers=put(plan.receivers, rows), senders=put(plan.senders, rows),
        senders_global=put(plan.senders_global, rows), weights=put(plan.weights, rows, fdtype),
        num_edges=put(plan.num_edges, rows),
        send=put(plan.send, rows), send_offsets=put(plan.send_offsets, rows),
        recv_slots=put(plan.recv_slots, rows), order=put(plan.order, rep),
        rank=put(plan.rank, rep), num_nodes=plan.num_nodes, num_shards=P, block=plan.block, halo=plan.halo,
        offsets=plan.offsets, axis=axis, mesh=mesh,
        symmetric=plan.symmetric)


def local_shards(mesh: Mesh, axis: str = "nodes") -> list[int]:
    """The shard indices (positions along ``axis``) that have a device of this process."""
    dev = np.moveaxis(np.asarray(mesh.devices), list(mesh.axis_names).index(axis), 0)
    me = jax.process_index()
    return [p for p in range(dev.shape[0]) if any(d.process_index == me for d in dev[p:p + 1].ravel())]


def _allgather_ragged(x: np.ndarray) -> np.ndarray:
    """Concatenation over all processes of a 1-D int array of any length (one all-gather of the lengths, one
    of the padded arrays)."""
    from jax.experimental import multihost_utils

    x = np.asarray(x, np.int32)
    sizes = np.asarray(multihost_utils.process_allgather(np.array([x.shape[0]], np.int32))).reshape(-1)
    pad = np.zeros(max(int(sizes.max()), 1), np.int32)
    pad[:x.shape[0]] = x
    got = np.asarray(multihost_utils.process_allgather(pad)).reshape(sizes.shape[0], -1)
    return np.concatenate([got[i, :sizes[i]] for i in range(sizes.shape[0])])


def shard_graph_local(senders, receivers, weights, num_nodes: int, mesh: Mesh, axis: str = "nodes", *,
                      symmetric: bool = False) -> ShardedGraph:
    """A :class:`ShardedGraph` built from each process's OWN edges (``jax.distributed``; no host holds the
    whole edge list).

    The nodes keep the user's order (``partition="none"``, ``balance="rows"``): shard ``p`` holds the nodes
    ``p * b .. (p + 1) * b - 1`` with ``b = ceil(n / P)``. Every process passes the stored edges whose RECEIVER
    lies in one of its shards (:func:`local_shards`): for an undirected graph both directions, deduplicated,
    no self-loops unless wanted, i.e. what :meth:`jaxclp.Graph.from_edge_index` would store. The processes
    then exchange only their halo read lists (two small all-gathers) and each one places its own shards; the
    result equals ``shard_graph(Graph(...), mesh, axis)`` of the whole graph. In one process this is
    ``shard_graph`` from raw edges.

    Args:
        senders, receivers: (m_local,) int user ids of this process's edges.
        weights: (m_local,) float weights (the dtype of the graph's weights).
        num_nodes: n, the global node count.
        mesh, axis: as :func:`shard_graph`.
        symmetric: whether the whole stored edge set is symmetric (``Graph.symmetric``: enables ``cg``).

    Returns:
        A :class:`ShardedGraph`.

    Raises:
        ValueError: bad shapes, ids out of range, or an edge whose receiver is on another process's shard.
    """
    if not isinstance(mesh, Mesh):
        raise ValueError(f"mesh must be a jax.sharding.Mesh; got {type(mesh).__name__}")
    if axis not in mesh.shape:
        raise ValueError(f"axis {axis!r} is not an axis of the mesh {dict(mesh.shape)}")
    s, r, w = np.asarray(senders), np.asarray(receivers), np.asarray(weights)
    if s.ndim != 1 or s.shape != r.shape or s.shape != w.shape:
        raise ValueError(f"senders, receivers and weights must be 1-D of one length; got shapes {s.shape}, "
                         f"{r.shape}, {w.shape}")
    n, P = int(num_nodes), int(mesh.shape[axis])
    s, r = s.astype(np.int64), r.astype(np.int64)
    if s.size and (min(s.min(), r.min()) < 0 or max(s.max(), r.max()) >= n):
        raise ValueError(f"senders and receivers must be node ids in [0, {n})")
    b = max(-(-n // P), 1)
    mine = local_shards(mesh, axis)
    q = r // b
    if s.size and not np.isin(q, mine).all():
        raise ValueError(f"receivers: every edge must have its receiver on a shard of this process (shards "
                         f"{mine}, nodes of shard p: p * {b} .. p * {b} + {b - 1})")
    srt = np.lexsort((s, r))
    s, r, w, q = s[srt], r[srt], w[srt], q[srt]
    p, ls, lr = s // b, s % b, r % b
    remote = p != q
    key = (p[remote] * P + q[remote]) * b + ls[remote]
    uniq_local = np.unique(key)
    # the global read lists (every process's, sorted): the halo tables are built identically everywhere
    pairs = _allgather_ragged(uniq_local // b).astype(np.int64)
    rows = _allgather_ragged(uniq_local % b).astype(np.int64)
    uniq = np.unique(pairs * b + rows)  # a shard replicated over several processes lists its reads twice
    h, send, send_counts, offsets, send_offsets, recv_slots, slot_of_key = _halo_tables(uniq, P, b)
    ecount_local = np.bincount(q, minlength=P)
    from jax.experimental import multihost_utils

    ecount = np.asarray(multihost_utils.process_allgather(ecount_local.astype(np.int32))).reshape(-1, P).max(0)
    E = max(int(ecount.max()), 1)
    sender_ext = ls.copy()
    sender_ext[remote] = b + slot_of_key[np.searchsorted(uniq, key)]
    estart = np.concatenate([[0], np.cumsum(ecount_local)[:-1]])
    slot = np.arange(r.shape[0]) - estart[q]
    # only this process's shards are materialized: (E,) per local shard, padded as in build_plan
    local = {}
    for sh in mine:
        e = slot[q == sh]
        cols = {"receivers": np.full(E, b - 1, np.int64), "senders": np.zeros(E, np.int64),
                "senders_global": np.zeros(E, np.int64), "weights": np.zeros(E, w.dtype)}
        for name, v in (("receivers", lr), ("senders", sender_ext), ("senders_global", s), ("weights", w)):
            cols[name][e] = v[q == sh]
        local[sh] = cols
    order = np.where(np.arange(P * b) < n, np.arange(P * b), -1)
    rows_sh = NamedSharding(mesh, PSpec(axis))
    rep = NamedSharding(mesh, PSpec())

    def put(a, sharding, dtype=jnp.int32):
        a = np.asarray(a).astype(dtype)
        return jax.make_array_from_callback(a.shape, sharding, lambda idx: a[idx])

    def put_local(name, dtype=jnp.int32):  # the callback runs only for this process's devices
        return jax.make_array_from_callback(
            (P, E), rows_sh, lambda idx: local[idx[0].start or 0][name][None].astype(dtype))

    return ShardedGraph(
        receivers=put_local("receivers"), senders=put_local("senders"),
        senders_global=put_local("senders_global"), weights=put_local("weights", w.dtype),
        num_edges=put(ecount, rows_sh), send=put(send, rows_sh),
        send_offsets=put(send_offsets, rows_sh), recv_slots=put(recv_slots, rows_sh), order=put(order, rep),
        rank=put(np.arange(n), rep), num_nodes=n, num_shards=P, block=b, halo=h, offsets=offsets, axis=axis,
        mesh=mesh, symmetric=bool(symmetric))


# ============================================================================ boundary: user <-> internal
def _check_rows(name, x, rows):
    if not hasattr(x, "shape") or x.ndim < 1 or x.shape[0] != rows:
        raise ValueError(f"{name} must have {rows} rows (shape ({rows}, ...)); got shape "
                         f"{getattr(x, 'shape', None)}")


def to_internal(sg: ShardedGraph, x: jax.Array) -> jax.Array:
    """User order ``(n, ...)`` -> internal order ``(P * b, ...)`` sharded by rows (padding rows are 0)."""
    x = jnp.asarray(x)
    _check_rows("x", x, sg.num_nodes)
    return _to_internal(sg, x)


@jax.jit
def _to_internal(sg, x):
    pad = jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)])
    out = pad[jnp.where(sg.order >= 0, sg.order, sg.num_nodes)]
    return jax.lax.with_sharding_constraint(out, sg.row_sharding)


def from_internal(sg: ShardedGraph, x: jax.Array) -> jax.Array:
    """Internal order ``(P * b, ...)`` -> user order ``(n, ...)``.

    The result is sharded by rows over the same axis when P divides n. Otherwise it cannot be: jax 0.10
    rejects a ``NamedSharding`` whose axis does not divide the dimension (``IndivisibleError`` in
    ``device_put`` and jit ``out_shardings``; ``with_sharding_constraint`` silently replicates), so no
    constraint is set and XLA chooses the layout (on host devices: replicated). Keep results in the internal
    order (:func:`sharded_spmm` etc.) to stay sharded for any n.
    """
    _check_rows("x", x, sg.padded_nodes)
    return _from_internal(sg, x)


@jax.jit
def _from_internal(sg, x):
    out = x[sg.rank]
    if sg.num_nodes % sg.num_shards == 0:
        out = jax.lax.with_sharding_constraint(out, sg.row_sharding)
    return out


# ============================================================================ products (inside shard_map)
def _bcast(v, x):
    """Edge values (E,) or (E, K) broadcast against gathered rows (E, ...)."""
    return v.reshape(v.shape + (1,) * (x.ndim - v.ndim))


def _num_slots(sg: ShardedGraph) -> int:
    return sum(h for _, _, h in sg.offsets)


def _ring(sg: ShardedGraph, d: int, back: bool = False):
    P = sg.num_shards
    return [((p + d) % P, p) if back else (p, (p + d) % P) for p in range(P)]


def _gather(sg: ShardedGraph, loc, xl, exchange):
    """Rows read by this shard's edges, (E, ...): ``[x_local | halo][senders]`` (or the all-gather)."""
    if exchange == "allgather":
        return jax.lax.all_gather(xl, sg.axis, tiled=True)[loc["senders_global"]]
    if not sg.offsets:  # no edge crosses shards
        return xl[loc["senders"]]
    if exchange == "ppermute":  # one round per shard offset d with a nonempty list, h_d rows each
        parts = [jax.lax.ppermute(xl[loc["send_offsets"][base:base + h]], sg.axis, _ring(sg, d))
                 for d, base, h in sg.offsets]
        halo = jnp.concatenate(parts) if len(parts) > 1 else parts[0]
    else:  # all_to_all: every list padded to h
        recv = jax.lax.all_to_all(xl[loc["send"]], sg.axis, 0, 0)  # recv[p] = the rows shard p sent us
        halo = recv.reshape((-1,) + xl.shape[1:])[loc["recv_slots"]]
    return jnp.concatenate([xl, halo])[loc["senders"]]


def _scatter(sg: ShardedGraph, loc, msg, exchange):
    """Transpose of :func:`_gather`: per-edge messages (E, ...) summed into their senders' rows, (b, ...)."""
    b, P = sg.block, sg.num_shards
    if exchange == "allgather":
        full = jax.ops.segment_sum(msg, loc["senders_global"], P * b)
        return jax.lax.psum_scatter(full, sg.axis, scatter_dimension=0, tiled=True)
    ext = jax.ops.segment_sum(msg, loc["senders"], b + _num_slots(sg))
    out, halo = ext[:b], ext[b:]
    if exchange == "ppermute":
        for d, base, h in sg.offsets:
            back = jax.lax.ppermute(halo[base:base + h], sg.axis, _ring(sg, d, back=True))
            out = out + jax.ops.segment_sum(back, loc["send_offsets"][base:base + h], b)
    elif sg.offsets:
        buf = jax.ops.segment_sum(halo, loc["recv_slots"], P * sg.halo).reshape((P, sg.halo) + msg.shape[1:])
        back = jax.lax.all_to_all(buf, sg.axis, 0, 0)  # back[q] = contributions of shard q to our rows send[q]
        out = out + jax.ops.segment_sum(back.reshape((-1,) + msg.shape[1:]), loc["send"].reshape(-1), b)
    return out


def _local_arrays(sg: ShardedGraph) -> dict:
    return {"receivers": sg.receivers, "senders": sg.senders, "senders_global": sg.senders_global,
            "send": sg.send, "send_offsets": sg.send_offsets, "recv_slots": sg.recv_slots}


def _smap(sg: ShardedGraph, fn, *args):
    """``fn(local arrays of this shard, *local blocks)`` under shard_map; every argument sharded on axis 0."""
    spec = PSpec(sg.axis)

    def body(loc, *xs):
        return fn({k: v[0] for k, v in loc.items()}, *xs)

    return jax.shard_map(body, mesh=sg.mesh, in_specs=(spec,) * (1 + len(args)), out_specs=spec)(
        _local_arrays(sg), *args)


def _check_exchange(exchange):
    if exchange not in EXCHANGES:
        raise ValueError(f"exchange must be one of {EXCHANGES}; got {exchange!r}")


@functools.partial(jax.jit, static_argnames="exchange")
def _spmm(sg, values, x, exchange):
    def local(loc, v, xl):
        xs = _gather(sg, loc, xl, exchange)
        return jax.ops.segment_sum(_bcast(v[0], xs) * xs, loc["receivers"], sg.block, indices_are_sorted=True)

    return _smap(sg, local, values, x)


@functools.partial(jax.jit, static_argnames="exchange")
def _spmm_t(sg, values, x, exchange):
    def local(loc, v, xl):
        xr = xl[loc["receivers"]]
        return _scatter(sg, loc, _bcast(v[0], xr) * xr, exchange)

    return _smap(sg, local, values, x)


def _check_product(sg, values, x):
    _check_rows("x", x, sg.padded_nodes)
    if values.ndim < 2 or values.shape[:2] != sg.weights.shape:
        raise ValueError(f"values must have shape {sg.weights.shape} (+ optional class axis), as returned by "
                         f"jaxclp.shard.edge_values; got {values.shape}")


def sharded_spmm(sg: ShardedGraph, values: jax.Array, x: jax.Array, *,
                 exchange: Exchange = "ppermute") -> jax.Array:
    """``Ahat @ x`` on internal-order arrays: ``out[r] = sum_{e: s->r} values[e] x[s]``.

    Args:
        sg: the sharded graph.
        values: (P, E) edge values (:func:`edge_values`) or (P, E, K) per-class values.
        x: (P * b,) or (P * b, K), internal order, sharded by rows.
        exchange: how each shard obtains the remote rows its edges read: ``"ppermute"`` (one
            ``jax.lax.ppermute`` per shard offset with a nonempty send list, each padded to the longest list
            of that offset), ``"all_to_all"`` (one ``jax.lax.all_to_all``, every list padded to the longest
            one) or ``"allgather"`` (the whole state; the reference).

    Returns:
        Array of the shape of ``x``, sharded by rows.
    """
    _check_exchange(exchange)
    _check_product(sg, values, x)
    return _spmm(sg, values, x, exchange)


def sharded_spmm_transpose(sg: ShardedGraph, values: jax.Array, x: jax.Array, *,
                           exchange: Exchange = "ppermute") -> jax.Array:
    """``Ahat.T @ x`` on internal-order arrays: ``out[s] = sum_{e: s->r} values[e] x[r]``: a local scatter
    into ``[local rows | halo slots]``, the halo part sent back to its owners by the reverse exchange (see
    :func:`sharded_spmm`)."""
    _check_exchange(exchange)
    _check_product(sg, values, x)
    return _spmm_t(sg, values, x, exchange)


# ============================================================================ degrees and normalization
def in_degree(sg: ShardedGraph) -> jax.Array:
    """(P * b,) weighted in-degree, internal order (0 on padding rows)."""
    return _in_degree(sg)


@jax.jit
def _in_degree(sg):
    def local(loc, w):
        return jax.ops.segment_sum(w[0], loc["receivers"], sg.block, indices_are_sorted=True)

    return _smap(sg, local, sg.weights)


def out_degree(sg: ShardedGraph, *, exchange: Exchange = "ppermute") -> jax.Array:
    """(P * b,) weighted out-degree, internal order: ``A.T @ 1`` with the raw weights."""
    _check_exchange(exchange)
    return _spmm_t(sg, sg.weights, jnp.ones((sg.padded_nodes,), sg.weights.dtype), exchange)


def _safe_rsqrt(d):
    return jnp.where(d > 0, 1.0 / jnp.sqrt(jnp.where(d > 0, d, 1.0)), 0.0)


def edge_values(sg: ShardedGraph, normalization: Normalization = "sym", *,
                exchange: Exchange = "ppermute") -> jax.Array:
    """(P, E) entries of ``Ahat`` on every shard's edges, as :func:`jaxclp.graph.edge_values` ("sym",
    "row", "none"; zero degrees give zero rows/columns); 0 on padding edges."""
    check_normalization(normalization)
    _check_exchange(exchange)
    return _edge_values(sg, normalization, exchange)


@functools.partial(jax.jit, static_argnames=("normalization", "exchange"))
def _edge_values(sg, normalization, exchange):
    if normalization == "none":
        return sg.weights
    d_in = _in_degree(sg)
    if normalization == "row":
        inv = jnp.where(d_in > 0, 1.0 / jnp.where(d_in > 0, d_in, 1.0), 0.0)
        col = jnp.ones_like(inv)
    else:
        inv = _safe_rsqrt(d_in)
        col = _safe_rsqrt(_spmm_t(sg, sg.weights, jnp.ones_like(d_in), exchange))

    def local(loc, w, a, c):
        return (w[0] * a[loc["receivers"]] * _gather(sg, loc, c, exchange))[None]

    return _smap(sg, local, sg.weights, inv, col)


# ============================================================================ the factored CLP operator
class ShardedOperator(NamedTuple):
    """:class:`jaxclp.operator.FactoredOperator` on a :class:`ShardedGraph`, internal order.

    ``matvec(x) = left * (Ahat @ (right * x))``; every (P * b, K) array is sharded by rows.

    Attributes:
        graph: the sharded graph.
        values: (P, E) edge values of ``Ahat``.
        left: (P * b, K) row scaling (b0 for CLP; 0 on padding rows).
        right: (P * b, K) column scaling (b0 @ H for CLP).
    """

    graph: ShardedGraph
    values: jax.Array
    left: jax.Array
    right: jax.Array

    def matvec(self, x: jax.Array, exchange: Exchange = "ppermute") -> jax.Array:
        """(P * b, K) -> (P * b, K): column k is ``A^F_k @ x[:, k]``."""
        return self.left * _spmm(self.graph, self.values, self.right * x, exchange)

    def rmatvec(self, x: jax.Array, exchange: Exchange = "ppermute") -> jax.Array:
        """(P * b, K) -> (P * b, K): column k is ``A^F_k.T @ x[:, k]``."""
        return self.right * _spmm_t(self.graph, self.values, self.left * x, exchange)


def clp_operator(sg: ShardedGraph, b0_internal: jax.Array, H: jax.Array, *,
                 normalization: Normalization = "sym") -> ShardedOperator:
    """The K CLP operators ``diag(b0[:, k]) Ahat diag((b0 @ H)[:, k])`` on internal-order ``b0`` (P * b, K)."""
    _check_rows("b0_internal", b0_internal, sg.padded_nodes)
    _checks.shape("H", H, (b0_internal.shape[1], b0_internal.shape[1]))
    values = edge_values(sg, normalization).astype(b0_internal.dtype)
    return ShardedOperator(sg, values, b0_internal, b0_internal @ jnp.asarray(H, b0_internal.dtype))


# ============================================================================ spectral radius and checks
@functools.partial(jax.jit, static_argnames="exchange")
def _norm_bounds(op: ShardedOperator, exchange: Exchange = "ppermute"):
    """(K,) max row sums and (K,) max column sums of the (nonnegative) operators: bounds on rho."""
    ones = jnp.ones_like(op.left)
    return op.matvec(ones, exchange).max(axis=0), op.rmatvec(ones, exchange).max(axis=0)


@functools.partial(jax.jit, static_argnames="exchange")
def _power(op: ShardedOperator, tol, max_iters, exchange: Exchange = "ppermute"):
    """:func:`jaxclp.operator.operator_spectral_radius` on a sharded operator (the same shifted power
    iteration from the all-ones vector over the real rows; padding rows stay 0); norms reduce over the
    row-sharded axis."""
    from jaxclp.operator import SpectralInfo

    sg = op.graph
    _, k = op.left.shape
    real = (sg.order >= 0)[:, None]
    x0 = jnp.where(real, 1.0, 0.0).astype(op.left.dtype) * jnp.ones((1, k), op.left.dtype) / jnp.sqrt(
        jnp.asarray(sg.num_nodes, op.left.dtype))

    def cond(s):
        _, _, it, active, _ = s
        return (it < max_iters) & jnp.any(active)

    def body(s):
        x, lam, it, active, count = s
        ax = op.matvec(x, exchange)
        est = jnp.linalg.norm(ax, axis=0)
        y = ax + 0.5 * est * x
        nrm = jnp.linalg.norm(y, axis=0)
        done = jnp.abs(est - lam) <= tol * est
        x = jnp.where(active[None, :], y / jnp.where(nrm > 0, nrm, 1.0), x)
        lam = jnp.where(active, est, lam)
        return x, lam, it + 1, active & ~done, count + active.astype(jnp.int32)

    init = (x0, jnp.zeros((k,), x0.dtype), jnp.int32(0), jnp.ones((k,), bool), jnp.zeros((k,), jnp.int32))
    x, lam, _, active, count = jax.lax.while_loop(cond, body, init)
    ax = op.matvec(x, exchange)
    pos = x > 0
    ratio = jnp.where(pos, ax / jnp.where(pos, x, 1.0), 0.0)
    lower = jnp.where(jnp.all(pos | ~real, axis=0), jnp.where(pos, ratio, jnp.inf).min(axis=0), 0.0)
    upper = ratio.max(axis=0)
    rows, cols = _norm_bounds(op, exchange)
    rho = jnp.clip(jnp.linalg.norm(ax, axis=0), lower, jnp.minimum(upper, jnp.minimum(rows, cols)))
    return SpectralInfo(rho=rho, converged=~active, iterations=count, lower=lower, upper=upper,
                        row_sum_bound=rows, col_sum_bound=cols)


def spectral_radius(sg: ShardedGraph, b0: jax.Array, H: jax.Array, *, normalization: Normalization = "sym",
                    tol: float = 1e-6, max_iters: int = 1000, exchange: Exchange = "ppermute"):
    """:func:`jaxclp.spectral_radius` on a sharded graph (``b0`` (n, K) in the user's order).

    Returns:
        A :class:`jaxclp.operator.SpectralInfo` of (K,) arrays.
    """
    _checks.shape("b0", b0, (sg.num_nodes, None))
    _checks.shape("H", H, (np.shape(b0)[1], np.shape(b0)[1]))
    check_normalization(normalization)
    _check_exchange(exchange)
    b0 = jnp.asarray(b0)
    op = clp_operator(sg, to_internal(sg, b0), jnp.asarray(H), normalization=normalization)
    return _power(op, tol, max_iters, exchange)


def _a_priori_bound(op: ShardedOperator, normalization) -> float:
    """:func:`jaxclp.operator.a_priori_bound`: rho <= 1 for "sym"/"row" when 0 <= left, right <= 1."""
    if normalization not in ("sym", "row") or not _checks.is_concrete(op.left, op.right):
        return float("inf")
    lo = min(float(jnp.min(op.left)), float(jnp.min(op.right)))
    hi = max(float(jnp.max(op.left)), float(jnp.max(op.right)))
    return 1.0 if (lo >= 0.0 and hi <= 1.0 + 1e-6) else float("inf")


def _check_spectrum(op: ShardedOperator, alpha, normalization, *, throw: bool, what: str, exchange):
    """:func:`jaxclp.propagate.check_spectrum` on a sharded operator: the a-priori bound, then the row/column
    sum bounds, then the power iteration; raises (or warns) when ``alpha * rho >= 1`` for some class."""
    if not _checks.is_concrete(alpha, op.left, op.right, op.values):
        return None
    a = float(np.max(np.asarray(alpha)))
    if a * _a_priori_bound(op, normalization) < 1.0:
        return None
    rows, cols = _norm_bounds(op, exchange)
    if a * float(jnp.max(jnp.minimum(rows, cols))) < 1.0:
        return None
    info = _power(op, 1e-6, 1000, exchange)
    report_divergence(np.asarray(info.rho), a, throw=throw, what=what, stacklevel=4)
    return info


# ============================================================================ end to end: compatibility
def estimate_compatibility(sg: ShardedGraph, prior: jax.Array, labels: jax.Array, train_mask: jax.Array, *,
                           tol: float = 1e-6, max_iters: int = 100_000, smoothing: float = 1e-6,
                           exchange: Exchange = "ppermute"):
    """:func:`jaxclp.estimate_compatibility` on a sharded graph (user order in; same checks and result).

    The count matrix ``(M Y)^T A^T B0`` is one sharded transpose product of the raw weights followed by a
    (K, n) @ (n, K) product over the row-sharded axis (local products + one all-reduce).

    Returns:
        ``(H, info)``: H (K, K) doubly stochastic and the Sinkhorn diagnostics.
    """
    prior = jnp.asarray(prior)
    labels = jnp.asarray(labels)
    train_mask = jnp.asarray(train_mask)
    n, k = prior.shape
    _checks.shape("prior", prior, (sg.num_nodes, None))
    _checks.probabilities("prior", prior)
    _checks.mask("train_mask", train_mask, n)
    _checks.labels(jnp.where(train_mask, labels, 0) if _checks.is_concrete(labels, train_mask) else labels, n, k)
    _check_exchange(exchange)
    labels = jnp.where(train_mask, labels, 0)
    return _estimate(sg, to_internal(sg, prior), to_internal(sg, labels), to_internal(sg, train_mask), tol,
                     max_iters, smoothing, exchange)


@functools.partial(jax.jit, static_argnames="exchange")
def _estimate(sg, prior, labels, train_mask, tol, max_iters, smoothing, exchange):
    from jaxclp.compat import one_hot_train
    from jaxclp.sinkhorn import sinkhorn

    my = one_hot_train(labels, train_mask, prior.shape[1]).astype(prior.dtype)
    b0 = jnp.where(train_mask[:, None], my, prior)  # padding rows: not training, prior 0 -> 0
    counts = my.T @ _spmm_t(sg, sg.weights.astype(prior.dtype), b0, exchange)
    return sinkhorn(counts, tol=tol, max_iters=max_iters, smoothing=smoothing)


def edge_homophily(sg: ShardedGraph, labels: jax.Array, *, exchange: Exchange = "ppermute") -> jax.Array:
    """:func:`jaxclp.edge_homophily` on a sharded graph: fraction of (non-loop) edges whose ends share a label.

    Args:
        sg: the sharded graph.
        labels: (n,) integer labels, user order.

    Returns:
        () float.
    """
    _checks.shape("labels", labels, (sg.num_nodes,))
    _check_exchange(exchange)
    return _edge_homophily(sg, to_internal(sg, jnp.asarray(labels)), exchange)


@functools.partial(jax.jit, static_argnames="exchange")
def _edge_homophily(sg, labels, exchange):
    f = jnp.result_type(float)

    def local(loc, count, lab):
        real = jnp.arange(loc["receivers"].shape[0]) < count[0]
        keep = real & (loc["senders"] != loc["receivers"])  # a local sender equal to the receiver is a loop
        same = (_gather(sg, loc, lab, exchange) == lab[loc["receivers"]]) & keep
        return jnp.stack([jnp.sum(same, dtype=f), jnp.sum(keep, dtype=f)])[None]

    tot = _smap(sg, local, sg.num_edges, labels).sum(axis=0)
    return tot[0] / jnp.maximum(tot[1], 1)


# ============================================================================ end to end: propagate, solve
def _l1_rows(b):
    s = b.sum(axis=1, keepdims=True)
    return b / jnp.where(s > 0, s, 1.0)


@functools.partial(jax.jit, static_argnames=("l1_normalize", "exchange"))
def _iterate(op, prior, start, alpha, num_iters, l1_normalize, exchange):
    def step(_, b):
        b = (1.0 - alpha) * prior + alpha * op.matvec(b, exchange)
        return _l1_rows(b) if l1_normalize else b

    return jax.lax.fori_loop(0, num_iters, step, start)


def _prepare(sg, b0, H, prior, normalization, exchange):
    if not isinstance(sg, ShardedGraph):
        raise ValueError(f"sg must be a ShardedGraph (jaxclp.shard.shard_graph); got {type(sg).__name__}")
    _checks.clp_inputs(sg.num_nodes, b0, H, prior)
    check_normalization(normalization)
    _check_exchange(exchange)
    b0 = jnp.asarray(b0)
    b0i = to_internal(sg, b0)
    pi = to_internal(sg, jnp.asarray(prior).astype(b0.dtype))
    return clp_operator(sg, b0i, jnp.asarray(H), normalization=normalization), pi


def propagate(sg: ShardedGraph, b0: jax.Array, H: jax.Array, prior: jax.Array, *, alpha: float,
              num_iters: int = 50, normalization: Normalization = "sym", l1_normalize: bool = False,
              throw: bool = True, exchange: Exchange = "ppermute") -> jax.Array:
    """:func:`jaxclp.propagate` (engine "factored") on a sharded graph; user order in and out.

    ``B <- (1-alpha) prior + alpha b0 * (Ahat @ ((b0 @ H) * B))`` for ``num_iters`` steps from ``b0``, every
    step one halo exchange and a local product per shard. The spectral check of :func:`jaxclp.propagate`
    (:func:`jaxclp.propagate.check_spectrum`) runs on the sharded operator.

    Args:
        sg: the sharded graph.
        b0: (n, K) initial beliefs, user order.
        H: (K, K) compatibility.
        prior: (n, K) prior D, user order.
        alpha: in (0, 1).
        num_iters: number of steps.
        normalization: "sym", "row" or "none".
        l1_normalize: L1-normalize every node's row after each step.
        throw: raise on a divergent configuration (else warn).
        exchange: "ppermute", "all_to_all" or "allgather" (see :func:`sharded_spmm`).

    Returns:
        (n, K) beliefs in the user's order (row-sharded over the axis when P divides n; see
        :func:`from_internal`).
    """
    _checks.alpha(alpha)
    if _checks.is_concrete(num_iters) and int(num_iters) < 0:
        raise ValueError(f"num_iters must be >= 0; got {num_iters}")
    op, pi = _prepare(sg, b0, H, prior, normalization, exchange)
    if not l1_normalize:
        _check_spectrum(op, alpha, normalization, throw=throw, what="CLP", exchange=exchange)
    out = _iterate(op, pi, op.left, jnp.asarray(alpha, op.left.dtype), num_iters, l1_normalize, exchange)
    return from_internal(sg, out)


SHARDED_METHODS = ("neumann", "jacobi", "bicgstab", "cg")


def _diagonal(op: ShardedOperator) -> jax.Array:
    """(P * b, K) diagonal of every class operator (self-loops are shard-local edges with sender == receiver)."""
    sg = op.graph

    def local(loc, v):  # a local sender index equal to the receiver row is a self-loop (halo slots are >= b)
        loop = jnp.where(loc["senders"] == loc["receivers"], v[0], 0.0)
        return jax.ops.segment_sum(loop, loc["receivers"], sg.block, indices_are_sorted=True)

    d = _smap(sg, local, op.values)
    return op.left * d[:, None] * op.right


def _cg_symmetrized(op: ShardedOperator, rhs, alpha, tol, max_iters, exchange):
    """:func:`jaxclp.solve._cg_symmetrized` on a sharded operator (symmetric ``Ahat`` only)."""
    from jaxclp.solve import _safe_div, cg_columns

    b, g = op.left, op.right
    tiny = jnp.finfo(rhs.dtype).tiny ** 0.5
    fixed = b <= tiny
    active = (~fixed) & (g > tiny)
    x_fixed = jnp.where(fixed, rhs, 0.0)
    rhs2 = jnp.where(active, rhs + alpha * op.matvec(x_fixed, exchange), 0.0)
    c = jnp.where(active, jnp.sqrt(b * g), 0.0)
    s = jnp.where(active, jnp.sqrt(_safe_div(g, b)), 0.0)
    sym = op._replace(left=c, right=c)
    y, its = cg_columns(lambda v: v - alpha * sym.matvec(v, exchange), s * rhs2, tol * 1e-1, max_iters)
    x_partial = jnp.where(active, _safe_div(y, s), x_fixed)
    x = rhs + alpha * op.matvec(jnp.where(active | fixed, x_partial, 0.0), exchange)
    return jnp.where(fixed, rhs, x), its


@functools.partial(jax.jit, static_argnames=("method", "max_iters", "exchange"))
def _solve_kernel(op, prior, alpha, method, tol, max_iters, exchange):
    from jaxclp.solve import bicgstab_columns, stationary_columns

    rhs = (1.0 - alpha) * prior
    rn = jnp.linalg.norm(rhs, axis=0)  # a reduction over the row-sharded axis: local sums + one all-reduce
    res = None
    if method == "neumann":  # as jaxclp.solve: the last product's increment is the returned iterate's residual
        x, its, res = stationary_columns(lambda x: rhs + alpha * op.matvec(x, exchange), rhs, rn, tol, max_iters,
                                         residual_scale=jnp.ones((), rhs.dtype))
    elif method == "jacobi":
        d = 1.0 - alpha * _diagonal(op)
        x, its, res = stationary_columns(lambda x: (rhs + alpha * op.matvec(x, exchange) - (1.0 - d) * x) / d,
                                         rhs / d, rn, tol, max_iters, residual_scale=d)
    elif method == "bicgstab":
        x, its = bicgstab_columns(lambda x: x - alpha * op.matvec(x, exchange), rhs, tol, max_iters)
    else:
        x, its = _cg_symmetrized(op, rhs, alpha, tol, max_iters, exchange)
    if res is None:
        res = jnp.linalg.norm(rhs - (x - alpha * op.matvec(x, exchange)), axis=0)
    rows = op.matvec(jnp.ones_like(x), exchange).max(axis=0)
    cols = op.rmatvec(jnp.ones_like(x), exchange).max(axis=0)
    return x, its, res, res / jnp.where(rn > 0, rn, 1.0), jnp.minimum(rows, cols)


def solve(sg: ShardedGraph, b0: jax.Array, H: jax.Array, prior: jax.Array, *, alpha: float,
          normalization: Normalization = "sym", method: str = "auto", tol: float = 1e-6,
          max_iters: int = 10_000, throw: bool = True, exchange: Exchange = "ppermute"):
    """:func:`jaxclp.solve` on a sharded graph (scalar alpha; no implicit differentiation yet).

    Methods: ``"neumann"``, ``"jacobi"``, ``"bicgstab"``, ``"cg"`` (symmetric ``Ahat`` only) and ``"auto"``
    (Neumann when ``alpha * rho_bound <= 0.4``, else CG where valid, else BiCGStab; there is no dense
    fallback). Every product is one halo exchange plus local work; the dot products and norms reduce over
    the row-sharded axis, which XLA compiles to an all-reduce (a ``psum``).

    Returns:
        A :class:`jaxclp.solve.Solution` whose ``value`` (n, K) is in the user's order.

    Raises:
        ValueError: bad input; with ``throw=True`` divergence or non-convergence (as :func:`jaxclp.solve`).
    """
    _checks.alpha(alpha)
    if np.ndim(alpha) != 0:
        raise ValueError(f"alpha must be a scalar for a sharded solve; got shape {np.shape(alpha)}")
    op, pi = _prepare(sg, b0, H, prior, normalization, exchange)
    return _solve_operator(op, pi, alpha, normalization=normalization, method=method, tol=tol,
                           max_iters=max_iters, throw=throw, exchange=exchange)


def _solve_operator(op: ShardedOperator, pi, alpha, *, normalization, method, tol, max_iters, throw, exchange):
    """``(1 - alpha) (I - alpha op)^{-1} pi`` for internal-order ``pi``; the value in the user's order."""
    from jaxclp.solve import NEUMANN_MAX_CONTRACTION, Solution, _check_converged, cg_valid

    sg = op.graph
    alpha_ = jnp.asarray(alpha, op.left.dtype)
    if method == "auto":
        rows, cols = _norm_bounds(op, exchange)
        bound = float(alpha) * float(jnp.max(jnp.minimum(rows, cols)))
        method = ("neumann" if bound <= NEUMANN_MAX_CONTRACTION
                  else "cg" if cg_valid(sg, normalization) else "bicgstab")
    elif method not in SHARDED_METHODS:
        raise ValueError(f"method must be 'auto' or one of {SHARDED_METHODS} for a sharded graph; got {method!r}")
    if method == "cg" and not cg_valid(sg, normalization):
        raise ValueError("method='cg' needs a symmetric Ahat (an undirected graph with normalization 'sym' or "
                         "'none'); use 'bicgstab'.")
    if throw:
        _check_spectrum(op, alpha_, normalization, throw=True, what="solve: CLP", exchange=exchange)
    x, its, res, rel, rho_bound = _solve_kernel(op, pi, alpha_, method, tol, max_iters, exchange)
    sol = Solution(value=from_internal(sg, x), converged=rel <= tol, iterations=its, residual=res,
                   relative_residual=rel, rho_bound=rho_bound, method=method)
    if throw:
        _check_converged(sol, alpha_, tol, max_iters)
    return sol


# ============================================================================ baselines
def label_propagation(sg: ShardedGraph, labels: jax.Array, train_mask: jax.Array, num_classes: int, *,
                      alpha: float, normalization: Normalization = "sym", method: str = "auto",
                      tol: float = 1e-6, max_iters: int = 10_000, exchange: Exchange = "ppermute") -> jax.Array:
    """:func:`jaxclp.label_propagation` (closed form, scalar alpha) on a sharded graph.

    ``(1 - alpha) (I - alpha Ahat)^{-1} (M * Y)``: the sharded solve with the operator ``Ahat`` itself
    (:class:`ShardedOperator` with unit scalings on the real rows, 0 on padding rows).

    Args:
        sg: the sharded graph.
        labels: (n,) integer labels, user order (only training entries are read).
        train_mask: (n,) bool, nonempty.
        num_classes: K.
        alpha: scalar in (0, 1).
        normalization, method, tol, max_iters: as :func:`solve`.

    Returns:
        (n, K) scores in the user's order.
    """
    from jaxclp.compat import one_hot_train

    labels, train_mask = jnp.asarray(labels), jnp.asarray(train_mask)
    _checks.mask("train_mask", train_mask, sg.num_nodes)
    _checks.alpha(alpha)
    if np.ndim(alpha) != 0:
        raise ValueError(f"alpha must be a scalar for a sharded graph; got shape {np.shape(alpha)}")
    check_normalization(normalization)
    _check_exchange(exchange)
    y0 = one_hot_train(jnp.where(train_mask, labels, 0), train_mask, num_classes)
    dtype = y0.dtype if jnp.issubdtype(y0.dtype, jnp.floating) else jnp.result_type(float)
    y0 = to_internal(sg, y0.astype(dtype))
    ones = to_internal(sg, jnp.ones((sg.num_nodes, num_classes), dtype))  # 0 on padding rows
    op = ShardedOperator(sg, edge_values(sg, normalization, exchange=exchange).astype(dtype), ones, ones)
    return _solve_operator(op, y0, alpha, normalization=normalization, method=method, tol=tol,
                           max_iters=max_iters, throw=True, exchange=exchange).value


def clp_star(sg: ShardedGraph, prior: jax.Array, start: jax.Array, H: jax.Array, *, alpha: float,
             num_iters: int = 50, normalization: Normalization = "sym", exchange: Exchange = "ppermute") -> jax.Array:
    """:func:`jaxclp.clp_star` (scalar alpha) on a sharded graph: ``B <- (1-alpha) D + alpha (Ahat B) H``.

    Args:
        sg: the sharded graph.
        prior: (n, K) D, user order. start: (n, K) initial B, user order. H: (K, K).
        alpha: scalar.

    Returns:
        (n, K) beliefs in the user's order.
    """
    prior, start, H = jnp.asarray(prior), jnp.asarray(start), jnp.asarray(H)
    _checks.shape("prior", prior, (sg.num_nodes, None))
    n, k = prior.shape
    _checks.shape("start", start, (n, k))
    _checks.shape("H", H, (k, k))
    _checks.alpha(jnp.asarray(alpha))
    if np.ndim(alpha) != 0:
        raise ValueError(f"alpha must be a scalar for a sharded graph; got shape {np.shape(alpha)}")
    check_normalization(normalization)
    _check_exchange(exchange)
    values = edge_values(sg, normalization, exchange=exchange).astype(prior.dtype)
    out = _clp_star(sg, values, to_internal(sg, prior), to_internal(sg, start.astype(prior.dtype)),
                    H.astype(prior.dtype), jnp.asarray(alpha, prior.dtype), num_iters, exchange)
    return from_internal(sg, out)


@functools.partial(jax.jit, static_argnames="exchange")
def _clp_star(sg, values, prior, start, H, alpha, num_iters, exchange):
    def step(_, b):
        return (1.0 - alpha) * prior + alpha * _spmm(sg, values, b, exchange) @ H

    return jax.lax.fori_loop(0, num_iters, step, start)
