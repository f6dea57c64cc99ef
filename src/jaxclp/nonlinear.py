"""Nonlinear CLP propagation: the propagated term L1-normalized per node, a residual start, a clamp/softmax post
step and an optional echo term, with the layer chosen on validation.

This is the step the CLP authors' published code runs (repository ``zhiqiangzhongddu/TMLR-CLP``,
``code/label_prop_heterophily.py`` and the notebook ``code/Model-CLP-Tog.ipynb``), next to the paper's linear
update ``B <- (1-a) D + a A^F B`` (closed form ``(1-a)(I - a A^F_k)^{-1} D_k``, see :func:`jaxclp.solve`). With
the same ``b0``, ``H`` and per-class operators ``A^F_k`` (:func:`jaxclp.clp_operator`), every layer
``t = 1 .. L`` computes::

    P   = A^F B_{t-1}                                   (all K classes, one SpMM)
    P   = P - A^E B_{t-1}        if echo and t >= 2     (A^E: edge weights (b0[s] H^2)[k] b0[r, k], "sym" Ahat)
    B_t = post(a * L1rows(P) + (1 - a) * S)            L1rows(x) = x / max(sum_k |x_k|, 1e-12)

with ``B_0 = S``, the *start* (also the residual term), one of

* ``"prior"``: the prior D,
* ``"b0"``: ``B0 = M*Y + (1-M)*D`` (training rows replaced by their labels),
* ``"labels"``: the training labels alone (one-hot on training rows, zero elsewhere),
* ``"prior_train"``: D on training rows, zero elsewhere;

``post`` is ``"clamp"`` (to [0, 1]) or ``"softmax"`` (over classes); ``a`` in (0, 1] (``a = 1`` drops the
residual); the adjacency inside ``A^F`` is the raw one (``weight="none"``) or the GCN-normalized one
(``weight="sym"``: ``A[r, s] / sqrt(deg_in(r) deg_in(s))``, the authors' ``gcn_norm`` without self-loops,
equal to :func:`jaxclp.graph.edge_values` "sym" on undirected graphs). The edge weights always use ``b0`` and ``H``
(whatever the start), and the layer is chosen on validation (the first best of ``L = 20``). The authors
chose alpha, start, post, echo and weight on TEST accuracy; here everything is chosen on validation.

Everything is vectorized: :func:`nonlinear_propagate` returns every layer of one configuration from one
``lax.scan``; :func:`nonlinear_grid` vmaps all alphas x starts x posts x echo flags in one scan that tracks the
validation score of every layer and keeps each configuration's best layer (no (L, n, K) tensor per
configuration).
"""

from __future__ import annotations

import functools
import itertools
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp.compatibility import estimate_compatibility, initial_beliefs, masked_labels
from jaxclp.graph import Graph, spmm
from jaxclp.metrics import check_metric, evaluate
from jaxclp.solve import in_chunks

Start = Literal["prior", "b0", "labels", "prior_train"]
Post = Literal["clamp", "softmax"]
Weight = Literal["none", "sym"]
STARTS: tuple[str, ...] = ("prior", "b0", "labels", "prior_train")
POSTS: tuple[str, ...] = ("clamp", "softmax")
WEIGHTS: tuple[str, ...] = ("none", "sym")
NONLINEAR_ALPHAS = tuple(round(0.1 * i, 1) for i in range(1, 11))
NUM_LAYERS = 20
GRID_CHUNK_BYTES = 1 << 30
""":func:`nonlinear_grid` runs its configurations in vmapped chunks whose working set (about 8 arrays of
(chunk, n, K)) stays near this: every configuration at once needed ~18 GB on a 200k-node, 40-class graph. All
of the 18 datasets run their 80 configurations per kernel in one chunk (the largest, Coauthor-CS, needs ~0.7 GB);
a chunked grid equals the one-chunk grid up to float rounding (a vmapped batch of another size)."""
L1_EPS = 1e-12  # torch.nn.functional.normalize's default eps


def _check_choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}; got {value!r}")


def _check_alpha(a, name="alpha"):
    if _checks.is_concrete(a):
        arr = np.asarray(a)
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0) or np.any(arr > 1):
            raise ValueError(f"{name} must lie in (0, 1]; got {arr.tolist()}")


