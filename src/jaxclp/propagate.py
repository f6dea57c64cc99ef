"""Iterative CLP propagation (method step 5), all classes at once."""

from __future__ import annotations

import warnings
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp.graph import Graph, Normalization, check_normalization
from jaxclp.operator import (FactoredOperator, SpectralInfo, a_priori_bound, clp_operator, norm_bounds,
                             operator_spectral_radius)

Engine = Literal["factored", "edgewise"]


class PropagateInfo(NamedTuple):
    """Diagnostics of :func:`propagate` (returned with ``return_info=True``).

    Attributes:
        residual: (K,) ``||(1-a) D_k - (I - a A^F_k) B_k||_2`` of the returned B (linear variant; for the
            L1-normalized variant it measures the distance from the linear fixed point equation).
        relative_residual: (K,) residual divided by ``||(1-a) D_k||_2``.
        spectral: the :class:`SpectralInfo` used by the check, or None when it was skipped.
    """

    residual: jax.Array
    relative_residual: jax.Array
    spectral: SpectralInfo | None


def _l1_rows(b):
    s = b.sum(axis=1, keepdims=True)
    return b / jnp.where(s > 0, s, 1.0)


def iterate(op: FactoredOperator, prior: jax.Array, start: jax.Array, alpha, num_iters,
            l1_normalize: bool = False, edge_matrix: jax.Array | None = None) -> jax.Array:
    """``num_iters`` steps of ``B <- (1-alpha) prior + alpha op(B)`` from ``start`` (jit-able kernel).

    Args:
        op: the K operators.
        prior: (n, K) D.
        start: (n, K) initial B.
        alpha: scalar in (0, 1).
        num_iters: number of steps (may be traced).
        l1_normalize: L1-normalize each node's class vector after every step, i.e. AFTER mixing (not the
            authors' code, which normalizes the propagated term before mixing: :mod:`jaxclp.nonlinear`).
        edge_matrix: optional precomputed (m, K) per-class edge values (the "edgewise" engine).
    """
    if edge_matrix is None:
        apply = op.matvec
    else:
        def apply(x):
            return op.graph.spmm(edge_matrix, x)

    def step(_, b):
        b = (1.0 - alpha) * prior + alpha * apply(b)
        return _l1_rows(b) if l1_normalize else b

    return jax.lax.fori_loop(0, num_iters, step, start)


_iterate_jit = jax.jit(iterate, static_argnames=("l1_normalize",))


def residual(op: FactoredOperator, prior: jax.Array, x: jax.Array, alpha) -> tuple[jax.Array, jax.Array]:
    """(K,) absolute and relative residual ``||(1-a) D - (x - a op(x))||`` per class (our own check)."""
    rhs = (1.0 - alpha) * prior
    r = rhs - (x - alpha * op.matvec(x))
    res = jnp.linalg.norm(r, axis=0)
    den = jnp.linalg.norm(rhs, axis=0)
    return res, res / jnp.where(den > 0, den, 1.0)


def check_spectrum(op: FactoredOperator, alpha, *, throw: bool = True, what: str = "CLP",
                   normalization: Normalization | None = None) -> SpectralInfo | None:
    """Checks ``alpha * rho(A^F_k) < 1`` for every class k (eager; skipped for traced input).

    Uses the a-priori bound (:func:`jaxclp.operator.a_priori_bound`, rho <= 1 for normalized CLP operators)
    and the cheap row/column-sum bound first, and runs the power iteration only when neither already proves
    convergence. ``op`` is a FactoredOperator on any graph of the protocol.

    Raises:
        ValueError: (``throw=True``) naming the first divergent class, its rho and the largest alpha that
            converges; with ``throw=False`` a ``RuntimeWarning`` is issued instead.
    """
    if not _checks.is_concrete(alpha, op.left, op.right, op.values):
        return None
    a = float(np.max(np.asarray(alpha)))
    if normalization is not None and a * a_priori_bound(op, normalization) < 1.0:
        return None
    rows, cols = norm_bounds(op)
    if a * float(jnp.max(jnp.minimum(rows, cols))) < 1.0:
        return None
    info = operator_spectral_radius(op)
    report_divergence(np.asarray(info.rho), a, throw=throw, what=what, stacklevel=4)
    return info


