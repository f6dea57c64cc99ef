"""Halo exchanges and the sharded sparse products, run per shard inside :func:`jax.shard_map`.

One product:

1. halo exchange: shard ``p`` sends shard ``q`` exactly the rows of its block that ``q``'s edges read (lists
   precomputed on the host by :func:`jaxclp.halo_plan.build_plan`). ``exchange="ppermute"`` (the default) runs one
   ``jax.lax.ppermute`` round per shard offset ``d`` (``p -> p + d mod P``) that has a nonempty list, each
   padded to the longest list of that offset ``h_d``: a banded order (RCM, BFS) needs few rounds;
   ``exchange="all_to_all"`` moves every list padded to the longest one ``h`` in one ``jax.lax.all_to_all``;
   ``exchange="allgather"`` gathers the whole state instead (the simple reference, kept for tests);
2. a local CSR product: the shard's edges as a (b, b + S) CSR (rows = the local receivers, columns =
   ``[local rows | halo slots]``, row pointers ``ShardedGraph.indptr`` precomputed) applied to
   ``[x_local | halo]`` (b + S, K) by :func:`jaxclp.sparse.csr_matmul`. On CPU (the fused C++ kernel, or
   with ``JAXCLP_NO_FFI=1`` XLA's own CSR kernel) no (E, K) array of the senders' rows is formed: the extra
   memory of a product is the (b + S, K) block, per node, not per edge (``tests/scale/test_shard.py`` checks XLA's
   temporary memory). On CUDA it is the gather + sorted ``segment_sum`` that XLA:GPU fuses into one
   scatter-add without temporaries (measured unsharded: ``benchmarks/results/gpu_spmm.md``); on TPU the XLA
   path is ``jax.experimental.sparse``'s lowering (not measured).

The transpose product runs the same exchange backwards: the local transpose's CSR (the edges in sender order,
``ShardedGraph.t_perm`` / ``t_indptr``) applied to the local block gives ``[local | halo]`` sums (b + S, K), the
halo part returned to its owners by the reverse exchange and added there. The all-gather reference and
per-class (P, E, K) edge values keep the gather + ``segment_sum`` form.

Communication per product and shard: ``sum_d h_d * K`` values sent and received (``ppermute``),
``(P - 1) * h * K`` (``all_to_all``), instead of ``(P - 1) * b * K`` for the all-gather.

Every function takes the sharded graph ``sg`` (:class:`jaxclp.sharded_graph.ShardedGraph`) as data.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Literal

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as PSpec

from jaxclp.sparse import csr_matmul

if TYPE_CHECKING:  # annotations only: the sharded graph module imports this one
    from jaxclp.sharded_graph import ShardedGraph

Exchange = Literal["ppermute", "all_to_all", "allgather"]
EXCHANGES = ("ppermute", "all_to_all", "allgather")


def _check_rows(name, x, rows):
    if not hasattr(x, "shape") or x.ndim < 1 or x.shape[0] != rows:
        raise ValueError(f"{name} must have {rows} rows (shape ({rows}, ...)); got shape "
                         f"{getattr(x, 'shape', None)}")


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
                         f"jaxclp.sharded_graph.edge_values; got {values.shape}")


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
