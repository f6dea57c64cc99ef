"""Node-sharded graphs: the partition, the halo plan, the sharded graph and its products.

Everything sharding-specific lives here; the stages are :mod:`jaxclp`'s own, run through the graph protocol
(:mod:`jaxclp.protocol`) that :class:`ShardedGraph` implements. :mod:`jaxclp.shard` keeps the historical entry
points (``jaxclp.shard.solve`` etc., thin calls of the stages).


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
2. a local CSR product: the shard's edges as a (b, b + S) CSR (rows = the local receivers, columns =
   ``[local rows | halo slots]``, row pointers :attr:`ShardedGraph.indptr` precomputed) applied to
   ``[x_local | halo]`` (b + S, K) by :func:`jaxclp.sparse.csr_matmul`. On CPU (the fused C++ kernel, or
   with ``JAXCLP_NO_FFI=1`` XLA's own CSR kernel) no (E, K) array of the senders' rows is formed: the extra
   memory of a product is the (b + S, K) block, per node, not per edge (``tests/test_shard.py`` checks XLA's
   temporary memory). On CUDA it is the gather + sorted ``segment_sum`` that XLA:GPU fuses into one
   scatter-add without temporaries (measured unsharded: ``benchmarks/results/gpu_spmm.md``); on TPU the XLA
   path is ``jax.experimental.sparse``'s lowering (not measured).

The transpose product runs the same exchange backwards: the local transpose's CSR (the edges in sender order,
:attr:`ShardedGraph.t_perm` / ``t_indptr``) applied to the local block gives ``[local | halo]`` sums
(b + S, K), the halo part returned to its owners by the reverse exchange and added there. The all-gather
reference and per-class (P, E, K) edge values keep the gather + ``segment_sum`` form.

Communication per product and shard: ``sum_d h_d * K`` values sent and received (``ppermute``),
``(P - 1) * h * K`` (``all_to_all``), instead of ``(P - 1) * b * K`` for the all-gather.

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
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as PSpec

from jaxclp import _checks
from jaxclp.graph import Graph, Normalization, check_normalization
from jaxclp.sparse import csr_matmul


Partition = Literal["none", "rcm", "bfs", "metis"]
PARTITIONS = ("none", "rcm", "bfs", "metis")
Balance = Literal["rows", "edges"]
Exchange = Literal["ppermute", "all_to_all", "allgather"]
EXCHANGES = ("ppermute", "all_to_all", "allgather")


# ============================================================================ host side: order and plan
def _structure(senders: np.ndarray, receivers: np.ndarray, n: int, symmetric: bool = False):
    """Symmetric 0/1 scipy CSR of the graph's structure (direction ignored), no diagonal, sorted indices.

    ``symmetric``: the edge set is known to be symmetric (``Graph.symmetric``): the structure is then the
    graph's own, no transpose is added. Boolean entries (parallel edges merge by logical or); the edge-list
    copies are freed before the transpose is added."""
    import scipy.sparse as sp

    keep = senders != receivers
    s, r = senders[keep], receivers[keep]
    del keep
    a = sp.csr_matrix((np.ones(s.shape[0], bool), (r, s)), shape=(n, n))
    del s, r
    if not symmetric:
        a = (a + a.T).tocsr()
    a.sort_indices()
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
    a = _structure(s, r, n, bool(graph.symmetric))
    del s, r
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
    # METIS's own index width (64 bits in the wheels): pymetis would copy narrower arrays; the scipy matrix
    # is freed before METIS runs
    try:
        from pymetis._internal import _idx_type_width

        itype = np.int32 if int(_idx_type_width()) == 32 else np.int64
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - pymetis internals moved
        itype = np.int64
    xadj, adjncy = a.indptr.astype(itype), a.indices.astype(itype)
    del a
    if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025 (xadj/adjncy are deprecated there)
        _, membership = pymetis.part_graph(int(num_shards), adjacency=pymetis.CSRAdjacency(xadj, adjncy),
                                           options=opts)
    else:
        _, membership = pymetis.part_graph(int(num_shards), xadj=xadj, adjncy=adjncy, options=opts)
    del xadj, adjncy
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

    Internal node ids: node ``i`` of shard ``p`` is ``p * b + i``; ``N = P * b``. The index arrays (``order``,
    ``rank``, ``receivers``, ``senders``, ``senders_global``, ``send``, ``send_offsets``, ``recv_slots``) are
    int32 when ``N`` and the edge count fit (the :class:`ShardedGraph`'s dtype), else int64; the counts int64.

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


_CHUNK = 1 << 20  # edges per block of build_plan's per-edge temporaries


def _index_dtype(bound: int):
    """int32 when every index is below ``bound`` <= 2**31 - 1, else int64."""
    return np.int32 if bound < np.iinfo(np.int32).max else np.int64


def _halo_tables(uniq: np.ndarray, P: int, b: int, dtype=np.int64):
    """The exchange tables from the sorted unique remote reads ``uniq`` = ``(p * P + q) * b + row`` (shard
    ``q`` reads local row ``row`` of shard ``p != q``): ``(h, send, send_counts, offsets, send_offsets,
    recv_slots, slot_of_key)`` as in :class:`Plan` (index arrays of ``dtype``); ``slot_of_key[i]`` is the halo
    slot (in ``0..S-1``) where the receiving shard finds the row of ``uniq[i]``."""
    pair = uniq // b
    pos = np.arange(uniq.shape[0]) - np.searchsorted(pair, pair, side="left")
    h = max(int(pos.max()) + 1 if pos.size else 0, 1)
    send = np.zeros((P, P, h), dtype)
    send[pair // P, pair % P, pos] = uniq % b
    send_counts = np.bincount(pair, minlength=P * P).reshape(P, P)
    # the same lists by shard offset d = (q - p) % P, each offset padded to its own longest list h_d
    dpair = ((pair % P) - (pair // P)) % P
    h_d = np.zeros(P, np.int64)
    np.maximum.at(h_d, dpair, pos + 1)
    base = np.concatenate([[0], np.cumsum(h_d)[:-1]])
    offsets = tuple((int(d), int(base[d]), int(h_d[d])) for d in range(1, P) if h_d[d] > 0)
    send_offsets = np.zeros((P, int(h_d.sum())), dtype)
    send_offsets[pair // P, base[dpair] + pos] = uniq % b
    d_s = np.repeat(np.arange(P), h_d)
    j_s = np.arange(send_offsets.shape[1]) - base[d_s]
    recv_slots = (((np.arange(P)[:, None] - d_s[None, :]) % P) * h + j_s[None, :]).astype(dtype)
    return h, send, send_counts, offsets, send_offsets, recv_slots, (base[dpair] + pos).astype(dtype)


def _remote_keys(ss: np.ndarray, q: int, P: int, b: int, kdtype):
    """For the internal sender ids ``ss`` of shard ``q``'s edges: the mask of remote edges (sender on another
    shard) and their read keys ``(p * P + q) * b + local row`` (``kdtype``)."""
    p = ss // b
    remote = p != q
    p = p[remote]
    key = p.astype(kdtype) * (P * b) + (ss[remote] - p * b)
    key += q * b
    return remote, key


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
    from jaxclp.graph import _counting_sort, _expand_rows

    P = int(num_shards)
    n = int(graph.num_nodes)
    # views of the graph's arrays (no copy): every per-edge array below is made once, in the index dtype
    s_user = np.asarray(graph.senders)
    r_user = np.asarray(graph.receivers)
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
    N = P * b
    m = int(s_user.shape[0])
    idx = _index_dtype(max(N, m) + 1)  # node ids, slots (< N) and edge positions
    kdtype = _index_dtype(P * N)  # remote read keys (p * P + q) * b + row
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    shard_of_pos = np.repeat(np.arange(P), counts)
    local_of_pos = np.arange(n) - starts[shard_of_pos]
    rank = np.empty(n, idx)
    rank[order] = shard_of_pos * b + local_of_pos
    del shard_of_pos, local_of_pos
    internal_order = np.full(N, -1, idx)
    internal_order[rank] = np.arange(n, dtype=idx)

    # edges sorted by (internal receiver, internal sender), parallel edges in input order (= np.lexsort((ss,
    # rs))): two stable O(m + N) counting sorts, by sender and then by receiver, the weights riding along
    ss = rank[s_user]
    rs = rank[r_user]
    sptr, rs, w = _counting_sort(ss, rs, w_user, N)
    del ss
    ss = _expand_rows(sptr)
    del sptr
    indptr, ss, w = _counting_sort(rs, ss, w, N)
    del rs
    bounds = indptr[np.arange(P + 1) * b].astype(np.int64)  # shard q's edges: bounds[q]:bounds[q + 1]
    ecount = np.diff(bounds)
    E = max(int(ecount.max()), 1)

    # shard q's edges in chunks of at most _CHUNK: (q, start, stop), so that no temporary is per edge
    chunks = [(q, a, min(a + _CHUNK, int(bounds[q + 1]))) for q in range(P)
              for a in range(int(bounds[q]), int(bounds[q + 1]), _CHUNK)]
    # the remote reads (sorted, unique) -> the exchange tables
    uniq = np.unique(np.concatenate([np.zeros(0, kdtype)] + [
        np.unique(_remote_keys(ss[a:z], q, P, b, kdtype)[1]) for q, a, z in chunks]))
    h, send, send_counts, offsets, send_offsets, recv_slots, slot_of_key = _halo_tables(uniq, P, b, idx)

    if P * E == ss.shape[0]:  # no padding (P = 1): the sorted arrays are the tables themselves
        send_g, w_l = ss.reshape(P, E), w.reshape(P, E)
    else:
        send_g, w_l = np.zeros((P, E), idx), np.zeros((P, E), w.dtype)
        for q in range(P):
            e0, e1 = int(bounds[q]), int(bounds[q + 1])
            send_g[q, :e1 - e0], w_l[q, :e1 - e0] = ss[e0:e1], w[e0:e1]
    del w
    recv_l = np.full((P, E), b - 1, idx)
    for q in range(P):
        recv_l[q, :ecount[q]] = _expand_rows(indptr[q * b:(q + 1) * b + 1])
    del indptr
    send_l = np.zeros((P, E), idx)
    for q, a, z in chunks:
        ext = send_l[q, a - bounds[q]:z - bounds[q]]
        np.subtract(ss[a:z], q * b, out=ext)  # local senders: their row
        remote, key = _remote_keys(ss[a:z], q, P, b, kdtype)
        if key.size:
            ext[remote] = b + slot_of_key[np.searchsorted(uniq, key)]
        del remote, key
    return Plan(num_nodes=n, num_shards=P, block=b, halo=h, offsets=offsets, order=internal_order, rank=rank,
                counts=counts.astype(np.int64), receivers=recv_l, senders=send_l, senders_global=send_g,
                weights=w_l, num_edges=ecount, send=send, send_counts=send_counts, send_offsets=send_offsets,
                recv_slots=recv_slots,
                symmetric=bool(graph.symmetric))


# ============================================================================ the device-side graph
def _local_csr(receivers: np.ndarray, senders: np.ndarray, b: int, slots: int):
    """The CSR tables of one shard's edges (host, numpy): ``(indptr (b + 1,), t_perm (E,), t_indptr
    (b + slots + 1,))``, int32.

    ``receivers`` are sorted (padding edges last, on row b - 1, weight 0), so ``indptr`` is their row pointer
    array; the transpose's CSR is the edges in stable ``senders`` order (``t_perm``, one O(E + b + slots)
    counting sort; padding edges, sender 0, join row 0 with weight 0). Senders need not be sorted within a
    row: the fused kernel and the XLA path (``jax.experimental.sparse`` lowers to a scatter-add) sum a row's
    entries in any order."""
    from jaxclp.graph import _counting_sort

    receivers, senders = np.asarray(receivers), np.asarray(senders)
    e = senders.shape[0]
    indptr = np.searchsorted(receivers, np.arange(b + 1), side="left").astype(np.int32)
    t_indptr, t_perm, _ = _counting_sort(senders.astype(np.int32, copy=False), np.arange(e, dtype=np.int32),
                                         np.zeros(e, np.int8), b + slots)
    return indptr, t_perm, t_indptr


def _csr_tables(receivers: np.ndarray, senders: np.ndarray, b: int, slots: int):
    """:func:`_local_csr` of every shard, stacked: (P, b + 1), (P, E), (P, b + slots + 1) int32 (filled one
    shard at a time: no per-shard copies kept)."""
    P, e = senders.shape
    indptr = np.empty((P, b + 1), np.int32)
    t_perm = np.empty((P, e), np.int32)
    t_indptr = np.empty((P, b + slots + 1), np.int32)
    for q in range(P):
        indptr[q], t_perm[q], t_indptr[q] = _local_csr(receivers[q], senders[q], b, slots)
    return indptr, t_perm, t_indptr


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["receivers", "senders", "senders_global", "weights", "num_edges", "send", "send_offsets",
                 "recv_slots", "order", "rank", "indptr", "t_perm", "t_indptr"],
    meta_fields=["num_nodes", "num_shards", "block", "halo", "offsets", "axis", "mesh", "symmetric", "exchange"],
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
        indptr: (P, b + 1) int32 row pointers of ``receivers`` per shard: the local CSR (b rows, ``b + S``
            columns) that the halo products run on (:func:`jaxclp.sparse.csr_matmul`).
        t_perm: (P, E) int32 the shard's edges sorted by ``senders`` (stable): the CSR of the local transpose
            (``b + S`` rows, b columns).
        t_indptr: (P, b + S + 1) int32 row pointers of ``senders[t_perm]``.
        num_nodes: static n; num_shards: static P; block: static b; halo: static h; offsets: static
            ``((d, base_d, h_d), ...)`` (see :class:`Plan`).
        axis: static mesh axis name; mesh: the static :class:`jax.sharding.Mesh`.
        symmetric: static, the source graph's ``symmetric`` flag.
        exchange: static, the halo exchange of the protocol's products (:meth:`with_exchange`; see
            :func:`sharded_spmm`).

    It implements the graph protocol (:mod:`jaxclp.protocol`): every stage of the library takes it in place of
    a :class:`~jaxclp.Graph` (user order in and out; products, norms and solvers on the internal order, their
    reductions over the row-sharded axis compiled to all-reduces). It has no global edge list on one device:
    the "dense" and "gmres" solver methods are not available.
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
    indptr: jax.Array
    t_perm: jax.Array
    t_indptr: jax.Array
    num_nodes: int
    num_shards: int
    block: int
    halo: int
    offsets: tuple
    axis: str
    mesh: Mesh
    symmetric: bool = False
    exchange: str = "ppermute"

    has_edge_list = False

    @property
    def padded_nodes(self) -> int:
        """N = P * b, the length of internal-order arrays."""
        return self.num_shards * self.block

    @property
    def row_sharding(self) -> NamedSharding:
        """``NamedSharding(mesh, P(axis))``: the sharding of internal-order and per-shard arrays."""
        return NamedSharding(self.mesh, PSpec(self.axis))

    # ------------------------------------------------------------- the graph protocol (jaxclp.protocol)
    def with_exchange(self, exchange: Exchange) -> "ShardedGraph":
        """The same graph whose protocol products use the halo exchange ``exchange``."""
        _check_exchange(exchange)
        return self if exchange == self.exchange else dataclasses.replace(self, exchange=exchange)

    @property
    def real_rows(self) -> jax.Array:
        """(P * b,) bool: True on the rows of real nodes, False on padding rows."""
        return self.order >= 0

    def to_internal(self, x: jax.Array) -> jax.Array:
        """:func:`to_internal`."""
        return to_internal(self, x)

    def from_internal(self, x: jax.Array, axis: int = 0) -> jax.Array:
        """:func:`from_internal` along the node axis ``axis`` (1: an (A, P * b, ...) stack, one per alpha)."""
        if axis == 0:
            return from_internal(self, x)
        return jnp.stack([from_internal(self, v) for v in x])

    def edge_values(self, normalization: Normalization = "sym") -> jax.Array:
        """(P, E) :func:`edge_values`."""
        return edge_values(self, normalization, exchange=self.exchange)

    def spmm(self, values: jax.Array, x: jax.Array) -> jax.Array:
        """:func:`sharded_spmm` (internal order)."""
        return _spmm(self, values, x, self.exchange)

    def spmm_transpose(self, values: jax.Array, x: jax.Array) -> jax.Array:
        """:func:`sharded_spmm_transpose` (internal order)."""
        return _spmm_t(self, values, x, self.exchange)

    def spmm_linear(self, values: jax.Array, x: jax.Array) -> jax.Array:
        """``Ahat @ x`` by the halo gather and a ``segment_sum`` per shard: linear-transposable (what
        ``jax.lax.custom_linear_solve`` transposes)."""
        return _spmm_linear(self, values, x, self.exchange)

    def factored_matvec(self, values, left, right, x) -> jax.Array:
        """``left * (Ahat @ (right * x))``: ``right * x`` is formed on the local block and exchanged, then the
        local CSR product and ``left *`` (the fused :func:`jaxclp.sparse.factored_matmul` would need ``right``
        on the halo rows too: a second exchange per product; neither form builds an (E, K) array)."""
        return left * _spmm(self, values, right * x, self.exchange)

    def factored_rmatvec(self, values, left, right, x) -> jax.Array:
        """``right * (Ahat.T @ (left * x))``."""
        return right * _spmm_t(self, values, left * x, self.exchange)

    def self_loops(self, values: jax.Array) -> jax.Array:
        """(P * b,) the diagonal of ``Ahat``: a local sender index equal to the receiver row is a self-loop
        (halo slots are >= b)."""
        def local(loc, v):
            loop = jnp.where(loc["senders"] == loc["receivers"], v[0], 0.0)
            return jax.ops.segment_sum(loop, loc["receivers"], self.block, indices_are_sorted=True)

        return _smap(self, local, values)

    def edge_matrix(self, values, left, right) -> jax.Array:
        """(P, E, K) per-class edge values ``values[e] * left[r_e, k] * right[s_e, k]`` (``right`` read through
        the halo exchange)."""
        exchange = self.exchange

        def local(loc, v, lft, rgt):
            return (v[0][:, None] * lft[loc["receivers"]] * _gather(self, loc, rgt, exchange))[None]

        return _smap(self, local, values, left, right)


def _auto_mesh(mesh: Mesh, axis: str) -> Mesh:
    """``mesh`` checked, with every axis ``AxisType.Auto``.

    ``jax.make_mesh`` (JAX >= 0.7) makes Explicit axes by default; the sharded graph places its arrays with
    ``NamedSharding``/``with_sharding_constraint`` and runs its products in ``jax.shard_map``, which need Auto
    axes (an Explicit one fails with "... can only refer to Auto axes of the mesh"). The same devices in the
    same layout under Auto axes shard the same way."""
    if not isinstance(mesh, Mesh):
        raise ValueError(f"mesh must be a jax.sharding.Mesh; got {type(mesh).__name__}")
    if axis not in mesh.shape:
        raise ValueError(f"axis {axis!r} is not an axis of the mesh {dict(mesh.shape)}")
    types = getattr(mesh, "axis_types", None)
    if types is None or all(t == AxisType.Auto for t in types):
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names))


def shard_graph(graph: Graph, mesh: Mesh, axis: str = "nodes", *, partition: Partition = "none",
                balance: Balance = "rows", order=None, seed: int = 0, plan: Plan | None = None) -> ShardedGraph:
    """Splits the nodes of ``graph`` over the mesh axis ``axis`` (host-side preprocessing, once per graph).

    Args:
        graph: the graph.
        mesh: a :class:`jax.sharding.Mesh` (``jax.make_mesh``'s or a hand-built one; Explicit axes are used as
            Auto); other axes of the mesh replicate.
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
    mesh = _auto_mesh(mesh, axis)
    P = int(mesh.shape[axis])
    if plan is None:
        plan = build_plan(graph, P, partition=partition, balance=balance, order=order, seed=seed)
    elif plan.num_shards != P or plan.num_nodes != graph.num_nodes:
        raise ValueError(f"plan is for {plan.num_shards} shards and {plan.num_nodes} nodes; the mesh axis has "
                         f"{P} and the graph {graph.num_nodes}")
    rows = NamedSharding(mesh, PSpec(axis))
    rep = NamedSharding(mesh, PSpec())
    fdtype = jnp.asarray(graph.weights).dtype

    def put(a, sharding, dtype=jnp.int32):  # no host copy when the plan's array has the dtype already
        return jax.device_put(np.asarray(a).astype(dtype, copy=False), sharding)

    # the CSR tables go to the devices (and their host copies away) before the plan's arrays do
    csr = [put(t, rows) for t in _csr_tables(plan.receivers, plan.senders, plan.block,
                                             int(plan.send_offsets.shape[1]))]
    return ShardedGraph(
        receivers=put(plan.receivers, rows), senders=put(plan.senders, rows),
        senders_global=put(plan.senders_global, rows), weights=put(plan.weights, rows, fdtype),
        num_edges=put(plan.num_edges, rows),
        send=put(plan.send, rows), send_offsets=put(plan.send_offsets, rows),
        recv_slots=put(plan.recv_slots, rows), order=put(plan.order, rep),
        rank=put(plan.rank, rep), indptr=csr[0], t_perm=csr[1],
        t_indptr=csr[2], num_nodes=plan.num_nodes, num_shards=P, block=plan.block, halo=plan.halo,
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
    mesh = _auto_mesh(mesh, axis)
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
        cols["indptr"], cols["t_perm"], cols["t_indptr"] = _local_csr(cols["receivers"], cols["senders"], b,
                                                                       int(send_offsets.shape[1]))
        local[sh] = cols
    order = np.where(np.arange(P * b) < n, np.arange(P * b), -1)
    rows_sh = NamedSharding(mesh, PSpec(axis))
    rep = NamedSharding(mesh, PSpec())

    def put(a, sharding, dtype=jnp.int32):
        a = np.asarray(a).astype(dtype)
        return jax.make_array_from_callback(a.shape, sharding, lambda idx: a[idx])

    def put_local(name, dtype=jnp.int32):  # the callback runs only for this process's devices
        width = {"indptr": b + 1, "t_indptr": b + int(send_offsets.shape[1]) + 1}.get(name, E)
        return jax.make_array_from_callback(
            (P, width), rows_sh, lambda idx: local[idx[0].start or 0][name][None].astype(dtype))

    return ShardedGraph(
        receivers=put_local("receivers"), senders=put_local("senders"),
        senders_global=put_local("senders_global"), weights=put_local("weights", w.dtype),
        num_edges=put(ecount, rows_sh), send=put(send, rows_sh),
        send_offsets=put(send_offsets, rows_sh), recv_slots=put(recv_slots, rows_sh), order=put(order, rep),
        rank=put(np.arange(n), rep), indptr=put_local("indptr"), t_perm=put_local("t_perm"),
        t_indptr=put_local("t_indptr"), num_nodes=n, num_shards=P, block=b, halo=h, offsets=offsets, axis=axis,
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
    return _extended(sg, loc, xl, exchange)[loc["senders"]]


def _extended(sg: ShardedGraph, loc, xl, exchange):
    """``[x_local | halo]`` (b + S, ...): the local block and the rows received by the halo exchange (the
    columns of the shard's local CSR). ``exchange`` is ``"ppermute"`` or ``"all_to_all"``."""
    if not sg.offsets:  # no edge crosses shards
        return xl
    if exchange == "ppermute":  # one round per shard offset d with a nonempty list, h_d rows each
        parts = [jax.lax.ppermute(xl[loc["send_offsets"][base:base + h]], sg.axis, _ring(sg, d))
                 for d, base, h in sg.offsets]
        halo = jnp.concatenate(parts) if len(parts) > 1 else parts[0]
    else:  # all_to_all: every list padded to h
        recv = jax.lax.all_to_all(xl[loc["send"]], sg.axis, 0, 0)  # recv[p] = the rows shard p sent us
        halo = recv.reshape((-1,) + xl.shape[1:])[loc["recv_slots"]]
    return jnp.concatenate([xl, halo])


def _scatter(sg: ShardedGraph, loc, msg, exchange):
    """Transpose of :func:`_gather`: per-edge messages (E, ...) summed into their senders' rows, (b, ...)."""
    b, P = sg.block, sg.num_shards
    if exchange == "allgather":
        full = jax.ops.segment_sum(msg, loc["senders_global"], P * b)
        return jax.lax.psum_scatter(full, sg.axis, scatter_dimension=0, tiled=True)
    return _return_halo(sg, loc, jax.ops.segment_sum(msg, loc["senders"], b + _num_slots(sg)), exchange)


def _return_halo(sg: ShardedGraph, loc, ext, exchange):
    """Transpose of :func:`_extended`: ``ext`` (b + S, ...) holds sums for the local rows and for the halo
    slots; the halo part is sent back to its owners by the reverse exchange and added there. Returns
    (b, ...)."""
    b, P = sg.block, sg.num_shards
    out, halo = ext[:b], ext[b:]
    if exchange == "ppermute":
        for d, base, h in sg.offsets:
            back = jax.lax.ppermute(halo[base:base + h], sg.axis, _ring(sg, d, back=True))
            out = out + jax.ops.segment_sum(back, loc["send_offsets"][base:base + h], b)
    elif sg.offsets:
        buf = jax.ops.segment_sum(halo, loc["recv_slots"], P * sg.halo).reshape((P, sg.halo) + ext.shape[1:])
        back = jax.lax.all_to_all(buf, sg.axis, 0, 0)  # back[q] = contributions of shard q to our rows send[q]
        out = out + jax.ops.segment_sum(back.reshape((-1,) + ext.shape[1:]), loc["send"].reshape(-1), b)
    return out


def _local_arrays(sg: ShardedGraph) -> dict:
    return {"receivers": sg.receivers, "senders": sg.senders, "senders_global": sg.senders_global,
            "send": sg.send, "send_offsets": sg.send_offsets, "recv_slots": sg.recv_slots, "indptr": sg.indptr,
            "t_perm": sg.t_perm, "t_indptr": sg.t_indptr}


def _smap(sg: ShardedGraph, fn, *args):
    """``fn(local arrays of this shard, *local blocks)`` under shard_map; every argument sharded on axis 0."""
    spec = PSpec(sg.axis)

    def body(loc, *xs):
        return fn({k: v[0] for k, v in loc.items()}, *xs)

    # check_vma=False: the fused CPU kernel (an XLA FFI call, jaxclp.sparse) has no varying-axes type, so
    # under the check its lax.platform_dependent branches would differ in type; every output here is per shard
    return jax.shard_map(body, mesh=sg.mesh, in_specs=(spec,) * (1 + len(args)), out_specs=spec,
                         check_vma=False)(_local_arrays(sg), *args)


def _check_exchange(exchange):
    if exchange not in EXCHANGES:
        raise ValueError(f"exchange must be one of {EXCHANGES}; got {exchange!r}")


def _local_mm(v, cols, rows, indptr, y):
    """``out[r] = sum_{e in row r} v[e] y[cols[e]]`` over one shard's local CSR, (len(indptr) - 1, ...), by
    :func:`jaxclp.sparse.csr_matmul` (the fused kernel on CPU; rectangular: ``y`` has the CSR's column
    count of rows). No (E, K) array: the kernel reads the rows of ``y`` in place."""
    dtype = jnp.result_type(v.dtype, y.dtype)
    y2 = y.reshape(y.shape[0], -1).astype(dtype)
    out = csr_matmul(v.astype(dtype), cols, rows, indptr, y2)
    return out.reshape((out.shape[0],) + y.shape[1:])


def _fused(exchange, values) -> bool:
    """Whether the products run on the local CSR: the halo exchanges with one value per edge (the all-gather
    reference and per-class (P, E, K) values keep the gather + ``segment_sum`` path)."""
    return exchange != "allgather" and values.ndim == 2


def _gather_sum(sg, loc, v, xl, exchange):
    """One shard's rows of ``Ahat @ x`` by gather + sorted ``segment_sum`` (linear-transposable)."""
    xs = _gather(sg, loc, xl, exchange)
    return jax.ops.segment_sum(_bcast(v, xs) * xs, loc["receivers"], sg.block, indices_are_sorted=True)


@functools.partial(jax.jit, static_argnames="exchange")
def _spmm(sg, values, x, exchange):
    def local(loc, v, xl):
        if _fused(exchange, values):  # [x_local | halo] (b + S, K) through the local CSR: no (E, K) array
            return _local_mm(v[0], loc["senders"], loc["receivers"], loc["indptr"], _extended(sg, loc, xl, exchange))
        return _gather_sum(sg, loc, v[0], xl, exchange)

    return _smap(sg, local, values, x)


@functools.partial(jax.jit, static_argnames="exchange")
def _spmm_linear(sg, values, x, exchange):
    """:func:`_spmm` by gather + ``segment_sum`` only: a program ``jax.linear_transpose`` can transpose (the
    local CSR kernel has a custom VJP, no transpose rule)."""
    return _smap(sg, lambda loc, v, xl: _gather_sum(sg, loc, v[0], xl, exchange), values, x)


@functools.partial(jax.jit, static_argnames="exchange")
def _spmm_t(sg, values, x, exchange):
    def local(loc, v, xl):
        if _fused(exchange, values):  # the local transpose's CSR (b + S rows), then the reverse exchange
            perm = loc["t_perm"]
            ext = _local_mm(v[0][perm], loc["receivers"][perm], loc["senders"][perm], loc["t_indptr"], xl)
            return _return_halo(sg, loc, ext, exchange)
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

    Per shard: the halo exchange, then the local CSR product over ``[x_local | halo]`` (no (E, K) array; see
    the module docstring).

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


# ============================================================================ edge homophily
def edge_homophily(sg: ShardedGraph, labels: jax.Array, *, exchange: Exchange = "ppermute") -> jax.Array:
    """:func:`jaxclp.edge_homophily` on a sharded graph: fraction of (non-loop) edges whose ends share a label
    (edges with an unlabelled end, label < 0, not counted).

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
        ls, lr = _gather(sg, loc, lab, exchange), lab[loc["receivers"]]
        # a local sender equal to the receiver is a loop; a negative label an unlabelled end (not counted)
        keep = real & (loc["senders"] != loc["receivers"]) & (ls >= 0) & (lr >= 0)
        same = (ls == lr) & keep
        return jnp.stack([jnp.sum(same, dtype=f), jnp.sum(keep, dtype=f)])[None]

    tot = _smap(sg, local, sg.num_edges, labels).sum(axis=0)
    return tot[0] / jnp.maximum(tot[1], 1)
