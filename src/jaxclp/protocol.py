"""The graph protocol: the few primitives CLP's stages need from a graph.

Every stage (:func:`jaxclp.solve`, :func:`jaxclp.propagate`, :func:`jaxclp.clp_beliefs`,
:func:`jaxclp.estimate_compatibility`, :func:`jaxclp.spectral_radius`, :func:`jaxclp.clp_operator` and the
LP-family baselines) is written once against these primitives and never tests the graph's type (as ott-jax's
Sinkhorn uses any ``Geometry``, and lineax's solvers any operator). :class:`jaxclp.Graph` implements them on
one device; :class:`jaxclp.ShardedGraph` with its nodes split over a device mesh (halo exchanges inside).

Node-indexed arrays have a *user order* ``(n, ...)`` and an *internal order* ``(N, ...)`` (``N >= n``: a
sharded graph reorders the nodes and pads every shard; for a :class:`~jaxclp.Graph` both are the same and the
conversions return their input). Operators, products and solvers work in the internal order; stages convert at
their boundary only. Edge values (``edge_values``) are in the graph's own edge layout ((m,) for a Graph,
(P, E) for a sharded graph) and are only ever passed back to the same graph's products.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import jax

from jaxclp.graph import Normalization


@runtime_checkable
class GraphLike(Protocol):
    """What a graph provides to CLP's stages.

    Attributes:
        num_nodes: n, the user's node count.
        symmetric: ``Ahat`` is symmetric for "sym"/"none" normalization (the CG method's condition).
        weights: the raw edge weights in the graph's edge layout (the "none" edge values).
        has_edge_list: the graph holds its global edge list on one device: the methods that need it
            ("dense": the dense operators; "gmres": per-class transposable products) are available.
        real_rows: (N,) bool, False on padding rows of the internal order; None when there are none.
    """

    num_nodes: int
    symmetric: bool
    has_edge_list: bool

    @property
    def real_rows(self) -> jax.Array | None: ...

    def to_internal(self, x: jax.Array) -> jax.Array:
        """User order ``(n, ...)`` -> internal order ``(N, ...)`` (padding rows 0)."""

    def from_internal(self, x: jax.Array, axis: int = 0) -> jax.Array:
        """Internal order -> user order along the node axis ``axis`` (0, or 1 for an (A, N, K) stack)."""

    def edge_values(self, normalization: Normalization = "sym") -> jax.Array:
        """Entries of ``Ahat`` on the edges ("sym", "row" or "none")."""

    def spmm(self, values: jax.Array, x: jax.Array) -> jax.Array:
        """``Ahat @ x`` for per-edge ``values`` (one per edge, or (.., K) per class) and internal-order ``x``."""

    def spmm_transpose(self, values: jax.Array, x: jax.Array) -> jax.Array:
        """``Ahat.T @ x``."""

    def spmm_linear(self, values: jax.Array, x: jax.Array) -> jax.Array:
        """``Ahat @ x`` as a linear-transposable program (what implicit differentiation transposes)."""

    def factored_matvec(self, values, left, right, x) -> jax.Array:
        """``left * (Ahat @ (right * x))`` for (N, K) ``left``, ``right``, ``x`` (fused where possible)."""

    def factored_rmatvec(self, values, left, right, x) -> jax.Array:
        """``right * (Ahat.T @ (left * x))``."""

    def self_loops(self, values: jax.Array) -> jax.Array:
        """(N,) the diagonal of ``Ahat`` (the values of self-loop edges, summed per node)."""

    def edge_matrix(self, values, left, right) -> jax.Array:
        """Per-class edge values ``values[e] * left[r_e, k] * right[s_e, k]`` in the edge layout (+ K)."""

    def edge_ends(self, x: jax.Array, *, loops: bool = True) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(x[r_e], x[s_e], real)`` for internal-order ``x`` in the edge layout: the rows of each edge's receiver
        and sender, and a bool that is False on padding edges (and on self-loops when ``loops`` is False)."""
