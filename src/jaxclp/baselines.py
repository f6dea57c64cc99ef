"""Baselines on the same machinery: LP, C&S, CLP* and LINK.

LP and both C&S stages are label propagation ``X = (1-a) (I - a Ahat)^{-1} X0``, i.e. the CLP solver with
the operator ``Ahat`` itself (:func:`jaxclp.operator.lp_operator`); every function accepts a scalar alpha or a 1-D
vector of alphas (solved together) and returns arrays with a leading alpha axis in the latter case.

Edge weights: ``Ahat`` is built from ``graph.weights`` (the weights given to ``Graph.from_edge_index`` etc.)
with the normalization applied on top of them, using weighted degrees: ``"sym"``:
``w_rs / sqrt(d_in(r) d_out(s))``, ``"row"``: ``w_rs / d_in(r)``, ``"none"``: the weights as they are. (PyG's
``LabelPropagation`` / ``CorrectAndSmooth`` instead use an ``edge_weight`` they are given as the propagation
matrix itself, without normalization, and normalize only unweighted graphs.)

Closed form or iteration. Without the options below LP is the exact fixed point (the linear solve of
:func:`jaxclp.solve.solve_operator`, to relative residual ``tol``). With ``num_layers``, ``clamp`` or a per-step
reset the propagation is the iteration PyG runs::

    X_{t+1} = post((1 - a) X0 + a Ahat X_t),  X_0 = X0,

where ``post`` clips every entry to ``clamp = (lo, hi)`` and then resets the rows of ``reset_mask`` to their
``X0`` values; it runs exactly ``num_layers`` steps, or (``num_layers=None``) until every column's increment
``||X_{t+1} - X_t||_2 <= tol ||(1 - a) X0||_2`` (a contraction for ``a < 1``: ``Ahat`` has 2-norm <= 1 for
"sym", inf-norm <= 1 for "row", and clipping is nonexpansive). A reset without clamp and without
``num_layers`` is solved in closed form (the system restricted to the other rows).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp.compatibility import masked_labels, one_hot_train
from jaxclp.graph import Graph, Normalization, check_normalization, cpu_resident, spmm
from jaxclp.operator import lp_operator, norm_bounds
from jaxclp.program_store import stored_jit
from jaxclp.solve import Method, Solution, backward_error, solve_operator, stationary_columns, system_norm
from jaxclp.train import TrainConfig, train_full_batch

AUTOSCALE_CAP = 1000.0
"""PyG's autoscale cap: a node's C&S scale is set to 1 where it is infinite or exceeds this."""
ALPHA_ONE_LAYERS = 50
"""Steps run for a propagation with alpha = 1 when no layer count is given (PyG's C&S example uses 50)."""


def _alpha_array(alpha, dtype, *, allow_one: bool, name: str = "alpha") -> jax.Array:
    a = _checks.device_array(alpha, dtype)
    if a.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array; got shape {a.shape}")
    if _checks.is_concrete(a):
        arr = np.asarray(a)
        hi_ok = np.all(arr <= 1) if allow_one else np.all(arr < 1)
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0) or not hi_ok:
            interval = "(0, 1]" if allow_one else "the open interval (0, 1)"
            extra = "" if allow_one else " (alpha = 1 needs a fixed number of layers)"
            raise ValueError(f"{name} must lie in {interval}{extra}; got {arr.tolist()}")
    return a


def _check_layers(name: str, layers) -> None:
    if layers is not None and (isinstance(layers, bool) or not isinstance(layers, (int, np.integer))
                               or layers < 1):
        raise ValueError(f"{name} must be None or a positive int; got {layers!r}")


def _check_clamp(clamp) -> tuple[float, float] | None:
    if clamp is None:
        return None
    try:
        lo, hi = (float(c) for c in clamp)
    except (TypeError, ValueError):
        raise ValueError(f"clamp must be None or a pair (lo, hi); got {clamp!r}") from None
    if math.isnan(lo) or math.isnan(hi) or lo > hi:
        raise ValueError(f"clamp must be a pair (lo, hi) with lo <= hi; got {clamp!r}")
    return lo, hi


