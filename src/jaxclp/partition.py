"""Node orders for sharding a graph: which nodes go to which shard (host side, numpy/scipy).

The partition decides the halo a sharded product exchanges: ``partition="none"`` keeps the user's order,
``"rcm"`` uses scipy's reverse Cuthill-McKee order, ``"bfs"`` a breadth-first order per connected component,
``"metis"`` a min-cut partition from METIS (optional dependency ``pymetis``: ``pip install jaxclp[scale]``). Halo
sizes per partitioner: ``python -m benchmarks.halo`` (``benchmarks/results/halo.md``).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from jaxclp.graph import Graph

Partition = Literal["none", "rcm", "bfs", "metis"]
PARTITIONS = ("none", "rcm", "bfs", "metis")
Balance = Literal["rows", "edges"]


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
