"""The halo plan of a node-sharded graph (host side, numpy): blocks, local edges, send lists.

Internal node ids: node ``i`` of shard ``p`` is ``p * b + i``. Each shard keeps its incoming edges (receiver in
the block) with the receiver as a shard-local row and the sender as an index into ``[local rows | halo slots]``,
padded to a common edge count with zero weight (XLA needs static shapes); the send lists say which rows of its
block each shard sends to each other shard (:mod:`jaxclp.halo` runs the exchange).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxclp.graph import Graph, _counting_sort, _expand_rows
from jaxclp.partition import Balance, Partition, _split, node_order


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
