"""The CLP propagation operator in factored form, and its spectral radius.

For class k the CLP operator is ``A^F_k[r, s] = Ahat[r, s] * F[e, k]`` with ``F[e, k] = G[s, k] * b0[r, k]``
and ``G = b0 @ H``, i.e. ``A^F_k = diag(b0[:, k]) Ahat diag(G[:, k])``. All K operators therefore share ONE
sparse matrix, and applying all of them to an (n, K) block ``X`` is a single SpMM::

    op(X) = left * (Ahat @ (right * X)),   left = b0, right = G          (n, K) each

Label propagation is the same operator with ``left = right = 1``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp.graph import (Graph, Normalization, check_normalization, coded_edge_values, cpu_resident,
                          normalization_code, permute_edges, transpose_structure)
from jaxclp.sparse import csr_matmul, row_pointers


class FactoredOperator(NamedTuple):
    """K operators ``diag(left[:, k]) Ahat diag(right[:, k])`` sharing one sparse ``Ahat``.

    Built on any graph of the protocol (:mod:`jaxclp.protocol`): a :class:`~jaxclp.Graph` or a
    :class:`~jaxclp.ShardedGraph`; node-indexed arrays are in the graph's internal order (N rows).

    Attributes:
        graph: the graph (static ``num_nodes``).
        values: entries of ``Ahat`` on the edges (:meth:`edge_values` of the graph: (m,) for a Graph).
        left: (N, K) row scaling (b0 for CLP).
        right: (N, K) column scaling (b0 @ H for CLP).
    """

    graph: Graph
    values: jax.Array
    left: jax.Array
    right: jax.Array

    def matvec(self, x: jax.Array) -> jax.Array:
        """(N, K) -> (N, K): column k is ``A^F_k @ x[:, k]`` (the graph's ``factored_matvec``: on a
        :class:`~jaxclp.Graph` on CPU with the compiled kernel ONE fused operation)."""
        return self.graph.factored_matvec(self.values, self.left, self.right, x)

    def rmatvec(self, x: jax.Array) -> jax.Array:
        """(N, K) -> (N, K): column k is ``A^F_k.T @ x[:, k]`` (``diag(right) Ahat.T diag(left)``)."""
        return self.graph.factored_rmatvec(self.values, self.left, self.right, x)

    def linear_matvec(self, x: jax.Array) -> jax.Array:
        """:meth:`matvec` as a linear-transposable program (what implicit differentiation transposes)."""
        return self.left * self.graph.spmm_linear(self.values, self.right * x)

    def diagonal(self) -> jax.Array:
        """(N, K) diagonal of each operator (nonzero only where the graph has self-loops)."""
        return self.left * self.graph.self_loops(self.values)[:, None] * self.right

    def edge_matrix(self) -> jax.Array:
        """Per-class edge values ``Ahat[e] * left[r_e, k] * right[s_e, k]`` ((m, K) for a Graph)."""
        return self.graph.edge_matrix(self.values, self.left, self.right)

    @property
    def real_rows(self) -> jax.Array | None:
        """(N,) bool: False on the padding rows of the graph's internal order (None: no padding)."""
        return self.graph.real_rows

    def to_dense(self) -> jax.Array:
        """(K, n, n) dense operators. Only for small graphs."""
        n = self.graph.num_nodes
        a = jnp.zeros((n, n), self.values.dtype).at[self.graph.receivers, self.graph.senders].add(self.values)
        return self.left.T[:, :, None] * a[None] * self.right.T[:, None, :]


def clp_operator(graph: Graph, b0: jax.Array, H: jax.Array, *,
                 normalization: Normalization = "sym") -> FactoredOperator:
    """Builds the K CLP operators ``A^F_k = diag(b0[:, k]) Ahat diag((b0 @ H)[:, k])``.

    Args:
        graph: the graph.
        b0: (n, K) initial beliefs.
        H: (K, K) compatibility matrix.
        normalization: adjacency normalization for ``Ahat`` ("sym", "row" or "none").
    """
    _checks.shape("b0", b0, (graph.num_nodes, None))
    _checks.shape("H", H, (b0.shape[1], b0.shape[1]))
    check_normalization(normalization)
    b0 = jnp.asarray(b0)
    if graph.has_edge_list and _checks.is_concrete(b0, H):  # one program for every normalization
        values, right = _clp_factors(graph, b0, H, normalization_code(normalization))
        return FactoredOperator(graph, values, graph.to_internal(b0), right)  # padding rows of a padded graph: 0
    values = graph.edge_values(normalization).astype(b0.dtype)
    b0 = graph.to_internal(b0)
    return FactoredOperator(graph, values, b0, b0 @ jnp.asarray(H).astype(b0.dtype))


