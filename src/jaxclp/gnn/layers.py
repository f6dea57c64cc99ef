"""Message passing and graph convolutions: :func:`aggregate` (``Ahat @ h`` on a ``jraph.GraphsTuple`` whose
``edges`` are the coefficients, with jraph's segment ops or the CSR kernels of :mod:`jaxclp.sparse`), GAT attention,
and the flax layers built on them (:class:`GCNConv`, :class:`SAGEConv`, :class:`GATConv`, :class:`GCNSepConv`)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from jaxclp.features import SparseFeatures, matmul
from jaxclp.mlp import SparseDense
from jaxclp.sparse import CSR_MIN_COLUMNS, TransposePlan, csr_matmul_planned, csr_matmul_symmetric, row_pointers


# ------------------------------------------------------------------------------------ sparse node features
def _input_dense(width: int, name: str, x, use_bias: bool = True):
    """The first dense layer of a model: ``nn.Dense`` for a dense (n, d) input, the same parameters over a
    :class:`jaxclp.features.SparseFeatures` input (O(nnz * width), never densified)."""
    if isinstance(x, SparseFeatures):
        return SparseDense(width, use_bias=use_bias, name=name)(x)
    return nn.Dense(width, use_bias=use_bias, name=name)(x)


def _dropout(rate: float, train: bool, x):
    """Dropout that also takes :class:`jaxclp.features.SparseFeatures` (on the stored values: the zeros stay
    zero, as dense dropout would leave them)."""
    drop = nn.Dropout(rate, deterministic=not train)
    if isinstance(x, SparseFeatures):
        return x.with_values(drop(x.values))
    return drop(x)

# ----------------------------------------------------------------------------------- message passing
def aggregate(graph: jraph.GraphsTuple, h: jax.Array, *, receivers_sorted: bool = False,
              symmetric: bool = False, plan: TransposePlan | None = None) -> jax.Array:
    """One message-passing step ``out[r] = sum_{e: s->r} graph.edges[e] * h[s]`` (= ``Ahat @ h``).

    Args:
        graph: ``jraph.GraphsTuple`` whose ``edges`` are (E,) scalar edge coefficients.
        h: (n, p) node representations.
        receivers_sorted: promise that ``graph.receivers`` is sorted ascending (true for every graph built by
            jaxclp); enables the sorted segment reduction.
        symmetric: promise that the coefficient matrix is symmetric (GCN/H2GCN normalizations of an undirected
            graph). With ``receivers_sorted`` and p >= 3 the product then runs the CSR kernel
            (:func:`jaxclp.sparse.csr_matmul_symmetric`, whose gradient reuses the same CSR) instead of a
            gather of an (E, p) message array and a segment sum: on Actor's H2GCN 2-hop graph (2.5M edges,
            p = 64) 20 ms instead of 600 ms forward, 45 ms instead of 1030 ms for the gradient.
        plan: :func:`jaxclp.sparse.transpose_plan` of ``graph`` (receivers sorted): any coefficient matrix
            (SAGE's ``D^-1 A``, a directed graph's) then runs the CSR kernel forward and in the gradient
            (:func:`jaxclp.sparse.csr_matmul_planned`). Build it once per fit, outside the training loop.

    Returns:
        (n, p) aggregated representations.
    """
    fast = h.ndim == 2 and h.shape[1] >= CSR_MIN_COLUMNS and jnp.issubdtype(h.dtype, jnp.floating)
    if fast and plan is not None:
        return csr_matmul_planned(graph.edges.astype(h.dtype), graph.senders, graph.receivers, plan, h)
    if fast and symmetric and receivers_sorted:
        indptr = row_pointers(graph.receivers, h.shape[0])
        return csr_matmul_symmetric(graph.edges.astype(h.dtype), graph.senders, graph.receivers, indptr, h)
    messages = graph.edges[:, None].astype(h.dtype) * h[graph.senders]
    return jraph.segment_sum(messages, graph.receivers, num_segments=h.shape[0],
                             indices_are_sorted=receivers_sorted)


# ------------------------------------------------------------------------------------------ layers
class GCNConv(nn.Module):
    """One graph convolution ``Ahat (h W) + b`` (no activation).

    Attributes:
        features: output width p'.
        receivers_sorted, symmetric: see :func:`aggregate`.
    """

    features: int
    receivers_sorted: bool = False
    symmetric: bool = False

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, h: jax.Array, plan: TransposePlan | None = None) -> jax.Array:
        """(n, p) -> (n, p'); ``graph.edges`` are the coefficients ``Ahat[r, s]``; ``plan`` as in
        :func:`aggregate`."""
        kernel = self.param("kernel", nn.initializers.glorot_uniform(), (h.shape[-1], self.features))
        bias = self.param("bias", nn.initializers.zeros_init(), (self.features,))
        return aggregate(graph, matmul(h, kernel), receivers_sorted=self.receivers_sorted, symmetric=self.symmetric,
                         plan=plan) + bias



def gat_attention(graph: jraph.GraphsTuple, wh: jax.Array, a_src: jax.Array, a_dst: jax.Array,
                  negative_slope: float = 0.2, receivers_sorted: bool = False) -> jax.Array:
    """GAT attention coefficients (Velickovic et al., 2018) per edge and head.

    ``alpha[e, h] = softmax_{e' -> r}(LeakyReLU(a_src[h] . wh[s, h] + a_dst[h] . wh[r, h]))`` over the
    in-edges of each receiver ``r`` whose mask ``graph.edges`` is 1 (masked edges get weight 0).

    Args:
        graph: edge list with ``edges`` (E,) 0/1 mask.
        wh: (n, H, c) projected node features.
        a_src, a_dst: (H, c) attention vectors.

    Returns:
        (E, H) attention weights; each receiver's weights sum to 1 (0 for a node without in-edges).
    """
    ex = gat_scores(graph, wh, a_src, a_dst, negative_slope, receivers_sorted)
    den = jax.ops.segment_sum(ex, graph.receivers, wh.shape[0], indices_are_sorted=receivers_sorted)
    return ex / jnp.where(den > 0, den, 1.0)[graph.receivers]


def gat_scores(graph: jraph.GraphsTuple, wh: jax.Array, a_src: jax.Array, a_dst: jax.Array,
               negative_slope: float = 0.2, receivers_sorted: bool = False) -> jax.Array:
    """Unnormalized GAT attention ``exp(LeakyReLU(...) - max)`` (E, H): :func:`gat_attention` before the division
    by each receiver's sum (0 on masked edges; the per-receiver max is subtracted, without gradient)."""
    e_src = jnp.sum(wh * a_src, axis=-1)  # (n, H)
    e_dst = jnp.sum(wh * a_dst, axis=-1)
    logits = jax.nn.leaky_relu(e_src[graph.senders] + e_dst[graph.receivers], negative_slope)
    mask = graph.edges[:, None] > 0
    logits = jnp.where(mask, logits, -1e9)
    mx = jax.ops.segment_max(jax.lax.stop_gradient(logits), graph.receivers, wh.shape[0],
                             indices_are_sorted=receivers_sorted)
    return jnp.where(mask, jnp.exp(logits - mx[graph.receivers]), 0.0)


class SAGEConv(nn.Module):
    """GraphSAGE layer, mean aggregator: ``h W_self + (D^-1 A h) W_neigh + b`` (ego and neighbours apart).

    Parameters: ``self/kernel`` (p, p'), ``neigh/kernel`` (p, p'), ``bias`` (p',).
    """

    features: int
    receivers_sorted: bool = False
    symmetric: bool = False

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, h: jax.Array, plan: TransposePlan | None = None) -> jax.Array:
        """(n, p) -> (n, p'); ``graph.edges`` are the mean coefficients (:func:`mean_graph`), or any
        coefficients (GCN-sep passes ``D^-1/2 A D^-1/2``, symmetric on an undirected graph); ``plan`` as in
        :func:`aggregate`."""
        ego = nn.Dense(self.features, use_bias=False, name="self")(h)
        nb = nn.Dense(self.features, use_bias=False, name="neigh")(
            aggregate(graph, h, receivers_sorted=self.receivers_sorted, symmetric=self.symmetric, plan=plan))
        return ego + nb + self.param("bias", nn.initializers.zeros_init(), (self.features,))


class GATConv(nn.Module):
    """GAT layer with ``heads`` heads of width ``features // heads``, concatenated.

    ``out[r] = concat_h sum_{e: s->r} alpha[e, h] (h_s W)_h + b`` (+ ``h_r W_self`` when ``sep``: ego
    embedding kept apart, attention over the neighbours only -- GAT-sep of Platonov et al.).
    Parameters: ``kernel`` (p, p'), ``att_src``/``att_dst`` (H, p'/H), ``bias`` (p',) and, if ``sep``,
    ``self/kernel`` (p, p').
    """

    features: int
    heads: int = 4
    sep: bool = False
    receivers_sorted: bool = False

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, h: jax.Array, plan: TransposePlan | None = None) -> jax.Array:
        """(n, p) -> (n, p'); ``graph`` from :func:`attention_graph` (with loops unless ``sep``); with ``plan``
        (:func:`jaxclp.sparse.transpose_plan` of ``graph``) each head aggregates with the CSR kernel
        (:func:`jaxclp.sparse.csr_matmul_planned`, attention weights as its edge values) instead of an
        (E, H, c) message array and a segment sum."""
        if self.features % self.heads:
            raise ValueError(f"GAT width {self.features} must be divisible by heads={self.heads}")
        c = self.features // self.heads
        wh = nn.Dense(self.features, use_bias=False, name="kernel")(h).reshape(h.shape[0], self.heads, c)
        init = nn.initializers.glorot_uniform()
        a_src = self.param("att_src", init, (self.heads, c))
        a_dst = self.param("att_dst", init, (self.heads, c))
        alpha = gat_attention(graph, wh, a_src, a_dst, receivers_sorted=self.receivers_sorted)
        self.sow("intermediates", "alpha", alpha)  # dead code (removed by XLA) unless intermediates are asked for
        if plan is not None:  # softmax numerator and denominator in one product per head, divided per node
            ex = gat_scores(graph, wh, a_src, a_dst, receivers_sorted=self.receivers_sorted).astype(wh.dtype)
            ones = jnp.ones((h.shape[0], 1), wh.dtype)
            parts = []
            for i in range(self.heads):
                nd = csr_matmul_planned(ex[:, i], graph.senders, graph.receivers, plan,
                                        jnp.concatenate([wh[:, i], ones], axis=1))
                den = nd[:, -1:]
                parts.append(nd[:, :-1] / jnp.where(den > 0, den, 1.0))
            out = jnp.concatenate(parts, axis=1)
        else:
            msg = alpha[:, :, None] * wh[graph.senders]
            out = jax.ops.segment_sum(msg, graph.receivers, h.shape[0], indices_are_sorted=self.receivers_sorted)
            out = out.reshape(h.shape[0], self.features)
        if self.sep:
            out = out + nn.Dense(self.features, use_bias=False, name="self")(h)
        return out + self.param("bias", nn.initializers.zeros_init(), (self.features,))


class GCNSepConv(nn.Module):
    """GCN-sep layer: ``h W_self + (D^-1/2 A D^-1/2 h) W_neigh + b`` (neighbour aggregation without
    self-loops, ego embedding kept apart). Same parameter layout as :class:`SAGEConv`."""

    features: int
    receivers_sorted: bool = False
    symmetric: bool = False

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, h: jax.Array, plan: TransposePlan | None = None) -> jax.Array:
        return SAGEConv(self.features, self.receivers_sorted, self.symmetric, name="conv")(graph, h, plan)
