"""GNN baselines: GCN (Kipf & Welling, 2017) and H2GCN (Zhu et al., 2020), in jraph + flax linen.

Message passing runs on ``jraph.GraphsTuple`` edge lists (``senders -> receivers``) with jraph's segment
ops: a layer computes ``out[r] = sum_{e: s->r} edges[e] * h[s]``, i.e. ``Ahat @ h`` where the
``GraphsTuple.edges`` field holds the (precomputed) normalized coefficients ``Ahat[r, s]``. The coefficients
are computed once per fit, outside the training loop; the loop itself is :func:`jaxclp.train.train_full_batch`
(optax, jitted ``lax.while_loop`` with validation early stopping), so every fit is one XLA program and
``fit_*_splits`` vmaps it over splits.

* **GCN**: ``H <- ReLU(Ahat Dropout(H) W + b)`` per hidden layer, then a last layer without ReLU, with
  ``Ahat = D^-1/2 (A + I) D^-1/2`` (weighted degrees of ``A + I``). The loops are added to a copy of the
  edge list inside :func:`gcn_normalized_graph`; the user's :class:`~jaxclp.graph.Graph` is untouched.
* **H2GCN**: ego / neighbour separation (aggregations without self-loops), 1-hop and 2-hop neighbourhoods
  (2-hop = nodes at distance exactly 2, see :func:`two_hop_graph`), each with its own symmetric
  normalization ``D_h^-1/2 A_h D_h^-1/2``; ``r0 = ReLU(X W_e)``, ``r_k = [A1 r_{k-1} || A2 r_{k-1}]`` for
  ``k = 1..K`` (K = 2 rounds), and ``logits = Dropout([r0 || r1 || ... || rK]) W_c + b_c``.
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from typing import NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np

from jaxclp import _checks
from jaxclp._rng import fast_key
from jaxclp.graph import Graph, edge_values
from jaxclp.features import SparseFeatures, as_features, as_input_features, matmul
from jaxclp.sparse import (CSR_MIN_COLUMNS, TransposePlan, csr_matmul_planned, csr_matmul_symmetric, row_pointers,
                           transpose_plan)
from jaxclp.train import (TrainConfig, TrainInfo, count_params, fit_to_deadline, make_optimizer, next_chunk,
                          train_full_batch, train_outcome, train_start, train_stopped, train_until, validation_metric)

MODELS = ("gcn", "h2gcn")
CONVS = ("gcn", "sage", "gat", "none")
"""Block types of :class:`TunedGNN`; ``"none"`` (a dense layer, no message passing) makes it Platonov et al.'s
ResNet baseline."""


# ------------------------------------------------------------------------------------ sparse node features
def _input_dense(width: int, name: str, x, use_bias: bool = True):
    """The first dense layer of a model: ``nn.Dense`` for a dense (n, d) input, the same parameters over a
    :class:`jaxclp.features.SparseFeatures` input (O(nnz * width), never densified)."""
    from jaxclp.mlp import SparseDense

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


MAX_TWO_HOP_EDGES = 200_000_000
"""Default limit of :func:`two_hop_graph` (H2GCN's 2-hop graph), in directed 2-hop pairs. A node of degree d
alone makes up to d(d-1) of them, so a graph with hubs can ask for billions (an out-of-memory end, not an error).
For scale: Squirrel's 2-hop graph has 8.4M pairs and a whole H2GCN fit on it peaked at 0.85 GB resident on CPU
(session 27, ad hoc, ``/usr/bin/time``);
Coauthor-Physics 8.0M; the largest of the 18 datasets' is below 9M."""

_TWO_HOP_BLOCK_WALKS = 20_000_000
"""Rows of ``A @ A`` are formed in blocks of at most about this many length-2 walks (bounded host memory)."""


class TwoHopTooLarge(ValueError):
    """:func:`two_hop_graph` would exceed its ``max_edges``: H2GCN (and the runner's ``h2gcn`` prior) does not fit."""


def check_two_hop_size(graph: Graph, max_edges: int | None = None) -> None:
    """Raises :class:`TwoHopTooLarge` where :func:`two_hop_graph` would (``max_edges``: default
    :data:`MAX_TWO_HOP_EDGES` read at call time), before anything is fitted. Free where the number of length-2 walks
    (an upper bound on the pairs) is within the limit, as on every one of the 18 datasets; else the pairs are
    counted block by block (stopping past the limit), nothing built."""
    limit = MAX_TWO_HOP_EDGES if max_edges is None else max_edges
    if limit is None:
        return
    a, walks = _one_hop(graph)
    if int(walks.sum()) > limit:
        _two_hop_pairs(a, walks, limit, keep=False)


def _one_hop(graph: Graph):
    """``(A, walks)``: the 0/1 CSR adjacency ``A[r, s]`` of the edges ``s -> r`` of positive weight, loops and
    repeats dropped, and ``walks[r]`` = the number of length-2 walks ``s -> u -> r`` (row sums of ``A @ A``: the
    in-degrees of r's in-neighbours)."""
    import scipy.sparse as sp

    if not _checks.is_concrete(graph.senders, graph.receivers, graph.weights):
        raise ValueError("two_hop_graph runs on the host: call it outside jax.jit and pass the result in")
    n = graph.num_nodes
    s = np.asarray(graph.senders, np.int64)
    r = np.asarray(graph.receivers, np.int64)
    keep = (np.asarray(graph.weights) > 0) & (s != r)
    a = sp.csr_matrix((np.ones(int(keep.sum()), np.int64), (r[keep], s[keep])), shape=(n, n))
    a.sum_duplicates()
    a.data[:] = 1
    return a, a @ np.diff(a.indptr).astype(np.int64)


def _two_hop_pairs(a, walks, max_edges, keep: bool = True):
    """The exact-2-hop pairs of ``A`` (:func:`_one_hop`) as ``(senders, receivers)`` (None with ``keep=False``:
    only counted), formed in blocks of receivers of at most ~:data:`_TWO_HOP_BLOCK_WALKS` walks; raises
    :class:`TwoHopTooLarge` as soon as the count passes ``max_edges`` (None: no limit)."""
    n = a.shape[0]
    ends = np.searchsorted(np.cumsum(walks), np.arange(1, 1 + int(walks.sum()) // _TWO_HOP_BLOCK_WALKS)
                           * _TWO_HOP_BLOCK_WALKS)
    bounds = np.unique(np.r_[0, np.minimum(ends + 1, n), n])
    cols, rows, count = [], [], 0
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        blk = a[lo:hi]
        reach = (blk @ a).tocsr()  # reach[r - lo, s] = number of walks s -> u -> r
        reach = (reach - reach.multiply(blk)).tocoo()  # drop the 1-hop pairs
        sel = (reach.data > 0) & (reach.row + lo != reach.col)  # and the node itself
        count += int(sel.sum())
        if max_edges is not None and count > max_edges:
            raise TwoHopTooLarge(
                f"H2GCN's 2-hop graph has more than {int(max_edges):,} pairs ({count:,} counted in the first "
                f"{hi:,} of {n:,} receivers; {int(walks.sum()):,} walks of length 2, a hub of degree d makes "
                f"~d^2): it does not fit. Leave H2GCN out (jaxclp run: --methods without h2gcn; clp leaves it out by "
                "itself), or pass two_hop_graph(graph, max_edges=None) as two_hop= if you have the memory")
        if keep:
            cols.append(reach.col[sel])
            rows.append(reach.row[sel] + lo)
    return (np.concatenate(cols), np.concatenate(rows)) if keep else None


def two_hop_graph(graph: Graph, max_edges: int | None = MAX_TWO_HOP_EDGES) -> Graph:
    """The exact-2-hop neighbourhood graph of H2GCN (host-side, scipy sparse).

    Node ``s`` is a 2-hop neighbour of ``r`` iff there is a path ``s -> u -> r`` through edges of positive
    weight, ``s != r`` and ``s -> r`` is not itself an edge (for an undirected graph: shortest-path distance
    exactly 2). Self-loops of ``graph`` are ignored. Edge weights of the result are 1.

    The product ``A @ A`` is formed in blocks of receivers (each of at most ~2e7 length-2 walks), so that host
    memory stays bounded by the result, and the count stops as soon as it passes ``max_edges``.

    Args:
        graph: the input graph; its arrays must be concrete (not traced).
        max_edges: the most 2-hop pairs (edges of the result) allowed (default :data:`MAX_TWO_HOP_EDGES`);
            None: no limit.

    Returns:
        A :class:`~jaxclp.graph.Graph` on the same n nodes, edges sorted by receiver.

    Raises:
        ValueError: if called on traced arrays (inside ``jax.jit``).
        TwoHopTooLarge: (a ValueError) more than ``max_edges`` 2-hop pairs.
    """
    a, walks = _one_hop(graph)
    ei = np.stack(_two_hop_pairs(a, walks, max_edges)).astype(np.int64)
    return Graph.from_edge_index(ei, graph.num_nodes, weights=np.ones(ei.shape[1]), symmetrize=False,
                                 deduplicate=True, self_loops="drop")


TWO_HOP_MEMO_MAX_EDGES = 50_000_000
""":func:`fit_h2gcn` (and ``fit_h2gcn_splits``, :func:`h2gcn_normalized_graphs`) called without ``two_hop`` keep the
2-hop graph they build, for as long as the input :class:`Graph` object lives, up to this many pairs (~0.8 GB): the
runner fits H2GCN once per split on one graph (and ``clp`` again as a base predictor), and each build is a host pass
(Squirrel's 8.4M pairs: ~4 s, ten times a table row). The same object is returned, so fits are bit for bit the
same; larger 2-hop graphs are rebuilt each time rather than held between fits."""

_TWO_HOP_MEMO: dict[int, tuple] = {}
_TWO_HOP_LOCK = threading.Lock()


def _two_hop_memo(graph: Graph, max_edges: int | None) -> Graph:
    """:func:`two_hop_graph` of ``graph``, kept while ``graph`` lives (see :data:`TWO_HOP_MEMO_MAX_EDGES`)."""
    key = id(graph)
    with _TWO_HOP_LOCK:
        hit = _TWO_HOP_MEMO.get(key)
    if hit is not None and hit[0]() is graph and hit[1] == max_edges:
        return hit[2]
    two_hop = two_hop_graph(graph, max_edges=max_edges)
    if two_hop.num_edges <= TWO_HOP_MEMO_MAX_EDGES:
        ref = weakref.ref(graph, lambda _, k=key: _forget_two_hop(k))
        with _TWO_HOP_LOCK:
            _TWO_HOP_MEMO[key] = (ref, max_edges, two_hop)
    return two_hop


def _forget_two_hop(key: int) -> None:
    with _TWO_HOP_LOCK:
        _TWO_HOP_MEMO.pop(key, None)


def h2gcn_normalized_graphs(graph: Graph, two_hop: Graph | None = None,
                            nodes=None) -> tuple[jraph.GraphsTuple, jraph.GraphsTuple]:
    """H2GCN propagation graphs ``A1 = D1^-1/2 A D1^-1/2`` and ``A2 = D2^-1/2 A_2hop D2^-1/2`` (no loops).

    Self-loops of ``graph`` get coefficient 0 (ego/neighbour separation: the ego representation is kept
    apart by the concatenation). ``A1`` uses the graph's edge weights (for a 0/1 graph: the 1-hop
    neighbourhood sets); ``A2`` is binary. Isolated nodes get zero rows, never NaN.

    Args:
        graph: the input graph.
        two_hop: its :func:`two_hop_graph` (computed on the host when omitted and kept while ``graph`` lives,
            see :data:`TWO_HOP_MEMO_MAX_EDGES`; pass it to call this function under ``jax.jit``).
        nodes: optional (n, d) features stored in the first result's ``nodes``.

    Returns:
        ``(hop1, hop2)``: ``jraph.GraphsTuple`` s whose ``edges`` are the normalized coefficients (float32).
    """
    if two_hop is None:
        two_hop = _two_hop_memo(graph, MAX_TWO_HOP_EDGES)
    _check_two_hop(graph, two_hop)
    no_loops = Graph(senders=graph.senders, receivers=graph.receivers,
                     weights=jnp.where(graph.senders == graph.receivers, 0.0, graph.weights).astype(
                         graph.weights.dtype),
                     num_nodes=graph.num_nodes, symmetric=graph.symmetric, indptr=graph.indptr)
    hop1 = no_loops.to_jraph(nodes=nodes)._replace(edges=edge_values(no_loops, "sym").astype(jnp.float32))
    hop2 = two_hop.to_jraph()._replace(edges=edge_values(two_hop, "sym").astype(jnp.float32))
    return hop1, hop2


def _check_two_hop(graph: Graph, two_hop: Graph) -> None:
    if not isinstance(two_hop, Graph):
        raise ValueError(f"two_hop must be a jaxclp Graph; got {type(two_hop).__name__}")
    if two_hop.num_nodes != graph.num_nodes:
        raise ValueError(f"two_hop has {two_hop.num_nodes} nodes but graph has {graph.num_nodes}")


# ------------------------------------------------------------------------------------------ modules
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


class GCN(nn.Module):
    """Kipf & Welling GCN: ``len(hidden) + 1`` graph convolutions (2 layers by default).

    Layer ``l``: ``H <- Ahat Dropout(H) W_l + b_l``, followed by ReLU except after the last layer. The
    parameters are ``params["conv{l}"]["kernel"]`` (p_l, p_{l+1}) and ``["bias"]`` (p_{l+1},).

    Attributes:
        hidden: hidden widths (``(64,)`` -> 2 layers; ``()`` -> a single linear propagation layer).
        num_classes: K output logits.
        dropout: dropout rate on the input of every layer (training only).
        receivers_sorted, symmetric: see :func:`aggregate`.
    """

    hidden: Sequence[int]
    num_classes: int
    dropout: float = 0.5
    receivers_sorted: bool = False
    symmetric: bool = False

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, *, train: bool) -> jax.Array:
        """Args: ``graph`` with ``nodes`` (n, d) features and ``edges`` the GCN coefficients
        (:func:`gcn_normalized_graph`). Returns: (n, K) logits."""
        h = graph.nodes
        widths = tuple(self.hidden) + (self.num_classes,)
        for i, width in enumerate(widths):
            h = _dropout(self.dropout, train, h)
            h = GCNConv(width, receivers_sorted=self.receivers_sorted, symmetric=self.symmetric,
                        name=f"conv{i}")(graph, h)
            if i < len(widths) - 1:
                h = nn.relu(h)
        return h


class H2GCN(nn.Module):
    """H2GCN (Zhu et al., 2020) with ego/neighbour separation, 1- and 2-hop neighbourhoods, concatenation.

    ``r0 = ReLU(X W_e)`` (n, p); ``r_k = [A1 r_{k-1} || A2 r_{k-1}]`` (n, 2^k p) for ``k = 1..num_rounds``;
    ``logits = Dropout([r0 || r1 || ... || r_K]) W_c + b_c`` with ``(2^(K+1) - 1) p`` inputs (7p for K=2).
    Parameters: ``params["embed"]["kernel"]`` (d, p) (no bias, as in the paper) and
    ``params["classify"]["kernel"]`` ((2^(K+1)-1) p, K), ``["bias"]`` (K,). The representations are sown
    into the ``"intermediates"`` collection as ``r0, r1, ..., final``.

    Attributes:
        hidden: embedding width p.
        num_classes: K output logits.
        dropout: dropout rate on the final representation (training only).
        num_rounds: K aggregation rounds (2 in the paper).
        receivers_sorted, symmetric: see :func:`aggregate` (both hops' matrices).
    """

    hidden: int
    num_classes: int
    dropout: float = 0.5
    num_rounds: int = 2
    receivers_sorted: bool = False
    symmetric: bool = False

    @nn.compact
    def __call__(self, hop1: jraph.GraphsTuple, hop2: jraph.GraphsTuple, *, train: bool) -> jax.Array:
        """Args: ``hop1`` with ``nodes`` (n, d) features and ``edges`` the A1 coefficients, ``hop2`` with the
        A2 coefficients (:func:`h2gcn_normalized_graphs`). Returns: (n, K) logits."""
        r = nn.relu(_input_dense(self.hidden, "embed", hop1.nodes, use_bias=False))
        self.sow("intermediates", "r0", r)
        reps = [r]
        for k in range(1, self.num_rounds + 1):
            r = jnp.concatenate([aggregate(hop1, r, receivers_sorted=self.receivers_sorted, symmetric=self.symmetric),
                                 aggregate(hop2, r, receivers_sorted=self.receivers_sorted, symmetric=self.symmetric)],
                                axis=-1)
            self.sow("intermediates", f"r{k}", r)
            reps.append(r)
        final = jnp.concatenate(reps, axis=-1)
        self.sow("intermediates", "final", final)
        final = nn.Dropout(self.dropout, deterministic=not train)(final)
        return nn.Dense(self.num_classes, name="classify")(final)


# ------------------------------------------------------------- tuned GNNs (Platonov et al., 2023)
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


class TunedGNN(nn.Module):
    """GCN / GraphSAGE / GAT (and "-sep" variants) with the options of Platonov et al. (2023) and Luo et al.
    (2024): input projection, ``num_layers`` message-passing blocks with optional residual connections and
    LayerNorm, output projection.

    ``h = ReLU(Dropout(Dense_in(x)))`` (n, p) (Platonov et al.'s order; ``input_dropout`` also drops the raw
    features first, which costs an (n, d) mask per split: 1.2 GB per split on Coauthor-Physics); per block
    ``z = LN(h)`` (if ``norm``) ``-> conv -> ReLU ->
    Dropout``, ``h = h + z`` if ``residual`` else ``z``; ``logits = Dense_out(LN(h))`` (LN if ``norm``).
    With ``ffn`` every block is Platonov et al.'s two-layer feed-forward module instead: ``z = LN(h) -> conv ->
    Dropout -> GELU -> Dense(p) -> Dropout`` (the conv's own projection is the module's first linear layer).
    With ``num_layers = 0`` this is an MLP with one hidden layer.

    Attributes:
        conv: "gcn", "sage", "gat", or "none" (a dense layer in place of the conv: no message passing; with
            ``residual``, ``norm`` and ``ffn`` this is Platonov et al.'s ResNet baseline).
        num_classes: K.
        hidden: width p of every block.
        num_layers: number of message-passing blocks (>= 0).
        sep: keep ego and neighbour embeddings apart (GCN-sep, GAT-sep; GraphSAGE is always separated).
        residual: add the block input to its output.
        norm: LayerNorm before every conv and before the output projection.
        dropout: dropout rate (training only).
        heads: GAT heads (``hidden`` must be divisible by it).
        input_dropout: also apply dropout to the input features.
        ffn: a second dense layer with GELU in every block (Platonov et al.'s feed-forward module).
        receivers_sorted: see :func:`aggregate`.
        symmetric: the graph is undirected (see :func:`aggregate`): GCN and GCN-sep, whose coefficient
            matrices are then symmetric, aggregate with the CSR kernel. SAGE's ``D^-1 A`` and GAT's attention
            (and every conv on a directed graph) use the CSR kernel when ``__call__`` gets a ``plan``.
    """

    conv: str
    num_classes: int
    hidden: int = 64
    num_layers: int = 2
    sep: bool = False
    residual: bool = False
    norm: bool = False
    dropout: float = 0.5
    heads: int = 4
    input_dropout: bool = False
    receivers_sorted: bool = False
    symmetric: bool = False
    ffn: bool = False

    @nn.compact
    def __call__(self, graph: jraph.GraphsTuple, plan: TransposePlan | None = None, *, train: bool) -> jax.Array:
        """``graph`` from :func:`tuned_gnn_graph` (features in ``nodes``); ``plan`` its
        :func:`jaxclp.sparse.transpose_plan` (optional: message passing then runs the CSR kernel for every conv,
        see :func:`aggregate`; the result is the same up to float rounding). Returns (n, K) logits."""
        drop = functools.partial(_dropout, self.dropout, train)
        x = drop(graph.nodes) if self.input_dropout else graph.nodes
        h = nn.relu(drop(_input_dense(self.hidden, "input", x)))
        for i in range(self.num_layers):
            z = nn.LayerNorm(name=f"norm{i}")(h) if self.norm else h
            if self.conv == "gcn":
                conv = GCNSepConv if self.sep else GCNConv
                z = conv(self.hidden, self.receivers_sorted, self.symmetric, name=f"conv{i}")(graph, z, plan)
            elif self.conv == "sage":
                z = SAGEConv(self.hidden, self.receivers_sorted, name=f"conv{i}")(graph, z, plan)
            elif self.conv == "none":
                z = nn.Dense(self.hidden, name=f"conv{i}")(z)
            elif self.conv == "gat":
                z = GATConv(self.hidden, self.heads, self.sep, self.receivers_sorted, name=f"conv{i}")(graph, z,
                                                                                                      plan)
            else:
                raise ValueError(f"conv must be one of {CONVS}; got {self.conv!r}")
            if self.ffn:
                z = drop(nn.Dense(self.hidden, name=f"ffn{i}")(nn.gelu(drop(z), approximate=False)))
            else:
                z = drop(nn.relu(z))
            h = h + z if self.residual else z
        if self.norm:
            h = nn.LayerNorm(name="norm_out")(h)
        return nn.Dense(self.num_classes, name="output")(h)


def tuned_gnn_graph(graph: Graph, conv: str, sep: bool, nodes=None) -> jraph.GraphsTuple:
    """The propagation graph of :class:`TunedGNN`: GCN ``D^-1/2 (A+I) D^-1/2`` (GCN-sep: ``D^-1/2 A D^-1/2``
    without loops), SAGE ``D^-1 A``, GAT the attention edge list (with loops unless ``sep``)."""
    if conv == "gcn":
        if not sep:
            return gcn_normalized_graph(graph, nodes=nodes)
        no_loops = Graph(senders=graph.senders, receivers=graph.receivers,
                         weights=jnp.where(graph.senders == graph.receivers, 0.0, graph.weights).astype(
                             graph.weights.dtype), num_nodes=graph.num_nodes, symmetric=graph.symmetric,
                         indptr=graph.indptr)
        return no_loops.to_jraph(nodes=nodes)._replace(edges=edge_values(no_loops, "sym").astype(jnp.float32))
    if conv == "sage":
        return mean_graph(graph, nodes=nodes)
    if conv == "gat":
        return attention_graph(graph, self_loops=not sep, nodes=nodes)
    if conv == "none":  # no message passing: the edges are carried but never read
        return graph.to_jraph(nodes=nodes)._replace(edges=jnp.zeros(graph.senders.shape, jnp.float32))
    raise ValueError(f"conv must be one of {CONVS}; got {conv!r}")


class GNNSpec(NamedTuple):
    """Hashable architecture of :class:`TunedGNN` (static under jit). See :class:`TunedGNN` for fields."""

    conv: str = "gcn"
    hidden: int = 64
    num_layers: int = 2
    sep: bool = False
    residual: bool = False
    norm: bool = False
    dropout: float = 0.5
    heads: int = 4
    input_dropout: bool = False
    ffn: bool = False


def _check_spec(spec: GNNSpec) -> GNNSpec:
    if not isinstance(spec, GNNSpec):
        raise ValueError(f"spec must be a GNNSpec; got {type(spec).__name__}")
    if spec.conv not in CONVS:
        raise ValueError(f"spec.conv must be one of {CONVS}; got {spec.conv!r}")
    if int(spec.hidden) < 1 or int(spec.num_layers) < 0 or int(spec.heads) < 1:
        raise ValueError(f"spec.hidden, spec.heads must be >= 1 and spec.num_layers >= 0; got {spec}")
    if spec.conv == "gat" and int(spec.hidden) % int(spec.heads):
        raise ValueError(f"spec.hidden={spec.hidden} must be divisible by spec.heads={spec.heads} for GAT")
    if not 0.0 <= float(spec.dropout) < 1.0:
        raise ValueError(f"spec.dropout must lie in [0, 1); got {spec.dropout}")
    return GNNSpec(str(spec.conv), int(spec.hidden), int(spec.num_layers), bool(spec.sep), bool(spec.residual),
                   bool(spec.norm), float(spec.dropout), int(spec.heads), bool(spec.input_dropout),
                   bool(spec.ffn))


def _model(spec: GNNSpec, num_classes: int, symmetric: bool = False) -> TunedGNN:
    return TunedGNN(conv=spec.conv, num_classes=num_classes, hidden=spec.hidden, num_layers=spec.num_layers,
                    sep=spec.sep, residual=spec.residual, norm=spec.norm, dropout=spec.dropout, heads=spec.heads,
                    input_dropout=spec.input_dropout, receivers_sorted=True, symmetric=symmetric,
                    ffn=spec.ffn)


def _train_model(model, inputs: tuple, key, labels, train_mask, val_mask, cfg) -> "GNNResult":
    """Initializes ``model`` on ``inputs`` (its positional graph arguments), trains it full-batch with early
    stopping (:func:`jaxclp.train.train_full_batch`) and returns the softmax of the best parameters."""
    init_key, drop_key = jax.random.split(key)
    params = model.init(init_key, *inputs, train=False)

    def apply_fn(p, k, train):
        # dropout masks through jaxclp's key type: JAX's bits, hashed ~10x faster on CPU (jaxclp/_rng.py)
        return model.apply(p, *inputs, train=train, rngs={"dropout": fast_key(k)})

    best, info = train_full_batch(apply_fn, params, drop_key, labels, train_mask, val_mask, cfg)
    prior = jax.nn.softmax(model.apply(best, *inputs, train=False), axis=-1)
    return GNNResult(prior, best, info)


def _tuned_build(graph, features, *, num_classes, spec):
    """``(model, inputs, init inputs)`` of :func:`fit_gnn`."""
    gt = tuned_gnn_graph(graph, spec.conv, spec.sep, nodes=features)
    symmetric = bool(graph.symmetric) and spec.conv == "gcn"  # GCN / GCN-sep: the symmetric CSR path, no plan
    plan = None if symmetric or spec.conv == "none" else transpose_plan(gt.senders, gt.receivers, graph.num_nodes)
    return _model(spec, num_classes, bool(graph.symmetric)), (gt, plan), (gt, plan)


def _tuned_kernel(key, graph, features, labels, train_mask, val_mask, *, num_classes, spec, cfg):
    model, inputs, _ = _tuned_build(graph, features, num_classes=num_classes, spec=spec)
    return _train_model(model, inputs, key, labels, train_mask, val_mask, cfg)


_TUNED_STATIC = ("num_classes", "spec", "cfg")
_fit_tuned_jit = jax.jit(_tuned_kernel, static_argnames=_TUNED_STATIC)


@functools.partial(jax.jit, static_argnames=_TUNED_STATIC)
def _fit_tuned_splits_jit(keys, graph, features, labels, train_masks, val_masks, *, num_classes, spec, cfg):
    f = functools.partial(_tuned_kernel, num_classes=num_classes, spec=spec, cfg=cfg)
    return jax.vmap(f, in_axes=(0, None, None, None, 0, 0))(keys, graph, features, labels, train_masks,
                                                            val_masks)


def _tuned_input(spec: GNNSpec):
    """Sparse-enough dense features enter as SparseFeatures unless the input itself is dropped out (whose masks
    a sparse input would draw differently)."""
    return as_features if spec.input_dropout else as_input_features


def fit_gnn(key: jax.Array, graph: Graph, features, labels, train_mask, val_mask, *, num_classes: int,
            spec: GNNSpec = GNNSpec(), cfg: TrainConfig = TrainConfig(),
            deadline: float | None = None) -> "GNNResult":
    """Trains a :class:`TunedGNN` (GCN / SAGE / GAT, options in ``spec``) full-batch with early stopping on
    validation ``cfg.metric``.

    Args:
        key: PRNG key (initialisation and dropout).
        graph: the graph (n nodes).
        features: (n, d) float features (cast to float32): dense, scipy.sparse or
            :class:`jaxclp.features.SparseFeatures` (the first layer is then a sparse product, never densified; dense
            features with <= 5 % nonzeros are passed the same way unless ``spec.input_dropout``,
            :func:`jaxclp.features.as_input_features`).
        labels: (n,) int labels; only ``train_mask | val_mask`` entries are read.
        train_mask, val_mask: (n,) bool.
        num_classes: K.
        spec: :class:`GNNSpec` architecture.
        cfg: optimiser settings (pass ``metric=dataset.metric``).
        deadline: a :func:`time.perf_counter` time where training stops (in chunks, the best parameters so far
            kept: :func:`jaxclp.train.fit_to_deadline`); None: none.

    Returns:
        :class:`GNNResult`; ``.prior`` (n, K) softmax usable as a CLP prior.

    Raises:
        ValueError: as :func:`fit_gcn`, plus a bad ``spec``.
    """
    spec = _check_spec(spec)
    num_classes, _, x = _validate(graph, features, labels, train_mask, val_mask, num_classes, (spec.hidden,),
                                  spec.dropout, scalar_hidden=False, to_features=_tuned_input(spec))
    if deadline is not None:
        return GNNResult(*fit_to_deadline(_tuned_build, dict(num_classes=num_classes, spec=spec), key, (graph, x),
                                          jnp.asarray(labels), train_mask, val_mask, cfg, deadline))
    return _fit_tuned_jit(key, graph, x, jnp.asarray(labels), train_mask,
                          val_mask, num_classes=num_classes, spec=spec, cfg=cfg)


def fit_gnn_splits(keys, graph: Graph, features, labels, train_masks, val_masks, *, num_classes: int,
                   spec: GNNSpec = GNNSpec(), cfg: TrainConfig = TrainConfig(),
                   chunk: int | None = None) -> "GNNResult":
    """:func:`fit_gnn` vmapped over S splits: keys (S,), masks (S, n) -> prior (S, n, K).

    Args:
        chunk: fit at most this many splits per vmapped program (bounds memory: activations scale with the
            number of splits in one program); ``None`` fits all S at once.
    """
    spec = _check_spec(spec)
    num_classes, _, x = _validate(graph, features, labels, train_masks, val_masks, num_classes, (spec.hidden,),
                                  spec.dropout, scalar_hidden=False, splits=True, keys=keys,
                                  to_features=_tuned_input(spec))
    y = jnp.asarray(labels)
    s = np.shape(train_masks)[0]
    step = s if chunk is None else max(1, int(chunk))
    parts = [_fit_tuned_splits_jit(keys[i:i + step], graph, x, y, train_masks[i:i + step], val_masks[i:i + step],
                                   num_classes=num_classes, spec=spec, cfg=cfg) for i in range(0, s, step)]
    return parts[0] if len(parts) == 1 else jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *parts)


