"""Exact explanations of CLP's closed form: which nodes' starting beliefs make up a node's score.

For a fixed compatibility matrix H and fixed edge weights F (both computed from the starting beliefs ``B0`` and
held fixed: the explanation is of the linear map they define, not of how H or F would move), CLP's closed form is
linear in the propagated start ``D``, class by class::

    B[:, k] = (1 - a) G_k D[:, k],      G_k = (I - a A^F_k)^{-1}

so node ``i``'s class-k score is the sum of one term per source node ``j``::

    c[i, j, k] = (1 - a) G_k[i, j] D[j, k],      sum_j c[i, j, k] = B[i, k]   (completeness)

``D`` is what the variant propagates: the prior (``prior_source="mlp"``) or ``B0`` (``"b0"``: labelled rows are
their one-hot labels). The rows ``G_k[i, :]`` of a batch of query nodes come from ONE transposed solve per class
and query, ``(I - a A^F_k)^T g = e_i``, vmapped over queries and classes (static shapes, jit-able), with the
library's solvers (:func:`jaxclp.solve.solve_operator`'s methods, on the transposed operator). Every term is
nonnegative (``A^F_k >= 0`` and ``a rho(A^F_k) < 1``), so shares of a score are percentages.

Each query's score is split into the labelled nodes' terms (``j`` in the training set: label terms with
``"b0"``, the labelled nodes' prior rows with ``"mlp"``) and the prior term (the sum over the unlabelled nodes,
the node itself included: the base predictor's share). Not covered: the base predictor's own reasoning (each
node's prior row is one term), how H and F depend on the labels, and the nonlinear steps (the per-step L1
variant, the authors' step of :mod:`jaxclp.nonlinear`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp.clp import PriorSource, check_variant
from jaxclp.compatibility import initial_beliefs
from jaxclp.graph import Graph, Normalization
from jaxclp.operator import FactoredOperator, clp_operator, norm_bounds, spectral_scale as _spectral_scale
from jaxclp.solve import (SOLVERS, EDGE_LIST_METHODS, Method, _solve_raw, bicgstab_columns, cg_valid,
                          choose_method, solve_operator, system_norm)


class Explanation(NamedTuple):
    """Exact decomposition of CLP's closed-form scores at query nodes (:func:`explain`).

    Attributes:
        nodes: (Q,) the query nodes (indices 0..n-1).
        contributions: (Q, n, K) ``c[q, j, k] = (1 - a) G_k[i_q, j] D[j, k]``: source node j's term of query
            q's class-k score (nonnegative; summing over j gives the score).
        labelled_term: (Q, K) the sum of the terms of the labelled (training) nodes.
        prior_term: (Q, K) the sum of the terms of the other nodes (the node itself included when unlabelled):
            the base predictor's share.
        scores: (Q, K) the closed form's beliefs at the queries (a forward solve, as :func:`jaxclp.clp_beliefs`).
        train_mask: (n,) bool, the labelled nodes of the split above.
        completeness: (Q, K) ``|sum_j c[q, j, k] - scores[q, k]|`` (zero up to the solvers' tolerance).
        residual: (Q, K) ``||e_i - (I - a A^F_k)^T g||_2`` of each transposed solve (``||e_i|| = 1``).
        converged: (Q, K) bool, each transposed solve's residual within ``tol`` or the precision floor.
        alpha: the alpha explained.
        method: the solver used ("identity" for ``alpha = 0``: every score is the node's own start).
    """

    nodes: np.ndarray
    contributions: jax.Array
    labelled_term: jax.Array
    prior_term: jax.Array
    scores: jax.Array
    train_mask: jax.Array
    completeness: jax.Array
    residual: jax.Array
    converged: jax.Array
    alpha: float
    method: str


def _check_nodes(nodes, n: int) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(nodes))
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"nodes must be a node index or a nonempty 1-D list of node indices; got {nodes!r}")
    bad = arr[(arr < 0) | (arr >= n)]
    if bad.size:
        raise ValueError(f"nodes must be node indices in [0, {n}); got {bad[:5].tolist()}")
    return arr.astype(np.int64)


@functools.partial(jax.jit, static_argnames=("method", "max_iters"))
def _rows(op: FactoredOperator, onehots, alpha, method: str, tol, max_iters):
    """Rows ``G_k[i, :]`` of every query: ``(I - a A^F_k)^T g = e_i`` for every class, vmapped over queries.

    Args:
        op: the operator (internal order).
        onehots: (N, Q) the queries' unit vectors in the internal order.

    Returns:
        ``(g (Q, N, K), residual (Q, K), relative backward error (Q, K))``.
    """
    k = op.left.shape[1]
    rows, cols = norm_bounds(op)
    m_norm = system_norm(alpha, cols, rows)  # the transpose swaps row and column sums

    def one(e):
        rhs = jnp.broadcast_to(e[:, None], (e.shape[0], k)).astype(op.left.dtype)
        if method == "bicgstab":  # a dense shadow residual: with the unit vector itself BiCGStab breaks down
            g, _ = bicgstab_columns(lambda x: x - alpha * op.rmatvec(x), rhs, tol, max_iters,
                                    shadow=jnp.ones_like(rhs))
        else:
            g, _ = _solve_raw(op, rhs, alpha, method, tol, max_iters, transpose=True, m_norm=m_norm)
        r = jnp.linalg.norm(rhs - (g - alpha * op.rmatvec(g)), axis=0)
        eta = r / (m_norm * jnp.linalg.norm(g, axis=0) + 1.0)
        return g, r, eta

    return jax.vmap(one, in_axes=1)(onehots)


@jax.jit
def _terms(g, d, alpha, train):
    """``(1 - a) g * d`` and its labelled / unlabelled sums (user order, (Q, n, K))."""
    c = (1.0 - alpha) * g * d[None]
    lab = jnp.sum(jnp.where(train[None, :, None], c, 0.0), axis=1)
    return c, lab, jnp.sum(c, axis=1) - lab


def explain(graph: Graph, prior, labels, train_mask, H, alpha: float, nodes, *,
            normalization: Normalization = "sym", prior_source: PriorSource = "mlp", spectral_scale: bool = False,
            method: Method = "auto", tol: float = 1e-6, max_iters: int = 10_000) -> Explanation:
    """Exact per-source-node decomposition of CLP's closed-form scores at ``nodes`` (module docstring).

    Args:
        graph: the graph (any graph of the protocol; the dense and GMRES methods need its edge list).
        prior: (n, K) prior D (row-stochastic), as :func:`jaxclp.clp_beliefs` takes it.
        labels: (n,) int labels; only ``train_mask`` entries are read.
        train_mask: (n,) bool, the labelled nodes.
        H: (K, K) compatibility (held fixed, as the edge weights built from ``B0`` and H).
        alpha: the alpha of the closed form, in [0, 1); 0 explains the start alone (each score is the node's own
            start row: its prior with "mlp").
        nodes: a node index or a 1-D list of Q indices.
        normalization, prior_source, spectral_scale: the linear variant (:func:`jaxclp.clp_beliefs`); with
            ``spectral_scale`` the operators are divided by their spectral radii exactly as there.
        method: the solver of both the transposed and the forward solves ("auto": :func:`jaxclp.solve.choose_method`).
        tol, max_iters: the solvers' tolerance and iteration cap.

    Returns:
        :class:`Explanation` (arrays in the user's node order).

    Raises:
        ValueError: bad arrays, nodes, alpha or variant (named); ``alpha * rho >= 1`` is not checked here (use the
            alpha a fit chose, or :func:`jaxclp.spectral_radius`).
    """
    check_variant(normalization, prior_source, "sinkhorn", False, spectral_scale)
    prior, labels, train_mask = jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(train_mask)
    n = graph.num_nodes
    _checks.shape("prior", prior, (n, None))
    q = _check_nodes(nodes, n)
    a = float(alpha)
    if not (np.isfinite(a) and 0.0 <= a < 1.0):
        raise ValueError(f"alpha must lie in [0, 1); got {alpha!r}")
    labels = jnp.where(train_mask, labels, 0)
    if a == 0.0 and prior_source == "mlp":  # no operator: an empty train_mask is fine
        _checks.mask("train_mask", train_mask, n, nonempty=False)
        b0 = None
        d = prior
    else:
        b0 = initial_beliefs(prior, labels, train_mask)
        d = prior if prior_source == "mlp" else b0
    k = prior.shape[1]
    if a == 0.0:  # the start alone: G = I
        g = jax.nn.one_hot(jnp.asarray(q), n, dtype=d.dtype)[:, :, None] * jnp.ones((1, 1, k), d.dtype)
        c, lab, pri = _terms(g, d, jnp.asarray(0.0, d.dtype), train_mask)
        scores = d[jnp.asarray(q)]
        zeros = jnp.zeros((q.size, k), d.dtype)
        return Explanation(q, c, lab, pri, scores, train_mask, jnp.abs(lab + pri - scores), zeros,
                           jnp.ones((q.size, k), bool), 0.0, "identity")
    op = clp_operator(graph, b0, H, normalization=normalization)
    if spectral_scale:
        op, _ = _spectral_scale(op)
    if method == "auto":
        rows, cols = norm_bounds(op)
        method = choose_method(graph, normalization, a * float(np.max(np.asarray(jnp.minimum(rows, cols)))))
    elif method not in SOLVERS:
        raise ValueError(f"method must be 'auto' or one of {SOLVERS}; got {method!r}")
    if method in EDGE_LIST_METHODS and not graph.has_edge_list:
        raise ValueError(f"method={method!r} needs the graph's edge list; use 'auto' or an iterative method")
    if method == "cg" and not cg_valid(graph, normalization):
        raise ValueError("method='cg' needs a symmetric Ahat (an undirected graph with normalization 'sym' or "
                         "'none'); use 'bicgstab', 'gmres' or 'dense'")
    alpha_arr = jnp.asarray(a, op.left.dtype)
    onehots = graph.to_internal(jax.nn.one_hot(jnp.asarray(q), n, dtype=op.left.dtype).T)
    g, res, eta = _rows(op, onehots, alpha_arr, method, tol, int(max_iters))
    g = graph.from_internal(g, axis=1)
    c, lab, pri = _terms(g, d.astype(g.dtype), alpha_arr, train_mask)
    fwd = solve_operator(op, graph.to_internal(d.astype(op.left.dtype)), alpha=a, method=method, tol=tol,
                         max_iters=max_iters, normalization=normalization)
    scores = graph.from_internal(fwd.value)[jnp.asarray(q)]
    floor = 4.0 * float(jnp.finfo(g.dtype).eps)
    converged = (res <= tol) | (eta <= floor)
    return Explanation(q, c, lab, pri, scores, train_mask, jnp.abs(lab + pri - scores), res, converged, a, method)


def hops(graph: Graph, node: int, max_hops: int | None = None) -> np.ndarray:
    """(n,) int: the number of edges on the shortest path from each node TO ``node`` along the edges' direction
    (the way propagation carries a source's belief to the query; the same either way on an undirected graph);
    -1 where there is none (or beyond ``max_hops``). Needs the graph's edge list (a :class:`jaxclp.Graph`)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order

    n = int(graph.num_nodes)
    if not graph.has_edge_list:
        raise ValueError("hops needs the graph's edge list (a jaxclp.Graph)")
    r, s = np.asarray(graph.receivers), np.asarray(graph.senders)
    # csgraph follows m[u, v] from u to v: from a receiver back to its senders
    m = sp.csr_matrix((np.ones(r.size, np.int8), (r, s)), shape=(n, n))
    order, pred = breadth_first_order(m, int(node), directed=True, return_predecessors=True)
    dist = np.full(n, -1, np.int64)
    dist[int(node)] = 0
    for v in order[1:]:  # BFS order: a node's predecessor is settled before it
        dist[v] = dist[pred[v]] + 1
    if max_hops is not None:
        dist[dist > max_hops] = -1
    return dist


def top_sources(expl: Explanation, query: int, cls: int, top: int, labelled_only: bool = True):
    """The ``top`` largest terms of one query's class ``cls``: ``[(node, contribution), ...]`` (float64), largest
    first (ties: smaller node first); only labelled nodes by default."""
    c = np.asarray(expl.contributions[query, :, cls], np.float64)
    idx = np.flatnonzero(np.asarray(expl.train_mask)) if labelled_only else np.arange(c.size)
    order = idx[np.lexsort((idx, -c[idx]))][:max(int(top), 0)]
    return [(int(j), float(c[j])) for j in order]
