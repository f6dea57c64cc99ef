"""Closed-form CLP: solve ``(I - alpha A^F_k) x_k = (1 - alpha) D_k`` for every class k.

Methods (all classes are solved together, one K-wide SpMM per operator application; every column has its
own convergence test and iteration count):

* ``"dense"``: dense LU per class, O(K n^2) memory; small graphs only.
* ``"cg"``: conjugate gradients on the symmetrized system. Valid only when ``Ahat`` is symmetric (an
  undirected graph with "sym" or "none" normalization): then ``S A^F_k S^{-1} = diag(c) Ahat diag(c)`` with
  ``S = diag(sqrt(g/b))``, ``c = sqrt(b g)`` (``b = b0[:, k]``, ``g = (b0 H)[:, k]``) is symmetric and
  ``I - alpha diag(c) Ahat diag(c)`` is SPD when ``alpha rho < 1``. Nodes with ``b = 0`` (zero rows) are
  eliminated first, nodes with ``g = 0`` (zero columns) are solved after.
* ``"bicgstab"``: BiCGStab on the nonsymmetric system (2 SpMMs per iteration).
* ``"gmres"``: ``jax.scipy.sparse.linalg.gmres`` per class (vmapped); it does not report its iteration
  count, so ``iterations`` is -1.
* ``"jacobi"``: Jacobi iteration (diagonal = self-loops; without self-loops it equals "neumann").
* ``"neumann"``: the plain iteration ``x <- (1-alpha) D + alpha A^F_k x`` from ``x = (1-alpha) D``
  (truncated Neumann series).
* ``"auto"``: see :func:`choose_method`; the choice is reported in ``Solution.method``.

The residual in :class:`Solution` is always computed by us from the returned value, never taken from a
solver's recurrence. ``converged`` means ``relative_residual <= tol`` OR ``backward_error <= BACKWARD_ERROR_ULPS *
eps(dtype)``: the normwise backward error ``||r|| / (||M|| ||x|| + ||b||)`` of the system ``M x = b``
(``M = I - alpha A^F_k``, ``||M||_2 <= sqrt((1 + alpha rows_k) (1 + alpha cols_k))`` from the row/column-sum
bounds of the nonnegative ``A^F_k``) says the value solves a system within a few units of roundoff of the
given one, which is all the working precision can promise. The second test decides only where the first one
cannot be met: in float64 the floor is ~1e-15 and ``tol`` decides as before; in float32 (eps = 1.2e-7) near
alpha = 1 ``||x|| / ||b|| ~ 1 / (1 - alpha)`` and a true relative residual of 1e-6 lies below what rounding
leaves (``eps (1 + ||M|| ||x|| / ||b||)``, ~2e-5 at alpha = 0.99), so there the floor decides. The Krylov loops
stop on ``tol`` as before; the stationary loops (neumann, jacobi) also stop once their exact residual is below
the floor and no longer decreasing (less than 10% per step), where they used to run to ``max_iters``. For ``neumann`` and ``jacobi`` it is the
last product's increment, which is exactly the residual of the returned iterate (the solve returns the last
iterate it has measured), so no separate residual product is made; the others recompute it with one product.
"""

from __future__ import annotations

import warnings
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp.graph import Graph, Normalization, check_normalization
from jaxclp.operator import FactoredOperator, clp_operator, norm_bounds
from jaxclp.program_store import stored_jit
from jaxclp.propagate import check_spectrum, residual

Method = Literal["auto", "dense", "cg", "bicgstab", "gmres", "jacobi", "neumann"]
SOLVERS = ("dense", "cg", "bicgstab", "gmres", "jacobi", "neumann")
"""The closed-form methods :func:`solve` takes as ``method=`` (besides ``"auto"``, which picks one of them)."""
EDGE_LIST_METHODS = ("dense", "gmres")
"""Methods that need the graph's global edge list (``graph.has_edge_list``: not a sharded graph)."""
DENSE_MAX_NODES = 300
GMRES_RESTART = 30
NEUMANN_MAX_CONTRACTION = 0.4  # benchmarks/results/solvers.md: best threshold of 0.0-0.95 on 147 cells
BACKWARD_ERROR_ULPS = 4.0
"""A column whose normwise backward error (:attr:`Solution.backward_error`) is at most this many units of
roundoff ``eps(dtype)`` counts as converged whatever ``tol`` asks (module docstring). Measured on a 3000-node kNN
graph with confident priors in float32 (alpha 0.5..0.999, every iterative method): the methods end at backward
errors of 0.1-1.0 eps, so 4 eps leaves a margin and is still a statement about the working precision."""
STALL_RATIO = 0.9
"""A stationary iteration below the precision floor stops once its residual shrinks by less than this factor
per step (rounding noise, no progress left)."""
SOLVE_CHUNK_BYTES = 1 << 30
"""Working-set budget of a vector of alphas solved together (:func:`solve_operator`): past it the alphas are
solved in chunks (same method for all, chosen for the largest alpha), each alpha's value being the one it gets
solved with the others (vmapped systems are independent; equal up to float rounding of the batched product).
Every dataset of the experiments is one chunk (the largest, Coauthor-CS, n K = 0.28M: 11 alphas of BiCGStab
count ~0.2 GiB)."""
SOLVE_CHUNK_ALPHAS = 4
SOLVE_CHUNK_MIN_SIZE = 1 << 20
"""Where the prior has at least ``SOLVE_CHUNK_MIN_SIZE`` entries (n K), an iterative method solves at most
``SOLVE_CHUNK_ALPHAS`` alphas together, whatever the memory: vmapped alphas all iterate until the slowest lane of
their chunk converges, so alphas near 1 (60+ iterations at 0.99) hold small ones (5 at 0.1) at their count.
Measured (``benchmarks/results/alpha_chunks.md``, 11 alphas 0.1..0.99 of ``clp``'s scaled grid, 40 classes): with
cg 12.6 -> 4.3 s at 50k nodes and 62 -> 27 s at 200k nodes (the same iterations per alpha); bicgstab 75 -> 7.8 s
(its alpha = 0.99 lane took 197 iterations vmapped with the others, 68 in its chunk: float32 BiCGStab near
alpha = 1 is erratic) and 92 -> 37 s; neumann (the paper's operator, 3-4 iterations) 0.8 -> 0.6 s and 3.6 -> 3.6
s; one alpha at a time was slower than 4 for cg and bicgstab (5.5 / 47 s and 12.6 / 177 s), faster for neumann.
Below the threshold (every dataset of the tables: n K <= 0.28M, so their records are unchanged) all alphas stay
one vmapped solve where memory allows."""
WORKING_VECTORS = {"neumann": 10, "jacobi": 12, "cg": 12, "bicgstab": 16, "gmres": 3 * GMRES_RESTART,
                   "iterate_l1": 8}