def propagate_labels(graph: Graph, x0: jax.Array, *, alpha, normalization: Normalization = "sym",
                     method: Method = "auto", tol: float = 1e-6, max_iters: int = 10_000,
                     num_layers: int | None = None, clamp: tuple[float, float] | None = None,
                     reset_mask: jax.Array | None = None) -> Solution:
    """Label propagation of an (n, K) signal: ``(1-alpha)(I - alpha Ahat)^{-1} x0`` or its iteration.

    Args:
        graph: the graph (its ``weights`` are used, normalized on top; see the module docstring).
        x0: (n, K) signal.
        alpha: scalar or 1-D vector (solved together; the value gets a leading alpha axis). In (0, 1); 1 is
            allowed with ``num_layers`` (not a contraction: the result is that many steps, not a fixed point).
        normalization: "sym", "row" or "none".
        method: solver of the closed form ("auto" or one of :data:`jaxclp.solve.SOLVERS`); ignored when
            iterating.
        tol: relative residual (closed form) or relative increment (iteration) per column.
        max_iters: iteration cap.
        num_layers: run exactly this many steps of the iteration (PyG's ``num_layers``) instead of solving.
        clamp: ``(lo, hi)``: clip every entry to ``[lo, hi]`` after each step (PyG's LP clamps to (0, 1)).
        reset_mask: (n,) bool: reset these rows to ``x0`` after each step (training labels kept fixed).

    Returns:
        A :class:`jaxclp.solve.Solution`; ``method`` is ``"iterate"`` when iterating (its residual is then the
        last increment ``||post(...) - X||`` per column).

    ``graph`` is any graph of the protocol (:mod:`jaxclp.protocol`), e.g. a :class:`jaxclp.ShardedGraph`: every
    option, the methods "auto", "neumann", "jacobi", "bicgstab", "cg" ("auto" never picks "dense"); ``value`` in
    the user's node order.
    """
    x0, alphas, bounds = _lp_inputs(graph.num_nodes, x0, alpha, normalization=normalization, tol=tol,
                                    num_layers=num_layers, clamp=clamp, reset_mask=reset_mask)
    dtype = x0.dtype
    op = lp_operator(graph, x0.shape[1], normalization=normalization, dtype=dtype)
    x0 = graph.to_internal(x0)
    if num_layers is None and bounds is None:
        if reset_mask is None:
            sol = solve_operator(op, x0, alpha=alphas, method=method, tol=tol, max_iters=max_iters,
                                 normalization=normalization)
        else:  # the rows outside the reset mask are solved (not a sharded graph's padding rows: op is 0 there)
            keep = (jax.device_put(~np.asarray(reset_mask, bool)) if _checks.is_concrete(reset_mask)
                    else ~jnp.asarray(reset_mask, bool))
            sol = _solve_with_reset(
                op, x0, alphas, graph.to_internal(keep),
                lambda o, prior, a: solve_operator(o, prior, alpha=a, method=method, tol=tol, max_iters=max_iters,
                                                   normalization=normalization))
        return sol._replace(value=graph.from_internal(sol.value, axis=sol.value.ndim - 2))
    lo, hi = bounds if bounds is not None else (-math.inf, math.inf)
    reset = graph.to_internal(_checks.device_array(np.zeros(graph.num_nodes, bool) if reset_mask is None
                                                   else reset_mask, bool))
    lo, hi, tol_array = (_checks.device_array(v, dtype) for v in (lo, hi, tol))
    x, its, res, rel = _iterate(op, x0, alphas, reset, lo, hi, tol_array, num_layers, max_iters)
    return _iterate_solution(op, x0, alphas, graph.from_internal(x, axis=x.ndim - 2), its, res, rel, tol)


def _iterate_solution(op, x0, alphas, x, its, res, rel, tol) -> Solution:
    """The :class:`jaxclp.solve.Solution` of the LP iteration: ``converged`` is the increment test
    ``relative_residual <= tol`` (a clamped iteration solves no linear system, so no backward-error floor);
    ``backward_error`` is the increment measured as :func:`jaxclp.solve.backward_error` of the linear system."""
    rows, cols = norm_bounds(op)
    if not cpu_resident(x0, alphas, x, res, rel, rows, cols):
        a = alphas[..., None]
        den = jnp.linalg.norm((1.0 - a)[..., None] * x0, axis=-2)
        eta = backward_error(res, jnp.linalg.norm(x, axis=-2), den, system_norm(a, rows, cols))
        return Solution(value=x, converged=rel <= tol, iterations=its, residual=res, relative_residual=rel,
                        rho_bound=jnp.minimum(rows, cols), backward_error=eta, method="iterate")
    # on the CPU: the two norms in one program, the (A, K) elementwise rest in numpy (the same IEEE operations,
    # each rounded once, where eager programs compiled one per operation and shape)
    den, x_norm = (np.asarray(v) for v in _iterate_norms(x0, alphas, x))
    rows, cols, rel_host = np.asarray(rows), np.asarray(cols), np.asarray(rel)
    with np.errstate(all="ignore"):  # an overflow gives inf as on the device, without a warning
        eta = backward_error(np.asarray(res), x_norm, den, system_norm(np.asarray(alphas)[..., None], rows, cols))
    return Solution(value=x, converged=jax.device_put(rel_host <= rel_host.dtype.type(tol)), iterations=its,
                    residual=res, relative_residual=rel, rho_bound=jax.device_put(np.minimum(rows, cols)),
                    backward_error=jax.device_put(eta), method="iterate")


