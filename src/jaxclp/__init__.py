"""jaxclp: Compatible Label Propagation (Zhong, Ivanov, Pang, TMLR 2022) in JAX.

Pipeline stages (each a pure function of arrays): :func:`fit_mlp` -> :func:`initial_beliefs` ->
:func:`estimate_compatibility` (:func:`sinkhorn`) -> :func:`edge_weights` / :func:`clp_operator` ->
:func:`propagate` (iterative) or :func:`solve` (closed form). :class:`CLP` composes them for users.
"""
from jaxclp import datasets, priors, shard
from jaxclp.baselines import clp_star, correct_and_smooth, fit_link, label_propagation, propagate_labels
from jaxclp.clp import CLPResult, clp_beliefs
from jaxclp.compatibility import edge_weights, estimate_compatibility, initial_beliefs
from jaxclp.end_to_end import EndToEndResult, fit_end_to_end
from jaxclp.estimator import CLP, NotFittedError
from jaxclp.features import SparseFeatures, as_features, as_input_features
from jaxclp.gnn import (GCN, H2GCN, GCNConv, GNNResult, fit_gcn, fit_gcn_splits, fit_h2gcn, fit_h2gcn_splits,
                        gcn_normalized_graph, gnn_param_count, h2gcn_normalized_graphs, two_hop_graph,
                        TwoHopTooLarge, check_two_hop_size)
from jaxclp.gnn import GNNSpec, TunedGNN, fit_gnn, fit_gnn_grid, fit_gnn_splits, tuned_gnn_param_count, tuned_grid
from jaxclp.graph import Graph, edge_values, spmm, spmm_transpose
from jaxclp.homophily import (compatibility_distance, edge_homophily, node_homophily, node_homophily_per_node,
                              true_compatibility)
from jaxclp.metrics import accuracy, roc_auc
from jaxclp.mlp import MLP, fit_mlp, fit_mlp_splits, mlp_param_count
from jaxclp.nonlinear import NonlinearResult, nonlinear_grid, nonlinear_propagate, nonlinear_starts
from jaxclp.operator import FactoredOperator, SpectralInfo, clp_operator, lp_operator, spectral_radius, spectral_scale
from jaxclp.priors import (LINKX, PRIORS, PriorResult, fit_prior, gnn_prior, link_prior, linkx_prior, mlp_prior,
                           tuned_gnn_prior)
from jaxclp.propagate import PropagateInfo, propagate
from jaxclp.protocol import GraphLike
from jaxclp.shard import ShardedGraph, shard_graph, shard_graph_local
from jaxclp.sinkhorn import SinkhornInfo, sinkhorn
from jaxclp.solve import METHODS, Solution, solve, solve_operator
from jaxclp.train import TrainConfig

__version__ = "0.1.0"

__all__ = [
    "CLP", "CLPResult", "NotFittedError", "FactoredOperator", "GCN", "GCNConv", "GNNResult", "H2GCN", "fit_gcn", "fit_gcn_splits",
    "fit_h2gcn", "fit_h2gcn_splits", "gcn_normalized_graph", "gnn_param_count", "h2gcn_normalized_graphs",
    "two_hop_graph", "TwoHopTooLarge", "check_two_hop_size", "GNNSpec", "TunedGNN", "fit_gnn", "fit_gnn_grid", "fit_gnn_splits", "tuned_gnn_param_count", "tuned_grid", "Graph", "METHODS", "MLP", "PropagateInfo", "SinkhornInfo",
    "Solution", "SparseFeatures", "SpectralInfo", "TrainConfig", "accuracy", "as_features", "as_input_features",
    "clp_beliefs",
    "clp_operator", "clp_star",
    "compatibility_distance", "correct_and_smooth", "datasets", "edge_homophily", "edge_values",
    "edge_weights", "estimate_compatibility", "fit_link", "fit_mlp", "fit_mlp_splits", "initial_beliefs",
    "label_propagation", "lp_operator", "mlp_param_count", "node_homophily", "node_homophily_per_node", "propagate",
    "propagate_labels", "roc_auc", "sinkhorn", "solve", "solve_operator", "spectral_radius", "spmm",
    "spmm_transpose", "true_compatibility", "NonlinearResult", "nonlinear_grid", "nonlinear_propagate",
    "nonlinear_starts", "spectral_scale", "priors", "LINKX", "PRIORS", "PriorResult", "fit_prior", "gnn_prior", "tuned_gnn_prior",
    "link_prior", "linkx_prior", "mlp_prior", "shard", "ShardedGraph", "shard_graph", "shard_graph_local",
    "EndToEndResult", "fit_end_to_end", "GraphLike",
]

_DEPRECATED = {"authors_grid": "nonlinear_grid", "authors_propagate": "nonlinear_propagate",
               "authors_starts": "nonlinear_starts", "AuthorsResult": "NonlinearResult"}
"""Deprecated top-level name -> its replacement (kept for one release; not in ``__all__``)."""


def __getattr__(name: str):
    """The deprecated names of :data:`_DEPRECATED` (and the module ``jaxclp.authors``), with a DeprecationWarning."""
    if name in _DEPRECATED:
        import warnings

        new = _DEPRECATED[name]
        warnings.warn(f"jaxclp.{name} is deprecated and will be removed in the next release; use jaxclp.{new}",
                      DeprecationWarning, stacklevel=2)
        return globals()[new]
    if name == "authors":  # the deprecated module (it warns on import)
        import importlib

        return importlib.import_module("jaxclp.authors")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