# ------------------------------------------------------------------------------- a grid in one program
def _grid_static(spec: GNNSpec) -> GNNSpec:
    """What a grid program compiles in: ``spec`` without the per-candidate fields (depth, residual, norm, ffn)."""
    return spec._replace(num_layers=0, residual=False, norm=False, ffn=False)


def _grid_union(specs: Sequence[GNNSpec]) -> GNNSpec:
    """The spec whose parameters hold every spec's of ``specs`` (same static fields): the deepest, with LayerNorms
    and feed-forward layers where any spec has them."""
    return specs[0]._replace(num_layers=max(s.num_layers for s in specs), residual=True,
                             norm=any(s.norm for s in specs), ffn=any(s.ffn for s in specs))


def _drop(rate: float, key, x):
    """Inverted dropout of an array or of :class:`jaxclp.features.SparseFeatures`' stored values (as
    ``flax.linen.Dropout``: keep with probability ``1 - rate``, scale by its inverse)."""
    if rate == 0.0:
        return x
    values = x.values if isinstance(x, SparseFeatures) else x
    keep = jax.random.bernoulli(key, 1.0 - rate, values.shape)
    out = jax.lax.select(keep, values / (1.0 - rate), jnp.zeros_like(values))
    return x.with_values(out) if isinstance(x, SparseFeatures) else out