@jax.jit
def _iterate_norms(x0, alphas, x):
    """``(||(1 - a) x0||, ||x||)`` per column (and alpha) of :func:`_iterate_solution`: the norms of its
    backward error."""
    a = alphas[..., None]
    return jnp.linalg.norm((1.0 - a)[..., None] * x0, axis=-2), jnp.linalg.norm(x, axis=-2)


def _lp_inputs(num_nodes: int, x0, alpha, *, normalization, tol, num_layers, clamp, reset_mask):
    """The checks and casts of :func:`propagate_labels`.

    Args:
        num_nodes: n (the user's node count; ``x0`` and ``reset_mask`` are in the user's order).
        x0: (n, K) array; alpha, normalization, tol, num_layers, clamp, reset_mask: as :func:`propagate_labels`.

    Returns:
        ``(x0, alphas, bounds)``: ``x0`` cast to its own floating dtype, or the default float for an integer or
        bool ``x0``; ``alphas`` the scalar or (A,) alphas in that dtype; ``bounds`` the ``(lo, hi)`` floats of
        ``clamp`` or None.

    Raises:
        ValueError: a bad argument, named.
    """
    _checks.shape("x0", x0, (num_nodes, None))
    _checks.finite("x0", x0)
    check_normalization(normalization)
    _check_layers("num_layers", num_layers)
    bounds = _check_clamp(clamp)
    if reset_mask is not None:
        _checks.mask("reset_mask", reset_mask, num_nodes, nonempty=False)
    if not (isinstance(tol, (int, float)) and tol > 0):
        raise ValueError(f"tol must be a positive number; got {tol!r}")
    dtype = x0.dtype if jnp.issubdtype(x0.dtype, jnp.floating) else jnp.result_type(float)
    x0 = x0.astype(dtype)
    return x0, _alpha_array(alpha, dtype, allow_one=num_layers is not None), bounds


def _solve_with_reset(op, x0, alphas, keep, solve) -> Solution:
    """Fixed point with the rows outside ``keep`` held at ``x0``: ``x_L = x0_L`` and
    ``(I - a A_UU) x_U = (1-a) x0_U + a A_UL x0_L`` (U = ``keep``), solved as the operator
    ``diag(u) Ahat diag(u)``, ``u = keep``.

    ``keep``: the rows outside ``reset_mask`` (internal order: a sharded graph's padding rows are not kept).

    Args:
        op: a :class:`jaxclp.operator.FactoredOperator` (any graph of the protocol; internal order).
        x0: (n, K) start; alphas: scalar or (A,) alphas; keep: (n,) bool rows to solve.
        solve: ``solve(restricted_op, prior, a)`` -> :class:`jaxclp.solve.Solution` of ``(I - a op) x =
            (1 - a) prior``.

    Returns:
        A :class:`jaxclp.solve.Solution` (a leading alpha axis for a vector ``alphas``).
    """
    u, labelled = _reset_setup(op, x0, keep)
    restricted = op._replace(left=u, right=u)
    host = cpu_resident(x0, alphas, u, labelled)  # the elementwise glue in numpy: no program per operation

    def one(a):
        sol = solve(restricted, _restricted_prior(x0, u, labelled, a, host), a)
        return sol._replace(value=_restricted_value(u, sol.value, x0, host))

    if alphas.ndim == 0:
        return one(alphas)
    # a concrete grid is sliced on the host (an eager index compiles a program per shape)
    sols = [one(a) for a in (map(jax.device_put, np.asarray(alphas)) if _checks.is_concrete(alphas) else alphas)]
    return Solution(*_stack_solutions([s[:-1] for s in sols]), method=sols[0].method)


