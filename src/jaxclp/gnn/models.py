"""The GNN models (flax linen): Kipf & Welling's :class:`GCN`, :class:`H2GCN` (Zhu et al., 2020) and
:class:`TunedGNN` (GCN / GraphSAGE / GAT and their -sep variants, Platonov et al., 2023) with its architecture
:class:`GNNSpec`, the propagation graph each takes, and their parameter counts."""

from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np

from jaxclp.gnn.graphs import attention_graph, gcn_normalized_graph, h2gcn_normalized_graphs, mean_graph
from jaxclp.gnn.layers import GATConv, GCNConv, GCNSepConv, SAGEConv, _dropout, _input_dense, aggregate
from jaxclp.graph import Graph, edge_values
from jaxclp.sparse import TransposePlan
from jaxclp.train import count_params

MODELS = ("gcn", "h2gcn")
CONVS = ("gcn", "sage", "gat", "none")
"""Block types of :class:`TunedGNN`; ``"none"`` (a dense layer, no message passing) makes it Platonov et al.'s
ResNet baseline."""


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


# ---------------------------------------------------------------------------------- parameter counts
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