def _conv_module(spec: GNNSpec, symmetric: bool) -> nn.Module:
    """The block convolution :class:`TunedGNN` builds for ``spec`` (same parameter layout)."""
    if spec.conv == "gcn":
        return (GCNSepConv if spec.sep else GCNConv)(spec.hidden, True, symmetric)
    if spec.conv == "sage":
        return SAGEConv(spec.hidden, True)
    if spec.conv == "gat":
        return GATConv(spec.hidden, spec.heads, spec.sep, True)
    return nn.Dense(spec.hidden)


def _grid_logits(params, union: GNNSpec, flags, graph: jraph.GraphsTuple, plan, num_classes: int,
                 symmetric: bool, key, train: bool) -> jax.Array:
    """:class:`TunedGNN`'s logits for the candidate ``flags`` = (depth, residual, norm, ffn) (int32 (4,), traced),
    computed with the parameters of ``union`` (:func:`_grid_union`). Blocks past ``depth`` are skipped by a
    ``lax.cond`` (no arithmetic), and so is the tail a candidate does not use (plain or feed-forward).
    With ``train=False`` this is ``TunedGNN(spec).apply`` on the candidate's parameters; the dropout masks are
    drawn from ``key`` folded with the position of each dropout, not as flax draws them."""
    p = params["params"]
    depth, residual, norm, ffn = flags[0], flags[1] > 0, flags[2] > 0, flags[3] > 0
    rate = union.dropout if train else 0.0
    drop = lambda x, i: _drop(rate, jax.random.fold_in(key, i), x)
    x = graph.nodes
    x = drop(x, 0) if union.input_dropout else x
    from jaxclp.mlp import SparseDense

    first = (SparseDense if isinstance(x, SparseFeatures) else nn.Dense)(union.hidden)
    h = nn.relu(drop(first.apply({"params": p["input"]}, x), 1))
    conv = _conv_module(union, symmetric)
    layer_norm, dense = nn.LayerNorm(), nn.Dense(union.hidden)
    for i in range(union.num_layers):
        def block(h, i=i):
            z = jnp.where(norm, layer_norm.apply({"params": p[f"norm{i}"]}, h), h) if union.norm else h
            params_i = {"params": p[f"conv{i}"]}
            z = conv.apply(params_i, z) if union.conv == "none" else conv.apply(params_i, graph, z, plan)
            plain = lambda z: drop(nn.relu(z), 2 + 3 * i)
            if union.ffn:
                feed_forward = lambda z: drop(
                    dense.apply({"params": p[f"ffn{i}"]}, nn.gelu(drop(z, 3 + 3 * i), approximate=False)), 4 + 3 * i)
                tail = jax.lax.cond(ffn, feed_forward, plain, z)
            else:
                tail = plain(z)
            return jnp.where(residual, h + tail, tail)

        dtype = jax.eval_shape(block, h).dtype  # a float64 graph (x64) promotes the block's output
        h = jax.lax.cond(i < depth, block, lambda h: h.astype(dtype), h)
    if union.norm:
        h = jnp.where(norm, layer_norm.apply({"params": p["norm_out"]}, h), h)
    return nn.Dense(num_classes).apply({"params": p["output"]}, h)


