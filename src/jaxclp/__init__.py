"""jaxclp: Compatible Label Propagation (Zhong, Ivanov, Pang, TMLR 2022) in JAX.

Pipeline stages (each a pure function of arrays): :func:`fit_mlp` (or :func:`fit_prior`) -> :func:`initial_beliefs`
-> :func:`estimate_compatibility` (:func:`sinkhorn`) -> :func:`edge_weights` / :func:`clp_operator` ->
:func:`propagate` (iterative) or :func:`solve` (closed form). :class:`CLP` composes them for users.

The top level holds what a user calls (``__all__``, listed on the API reference's index page); everything else is
imported from the module that defines it: :mod:`jaxclp.graph` (``spmm``, ``edge_values``), :mod:`jaxclp.operator`
(``lp_operator``, ``FactoredOperator``, ``spectral_scale``), :mod:`jaxclp.solve` (``solve_operator``,
``SOLVERS``), :mod:`jaxclp.baselines` (``propagate_labels``, ``fit_link``), :mod:`jaxclp.nonlinear`,
:mod:`jaxclp.mlp`, :mod:`jaxclp.gnn`, :mod:`jaxclp.priors`, :mod:`jaxclp.features`, :mod:`jaxclp.homophily`,
:mod:`jaxclp.sharded_graph` and :mod:`jaxclp.sharded_clp`.
"""
from jaxclp import datasets
from jaxclp.baselines import clp_star, correct_and_smooth, label_propagation
from jaxclp.clp import CLPResult, clp_beliefs
from jaxclp.compilation_cache import enable_compilation_cache
from jaxclp.compatibility import edge_weights, estimate_compatibility, initial_beliefs
from jaxclp.end_to_end import EndToEndResult, fit_end_to_end
from jaxclp.estimator import CLP, NotFittedError
from jaxclp.graph import Graph
from jaxclp.homophily import compatibility_distance, edge_homophily, node_homophily, true_compatibility
from jaxclp.metrics import accuracy, roc_auc
from jaxclp.mlp import fit_mlp
from jaxclp.operator import SpectralInfo, clp_operator, spectral_radius
from jaxclp.priors import PRIORS, PriorResult, fit_prior
from jaxclp.propagate import PropagateInfo, propagate
from jaxclp.protocol import GraphLike
from jaxclp.sharded_graph import ShardedGraph, shard_graph, shard_graph_local
from jaxclp.sinkhorn import SinkhornInfo, sinkhorn
from jaxclp.solve import Solution, solve
from jaxclp.train import TrainConfig

__version__ = "0.1.0"

__all__ = [
    # the estimator and end-to-end training
    "CLP", "NotFittedError", "fit_end_to_end", "EndToEndResult",
    # graphs
    "Graph", "GraphLike", "ShardedGraph", "shard_graph", "shard_graph_local",
    # the pipeline stages and what they return
    "initial_beliefs", "estimate_compatibility", "sinkhorn", "SinkhornInfo", "edge_weights", "clp_operator",
    "spectral_radius", "SpectralInfo", "propagate", "PropagateInfo", "solve", "Solution", "clp_beliefs",
    "CLPResult",
    # priors
    "fit_prior", "PRIORS", "PriorResult", "fit_mlp", "TrainConfig",
    # baselines
    "label_propagation", "correct_and_smooth", "clp_star",
    # data, metrics, homophily
    "datasets", "accuracy", "roc_auc", "edge_homophily", "node_homophily", "true_compatibility",
    "compatibility_distance",
    # set-up
    "enable_compilation_cache",
]