def _restricted_prior(x0, u, labelled, a, host: bool):
    """The prior of the restricted system for alpha ``a`` (:func:`_solve_with_reset`): ``x0 + a / (1 - a)
    A_{:,L} x0_L`` on the kept rows, ``x0 / (1 - a)`` on the others.

    With ``host`` (arrays on the CPU) in numpy, the operations XLA:CPU runs for :func:`_product` and
    :func:`_reset_prior`, each rounded once: XLA:CPU divides an array by the scalar ``1 - a`` as a product with
    its reciprocal ``x0 * (1 / (1 - a))`` (measured: every element of 2000 (array, alpha) pairs in float32 and
    float64; a true division differs in the last bit), so numpy does the same."""
    if not host:
        return _reset_prior(x0, u, _product(a / (1.0 - a), labelled), a)
    x0, u, labelled, a = (np.asarray(v) for v in (x0, u, labelled, a))
    return jax.device_put(np.where(u > 0, x0 + (a / (1.0 - a)) * labelled, x0 * (1.0 / (1.0 - a))))


def _restricted_value(u, value, x0, host: bool):
    """The solved rows of ``value``, the reset rows exactly ``x0`` (:func:`_reset_value`; with ``host``, arrays
    on the CPU, a numpy select)."""
    if not host:
        return _reset_value(u, value, x0)
    return jax.device_put(np.where(np.asarray(u) > 0, np.asarray(value), np.asarray(x0)))


def _stack_solutions(fields):
    """:func:`_stack_fields` of the per-alpha tuples of arrays; copied together in numpy where they are all on the
    CPU (no program per shape)."""
    if not cpu_resident(*(f for row in fields for f in row)):
        return _stack_fields(fields)
    return tuple(jax.device_put(np.stack([np.asarray(f) for f in field])) for field in zip(*fields))


@jax.jit
def _reset_setup(op, x0, keep):
    """``(u, A_{:,L} x0_L)`` of :func:`_solve_with_reset`: ``u`` the (n, K) 0/1 kept rows."""
    u = jnp.broadcast_to(keep[:, None], x0.shape).astype(x0.dtype)
    return u, op.matvec((1.0 - u) * x0)


@jax.jit
def _reset_prior(x0, u, scaled, a):
    """The prior of the restricted system for alpha ``a`` (:func:`_solve_with_reset`); ``scaled`` is
    ``a / (1 - a) * A_{:,L} x0_L`` (:func:`_product`)."""
    return jnp.where(u > 0, x0 + scaled, x0 / (1.0 - a))


@jax.jit
def _product(c, x):
    """``c * x`` as a program of its own: in one jitted block with the sum ``b + c * x`` that follows it, XLA
    contracts the two into a fused multiply-add (neither ``optimization_barrier`` nor a bitcast prevents it),
    1 ulp off the unfused result these functions have always returned."""
    return c * x


@jax.jit
def _reset_value(u, value, x0):
    """The solved rows, the reset rows exactly ``x0`` (not ``(1-a) x0 / (1-a)``)."""
    return jnp.where(u > 0, value, x0)


@jax.jit
def _stack_fields(fields):
    """Stacks the per-alpha tuples of arrays field by field."""
    return tuple(jnp.stack(f) for f in zip(*fields))


def _lp_iteration(product, hold, x0, alphas, lo, hi, tol, num_layers, max_iters):
    """The iteration ``x <- hold(clip((1 - a) x0 + a product(x), lo, hi))`` (traced inside :func:`_iterate`).

    ``product``: ``x -> Ahat x``; ``hold``: the rows kept after each step (reset rows back to ``x0``, padding
    rows of a sharded graph at 0); ``num_layers`` steps, or until the relative increment per column is <=
    ``tol`` (at most ``max_iters``). A vector ``alphas`` runs under ``jax.vmap``.

    Returns:
        ``(x, iterations, residual, relative_residual)``, per column (a leading alpha axis for a vector).
    """
    k = x0.shape[1]

    def run(alpha):
        base = (1.0 - alpha) * x0

        def step(x):
            return hold(jnp.clip(base + alpha * product(x), lo, hi))

        den = jnp.linalg.norm(base, axis=0)
        if num_layers is not None:
            x = jax.lax.fori_loop(0, num_layers, lambda _, x: step(x), x0)
            its = jnp.full((k,), num_layers, jnp.int32)
        else:
            x, its = stationary_columns(step, x0, den, tol, max_iters)
        res = jnp.linalg.norm(step(x) - x, axis=0)
        return x, its, res, res / jnp.where(den > 0, den, 1.0)

    if alphas.ndim == 0:
        return run(alphas)
    return jax.vmap(run)(alphas)