def l1_rows(x: jax.Array) -> jax.Array:
    """``x / max(sum_k |x_k|, 1e-12)`` per row (``torch.nn.functional.normalize(p=1, dim=-1)``)."""
    return x / jnp.maximum(jnp.sum(jnp.abs(x), axis=-1, keepdims=True), L1_EPS)


def nonlinear_values(graph: Graph, weight: Weight = "none") -> jax.Array:
    """(m,) adjacency entries multiplied into the edge weights (as in the authors' code).

    ``"none"``: the raw weights; ``"sym"``: ``w / sqrt(deg_in(r) deg_in(s))`` (zero degree -> zero entry).
    """
    _check_choice("weight", weight, WEIGHTS)
    if weight == "none":
        return graph.weights
    return _sym_values(graph)


@jax.jit
def _sym_values(graph):
    """:func:`nonlinear_values` ``"sym"`` in one program (its eager glue compiled one program per op), with the
    eager operations' values: the barrier keeps XLA from rewriting ``1 / sqrt(d)`` into ``rsqrt(d)`` (not
    correctly rounded: one ulp apart on some degrees)."""
    w = graph.weights
    d = graph.in_degree().astype(w.dtype)
    inv = jnp.where(d > 0, 1.0 / jax.lax.optimization_barrier(jnp.sqrt(jnp.where(d > 0, d, 1.0))), 0.0)
    return w * inv[graph.receivers] * inv[graph.senders]


def nonlinear_starts(prior: jax.Array, labels: jax.Array, train_mask: jax.Array) -> jax.Array:
    """(4, n, K) the starts ``S`` in :data:`STARTS` order: D, B0, training labels, D on training rows.

    Args:
        prior: (n, K) prior D.
        labels: (n,) int labels; only ``train_mask`` entries are read.
        train_mask: (n,) bool.
    """
    n, k = prior.shape
    _checks.mask("train_mask", train_mask, n)
    labels = masked_labels(labels, train_mask)
    b0 = initial_beliefs(prior, labels, train_mask)  # validates prior and the training labels
    if _checks.is_concrete(prior, labels, train_mask, b0):
        return _starts(prior, labels, train_mask, b0)
    return _starts_arrays(prior, labels, train_mask, b0)


def _starts_arrays(prior, labels, train_mask, b0):
    tm = train_mask[:, None]
    y = jax.nn.one_hot(labels, prior.shape[1], dtype=prior.dtype) * tm
    return jnp.stack([prior, b0, y, jnp.where(tm, prior, 0.0)])


_starts = jax.jit(_starts_arrays)


class _Ops(NamedTuple):
    values: jax.Array  # (m,) adjacency of A^F
    echo_values: jax.Array  # (m,) "sym" adjacency of the echo operator
    left: jax.Array  # (n, K) b0
    right: jax.Array  # (n, K) b0 @ H
    right_echo: jax.Array  # (n, K) b0 @ H @ H


def _ops(graph, b0, H, weight):
    _check_choice("weight", weight, WEIGHTS)
    return _ops_jit(graph, b0, H, np.bool_(weight == "sym"))


@jax.jit
def _ops_jit(graph, b0, H, sym):
    """:class:`_Ops` in one program for either adjacency weight (``sym`` a bool array: "sym" or "none"; its eager
    glue compiled one program per op and shape)."""
    H = H.astype(b0.dtype)
    sym_values = nonlinear_values(graph, "sym").astype(b0.dtype)
    values = jnp.where(sym, sym_values, nonlinear_values(graph, "none").astype(b0.dtype))
    return _Ops(values, sym_values, b0, b0 @ H, b0 @ (H @ H))


def _layer(graph, ops: _Ops, out, start, t, alpha, softmax, echo):
    """One layer from ``out`` (B_{t-1}); ``t`` is the 0-based layer index, softmax a bool scalar, echo a bool
    scalar or the Python constant False (then the echo product is not computed)."""
    p = ops.left * spmm(graph, ops.values, ops.right * out)
    if echo is not False:
        e = ops.left * spmm(graph, ops.echo_values, ops.right_echo * out)
        p = jnp.where(echo & (t > 0), p - e, p)
    new = alpha * l1_rows(p) + (1.0 - alpha) * start
    return jnp.where(softmax, jax.nn.softmax(new, axis=-1), jnp.clip(new, 0.0, 1.0))


