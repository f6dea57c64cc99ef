"""Shape buckets: a prior's training programs sized by a bucket of the graph's size, not by the size itself.

XLA compiles one program per input shape. Fitting a prior on a graph of n nodes and m edges compiles its
training programs for (n, m); a graph of n + 1 nodes compiles them all again, and the persistent compilation
cache serves only the same shapes. Padded to :func:`bucket` sizes, graphs of similar size share their
programs: the nodes to ``bucket(n + 1)`` (at least one padding node), the edges (and a 2-hop graph's edges) to
``bucket(m)``. The padding changes nothing but the rounding of sums over nodes (which training can amplify:
:data:`BUCKETED_PRIORS`):

* padding nodes have zero features, label -1 and are in no mask (never in a loss, a metric, an early stop);
* padding edges are self-loops of weight 0 on the last padding node (appended last, so the receivers stay
  sorted and every real node's sums run over the same edges in the same order); padding nodes have no real
  neighbour, so nothing flows between them and the graph;
* random draws along the node axis (dropout masks) give the real nodes the bits they get unpadded (JAX's
  partitionable Threefry hashes the row-major element index, which padding rows only extend).

Feature width and classes are not padded: a layer's initialisation depends on its width.
:func:`pad_inputs` pads a prior's inputs and :func:`unpad_nodes` takes the first n rows back, on the host
(slicing on the device would compile a program per n).

CLP's propagation stages (compatibility, operator, solves; label propagation, C&S) run on
:func:`propagation_graph`: the padded graph with its padding nodes marked (:attr:`jaxclp.Graph.real`), whose
internal order zeroes their rows, so every operator, solve and norm is the real nodes' (up to the rounding of sums
over more zeros), compiled for the bucket (tests/core/test_padded_propagation.py).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import numpy as np

from jaxclp.features import SparseFeatures
from jaxclp.graph import Graph

MANTISSAS = (4, 5, 6, 7)
"""Bucket sizes are ``m * 2**e`` for these ``m``: consecutive sizes differ by at most 5/4, so padding costs at
most 25 % more nodes or edges."""

MIN_NODES = 64
"""The smallest node bucket."""

MIN_EDGES = 256
"""The smallest edge bucket."""

BUCKETED_PRIORS = ("mlp", "link", "linkx", "gcn", "h2gcn", "sage", "gcn_tuned", "sage_tuned")
"""The predictors (:data:`jaxclp.priors.PRIORS` names) whose fit on padded inputs is the unpadded fit's computation
up to the rounding of sums over nodes (tests/priors/test_buckets.py: equal within 2e-6 on small graphs). Training
can amplify rounding: on a 10k-node graph after 100 epochs the priors differ by <= 1e-6 (MLP, GCN, tuned GCN), 1e-3
(H2GCN), 0 (LINK), but LINKX's batch statistics carry it to 0.1 (28 of 10241 predicted classes change;
``benchmarks/results/bucket_overhead.md``). Not GAT: its attention's self-loops follow the edges, so its dropout
draws move."""

NODE_COUNT_PRIORS = ("link", "linkx")
"""The predictors of :data:`BUCKETED_PRIORS` that take the real node count (``num_nodes=``): a layer as wide as
the node count initialised to its fan-in, LINKX's batch statistics over the real nodes."""


def bucket(size: int, minimum: int = 1) -> int:
    """The smallest bucket size ``m * 2**e`` (``m`` in :data:`MANTISSAS`) that is >= ``max(size, minimum)``.

    Args:
        size: a nonnegative count.
        minimum: the smallest size returned.

    Returns:
        int >= size, at most 5/4 of it above ``minimum`` (1.25 * size rounded up to a bucket boundary).
    """
    size = max(int(size), int(minimum), 1)
    if size <= MANTISSAS[0]:
        return size
    e = max(size.bit_length() - 3, 0)  # size < 8 * 2**e: some m * 2**e with m <= 7, or 8 * 2**e = 4 * 2**(e+1)
    for m in MANTISSAS:
        if m << e >= size:
            return m << e
    return MANTISSAS[0] << (e + 1)