@functools.partial(jax.jit, static_argnames=("num_layers", "max_iters"))
def _iterate(op, x0, alphas, reset, lo, hi, tol, num_layers, max_iters):
    """:func:`_lp_iteration` with ``Ahat`` of the LP operator ``op`` (internal order)."""
    real = op.real_rows

    def hold(x):
        x = jnp.where(reset[:, None], x0, x)
        return x if real is None else jnp.where(real[:, None], x, 0.0)

    return _lp_iteration(lambda x: op.graph.spmm(op.values, x), hold, x0, alphas, lo, hi, tol, num_layers,
                         max_iters)


def label_propagation(graph: Graph, labels: jax.Array, train_mask: jax.Array, num_classes: int, *,
                      alpha, normalization: Normalization = "sym", method: Method = "auto", tol: float = 1e-6,
                      max_iters: int = 10_000, num_layers: int | None = None,
                      clamp: tuple[float, float] | None = None, reset_train: bool = False) -> jax.Array:
    """LP (Zhou et al. 2004): propagate the one-hot training labels ``M*Y``.

    Args:
        graph, labels ((n,) ints; only training entries are read), train_mask ((n,) bool), num_classes: the
            problem. ``graph.weights`` are honoured (normalized on top; see the module docstring).
        alpha: scalar or 1-D vector in (0, 1) (1 allowed with ``num_layers``).
        normalization, method, tol, max_iters: as :func:`propagate_labels`.
        num_layers: run this many steps of the iteration instead of the closed form (PyG's ``num_layers``).
        clamp: ``(lo, hi)`` per-step clip (PyG's default post step is ``(0, 1)``); default none.
        reset_train: reset the training rows to their one-hot labels after each step (labels kept fixed, as
            Zhu & Ghahramani's LP); default False (Zhou et al.: training rows are propagated too).

    ``graph`` is any graph of the protocol (e.g. a :class:`jaxclp.ShardedGraph`; see :func:`propagate_labels`).

    Returns:
        (n, K) scores (or (A, n, K) for a vector of alphas). Nodes the labels cannot reach score 0.
    """
    _checks.mask("train_mask", train_mask, graph.num_nodes)
    if cpu_resident(labels, train_mask):  # built on the host: no program per shape
        y0 = jax.device_put(_one_hot_train_host(labels, train_mask, num_classes, jnp.result_type(float)))
    else:
        y0 = one_hot_train(masked_labels(labels, train_mask), train_mask, num_classes)
    return propagate_labels(graph, y0, alpha=alpha, normalization=normalization, method=method, tol=tol,
                            max_iters=max_iters, num_layers=num_layers, clamp=clamp,
                            reset_mask=train_mask if reset_train else None).value