@functools.partial(jax.jit, static_argnames=("num_layers",))
def _all_layers(graph, ops, start, alpha, softmax, echo, num_layers):
    def step(out, t):
        new = _layer(graph, ops, out, start, t, alpha, softmax, echo)
        return new, new

    return jax.lax.scan(step, start, jnp.arange(num_layers))[1]


def nonlinear_propagate(
    graph: Graph,
    b0: jax.Array,
    H: jax.Array,
    start: jax.Array,
    *,
    alpha: float,
    num_layers: int = NUM_LAYERS,
    post: Post = "clamp",
    echo: bool = False,
    weight: Weight = "none",
) -> jax.Array:
    """Every layer of the nonlinear propagation for one configuration (module docstring).

    Args:
        graph: the graph.
        b0: (n, K) initial beliefs (they define the edge weights).
        H: (K, K) compatibility (sender class x receiver class, :func:`jaxclp.estimate_compatibility`).
        start: (n, K) the start and residual ``S`` (e.g. a row of :func:`nonlinear_starts`).
        alpha: in (0, 1].
        num_layers: L >= 1.
        post: "clamp" or "softmax".
        echo: subtract the echo term from layer 2 on.
        weight: "none" (raw adjacency) or "sym" (GCN-normalized).

    Returns:
        (L, n, K) the beliefs after layers 1 .. L.
    """
    _checks.clp_inputs(graph.num_nodes, b0, H, start)
    _check_alpha(alpha)
    _check_choice("post", post, POSTS)
    _check_choice("weight", weight, WEIGHTS)
    if int(num_layers) < 1:
        raise ValueError(f"num_layers must be >= 1; got {num_layers}")
    dt = b0.dtype
    return _all_layers(graph, _ops(graph, b0, H, weight), start.astype(dt), jnp.asarray(alpha, dt),
                       jnp.asarray(post == "softmax"), jnp.asarray(bool(echo)), int(num_layers))


class NonlinearResult(NamedTuple):
    """The nonlinear propagation for a grid of configurations, each at its best validation layer.

    Attributes:
        beliefs: (C, n, K) beliefs of every configuration at its best layer.
        layer: (C,) int32, the chosen layer (1-based; the first layer with the best validation score).
        val_score: (C, L) validation score of every layer.
        configs: C tuples ``(start, alpha, post, echo, weight)`` in the order of the leading axis.
        H: (K, K) the compatibility used.
    """

    beliefs: jax.Array
    layer: jax.Array
    val_score: jax.Array
    configs: tuple
    H: jax.Array


@functools.partial(jax.jit, static_argnames=("echo", "num_layers", "metric"))
def _grid_kernel(graph, ops, all_starts, sel, alphas, softmax, echo, labels, val_mask, num_layers, metric):
    """vmapped over configurations: (C,) start indices ``sel`` into the (S, n, K) ``all_starts``, (C,) alphas /
    softmax flags; ``echo`` static bool."""
    ec = True if echo else False
    starts = all_starts[sel]  # gathered here: an eager gather compiled programs of its own

    def one(start, alpha, sm):
        def step(carry, t):
            out, best, best_out, best_t = carry
            new = _layer(graph, ops, out, start, t, alpha, sm, ec)
            s = evaluate(metric, new, labels, val_mask).astype(start.dtype)
            better = s > best
            return (new, jnp.where(better, s, best), jnp.where(better, new, best_out),
                    jnp.where(better, t + 1, best_t)), s

        init = (start, jnp.asarray(-jnp.inf, start.dtype), start, jnp.int32(0))
        (_, _, best_out, best_t), scores = jax.lax.scan(step, init, jnp.arange(num_layers, dtype=jnp.int32))
        return best_out, best_t, scores

    return jax.vmap(one)(starts, alphas, softmax)