"""Peak bytes of one alpha's solve, in (n, K) arrays of the prior's dtype (value, right-hand side, the method's
iterates and XLA's temporaries), rounded up from measurements (50k nodes x 40 classes, 1 vs 11 alphas, float32:
neumann 8, jacobi 9.5, cg 10, bicgstab 14 arrays per alpha; gmres, 10k x 40, ~80 = 2.7 restarts' worth;
``"iterate_l1"``, the per-step L1 iteration of :func:`jaxclp.clp_beliefs`, ~6)."""


class Solution(NamedTuple):
    """Result of :func:`solve` (a lineax-style solution with our own diagnostics).

    Attributes:
        value: (n, K) solution, or (A, n, K) for a vector of A alphas.
        converged: (K,) bool (or (A, K)): ``relative_residual <= tol`` or ``backward_error <=
            BACKWARD_ERROR_ULPS * eps(dtype)`` (the module docstring).
        iterations: (K,) int32 (or (A, K)) iterations of the method (-1 where unknown; 0 for "dense"). For
            "neumann"/"jacobi": operator products, i.e. the steps applied to ``value`` plus the one that measured
            its residual (so ``max_iters + 1`` when the budget ran out).
        residual: (K,) ``||(1-a) D_k - (I - a A^F_k) x_k||_2`` computed from ``value``.
        relative_residual: (K,) residual / ``||(1-a) D_k||_2``.
        rho_bound: (K,) ``min(max row sum, max column sum)`` of A^F_k, an upper bound on its spectral radius.
        backward_error: (K,) (or (A, K)) ``residual / (||M|| ||x_k|| + ||(1-a) D_k||)`` with ``||M||`` the bound
            ``sqrt((1 + a rows_k) (1 + a cols_k))`` on ``||I - a A^F_k||_2`` (:func:`backward_error`).
        method: the method used (str).
    """

    value: jax.Array
    converged: jax.Array
    iterations: jax.Array
    residual: jax.Array
    relative_residual: jax.Array
    rho_bound: jax.Array
    backward_error: jax.Array
    method: str


def _array_namespace(*xs):
    """numpy where every ``x`` is a host value (a numpy array or scalar, a Python number), else ``jax.numpy``:
    the elementwise diagnostics below then run on the host for host inputs (the same IEEE operations, each
    rounded once; no program compiled per shape) and as before for device arrays and tracers."""
    return np if all(isinstance(x, (np.ndarray, np.generic, int, float)) for x in xs) else jnp


def _safe_div(a, b):
    xp = _array_namespace(a, b)
    return xp.where(b != 0, a / xp.where(b != 0, b, 1.0), 0.0)


def _dot(a, b):
    return jnp.sum(a * b, axis=0)


def system_norm(alpha, rows, cols):
    """(K,) upper bound on ``||I - alpha A_k||_2`` for nonnegative ``A_k`` with max row sums ``rows`` and max
    column sums ``cols`` (K,): ``||M||_2 <= sqrt(||M||_1 ||M||_inf)`` and ``||I - a A||_1 <= 1 + a cols``,
    ``||I - a A||_inf <= 1 + a rows``. ``alpha`` a scalar (or broadcasting against (K,)). Host (numpy) inputs
    are computed in numpy."""
    return _array_namespace(alpha, rows, cols).sqrt((1.0 + alpha * rows) * (1.0 + alpha * cols))


def backward_error(residual, x_norm, rhs_norm, m_norm):
    """(K,) normwise backward error ``||r|| / (||M|| ||x|| + ||b||)`` (0 where the denominator is 0); host
    (numpy) inputs are computed in numpy."""
    return _safe_div(residual, m_norm * x_norm + rhs_norm)


def precision_floor(dtype) -> float:
    """The backward error below which a column counts as converged: ``BACKWARD_ERROR_ULPS * eps(dtype)``."""
    return BACKWARD_ERROR_ULPS * float(jnp.finfo(dtype).eps)