@jax.jit
def _clp_factors(graph: Graph, b0, H, code):
    """:func:`clp_operator`'s edge values (normalization :func:`jaxclp.graph.normalization_code` ``code``, traced)
    and ``right = b0 @ H`` in one program."""
    return coded_edge_values(graph, code).astype(b0.dtype), b0 @ jnp.asarray(H).astype(b0.dtype)


def lp_operator(graph: Graph, num_classes: int, *, normalization: Normalization = "sym",
                dtype=jnp.float32) -> FactoredOperator:
    """The label-propagation operator ``Ahat`` repeated for K classes (``left = right = 1`` on the nodes, 0 on
    padding rows of a sharded graph's internal order)."""
    check_normalization(normalization)
    values = graph.edge_values(normalization).astype(dtype)
    ones = graph.to_internal(jax.device_put(np.ones((graph.num_nodes, num_classes), dtype)))  # no eager program
    return FactoredOperator(graph, values, ones, ones)


class SpectralInfo(NamedTuple):
    """Per-class spectral radius of the operators and its bounds.

    Attributes:
        rho: (K,) power-iteration estimate of rho(A^F_k).
        converged: (K,) bool, relative change of the estimate <= tol.
        iterations: (K,) int32 power iterations used.
        lower: (K,) Collatz-Wielandt lower bound ``min_i (A x)_i / x_i`` at the final positive iterate.
        upper: (K,) Collatz-Wielandt upper bound ``max_i (A x)_i / x_i`` (over entries with x_i > 0).
        row_sum_bound: (K,) max row sum (infinity norm), an upper bound on rho.
        col_sum_bound: (K,) max column sum (1-norm), an upper bound on rho.
    """

    rho: jax.Array
    converged: jax.Array
    iterations: jax.Array
    lower: jax.Array
    upper: jax.Array
    row_sum_bound: jax.Array
    col_sum_bound: jax.Array

    @property
    def bound(self) -> jax.Array:
        """(K,) cheapest rigorous upper bound ``min(row_sum_bound, col_sum_bound)``."""
        return jnp.minimum(self.row_sum_bound, self.col_sum_bound)


@jax.jit
def norm_bounds(op: FactoredOperator) -> tuple[jax.Array, jax.Array]:
    """(K,) max row sums and (K,) max column sums of the (nonnegative) operators: bounds on rho.

    Jitted: one dispatch instead of a dozen eager ops; it runs on every ``solve`` call
    (eager vs jitted at n = 1e6: ``benchmarks/results/speedups.md``). Row sums are ``left * (Ahat @ right)``,
    column sums ``right * (Ahat.T @ left)``: two CSR products, the second on the transposed CSR the graph
    constructors store (one (m,) gather of the values, no (m, K) temporary; a Graph built without it falls
    back to ``rmatvec`` of an all-ones block), as does an operator on a sharded graph (its maxima reduce
    across shards).
    """
    return _norm_bounds(op)


def _norm_bounds(op: FactoredOperator) -> tuple[jax.Array, jax.Array]:
    g = op.graph
    t = transpose_structure(g)
    dtype = jnp.result_type(op.values.dtype, op.left.dtype, op.right.dtype)
    if (t is not None and op.values.ndim == 1 and op.left.ndim == 2 and op.left.shape == op.right.shape
            and jnp.issubdtype(dtype, jnp.floating)):
        # left * (Ahat @ right) and right * (Ahat.T @ left): one CSR product each (the transposed one on the
        # stored CSR of Ahat.T), no all-ones block and no (m, K) temporary
        left, right, values = op.left.astype(dtype), op.right.astype(dtype), op.values.astype(dtype)
        ip = g.indptr if g.indptr is not None else row_pointers(g.receivers, g.num_nodes)
        rows = (left * csr_matmul(values, g.senders, g.receivers, ip, right)).max(axis=0)
        perm, t_cols, t_rows, t_indptr = t
        cols = (right * csr_matmul(permute_edges(values, perm), t_cols, t_rows, t_indptr, left)).max(axis=0)
        return rows, cols
    ones = jnp.ones_like(op.left)
    return op.matvec(ones).max(axis=0), op.rmatvec(ones).max(axis=0)


