"""Propagation graphs: a :class:`~jaxclp.graph.Graph` as the ``jraph.GraphsTuple`` a GNN layer aggregates over,
its ``edges`` field holding the normalized coefficients ``Ahat[r, s]`` (computed once per fit, outside the training
loop). Pure functions of the graph (the 2-hop graph of :func:`h2gcn_normalized_graphs` comes from
:mod:`jaxclp.gnn.two_hop`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jraph

from jaxclp.gnn.two_hop import _check_two_hop, default_two_hop_graph
from jaxclp.graph import Graph, edge_values


def gcn_normalized_graph(graph: Graph, nodes=None) -> jraph.GraphsTuple:
    """GCN propagation graph ``Ahat = D^-1/2 (A + I) D^-1/2`` as a GraphsTuple (edges = coefficients).

    A self-loop of weight 1 is added to every node that has none (nodes whose edge list already holds a loop
    keep it, with its weight; a graph built with ``self_loops="add"`` is therefore not double-looped). Degrees
    are the weighted in-degree (receiver) and out-degree (sender) of ``A + I``; for an undirected graph this
    is exactly Kipf & Welling's renormalization. Pure and jit-able; ``graph`` is not modified.

    Args:
        graph: the input graph (n nodes, m edges).
        nodes: optional (n, d) node features stored in the result's ``nodes``.

    Returns:
        ``jraph.GraphsTuple`` with ``m + n`` edges sorted by receiver; ``edges`` (m + n,) float32 holds
        ``Ahat[r, s]`` (added loops that duplicate an existing loop have coefficient 0).
    """
    n = graph.num_nodes
    s, r, w = graph.senders, graph.receivers, graph.weights
    has_loop = jax.ops.segment_sum(((s == r) & (w > 0)).astype(jnp.int32), r, n, indices_are_sorted=True) > 0
    loops = jnp.arange(n, dtype=s.dtype)
    s2 = jnp.concatenate([s, loops])
    r2 = jnp.concatenate([r, loops])
    w2 = jnp.concatenate([w, jnp.where(has_loop, 0.0, 1.0).astype(w.dtype)])
    order = jnp.lexsort((s2, r2))
    looped = Graph(senders=s2[order], receivers=r2[order], weights=w2[order], num_nodes=n,
                   symmetric=graph.symmetric)
    values = edge_values(looped, "sym").astype(jnp.float32)
    return looped.to_jraph(nodes=nodes)._replace(edges=values)


def h2gcn_normalized_graphs(graph: Graph, two_hop: Graph | None = None,
                            nodes=None) -> tuple[jraph.GraphsTuple, jraph.GraphsTuple]:
    """H2GCN propagation graphs ``A1 = D1^-1/2 A D1^-1/2`` and ``A2 = D2^-1/2 A_2hop D2^-1/2`` (no loops).

    Self-loops of ``graph`` get coefficient 0 (ego/neighbour separation: the ego representation is kept
    apart by the concatenation). ``A1`` uses the graph's edge weights (for a 0/1 graph: the 1-hop
    neighbourhood sets); ``A2`` is binary. Isolated nodes get zero rows, never NaN.

    Args:
        graph: the input graph.
        two_hop: its :func:`jaxclp.gnn.two_hop_graph`; None: built on the host by this call (under the default
            limit :data:`jaxclp.gnn.MAX_TWO_HOP_EDGES`); pass it to call this function under ``jax.jit``.
        nodes: optional (n, d) features stored in the first result's ``nodes``.

    Returns:
        ``(hop1, hop2)``: ``jraph.GraphsTuple`` s whose ``edges`` are the normalized coefficients (float32).
    """
    if two_hop is None:
        two_hop = default_two_hop_graph(graph)
    _check_two_hop(graph, two_hop)
    no_loops = Graph(senders=graph.senders, receivers=graph.receivers,
                     weights=jnp.where(graph.senders == graph.receivers, 0.0, graph.weights).astype(
                         graph.weights.dtype),
                     num_nodes=graph.num_nodes, symmetric=graph.symmetric, indptr=graph.indptr)
    hop1 = no_loops.to_jraph(nodes=nodes)._replace(edges=edge_values(no_loops, "sym").astype(jnp.float32))
    hop2 = two_hop.to_jraph()._replace(edges=edge_values(two_hop, "sym").astype(jnp.float32))
    return hop1, hop2



def mean_graph(graph: Graph, nodes=None) -> jraph.GraphsTuple:
    """Neighbour-mean propagation ``D^-1 A`` without self-loops (GraphSAGE's mean aggregator).

    Edge coefficients are ``w_e / sum_{e' -> r} w_e'`` over the non-loop in-edges of the receiver;
    self-loops get coefficient 0; isolated nodes get zero rows.

    Args:
        graph: the input graph (n nodes, m edges).
        nodes: optional (n, d) features stored in the result's ``nodes``.

    Returns:
        ``jraph.GraphsTuple`` with the m edges of ``graph`` (sorted by receiver) and ``edges`` (m,) float32.
    """
    w = jnp.where(graph.senders == graph.receivers, 0.0, graph.weights).astype(jnp.float32)
    deg = jax.ops.segment_sum(w, graph.receivers, graph.num_nodes, indices_are_sorted=True)
    coef = w / jnp.where(deg > 0, deg, 1.0)[graph.receivers]
    return graph.to_jraph(nodes=nodes)._replace(edges=coef)


def attention_graph(graph: Graph, *, self_loops: bool, nodes=None) -> jraph.GraphsTuple:
    """Edge list for GAT attention: the graph's non-loop edges with positive weight, plus one self-loop per
    node when ``self_loops`` (GAT) or none (GAT-sep). ``edges`` (E,) float32 is a 0/1 edge mask (removed
    edges keep their slot with mask 0 so that shapes stay static).

    Returns:
        ``jraph.GraphsTuple`` sorted by receiver.
    """
    n = graph.num_nodes
    keep = ((graph.senders != graph.receivers) & (graph.weights > 0)).astype(jnp.float32)
    if not self_loops:
        return graph.to_jraph(nodes=nodes)._replace(edges=keep)
    loops = jnp.arange(n, dtype=graph.senders.dtype)
    s2 = jnp.concatenate([graph.senders, loops])
    r2 = jnp.concatenate([graph.receivers, loops])
    m2 = jnp.concatenate([keep, jnp.ones((n,), jnp.float32)])
    order = jnp.lexsort((s2, r2))
    g = Graph(senders=s2[order], receivers=r2[order], weights=jnp.ones_like(m2), num_nodes=n,
              symmetric=graph.symmetric)
    return g.to_jraph(nodes=nodes)._replace(edges=m2[order])