def correct_and_smooth(
    graph: Graph,
    prior: jax.Array,
    labels: jax.Array,
    train_mask: jax.Array,
    *,
    alpha_correct: float,
    alpha_smooth,
    normalization: Normalization = "sym",
    method: Method = "auto",
    tol: float = 1e-6,
    max_iters: int = 10_000,
    scale: str | float = "auto",
    autoscale_cap: float | None = AUTOSCALE_CAP,
    correct_layers: int | None = None,
    smooth_layers: int | None = None,
    clamp: bool = False,
    clip_corrected: bool = True,
) -> jax.Array:
    """C&S (Huang et al. 2021): correct the prior with the propagated training residual, then smooth.

    Correct: the training residual ``E0 = M*(Y - D)`` is propagated with ``alpha_correct`` to ``E`` and added
    back, ``Z = D + scale * E``:

    * ``scale="auto"`` (autoscale, default): ``E`` is the LP of ``E0``; node i gets
      ``scale_i = sigma / ||E_i||_1`` with ``sigma`` the mean L1 norm of the training residuals, and
      ``scale_i := 1`` where it is infinite or larger than ``autoscale_cap`` (PyG's rule; default 1000):
      without the cap a node far from every training node has a near-zero ``E_i`` that would be scaled up
      > 1000x, making the result depend on solver round-off. ``autoscale_cap=None`` disables the cap.
    * ``scale=s`` (a float >= 0; the C&S paper's "FDiff-scale", PyG's ``autoscale=False``): ``E`` propagates
      ``E0`` with the training rows reset to ``E0`` after every step (fixed at their residuals), and
      ``Z = D + s E``.

    With ``clip_corrected`` (default) ``Z`` is clipped to [0, 1] once. Smooth: training rows of ``Z`` are set
    to their one-hot labels and the result is propagated with ``alpha_smooth``.

    The correction is solved to ``tol / cap`` (``tol / max(s, 1)`` for a fixed scale; never below 10 machine
    epsilons) because the scaling multiplies its error by up to that factor; so the result is accurate to
    about ``tol`` whatever the solver.

    PyG-equivalent settings (``torch_geometric.nn.CorrectAndSmooth(L1, a1, L2, a2, autoscale, scale)``):
    ``correct_layers=L1, smooth_layers=L2, clamp=True, clip_corrected=False``. Our defaults differ from PyG's in
    three ways: exact fixed points instead of a fixed number of layers, no per-step clamps, and ``Z`` clipped
    to [0, 1] once.

    Args:
        graph: the graph (``graph.weights`` honoured, normalized on top; see the module docstring).
        prior: (n, K) base predictions D.
        labels: (n,) labels (only training entries are read).
        train_mask: (n,) bool.
        alpha_correct: scalar in (0, 1]; 1 runs ``correct_layers`` steps (default
            :data:`ALPHA_ONE_LAYERS` = 50, as PyG's example; alpha = 1 has no fixed point to solve for).
        alpha_smooth: scalar in (0, 1) (or (0, 1] with ``smooth_layers``), or a 1-D vector (the smoothing
            solves are vmapped; the correction is computed once).
        normalization, method, tol, max_iters: as :func:`propagate_labels`.
        scale: ``"auto"`` or a fixed nonnegative float (see above).
        autoscale_cap: the autoscale cap (None: no cap). Ignored for a fixed scale.
        correct_layers, smooth_layers: fixed numbers of steps (PyG's ``num_correction_layers`` /
            ``num_smoothing_layers``) instead of the exact fixed points.
        clamp: PyG's per-step clamps: every correction step clipped to [-1, 1] (autoscale only: with a fixed
            scale the training rows are reset instead, as in PyG) and every smoothing step to [0, 1].
        clip_corrected: clip ``Z`` to [0, 1] before smoothing (PyG does not).

    ``graph`` is any graph of the protocol: both propagations are :func:`propagate_labels` on it, the correction
    between them runs on the (n, K) arrays in the user's order.

    Returns:
        (n, K) smoothed scores, or (A, n, K) for a vector ``alpha_smooth``.
    """
    n, k = prior.shape
    _checks.mask("train_mask", train_mask, n)
    _checks.finite("prior", prior)
    if jnp.ndim(alpha_correct) != 0:
        raise ValueError("alpha_correct must be a scalar (loop over it; alpha_smooth may be a vector)")
    _check_layers("correct_layers", correct_layers)
    _check_layers("smooth_layers", smooth_layers)
    if not isinstance(clamp, (bool, np.bool_)):
        raise ValueError(f"clamp must be a bool; got {clamp!r}")
    auto = isinstance(scale, str)
    if auto and scale != "auto":
        raise ValueError(f"scale must be 'auto' or a nonnegative float; got {scale!r}")
    if not auto:
        if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)) \
                or not math.isfinite(scale) or scale < 0:
            raise ValueError(f"scale must be 'auto' or a finite nonnegative float; got {scale!r}")
    if autoscale_cap is not None and not (isinstance(autoscale_cap, (int, float)) and autoscale_cap > 0):
        raise ValueError(f"autoscale_cap must be None or a positive number; got {autoscale_cap!r}")
    dtype = prior.dtype if jnp.issubdtype(prior.dtype, jnp.floating) else jnp.result_type(float)
    prior = prior.astype(dtype)
    a1 = _alpha_array(alpha_correct, dtype, allow_one=True, name="alpha_correct")
    a2 = _alpha_array(alpha_smooth, dtype, allow_one=smooth_layers is not None, name="alpha_smooth")
    if correct_layers is None and _checks.is_concrete(a1) and float(a1) == 1.0:
        correct_layers = ALPHA_ONE_LAYERS  # alpha_correct = 1: no fixed point to solve for
    amplification = (autoscale_cap or AUTOSCALE_CAP) if auto else max(float(scale), 1.0)
    tol_correct = max(tol / amplification, 10 * float(jnp.finfo(dtype).eps))
    common = dict(normalization=normalization, method=method, max_iters=max_iters)

    # on the CPU the elementwise glue runs in numpy (the same IEEE operations, no program per shape)
    host = cpu_resident(prior, labels, train_mask)
    y, e0 = _cs_residual_host(prior, labels, train_mask) if host else _cs_residual(prior, labels, train_mask)
    if auto:
        e = propagate_labels(graph, e0, alpha=a1, tol=tol_correct, num_layers=correct_layers,
                             clamp=(-1.0, 1.0) if clamp else None, **common).value
        factor = _cs_autoscale(e, e0, train_mask, autoscale_cap)
    else:
        e = propagate_labels(graph, e0, alpha=a1, tol=tol_correct, num_layers=correct_layers,
                             reset_mask=train_mask, **common).value
        factor = _checks.device_array(scale, dtype)
    if host and cpu_resident(e, factor):
        g0 = jax.device_put(_cs_smooth_start_host(prior, np.asarray(factor) * np.asarray(e), y, train_mask,
                                                  clip_corrected))
    else:
        g0 = _cs_smooth_start(prior, _product(factor, e), y, train_mask, clip_corrected)
    return propagate_labels(graph, g0, alpha=a2, tol=tol, num_layers=smooth_layers,
                            clamp=(0.0, 1.0) if clamp else None, **common).value