def a_priori_bound(op: FactoredOperator, normalization: Normalization) -> float:
    """A proven upper bound on every rho(A^F_k) without iterating (eager; inf when none applies).

    For "row" and "sym" normalization, ``rho(Ahat) <= 1`` ("row": rows sum to at most 1; "sym": the Schur
    test with weights sqrt(deg) gives ``||D_in^-1/2 A D_out^-1/2||_2 <= 1``). If moreover
    ``0 <= left, right <= 1`` entrywise (true for CLP: b0 rows are probabilities and G = b0 H with H doubly
    stochastic), then ``0 <= A^F_k <= Ahat`` entrywise and by Perron-Frobenius monotonicity
    ``rho(A^F_k) <= rho(Ahat) <= 1``: the iteration converges for every alpha < 1.
    """
    if normalization not in ("sym", "row") or not _checks.is_concrete(op.left, op.right):
        return float("inf")
    if cpu_resident(op.left, op.right):  # on the host: no program (min and max are exact)
        left, right = np.asarray(op.left), np.asarray(op.right)
        extremes = (left.min(), right.min(), left.max(), right.max())
    else:
        extremes = _extremes(op.left, op.right)
    left_min, right_min, left_max, right_max = (float(v) for v in extremes)
    lo, hi = min(left_min, right_min), max(left_max, right_max)
    return 1.0 if (lo >= 0.0 and hi <= 1.0 + 1e-6) else float("inf")


@jax.jit
def _extremes(left, right):
    """``(min(left), min(right), max(left), max(right))`` in one program (four eager reductions compile four)."""
    return jnp.min(left), jnp.min(right), jnp.max(left), jnp.max(right)


@jax.jit
def _power(op: FactoredOperator, tol, max_iters):
    """The shifted power iteration of :func:`operator_spectral_radius` (all classes at once).

    ``op`` is a FactoredOperator on any graph of the protocol. An operator with a ``real_rows`` (N,) bool
    mask (False on the padding rows of a node-sharded or bucket-padded graph) starts from the all-ones vector on its
    real rows only (0 on padding rows, normalized over the real ones), and its Collatz-Wielandt lower bound
    reads the real rows only; norms reduce over all N rows (a row-sharded array reduces across shards).
    """
    n, k = op.left.shape
    real = getattr(op, "real_rows", None)
    if real is None:
        x0 = jnp.ones((n, k), op.left.dtype) / jnp.sqrt(n)
    else:
        real = real[:, None]
        x0 = jnp.where(real, 1.0, 0.0).astype(op.left.dtype) * jnp.ones((1, k), op.left.dtype) / jnp.sqrt(
            jnp.sum(real).astype(op.left.dtype))

    def cond(s):
        _, _, it, active, _ = s
        return (it < max_iters) & jnp.any(active)

    def body(s):
        x, lam, it, active, count = s
        ax = op.matvec(x)
        est = jnp.linalg.norm(ax, axis=0)  # ||A x|| with ||x|| = 1: -> rho as x -> the Perron vector
        # adaptive shift sigma = est/2: A + sigma I has the same Perron vector, is aperiodic (a periodic or
        # bipartite operator's -rho maps to |sigma - rho|), and shrinks the other eigenvalues far less than
        # a fixed shift of 1 would when rho is small
        y = ax + 0.5 * est * x
        nrm = jnp.linalg.norm(y, axis=0)
        done = jnp.abs(est - lam) <= tol * est
        x = jnp.where(active[None, :], y / jnp.where(nrm > 0, nrm, 1.0), x)
        lam = jnp.where(active, est, lam)
        return x, lam, it + 1, active & ~done, count + active.astype(jnp.int32)

    init = (x0, jnp.zeros((k,), x0.dtype), jnp.int32(0), jnp.ones((k,), bool), jnp.zeros((k,), jnp.int32))
    x, lam, _, active, count = jax.lax.while_loop(cond, body, init)
    ax = op.matvec(x)
    pos = x > 0
    ratio = jnp.where(pos, ax / jnp.where(pos, x, 1.0), 0.0)
    if real is None:
        lower = jnp.where(jnp.all(pos, axis=0), ratio.min(axis=0), 0.0)
    else:  # padding rows (x = 0 there) do not count
        lower = jnp.where(jnp.all(pos | ~real, axis=0), jnp.where(pos, ratio, jnp.inf).min(axis=0), 0.0)
    upper = ratio.max(axis=0)
    rows, cols = norm_bounds(op)
    rho = jnp.clip(jnp.linalg.norm(ax, axis=0), lower, jnp.minimum(upper, jnp.minimum(rows, cols)))
    return SpectralInfo(rho=rho, converged=~active, iterations=count, lower=lower, upper=upper,
                        row_sum_bound=rows, col_sum_bound=cols)


