"""GNN baselines: GCN (Kipf & Welling, 2017), H2GCN (Zhu et al., 2020) and the tuned GNNs of Platonov et al. (2023),
in jraph + flax linen.

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
  ``k = 1..K`` (K = 2 rounds), and ``logits = Dropout([r0 || r1 || ... || rK]) W_c + b_c``. The 2-hop graph is
  a value: built per call where ``two_hop`` is omitted, or built once by the caller and passed.

Modules, each importing only those above it:

* :mod:`jaxclp.gnn.two_hop`: H2GCN's 2-hop graph (:func:`two_hop_graph`, its size limit and check).
* :mod:`jaxclp.gnn.graphs`: propagation graphs (GCN, H2GCN, mean and attention edge lists with coefficients).
* :mod:`jaxclp.gnn.layers`: message passing (:func:`aggregate`), GAT attention and the convolution layers.
* :mod:`jaxclp.gnn.models`: :class:`GCN`, :class:`H2GCN`, :class:`TunedGNN` / :class:`GNNSpec`, parameter counts.
* :mod:`jaxclp.gnn.fit`: :func:`fit_gcn`, :func:`fit_h2gcn`, :func:`fit_gnn` and their ``*_splits``.
* :mod:`jaxclp.gnn.grid`: a tuned grid in one program (:func:`fit_gnn_grid`, successive halving), the tuned recipe.

This package re-exports their public names (and, for existing callers, the private helpers the priors, tests and
benchmarks use; new code imports those from their module).
"""

from jaxclp.gnn.two_hop import (MAX_TWO_HOP_EDGES, TwoHopTooLarge, check_two_hop_size, default_two_hop_graph,
                                two_hop_graph)
from jaxclp.gnn.graphs import attention_graph, gcn_normalized_graph, h2gcn_normalized_graphs, mean_graph
from jaxclp.gnn.layers import GATConv, GCNConv, GCNSepConv, SAGEConv, aggregate, gat_attention, gat_scores
from jaxclp.gnn.models import (CONVS, GCN, H2GCN, MODELS, GNNSpec, TunedGNN, gnn_param_count, tuned_gnn_graph,
                               tuned_gnn_param_count)
from jaxclp.gnn.fit import GNNResult, fit_gcn, fit_gcn_splits, fit_gnn, fit_gnn_splits, fit_h2gcn, fit_h2gcn_splits
from jaxclp.gnn.grid import (HALVING_MIN_VAL, HALVING_RUNGS, TUNED_DEPTHS, TUNED_DROPOUT, TUNED_FFN, TUNED_HIDDEN,
                             TUNED_LR, TUNED_PLAIN_DEPTHS, fit_gnn_grid, tuned_grid, tuned_train_config)

# private helpers used from outside the package (jaxclp.priors, tests, benchmarks/): kept importable from here
from jaxclp.gnn.models import _model  # noqa: F401
from jaxclp.gnn.fit import _train_model, _tuned_build  # noqa: F401
from jaxclp.gnn.grid import _grid_chunk_jit, _grid_model, _grid_start, _grid_union  # noqa: F401
from jaxclp.train import train_stopped  # noqa: F401  (benchmarks/halving.py reads it as gnn.train_stopped)

__all__ = [
    "MAX_TWO_HOP_EDGES", "TwoHopTooLarge", "check_two_hop_size", "default_two_hop_graph", "two_hop_graph",
    "attention_graph", "gcn_normalized_graph", "h2gcn_normalized_graphs", "mean_graph",
    "GATConv", "GCNConv", "GCNSepConv", "SAGEConv", "aggregate", "gat_attention", "gat_scores",
    "CONVS", "GCN", "H2GCN", "MODELS", "GNNSpec", "TunedGNN", "gnn_param_count", "tuned_gnn_graph",
    "tuned_gnn_param_count",
    "GNNResult", "fit_gcn", "fit_gcn_splits", "fit_gnn", "fit_gnn_splits", "fit_h2gcn", "fit_h2gcn_splits",
    "HALVING_MIN_VAL", "HALVING_RUNGS", "TUNED_DEPTHS", "TUNED_DROPOUT", "TUNED_FFN", "TUNED_HIDDEN", "TUNED_LR",
    "TUNED_PLAIN_DEPTHS", "fit_gnn_grid", "tuned_grid", "tuned_train_config",
]