class Padded(NamedTuple):
    """A prior's inputs padded to buckets (see the module docstring).

    Attributes:
        graph: the graph with ``bucket(n + 1)`` nodes and ``bucket(m)`` edges.
        features: (n_b, d) features (dense or :class:`jaxclp.features.SparseFeatures`), or None.
        labels: (n_b,) or (S, n_b) labels, -1 on padding nodes (None: not given yet, :func:`with_split`).
        train_mask, val_mask: (n_b,) or (S, n_b) bool masks, False on padding nodes (None: as ``labels``).
        two_hop: the 2-hop graph padded alike (its own edge bucket), or None.
        num_nodes: the real n (:func:`unpad_nodes` keeps these rows).
    """

    graph: Graph
    features: object
    labels: jax.Array
    train_mask: jax.Array
    val_mask: jax.Array
    two_hop: Graph | None
    num_nodes: int

    @property
    def padded(self) -> bool:
        """Whether the inputs have padding nodes (False: a :class:`Padded` of the inputs as they are)."""
        return self.graph is not None and self.graph.num_nodes != self.num_nodes


def node_bucket(num_nodes: int) -> int:
    """``bucket(num_nodes + 1, MIN_NODES)``: at least one padding node, which holds the padding edges."""
    return bucket(int(num_nodes) + 1, MIN_NODES)


def pad_graph(graph: Graph, num_nodes: int | None = None, num_edges: int | None = None) -> Graph:
    """``graph`` with ``num_nodes`` nodes and ``num_edges`` edges (None: :func:`node_bucket` and
    ``bucket(m, MIN_EDGES)``): the extra edges are weight-0 self-loops on the last node, appended (receivers stay
    sorted; the CSR pointers and the transposed CSR are extended alike).

    Raises:
        ValueError: ``num_nodes`` <= n with edges to pad (they need a padding node), or fewer than n nodes or m
            edges.
    """
    n, m = graph.num_nodes, graph.num_edges
    nb = node_bucket(n) if num_nodes is None else int(num_nodes)
    mb = bucket(m, MIN_EDGES) if num_edges is None else int(num_edges)
    if nb < n or mb < m or (mb > m and nb <= n):
        raise ValueError(f"cannot pad a graph of {n} nodes and {m} edges to {nb} nodes and {mb} edges "
                         "(padding edges need a padding node)")
    if nb == n and mb == m:
        return graph
    last = nb - 1
    extra = mb - m

    def ids(a):
        return np.concatenate([np.asarray(a, np.int32), np.full(extra, last, np.int32)])

    def pointers(p):  # real rows as they are, padding rows empty but the last, which holds the extra edges
        if p is None:
            return None
        p = np.asarray(p, np.int32)
        return np.concatenate([p, np.full(nb - n - 1, m, np.int32), np.asarray([mb], np.int32)])

    weights = np.concatenate([np.asarray(graph.weights), np.zeros(extra, np.asarray(graph.weights).dtype)])
    perm = None if graph.transpose_perm is None else np.concatenate(
        [np.asarray(graph.transpose_perm, np.int32), np.arange(m, mb, dtype=np.int32)])
    put = jax.device_put
    return Graph(senders=put(ids(graph.senders)), receivers=put(ids(graph.receivers)), weights=put(weights),
                 num_nodes=nb, symmetric=graph.symmetric,
                 indptr=None if graph.indptr is None else put(pointers(graph.indptr)),
                 transpose_perm=None if perm is None else put(perm),
                 transpose_indptr=None if graph.transpose_indptr is None else put(pointers(graph.transpose_indptr)))


def propagation_graph(graph: Graph) -> Graph:
    """``graph`` padded to its buckets (:func:`pad_graph`) with its padding nodes marked (:attr:`Graph.real`): the
    graph CLP's propagation stages (compatibility, operator, solves, label propagation, C&S) run on so that graphs
    of similar size share their programs. Its user order has the bucket's rows: pad node arrays with
    :func:`pad_nodes` (a prior with any valid rows, e.g. :func:`pad_prior`) and take the first n rows back."""
    padded = pad_graph(graph, node_bucket(graph.num_nodes))
    real = np.zeros(padded.num_nodes, bool)
    real[:graph.num_nodes] = True
    return dataclasses.replace(padded, real=jax.device_put(real))