def report_divergence(rho: np.ndarray, alpha: float, *, throw: bool, what: str, stacklevel: int = 3) -> None:
    """Raises (``throw``) or warns when ``alpha * rho[k] >= 1`` for some class, naming the first such class,
    its rho and the largest alpha that converges (:func:`check_spectrum`)."""
    bad = np.flatnonzero(alpha * rho >= 1.0)
    if bad.size:
        k = int(bad[0])
        msg = (f"{what} iteration diverges: class {k} has spectral radius rho = {rho[k]:.6g} and "
               f"alpha * rho = {alpha * rho[k]:.6g} >= 1; the iteration converges only for alpha < 1/rho = "
               f"{1.0 / rho[k]:.6g} (classes that diverge: {bad.tolist()}). Use a normalized adjacency "
               f"(normalization='sym' or 'row'), a smaller alpha, or l1_normalize=True.")
        if throw:
            raise ValueError(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=stacklevel)


def propagate(
    graph: Graph,
    b0: jax.Array,
    H: jax.Array,
    prior: jax.Array,
    *,
    alpha: float,
    num_iters: int = 50,
    normalization: Normalization = "sym",
    l1_normalize: bool = False,
    engine: Engine = "factored",
    throw: bool = True,
    return_info: bool = False,
):
    """Iterative CLP: ``B[:, k] <- (1-alpha) prior[:, k] + alpha * A^F_k B[:, k]``, started from ``b0``.

    ``A^F_k[r, s] = Ahat[r, s] * F[e, k]`` with ``F[e, k] = (b0[s] @ H)[k] * b0[r, k]``. All classes are
    propagated at once with one SpMM per step (``engine="factored"``: ``b0 * (Ahat @ ((b0 @ H) * B))``), or
    with precomputed (m, K) edge values (``engine="edgewise"``; same result, more memory).

    Before iterating (linear variant, concrete input) the spectral condition ``alpha * rho(A^F_k) < 1`` is
    checked for every class; see :func:`check_spectrum`.

    Args:
        graph: the graph.
        b0: (n, K) initial beliefs (``M*Y + (1-M)*prior``).
        H: (K, K) compatibility.
        prior: (n, K) prior D.
        alpha: propagation strength in (0, 1).
        num_iters: number of steps.
        normalization: adjacency normalization of ``Ahat``: "sym", "row" or "none" (raw 0/1).
        l1_normalize: L1-normalize every node's class vector after each step, AFTER mixing:
            ``B <- L1rows((1-a) D + a A^F B)`` (nonlinear, no closed form, never diverges). This is not the
            authors' step (they normalize the propagated term before mixing, with a residual start and a
            post step): use :func:`jaxclp.nonlinear.nonlinear_propagate` for that.
        engine: "factored" or "edgewise".
        throw: raise on a divergent configuration (else warn and return the diverging iterate).
        return_info: also return a :class:`PropagateInfo`.

    ``graph`` is any graph of the protocol (:mod:`jaxclp.protocol`), e.g. a :class:`jaxclp.ShardedGraph`
    (:func:`jaxclp.shard_graph`): the same result in the user's node order.

    Returns:
        (n, K) beliefs B, or ``(B, info)`` with ``return_info=True``.
    """
    _checks.clp_inputs(graph.num_nodes, b0, H, prior)
    _checks.alpha(alpha)
    check_normalization(normalization)
    if engine not in ("factored", "edgewise"):
        raise ValueError(f"engine must be 'factored' or 'edgewise'; got {engine!r}")
    if _checks.is_concrete(num_iters) and int(num_iters) < 0:
        raise ValueError(f"num_iters must be >= 0; got {num_iters}")
    op = clp_operator(graph, b0, H, normalization=normalization)
    spectral = None if l1_normalize else check_spectrum(op, alpha, throw=throw, normalization=normalization)
    edge_matrix = op.edge_matrix() if engine == "edgewise" else None
    prior = graph.to_internal(jnp.asarray(prior).astype(op.left.dtype))
    b = _iterate_jit(op, prior, op.left, jnp.asarray(alpha, op.left.dtype), num_iters,
                     l1_normalize=l1_normalize, edge_matrix=edge_matrix)
    if not return_info:
        return graph.from_internal(b)
    res, rel = residual(op, prior, b, alpha)
    return graph.from_internal(b), PropagateInfo(res, rel, spectral)