def _grid_model(key, graph, features, flags, *, num_classes, spec):
    """``(apply_fn, initial params, dropout key)`` of the grid candidate ``flags`` (union ``spec``)."""
    gt = tuned_gnn_graph(graph, spec.conv, spec.sep, nodes=features)
    symmetric = bool(graph.symmetric) and spec.conv == "gcn"
    plan = None if symmetric or spec.conv == "none" else transpose_plan(gt.senders, gt.receivers, graph.num_nodes)
    init_key, drop_key = jax.random.split(key)
    params = _model(spec, num_classes, bool(graph.symmetric)).init(init_key, gt, plan, train=False)

    def apply_fn(p, k, train):
        return _grid_logits(p, spec, flags, gt, plan, num_classes, bool(graph.symmetric), fast_key(k), train)

    return apply_fn, params, drop_key


def _grid_kernel(key, graph, features, labels, train_mask, val_mask, flags, *, num_classes, spec, cfg):
    """Unvalidated body of :func:`fit_gnn_grid` for one candidate (``flags``) of the grid whose union is ``spec``."""
    apply_fn, params, drop_key = _grid_model(key, graph, features, flags, num_classes=num_classes, spec=spec)
    best, info = train_full_batch(apply_fn, params, drop_key, labels, train_mask, val_mask, cfg)
    return GNNResult(jax.nn.softmax(apply_fn(best, drop_key, False), axis=-1), best, info)


