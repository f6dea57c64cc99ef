"""H2GCN's 2-hop graph: the exact-2-hop neighbourhood of a :class:`~jaxclp.graph.Graph`, built on the host.

:func:`two_hop_graph` is a pure function of the graph (no cache): a caller that fits H2GCN several times on one graph
(per split, or again as a base predictor) builds it once and passes it as ``two_hop=`` to
:func:`jaxclp.gnn.fit_h2gcn`, :func:`jaxclp.gnn.fit_h2gcn_splits`, :func:`jaxclp.gnn.h2gcn_normalized_graphs` or
``fit_prior("h2gcn", ..., two_hop=...)``; they build it per call when it is omitted. :func:`check_two_hop_size`
refuses a graph whose 2-hop graph would pass :data:`MAX_TWO_HOP_EDGES` before anything is fitted.
"""

from __future__ import annotations

import numpy as np

from jaxclp import _checks
from jaxclp.graph import Graph


MAX_TWO_HOP_EDGES = 200_000_000
"""Default limit of :func:`two_hop_graph` (H2GCN's 2-hop graph), in directed 2-hop pairs. A node of degree d
alone makes up to d(d-1) of them, so a graph with hubs can ask for billions (an out-of-memory end, not an error).
For scale: Squirrel's 2-hop graph has 8.4M pairs and a whole H2GCN fit on it peaked at 0.85 GB resident on CPU
(session 27, ad hoc, ``/usr/bin/time``);
Coauthor-Physics 8.0M; the largest of the 18 datasets' is below 9M. Read at call time from this module
(:func:`check_two_hop_size`, :func:`default_two_hop_graph`): ``jaxclp.gnn.MAX_TWO_HOP_EDGES`` is a copy of it."""

_TWO_HOP_BLOCK_WALKS = 20_000_000
"""Rows of ``A @ A`` are formed in blocks of at most about this many length-2 walks (bounded host memory)."""


class TwoHopTooLarge(ValueError):
    """:func:`two_hop_graph` would exceed its ``max_edges``: H2GCN (and the runner's ``h2gcn`` prior) does not fit."""


def check_two_hop_size(graph: Graph, max_edges: int | None = None) -> None:
    """Raises :class:`TwoHopTooLarge` where :func:`two_hop_graph` would (``max_edges``: default
    :data:`MAX_TWO_HOP_EDGES` read at call time), before anything is fitted. Free where the number of length-2 walks
    (an upper bound on the pairs) is within the limit, as on every one of the 18 datasets; else the pairs are
    counted block by block (stopping past the limit), nothing built."""
    limit = MAX_TWO_HOP_EDGES if max_edges is None else max_edges
    if limit is None:
        return
    a, walks = _one_hop(graph)
    if int(walks.sum()) > limit:
        _two_hop_pairs(a, walks, limit, keep=False)


def _one_hop(graph: Graph):
    """``(A, walks)``: the 0/1 CSR adjacency ``A[r, s]`` of the edges ``s -> r`` of positive weight, loops and
    repeats dropped, and ``walks[r]`` = the number of length-2 walks ``s -> u -> r`` (row sums of ``A @ A``: the
    in-degrees of r's in-neighbours)."""
    import scipy.sparse as sp

    if not _checks.is_concrete(graph.senders, graph.receivers, graph.weights):
        raise ValueError("two_hop_graph runs on the host: call it outside jax.jit and pass the result in")
    n = graph.num_nodes
    s = np.asarray(graph.senders, np.int64)
    r = np.asarray(graph.receivers, np.int64)
    keep = (np.asarray(graph.weights) > 0) & (s != r)
    a = sp.csr_matrix((np.ones(int(keep.sum()), np.int64), (r[keep], s[keep])), shape=(n, n))
    a.sum_duplicates()
    a.data[:] = 1
    return a, a @ np.diff(a.indptr).astype(np.int64)


