"""Baselines on the same machinery: LP, C&S, CLP* and LINK.

LP and both C&S stages are label propagation ``X = (1-a) (I - a Ahat)^{-1} X0``, i.e. the CLP solver with
the operator ``Ahat`` itself (:func:`jaxclp.lp_operator`); every function accepts a scalar alpha or a 1-D
vector of alphas (solved together) and returns arrays with a leading alpha axis in the latter case.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxclp import _checks
from jaxclp.compat import one_hot_train
from jaxclp.graph import Graph, Normalization, check_normalization, edge_values, spmm
from jaxclp.operator import lp_operator
from jaxclp.solve import Method, Solution, solve_operator
from jaxclp.train import TrainConfig, train_full_batch


def propagate_labels(graph: Graph, x0: jax.Array, *, alpha, normalization: Normalization = "sym",
                     method: Method = "auto", tol: float = 1e-6) -> Solution:
    """Closed-form label propagation ``(1-alpha)(I - alpha Ahat)^{-1} x0`` of an (n, K) signal."""
    _checks.shape("x0", x0, (graph.num_nodes, None))
    _checks.finite("x0", x0)
    check_normalization(normalization)
    op = lp_operator(graph, x0.shape[1], normalization=normalization, dtype=x0.dtype)
    return solve_operator(op, x0, alpha=alpha, method=method, tol=tol, normalization=normalization)


def label_propagation(graph: Graph, labels: jax.Array, train_mask: jax.Array, num_classes: int, *,
                      alpha, normalization: Normalization = "sym", method: Method = "auto") -> jax.Array:
    """LP (Zhou et al. 2004): propagate the one-hot training labels ``M*Y``.

    Returns:
        (n, K) scores (or (A, n, K) for a vector of alphas). Nodes the labels cannot reach score 0.
    """
    _checks.mask("train_mask", train_mask, graph.num_nodes)
    y0 = one_hot_train(jnp.where(train_mask, labels, 0), train_mask, num_classes)
    return propagate_labels(graph, y0, alpha=alpha, normalization=normalization, method=method).value


def correct_and_smooth(
    graph: Graph,
    prior: jax.Array,
    labels: jax.Array,
    train_mask: jax.Array,
    *,
    alpha_correct: float,
    alpha_smooth: float,
    normalization: Normalization = "sym",
    method: Method = "auto",
) -> jax.Array:
    """C&S (Huang et al. 2021) with autoscale.

    Correct: propagate the training residual ``E0 = M*(Y - D)`` and add it back scaled so that each node's
    correction has the mean training-residual L1 size. Smooth: set training rows to their labels and
    propagate the result.

    Args:
        graph: the graph.
        prior: (n, K) base predictions D.
        labels: (n,) labels (only training entries are read).
        train_mask: (n,) bool.
        alpha_correct: scalar in (0, 1).
        alpha_smooth: scalar in (0, 1), or a 1-D vector (the smoothing solves are vmapped; the correction is
            computed once).

    Returns:
        (n, K) smoothed scores, or (A, n, K) for a vector ``alpha_smooth``.
    """
    n, k = prior.shape
    _checks.mask("train_mask", train_mask, n)
    if jnp.ndim(alpha_correct) != 0:
        raise ValueError("alpha_correct must be a scalar (loop over it; alpha_smooth may be a vector)")
    y = one_hot_train(jnp.where(train_mask, labels, 0), train_mask, k).astype(prior.dtype)
    e0 = jnp.where(train_mask[:, None], y - prior, 0.0)
    e = propagate_labels(graph, e0, alpha=alpha_correct, normalization=normalization, method=method).value
    sigma = jnp.sum(jnp.abs(e0)) / jnp.maximum(jnp.sum(train_mask), 1)
    size = jnp.sum(jnp.abs(e), axis=1, keepdims=True)
    scale = jnp.where(size > 0, sigma / jnp.where(size > 0, size, 1.0), 0.0)
    z = jnp.clip(prior + scale * e, 0.0, 1.0)
    g0 = jnp.where(train_mask[:, None], y, z)
    return propagate_labels(graph, g0, alpha=jnp.asarray(alpha_smooth, prior.dtype), normalization=normalization,
                            method=method).value


def clp_star(graph: Graph, prior: jax.Array, start: jax.Array, H: jax.Array, *, alpha,
             num_iters: int = 50, normalization: Normalization = "sym") -> jax.Array:
    """CLP* (the paper's ablation): ``B <- (1-alpha) D + alpha Ahat B H`` for ``num_iters`` steps from ``start``.

    Unlike CLP the classes are coupled through H, so there is no per-class closed form; with a normalized
    Ahat (rho <= 1) and doubly-stochastic H the iteration converges for alpha < 1.

    Args:
        prior: (n, K) D. start: (n, K) initial B (usually B0). H: (K, K).
        alpha: scalar or (A,) vector (vmapped; result (A, n, K)).
    """
    n, k = prior.shape
    _checks.shape("start", start, (n, k))
    _checks.shape("H", H, (k, k))
    _checks.alpha(jnp.asarray(alpha))
    check_normalization(normalization)
    values = edge_values(graph, normalization).astype(prior.dtype)
    return _clp_star(graph, values, prior, start, H.astype(prior.dtype), jnp.asarray(alpha, prior.dtype),
                     num_iters)


@jax.jit
def _clp_star(graph, values, prior, start, H, alphas, num_iters):
    def run(alpha):
        def step(_, b):
            return (1.0 - alpha) * prior + alpha * spmm(graph, values, b) @ H
        return jax.lax.fori_loop(0, num_iters, step, start)

    return run(alphas) if alphas.ndim == 0 else jax.vmap(run)(alphas)


def fit_link(key: jax.Array, graph: Graph, labels: jax.Array, train_mask: jax.Array, val_mask: jax.Array,
             num_classes: int, cfg: TrainConfig = TrainConfig()) -> jax.Array:
    """LINK (Lim et al.): multinomial logistic regression on the rows of the raw adjacency.

    ``logits = A @ W + b`` with ``W`` (n, K): computed as one SpMM, never densifying A. Trained full-batch
    with early stopping on validation.

    Returns:
        (n, K) softmax scores of the selected parameters.
    """
    _checks.mask("train_mask", train_mask, graph.num_nodes)
    return _fit_link(key, graph, labels, train_mask, val_mask, num_classes, cfg)


def _link_kernel(key, graph, labels, train_mask, val_mask, num_classes, cfg):
    n = graph.num_nodes
    w_key, b_key = jax.random.split(key)
    params = {"w": jax.random.normal(w_key, (n, num_classes)) * (1.0 / jnp.sqrt(n)),
              "b": jnp.zeros((num_classes,))}
    values = graph.weights.astype(jnp.float32)

    def apply_fn(p, _k, _train):
        return spmm(graph, values, p["w"]) + p["b"]

    best, _ = train_full_batch(apply_fn, params, b_key, labels, train_mask, val_mask, cfg)
    return jax.nn.softmax(apply_fn(best, None, False), axis=-1)


_fit_link = jax.jit(_link_kernel, static_argnames=("num_classes", "cfg"))


@functools.partial(jax.jit, static_argnames=("num_classes", "cfg"))
def fit_link_splits(keys, graph, labels, train_masks, val_masks, num_classes, cfg=TrainConfig()):
    """:func:`fit_link` vmapped over S splits: keys (S,), masks (S, n) -> (S, n, K)."""
    def one(key, tm, vm):
        return _link_kernel(key, graph, labels, tm, vm, num_classes, cfg)
    return jax.vmap(one)(keys, train_masks, val_masks)