_fit_grid_jit = jax.jit(_grid_kernel, static_argnames=_TUNED_STATIC)


@functools.partial(jax.jit, static_argnames=_TUNED_STATIC)
def _grid_start_jit(key, graph, features, labels, train_mask, val_mask, flags, *, num_classes, spec, cfg):
    apply_fn, params, drop_key = _grid_model(key, graph, features, flags, num_classes=num_classes, spec=spec)
    return train_start(apply_fn, make_optimizer(cfg), params, drop_key, labels, train_mask, val_mask,
                       validation_metric(cfg.metric))


@functools.partial(jax.jit, static_argnames=_TUNED_STATIC)
def _grid_until_jit(state, until, key, graph, features, labels, train_mask, val_mask, flags, *, num_classes, spec,
                    cfg):
    apply_fn, _, _ = _grid_model(key, graph, features, flags, num_classes=num_classes, spec=spec)
    return train_until(apply_fn, make_optimizer(cfg), jnp.minimum(until, cfg.epochs), cfg.patience, state, labels,
                       train_mask, val_mask, validation_metric(cfg.metric))


@functools.partial(jax.jit, static_argnames=_TUNED_STATIC)
def _grid_outcome_jit(state, key, graph, features, flags, *, num_classes, spec, cfg):
    apply_fn, _, drop_key = _grid_model(key, graph, features, flags, num_classes=num_classes, spec=spec)
    best, info = train_outcome(state)
    return GNNResult(jax.nn.softmax(apply_fn(best, drop_key, False), axis=-1), best, info)


def _spec_params(params: dict, spec: GNNSpec) -> dict:
    """The entries of a union parameter tree that :class:`TunedGNN` ``(spec)`` has."""
    keep = {"input", "output"} | {f"conv{i}" for i in range(spec.num_layers)}
    keep |= {f"norm{i}" for i in range(spec.num_layers) if spec.norm} | ({"norm_out"} if spec.norm else set())
    keep |= {f"ffn{i}" for i in range(spec.num_layers) if spec.ffn}
    return {"params": {k: v for k, v in params["params"].items() if k in keep}}


