"""Homophily measures and the true class-compatibility matrix."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxclp import _checks
from jaxclp.graph import Graph, spmm
from jaxclp.protocol import GraphLike
from jaxclp.sinkhorn import sinkhorn


def _nonloop(graph: Graph) -> jax.Array:
    return graph.senders != graph.receivers


def edge_homophily(graph: GraphLike, labels: jax.Array) -> jax.Array:
    """Fraction of (non-loop) edges whose two ends share a label, over the edges whose two ends are labelled
    (a negative label, e.g. -1, marks an unlabelled node; edges touching one are not counted).

    For a symmetrized graph every undirected edge appears twice, which leaves the fraction unchanged, so
    this equals the table's "h" (unique undirected non-loop edges). Any graph of the protocol
    (:class:`jaxclp.Graph`, :class:`jaxclp.ShardedGraph`).

    Args:
        graph: the graph (n nodes).
        labels: (n,) integer labels.

    Returns:
        () float.
    """
    _checks.shape("labels", labels, (graph.num_nodes,))
    lr, ls, real = graph.edge_ends(graph.to_internal(jnp.asarray(labels)), loops=False)
    keep = real & (ls >= 0) & (lr >= 0)
    same = (ls == lr) & keep
    f = jnp.result_type(float)
    return jnp.sum(same, dtype=f) / jnp.maximum(jnp.sum(keep, dtype=f), 1)


def node_homophily_per_node(graph: Graph, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per-node homophily ``h_v = |{u in N(v): y_u = y_v}| / |N(v)|`` (paper eq. 3), in-neighbours, no loops.

    Returns:
        ``(h, has_neighbors)``: (n,) float (0 where a node has no neighbour) and (n,) bool; nodes with
        ``has_neighbors == False`` have no defined h_v and must be excluded by the caller.
    """
    _checks.shape("labels", labels, (graph.num_nodes,))
    f = jnp.result_type(float)
    keep = _nonloop(graph).astype(f)
    same = (labels[graph.senders] == labels[graph.receivers]).astype(f) * keep
    n = graph.num_nodes
    num = jax.ops.segment_sum(same, graph.receivers, n, indices_are_sorted=True)
    deg = jax.ops.segment_sum(keep, graph.receivers, n, indices_are_sorted=True)
    return jnp.where(deg > 0, num / jnp.maximum(deg, 1), 0.0), deg > 0


def node_homophily(graph: Graph, labels: jax.Array) -> jax.Array:
    """Mean of ``h_v`` over nodes that have at least one neighbour."""
    h, ok = node_homophily_per_node(graph, labels)
    return jnp.sum(jnp.where(ok, h, 0.0)) / jnp.maximum(jnp.sum(ok, dtype=h.dtype), 1)


def compatibility_counts(graph: Graph, labels: jax.Array, num_classes: int) -> jax.Array:
    """(K, K) ``Y^T A Y`` with the raw adjacency: entry (i, j) sums edge weights from class-j senders into
    class-i receivers."""
    y = jax.nn.one_hot(labels, num_classes)
    return y.T @ spmm(graph, graph.weights, y)


def true_compatibility(graph: Graph, labels: jax.Array, num_classes: int, *,
                       normalize: str = "sinkhorn") -> jax.Array:
    """The compatibility matrix from ALL labels (for analysis only, never for model selection).

    Args:
        normalize: "sinkhorn" (doubly stochastic, comparable with :func:`jaxclp.estimate_compatibility`),
            "row" (row-stochastic: row i is the label distribution of class-i nodes' neighbours) or "none".
    """
    c = compatibility_counts(graph, labels, num_classes)
    if normalize == "none":
        return c
    if normalize == "row":
        s = c.sum(axis=1, keepdims=True)
        return c / jnp.where(s > 0, s, 1.0)
    if normalize == "sinkhorn":
        return sinkhorn(c)[0]
    raise ValueError(f"normalize must be 'sinkhorn', 'row' or 'none'; got {normalize!r}")


def compatibility_distance(H: jax.Array, H_hat: jax.Array) -> jax.Array:
    """Frobenius distance ``||H - H_hat||_F``."""
    return jnp.linalg.norm(H - H_hat)
