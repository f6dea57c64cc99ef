"""CLP end to end for a given prior: B0, H, and the propagated beliefs for a grid of alphas.

Variants (all selectable on validation by :class:`jaxclp.CLP` and the runner):

* ``normalization``: "sym" / "row" / "none" adjacency inside the propagation (H is always estimated with
  the raw adjacency).
* ``l1_normalize``: a per-step L1 normalization of each node's class vector AFTER mixing,
  ``B <- L1rows((1-a) D + a A^F B)`` (nonlinear, iterative only, ``num_iters`` steps). This is NOT the authors'
  code, which normalizes the propagated term BEFORE mixing and has further switches: that step is
  :mod:`jaxclp.nonlinear` (runner method ``clp_authors``).
* ``spectral_scale``: every class operator divided by its spectral radius (:func:`jaxclp.operator.spectral_scale`)
  so that every alpha in (0, 1) converges and means the same on every graph (linear variant only).
* ``prior_source``: "mlp" propagates ``D`` (the paper's update); "b0" uses ``B0`` (training labels clamped
  into the prior, a residual/label-reuse prior).
* ``compat``: "sinkhorn" (the paper's one-shot ``H = Sinkhorn((M*Y)^T A B0)``) or "refined": H re-estimated
  ONCE per alpha from the propagated beliefs. For each alpha the first-pass closed form ``B(alpha)`` gives
  ``B1 = M*Y + (1-M) * L1rows(B(alpha))`` and ``H'(alpha) = Sinkhorn((M*Y)^T A B1)`` (the same estimator,
  :func:`jaxclp.estimate_compatibility` with ``L1rows(B(alpha))`` as its prior); the beliefs are then the
  closed form again with the operator built from the paper's ``B0`` and ``H'(alpha)`` (only H changes).
  Linear variant only (with or without ``spectral_scale``).
"""

from __future__ import annotations

import functools
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp.compatibility import estimate_compatibility, initial_beliefs, masked_labels
from jaxclp.graph import Graph, Normalization, check_normalization, cpu_resident
from jaxclp.operator import (SpectralInfo, a_priori_bound, clp_operator, norm_bounds, operator_spectral_radius,
                             spectral_scale)
from jaxclp.propagate import _iterate_jit
from jaxclp.sinkhorn import SinkhornInfo
from jaxclp.solve import Method, in_alpha_chunks, solve_operator

PriorSource = Literal["mlp", "b0"]
Compat = Literal["sinkhorn", "refined"]
DEFAULT_ALPHAS = tuple(round(0.1 * i, 1) for i in range(1, 10))


class CLPResult(NamedTuple):
    """Beliefs for every alpha of a grid, with the diagnostics.

    Attributes:
        beliefs: (A, n, K) propagated beliefs (rows of zeros where ``valid`` is False).
        alphas: (A,) the grid.
        valid: (A,) bool, False where ``alpha * rho >= 1`` (the linear iteration diverges there).
        H: (K, K) estimated compatibility.
        sinkhorn: its :class:`SinkhornInfo`.
        spectral: :class:`SpectralInfo` of the K operators (None when not computed, see ``spectrum``).
        method: solver used ("iterate" for the L1-normalized variant).
        converged: (A, K) solver convergence (all True for the iterative variant).
        H_refined: (A, K, K) the re-estimated compatibility ``H'(alpha)`` of ``compat="refined"`` (zeros where
            ``valid`` is False); None for ``compat="sinkhorn"``. With "refined", ``H``, ``sinkhorn`` and
            ``spectral`` still describe the first pass (the paper's H), while ``beliefs``, ``valid``,
            ``method`` and ``converged`` are those of the second, refined pass.
    """

    beliefs: jax.Array
    alphas: jax.Array
    valid: np.ndarray
    H: jax.Array
    sinkhorn: SinkhornInfo
    spectral: SpectralInfo
    method: str
    converged: jax.Array
    H_refined: jax.Array | None = None