# --------------------------------------------------------------------------- column-wise Krylov kernels
def cg_columns(matvec, rhs, tol, max_iters, x0=None):
    """Conjugate gradients, every column of ``rhs`` (n, K) an independent SPD system.

    ``x0``: an optional (n, K) starting point (default zeros); the test stays relative to ``||rhs||``.

    Returns:
        ``(x, iterations)``: (n, K) and (K,) int32. A column stops when ``||r|| <= tol ||rhs||``.
    """
    bnorm = jnp.linalg.norm(rhs, axis=0)
    if x0 is None:
        x, r = jnp.zeros_like(rhs), rhs
    else:
        x = x0
        r = rhs - matvec(x0)
    rs = _dot(r, r)
    active = jnp.sqrt(rs) > tol * bnorm
    state = (x, r, r, rs, active, jnp.zeros(rhs.shape[1], jnp.int32), jnp.int32(0))

    def cond(s):
        return jnp.any(s[4]) & (s[6] < max_iters)

    def body(s):
        x, r, p, rs, active, its, it = s
        ap = matvec(p)
        a = jnp.where(active, _safe_div(rs, _dot(p, ap)), 0.0)
        x = x + a * p
        r = r - a * ap
        rs_new = _dot(r, r)
        beta = _safe_div(rs_new, rs)
        p = jnp.where(active, r + beta * p, p)
        its = its + active.astype(jnp.int32)
        active = active & (jnp.sqrt(rs_new) > tol * bnorm)
        return x, r, p, jnp.where(active, rs_new, rs), active, its, it + 1

    x, *_, its, _ = jax.lax.while_loop(cond, body, state)
    return x, its


def bicgstab_columns(matvec, rhs, tol, max_iters, shadow=None, x0=None):
    """BiCGStab, every column of ``rhs`` (n, K) an independent (nonsymmetric) system.

    ``shadow``: the (n, K) shadow residual (default: the initial residual, ``rhs`` from a zero start: the usual
    choice). A sparse right-hand side (a unit vector, :func:`jaxclp.explain.explain`'s transposed solves) breaks
    down with it (``rhat . r`` reaches 0 while ``r`` does not); a dense shadow with ``shadow . rhs != 0`` avoids
    that. ``x0``: an optional (n, K) starting point (default zeros); the test stays relative to ``||rhs||``.

    Returns:
        ``(x, iterations)``: (n, K) and (K,) int32.
    """
    k = rhs.shape[1]
    bnorm = jnp.linalg.norm(rhs, axis=0)
    one = jnp.ones((k,), rhs.dtype)
    zeros = jnp.zeros_like(rhs)
    if x0 is None:
        x_start, r0 = zeros, rhs
    else:
        x_start = x0
        r0 = rhs - matvec(x0)
    active = jnp.linalg.norm(r0, axis=0) > tol * bnorm
    rhat0 = r0 if shadow is None else shadow
    state = (x_start, r0, rhat0, zeros, zeros, one, one, one, active, jnp.zeros(k, jnp.int32), jnp.int32(0))

    def cond(s):
        return jnp.any(s[8]) & (s[10] < max_iters)

    def body(s):
        x, r, rhat, p, v, rho, alpha, omega, active, its, it = s
        rho_new = _dot(rhat, r)
        beta = _safe_div(rho_new, rho) * _safe_div(alpha, omega)
        p_new = r + beta * (p - omega * v)
        v_new = matvec(p_new)
        alpha_new = _safe_div(rho_new, _dot(rhat, v_new))
        s_vec = r - alpha_new * v_new
        t = matvec(s_vec)
        omega_new = _safe_div(_dot(t, s_vec), _dot(t, t))
        x_new = x + alpha_new * p_new + omega_new * s_vec
        r_new = s_vec - omega_new * t
        sel = active[None, :]
        x = jnp.where(sel, x_new, x)
        r = jnp.where(sel, r_new, r)
        p = jnp.where(sel, p_new, p)
        v = jnp.where(sel, v_new, v)
        rho = jnp.where(active, rho_new, rho)
        alpha = jnp.where(active, alpha_new, alpha)
        omega = jnp.where(active, omega_new, omega)
        its = its + active.astype(jnp.int32)
        rnorm = jnp.linalg.norm(r_new, axis=0)
        # stop on convergence or breakdown (rho or omega vanish); breakdown shows in our own residual check
        active = active & (rnorm > tol * bnorm) & (rho_new != 0) & (omega_new != 0)
        return x, r, rhat, p, v, rho, alpha, omega, active, its, it + 1

    out = jax.lax.while_loop(cond, body, state)
    return out[0], out[9]