@jax.jit
def _cs_residual(prior, labels, train_mask):
    """``(M*Y, E0 = M*(Y - D))`` of :func:`correct_and_smooth` in the prior's dtype."""
    y = one_hot_train(masked_labels(labels, train_mask), train_mask, prior.shape[1]).astype(prior.dtype)
    return y, jnp.where(train_mask[:, None], y - prior, 0.0)


def _one_hot_train_host(labels, train_mask, num_classes: int, dtype) -> np.ndarray:
    """:func:`jaxclp.compatibility.one_hot_train` of the masked labels in numpy: (n, K) one-hot ``dtype`` rows
    on the training nodes, zeros elsewhere (labels outside ``[0, K)`` give a zero row, as ``jax.nn.one_hot``)."""
    hit = np.asarray(labels)[:, None] == np.arange(num_classes)
    return (hit & np.asarray(train_mask, bool)[:, None]).astype(dtype)


def _cs_residual_host(prior, labels, train_mask):
    """:func:`_cs_residual` in numpy for arrays on the CPU (a one-hot, a difference, a select: the same bits)."""
    prior = np.asarray(prior)
    mask = np.asarray(train_mask, bool)
    y = _one_hot_train_host(labels, mask, prior.shape[1], prior.dtype)
    return jax.device_put(y), jax.device_put(np.where(mask[:, None], y - prior, np.zeros((), prior.dtype)))


def _cs_smooth_start_host(prior, scaled, y, train_mask, clip_corrected: bool) -> np.ndarray:
    """:func:`_cs_smooth_start` in numpy (``scaled`` a numpy array); the clip is ``jnp.clip``'s maximum then
    minimum (a -0.0 sum clips to +0.0, as XLA's maximum gives)."""
    z = np.asarray(prior) + scaled
    if clip_corrected:
        z = np.minimum(np.maximum(z, z.dtype.type(0.0)), z.dtype.type(1.0))
    return np.where(np.asarray(train_mask, bool)[:, None], np.asarray(y), z)


@functools.partial(jax.jit, static_argnames=("clip_corrected",))
def _cs_smooth_start(prior, scaled, y, train_mask, clip_corrected):
    """``G0``: ``Z = D + scaled`` (``scaled`` the scaled correction, :func:`_product`; clipped to [0, 1] with
    ``clip_corrected``) with the training rows set to their labels."""
    z = prior + scaled
    if clip_corrected:
        z = jnp.clip(z, 0.0, 1.0)
    return jnp.where(train_mask[:, None], y, z)


@functools.partial(jax.jit, static_argnames=("autoscale_cap",))
def _cs_autoscale(e, e0, train_mask, autoscale_cap):
    """(n, 1) ``scale_i`` of autoscaled C&S (:func:`correct_and_smooth`)."""
    sigma = jnp.sum(jnp.abs(e0)) / jnp.maximum(jnp.sum(train_mask), 1)
    size = jnp.sum(jnp.abs(e), axis=1, keepdims=True)
    factor = jnp.where(size > 0, sigma / jnp.where(size > 0, size, 1.0), jnp.inf)
    if autoscale_cap is None:
        factor = jnp.where(jnp.isinf(factor), 0.0, factor)
    else:
        factor = jnp.where(jnp.isinf(factor) | (factor > autoscale_cap), 1.0, factor)
    return factor