def _two_hop_pairs(a, walks, max_edges, keep: bool = True):
    """The exact-2-hop pairs of ``A`` (:func:`_one_hop`) as ``(senders, receivers)`` (None with ``keep=False``:
    only counted), formed in blocks of receivers of at most ~:data:`_TWO_HOP_BLOCK_WALKS` walks; raises
    :class:`TwoHopTooLarge` as soon as the count passes ``max_edges`` (None: no limit)."""
    n = a.shape[0]
    ends = np.searchsorted(np.cumsum(walks), np.arange(1, 1 + int(walks.sum()) // _TWO_HOP_BLOCK_WALKS)
                           * _TWO_HOP_BLOCK_WALKS)
    bounds = np.unique(np.r_[0, np.minimum(ends + 1, n), n])
    cols, rows, count = [], [], 0
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        blk = a[lo:hi]
        reach = (blk @ a).tocsr()  # reach[r - lo, s] = number of walks s -> u -> r
        reach = (reach - reach.multiply(blk)).tocoo()  # drop the 1-hop pairs
        sel = (reach.data > 0) & (reach.row + lo != reach.col)  # and the node itself
        count += int(sel.sum())
        if max_edges is not None and count > max_edges:
            raise TwoHopTooLarge(
                f"H2GCN's 2-hop graph has more than {int(max_edges):,} pairs ({count:,} counted in the first "
                f"{hi:,} of {n:,} receivers; {int(walks.sum()):,} walks of length 2, a hub of degree d makes "
                f"~d^2): it does not fit. Leave H2GCN out (jaxclp run: --methods without h2gcn; clp leaves it out by "
                "itself), or pass two_hop_graph(graph, max_edges=None) as two_hop= if you have the memory")
        if keep:
            cols.append(reach.col[sel])
            rows.append(reach.row[sel] + lo)
    return (np.concatenate(cols), np.concatenate(rows)) if keep else None


def two_hop_graph(graph: Graph, max_edges: int | None = MAX_TWO_HOP_EDGES) -> Graph:
    """The exact-2-hop neighbourhood graph of H2GCN (host-side, scipy sparse).

    Node ``s`` is a 2-hop neighbour of ``r`` iff there is a path ``s -> u -> r`` through edges of positive
    weight, ``s != r`` and ``s -> r`` is not itself an edge (for an undirected graph: shortest-path distance
    exactly 2). Self-loops of ``graph`` are ignored. Edge weights of the result are 1.

    The product ``A @ A`` is formed in blocks of receivers (each of at most ~2e7 length-2 walks), so that host
    memory stays bounded by the result, and the count stops as soon as it passes ``max_edges``.

    Args:
        graph: the input graph; its arrays must be concrete (not traced).
        max_edges: the most 2-hop pairs (edges of the result) allowed (default :data:`MAX_TWO_HOP_EDGES`);
            None: no limit.

    Returns:
        A :class:`~jaxclp.graph.Graph` on the same n nodes, edges sorted by receiver.

    Raises:
        ValueError: if called on traced arrays (inside ``jax.jit``).
        TwoHopTooLarge: (a ValueError) more than ``max_edges`` 2-hop pairs.
    """
    a, walks = _one_hop(graph)
    ei = np.stack(_two_hop_pairs(a, walks, max_edges)).astype(np.int64)
    return Graph.from_edge_index(ei, graph.num_nodes, weights=np.ones(ei.shape[1]), symmetrize=False,
                                 deduplicate=True, self_loops="drop")


def default_two_hop_graph(graph: Graph) -> Graph:
    """:func:`two_hop_graph` of ``graph`` under the default limit :data:`MAX_TWO_HOP_EDGES`, read at call time: what
    the H2GCN functions build where ``two_hop`` is omitted."""
    return two_hop_graph(graph, max_edges=MAX_TWO_HOP_EDGES)


def _check_two_hop(graph: Graph, two_hop: Graph) -> None:
    if not isinstance(two_hop, Graph):
        raise ValueError(f"two_hop must be a jaxclp Graph; got {type(two_hop).__name__}")
    if two_hop.num_nodes != graph.num_nodes:
        raise ValueError(f"two_hop has {two_hop.num_nodes} nodes but graph has {graph.num_nodes}")
