"""The node-sharded graph: its arrays on a device mesh, the user <-> internal order, degrees and edge values.

A :class:`ShardedGraph` splits the (optionally reordered, :mod:`jaxclp.partition`) nodes of a
:class:`jaxclp.graph.Graph` into ``P`` blocks, one per device of a mesh axis, each padded to ``b`` rows
(:mod:`jaxclp.halo_plan`). Node-indexed arrays live in the *internal order*: shape ``(P * b, ...)``, row ``p * b + i``
is the ``i``-th node of shard ``p``, sharded by rows over the axis (``NamedSharding(mesh, P(axis))``); padding
rows are isolated nodes and stay zero. :func:`to_internal` and :func:`from_internal` convert from and to the
user's order ``(n, ...)``: reordering and padding happen only there, at the boundary. Products run the halo
exchange of :mod:`jaxclp.halo`.

The stages are :mod:`jaxclp`'s own, run through the graph protocol (:mod:`jaxclp.protocol`) that
:class:`ShardedGraph` implements; :mod:`jaxclp.sharded_clp` holds them with a named halo ``exchange``. Everything after
:func:`shard_graph` is jit-able; outputs keep their row sharding and are never gathered.

Many processes (``jax.distributed.initialize``): the mesh spans every process's devices and the same calls
run unchanged (``tests/scale/test_distributed.py``: two processes, two host devices each, gloo CPU collectives).
:func:`shard_graph` then needs the whole graph on every host; :func:`shard_graph_local` builds the same
:class:`ShardedGraph` from each process's own edges (the user order, equal row blocks), exchanging only the
halo read lists.
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as PSpec

from jaxclp.graph import Graph, Normalization, _counting_sort, check_normalization
from jaxclp.halo import Exchange, _check_exchange, _check_rows, _gather, _smap, _spmm, _spmm_linear, _spmm_t
from jaxclp.partition import Balance, Partition
from jaxclp.halo_plan import Plan, _halo_tables, build_plan



# ============================================================================ the device-side graph
def _local_csr(receivers: np.ndarray, senders: np.ndarray, b: int, slots: int):
    """The CSR tables of one shard's edges (host, numpy): ``(indptr (b + 1,), t_perm (E,), t_indptr
    (b + slots + 1,))``, int32.

    ``receivers`` are sorted (padding edges last, on row b - 1, weight 0), so ``indptr`` is their row pointer
    array; the transpose's CSR is the edges in stable ``senders`` order (``t_perm``, one O(E + b + slots)
    counting sort; padding edges, sender 0, join row 0 with weight 0). Senders need not be sorted within a
    row: the fused kernel and the XLA path (``jax.experimental.sparse`` lowers to a scatter-add) sum a row's
    entries in any order."""
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

    def edge_ends(self, x: jax.Array, *, loops: bool = True) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(x[r_e], x[s_e], real)`` as (P, E, ...) arrays (senders read through the halo exchange); ``real`` is
        False on padding edges and, when ``loops`` is False, on self-loops (a local sender index equal to the
        receiver row; halo slots are >= b)."""
        exchange = self.exchange

        def local(loc, count, xl):
            real = jnp.arange(loc["receivers"].shape[0]) < count[0]
            if not loops:
                real = real & (loc["senders"] != loc["receivers"])
            return xl[loc["receivers"]][None], _gather(self, loc, xl, exchange)[None], real[None]

        return _smap(self, local, self.num_edges, x)


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
