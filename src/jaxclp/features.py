"""Node features that stay sparse: a small pytree and the ``X @ W`` of the MLP's first layer.

Wide binary features (deezer-europe: 28281 x 31241, about 0.1% nonzero) would take 3.5 GB as dense float32;
as :class:`SparseFeatures` they take 12 bytes per nonzero. :func:`as_features` turns a scipy.sparse matrix
into one (and a dense array into a jax array), with its CSR row pointers and transpose
(:class:`jaxclp.sparse.TransposePlan`, built once on the host); :func:`matmul` computes ``X @ W`` for either.
With a plan it runs the library's CSR product (:func:`jaxclp.sparse.csr_matmul_planned`: the fused C++
kernel on CPU, forward and gradient; XLA's CSR product elsewhere): on Coauthor CS (18333 x 6805, 1.09M
nonzeros) 10-20x faster than the gather + segment sum used without a plan, with bitwise equal results
(``benchmarks/results/sparse_features.md``). Nothing of size ``n * d`` is formed, in the forward pass or in
its gradient. Everything is jit-, grad- and vmap-compatible with static shapes (``shape`` is static pytree
data; ``jax.experimental.sparse`` is not used).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp.graph import _counting_sort
from jaxclp.sparse import TransposePlan, csr_matmul_planned, host_row_pointers


@jax.tree_util.register_pytree_node_class
class SparseFeatures:
    """(n, d) sparse features in COO form, rows sorted (the CSR order).

    Attributes:
        rows: (nnz,) int32 row (node) index of each nonzero, nondecreasing.
        cols: (nnz,) int32 column (feature) index of each nonzero.
        values: (nnz,) float values.
        shape: ``(n, d)``, static (pytree auxiliary data, not a leaf).
        plan: :class:`jaxclp.sparse.TransposePlan` of the nonzeros (CSR row pointers (n + 1,), the permutation
            sorting them by column (nnz,) and the column pointers (d + 1,)), or None. :func:`as_features`
            builds it; :func:`matmul` then uses the CSR kernel instead of a gather + segment sum.
    """

    def __init__(self, rows, cols, values, shape, plan=None):
        self.rows, self.cols, self.values = rows, cols, values
        self.shape = (int(shape[0]), int(shape[1]))
        self.plan = plan

    def tree_flatten(self):
        return (self.rows, self.cols, self.values, self.plan), self.shape

    @classmethod
    def tree_unflatten(cls, shape, leaves):
        rows, cols, values, plan = leaves
        return cls(rows, cols, values, shape, plan)

    ndim = 2

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def nnz(self) -> int:
        return int(self.values.shape[-1])

    def astype(self, dtype) -> "SparseFeatures":
        return self.with_values(self.values.astype(dtype))

    def with_plan(self) -> "SparseFeatures":
        """The same features with their :class:`jaxclp.sparse.TransposePlan` built on the host (concrete arrays;
        ``rows`` must be sorted), so :func:`matmul` runs the CSR kernel. Columns are sorted within each row
        (the nonzeros reordered if they were not: the CSR order XLA's sparse product assumes)."""
        rows, cols, values = np.asarray(self.rows), np.asarray(self.cols), self.values
        if rows.size and np.any(np.diff(rows) < 0):
            raise ValueError("SparseFeatures.rows must be sorted (nondecreasing) to build a CSR plan")
        if rows.size > 1 and np.any((np.diff(rows) == 0) & (np.diff(cols) < 0)):
            order = np.lexsort((cols, rows))
            rows, cols, values = rows[order], cols[order], jnp.asarray(values)[order]
        plan = host_plan(host_row_pointers(rows, self.shape[0]), rows, cols, self.shape[1])
        return SparseFeatures(jnp.asarray(rows, jnp.int32), jnp.asarray(cols, jnp.int32), values, self.shape, plan)

    def with_values(self, values) -> "SparseFeatures":
        """The same sparsity pattern (and plan) with new (nnz,) ``values`` (e.g. after dropout)."""
        return SparseFeatures(self.rows, self.cols, values, self.shape, self.plan)

    def todense(self) -> jax.Array:
        """(n, d) dense array (for tests and small inputs only)."""
        out = jnp.zeros(self.shape, self.values.dtype)
        return out.at[self.rows, self.cols].add(self.values)

    def __repr__(self) -> str:
        return f"SparseFeatures(shape={self.shape}, nnz={self.values.shape}, dtype={self.values.dtype})"


def is_sparse(x: Any) -> bool:
    """True for a :class:`SparseFeatures` or a scipy.sparse matrix/array."""
    if isinstance(x, SparseFeatures):
        return True
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a dependency
        return False
    return sp.issparse(x)


def as_features(x, dtype=None, *, name: str = "features"):
    """Node features as the MLP takes them: a dense jax array, or :class:`SparseFeatures` for sparse input.

    A scipy.sparse matrix (any format, e.g. the CSR of ``jaxclp.datasets.load(..., sparse_features=True)``)
    is converted without densifying: duplicates summed, explicit zeros dropped, rows sorted, with its CSR plan. A
    :class:`SparseFeatures` is returned as is (cast to ``dtype`` if given; its plan built if it has none and its
    arrays are concrete); anything else goes through
    ``jnp.asarray``.

    Args:
        x: (n, d) features: array-like, scipy.sparse, or :class:`SparseFeatures`.
        dtype: value dtype (default: keep the input's floating dtype; float32 for integer/bool input).
        name: argument name used in error messages.

    Returns:
        (n, d) ``jax.Array`` or :class:`SparseFeatures`.

    Raises:
        ValueError: ``x`` is not 2-D, or its values are not numeric.
    """
    if isinstance(x, SparseFeatures):
        if x.plan is None and not any(isinstance(a, jax.core.Tracer) for a in (x.rows, x.cols)):
            x = x.with_plan()
        return x if dtype is None else x.astype(dtype)
    if is_sparse(x):
        import scipy.sparse as sp
        if len(x.shape) != 2:
            raise ValueError(f"{name} must be 2-D (n, d); got shape {x.shape}")
        if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
            raise ValueError(f"{name} must be numeric; got dtype {x.dtype}")
        csr = sp.csr_matrix(x, copy=True)
        csr.sum_duplicates()
        csr.eliminate_zeros()
        csr.sort_indices()
        if dtype is None:
            dtype = csr.dtype if np.issubdtype(csr.dtype, np.floating) else np.float32
        rows = np.repeat(np.arange(csr.shape[0], dtype=np.int32), np.diff(csr.indptr))
        return SparseFeatures(jnp.asarray(rows, jnp.int32), jnp.asarray(csr.indices, jnp.int32),
                              jnp.asarray(csr.data, dtype), csr.shape,
                              host_plan(csr.indptr, rows, csr.indices, csr.shape[1]))
    if isinstance(x, jax.core.Tracer):
        return x if dtype is None else x.astype(dtype)
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ValueError(f"{name} must be a numeric array or a scipy.sparse matrix; got dtype {arr.dtype}")
    if dtype is None and not np.issubdtype(arr.dtype, np.floating):
        dtype = jnp.float32
    if isinstance(x, jax.Array):
        return x if dtype is None else x.astype(dtype)
    # cast on the host and put (jnp.asarray of a host array compiles a program per shape)
    return jax.device_put(arr.astype(jax.dtypes.canonicalize_dtype(arr.dtype if dtype is None else dtype),
                                     copy=False))


SPARSE_INPUT_DENSITY = 0.05
"""Dense features with at most this fraction of nonzeros enter the GNNs as :class:`SparseFeatures`
(:func:`as_input_features`): Chameleon's 2325 bag-of-words columns are 0.55 % nonzero, Squirrel's 0.86 %."""
SPARSE_INPUT_MIN_SIZE = 1 << 16
"""... and at least this many entries (n * d); smaller inputs stay dense."""


def as_input_features(x, dtype=None, *, name: str = "features"):
    """:func:`as_features`, but a concrete dense (n, d) input with at most :data:`SPARSE_INPUT_DENSITY` nonzeros
    (and at least :data:`SPARSE_INPUT_MIN_SIZE` entries) becomes :class:`SparseFeatures`: the first layer of a
    model is then O(nnz * h) instead of O(n * d * h) — the same product up to float rounding (one training step of
    a 2-block GNN on Chameleon 1.2x, its evaluation forward 2-3x faster, measured ad hoc on the shared machine).
    Traced inputs are left as they are."""
    if is_sparse(x) or isinstance(x, jax.core.Tracer):
        return as_features(x, dtype, name=name)
    arr = np.asarray(x)
    if (arr.ndim == 2 and arr.size >= SPARSE_INPUT_MIN_SIZE and np.issubdtype(arr.dtype, np.number)
            and np.count_nonzero(arr) <= SPARSE_INPUT_DENSITY * arr.size):
        import scipy.sparse as sp
        return as_features(sp.csr_matrix(arr), dtype, name=name)
    return as_features(x, dtype, name=name)


def host_plan(indptr, rows, cols, num_cols: int):
    """:class:`jaxclp.sparse.TransposePlan` of a CSR matrix on the host: its row pointers (n + 1,), and the
    transpose from the stable counting sort by column that :class:`jaxclp.graph.Graph` uses for its own
    transpose (``rows``/``cols``: (nnz,) row and column index of each nonzero, in CSR order)."""
    rows, cols = np.asarray(rows, np.int32), np.asarray(cols, np.int32)
    t_indptr, _, order = _counting_sort(cols, rows, np.arange(cols.size, dtype=np.int32), num_cols)
    return TransposePlan(jnp.asarray(np.asarray(indptr), jnp.int32), jnp.asarray(order, jnp.int32),
                         jnp.asarray(t_indptr, jnp.int32))


def matmul(x, w: jax.Array) -> jax.Array:
    """``x @ w`` for dense ``x`` (n, d) or :class:`SparseFeatures`; ``w`` is (d, h); returns (n, h).

    Sparse with a plan (what :func:`as_features` builds): :func:`jaxclp.sparse.csr_matmul_planned`, the CSR
    kernel forward and for the gradient w.r.t. ``w`` (the transposed product) and ``values``. Without a plan:
    ``segment_sum(w[cols] * values[:, None], rows)``. Both O(nnz * h) time and memory; same sums in the same
    order.
    """
    if isinstance(x, SparseFeatures) and x.plan is not None:
        return csr_matmul_planned(x.values.astype(w.dtype), x.cols, x.rows, x.plan, w)
    if isinstance(x, SparseFeatures):
        contrib = w[x.cols] * x.values[:, None].astype(w.dtype)
        return jax.ops.segment_sum(contrib, x.rows, num_segments=x.shape[0], indices_are_sorted=True)
    return x @ w