def clp_star(graph: Graph, prior: jax.Array, start: jax.Array, H: jax.Array, *, alpha,
             num_iters: int = 50, normalization: Normalization = "sym") -> jax.Array:
    """CLP* (the paper's ablation): ``B <- (1-alpha) D + alpha Ahat B H`` for ``num_iters`` steps from ``start``.

    Unlike CLP the classes are coupled through H, so there is no per-class closed form; with a normalized
    Ahat (rho <= 1) and doubly-stochastic H the iteration converges for alpha < 1.

    Args:
        prior: (n, K) D. start: (n, K) initial B (usually B0). H: (K, K).
        alpha: scalar or (A,) vector (vmapped; result (A, n, K)).

    ``graph`` is any graph of the protocol (:mod:`jaxclp.protocol`), e.g. a :class:`jaxclp.ShardedGraph`.
    """
    prior, start, H = jnp.asarray(prior), jnp.asarray(start), jnp.asarray(H)
    _checks.shape("prior", prior, (graph.num_nodes, None))
    n, k = prior.shape
    _checks.shape("start", start, (n, k))
    _checks.shape("H", H, (k, k))
    if np.ndim(alpha) > 1:
        raise ValueError(f"alpha must be a scalar or a 1-D array; got shape {np.shape(alpha)}")
    # a host grid is cast on the host (no eager program); checked in its own dtype, as jnp.asarray(alpha) has it
    _checks.alpha(_checks.device_array(alpha, jnp.result_type(alpha)))
    alphas = _checks.device_array(alpha, prior.dtype)
    check_normalization(normalization)
    values = graph.edge_values(normalization).astype(prior.dtype)
    out = _clp_star(graph, values, graph.to_internal(prior), graph.to_internal(start.astype(prior.dtype)),
                    H.astype(prior.dtype), alphas, num_iters)
    return graph.from_internal(out, axis=out.ndim - 2)


@jax.jit
def _clp_star(graph, values, prior, start, H, alphas, num_iters):
    def run(alpha):
        def step(_, b):
            return (1.0 - alpha) * prior + alpha * graph.spmm(values, b) @ H
        return jax.lax.fori_loop(0, num_iters, step, start)

    return run(alphas) if alphas.ndim == 0 else jax.vmap(run)(alphas)


def fit_link(key: jax.Array, graph: Graph, labels: jax.Array, train_mask: jax.Array, val_mask: jax.Array,
             num_classes: int, cfg: TrainConfig = TrainConfig(), *, num_nodes: int | None = None) -> jax.Array:
    """LINK (Lim et al.): multinomial logistic regression on the rows of the raw adjacency.

    ``logits = A @ W + b`` with ``W`` (n, K): computed as one SpMM, never densifying A. Trained full-batch
    with early stopping on validation.

    Args:
        num_nodes: for a graph padded to shape buckets (:mod:`jaxclp.buckets`), the real node count n (W's
            initial scale ``1 / sqrt(n)``; passed as data, so graphs of one bucket share the program); None: the
            graph's own.

    Returns:
        (n, K) softmax scores of the selected parameters.
    """
    _checks.mask("train_mask", train_mask, graph.num_nodes)
    real = None if num_nodes is None else jax.device_put(np.float32(num_nodes))
    return _fit_link(key, graph, labels, train_mask, val_mask, num_classes, cfg, real)


def _link_kernel(key, graph, labels, train_mask, val_mask, num_classes, cfg, num_nodes=None):
    n = graph.num_nodes if num_nodes is None else num_nodes
    w_key, b_key = jax.random.split(key)
    params = {"w": jax.random.normal(w_key, (graph.num_nodes, num_classes)) * (1.0 / jnp.sqrt(n)),
              "b": jnp.zeros((num_classes,))}
    values = graph.weights.astype(jnp.float32)

    def apply_fn(p, _k, _train):
        return spmm(graph, values, p["w"]) + p["b"]

    best, _ = train_full_batch(apply_fn, params, b_key, labels, train_mask, val_mask, cfg)
    return jax.nn.softmax(apply_fn(best, None, False), axis=-1)


_fit_link = stored_jit(_link_kernel, static_argnames=("num_classes", "cfg"))


@functools.partial(jax.jit, static_argnames=("num_classes", "cfg"))
def fit_link_splits(keys, graph, labels, train_masks, val_masks, num_classes, cfg=TrainConfig()):
    """:func:`fit_link` vmapped over S splits: keys (S,), masks (S, n) -> (S, n, K)."""
    def one(key, tm, vm):
        return _link_kernel(key, graph, labels, tm, vm, num_classes, cfg)
    return jax.vmap(one)(keys, train_masks, val_masks)