def clp_beliefs(
    graph: Graph,
    prior: jax.Array,
    labels: jax.Array,
    train_mask: jax.Array,
    *,
    alphas=DEFAULT_ALPHAS,
    normalization: Normalization = "sym",
    l1_normalize: bool = False,
    prior_source: PriorSource = "mlp",
    num_iters: int = 50,
    method: Method = "auto",
    tol: float = 1e-6,
    spectrum: bool = True,
    spectral_scale: bool = False,
    compat: Compat = "sinkhorn",
) -> CLPResult:
    """Runs CLP steps 2-5 for a grid of alphas (closed form, vmapped over alphas; or iterative for L1).

    Args:
        graph: the graph.
        prior: (n, K) base predictions D.
        labels: (n,) int labels; only ``train_mask`` entries are read.
        train_mask: (n,) bool.
        alphas: 1-D grid of alphas in (0, 1).
        normalization, l1_normalize, prior_source: the variant (module docstring).
        num_iters: steps of the iterative (L1) variant.
        method: closed-form solver (see :func:`jaxclp.solve`).
        tol: solver tolerance.
        spectrum: compute the per-class spectral radius for the result (power iteration). When False it is
            computed only where validity needs it ("none" normalization beyond the a-priori and norm
            bounds, or ``spectral_scale``), and ``spectral`` is None otherwise.
        spectral_scale: propagate with ``A^F_k / rho(A^F_k)`` (module docstring); alphas up to 1 (exclusive)
            are then valid where the Collatz-Wielandt bound of the scaled operator is below 1/alpha.
            ``spectral`` then describes the UNSCALED operators.
        compat: "sinkhorn" (default, the paper's estimate) or "refined" (H re-estimated once per alpha from
            the first-pass beliefs; module docstring). "refined" runs two closed forms per alpha and
            supports the linear variant only (``l1_normalize=False``); with ``spectral_scale`` both passes
            use scaled operators (the refined one divided by its own spectral radius).

    ``graph`` is any graph of the protocol (:mod:`jaxclp.protocol`), e.g. a :class:`jaxclp.ShardedGraph`: every
    variant above, the methods "auto", "neumann", "jacobi", "bicgstab", "cg" ("auto" never picks "dense"),
    beliefs in the user's node order.

    Returns:
        :class:`CLPResult` (``H_refined`` set for ``compat="refined"``).

    Raises:
        ValueError: an unknown ``normalization``, ``prior_source`` or ``compat``; ``compat="refined"`` with
            ``l1_normalize``; bad arrays (named).
    """
    check_variant(normalization, prior_source, compat, l1_normalize, spectral_scale)
    prior, labels, train_mask = jnp.asarray(prior), jnp.asarray(labels), jnp.asarray(train_mask)
    # the grid on the host (A,): its validity, indexing and chunking are host decisions, and numpy arrays handed
    # to the jitted kernels compile nothing of their own (an eager gather or slice of a device array compiles a
    # program per shape)
    alphas = np.atleast_1d(np.asarray(alphas, dtype=prior.dtype))
    _checks.alpha(alphas, "alphas")
    labels = masked_labels(labels, train_mask)
    H, sk = estimate_compatibility(graph, prior, labels, train_mask)
    b0 = initial_beliefs(prior, labels, train_mask)
    op = clp_operator(graph, b0, H, normalization=normalization)
    d = graph.to_internal(prior) if prior_source == "mlp" else op.left
    return _clp_grid(graph, labels, train_mask, b0, d, op, alphas, H, sk, normalization=normalization,
                     l1_normalize=l1_normalize, num_iters=num_iters, method=method, tol=tol, spectrum=spectrum,
                     spectral_scale=spectral_scale, compat=compat)


def _iterate_l1(op, d, alphas, num_iters):
    """(A, n, K) beliefs (user order) of the L1-normalized iteration from ``b0 = op.left``, vmapped over the
    alphas (in chunks past :data:`jaxclp.solve.SOLVE_CHUNK_BYTES`); ``d`` in the internal order."""
    run = jax.vmap(lambda a: _iterate_jit(op, d, op.left, a, num_iters, l1_normalize=True))
    return op.graph.from_internal(in_alpha_chunks(run, alphas, "iterate_l1", d.shape, d.dtype), axis=1)