def nonlinear_grid(
    graph: Graph,
    prior: jax.Array,
    labels: jax.Array,
    train_mask: jax.Array,
    val_mask: jax.Array,
    *,
    alphas=NONLINEAR_ALPHAS,
    starts=STARTS,
    posts=POSTS,
    echo=(False, True),
    weights=WEIGHTS,
    num_layers: int = NUM_LAYERS,
    metric: str = "accuracy",
    H: jax.Array | None = None,
) -> NonlinearResult:
    """The nonlinear propagation for every configuration of a grid, each at its best validation layer.

    ``H`` is estimated from training labels (:func:`jaxclp.estimate_compatibility`) unless given, ``b0`` is
    :func:`jaxclp.initial_beliefs`. One jitted scan per (adjacency weight, echo flag) runs all alphas x starts x
    posts at once (vmapped), in chunks of configurations where they would not fit :data:`GRID_CHUNK_BYTES`.

    Args:
        graph: the graph.
        prior: (n, K) prior D.
        labels: (n,) int labels; training and validation entries are read (others may be -1).
        train_mask, val_mask: (n,) bool.
        alphas: alphas in (0, 1].
        starts, posts, echo, weights: the switches to include (module docstring).
        num_layers: L.
        metric: "accuracy" or "roc_auc" (the validation score that picks the layer).
        H: optional (K, K) compatibility.

    Returns:
        :class:`NonlinearResult`.
    """
    n, k = prior.shape
    _checks.probabilities("prior", prior, graph.num_nodes)
    _checks.mask("train_mask", train_mask, n)
    _checks.mask("val_mask", val_mask, n)
    _checks.shape("labels", labels, (n,))
    if _checks.is_concrete(labels, val_mask) and bool(np.any(np.asarray(labels)[np.asarray(val_mask)] < 0)):
        raise ValueError("labels must be given (>= 0) on every node of val_mask")
    alphas = tuple(float(a) for a in np.atleast_1d(alphas))
    _check_alpha(np.asarray(alphas), "alphas")
    for s in starts:
        _check_choice("starts", s, STARTS)
    for p in posts:
        _check_choice("posts", p, POSTS)
    for w in weights:
        _check_choice("weights", w, WEIGHTS)
    check_metric(metric)
    if int(num_layers) < 1:
        raise ValueError(f"num_layers must be >= 1; got {num_layers}")
    y = masked_labels(labels)
    if H is None:
        H, _ = estimate_compatibility(graph, prior, y, train_mask)
    b0 = initial_beliefs(prior, y, train_mask)
    all_starts = nonlinear_starts(prior, y, train_mask)
    sidx = {s: i for i, s in enumerate(STARTS)}
    inner = list(itertools.product(starts, alphas, posts))
    # host arrays: sliced per chunk on the host, handed to the kernel without an eager program of their own
    sel = np.array([sidx[c[0]] for c in inner], np.int32)
    al = np.asarray([c[1] for c in inner], dtype=prior.dtype)
    sm = np.asarray([c[2] == "softmax" for c in inner])
    per_config = 8 * n * k * jnp.dtype(prior.dtype).itemsize
    chunk = max(1, min(len(inner), GRID_CHUNK_BYTES // max(per_config, 1)))
    beliefs, layers, scores, configs = [], [], [], []
    for w in weights:
        ops = _ops(graph, b0, H, w)
        for e in dict.fromkeys(bool(e) for e in echo):  # one compiled kernel per echo flag (no wasted SpMM)
            b, t, s = in_chunks(  # a chunk's starts are gathered only when it runs
                lambda part: _grid_kernel(graph, ops, all_starts, sel[part], al[part], sm[part], e, y, val_mask,
                                          int(num_layers), metric), len(inner), chunk)
            beliefs.append(b)
            layers.append(t)
            scores.append(s)
            configs += [c + (e, w) for c in inner]
    if len(beliefs) == 1:
        beliefs, layers, scores = beliefs[0], layers[0], scores[0]
    else:
        beliefs, layers, scores = _concatenate(beliefs, layers, scores)
    return NonlinearResult(beliefs, layers, scores, tuple(configs), H)


@jax.jit
def _concatenate(*parts):
    """The kernels' pieces, each list concatenated along the configurations (one program, not one per array)."""
    return tuple(jnp.concatenate(p) for p in parts)