def stationary_columns(step, x0, rhs_norm, tol, max_iters, residual_scale=None, floor=None):
    """Fixed-point iteration ``x <- step(x)`` per column until ``||x_new - x|| <= tol * ||rhs||``.

    For ``x <- c + M x`` the increment equals the residual of the previous iterate, so this is a residual test.

    With ``residual_scale`` (an array broadcasting against ``x``, e.g. ones for Neumann, the Jacobi diagonal)
    the iteration instead returns the last iterate whose residual it has measured, ``r(x) = residual_scale *
    (step(x) - x)``: a column stops at the first ``x`` with ``||r(x)|| <= tol * ||rhs||`` and keeps that ``x``
    (not ``step(x)``); after ``max_iters`` steps one more product measures the residual of the last iterate
    without moving it. Every returned column thus comes with the exact residual norm of the returned value, and
    no separate residual product is needed. Returns ``(x, its, res)`` then: ``res`` (K,) those residual norms,
    ``its`` the products made per column (steps applied to ``x`` plus the measuring one, at most ``max_iters + 1``).

    ``floor`` (with ``residual_scale`` only): ``x -> (K,)`` residual norms below which rounding decides (the
    precision floor of :func:`solve`); a column also stops at an ``x`` whose residual is at most ``floor(x)``
    and shrank by less than :data:`STALL_RATIO` in the last step. Where ``tol`` is reachable with a contraction
    below that ratio the iteration counts are unchanged.
    """
    k = x0.shape[1]
    if residual_scale is None:
        def cond(s):
            return jnp.any(s[1]) & (s[3] < max_iters)

        def body(s):
            x, active, its, it = s
            x_new = step(x)
            diff = jnp.linalg.norm(x_new - x, axis=0)
            x = jnp.where(active[None, :], x_new, x)
            its = its + active.astype(jnp.int32)
            return x, active & (diff > tol * rhs_norm), its, it + 1

        x, _, its, _ = jax.lax.while_loop(cond, body, (x0, jnp.ones((k,), bool), jnp.zeros(k, jnp.int32),
                                                        jnp.int32(0)))
        return x, its

    def cond_r(s):
        return jnp.any(s[1]) & (s[3] <= max_iters)

    def body_r(s):
        x, active, its, it, res = s
        x_new = step(x)
        r = jnp.linalg.norm(residual_scale * (x_new - x), axis=0)  # the exact residual of x
        done = r <= tol * rhs_norm
        if floor is not None:  # below the precision floor and no longer shrinking: rounding noise
            done = done | ((r <= floor(x)) & (r > STALL_RATIO * res))
        res = jnp.where(active, r, res)
        move = active & ~done & (it < max_iters)
        x = jnp.where(move[None, :], x_new, x)
        its = its + active.astype(jnp.int32)
        return x, move, its, it + 1, res

    init = (x0, jnp.ones((k,), bool), jnp.zeros(k, jnp.int32), jnp.int32(0),
            jnp.full((k,), jnp.inf, rhs_norm.dtype))
    x, _, its, _, res = jax.lax.while_loop(cond_r, body_r, init)
    return x, its, res


# --------------------------------------------------------------------------- one alpha, one method
def _transposed(op: FactoredOperator) -> FactoredOperator:
    """``A^F_k.T = diag(right) Ahat.T diag(left)``; as a FactoredOperator only when ``Ahat`` is symmetric
    (the CG case: then ``Ahat.T = Ahat`` and the transpose swaps the scalings)."""
    return op._replace(left=op.right, right=op.left)


