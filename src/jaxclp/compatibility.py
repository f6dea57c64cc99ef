"""Initial beliefs, compatibility estimation and CLP edge weights (method steps 2-4)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp.graph import Graph, cpu_resident
from jaxclp.sinkhorn import SinkhornInfo, sinkhorn

PRIOR_ROW_ATOL = 1e-3
"""How far a prior's row sums may be from 1 in :func:`estimate_compatibility` (softmax rows in float32 are within
~1e-6; propagated beliefs renormalized in float32 within ~1e-5)."""


@functools.partial(jax.jit, static_argnames=("num_classes",))
def one_hot_train(labels: jax.Array, train_mask: jax.Array, num_classes: int) -> jax.Array:
    """``M * Y``: (n, K) one-hot labels on training rows, zeros elsewhere (jitted: one program, not an eager one
    per operation)."""
    return jax.nn.one_hot(labels, num_classes) * train_mask[:, None]


def initial_beliefs(prior: jax.Array, labels: jax.Array, train_mask: jax.Array) -> jax.Array:
    """``B0 = M*Y + (1-M)*prior``: training rows replaced by their one-hot labels.

    Args:
        prior: (n, K) floating prior beliefs D (e.g. MLP softmax): finite, nonnegative, each row summing to 1
            (within 1e-4). A prior that is not row-stochastic is refused, not rescaled: its rows would be
            weighed against the one-hot training rows at the wrong scale.
        labels: (n,) int labels; only training entries are read, and they must lie in ``[0, K)``.
        train_mask: (n,) bool.

    Returns:
        (n, K) B0.

    Raises:
        ValueError: naming the argument (checked for concrete inputs; skipped under ``jax.jit``).
    """
    _checks.shape("prior", prior, (None, None))
    n, k = prior.shape
    _checks.floating("prior", prior)
    _checks.probabilities("prior", prior)
    _checks.prior_rows("prior", prior)
    _checks.mask("train_mask", train_mask, n)
    _checks.masked_labels(labels, n, k, train_mask)
    if cpu_resident(prior, labels, train_mask):  # rows copied on the host: no program
        p, y, m = np.asarray(prior), np.asarray(labels), np.asarray(train_mask)
        return jax.device_put(np.where(m[:, None], np.eye(k, dtype=p.dtype)[np.where(m, y, 0)], p))
    if _checks.is_concrete(prior, labels, train_mask):  # one program, not an eager one_hot and where
        return _initial_beliefs(prior, labels, train_mask)
    return _initial_beliefs_arrays(prior, labels, train_mask)


def _initial_beliefs_arrays(prior, labels, train_mask):
    y = jax.nn.one_hot(labels, prior.shape[1], dtype=prior.dtype)
    return jnp.where(train_mask[:, None], y, prior)


_initial_beliefs = jax.jit(_initial_beliefs_arrays)


def masked_labels(labels, mask=None):
    """``where(mask, labels, 0)``: the labels under ``mask`` (default ``labels >= 0``: the -1 of unlabelled nodes
    become 0), on the host for concrete arrays (no eager program per shape); traced, the same ``jnp.where``."""
    if _checks.is_concrete(labels, mask):
        y = np.asarray(labels)
        keep = y >= 0 if mask is None else np.asarray(mask)
        return jax.device_put(np.where(keep, y, np.zeros((), y.dtype)))
    return jnp.where(labels >= 0 if mask is None else mask, labels, 0)


def estimate_compatibility(
    graph: Graph,
    prior: jax.Array,
    labels: jax.Array,
    train_mask: jax.Array,
    *,
    tol: float = 1e-6,
    max_iters: int = 100_000,
    smoothing: float = 1e-6,
) -> tuple[jax.Array, SinkhornInfo]:
    """Estimates the class compatibility ``H = Sinkhorn((M*Y)^T A B0)`` from training labels only.

    ``A`` is the paper's RAW adjacency with ``A[i, j]`` = weight of the edge i -> j, so entry (i, j) of the
    count matrix is the belief mass of class j over the OUT-neighbours (receivers) of training nodes of
    class i: ``H[sender class, receiver class]``, the direction in which the edge weights
    ``F[e, k] = (b0[s] @ H)[k] * b0[r, k]`` use it (and the authors' code computes it). On undirected graphs
    the estimate is the same for either direction. Labels of non-training nodes are never read (they are
    masked out before any arithmetic).

    Args:
        graph: the graph.
        prior: (n, K) prior beliefs D: nonnegative rows summing to 1 (within :data:`PRIOR_ROW_ATOL`; refused
            otherwise, never rescaled: a prior of counts or scores must be normalized first).
        labels: (n,) int labels (only ``train_mask`` entries are used).
        train_mask: (n,) bool, nonempty.
        tol, max_iters, smoothing: passed to :func:`jaxclp.sinkhorn`.

    ``graph`` is any graph of the protocol (:mod:`jaxclp.protocol`), e.g. a :class:`jaxclp.ShardedGraph`: the
    count matrix is then one sharded transpose product and a (K, n) @ (n, K) product over the row-sharded axis
    (local products + one all-reduce).

    Returns:
        ``(H, info)``: H (K, K) doubly stochastic and the Sinkhorn diagnostics.
    """
    prior, labels, train_mask = jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(train_mask)
    n, k = prior.shape
    _checks.shape("prior", prior, (graph.num_nodes, None))
    _checks.probabilities("prior", prior)
    _checks.prior_rows("prior", prior, PRIOR_ROW_ATOL)
    _checks.mask("train_mask", train_mask, n)
    labels = masked_labels(labels, train_mask)  # test/val labels never enter the arithmetic
    _checks.labels(labels, n, k)
    return _estimate(graph, graph.to_internal(prior), graph.to_internal(labels), graph.to_internal(train_mask),
                     tol, max_iters, smoothing)


@jax.jit
def _estimate(graph, prior, labels, train_mask, tol, max_iters, smoothing):
    # internal order: padding rows (a sharded graph's) are not training rows and have prior 0, so b0 = 0 there
    b0 = initial_beliefs(prior, labels, train_mask)
    my = one_hot_train(labels, train_mask, prior.shape[1]).astype(prior.dtype)
    # edge s -> r adds b0[r] to row label(s): the mass over each training node's receivers
    counts = my.T @ graph.spmm_transpose(graph.weights.astype(prior.dtype), b0)
    return sinkhorn(counts, tol=tol, max_iters=max_iters, smoothing=smoothing)


def edge_weights(graph: Graph, b0: jax.Array, H: jax.Array) -> jax.Array:
    """Materialized CLP edge weights ``F[e, k] = (b0[s_e] @ H)[k] * b0[r_e, k]``.

    For inspection and tests; propagation uses the factored form (no (m, K) tensor).

    Args:
        graph: the graph with m edges.
        b0: (n, K) initial beliefs.
        H: (K, K) compatibility.

    Returns:
        (m, K) edge weights.

    Raises:
        ValueError: wrong shapes, ``b0`` not floating / negative / NaN or inf, ``H`` with NaN or inf.
    """
    _checks.shape("b0", b0, (graph.num_nodes, None))
    _checks.shape("H", H, (b0.shape[1], b0.shape[1]))
    _checks.floating("b0", b0)
    _checks.probabilities("b0", b0)
    _checks.finite("H", H)
    return _edge_weights(graph, b0, H)


@jax.jit
def _edge_weights(graph, b0, H):
    g = b0 @ H
    return g[graph.senders] * b0[graph.receivers]
