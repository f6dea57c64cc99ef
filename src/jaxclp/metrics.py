"""Evaluation metrics over node masks (jit-able, vmappable)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp import _checks
from jaxclp.graph import cpu_resident



def masked_accuracy(scores: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
    """Accuracy of ``argmax(scores)`` over ``mask``: scores (n, K), labels (n,) ints, mask (n,) bool; 0 for an
    empty mask."""
    hit = (jnp.argmax(scores, axis=-1) == labels) & mask
    return jnp.sum(hit) / jnp.maximum(jnp.sum(mask), 1)


accuracy = masked_accuracy
"""``accuracy(scores, labels, mask)``: accuracy of ``argmax(scores)`` over ``mask`` (scores (n, K), labels (n,)
ints, mask (n,) bool; 0 for an empty mask)."""

METRICS = ("accuracy", "roc_auc")
"""The metrics :func:`evaluate` dispatches (``roc_auc``: binary, two classes)."""


def check_metric(metric: str) -> str:
    """``metric`` if it is one of :data:`METRICS`, else ValueError naming the choices."""
    if metric not in METRICS:
        raise ValueError(f"metric must be 'accuracy' or 'roc_auc'; got {metric!r}")
    return metric


def roc_auc(scores: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
    """Binary ROC-AUC over ``mask`` (ties count one half), as ``sklearn.metrics.roc_auc_score``.

    Args:
        scores: (n, 2) class scores (column 1 is the positive score) or (n,) positive scores.
        labels: (n,) labels in {0, 1}.
        mask: (n,) bool.

    Returns:
        () AUC; NaN only when the mask holds a single class (AUC is then undefined).
    """
    s = scores[:, 1] if scores.ndim == 2 else scores
    pos = mask & (labels == 1)
    neg = mask & (labels == 0)
    neg_sorted = jnp.sort(jnp.where(neg, s, jnp.inf))
    lower = jnp.searchsorted(neg_sorted, s, side="left")
    upto = jnp.searchsorted(neg_sorted, s, side="right")
    wins = jnp.sum(jnp.where(pos, lower + 0.5 * (upto - lower), 0.0))
    return wins / (jnp.sum(pos) * jnp.sum(neg))


def evaluate(metric: str, scores: jax.Array, labels: jax.Array, mask: jax.Array) -> jax.Array:
    """Dispatches ``"accuracy"`` or ``"roc_auc"`` (called on concrete arrays: one jitted program per metric and
    shape, where the eager operations compiled one program each; traced: inlined in the caller's program)."""
    check_metric(metric)
    if metric == "accuracy" and cpu_resident(scores, labels, mask):
        return _accuracy_host(scores, labels, mask)
    if _checks.is_concrete(scores, labels, mask):
        return _evaluate_jit(metric, scores, labels, mask)
    return _evaluate(metric, scores, labels, mask)


def _accuracy_host(scores, labels, mask) -> jax.Array:
    """:func:`masked_accuracy` in numpy for arrays on the CPU (no program per shape): the same first maximum (a NaN
    counts as the maximum, as in ``jnp.argmax``) and the two counts divided in JAX's default float dtype."""
    scores, labels, mask = np.asarray(scores), np.asarray(labels), np.asarray(mask)
    hits = np.count_nonzero((np.argmax(scores, axis=-1) == labels) & mask)
    dtype = jax.dtypes.canonicalize_dtype(np.float64)
    return jax.device_put(dtype.type(hits) / dtype.type(max(np.count_nonzero(mask), 1)))


def _evaluate(metric, scores, labels, mask):
    if metric == "accuracy":
        return accuracy(scores, labels, mask)
    return roc_auc(scores, labels, mask)


_evaluate_jit = jax.jit(_evaluate, static_argnums=0)
