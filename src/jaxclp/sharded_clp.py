"""The CLP stages on a node-sharded graph, with the halo ``exchange`` of their products named.

A :class:`~jaxclp.sharded_graph.ShardedGraph` implements the graph protocol (:mod:`jaxclp.protocol`), so
:func:`jaxclp.solve`, :func:`jaxclp.propagate`, :func:`jaxclp.clp_beliefs`, :func:`jaxclp.estimate_compatibility`,
:func:`jaxclp.spectral_radius` and the baselines take it in place of a :class:`jaxclp.Graph` (user order in and
out). The functions here are those stages with the ``exchange`` argument of the halo products
(:func:`jaxclp.halo.sharded_spmm`) and, for the operators, internal-order inputs; they hold no code path of their
own. The sharded graph itself is built by :mod:`jaxclp.sharded_graph` (:func:`~jaxclp.sharded_graph.shard_graph`,
:func:`~jaxclp.sharded_graph.shard_graph_local`, the user <-> internal order), from the node order of
:mod:`jaxclp.partition` and the host-side plan of :mod:`jaxclp.halo_plan`; :mod:`jaxclp.halo` runs the exchanges.

Many processes (``jax.distributed.initialize``): the mesh spans every process's devices and the same calls run
unchanged (``tests/scale/test_distributed.py``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# the stages' modules, except propagate and solve: the package's attributes of those names are the functions
from jaxclp import baselines, clp, compatibility, homophily, operator
from jaxclp.graph import Normalization
from jaxclp.halo import Exchange, _check_rows
from jaxclp.operator import FactoredOperator
from jaxclp.propagate import propagate as _propagate
from jaxclp.solve import solve as _solve, solve_operator as _solve_operator
from jaxclp.sharded_graph import ShardedGraph

__all__ = [
    "SHARDED_METHODS", "ShardedOperator", "clp_beliefs", "clp_operator", "clp_star", "edge_homophily",
    "estimate_compatibility", "label_propagation", "lp_operator", "propagate", "propagate_labels", "solve",
    "solve_operator", "spectral_radius",
]

SHARDED_METHODS = ("neumann", "jacobi", "bicgstab", "cg")
"""The solver methods a :class:`ShardedGraph` supports (no global edge list: no "dense", no "gmres")."""


class ShardedOperator(FactoredOperator):
    """A :class:`jaxclp.operator.FactoredOperator` on a :class:`ShardedGraph` (internal order).

    ``ShardedOperator(sg, values, left, right)``: the halo exchange is the graph's (:meth:`ShardedGraph.
    with_exchange`, static data of the pytree); :attr:`exchange` reads it.
    """

    __slots__ = ()

    @property
    def exchange(self) -> str:
        """The halo exchange of every product."""
        return self.graph.exchange


def _on(sg: ShardedGraph, exchange: Exchange) -> ShardedGraph:
    if not isinstance(sg, ShardedGraph):
        raise ValueError(f"sg must be a ShardedGraph (jaxclp.shard_graph); got {type(sg).__name__}")
    return sg.with_exchange(exchange)


def edge_homophily(sg: ShardedGraph, labels, *, exchange: Exchange = "ppermute") -> jax.Array:
    """:func:`jaxclp.edge_homophily` with the halo ``exchange`` named."""
    return homophily.edge_homophily(_on(sg, exchange), labels)


def clp_operator(sg: ShardedGraph, b0_internal: jax.Array, H: jax.Array, *,
                 normalization: Normalization = "sym", exchange: Exchange = "ppermute") -> ShardedOperator:
    """The K CLP operators ``diag(b0[:, k]) Ahat diag((b0 @ H)[:, k])`` on internal-order ``b0`` (P * b, K)
    (:func:`jaxclp.clp_operator` takes the user's order)."""
    sg = _on(sg, exchange)
    _check_rows("b0_internal", b0_internal, sg.padded_nodes)
    op = operator.clp_operator(sg, sg.from_internal(b0_internal), H, normalization=normalization)
    return ShardedOperator(*op)


def lp_operator(sg: ShardedGraph, num_classes: int, *, normalization: Normalization = "sym", dtype=jnp.float32,
                exchange: Exchange = "ppermute") -> ShardedOperator:
    """:func:`jaxclp.operator.lp_operator` (``left = right = 1`` on the real rows, 0 on padding rows)."""
    return ShardedOperator(*operator.lp_operator(_on(sg, exchange), num_classes, normalization=normalization,
                                                 dtype=dtype))


def spectral_radius(sg: ShardedGraph, b0, H, *, normalization: Normalization = "sym", tol: float = 1e-6,
                    max_iters: int = 1000, exchange: Exchange = "ppermute"):
    """:func:`jaxclp.spectral_radius` (``b0`` in the user's order)."""
    return operator.spectral_radius(_on(sg, exchange), b0, H, normalization=normalization, tol=tol,
                                    max_iters=max_iters)


def estimate_compatibility(sg: ShardedGraph, prior, labels, train_mask, *, tol: float = 1e-6,
                           max_iters: int = 100_000, smoothing: float = 1e-6, exchange: Exchange = "ppermute"):
    """:func:`jaxclp.estimate_compatibility` (user order in)."""
    return compatibility.estimate_compatibility(_on(sg, exchange), prior, labels, train_mask, tol=tol,
                                         max_iters=max_iters, smoothing=smoothing)


def propagate(sg: ShardedGraph, b0, H, prior, *, alpha: float, num_iters: int = 50,
              normalization: Normalization = "sym", l1_normalize: bool = False, throw: bool = True,
              exchange: Exchange = "ppermute") -> jax.Array:
    """:func:`jaxclp.propagate` (user order in and out)."""
    return _propagate(_on(sg, exchange), b0, H, prior, alpha=alpha, num_iters=num_iters,
                      normalization=normalization, l1_normalize=l1_normalize, throw=throw)


def solve(sg: ShardedGraph, b0, H, prior, *, alpha, normalization: Normalization = "sym", method: str = "auto",
          tol: float = 1e-6, max_iters: int = 10_000, throw: bool = True, exchange: Exchange = "ppermute"):
    """:func:`jaxclp.solve` (user order in and out; methods "auto" and :data:`SHARDED_METHODS`)."""
    return _solve(_on(sg, exchange), b0, H, prior, alpha=alpha, normalization=normalization, method=method,
                  tol=tol, max_iters=max_iters, throw=throw)


def solve_operator(op: FactoredOperator, prior: jax.Array, *, alpha, method: str = "auto", tol: float = 1e-6,
                   max_iters: int = 10_000, normalization: Normalization = "sym", throw: bool = False,
                   internal: bool = False):
    """:func:`jaxclp.solve.solve_operator` for an operator on a sharded graph and an internal-order prior; the
    value in the user's order (``internal=True``: the internal order, as :func:`jaxclp.solve.solve_operator`)."""
    sol = _solve_operator(op, prior, alpha=alpha, method=method, tol=tol, max_iters=max_iters,
                          normalization=normalization, throw=throw)
    if internal:
        return sol
    return sol._replace(value=op.graph.from_internal(sol.value, axis=sol.value.ndim - 2))


def propagate_labels(sg: ShardedGraph, x0, *, alpha, normalization: Normalization = "sym", method: str = "auto",
                     tol: float = 1e-6, max_iters: int = 10_000, num_layers: int | None = None, clamp=None,
                     reset_mask=None, exchange: Exchange = "ppermute"):
    """:func:`jaxclp.baselines.propagate_labels` (user order in and out)."""
    return baselines.propagate_labels(_on(sg, exchange), x0, alpha=alpha, normalization=normalization,
                                      method=method, tol=tol, max_iters=max_iters, num_layers=num_layers,
                                      clamp=clamp, reset_mask=reset_mask)


def label_propagation(sg: ShardedGraph, labels, train_mask, num_classes: int, *, alpha,
                      normalization: Normalization = "sym", method: str = "auto", tol: float = 1e-6,
                      max_iters: int = 10_000, exchange: Exchange = "ppermute") -> jax.Array:
    """:func:`jaxclp.label_propagation` (closed form; user order in and out)."""
    return baselines.label_propagation(_on(sg, exchange), labels, train_mask, num_classes, alpha=alpha,
                                       normalization=normalization, method=method, tol=tol, max_iters=max_iters)


def clp_star(sg: ShardedGraph, prior, start, H, *, alpha, num_iters: int = 50,
             normalization: Normalization = "sym", exchange: Exchange = "ppermute") -> jax.Array:
    """:func:`jaxclp.clp_star` (user order in and out)."""
    return baselines.clp_star(_on(sg, exchange), prior, start, H, alpha=alpha, num_iters=num_iters,
                              normalization=normalization)


def clp_beliefs(sg: ShardedGraph, prior, labels, train_mask, *, alphas=None, exchange: Exchange = "ppermute",
                **kwargs):
    """:func:`jaxclp.clp_beliefs` (every variant; beliefs in the user's order)."""
    return clp.clp_beliefs(_on(sg, exchange), prior, labels, train_mask,
                           alphas=clp.DEFAULT_ALPHAS if alphas is None else alphas, **kwargs)