def check_variant(normalization: str, prior_source: str, compat: str, l1_normalize: bool,
                  spectral_scale: bool) -> None:
    """Raises ValueError for a :func:`clp_beliefs` variant that does not exist."""
    check_normalization(normalization)
    if prior_source not in ("mlp", "b0"):
        raise ValueError(f"prior_source must be 'mlp' or 'b0'; got {prior_source!r}")
    if compat not in ("sinkhorn", "refined"):
        raise ValueError(f"compat must be 'sinkhorn' or 'refined'; got {compat!r}")
    if compat == "refined" and l1_normalize:
        raise ValueError("compat='refined' supports the linear variant only (l1_normalize=False)")
    if spectral_scale and l1_normalize:
        raise ValueError("spectral_scale applies to the linear variant only (l1_normalize=False)")


def _clp_grid(graph, labels, train_mask, b0, d, op, alphas, H, sk, *, normalization, l1_normalize, num_iters,
              method, tol, spectrum, spectral_scale, compat) -> CLPResult:
    """:func:`clp_beliefs` once ``H``, ``b0`` (user order), the prior ``d`` and the operator ``op`` (internal
    order) exist: the validity of each alpha, the closed forms (or the L1 iteration) and the refined pass.
    """
    k = d.shape[1]
    alphas = np.asarray(alphas)  # (A,) on the host; the result carries them as a device array
    if spectral_scale:
        res = _clp_scaled(op, d, alphas, H, sk, normalization, method, tol)
        if compat == "refined":
            return _clp_refined(graph, labels, train_mask, b0, d, alphas, res.valid, res.beliefs, H, sk,
                                res.spectral, normalization, method, tol, scaled=True)
        return res
    proven = _proven(op, float(np.max(alphas)), normalization)
    spectral = operator_spectral_radius(op) if (spectrum or (not proven and not l1_normalize)) else None
    if l1_normalize:
        beliefs = _iterate_l1(op, d, alphas, num_iters)
        valid = np.ones(alphas.shape[0], bool)
        return CLPResult(beliefs, jax.device_put(alphas), valid, H, sk, spectral, "iterate",
                         jax.device_put(np.ones((alphas.shape[0], k), bool)))
    if proven:
        valid = np.ones(alphas.shape[0], bool)
    else:  # "none" normalization: the rigorous Collatz-Wielandt upper bound decides
        valid = alphas * float(np.max(np.asarray(spectral.upper))) < 1.0
    beliefs, converged, used = _solve_valid(op, d, alphas, valid, method, tol, normalization)
    if compat == "refined":
        return _clp_refined(graph, labels, train_mask, b0, d, alphas, valid, beliefs, H, sk, spectral,
                            normalization, method, tol)
    return CLPResult(beliefs, jax.device_put(alphas), valid, H, sk, spectral, used, converged)


def refined_prior(beliefs: jax.Array) -> jax.Array:
    """``L1rows(max(B, 0))``: (n, K) propagated beliefs as a row-stochastic "prior" for the re-estimate.

    Linear CLP beliefs are nonnegative with rows summing to at least ``1 - alpha`` (``B >= (1-a) D``); the
    clip only removes solver round-off, and a zero row (not reachable from a valid solve) becomes uniform.
    """
    b = jnp.maximum(beliefs, 0)
    s = jnp.sum(b, axis=1, keepdims=True)
    return jnp.where(s > 0, b / jnp.where(s > 0, s, 1), 1.0 / b.shape[1])


def _proven(op, alpha_max: float, normalization) -> bool:
    """Whether ``alpha_max`` times the a-priori or the norm bound of ``op`` is below 1 (the linear CLP iteration
    provably converges for every alpha up to ``alpha_max``)."""
    rows, cols = norm_bounds(op)
    return alpha_max * min(a_priori_bound(op, normalization),
                           float(np.max(np.minimum(np.asarray(rows), np.asarray(cols))))) < 1


