"""Graph container, constructors, adjacency normalization and sparse products.

A :class:`Graph` stores a directed edge list: messages flow ``senders[e] -> receivers[e]``, and the
(dense-equivalent) adjacency is ``A[receivers[e], senders[e]] = weights[e]``, so ``(A @ X)[r]`` sums
``X[s]`` over the in-edges ``s -> r``. Edges are always kept sorted by receiver (then sender) so that
segment reductions run with ``indices_are_sorted=True``.

Constructors (``from_edge_index``, ``from_scipy``, ``from_networkx``) run on the host with numpy; everything
else is a pure, jit-able function of arrays. ``num_nodes`` is static metadata of the pytree, so shapes are
static under ``jax.jit``.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp.sparse import CSR_MIN_COLUMNS, csr_matmul, factored_matmul, row_pointers

_TRUSTED = threading.local()  # set while a constructor of this module builds a Graph from checked ids

Normalization = Literal["sym", "row", "none"]
NORMALIZATIONS = ("sym", "row", "none")
SelfLoops = Literal["drop", "keep", "add"]


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["senders", "receivers", "weights", "indptr", "transpose_perm", "transpose_indptr", "real"],
    meta_fields=["num_nodes", "symmetric"],
)
@dataclasses.dataclass(frozen=True)
class Graph:
    """A directed, weighted graph as an edge list sorted by receiver.

    Attributes:
        senders: (m,) int32, source node of each edge.
        receivers: (m,) int32, target node of each edge (sorted ascending).
        weights: (m,) float, raw edge weight (1.0 for an unweighted graph).
        num_nodes: static int n.
        symmetric: static bool, True when for every edge s->r the edge r->s exists with the same weight
            (checked by the constructors; ``Ahat`` is then symmetric for ``"sym"`` and ``"none"``).
        indptr: (n + 1,) int32 CSR row pointers of ``receivers``, or None. The constructors fill it on the
            host, once, so that :func:`spmm` does not search for them on every call (a searchsorted over m
            edges per product: half the cost of one CLP step at n = 100k, m = 2M); a Graph built directly
            from arrays without it works the same, recomputing them per product.
        transpose_perm: (m,) int32 edge ids in (sender, receiver) order, or None: the CSR of ``Ahat.T`` is
            ``values[transpose_perm]`` with column indices ``receivers[transpose_perm]`` (``senders`` itself
            for a symmetric graph) and row pointers ``transpose_indptr``. Filled by the constructors on the
            host, once, so that :func:`spmm_transpose` (and ``FactoredOperator.rmatvec``, hence the norm
            bound of every solve) runs the CSR kernel instead of materializing an (m, K) gather.
        transpose_indptr: (n + 1,) int32 row pointers of ``senders[transpose_perm]`` (edge counts per sender,
            cumulated), or None. Both transpose fields are set together; without them the transposed product
            falls back to a gather and an unsorted ``segment_sum``.
        real: (n,) bool, or None (default: every node is real). A graph padded to a shape bucket
            (:func:`jaxclp.buckets.propagation_graph`) marks its padding nodes False: they have no edge of
            nonzero weight, and :meth:`to_internal` zeroes their rows, so the stages' operators, solves and norms
            are those of the real nodes (as a :class:`~jaxclp.ShardedGraph`'s padding rows), compiled for the
            bucket's sizes. The user order then has n rows, the padding ones included (any values there).
    """

    senders: jax.Array
    receivers: jax.Array
    weights: jax.Array
    num_nodes: int
    symmetric: bool = False
    indptr: jax.Array | None = None
    transpose_perm: jax.Array | None = None
    transpose_indptr: jax.Array | None = None
    real: jax.Array | None = None

    def __post_init__(self):
        # Node ids of a Graph built directly from concrete arrays must lie in [0, num_nodes): an id >= n
        # would be dropped silently by the segment sums (and a negative one wrap around). Skipped for
        # traced or abstract leaves (jit, vmap, tree unflattening with placeholders).
        n = self.num_nodes
        if not isinstance(n, (int, np.integer)):
            return
        if (self.transpose_perm is None) != (self.transpose_indptr is None):
            raise ValueError("transpose_perm and transpose_indptr must be given together (or both None)")
        for name, arr, shape in (("transpose_perm", self.transpose_perm, np.shape(self.senders)),
                                 ("transpose_indptr", self.transpose_indptr, (n + 1,)), ("real", self.real, (n,))):
            if isinstance(arr, (np.ndarray, jax.Array)) and arr.shape != tuple(shape):
                raise ValueError(f"{name} must have shape {tuple(shape)}; got {arr.shape}")
        if getattr(_TRUSTED, "on", False):  # built by a constructor below: ids already checked on the host
            return
        for name in ("senders", "receivers"):
            ids = getattr(self, name)
            if not isinstance(ids, (np.ndarray, jax.Array)) or isinstance(ids, jax.core.Tracer):
                continue
            if ids.ndim != 1 or ids.size == 0:
                continue
            if not (np.issubdtype(ids.dtype, np.integer)):
                raise ValueError(f"{name} must hold integer node ids; got dtype {ids.dtype}")
            arr = np.asarray(ids)
            lo, hi = int(arr.min()), int(arr.max())
            if lo < 0 or hi >= n:
                bad = arr[(arr < 0) | (arr >= n)]
                raise ValueError(f"{name} has node ids out of range [0, num_nodes={n}): e.g. {bad[:5].tolist()}")

    @property
    def num_edges(self) -> int:
        return int(self.senders.shape[0])

    @property
    def n_node(self) -> jax.Array:
        """(1,) number of nodes, as in ``jraph.GraphsTuple``."""
        return jnp.asarray([self.num_nodes], dtype=jnp.int32)

    # ------------------------------------------------------------------ constructors (host side)
    @classmethod
    def from_edge_index(
        cls,
        edge_index,
        num_nodes: int,
        *,
        weights=None,
        symmetrize: bool = True,
        deduplicate: bool = True,
        self_loops: SelfLoops = "drop",
    ) -> "Graph":
        """Builds a graph from a (2, m) edge index (row 0 senders, row 1 receivers).

        Args:
            edge_index: (2, m) integer array-like.
            num_nodes: n; every index must lie in [0, n).
            weights: optional (m,) nonnegative edge weights (default 1).
            symmetrize: add the reverse of every edge (undirected graph).
            deduplicate: merge repeated (sender, receiver) pairs into one edge whose weight is the largest
                of the merged ones (so a 0/1 graph stays 0/1).
            self_loops: ``"drop"`` removes loops, ``"keep"`` keeps the file's loops, ``"add"`` removes them and
                adds exactly one loop of weight 1 per node.

        Returns:
            A Graph with edges sorted by (receiver, sender), its CSR row pointers and the CSR of its transpose
            (``transpose_perm``, ``transpose_indptr``).

        Raises:
            ValueError: bad shape, non-integer or out-of-range indices, negative or non-finite weights, more
                than 2**31 - 2 nodes or edges.

        Cost: O(m + n) time and int32 host memory: counting sorts (scipy's C++ COO -> CSR conversion), the
        weights carried along the sorts (float32, or float64 under ``jax_enable_x64``; none for an
        unweighted graph until the final array of ones), temporaries freed at once, and the symmetry test
        on the transposed CSR that the graph stores anyway. Measured at n = 1e6, m = 2e7:
        ``benchmarks/results/graph_memory.md``.
        """
        ei = np.asarray(edge_index)
        if ei.ndim != 2 or ei.shape[0] != 2:
            pairs = ei.ndim == 2 and ei.shape[1] == 2
            hint = " (an (m, 2) list of pairs: pass its transpose, edge_index.T)" if pairs else ""
            raise ValueError(f"edge_index must have shape (2, m); got {ei.shape}{hint}")
        if ei.size and not np.issubdtype(ei.dtype, np.integer):
            if not np.all(np.equal(np.mod(ei, 1), 0)):
                raise ValueError("edge_index must contain integers")
        num_nodes = int(num_nodes)
        if num_nodes < 1:
            raise ValueError(f"num_nodes must be >= 1; got {num_nodes}")
        if ei.size and (ei.min() < 0 or ei.max() >= num_nodes):
            bad = ei[(ei < 0) | (ei >= num_nodes)]
            raise ValueError(
                f"edge_index has node ids out of range [0, {num_nodes}): e.g. {bad[:5].astype(np.int64).tolist()}")
        m = ei.shape[1]
        # float64 under jax_enable_x64, else float32: what JAX stores anyway (no float64 host copy)
        wdtype = np.dtype(jnp.result_type(float))
        w = None  # None: every weight is 1 (kept implicit until the end)
        if weights is not None:
            w = np.asarray(weights)
            if w.dtype.kind not in "biuf":
                w = np.asarray(w, dtype=np.float64)
            w = w.reshape(-1)
            if w.shape[0] != m:
                raise ValueError(f"weights must have shape ({m},); got {w.shape}")
            if not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError("weights must be finite and nonnegative")
            w = w.astype(wdtype, copy=False)
        if self_loops not in ("drop", "keep", "add"):
            raise ValueError(f"self_loops must be 'drop', 'keep' or 'add'; got {self_loops!r}")
        if num_nodes >= 2**31 - 1 or 2 * m + num_nodes >= 2**31 - 1:
            raise ValueError(f"num_nodes ({num_nodes}) and the number of edges after symmetrizing and adding "
                             f"loops (up to {2 * m + num_nodes}) must be < 2**31 - 1: ids and row pointers are "
                             f"stored as int32")
        idx = np.int32
        s, r = ei[0], ei[1]  # views of the caller's array: nothing is copied until filtered or cast
        if self_loops in ("drop", "add"):
            keep = s != r
            if not keep.all():
                s, r = s[keep], r[keep]
                w = None if w is None else w[keep]
            del keep
        s, r = s.astype(idx, copy=False), r.astype(idx, copy=False)
        rows, cols, ws = [r], [s], [w]
        if symmetrize:
            rows.append(s), cols.append(r), ws.append(w)
        if self_loops == "add":
            loop = np.arange(num_nodes, dtype=idx)
            rows.append(loop), cols.append(loop), ws.append(None if w is None else np.ones(num_nodes, wdtype))
        r = np.concatenate(rows) if len(rows) > 1 else r
        s = np.concatenate(cols) if len(cols) > 1 else s
        weighted = w is not None
        # the weights ride along the sorts as the payload (no permutation array); unweighted: 1-byte dummy
        data = (np.concatenate(ws) if len(ws) > 1 else w) if weighted else np.empty(r.shape[0], np.int8)
        del rows, cols, ws, ei, w
        if deduplicate:
            # O(m) counting sort by receiver, then each row's senders sorted in place (C++, O(m log deg));
            # the order of repeated edges is irrelevant: they are merged below
            indptr, s, data = _counting_sort(r, s, data, num_nodes)
            del r
            _sort_rows(indptr, s, data)
        else:
            # stable sort by (receiver, sender) = two O(m) counting sorts, by sender and then by receiver:
            # parallel edges keep the input order (as np.lexsort((s, r)) did)
            sptr, r, data = _counting_sort(s, r, data, num_nodes)
            s = _expand_rows(sptr)  # the senders in that order: one sorted run per sender, no gather
            del sptr
            indptr, s, data = _counting_sort(r, s, data, num_nodes)
            del r
        w = data if weighted else None
        del data
        r = _expand_rows(indptr)
        parallel = False
        if s.size > 1:
            same = (s[1:] == s[:-1]) & (r[1:] == r[:-1])
            parallel = bool(same.any())
            if deduplicate and parallel:
                first = np.ones(s.shape[0], dtype=bool)
                np.logical_not(same, out=first[1:])
                del same
                if w is not None:  # weight of a merged edge: the largest (reduceat over each run)
                    w = np.maximum.reduceat(w, np.flatnonzero(first))
                s, r = s[first], r[first]
                del first
                indptr = np.zeros(num_nodes + 1, dtype=idx)
                np.cumsum(np.bincount(r, minlength=num_nodes), out=indptr[1:])
                parallel = False
            same = None
        # the transpose: one counting sort by sender with the edge ids as payload (ids ascend within a
        # sender, so its receivers do too)
        tindptr, tcols, tperm = _counting_sort(s, r, np.arange(s.shape[0], dtype=s.dtype), num_nodes)
        if parallel:  # parallel edges: compare multisets of (s, r, w) (rare: deduplicate=False only)
            sym = _is_symmetric(s, r, w if w is not None else np.ones(s.shape[0]), num_nodes)
        else:  # the CSR equals its transpose: same row pointers, columns and (close) values
            sym = bool(np.array_equal(tindptr, indptr) and np.array_equal(tcols, s)
                       and (w is None or _allclose_permuted(w, tperm)))
        del tcols
        num_edges = s.shape[0]
        # cast on the host and put on the device: an eager jnp.asarray with a cast, or jnp.ones, compiles a
        # program per shape
        senders = _to_device(s, np.int32)
        del s
        receivers = _to_device(r, np.int32)
        del r
        fdtype = jnp.result_type(float)  # float64 under jax_enable_x64
        weights = _to_device(np.ones((num_edges,), fdtype) if w is None else w, fdtype)
        del w
        perm = _to_device(tperm, np.int32)
        del tperm
        ip = _to_device(indptr, np.int32)
        _TRUSTED.on = True  # ids were range-checked above: skip __post_init__'s host copy of every id
        try:
            return cls(senders=senders, receivers=receivers, weights=weights, num_nodes=num_nodes,
                       symmetric=sym, indptr=ip, transpose_perm=perm,
                       transpose_indptr=ip if sym else _to_device(tindptr, np.int32))
        finally:
            _TRUSTED.on = False

    @classmethod
    def from_scipy(cls, matrix, **kwargs) -> "Graph":
        """Builds a graph from a square scipy sparse (or dense) matrix with ``A[r, s]`` = weight of s -> r.

        Keyword arguments are passed to :meth:`from_edge_index` (default: symmetrize, deduplicate, drop loops;
        pass ``symmetrize=False`` to keep the direction).
        """
        import scipy.sparse as sp

        a = sp.coo_matrix(matrix)
        a.sum_duplicates()  # scipy semantics: repeated (row, col) entries add up to the matrix entry
        if a.shape[0] != a.shape[1]:
            raise ValueError(f"adjacency must be square; got {a.shape}")
        nz = a.data != 0
        ei = np.stack([a.col[nz], a.row[nz]])
        return cls.from_edge_index(ei, a.shape[0], weights=a.data[nz], **kwargs)

    @classmethod
    def from_networkx(cls, g, nodelist=None, weight: str | None = None, **kwargs) -> "Graph":
        """Builds a graph from a networkx (Di)Graph; node i of the result is ``nodelist[i]``.

        Args:
            g: networkx graph. Undirected graphs are symmetrized; directed ones keep direction unless
                ``symmetrize=True`` is passed.
            nodelist: node order (default ``list(g.nodes)``): the id -> index map is explicit.
            weight: edge attribute to use as weight (default unweighted).
        """
        nodes = list(g.nodes) if nodelist is None else list(nodelist)
        index = {v: i for i, v in enumerate(nodes)}
        if len(index) != len(nodes):
            raise ValueError("nodelist has repeated nodes")
        edges = list(g.edges(data=True))
        try:
            ei = np.array([[index[u] for u, _, _ in edges], [index[v] for _, v, _ in edges]],
                          dtype=np.int64).reshape(2, -1)
        except KeyError as err:
            raise ValueError(f"edge endpoint {err.args[0]!r} is not in nodelist") from None
        w = None if weight is None else np.array([d.get(weight, 1.0) for _, _, d in edges])
        kwargs.setdefault("symmetrize", not g.is_directed())
        return cls.from_edge_index(ei, len(nodes), weights=w, **kwargs)

    # ------------------------------------------------------------------ conversions
    def to_jraph(self, nodes=None):
        """Returns a ``jraph.GraphsTuple`` with the raw weights as ``edges``."""
        import jraph

        return jraph.GraphsTuple(
            nodes=nodes, edges=self.weights, senders=self.senders, receivers=self.receivers,
            n_node=self.n_node, n_edge=jnp.asarray([self.num_edges], dtype=jnp.int32), globals=None)

    @classmethod
    def from_jraph(cls, gt, **kwargs) -> "Graph":
        """Builds a Graph from a single-graph ``jraph.GraphsTuple`` (``edges`` used as weights if 1-D)."""
        n = int(np.asarray(gt.n_node).sum())
        w = None
        if gt.edges is not None and np.ndim(gt.edges) == 1:
            w = np.asarray(gt.edges)
        kwargs.setdefault("symmetrize", False)
        kwargs.setdefault("deduplicate", False)
        kwargs.setdefault("self_loops", "keep")
        return cls.from_edge_index(np.stack([np.asarray(gt.senders), np.asarray(gt.receivers)]), n,
                                   weights=w, **kwargs)

    def to_scipy(self, normalization: Normalization = "none"):
        """Returns ``Ahat`` as a scipy CSR matrix (float64), ``Ahat[r, s]`` for edge s -> r."""
        import scipy.sparse as sp

        w = np.asarray(edge_values(self, normalization), dtype=np.float64)
        return sp.csr_matrix((w, (np.asarray(self.receivers), np.asarray(self.senders))),
                             shape=(self.num_nodes, self.num_nodes))

    def to_dense(self, normalization: Normalization = "none") -> jax.Array:
        """Returns ``Ahat`` as a dense (n, n) array. Only for small graphs."""
        w = edge_values(self, normalization)
        return jnp.zeros((self.num_nodes, self.num_nodes), w.dtype).at[self.receivers, self.senders].add(w)

    # ------------------------------------------------------------- the graph protocol (jaxclp.protocol)
    has_edge_list = True

    @property
    def real_rows(self) -> jax.Array | None:
        """:attr:`real`: (n,) bool, False on padding nodes; None when every node is real."""
        return self.real

    @property
    def real_nodes(self) -> int:
        """The number of real nodes (on the host): ``num_nodes`` unless :attr:`real` marks padding nodes."""
        return self.num_nodes if self.real is None else int(np.count_nonzero(np.asarray(self.real)))

    def to_internal(self, x: jax.Array) -> jax.Array:
        """The internal order is the user's (:mod:`jaxclp.protocol`): ``x`` itself, with the rows of padding nodes
        zeroed where :attr:`real` marks some (on the host for arrays on the CPU: no program of its own)."""
        if self.real is None:
            return x
        if cpu_resident(x, self.real):
            host = np.asarray(x)
            keep = np.asarray(self.real).reshape((-1,) + (1,) * (host.ndim - 1))
            return jax.device_put(np.where(keep, host, np.zeros((), host.dtype)))
        keep = self.real.reshape((-1,) + (1,) * (jnp.ndim(x) - 1))
        return jnp.where(keep, x, jnp.zeros((), jnp.result_type(x)))

    def from_internal(self, x: jax.Array, axis: int = 0) -> jax.Array:
        """``x`` itself (:mod:`jaxclp.protocol`)."""
        return x

    def edge_values(self, normalization: Normalization = "sym") -> jax.Array:
        """(m,) :func:`edge_values` of this graph."""
        return edge_values(self, normalization)

    def spmm(self, values: jax.Array, x: jax.Array) -> jax.Array:
        """:func:`spmm` on this graph."""
        return spmm(self, values, x)

    def spmm_transpose(self, values: jax.Array, x: jax.Array) -> jax.Array:
        """:func:`spmm_transpose` on this graph."""
        return spmm_transpose(self, values, x)

    def spmm_linear(self, values: jax.Array, x: jax.Array) -> jax.Array:
        """``Ahat @ x`` by gather + sorted ``segment_sum``: linear-transposable (the CSR kernel's custom VJP is
        not), for ``jax.lax.custom_linear_solve`` and GMRES."""
        msg = values.reshape(values.shape + (1,) * (x.ndim - values.ndim)) * x[self.senders]
        return jax.ops.segment_sum(msg, self.receivers, self.num_nodes, indices_are_sorted=True)

    def factored_matvec(self, values, left, right, x) -> jax.Array:
        """``left * (Ahat @ (right * x))``, (n, K). On CPU with the compiled kernel ONE fused operation
        (:func:`jaxclp.sparse.factored_matmul`: scalings and CSR product in one pass)."""
        if values.ndim == 1 and x.ndim == 2 and left.shape == x.shape == right.shape and jnp.issubdtype(
                x.dtype, jnp.floating):
            ip = self.indptr if self.indptr is not None else row_pointers(self.receivers, self.num_nodes)
            dtype = jnp.result_type(values.dtype, left.dtype, right.dtype, x.dtype)
            return factored_matmul(values.astype(dtype), self.senders, self.receivers, ip, left.astype(dtype),
                                   right.astype(dtype), x.astype(dtype))
        return left * spmm(self, values, right * x)

    def factored_rmatvec(self, values, left, right, x) -> jax.Array:
        """``right * (Ahat.T @ (left * x))``, (n, K): with the transposed CSR the constructors store
        (:func:`transpose_structure`) the same fused operation on ``Ahat.T`` (values permuted by one (m,)
        gather, no (m, K) temporary); without it ``right * spmm_transpose(left * x)``."""
        t = transpose_structure(self)
        if (t is not None and values.ndim == 1 and x.ndim == 2 and left.shape == x.shape == right.shape
                and jnp.issubdtype(x.dtype, jnp.floating)):
            perm, cols, rows, tindptr = t
            dtype = jnp.result_type(values.dtype, left.dtype, right.dtype, x.dtype)
            return factored_matmul(permute_edges(values.astype(dtype), perm), cols, rows, tindptr,
                                   right.astype(dtype), left.astype(dtype), x.astype(dtype))
        return right * spmm_transpose(self, values, left * x)

    def self_loops(self, values: jax.Array) -> jax.Array:
        """(n,) the diagonal of ``Ahat``: self-loop values summed per node."""
        loop = jnp.where(self.senders == self.receivers, values, 0.0)
        return jax.ops.segment_sum(loop, self.receivers, self.num_nodes, indices_are_sorted=True)

    def edge_matrix(self, values, left, right) -> jax.Array:
        """(m, K) per-class edge values ``values[e] * left[r_e, k] * right[s_e, k]``."""
        return values[:, None] * left[self.receivers] * right[self.senders]

    def edge_ends(self, x: jax.Array, *, loops: bool = True) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(x[receivers], x[senders], real)``: (m, ...) rows of each edge's ends; ``real`` (m,) bool, False on
        self-loops when ``loops`` is False (a Graph has no padding edges)."""
        real = jnp.ones(self.senders.shape, bool) if loops else self.senders != self.receivers
        return x[self.receivers], x[self.senders], real

    def in_degree(self) -> jax.Array:
        """(n,) weighted in-degree, sum of weights of edges into each node."""
        return jax.ops.segment_sum(self.weights, self.receivers, self.num_nodes, indices_are_sorted=True)

    def out_degree(self) -> jax.Array:
        """(n,) weighted out-degree."""
        return jax.ops.segment_sum(self.weights, self.senders, self.num_nodes)


def _counting_sort(rows, cols, data, n: int):
    """Stable O(m + n) bucket sort of COO entries by row (scipy's C++ ``coo_tocsr``, no duplicate summing).

    Returns ``(indptr, cols in row order, data in row order)``; entries of one row keep their input order.
    """
    rows, cols, data = (np.ascontiguousarray(a) for a in (rows, cols, data))
    m = rows.shape[0]
    idx = rows.dtype
    indptr = np.empty(n + 1, dtype=idx)
    out_cols = np.empty(m, dtype=idx)
    out_data = np.empty(m, dtype=data.dtype)
    if m == 0:
        indptr[:] = 0
        return indptr, out_cols, out_data
    try:
        from scipy.sparse import _sparsetools

        _sparsetools.coo_tocsr(n, n, m, rows, cols, data, indptr, out_cols, out_data)
    except (ImportError, AttributeError, TypeError, ValueError):  # pragma: no cover - scipy internals moved
        order = np.argsort(rows, kind="stable")
        out_cols[:] = cols[order]
        out_data[:] = data[order]
        indptr[0] = 0
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, out_cols, out_data


def _expand_rows(indptr):
    """(m,) sorted row index of every entry, from (n + 1,) row pointers."""
    n = indptr.shape[0] - 1
    return np.repeat(np.arange(n, dtype=indptr.dtype), np.diff(indptr))


def _allclose_permuted(w, perm, chunk: int = 1 << 20) -> bool:
    """``np.allclose(w[perm], w)`` in blocks of ``chunk`` edges (no full-size temporaries)."""
    for i in range(0, w.shape[0], chunk):
        if not np.allclose(w[perm[i:i + chunk]], w[i:i + chunk]):
            return False
    return True


def _sort_rows(indptr, cols, data) -> None:
    """Sorts the column indices within every CSR row in place, ``data`` alongside (not stable)."""
    n = indptr.shape[0] - 1
    try:
        from scipy.sparse import _sparsetools

        _sparsetools.csr_sort_indices(n, indptr, cols, data)
    except (ImportError, AttributeError, TypeError, ValueError):  # pragma: no cover - scipy internals moved
        order = np.lexsort((cols, _expand_rows(indptr)))
        cols[:] = cols[order]
        data[:] = data[order]


def _is_symmetric(s, r, w, n) -> bool:
    if s.size == 0:
        return True
    fwd = np.lexsort((w, s, r))  # weight in the key: parallel edges with different weights
    bwd = np.lexsort((w, r, s))
    return bool(np.array_equal(s[fwd], r[bwd]) and np.array_equal(r[fwd], s[bwd])
                and np.allclose(w[fwd], w[bwd]))


def _to_device(x, dtype) -> jax.Array:
    """``x`` cast to ``dtype`` on the host and put on the default device (no compiled program)."""
    return jax.device_put(np.asarray(x, dtype=dtype))


def cpu_resident(*xs) -> bool:
    """True when every ``x`` is a host (numpy) array or a concrete jax array held by the CPU alone.

    Glue on such arrays (an index, a copy into zeros) runs in numpy: reading a CPU array on the host copies
    nothing, and numpy compiles no program per shape as an eager or jitted ``jnp`` operation does. On an
    accelerator the glue stays on the device (no round trip through the host).
    """
    for x in xs:
        if isinstance(x, jax.core.Tracer):
            return False
        if isinstance(x, jax.Array) and not (x.is_fully_addressable and len(x.devices()) == 1
                                             and next(iter(x.devices())).platform == "cpu"):
            return False
    return True


def _safe_inv(x):
    return jnp.where(x > 0, 1.0 / jnp.where(x > 0, x, 1.0), 0.0)


def check_normalization(normalization: str) -> None:
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS}; got {normalization!r}")


def edge_values(graph: Graph, normalization: Normalization = "sym") -> jax.Array:
    """Entries of the normalized adjacency ``Ahat`` on the edges ("sym" and "row": one jitted program for both;
    "none": the graph's weights themselves).

    ``"sym"``: ``A[r,s] / sqrt(deg_in(r) deg_out(s))``; ``"row"``: ``A[r,s] / deg_in(r)`` (rows of Ahat sum
    to 1 for nodes with in-edges); ``"none"``: the raw weights. Degrees are weighted; a zero degree gives a
    zero row/column, never a NaN.

    Returns:
        (m,) values aligned with ``graph.senders`` / ``graph.receivers``.
    """
    check_normalization(normalization)
    if normalization == "none":  # nothing to compute
        return graph.weights
    return _edge_values(graph, normalization_code(normalization))


def normalization_code(normalization: Normalization) -> np.int32:
    """The index of ``normalization`` in :data:`NORMALIZATIONS`, the argument of :func:`coded_edge_values`."""
    check_normalization(normalization)
    return np.int32(NORMALIZATIONS.index(normalization))


@jax.jit
def _edge_values(graph: Graph, code) -> jax.Array:
    return coded_edge_values(graph, code)


def coded_edge_values(graph: Graph, code) -> jax.Array:
    """:func:`edge_values` with the normalization given by its (traced) :func:`normalization_code`, so that one
    program serves every normalization (each is computed, then one is selected: the values are those of the
    normalization alone)."""
    w = graph.weights
    inv_in = _safe_inv(graph.in_degree())
    row = w * inv_in[graph.receivers]
    sym = w * jnp.sqrt(inv_in)[graph.receivers] * jnp.sqrt(_safe_inv(graph.out_degree()))[graph.senders]
    return jnp.where(code == NORMALIZATIONS.index("none"), w,
                     jnp.where(code == NORMALIZATIONS.index("row"), row, sym))


def spmm(graph: Graph, values: jax.Array, x: jax.Array) -> jax.Array:
    """Sparse product ``Ahat @ x``: ``out[r] = sum_{e: s->r} values[e] * x[s]``.

    For one value per edge and an (n, K) block with K >= ``jaxclp.sparse.CSR_MIN_COLUMNS`` this runs
    :func:`jaxclp.sparse.csr_matmul` (the C++ kernel on CPU where built, a fused segment sum on CUDA, else
    XLA's CSR kernel; custom VJP,
    fast under vmap, but not linear-transposable, e.g. inside ``jax.scipy.sparse.linalg.gmres``); vectors,
    K < 3 and per-class (m, K) values use a gather and a sorted ``segment_sum`` (transposable).
    :meth:`jaxclp.operator.FactoredOperator.matvec` uses the fused kernel for every K.

    Args:
        graph: the graph (edges sorted by receiver).
        values: (m,) edge values (e.g. from :func:`edge_values`) or (m, K) per-class values.
        x: (n,) or (n, K).

    Returns:
        Array of the shape of ``x``.
    """
    if (values.ndim == 1 and x.ndim == 2 and x.shape[1] >= CSR_MIN_COLUMNS
            and jnp.issubdtype(x.dtype, jnp.floating)):
        dtype = jnp.result_type(values.dtype, x.dtype)
        indptr = graph.indptr if graph.indptr is not None else row_pointers(graph.receivers, graph.num_nodes)
        return csr_matmul(values.astype(dtype), graph.senders, graph.receivers, indptr, x.astype(dtype))
    xs = x[graph.senders]
    v = values if (values.ndim == xs.ndim) else values.reshape(values.shape + (1,) * (xs.ndim - values.ndim))
    return jax.ops.segment_sum(v * xs, graph.receivers, graph.num_nodes, indices_are_sorted=True)


def transpose_structure(graph: Graph):
    """The CSR of ``Ahat.T`` as stored by the constructors, or None for a Graph built without it.

    Returns:
        ``(perm, indices, rows, indptr)``: (m,) edge ids in (sender, receiver) order (the transposed values
        are ``values[perm]``), (m,) their receivers (the column indices of ``Ahat.T``), (m,) their senders
        (sorted: the row of each entry) and (n + 1,) row pointers. For a symmetric graph the transposed
        structure equals the graph's own, so ``indices`` and ``rows`` are ``senders`` and ``receivers``
        (nothing gathered).
    """
    perm = getattr(graph, "transpose_perm", None)
    if perm is None or getattr(graph, "transpose_indptr", None) is None:
        return None
    if graph.symmetric:
        return perm, graph.senders, graph.receivers, graph.transpose_indptr
    # (the senders are only read by the XLA path for K < 3 and by the backward pass; unused, XLA drops them)
    return perm, permute_edges(graph.receivers, perm), permute_edges(graph.senders, perm), graph.transpose_indptr


def permute_edges(a: jax.Array, perm: jax.Array) -> jax.Array:
    """``a[perm]`` along the first axis for an in-range permutation (``mode="clip"``: no out-of-bounds mask,
    ~15% faster than the default gather on CPU; differentiable)."""
    return jnp.take(a, perm, axis=0, mode="clip")


def spmm_transpose(graph: Graph, values: jax.Array, x: jax.Array) -> jax.Array:
    """Sparse product ``Ahat.T @ x``: ``out[s] = sum_{e: s->r} values[e] * x[r]``.

    With the transposed CSR the constructors store (``graph.transpose_perm``), one value per edge and an
    (n, K) block with K >= ``jaxclp.sparse.CSR_MIN_COLUMNS``, this is :func:`jaxclp.sparse.csr_matmul` on
    ``Ahat.T`` (values permuted by one (m,) gather: no (m, K) temporary; differentiable w.r.t. ``values``
    and ``x``, not linear-transposable), exactly as :func:`spmm`. Vectors, K < 3, per-class (m, K) values
    and graphs built without the transposed CSR use a gather and a ``segment_sum`` by sender.

    Args:
        graph: the graph.
        values: (m,) edge values or (m, K) per-class values.
        x: (n,) or (n, K).

    Returns:
        Array of the shape of ``x``.
    """
    t = transpose_structure(graph)
    if (t is not None and values.ndim == 1 and x.ndim == 2 and x.shape[1] >= CSR_MIN_COLUMNS
            and jnp.issubdtype(x.dtype, jnp.floating)):
        perm, cols, rows, tindptr = t
        dtype = jnp.result_type(values.dtype, x.dtype)
        return csr_matmul(permute_edges(values.astype(dtype), perm), cols, rows, tindptr, x.astype(dtype))
    xr = x[graph.receivers]
    v = values if (values.ndim == xr.ndim) else values.reshape(values.shape + (1,) * (xr.ndim - values.ndim))
    return jax.ops.segment_sum(v * xr, graph.senders, graph.num_nodes)