def spectral_scale(op: FactoredOperator, info: SpectralInfo | None = None) -> tuple[FactoredOperator, jax.Array]:
    """Scales every class operator to spectral radius one: ``A^F_k / rho(A^F_k)``.

    The scale goes into ``left`` (``diag(left[:, k] / rho_k) Ahat diag(right[:, k])``), so the result is again
    a :class:`FactoredOperator` of the same structure: every solver applies, and for a symmetric ``Ahat`` the
    similarity ``S A S^{-1} = diag(c) Ahat diag(c)`` of the CG method still holds (``c = sqrt(left right /
    rho)``, a positive scalar per class changes neither symmetry nor definiteness). After scaling, the closed
    form ``(1-alpha)(I - alpha A^F_k / rho_k)^{-1} D_k`` exists for every alpha in (0, 1) and alpha has the
    same meaning on every graph (``alpha rho = alpha``).

    ``rho`` is the power-iteration estimate (:func:`operator_spectral_radius` with relative tolerance
    ``max(1e-10, 10 eps)``, or ``info`` when given),
    treated as a constant under differentiation (``stop_gradient``: the gradient of the scaled solve is taken
    at a fixed scale). Classes with ``rho <= sqrt(eps) * max(1, row/column-sum bound)`` (a nilpotent or
    vanishing operator) are left unscaled.

    Args:
        op: the K operators.
        info: optional precomputed :class:`SpectralInfo` of ``op``.

    Returns:
        ``(scaled operator, rho)`` with rho (K,) the radii divided out (1 where a class was left unscaled).
    """
    if info is None:  # a tight tolerance: the scaled radius is 1 up to the relative error of rho
        info = operator_spectral_radius(op, tol=max(1e-10, 10 * float(jnp.finfo(op.left.dtype).eps)),
                                        max_iters=5000)
    args = (op.left, info.rho, info.row_sum_bound, info.col_sum_bound)
    left, rho = _scale_left_host(*args) if cpu_resident(*args) else _scale_left(*args)
    return op._replace(left=left), rho


def _scale_left_host(left, rho, rows, cols):
    """:func:`_scale_left` in numpy for arrays on the CPU: the operations XLA runs, in the same dtype (XLA divides
    by the broadcast ``rho`` as a product with its reciprocal)."""
    left = np.asarray(left)
    one = left.dtype.type(1.0)
    rho = np.asarray(rho).astype(left.dtype)
    floor = np.sqrt(np.finfo(left.dtype).eps) * np.maximum(one, np.minimum(np.asarray(rows), np.asarray(cols)))
    rho = np.where(rho > floor, rho, one)
    return jax.device_put(left * (one / rho)[None, :]), jax.device_put(rho)


@jax.jit
def _scale_left(left, rho, rows, cols):
    """:func:`spectral_scale`'s arithmetic in one program: ``(left / rho, rho)`` with rho (K,) treated as a
    constant and 1 where it is below ``sqrt(eps) * max(1, min(rows, cols))``."""
    rho = jax.lax.stop_gradient(rho).astype(left.dtype)
    floor = jnp.sqrt(jnp.finfo(left.dtype).eps) * jnp.maximum(1.0, jax.lax.stop_gradient(jnp.minimum(rows, cols)))
    rho = jnp.where(rho > floor, rho, 1.0)
    return left / rho[None, :], rho


def spectral_radius(
    graph: Graph,
    b0: jax.Array,
    H: jax.Array,
    *,
    normalization: Normalization = "sym",
    tol: float = 1e-6,
    max_iters: int = 1000,
) -> SpectralInfo:
    """Per-class spectral radius ``rho(A^F_k)`` by power iteration, with cheap rigorous bounds.

    The power iteration runs on ``A^F_k + sigma I`` with the adaptive shift ``sigma = rho_estimate / 2``
    (nonnegative, aperiodic, same Perron vector) from the all-ones vector, all classes at once. Returned are the estimate, the Collatz-Wielandt bounds at the final iterate and the row/column
    sum bounds. The iteration ``B <- (1-a) D + a A^F_k B`` converges iff ``a * rho < 1``.

    Args:
        graph: the graph.
        b0: (n, K) initial beliefs.
        H: (K, K) compatibility.
        normalization: "sym", "row" or "none".
        tol: relative change of the estimate at which a class stops.
        max_iters: maximal number of power iterations.

    Returns:
        A :class:`SpectralInfo` of (K,) arrays.
    """
    return operator_spectral_radius(clp_operator(graph, b0, H, normalization=normalization),
                                    tol=tol, max_iters=max_iters)


def operator_spectral_radius(op: FactoredOperator, *, tol: float = 1e-6,
                             max_iters: int = 1000) -> SpectralInfo:
    """:func:`spectral_radius` for an already built :class:`FactoredOperator`."""
    return _power(op, tol, max_iters)