def _solve_raw(op: FactoredOperator, rhs, alpha, method: str, tol, max_iters, transpose: bool = False,
               m_norm=None, x0=None):
    """Solves ``(I - alpha A^F_k) x_k = rhs_k`` (or the transposed system) with ``method``; not differentiated
    itself (see :func:`_solve_one`). ``m_norm`` (K,): the bound :func:`system_norm` (the same for the
    transpose), which sets the stationary methods' precision floor (none when None). ``x0``: an optional (n, K)
    starting point of the iterative methods (a warm start; "dense" ignores it); None: each method's own start."""
    k = rhs.shape[1]
    apply = op.rmatvec if transpose else op.matvec
    floor = None
    if m_norm is not None:
        ulps = precision_floor(rhs.dtype)
        rn_floor = jnp.linalg.norm(rhs, axis=0)

        def floor(x):
            return ulps * (m_norm * jnp.linalg.norm(x, axis=0) + rn_floor)

    def matvec(x):
        return x - alpha * apply(x)

    unknown = jnp.full((k,), jnp.nan, rhs.dtype)  # residual not known from the solve: recomputed by the caller
    if method == "dense":
        a = op.to_dense()  # (K, n, n)
        if transpose:
            a = jnp.swapaxes(a, 1, 2)
        n = rhs.shape[0]
        m = jnp.eye(n, dtype=rhs.dtype)[None] - alpha * a
        x = jax.vmap(jnp.linalg.solve, in_axes=(0, 0))(m, rhs.T).T
        return x, (jnp.zeros((k,), jnp.int32), unknown)
    if method == "neumann":
        # the last product's increment is the exact residual of the returned iterate: no residual product
        rn = jnp.linalg.norm(rhs, axis=0)
        x, its, res = stationary_columns(lambda x: rhs + alpha * apply(x), rhs if x0 is None else x0, rn, tol,
                                         max_iters, residual_scale=jnp.ones((), rhs.dtype), floor=floor)
        return x, (its, res)
    if method == "jacobi":
        d = 1.0 - alpha * op.diagonal()  # the transpose has the same diagonal
        rn = jnp.linalg.norm(rhs, axis=0)
        x, its, res = stationary_columns(lambda x: (rhs + alpha * apply(x) - (1.0 - d) * x) / d,
                                         rhs / d if x0 is None else x0, rn, tol, max_iters, residual_scale=d,
                                         floor=floor)  # d (step(x) - x) = r(x)
        return x, (its, res)
    if method == "bicgstab":
        x, its = bicgstab_columns(matvec, rhs, tol, max_iters, x0=x0)
        return x, (its, unknown)
    if method == "gmres":
        g = op.graph

        def one_class(left, right, b, start):
            # jax's gmres transposes its matvec while tracing (custom_linear_solve), so it gets the plain,
            # transposable gather + segment_sum product, not the custom-VJP CSR/FFI kernel behind op.matvec
            def sub_apply(v):  # (n, 1) -> (n, 1)
                src, dst, lft, rgt = ((g.receivers, g.senders, right, left) if transpose
                                      else (g.senders, g.receivers, left, right))
                msg = op.values[:, None] * (rgt[:, None] * v)[src]
                return lft[:, None] * jax.ops.segment_sum(msg, dst, g.num_nodes, indices_are_sorted=not transpose)
            # 'incremental' tests convergence after every Arnoldi step ('batched', the default, always runs
            # all `restart` steps); jax's maxiter counts restart cycles, so cap the SpMMs at ~max_iters
            x, _ = jax.scipy.sparse.linalg.gmres(lambda v: v - alpha * sub_apply(v[:, None])[:, 0], b, start,
                                                 tol=tol, atol=0.0, restart=GMRES_RESTART,
                                                 maxiter=-(-max_iters // GMRES_RESTART),
                                                 solve_method="incremental")
            return x
        x = jax.vmap(one_class, in_axes=(1, 1, 1, None if x0 is None else 1), out_axes=1)(op.left, op.right, rhs,
                                                                                           x0)
        return x, (jnp.full((k,), -1, jnp.int32), unknown)
    if method == "cg":
        x, its = _cg_symmetrized(_transposed(op) if transpose else op, rhs, alpha, tol, max_iters, x0=x0)
        return x, (its, unknown)
    raise ValueError(f"unknown method {method!r}")


def _solve_one(op: FactoredOperator, prior, alpha, method: str, tol, max_iters, m_norm=None, x0=None):
    """``(1-alpha)(I - alpha A^F_k)^{-1} prior_k`` for every k, differentiable for every method.

    The solve is wrapped in ``jax.lax.custom_linear_solve``: derivatives (forward and reverse, w.r.t. the
    prior, b0, H, the edge values and alpha, i.e. everything the operator closes over) come from implicit
    differentiation, ``dx = (I - alpha A)^{-1} (d rhs + d(alpha A) x)``, with the adjoint solved by the same
    method on the transposed operator (``rmatvec``); the solver loops (``lax.while_loop``, not
    reverse-differentiable) are never differentiated. Gradients are exact up to the solver tolerance. ``x0``: an
    optional (n, K) warm start of the forward solve (the adjoint solve starts from its own default).
    """
    rhs = (1.0 - alpha) * prior

    def matvec(x):  # only differentiated, never run by the solve: the graph's linear-transposable product
        # (unlike the custom-VJP CSR kernel behind op.matvec); same values as op.matvec
        return x - alpha * op.linear_matvec(x)

    def solve_fn(_, b):
        return _solve_raw(op, b, alpha, method, tol, max_iters, m_norm=m_norm, x0=x0)

    def transpose_fn(_, b):
        return _solve_raw(op, b, alpha, method, tol, max_iters, transpose=True, m_norm=m_norm)

    return jax.lax.custom_linear_solve(matvec, rhs, solve_fn, transpose_fn, has_aux=True)


def _cg_symmetrized(op: FactoredOperator, rhs, alpha, tol, max_iters, x0=None):
    """CG on ``diag(c) Ahat diag(c)`` (valid for symmetric Ahat); see the module docstring. ``x0``: an optional
    (n, K) warm start of ``x`` (carried to the symmetrized unknown ``y = s x`` on the coupled nodes)."""
    b, g = op.left, op.right
    tiny = jnp.finfo(rhs.dtype).tiny ** 0.5
    fixed = b <= tiny  # zero rows: x = rhs there
    active = (~fixed) & (g > tiny)  # the coupled, symmetrizable part
    x_fixed = jnp.where(fixed, rhs, 0.0)
    rhs2 = jnp.where(active, rhs + alpha * op.matvec(x_fixed), 0.0)
    c = jnp.where(active, jnp.sqrt(b * g), 0.0)
    s = jnp.where(active, jnp.sqrt(_safe_div(g, b)), 0.0)
    sym = op._replace(left=c, right=c)
    y0 = None if x0 is None else jnp.where(active, s * x0, 0.0)
    y, its = cg_columns(lambda v: v - alpha * sym.matvec(v), s * rhs2, tol * 1e-1, max_iters, x0=y0)
    x_partial = jnp.where(active, _safe_div(y, s), x_fixed)
    # one exact sweep fills in the zero-column nodes (and refines the rest)
    x = rhs + alpha * op.matvec(jnp.where(active | fixed, x_partial, 0.0))
    x = jnp.where(fixed, rhs, x)
    return x, its


def _solve_kernel(op, prior, alphas, method, tol, max_iters, bounds=None, x0=None):
    """``(x, iterations, residual, relative_residual, backward_error)`` of every alpha (a leading (A,) axis for
    a vector). ``bounds``: the operator's ``(rows, cols)`` (:func:`jaxclp.operator.norm_bounds`), computed here
    when None. ``x0``: an optional warm start shaped like the value ((n, K), or (A, n, K) for a vector)."""
    rows, cols = norm_bounds(op) if bounds is None else bounds

    def one(alpha, start=None):
        m_norm = system_norm(alpha, rows, cols)
        x, (its, res) = _solve_one(op, prior, alpha, method, tol, max_iters, m_norm, x0=start)
        den = jnp.linalg.norm((1.0 - alpha) * prior, axis=0)
        if method in ("neumann", "jacobi"):  # exact residual of x from the solve's last product (one SpMM saved)
            rel = res / jnp.where(den > 0, den, 1.0)
        else:
            res, rel = residual(op, prior, x, alpha)
        return x, its, res, rel, backward_error(res, jnp.linalg.norm(x, axis=0), den, m_norm)

    if alphas.ndim == 0:
        return one(alphas, x0)
    if method == "dense":  # K dense n x n matrices per alpha: map over alphas to bound memory (x0 unused)
        return jax.lax.map(one, alphas)
    if x0 is not None:
        return jax.vmap(one)(alphas, x0)
    return jax.vmap(one)(alphas)


_solve_jit = stored_jit(_solve_kernel, static_argnames=("method", "max_iters"))


# --------------------------------------------------------------------------- public API
def cg_valid(graph: Graph, normalization: Normalization) -> bool:
    """True when ``Ahat`` is symmetric, so the CLP system can be symmetrized for CG."""
    return bool(graph.symmetric) and normalization in ("sym", "none")


def choose_method(graph: Graph, normalization: Normalization, alpha_rho_bound: float | None) -> str:
    """The method ``"auto"`` uses.

    The plain Neumann iteration when the rigorous bound ``alpha * rho_bound <= NEUMANN_MAX_CONTRACTION`` (0.4:
    it then reaches 1e-6 within ``log(1e-6) / log(0.4)`` = 15 SpMMs, one SpMM a step, no inner products;
    with the paper's normalized CLP operator rho is about 0.05 and a handful of steps suffice); otherwise
    dense LU for tiny graphs (n <= ``DENSE_MAX_NODES``: exact, and every method takes milliseconds there),
    CG on the symmetrized system where valid, else BiCGStab. A graph without a global edge list (a
    :class:`jaxclp.ShardedGraph`) has no dense method: CG or BiCGStab there.

    Every method it picks reaches ``tol`` or the precision floor of the input's dtype (the convergence test of
    :class:`Solution`): float32 solves at alpha 0.9-0.999 are tested for every method.

    Measured (``benchmarks/results/solvers.md``, 147 cells, n = 1e3..1e6, K = 2..40, alpha 0.5..0.99, five
    operators): this rule is within 1.07x (geometric mean; worst 1.86x) of the fastest method per cell,
    against 1.11x (worst 2.45x) for the previous threshold 0.9 and 2.4x (worst 63x) for always iterating.
    Near alpha * rho = 1 BiCGStab/CG are 10-60x faster than the plain iteration.
    """
    if alpha_rho_bound is not None and alpha_rho_bound <= NEUMANN_MAX_CONTRACTION:
        return "neumann"
    if graph.has_edge_list and graph.real_nodes <= DENSE_MAX_NODES:  # a padded graph: its real nodes
        return "dense"
    return "cg" if cg_valid(graph, normalization) else "bicgstab"


def solve_operator(op: FactoredOperator, prior, *, alpha, method: Method = "auto", tol: float = 1e-6,
                   max_iters: int = 10_000, symmetric_ok: bool | None = None,
                   normalization: Normalization = "sym", throw: bool = False, x0=None) -> Solution:
    """:func:`solve` for an already built :class:`FactoredOperator` (e.g. label propagation); ``prior``, ``x0`` and
    the value in the operator's (its graph's internal) node order.

    The low-level entry of the library's estimators, which read the diagnostics themselves: ``throw``
    defaults to False here (True in :func:`solve`); with ``throw=True`` it raises as :func:`solve` does.
    """
    _checks.floating("prior", prior)  # an integer prior would silently cast alpha to 0 or 1
    alphas = _checks.device_array(alpha, prior.dtype)  # a host grid: converted on the host, no eager program
    if alphas.ndim > 1:
        raise ValueError(f"alpha must be a scalar or a 1-D array; got shape {alphas.shape}")
    _checks.alpha(alphas)
    if x0 is not None:
        x0 = jnp.asarray(x0)
        want = tuple(alphas.shape) + tuple(prior.shape)
        if tuple(x0.shape) != want:
            raise ValueError(f"x0 must have the value's shape {want} (the prior's, with a leading (A,) axis for a "
                             f"vector of alphas); got {tuple(x0.shape)}")
        x0 = x0.astype(prior.dtype)
    rows, cols = norm_bounds(op)
    concrete = _checks.is_concrete(alphas, rows, cols)
    # (K,) host arithmetic where the values are known: an eager op on a device array compiles a program per shape
    rho_bound = (jax.device_put(np.minimum(np.asarray(rows), np.asarray(cols))) if concrete
                 else jnp.minimum(rows, cols))
    if method == "auto":
        bound = None
        if _checks.is_concrete(alphas, rho_bound):
            bound = float(np.max(np.asarray(alphas))) * float(np.max(np.asarray(rho_bound)))
        method = choose_method(op.graph, normalization, bound)
    elif method not in SOLVERS:
        raise ValueError(f"method must be 'auto' or one of {SOLVERS}; got {method!r}")
    if method in EDGE_LIST_METHODS and not op.graph.has_edge_list:
        usable = tuple(m for m in SOLVERS if m not in EDGE_LIST_METHODS)
        raise ValueError(f"method={method!r} is not supported for a {type(op.graph).__name__} (it needs the global "
                         f"edge list on one device); use 'auto' or one of {usable}")
    if method == "cg" and not (cg_valid(op.graph, normalization) if symmetric_ok is None else symmetric_ok):
        raise ValueError(
            "method='cg' needs a symmetric Ahat (an undirected graph with normalization 'sym' or 'none'): "
            "A^F_k is not symmetrizable otherwise and CG would return a wrong answer. "
            "Use 'bicgstab', 'gmres' or 'dense'.")
    if throw:
        _check_divergence(op, alphas, normalization)
    bounds = (rows, cols)
    if method == "dense":  # a direct solve: a warm start has nothing to shorten
        x0 = None
    if concrete:  # chunks of the alphas are sliced on the host (no eager slice program per chunk)
        alphas = np.asarray(alphas)
    if alphas.ndim == 1 and method != "dense" and x0 is not None:
        x, its, res, rel, eta = in_chunks(
            lambda part: _solve_jit(op, prior, alphas[part], method, tol, max_iters, bounds, x0[part]),
            alphas.shape[0], alpha_chunk(method, prior.shape, prior.dtype))
    elif alphas.ndim == 1 and method != "dense":  # "dense" maps over the alphas already
        x, its, res, rel, eta = in_alpha_chunks(lambda a: _solve_jit(op, prior, a, method, tol, max_iters, bounds),
                                                alphas, method, prior.shape, prior.dtype)
    elif x0 is not None:
        x, its, res, rel, eta = _solve_jit(op, prior, alphas, method, tol, max_iters, bounds, x0)
    else:
        x, its, res, rel, eta = _solve_jit(op, prior, alphas, method, tol, max_iters, bounds)
    sol = Solution(value=x, converged=_converged(rel, eta, tol), iterations=its, residual=res,
                   relative_residual=rel, rho_bound=rho_bound, backward_error=eta, method=method)
    if throw:
        _check_converged(sol, alphas, tol, max_iters)
    return sol


def is_converged(relative_residual, backward_error_, tol):
    """The convergence test of :class:`Solution`: ``relative_residual <= tol`` or ``backward_error <=``
    :func:`precision_floor` of the arrays' dtype (module docstring)."""
    return (relative_residual <= tol) | (backward_error_ <= precision_floor(relative_residual.dtype))


def _converged(relative_residual, backward_error_, tol):
    """:func:`is_converged` as a device array, decided on the host where the (A, K) diagnostics are concrete (the
    same comparisons in the arrays' dtype; no eager program per shape)."""
    if not _checks.is_concrete(relative_residual, backward_error_):
        return is_converged(relative_residual, backward_error_, tol)
    rel, eta = np.asarray(relative_residual), np.asarray(backward_error_)
    floor = precision_floor(rel.dtype)
    return jax.device_put((rel <= rel.dtype.type(tol)) | (eta <= eta.dtype.type(floor)))


def alpha_chunk(method: str, shape, dtype) -> int:
    """How many alphas :func:`solve_operator` solves together with ``method`` (a key of
    :data:`WORKING_VECTORS`) for an (n, K) prior of ``dtype``: as many as fit :data:`SOLVE_CHUNK_BYTES` (at
    least 1), and for an iterative method at most :data:`SOLVE_CHUNK_ALPHAS` where ``n K`` reaches
    :data:`SOLVE_CHUNK_MIN_SIZE`."""
    size = int(np.prod(shape))
    per_alpha = WORKING_VECTORS[method] * size * np.dtype(dtype).itemsize
    chunk = max(1, int(min(SOLVE_CHUNK_BYTES / max(per_alpha, 1), 2**31)))  # an infinite budget: one chunk
    if method in SOLVERS and size >= SOLVE_CHUNK_MIN_SIZE:
        chunk = min(chunk, SOLVE_CHUNK_ALPHAS)
    return chunk


def in_chunks(fn, count: int, chunk: int):
    """``fn(part)`` over the index range ``0..count`` (``part``: a slice; a pytree of arrays with a leading axis
    out): in one call where ``chunk >= count``, else in near-equal slices of at most ``chunk`` (at most two shapes
    to compile), one after the other (blocking: asynchronous dispatch would hold every slice's working set at
    once), concatenated."""
    if chunk >= count:
        return fn(slice(None))
    size = -(-count // -(-count // chunk))
    parts = [jax.block_until_ready(fn(slice(i, i + size))) for i in range(0, count, size)]
    return jax.tree.map(lambda *p: jnp.concatenate(p), *parts)


def in_alpha_chunks(fn, alphas, method: str, shape, dtype):
    """``fn(alphas)`` (a pytree of arrays with a leading (A,) axis), computed :func:`in_chunks` of
    :func:`alpha_chunk` alphas (memory, or the cap on large problems)."""
    if _checks.is_concrete(alphas):  # sliced on the host: no eager slice program per chunk
        alphas = np.asarray(alphas)
    return in_chunks(lambda part: fn(alphas[part]), alphas.shape[0], alpha_chunk(method, shape, dtype))


def _check_divergence(op: FactoredOperator, alphas, normalization) -> None:
    """Raises ValueError when ``alpha * rho(A^F_k) >= 1`` for some class (eager; skipped when traced).

    Reuses :func:`jaxclp.propagate.check_spectrum`: the a-priori bound (rho <= 1 for "sym"/"row") or the
    row/column-sum bound proves convergence for free; the power iteration runs only when neither does.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        info = check_spectrum(op, alphas, throw=False, normalization=normalization)
    if info is None:
        return
    a = float(np.max(np.asarray(alphas)))
    rho = np.asarray(info.rho)
    bad = np.flatnonzero(a * rho >= 1.0)
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"solve: alpha * rho >= 1 for class {k}: spectral radius rho = {rho[k]:.6g}, alpha = {a:.6g}, "
            f"alpha * rho = {a * rho[k]:.6g}; CLP's propagation diverges and the closed form holds only for "
            f"alpha < 1/rho = {1.0 / rho[k]:.6g} (classes that diverge: {bad.tolist()}). Use "
            f"normalization='sym' or 'row', a smaller alpha, or throw=False to get the linear system's "
            f"solution with its diagnostics.")


def _check_converged(sol: Solution, alphas, tol, max_iters) -> None:
    """Raises ValueError when some class did not reach ``tol`` (eager; skipped when traced)."""
    if not _checks.is_concrete(sol.converged, sol.relative_residual):
        return
    conv = np.asarray(sol.converged)
    if conv.all():
        return
    rel = np.asarray(sol.relative_residual)
    eta = np.asarray(sol.backward_error)
    where = np.argwhere(~conv)[0]
    at = (f"alpha = {float(np.asarray(alphas).reshape(-1)[where[0]]):.6g}, class {int(where[-1])}"
          if conv.ndim == 2 else f"class {int(where[0])}")
    floor = precision_floor(rel.dtype)
    raise ValueError(
        f"solve did not converge: method {sol.method!r} reached relative residual {float(rel[tuple(where)]):.3g} "
        f"> tol = {tol:g} and backward error {float(eta[tuple(where)]):.3g} > {floor:.3g} (the "
        f"{rel.dtype.name} precision floor) ({at}; {int((~conv).sum())} of {conv.size} systems not converged) "
        f"within max_iters = {max_iters}. Raise max_iters or tol, try another method, or pass throw=False to "
        f"get the value with its diagnostics.")


def solve(
    graph: Graph,
    b0: jax.Array,
    H: jax.Array,
    prior: jax.Array,
    *,
    alpha,
    normalization: Normalization = "sym",
    method: Method = "auto",
    tol: float = 1e-6,
    max_iters: int = 10_000,
    throw: bool = True,
    x0=None,
) -> Solution:
    """Closed-form CLP ``B[:, k] = (1-alpha) (I - alpha A^F_k)^{-1} prior[:, k]`` for all classes.

    Args:
        graph: the graph.
        b0: (n, K) initial beliefs.
        H: (K, K) compatibility.
        prior: (n, K) prior D.
        alpha: scalar in (0, 1), or a 1-D array of alphas (solved together, vmapped; a chunk at a time where
            all at once would pass :data:`SOLVE_CHUNK_BYTES`, and at most :data:`SOLVE_CHUNK_ALPHAS` together
            from n K = :data:`SOLVE_CHUNK_MIN_SIZE`; the value is then (A, n, K)).
        normalization: "sym", "row" or "none".
        method: "auto" or one of ``SOLVERS`` (see the module docstring).
        tol: relative residual target per class; a class whose normwise backward error is within
            :data:`BACKWARD_ERROR_ULPS` units of roundoff of its dtype counts as converged too (the module
            docstring: in float32 near alpha = 1 a relative residual of 1e-6 is below what rounding leaves).
        max_iters: iteration cap of the iterative methods.
        throw: (lineax's convention) raise a ValueError when ``alpha * rho(A^F_k) >= 1`` for some class
            (naming the class, rho and 1/rho: the propagation diverges, and the value of the linear system,
            even where a direct or Krylov method solves it, is not CLP's fixed point) or when a class does not
            reach ``tol``. With ``throw=False`` the :class:`Solution` is returned with its diagnostics
            (``converged``, ``relative_residual``, ``rho_bound``). The checks need concrete values: inside
            ``jax.jit`` (traced input) they are skipped, as with every input check.
        x0: an optional warm start, shaped like the value ((n, K), or (A, n, K) for a vector of alphas; the
            user's node order), e.g. the solution of a nearby system (:mod:`jaxclp.update`). The iterative
            methods start from it instead of their own start ("neumann": ``(1 - alpha) prior``, "jacobi" the same
            divided by the diagonal, the Krylov methods zero); the convergence test is unchanged (relative to
            ``||(1 - alpha) prior_k||``), so the value agrees with a cold solve to ``tol``; "dense" ignores it.
            None (the default): every method's own start, exactly as without the argument.

    Returns:
        A :class:`Solution`.

    ``graph`` is any graph of the protocol (:mod:`jaxclp.protocol`), e.g. a :class:`jaxclp.ShardedGraph`: the
    methods "auto", "neumann", "jacobi", "bicgstab", "cg" (no "dense", "gmres": :data:`EDGE_LIST_METHODS`),
    ``value`` in the user's node order (differentiable as on a Graph: the adjoint solve runs on the sharded
    transposed operator).

    Raises:
        ValueError: bad input (naming the argument), and with ``throw=True`` divergence or non-convergence.
    """
    _checks.clp_inputs(graph.num_nodes, b0, H, prior)
    check_normalization(normalization)
    op = clp_operator(graph, b0, H, normalization=normalization)
    start = None
    if x0 is not None:
        x0 = jnp.asarray(x0).astype(op.left.dtype)
        want = tuple(np.shape(alpha)) + tuple(np.shape(prior))
        if tuple(x0.shape) != want:
            raise ValueError(f"x0 must have the value's shape {want} (the prior's, with a leading (A,) axis for a "
                             f"vector of alphas); got {tuple(x0.shape)}")
        if x0.ndim == 3:  # (A, n, K): the rows of every alpha's start at once, as one (n, A K) array
            a, n, k = x0.shape
            start = jnp.swapaxes(x0, 0, 1).reshape(n, a * k)
            start = jnp.swapaxes(graph.to_internal(start).reshape(-1, a, k), 0, 1)
        else:
            start = graph.to_internal(x0)
    sol = solve_operator(op, graph.to_internal(jnp.asarray(prior).astype(op.left.dtype)), alpha=alpha,
                         method=method, tol=tol, max_iters=max_iters, normalization=normalization, throw=throw,
                         x0=start)
    return sol._replace(value=graph.from_internal(sol.value, axis=sol.value.ndim - 2))
