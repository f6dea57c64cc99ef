"""Fast CSR sparse-dense products for receiver-sorted edge lists.

``csr_matmul`` computes ``out[r] = sum_{e: s->r} values[e] * y[s]`` for an (n, K) block ``y`` with
``jax.experimental.sparse.BCSR @ dense``, which on CPU lowers to XLA's native CSR kernel. That kernel is
vectorized over the dense columns only when their number is a multiple of 8, so ``y`` is zero-padded to a
multiple of 8 columns. Measured in ``benchmarks/results/throughput.md`` (n = 100k, m = 2M, float32): 12 ms vs
62-78 ms for the scatter-based ``segment_sum`` at K = 5, 52 vs 244 ms at K = 40; at K = 2 the padding makes it
slower (17 vs 12 ms), hence :data:`CSR_MIN_COLUMNS`.

Two custom rules keep it fast and correct under transformations:

* ``custom_vmap``: a batch of right-hand sides (e.g. ``solve`` vmapped over alphas, GMRES vmapped over
  classes) is folded into the columns: one wide product instead of the generic batched lowering (~10x slower).
* ``custom_vjp``: the cotangent of ``y`` is the transposed product (a CSR sorted by sender, built in the
  backward pass), and the cotangent of ``values`` is ``sum_k g[r_e, k] * y[s_e, k]``: gradients flow to both.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsp

CSR_MIN_COLUMNS = 3
_PAD = 8


def _pad_cols(y):
    k = y.shape[1]
    kp = -(-k // _PAD) * _PAD
    return (jnp.pad(y, ((0, 0), (0, kp - k))) if kp != k else y), k


@jax.custom_batching.custom_vmap
def _csr_mm(data, indices, indptr, y):
    yp, k = _pad_cols(y)
    mat = jsp.BCSR((data, indices, indptr), shape=(indptr.shape[0] - 1, y.shape[0]), indices_sorted=True)
    return (mat @ yp)[:, :k]


@_csr_mm.def_vmap
def _csr_mm_vmap(axis_size, in_batched, data, indices, indptr, y):
    *mat_b, y_b = in_batched
    if any(mat_b):  # a batch of different matrices: no folding possible, map sequentially
        def bcast(a, b):
            return a if b else jnp.broadcast_to(a, (axis_size, *a.shape))
        args = tuple(bcast(a, b) for a, b in zip((data, indices, indptr, y), in_batched))
        return jax.lax.map(lambda a: _csr_mm(*a), args), True
    if not y_b:
        return _csr_mm(data, indices, indptr, y), False
    b, n, k = y.shape
    out = _csr_mm(data, indices, indptr, jnp.moveaxis(y, 0, 1).reshape(n, b * k))
    return jnp.moveaxis(out.reshape(out.shape[0], b, k), 1, 0), True


def host_row_pointers(rows, num_rows: int) -> jax.Array:
    """:func:`row_pointers` computed once on the host (numpy) for concrete, sorted row indices: what graph
    constructors store in ``Graph.indptr``."""
    return jnp.asarray(np.searchsorted(np.asarray(rows), np.arange(num_rows + 1)), dtype=jnp.int32)


def row_pointers(rows: jax.Array, num_rows: int) -> jax.Array:
    """(num_rows + 1,) int32 CSR row pointers of a sorted row-index array."""
    return jnp.searchsorted(rows, jnp.arange(num_rows + 1, dtype=rows.dtype)).astype(jnp.int32)


@jax.custom_vjp
def csr_matmul(values, senders, receivers, indptr, y):
    """``out[r] = sum_{e: s->r} values[e] * y[s]``.

    Args:
        values: (m,) float edge values (same dtype as ``y``).
        senders: (m,) int32 column indices.
        receivers: (m,) int32 row indices, sorted ascending, senders sorted within each row.
        indptr: (n + 1,) int32 row pointers of ``receivers`` (:func:`row_pointers`).
        y: (n, K) dense block.

    Returns:
        (n, K).
    """
    return _csr_mm(values, senders, indptr, y)


def _fwd(values, senders, receivers, indptr, y):
    return _csr_mm(values, senders, indptr, y), (values, senders, receivers, indptr, y)


def _bwd(res, g):
    values, senders, receivers, indptr, y = res
    order = jnp.argsort(senders, stable=True)  # (sender, receiver) order: the transpose's CSR
    g_y = _csr_mm(values[order], receivers[order], row_pointers(senders[order], y.shape[0]), g)
    g_values = jnp.sum(g[receivers] * y[senders], axis=-1).astype(values.dtype)
    zero = lambda a: np.zeros(a.shape, jax.dtypes.float0)  # noqa: E731  (integer inputs)
    return g_values, zero(senders), zero(receivers), zero(indptr), g_y


csr_matmul.defvjp(_fwd, _bwd)