def valid_operator(op, alphas, normalization, scaled: bool):
    """The operator to solve and which alphas it converges for, decided as a fit decides them.

    ``scaled``: ``A^F_k / rho(A^F_k)`` (:func:`jaxclp.operator.spectral_scale`), valid below the scaled
    Collatz-Wielandt bound; otherwise every alpha where the a-priori or norm bound proves convergence
    (:func:`_proven`), else below the Collatz-Wielandt upper bound of the operator.

    Args:
        op: the :class:`jaxclp.operator.FactoredOperator`.
        alphas: (A,) alphas on the host.
        normalization: the operator's normalization.
        scaled: whether to propagate with the spectrally scaled operators.

    Returns:
        ``(operator, valid (A,) bool, bound)``: ``bound`` the spectral bound the alphas were held against (None
        where the a-priori or norm bound proved them all).
    """
    alphas = np.asarray(alphas)
    if scaled:
        upper = np.asarray(operator_spectral_radius(op).upper)
        op, rho = spectral_scale(op)
        bound = float(np.max(upper / np.asarray(rho)))
    elif _proven(op, float(np.max(alphas)), normalization):
        return op, np.ones(alphas.shape[0], bool), None
    else:
        bound = float(np.max(np.asarray(operator_spectral_radius(op).upper)))
    return op, alphas * bound < 1.0, bound


def _clp_refined(graph, labels, train_mask, b0, d, alphas, valid, first, H, sk, spectral, normalization,
                 method, tol, scaled=False) -> CLPResult:
    """The refined second pass (``clp_beliefs(..., compat="refined")``), one alpha at a time.

    Every alpha gets its own ``H'(alpha)`` from its first-pass beliefs, hence its own operator; alphas are
    few, so a Python loop (all operators share shapes: one compile). ``b0``, ``first`` and the beliefs are in
    the user's order, ``d`` in the internal order; ``alphas`` (A,) on the host.
    """
    k = d.shape[1]
    valid_out = np.zeros_like(valid)
    used = "none"
    solved = []  # (beliefs (1, n, K), converged (1, K), H' (K, K)) of the alphas kept, in order
    for i in np.flatnonzero(valid):
        h_i, _ = estimate_compatibility(graph, _refined_row(first, np.int32(i)), labels, train_mask)
        op_i = clp_operator(graph, b0, h_i, normalization=normalization)
        a_i = alphas[i:i + 1]
        op_i, ok, _ = valid_operator(op_i, a_i, normalization, scaled)
        b_i, c_i, used_i = _solve_valid(op_i, d, a_i, ok, method, tol, normalization)
        if ok[0]:
            solved.append((b_i, c_i, h_i))
            used = used_i
            valid_out[i] = True
    num, n = alphas.shape[0], first.shape[1]
    if solved:
        b, c, h = (tuple(s[j] for s in solved) for j in range(3))
        beliefs, converged, hs = _place_refined(b, c, h, np.flatnonzero(valid_out).astype(np.int32), num,
                                                np.dtype(d.dtype))
    else:
        beliefs = jnp.zeros((num, n, k), first.dtype)
        converged = jax.device_put(np.zeros((num, k), bool))
        hs = jax.device_put(np.zeros((num, k, k), d.dtype))
    return CLPResult(beliefs, jax.device_put(alphas), valid_out, H, sk, spectral, used, converged, hs)


@jax.jit
def _refined_row(first, i):
    """``refined_prior(first[i])`` with a traced index: one program for every alpha."""
    return refined_prior(first[i])


@functools.partial(jax.jit, static_argnames=("num", "h_dtype"))
def _place_refined(beliefs, converged, hs, idx, num, h_dtype):
    """The refined pass's per-alpha pieces (tuples of (1, n, K), (1, K), (K, K)) at rows ``idx`` of (num, ...)
    zeros (``H'`` in ``h_dtype``): one program instead of a scatter per alpha."""
    b, c = _place(jnp.concatenate(beliefs), jnp.concatenate(converged), idx, num)
    h = jnp.zeros((num,) + hs[0].shape, h_dtype).at[idx].set(jnp.stack(hs))
    return b, c, h