def fit_gnn_grid(key: jax.Array, graph: Graph, features, labels, train_mask, val_mask, *, num_classes: int,
                 specs: Sequence[GNNSpec], cfg: TrainConfig = TrainConfig(),
                 rungs: Sequence[int] = (), rungs_min_val: int = 0,
                 deadline: float | None = None) -> list["GNNResult"]:
    """Trains every :class:`TunedGNN` of ``specs`` (as :func:`fit_gnn`, same ``key``), compiling one program for
    all specs that differ only in depth, residual connections, LayerNorm and feed-forward layers (a tuned grid,
    :func:`tuned_grid`: one program instead of 8).

    Each candidate starts from the parameters :func:`fit_gnn` would start from (the union model's, whose blocks
    are initialized by name), takes the same optimizer steps and is early-stopped the same way; blocks past its
    depth are skipped at run time. Only the dropout masks are drawn differently from :func:`fit_gnn`'s, so with
    ``dropout=0`` the two agree to float rounding, and otherwise as two seeds do.

    Args:
        key: PRNG key (initialisation and dropout), the same for every spec.
        graph, features, labels, train_mask, val_mask, num_classes, cfg: as :func:`fit_gnn`.
        specs: the candidates (any :class:`GNNSpec`s; those sharing conv, hidden, sep, dropout, heads and
            input dropout share a program).
        rungs: successive halving (:data:`HALVING_RUNGS`; empty: every spec trained to the end). At each rung
            (an epoch count, ascending), of the specs still training (not early-stopped) the better half (rounded
            up) goes on, ranked by their best validation ``cfg.metric`` so far (then lower validation loss, then
            order); the others stop there and keep their best parameters so far. A spec that goes on resumes where
            it was, so its result is the one it would reach without rungs; only the halved specs' are shorter.
        rungs_min_val: halve only where ``val_mask`` holds at least this many nodes (:data:`HALVING_MIN_VAL`:
            on smaller validation sets the early ranking misled, ``benchmarks/results/halving.md``); below it
            every spec trains to the end.
        deadline: a :func:`time.perf_counter` time (None: none). The specs then train in rounds
            (every spec still training advances one round; :data:`jaxclp.train.DEADLINE_EPOCHS` epochs first, then
            :func:`jaxclp.train.next_chunk`'s, rungs included), and training stops where the next round would
            end past ``deadline`` or the last one did: every spec keeps its best parameters so far, so the results
            are those of ``cfg.epochs`` cut to that round's end. A grid that ends before the deadline gives the
            results it gives without one, bit for bit.

    Returns:
        one :class:`GNNResult` per spec, in order; ``params`` holds the spec's own parameters
        (``TunedGNN(spec).apply(params, ...)`` gives its logits); ``info.epochs_run`` says where a halved spec
        (or every spec, under a ``deadline`` that ran out) stopped.

    Raises:
        ValueError: an empty ``specs``, rungs that are not positive ascending integers, or the checks of
            :func:`fit_gnn`.
    """
    specs = [_check_spec(s) for s in specs]
    if not specs:
        raise ValueError("specs is empty: pass at least one GNNSpec")
    num_classes, _, x = _validate(graph, features, labels, train_mask, val_mask, num_classes, (specs[0].hidden,),
                                  specs[0].dropout, scalar_hidden=False, to_features=_tuned_input(specs[0]))
    inputs = {_tuned_input(specs[0]): x}
    for s in specs[1:]:  # a group with input dropout takes the features as given (see _tuned_input)
        if _tuned_input(s) not in inputs:
            inputs[_tuned_input(s)] = _tuned_input(s)(features, jnp.float32)
    groups: dict[GNNSpec, list[GNNSpec]] = {}
    for s in specs:
        groups.setdefault(_grid_static(s), []).append(s)
    unions = {k: _grid_union(v) for k, v in groups.items()}
    rungs = tuple(rungs)
    if any(not isinstance(r, (int, np.integer)) or r < 1 for r in rungs) or list(rungs) != sorted(set(rungs)):
        raise ValueError(f"rungs must be ascending positive epoch counts, e.g. {HALVING_RUNGS}; got {rungs!r}")
    y, tm, vm = jnp.asarray(labels), jnp.asarray(train_mask), jnp.asarray(val_mask)
    flags = [jnp.asarray([s.num_layers, s.residual, s.norm, s.ffn], jnp.int32) for s in specs]
    if rungs and int(np.asarray(val_mask).sum()) < int(rungs_min_val):
        rungs = ()
    if not rungs and deadline is None:
        out = []
        for s, f in zip(specs, flags):
            r = _fit_grid_jit(key, graph, inputs[_tuned_input(s)], y, tm, vm, f, num_classes=num_classes,
                              spec=unions[_grid_static(s)], cfg=cfg)
            out.append(r._replace(params=_spec_params(r.params, s)))
        return out
    static = [dict(num_classes=num_classes, spec=unions[_grid_static(s)], cfg=cfg) for s in specs]
    data = [(graph, inputs[_tuned_input(s)]) for s in specs]
    states = [_grid_start_jit(key, g, x, y, tm, vm, f, **st) for (g, x), f, st in zip(data, flags, static)]
    going = list(range(len(specs)))
    done, rate, t = 0, None, time.perf_counter()
    while True:
        until = min([r for r in rungs if r > done] + [cfg.epochs])
        if deadline is not None:  # rounds of next_chunk's epochs, rungs included; 0: the next would end past it
            chunk = next_chunk(done, rate, deadline, t)
            if chunk == 0:
                break
            until = min(until, done + chunk)
        for i in going:
            states[i] = _grid_until_jit(states[i], until, key, *data[i], y, tm, vm, flags[i], **static[i])
        if until == cfg.epochs:
            break
        going = [i for i in going if not bool(train_stopped(states[i], cfg.patience))]  # waits for the round
        now = time.perf_counter()
        rate, done, t = (now - t) / (until - done), until, now
        if deadline is not None and now > deadline:
            break
        if until in rungs:
            rank = sorted(going, key=lambda i: (-float(states[i]["best_m"]), float(states[i]["best_loss"]), i))
            going = sorted(rank[:(len(rank) + 1) // 2])
    out = []
    for s, f, st, (g, x), state in zip(specs, flags, static, data, states):
        r = _grid_outcome_jit(state, key, g, x, f, **st)
        out.append(r._replace(params=_spec_params(r.params, s)))
    return out


HALVING_MIN_VAL = 500
"""Validation nodes from which successive halving applies (:func:`fit_gnn_grid`'s ``rungs_min_val``): one node is
then at most 0.2 points. Written after halving misled on validation sets of 13-119 nodes and judged on held-out
graphs (ACM, DBLP, Coauthor-CS/Physics: the same spec chosen, 27 % less time;
``benchmarks/results/halving_held_out.md``)."""

HALVING_RUNGS = (50, 100, 200)
"""Successive halving's rungs (epochs) for a tuned grid (:func:`fit_gnn_grid`'s ``rungs``): 8 specs train 50
epochs, the better 4 go on to 100, the better 2 to 200, the best one to the end (500, or its early stop)."""


# Platonov et al. (2023) / Luo et al. (2024)'s recipe for the tuned GNNs, chosen per split on validation:
# residual + LayerNorm blocks with a feed-forward layer at depths 1-5 and plain blocks at depths 1-3 (deeper plain
# GNNs oversmooth); hidden 64, dropout 0.2, Adam lr 1e-3, no weight decay, early stopping on the task metric.
TUNED_DEPTHS = (1, 2, 3, 4, 5)
TUNED_PLAIN_DEPTHS = (1, 2, 3)
TUNED_HIDDEN = 64
TUNED_DROPOUT = 0.2
TUNED_LR = 1e-3
TUNED_FFN = True


def tuned_grid(conv: str = "gcn", sep: bool = False, *, depths: Sequence[int] = TUNED_DEPTHS,
               plain_depths: Sequence[int] = TUNED_PLAIN_DEPTHS, hidden: int = TUNED_HIDDEN,
               dropout: float = TUNED_DROPOUT, heads: int = 4, ffn: bool = TUNED_FFN) -> list[GNNSpec]:
    """The :class:`GNNSpec` candidates of one tuned architecture: plain blocks at ``plain_depths``, then residual +
    LayerNorm blocks (with the feed-forward layer when ``ffn``) at ``depths`` (8 specs by default).

    Args:
        conv: block type, one of :data:`CONVS`.
        sep: keep the ego embedding apart (GCN-sep, GAT-sep; SAGE always does).
        depths, plain_depths: numbers of blocks of the residual / plain candidates.
        hidden, dropout, heads, ffn: as :class:`GNNSpec`.

    Returns:
        list of :class:`GNNSpec`, plain first, each depth ascending.
    """
    specs = [GNNSpec(conv=conv, hidden=hidden, num_layers=d, sep=sep, residual=r, norm=r, dropout=dropout,
                     heads=heads, ffn=r and ffn) for r, ds in ((False, plain_depths), (True, depths)) for d in ds]
    return [_check_spec(s) for s in specs]


def tuned_train_config(cfg: TrainConfig = TrainConfig(), lr: float = TUNED_LR,
                       weight_decay: float = 0.0) -> TrainConfig:
    """``cfg`` (epochs, patience, optimizer, metric kept) with the tuned recipe's learning rate and weight decay."""
    return cfg._replace(lr=float(lr), weight_decay=float(weight_decay))


def tuned_gnn_param_count(spec: GNNSpec, num_features: int, num_classes: int) -> int:
    """Trainable parameters of :class:`TunedGNN`.

    ``(d p + p)`` input + per block [GCN: ``p^2 + p``; GCN-sep / SAGE: ``2 p^2 + p``; GAT: ``p^2 + 2 p + p``
    (kernel, 2 attention vectors of H x p/H, bias), GAT-sep ``+ p^2``; none ``p^2 + p``; LayerNorm ``2 p``; ``ffn`` ``p^2 + p``] + output
    ``(p K + K)`` (+ ``2 p`` final LayerNorm).
    """
    spec = _check_spec(spec)
    g = Graph.from_edge_index(np.zeros((2, 0), np.int64), 1)
    x = jnp.zeros((1, int(num_features)), jnp.float32)
    net = _model(spec, int(num_classes))
    params = jax.eval_shape(lambda: net.init(jax.random.key(0), tuned_gnn_graph(g, spec.conv, spec.sep, x),
                                             train=False))
    return count_params(params)


# ------------------------------------------------------------------------------------------ fitting
class GNNResult(NamedTuple):
    """Output of :func:`fit_gcn` / :func:`fit_h2gcn` (every field gains a leading S axis for ``*_splits``).

    Attributes:
        prior: (n, K) softmax output at the selected parameters.
        params: the selected parameters (flax variables dict).
        info: :class:`jaxclp.train.TrainInfo`.
    """

    prior: jax.Array
    params: dict
    info: TrainInfo


def _validate(graph, features, labels, train_mask, val_mask, num_classes, hidden, dropout, *, scalar_hidden,
              splits=False, keys=None, to_features=as_features):
    """Eager checks of the fit_* inputs; returns ``(num_classes, hidden, features)``: int / tuple, and the
    float32 features as ``to_features`` converts them (:func:`jaxclp.features.as_features` or
    :func:`jaxclp.features.as_input_features`)."""
    if not isinstance(graph, Graph):
        raise ValueError(f"graph must be a jaxclp Graph; got {type(graph).__name__}")
    n = graph.num_nodes
    features = to_features(features, jnp.float32)  # converted once; SparseFeatures for sparse input
    _checks.features(features, n)
    _checks.shape("labels", labels, (n,))
    if _checks.is_concrete(labels) and not np.issubdtype(np.asarray(labels).dtype, np.integer):
        raise ValueError(f"labels must be integers; got dtype {np.asarray(labels).dtype}")
    num_classes = int(num_classes)
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2; got {num_classes}")
    if splits:
        _checks.shape("train_masks", train_mask, (None, n))
        s = np.shape(train_mask)[0]
        _checks.shape("val_masks", val_mask, (s, n))
        if keys is not None and np.shape(keys)[0] != s:
            raise ValueError(f"keys must have a leading axis of size {s} (one per split); got {np.shape(keys)}")
        for i in range(s) if _checks.is_concrete(train_mask, val_mask) else ():
            _checks.mask(f"train_masks[{i}]", np.asarray(train_mask)[i], n)
            _checks.mask(f"val_masks[{i}]", np.asarray(val_mask)[i], n, nonempty=False)
        seen = np.any(np.asarray(train_mask) | np.asarray(val_mask), axis=0) if _checks.is_concrete(
            train_mask, val_mask) else None
    else:
        _checks.mask("train_mask", train_mask, n)
        _checks.mask("val_mask", val_mask, n, nonempty=False)
        seen = np.asarray(train_mask) | np.asarray(val_mask) if _checks.is_concrete(train_mask, val_mask) else None
    if seen is not None and _checks.is_concrete(labels):
        y = np.asarray(labels)[seen]
        if y.size and (y.min() < 0 or y.max() >= num_classes):
            raise ValueError(f"labels on train/val nodes must lie in [0, {num_classes}); "
                             f"got range [{y.min()}, {y.max()}]")
    if scalar_hidden != (np.ndim(hidden) == 0):
        want = "an int (embedding width)" if scalar_hidden else "a sequence of widths"
        raise ValueError(f"hidden must be {want}; got {hidden!r}")
    hidden_t = (int(hidden),) if scalar_hidden else tuple(int(h) for h in hidden)
    if any(h < 1 for h in hidden_t):
        raise ValueError(f"hidden widths must be positive; got {hidden!r}")
    if not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"dropout must lie in [0, 1); got {dropout}")
    return num_classes, (hidden_t[0] if scalar_hidden else hidden_t), features


def _gcn_build(graph, features, *, num_classes, hidden, dropout):
    """``(model, inputs, init inputs)`` of :func:`fit_gcn` (:func:`jaxclp.train.fit_to_deadline`'s ``build``)."""
    # an undirected graph's GCN matrix D^-1/2 (A + I) D^-1/2 is symmetric: CSR kernel, gradient without a sort
    model = GCN(hidden=hidden, num_classes=num_classes, dropout=dropout, receivers_sorted=True,
                symmetric=bool(graph.symmetric))
    gt = gcn_normalized_graph(graph, nodes=features)
    return model, (gt,), (gt,)


def _h2gcn_build(graph, two_hop, features, *, num_classes, hidden, dropout, num_rounds):
    """``(model, inputs, init inputs)`` of :func:`fit_h2gcn`."""
    model = H2GCN(hidden=hidden, num_classes=num_classes, dropout=dropout, num_rounds=num_rounds,
                  receivers_sorted=True, symmetric=bool(graph.symmetric and two_hop.symmetric))
    hops = h2gcn_normalized_graphs(graph, two_hop, nodes=features)
    return model, hops, hops


def _gcn_kernel(key, graph, features, labels, train_mask, val_mask, *, num_classes, hidden, dropout, cfg):
    """Unvalidated, jit/vmap-able body of :func:`fit_gcn`."""
    model, inputs, _ = _gcn_build(graph, features, num_classes=num_classes, hidden=hidden, dropout=dropout)
    return _train_model(model, inputs, key, labels, train_mask, val_mask, cfg)


def _h2gcn_kernel(key, graph, two_hop, features, labels, train_mask, val_mask, *, num_classes, hidden, dropout,
                  num_rounds, cfg):
    """Unvalidated, jit/vmap-able body of :func:`fit_h2gcn`."""
    model, inputs, _ = _h2gcn_build(graph, two_hop, features, num_classes=num_classes, hidden=hidden,
                                    dropout=dropout, num_rounds=num_rounds)
    return _train_model(model, inputs, key, labels, train_mask, val_mask, cfg)


_GCN_STATIC = ("num_classes", "hidden", "dropout", "cfg")
_H2GCN_STATIC = ("num_classes", "hidden", "dropout", "num_rounds", "cfg")
_fit_gcn_jit = jax.jit(_gcn_kernel, static_argnames=_GCN_STATIC)
_fit_h2gcn_jit = jax.jit(_h2gcn_kernel, static_argnames=_H2GCN_STATIC)


@functools.partial(jax.jit, static_argnames=_GCN_STATIC)
def _fit_gcn_splits_jit(keys, graph, features, labels, train_masks, val_masks, *, num_classes, hidden, dropout,
                        cfg):
    f = functools.partial(_gcn_kernel, num_classes=num_classes, hidden=hidden, dropout=dropout, cfg=cfg)
    return jax.vmap(f, in_axes=(0, None, None, None, 0, 0))(keys, graph, features, labels, train_masks,
                                                            val_masks)


@functools.partial(jax.jit, static_argnames=_H2GCN_STATIC)
def _fit_h2gcn_splits_jit(keys, graph, two_hop, features, labels, train_masks, val_masks, *, num_classes, hidden,
                          dropout, num_rounds, cfg):
    f = functools.partial(_h2gcn_kernel, num_classes=num_classes, hidden=hidden, dropout=dropout,
                          num_rounds=num_rounds, cfg=cfg)
    return jax.vmap(f, in_axes=(0, None, None, None, None, 0, 0))(keys, graph, two_hop, features, labels,
                                                                  train_masks, val_masks)


def fit_gcn(
    key: jax.Array,
    graph: Graph,
    features: jax.Array,
    labels: jax.Array,
    train_mask: jax.Array,
    val_mask: jax.Array,
    *,
    num_classes: int,
    hidden: Sequence[int] = (64,),
    dropout: float = 0.5,
    cfg: TrainConfig = TrainConfig(),
    deadline: float | None = None,
) -> GNNResult:
    """Trains a GCN full-batch (jitted loop, early stopping on validation ``cfg.metric``).

    Args:
        key: PRNG key (initialisation and dropout).
        graph: the graph (n nodes); self-loops are added inside the normalization
            (:func:`gcn_normalized_graph`).
        features: (n, d) float features (cast to float32): dense, scipy.sparse or
            :class:`jaxclp.features.SparseFeatures` (the first layer is then a sparse product, never densified;
            dense input stays dense: this GCN drops its input features, and a sparse input draws other masks).
        labels: (n,) int labels; only ``train_mask | val_mask`` entries are read (others may be -1).
        train_mask, val_mask: (n,) bool.
        num_classes: K.
        hidden: hidden widths; ``(64,)`` is the 2-layer GCN.
        dropout: dropout rate on every layer's input.
        cfg: optimiser settings.
        deadline: as :func:`fit_gnn`'s (None: none).

    Returns:
        :class:`GNNResult` with prior (n, K).

    Raises:
        ValueError: shape mismatch, NaN/inf features, non-boolean or empty train mask, train/val labels out
            of [0, K), bad ``hidden`` / ``dropout``.
    """
    num_classes, hidden, x = _validate(graph, features, labels, train_mask, val_mask, num_classes, hidden, dropout,
                                       scalar_hidden=False)
    if deadline is not None:
        opts = dict(num_classes=num_classes, hidden=hidden, dropout=float(dropout))
        return GNNResult(*fit_to_deadline(_gcn_build, opts, key, (graph, x), jnp.asarray(labels), train_mask,
                                          val_mask, cfg, deadline))
    return _fit_gcn_jit(key, graph, x, jnp.asarray(labels), train_mask,
                        val_mask, num_classes=num_classes, hidden=hidden,
                        dropout=float(dropout), cfg=cfg)


def fit_gcn_splits(keys, graph: Graph, features, labels, train_masks, val_masks, *, num_classes: int,
                   hidden: Sequence[int] = (64,), dropout: float = 0.5, cfg: TrainConfig = TrainConfig()
                   ) -> GNNResult:
    """:func:`fit_gcn` vmapped over S splits: keys (S, ...), masks (S, n) -> prior (S, n, K).

    Split ``i`` gives the same result as ``fit_gcn(keys[i], ..., train_masks[i], val_masks[i])`` (up to
    floating-point reassociation under vmap).
    """
    num_classes, hidden, x = _validate(graph, features, labels, train_masks, val_masks, num_classes, hidden,
                                       dropout, scalar_hidden=False, splits=True, keys=keys)
    return _fit_gcn_splits_jit(keys, graph, x, jnp.asarray(labels),
                               train_masks, val_masks, num_classes=num_classes, hidden=hidden,
                               dropout=float(dropout), cfg=cfg)


def fit_h2gcn(
    key: jax.Array,
    graph: Graph,
    features: jax.Array,
    labels: jax.Array,
    train_mask: jax.Array,
    val_mask: jax.Array,
    *,
    num_classes: int,
    hidden: int = 64,
    dropout: float = 0.5,
    num_rounds: int = 2,
    two_hop: Graph | None = None,
    cfg: TrainConfig = TrainConfig(),
    deadline: float | None = None,
) -> GNNResult:
    """Trains H2GCN full-batch (jitted loop, early stopping on validation ``cfg.metric``).

    Args:
        key: PRNG key (initialisation and dropout).
        graph: the graph (n nodes); its self-loops are ignored.
        features: (n, d) float features (cast to float32): dense, scipy.sparse or
            :class:`jaxclp.features.SparseFeatures` (the first layer is then a sparse product, never densified; dense
            features with <= 5 % nonzeros are passed the same way, :func:`jaxclp.features.as_input_features`).
        labels: (n,) int labels; only ``train_mask | val_mask`` entries are read (others may be -1).
        train_mask, val_mask: (n,) bool.
        num_classes: K.
        hidden: embedding width p (the final representation has ``(2^(R+1) - 1) p`` = 7p columns).
        dropout: dropout rate on the final representation.
        num_rounds: R aggregation rounds (2 in the paper).
        two_hop: precomputed :func:`two_hop_graph` of ``graph`` (computed on the host when omitted, refused
            above :data:`MAX_TWO_HOP_EDGES` pairs, and kept for the next fit on the same ``graph`` object up to
            :data:`TWO_HOP_MEMO_MAX_EDGES` pairs).
        cfg: optimiser settings.
        deadline: as :func:`fit_gnn`'s (None: none).

    Returns:
        :class:`GNNResult` with prior (n, K).

    Raises:
        ValueError: as :func:`fit_gcn`, plus a ``two_hop`` graph of the wrong size.
        TwoHopTooLarge: (a ValueError) ``two_hop`` omitted and the 2-hop graph above :data:`MAX_TWO_HOP_EDGES`.
    """
    num_classes, hidden, x = _validate(graph, features, labels, train_mask, val_mask, num_classes, hidden, dropout,
                                       scalar_hidden=True, to_features=as_input_features)
    two_hop = _two_hop_or_check(graph, two_hop, num_rounds)
    if deadline is not None:
        opts = dict(num_classes=num_classes, hidden=int(hidden), dropout=float(dropout), num_rounds=int(num_rounds))
        return GNNResult(*fit_to_deadline(_h2gcn_build, opts, key, (graph, two_hop, x), jnp.asarray(labels),
                                          train_mask, val_mask, cfg, deadline))
    return _fit_h2gcn_jit(key, graph, two_hop, x, jnp.asarray(labels),
                          train_mask, val_mask, num_classes=num_classes, hidden=int(hidden),
                          dropout=float(dropout), num_rounds=int(num_rounds), cfg=cfg)


def fit_h2gcn_splits(keys, graph: Graph, features, labels, train_masks, val_masks, *, num_classes: int,
                     hidden: int = 64, dropout: float = 0.5, num_rounds: int = 2, two_hop: Graph | None = None,
                     cfg: TrainConfig = TrainConfig()) -> GNNResult:
    """:func:`fit_h2gcn` vmapped over S splits: keys (S, ...), masks (S, n) -> prior (S, n, K)."""
    num_classes, hidden, x = _validate(graph, features, labels, train_masks, val_masks, num_classes, hidden,
                                       dropout, scalar_hidden=True, splits=True, keys=keys,
                                       to_features=as_input_features)
    two_hop = _two_hop_or_check(graph, two_hop, num_rounds)
    return _fit_h2gcn_splits_jit(keys, graph, two_hop, x, jnp.asarray(labels),
                                 train_masks, val_masks, num_classes=num_classes, hidden=int(hidden),
                                 dropout=float(dropout), num_rounds=int(num_rounds), cfg=cfg)


def _two_hop_or_check(graph, two_hop, num_rounds):
    if int(num_rounds) < 1:
        raise ValueError(f"num_rounds must be >= 1; got {num_rounds}")
    if two_hop is None:
        return _two_hop_memo(graph, MAX_TWO_HOP_EDGES)
    _check_two_hop(graph, two_hop)
    return two_hop


def gnn_param_count(model: str, num_features: int, num_classes: int, hidden=None, *, num_rounds: int = 2) -> int:
    """Number of trainable parameters of a GNN baseline.

    Args:
        model: ``"gcn"`` or ``"h2gcn"``.
        num_features: d.
        num_classes: K.
        hidden: GCN hidden widths (default ``(64,)``) or H2GCN embedding width (default 64).
        num_rounds: H2GCN rounds.

    Returns:
        GCN: ``sum_l (p_l p_{l+1} + p_{l+1})``; H2GCN: ``d p + (2^(R+1) - 1) p K + K``.
    """
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}; got {model!r}")
    g = Graph.from_edge_index(np.zeros((2, 0), np.int64), 1)
    x = jnp.zeros((1, int(num_features)), jnp.float32)
    if model == "gcn":
        net = GCN(hidden=(64,) if hidden is None else tuple(hidden), num_classes=num_classes)
        init = lambda: net.init(jax.random.key(0), gcn_normalized_graph(g, x), train=False)  # noqa: E731
    else:
        net = H2GCN(hidden=64 if hidden is None else int(hidden), num_classes=num_classes, num_rounds=num_rounds)
        init = lambda: net.init(jax.random.key(0), *h2gcn_normalized_graphs(g, g, nodes=x),  # noqa: E731
                                train=False)
    params = jax.eval_shape(init)  # shapes only: nothing is compiled or run
    return count_params(params)