def pad_prior(prior, num_nodes: int) -> jax.Array:
    """(n, K) prior rows padded to ``num_nodes`` with uniform rows (a valid prior everywhere; the padding rows
    of a :func:`propagation_graph` are zeroed inside the stages), on the host."""
    return jax.device_put(_pad_axis(prior, num_nodes, 1.0 / np.shape(prior)[1], axis=0))


def _pad_axis(a, size: int, fill, axis: int = -1) -> np.ndarray:
    a = np.asarray(a)
    widths = [(0, 0)] * a.ndim
    widths[axis] = (0, size - a.shape[axis])
    return np.pad(a, widths, constant_values=fill)


def pad_nodes(a, num_nodes: int, fill) -> jax.Array:
    """(..., n) labels or masks padded with ``fill`` to (..., num_nodes), on the host, put on the device."""
    return jax.device_put(_pad_axis(a, num_nodes, fill))


def pad_features(features, num_nodes: int):
    """(n, d) features with zero rows up to ``num_nodes`` > n (dense: on the host; :class:`SparseFeatures`: its
    nonzeros padded to ``bucket(nnz)`` with zeros on the last row, its plan rebuilt), or None for None."""
    if features is None:
        return None
    if isinstance(features, SparseFeatures):
        nnz = features.nnz
        extra = bucket(nnz, MIN_EDGES) - nnz  # zeros on the last padding node, column 0: appended, rows stay sorted
        rows = np.concatenate([np.asarray(features.rows, np.int32), np.full(extra, num_nodes - 1, np.int32)])
        cols = np.concatenate([np.asarray(features.cols, np.int32), np.zeros(extra, np.int32)])
        values = np.concatenate([np.asarray(features.values), np.zeros(extra, features.dtype)])
        padded = SparseFeatures(jax.device_put(rows), jax.device_put(cols), jax.device_put(values),
                                (num_nodes, features.shape[1]))
        return padded.with_plan() if features.plan is not None else padded
    return jax.device_put(_pad_axis(features, num_nodes, 0, axis=0))


def pad_inputs(graph: Graph, features, labels=None, train_mask=None, val_mask=None,
               two_hop: Graph | None = None) -> Padded:
    """A prior's inputs padded to buckets (:class:`Padded`; labels and masks (n,) or (S, n), padded on their
    last axis by :func:`with_split`; None: left for :func:`with_split`, e.g. one graph and many splits)."""
    n = graph.num_nodes
    nb = node_bucket(n)
    padded = Padded(graph=pad_graph(graph, nb), features=pad_features(features, nb), labels=None, train_mask=None,
                    val_mask=None, two_hop=None if two_hop is None else pad_graph(two_hop, nb), num_nodes=n)
    return padded if labels is None else with_split(padded, labels, train_mask, val_mask)


def with_split(inputs: Padded, labels, train_mask, val_mask) -> Padded:
    """``inputs`` with a split's (n,) or (S, n) labels and masks padded to its node bucket: -1 and False on the
    padding nodes (on the host, put on the device)."""
    nb = inputs.graph.num_nodes
    return inputs._replace(labels=pad_nodes(labels, nb, -1), train_mask=pad_nodes(train_mask, nb, False),
                           val_mask=pad_nodes(val_mask, nb, False))


def node_count(inputs: Padded, name: str) -> dict:
    """``{"num_nodes": n}`` where ``inputs`` are padded and the prior ``name`` takes the real node count
    (:data:`NODE_COUNT_PRIORS`), else ``{}``: the keyword options its fit needs on these inputs."""
    return {"num_nodes": inputs.num_nodes} if inputs.padded and name in NODE_COUNT_PRIORS else {}


def unpad_nodes(a, num_nodes: int, axis: int = 0) -> jax.Array:
    """The first ``num_nodes`` entries of ``a`` along ``axis``, sliced on the host and put back on the device."""
    return jax.device_put(np.take(np.asarray(a), np.arange(num_nodes), axis=axis))