@functools.partial(jax.jit, static_argnames="num")
def _place(value, converged, idx, num):
    """``value`` (I, n, K) and ``converged`` (I, K) at rows ``idx`` (I,) of (num, n, K) / (num, K) zeros (one
    program: the rows are copied, never computed)."""
    beliefs = jnp.zeros((num,) + value.shape[1:], value.dtype).at[idx].set(value)
    return beliefs, jnp.zeros((num,) + converged.shape[1:], bool).at[idx].set(converged)


def _zero_invalid(value, converged, valid):
    """``value`` (A, n, K) and ``converged`` (A, K) with the rows where ``valid`` (A,) is False zeroed (False):
    in numpy for arrays on the CPU (no program per shape), else one program per shape."""
    if cpu_resident(value, converged):
        value, converged, valid = np.asarray(value), np.asarray(converged), np.asarray(valid)
        return (jax.device_put(np.where(valid[:, None, None], value, np.zeros((), value.dtype))),
                jax.device_put(converged & valid[:, None]))
    return _zero_invalid_jit(value, converged, jax.device_put(np.asarray(valid)))


@jax.jit
def _zero_invalid_jit(value, converged, valid):
    """:func:`_zero_invalid` on a device."""
    return jnp.where(valid[:, None, None], value, jnp.zeros((), value.dtype)), converged & valid[:, None]


def _solve_valid(op, d, alphas, valid, method, tol, normalization):
    """Closed form for the alphas where ``valid``; zeros (and ``converged=False``) elsewhere.

    The solve runs over the whole (A,) grid, an invalid alpha replaced by the smallest valid one: its programs
    have the grid's shape whichever alphas the data leaves valid (one program for every split and graph, not one
    per count), for the cost of the replaced columns (the cheapest alpha's solve).

    Args:
        op: the operator (:class:`jaxclp.operator.FactoredOperator`, on any graph of the protocol).
        d: the prior in the operator's (internal) row order.
        alphas, valid: (A,) alphas and which of them to solve.
        method, tol, normalization: passed to :func:`jaxclp.solve.solve_operator`.

    Returns:
        ``(beliefs (A, n, K) in the user's order, converged (A, K), method used or "none")``.
    """
    n, k = op.graph.num_nodes, d.shape[1]
    alphas, valid = np.asarray(alphas), np.asarray(valid, bool)
    if not valid.any():
        return (jnp.zeros((alphas.shape[0], n, k), d.dtype), jax.device_put(np.zeros((alphas.shape[0], k), bool)),
                "none")
    # an invalid alpha solved at the smallest valid one (docstring); "auto" picks its method from the largest
    # alpha, a valid one either way
    sol = solve_operator(op, d, alpha=np.where(valid, alphas, np.min(alphas[valid])), method=method, tol=tol,
                         normalization=normalization)
    value = op.graph.from_internal(sol.value, axis=1)
    if valid.all():  # every alpha solved: no (A, n, K) zeros and copy beside the value
        return value, sol.converged, sol.method
    beliefs, converged = _zero_invalid(value, sol.converged, valid)
    return beliefs, converged, sol.method


def _clp_scaled(op, d, alphas, H, sk, normalization, method, tol) -> CLPResult:
    """The spectrally scaled closed form (``clp_beliefs(..., spectral_scale=True)``)."""
    scaled, rho = spectral_scale(op)
    info = operator_spectral_radius(op)
    upper = float(np.max(np.asarray(info.upper) / np.asarray(rho)))
    alphas = np.asarray(alphas)
    valid = alphas * upper < 1.0
    beliefs, converged, used = _solve_valid(scaled, d, alphas, valid, method, tol, normalization)
    return CLPResult(beliefs, jax.device_put(alphas), valid, H, sk, info, used, converged)
