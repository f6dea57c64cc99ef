"""Alternative JAX formulations of one CLP propagation step, standalone so they can be ported to jaxclp.

All compute ``out = left * (Ahat @ (right * x))`` for an (n, K) block (the factored CLP operator; LP is
``left = right = 1``) from the edge list sorted by receiver, as :class:`jaxclp.Graph` stores it. Each
formulation is a pair ``prepare(senders, receivers, values, n) -> aux`` (host side, once per graph; ``aux`` is
a pytree of arrays / static ints) and ``apply(aux, left, right, x) -> out`` (pure, jit-able). The throughput
benchmark checks every one against jaxclp's ``FactoredOperator.matvec`` and times it.

What the measurements (``results/throughput.md``) showed on XLA:CPU (jax 0.10.2):

* XLA's gather of ``x[senders]`` with rows of K float32 is fast only while a row is at most 16 bytes
  (K <= 4: ~0.4 ns per element); from K = 5 on it falls to a per-element path (~3 ns per element), and when
  the gather is fused with the following multiply the fast path is lost as well.
* The sorted scatter-add (``segment_sum(..., indices_are_sorted=True)``) costs ~2 ns per element for odd K
  and is cheaper per element for K = 4, 8, 16.

Hence the candidates: split the classes into chunks of <= 4 columns and keep each chunk's gather as its own
(unfused) op (:func:`chunked_apply`); pack two classes into one complex64 (:func:`complex_apply`); degree-
bucketed ELL, which replaces the scatter by a dense reduction (:func:`ell_apply`); and jax.experimental.sparse
BCSR/BCOO. See the markdown for which one wins at which K.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


# ------------------------------------------------------------------------------------------- 0. reference
def reference_prepare(senders, receivers, values, n):
    return {"s": jnp.asarray(senders), "r": jnp.asarray(receivers), "v": jnp.asarray(values)}


def reference_apply(aux, left, right, x):
    """What ``jaxclp.operator.FactoredOperator.matvec`` does: gather (m, K), multiply, sorted segment_sum."""
    y = right * x
    e = aux["v"][:, None] * y[aux["s"]]
    return left * jax.ops.segment_sum(e, aux["r"], x.shape[0], indices_are_sorted=True)


# ------------------------------------------------------------------------------------------- 1. chunked
def chunked_apply(aux, left, right, x, chunk: int = 4):
    """Classes in chunks of <= ``chunk`` columns: each chunk's gather is its own op (``optimization_barrier``
    keeps XLA from fusing it into the multiply, which would drop the fast <=16-byte row gather), then one
    sorted segment_sum per chunk."""
    y = right * x
    k = y.shape[1]
    outs = []
    for k0 in range(0, k, chunk):
        g = jax.lax.optimization_barrier(y[:, k0:k0 + chunk].at[aux["s"]].get(mode="promise_in_bounds"))
        outs.append(jax.ops.segment_sum(aux["v"][:, None] * g, aux["r"], x.shape[0], indices_are_sorted=True))
    return left * jnp.concatenate(outs, axis=1)


def chunked_nobarrier_apply(aux, left, right, x, chunk: int = 4):
    """As :func:`chunked_apply` without the optimization barrier (XLA fuses gather and multiply)."""
    y = right * x
    k = y.shape[1]
    outs = []
    for k0 in range(0, k, chunk):
        g = y[:, k0:k0 + chunk].at[aux["s"]].get(mode="promise_in_bounds")
        outs.append(jax.ops.segment_sum(aux["v"][:, None] * g, aux["r"], x.shape[0], indices_are_sorted=True))
    return left * jnp.concatenate(outs, axis=1)


# ------------------------------------------------------------------------------------------- 2. complex
def complex_apply(aux, left, right, x):
    """Two classes per complex64 element: halves the number of gathered and scattered elements."""
    y = right * x
    n, k = y.shape
    h = (k + 1) // 2
    if 2 * h != k:
        y = jnp.pad(y, ((0, 0), (0, 1)))
    yc = jax.lax.complex(y[:, :h], y[:, h:])
    g = jax.lax.optimization_barrier(yc.at[aux["s"]].get(mode="promise_in_bounds"))
    z = jax.ops.segment_sum(aux["v"][:, None] * g, aux["r"], x.shape[0], indices_are_sorted=True)
    return left * jnp.concatenate([z.real, z.imag], axis=1)[:, :k]


# ------------------------------------------------------------------------------------------- 3. bucketed ELL
class EllBucket(NamedTuple):
    rows: jax.Array  # (nb,) receiver of each padded row
    cols: jax.Array  # (nb, width) senders, padding -> 0
    vals: jax.Array  # (nb, width) values, padding -> 0


def ell_prepare(senders, receivers, values, n, widths=(2, 4, 8, 16, 32, 64, 128)):
    """Rows grouped by in-degree into buckets of width ``w`` (a row of degree d goes to the smallest w >= d;
    rows longer than the largest width are split into several padded rows). Padding wastes < 2x, usually
    ~1.3x, on Poisson degrees."""
    s = np.asarray(senders)
    r = np.asarray(receivers)
    v = np.asarray(values)
    indptr = np.searchsorted(r, np.arange(n + 1))
    deg = np.diff(indptr)
    # split long rows into pieces of at most max width
    wmax = widths[-1]
    pieces_start, pieces_len, pieces_row = [], [], []
    long = deg > wmax
    starts = indptr[:-1]
    rows_all = np.arange(n)
    short = ~long & (deg > 0)
    pieces_start.append(starts[short])
    pieces_len.append(deg[short])
    pieces_row.append(rows_all[short])
    for row in rows_all[long]:
        for off in range(0, deg[row], wmax):
            pieces_start.append(np.array([starts[row] + off]))
            pieces_len.append(np.array([min(wmax, deg[row] - off)]))
            pieces_row.append(np.array([row]))
    ps, pl, pr = (np.concatenate(a) for a in (pieces_start, pieces_len, pieces_row))
    buckets = []
    lo = 0
    for w in widths:
        sel = (pl > lo) & (pl <= w)
        lo = w
        if not sel.any():
            continue
        bs, bl, br = ps[sel], pl[sel], pr[sel]
        idx = bs[:, None] + np.arange(w)[None, :]
        mask = np.arange(w)[None, :] < bl[:, None]
        idx = np.where(mask, idx, 0)
        cols = np.where(mask, s[idx], 0).astype(np.int32)
        vals = np.where(mask, v[idx], 0).astype(v.dtype)
        buckets.append(EllBucket(jnp.asarray(br.astype(np.int32)), jnp.asarray(cols), jnp.asarray(vals)))
    return {"buckets": tuple(buckets)}


def ell_apply(aux, left, right, x, chunk: int = 4):
    """Bucketed ELL: per bucket, gather (nb, w, <=4) chunks and reduce over w (a dense reduction, no
    per-edge scatter); the nb row results are scattered once (one element per padded row, not per edge)."""
    y = right * x
    n, k = y.shape
    out = jnp.zeros((n, k), y.dtype)
    for b in aux["buckets"]:
        parts = []
        for k0 in range(0, k, chunk):
            g = jax.lax.optimization_barrier(y[:, k0:k0 + chunk].at[b.cols].get(mode="promise_in_bounds"))
            parts.append(jnp.einsum("bw,bwk->bk", b.vals, g))
        out = out.at[b.rows].add(jnp.concatenate(parts, axis=1), mode="promise_in_bounds")
    return left * out


# ------------------------------------------------------------------------------------------- 4. transposed
def transposed_apply(aux, left, right, x):
    """Class-major: one 1-D gather and one 1-D sorted segment_sum per class (vmapped over K)."""
    y = (right * x).T

    def one(col):
        g = col.at[aux["s"]].get(mode="promise_in_bounds")
        return jax.ops.segment_sum(aux["v"] * g, aux["r"], x.shape[0], indices_are_sorted=True)

    return left * jax.vmap(one)(y).T


# ------------------------------------------------------------------------------------------- 5. experimental.sparse
def bcsr_prepare(senders, receivers, values, n):
    from jax.experimental import sparse as jsp

    s = np.asarray(senders)
    r = np.asarray(receivers)
    indptr = np.searchsorted(r, np.arange(n + 1)).astype(np.int32)
    mat = jsp.BCSR((jnp.asarray(values), jnp.asarray(s.astype(np.int32)), jnp.asarray(indptr)), shape=(n, n),
                   indices_sorted=True, unique_indices=True)
    return {"mat": mat}


def bcsr_apply(aux, left, right, x):
    return left * (aux["mat"] @ (right * x))


def bcsr_padded_apply(aux, left, right, x, multiple: int = 8):
    """BCSR @ dense with the class dimension zero-padded to a multiple of ``multiple``.

    On CPU, ``BCSR @ dense`` lowers to the native ``cpu_csr_sparse_dense_ffi`` kernel (when data and rhs have
    the same dtype and indices/indptr are both int32). That kernel is vectorized over the dense columns only
    when their number is a multiple of the SIMD width (8 float32 with AVX), and falls to a slow scalar path
    otherwise (K = 1..6: slower than the segment_sum formulation). Padding K up to 8 makes it the fastest
    pure-JAX formulation measured here (single-threaded).
    """
    y = right * x
    k = y.shape[1]
    kp = -(-k // multiple) * multiple
    if kp != k:
        y = jnp.pad(y, ((0, 0), (0, kp - k)))
    return left * (aux["mat"] @ y)[:, :k]


def bcsr_chunked_apply(aux, left, right, x, chunk: int = 8):
    """BCSR @ dense on column chunks of width ``chunk`` (padded): keeps the gathered rows in cache for
    large K."""
    y = right * x
    k = y.shape[1]
    kp = -(-k // chunk) * chunk
    if kp != k:
        y = jnp.pad(y, ((0, 0), (0, kp - k)))
    outs = [aux["mat"] @ y[:, c:c + chunk] for c in range(0, kp, chunk)]
    return left * jnp.concatenate(outs, axis=1)[:, :k]


def bcsr_rowsplit_prepare(senders, receivers, values, n, parts: int = 2):
    """``parts`` BCSR matrices over contiguous row blocks (to test whether XLA runs them concurrently)."""
    from jax.experimental import sparse as jsp

    s = np.asarray(senders)
    r = np.asarray(receivers)
    v = np.asarray(values)
    indptr = np.searchsorted(r, np.arange(n + 1))
    rows = [n * i // parts for i in range(parts + 1)]
    mats = []
    for p in range(parts):
        a, b = indptr[rows[p]], indptr[rows[p + 1]]
        ip = (indptr[rows[p]:rows[p + 1] + 1] - a).astype(np.int32)
        mats.append(jsp.BCSR((jnp.asarray(v[a:b]), jnp.asarray(s[a:b].astype(np.int32)), jnp.asarray(ip)),
                             shape=(rows[p + 1] - rows[p], n), indices_sorted=True, unique_indices=True))
    return {"mats": tuple(mats)}


def bcsr_rowsplit_apply(aux, left, right, x, multiple: int = 8):
    y = right * x
    k = y.shape[1]
    kp = -(-k // multiple) * multiple
    if kp != k:
        y = jnp.pad(y, ((0, 0), (0, kp - k)))
    return left * jnp.concatenate([mat @ y for mat in aux["mats"]], axis=0)[:, :k]


def bcoo_prepare(senders, receivers, values, n):
    from jax.experimental import sparse as jsp

    idx = np.stack([np.asarray(receivers), np.asarray(senders)], axis=1).astype(np.int32)
    mat = jsp.BCOO((jnp.asarray(values), jnp.asarray(idx)), shape=(n, n), indices_sorted=True,
                   unique_indices=True)
    return {"mat": mat}


def bcoo_apply(aux, left, right, x):
    return left * (aux["mat"] @ (right * x))


# ------------------------------------------------------------------------------------------- registry
class Formulation(NamedTuple):
    name: str
    prepare: Callable
    apply: Callable
    note: str


def _jit(f):
    return jax.jit(f)


FORMULATIONS = (
    Formulation("reference (jaxclp matvec)", reference_prepare, reference_apply,
                "gather (m,K) fused with the multiply, sorted segment_sum"),
    Formulation("chunked4 + barrier", reference_prepare, functools.partial(chunked_apply, chunk=4),
                "<=4 classes per gather, gather kept unfused"),
    Formulation("chunked2 + barrier", reference_prepare, functools.partial(chunked_apply, chunk=2),
                "<=2 classes per gather"),
    Formulation("chunked4 fused", reference_prepare, functools.partial(chunked_nobarrier_apply, chunk=4),
                "chunks of 4 without the barrier"),
    Formulation("complex64 pairs", reference_prepare, complex_apply, "2 classes per complex element"),
    Formulation("bucketed ELL", ell_prepare, ell_apply, "dense reduction per degree bucket, no per-edge scatter"),
    Formulation("transposed (K,n)", reference_prepare, transposed_apply, "1-D gather + segment_sum per class"),
    Formulation("BCSR, K padded to 8", bcsr_prepare, functools.partial(bcsr_padded_apply, multiple=8),
                "native CPU CSR kernel, vectorized for 8k columns"),
    Formulation("BCSR, K padded to 16", bcsr_prepare, functools.partial(bcsr_padded_apply, multiple=16),
                "as above, 16k columns"),
    Formulation("BCSR pad 8, 2 row blocks", bcsr_rowsplit_prepare, bcsr_rowsplit_apply,
                "two independent BCSR products (are they run concurrently?)"),
    Formulation("BCSR, chunks of 8", bcsr_prepare, functools.partial(bcsr_chunked_apply, chunk=8),
                "one BCSR product per 8 classes"),
    Formulation("BCSR, chunks of 16", bcsr_prepare, functools.partial(bcsr_chunked_apply, chunk=16),
                "one BCSR product per 16 classes"),
    Formulation("jax.experimental.sparse BCSR", bcsr_prepare, bcsr_apply, "BCSR @ dense, K unpadded"),
    Formulation("jax.experimental.sparse BCOO", bcoo_prepare, bcoo_apply, "BCOO @ dense"),
)


# ------------------------------------------------------------------------------------------- 6. port-ready SpMM
# The BCSR kernel falls back to a slow generic lowering under ``jax.vmap`` (batched right-hand side: ~10x
# slower) and under reverse-mode autodiff (its transpose rule). ``csr_spmm`` below keeps the fast kernel in
# both cases: a ``custom_vmap`` rule folds the batch axis into the columns (one wide SpMM), and a
# ``custom_vjp`` applies the transpose as a second CSR matrix (rows = senders). Gradients flow to ``y`` only
# (the edge values are treated as constants, as for a fixed normalized adjacency).
def csr_prepare(senders, receivers, values, n):
    """CSR of Ahat (rows = receivers) and of Ahat^T (rows = senders), int32 indices, for :func:`csr_spmm`."""
    s = np.asarray(senders).astype(np.int64)
    r = np.asarray(receivers).astype(np.int64)
    v = np.asarray(values)
    o = np.lexsort((s, r))
    fwd = (jnp.asarray(v[o]), jnp.asarray(s[o].astype(np.int32)),
           jnp.asarray(np.searchsorted(r[o], np.arange(n + 1)).astype(np.int32)))
    o = np.lexsort((r, s))
    bwd = (jnp.asarray(v[o]), jnp.asarray(r[o].astype(np.int32)),
           jnp.asarray(np.searchsorted(s[o], np.arange(n + 1)).astype(np.int32)))
    return {"fwd": fwd, "bwd": bwd}


def _pad_cols(y, multiple=8):
    k = y.shape[1]
    kp = -(-k // multiple) * multiple
    return (jnp.pad(y, ((0, 0), (0, kp - k))) if kp != k else y), k


@jax.custom_batching.custom_vmap
def _csr_mm(csr, y):
    from jax.experimental import sparse as jsp

    data, indices, indptr = csr
    n = indptr.shape[0] - 1
    yp, k = _pad_cols(y)
    mat = jsp.BCSR((data, indices, indptr), shape=(n, y.shape[0]), indices_sorted=True, unique_indices=True)
    return (mat @ yp)[:, :k]


@_csr_mm.def_vmap
def _csr_mm_vmap(axis_size, in_batched, csr, y):
    csr_b, y_b = in_batched
    if any(jax.tree_util.tree_leaves(csr_b)):  # batched matrices: no folding possible, map sequentially
        ys = y if y_b else jnp.broadcast_to(y, (axis_size, *y.shape))
        return jax.lax.map(lambda a: _csr_mm(*a), (csr, ys)), True
    if not y_b:
        return _csr_mm(csr, y), False
    b, n, k = y.shape
    out = _csr_mm(csr, jnp.moveaxis(y, 0, 1).reshape(n, b * k))
    return jnp.moveaxis(out.reshape(out.shape[0], b, k), 1, 0), True


@jax.custom_vjp
def csr_spmm(aux, y):
    """``Ahat @ y`` for (n, K) ``y`` with the native CPU CSR kernel (K padded to a multiple of 8)."""
    return _csr_mm(aux["fwd"], y)


def _csr_spmm_fwd(aux, y):
    return _csr_mm(aux["fwd"], y), aux


def _csr_spmm_bwd(aux, g):
    zeros = jax.tree_util.tree_map(
        lambda a: np.zeros(a.shape, jax.dtypes.float0) if not jnp.issubdtype(a.dtype, jnp.floating)
        else jnp.zeros_like(a), aux)
    return zeros, _csr_mm(aux["bwd"], g)


csr_spmm.defvjp(_csr_spmm_fwd, _csr_spmm_bwd)


def csr_factored_apply(aux, left, right, x):
    """The factored CLP step with :func:`csr_spmm` (vmappable over x, differentiable in x)."""
    return left * csr_spmm(aux, right * x)


FORMULATIONS = FORMULATIONS + (
    Formulation("csr_spmm (BCSR pad 8, custom_vmap + custom_vjp)", csr_prepare, csr_factored_apply,
                "port-ready: fast under vmap and grad too"),
)
