"""The methods of the paper's tables as candidate generators, and validation-only selection.

Every method maps a :class:`Context` (which holds labels with the TEST labels already removed) to a dict
``config -> (n, K) scores``. :func:`select` picks a config on validation; test labels enter only in
:func:`jaxclp.experiments.runner.score_test`, after selection.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

import jaxclp
from jaxclp.clp import DEFAULT_ALPHAS
from jaxclp.metrics import evaluate

ALPHAS = DEFAULT_ALPHAS
CS_ALPHAS = (0.1, 0.3, 0.5, 0.7, 0.9)
CLP_VARIANTS = tuple(itertools.product(("sym", "row", "none"), (False, True), ("mlp", "b0")))


@dataclasses.dataclass(frozen=True)
class Context:
    """What a method may see for one split.

    Attributes:
        graph: the graph.
        features: (n, d) float32 features.
        labels: (n,) int32 labels with -1 on every node outside ``train | val`` (test labels removed).
        train, val: (n,) bool masks.
        num_classes: K.
        metric: "accuracy" or "roc_auc".
        key: PRNG key of this split.
        priors: dict depth -> (n, K) MLP softmax (computed for all splits at once by the runner).
        mlp_depth: the MLP depth selected on validation (its prior is the base predictor).
    """

    graph: jaxclp.Graph
    features: jax.Array
    labels: jax.Array
    train: jax.Array
    val: jax.Array
    num_classes: int
    metric: str
    key: jax.Array
    priors: dict
    mlp_depth: int

    @property
    def prior(self) -> jax.Array:
        return self.priors[self.mlp_depth]


def visible_labels(labels: np.ndarray, train: np.ndarray, val: np.ndarray) -> np.ndarray:
    """Labels with -1 outside ``train | val``: the only labels any fit/selection code receives."""
    return np.where(train | val, labels, -1).astype(np.int32)


def select(candidates: dict, labels_visible, val_mask, metric: str) -> tuple[object, float]:
    """Picks the config with the best validation score (first one on ties).

    Args:
        candidates: config -> (n, K) scores.
        labels_visible: (n,) labels with -1 outside train/val (never test labels).
        val_mask: (n,) bool.
        metric: "accuracy" or "roc_auc".

    Returns:
        ``(config, val_score)``.
    """
    y = jnp.asarray(labels_visible)
    if bool(np.any(np.asarray(y)[np.asarray(val_mask)] < 0)):
        raise ValueError("validation labels missing (-1) inside val_mask")
    best, best_score = None, -np.inf
    for cfg, scores in candidates.items():
        s = float(evaluate(metric, jnp.asarray(scores), y, jnp.asarray(val_mask)))
        if np.isfinite(s) and s > best_score:
            best, best_score = cfg, s
    if best is None:
        raise ValueError("no candidate has a finite validation score")
    return best, best_score


def _labels0(ctx: Context) -> jax.Array:
    return jnp.where(ctx.labels >= 0, ctx.labels, 0)


def method_mlp(ctx: Context) -> dict:
    return {("depth", d): p for d, p in ctx.priors.items()}


def method_link(ctx: Context) -> dict:
    scores = jaxclp.fit_link(ctx.key, ctx.graph, _labels0(ctx), ctx.train, ctx.val, ctx.num_classes)
    return {("link",): scores}


def method_lp(ctx: Context) -> dict:
    out = jaxclp.label_propagation(ctx.graph, _labels0(ctx), ctx.train, ctx.num_classes,
                                   alpha=jnp.asarray(ALPHAS))
    return {("alpha", a): out[i] for i, a in enumerate(ALPHAS)}


def method_cs(ctx: Context) -> dict:
    y = _labels0(ctx)
    out = {}
    for a1 in CS_ALPHAS:
        smooth = jaxclp.correct_and_smooth(ctx.graph, ctx.prior, y, ctx.train, alpha_correct=a1,
                                           alpha_smooth=jnp.asarray(CS_ALPHAS))
        out.update({("alpha_correct", a1, "alpha_smooth", a2): smooth[j] for j, a2 in enumerate(CS_ALPHAS)})
    return out


def method_clp_star(ctx: Context) -> dict:
    y = _labels0(ctx)
    H, _ = jaxclp.estimate_compatibility(ctx.graph, ctx.prior, y, ctx.train)
    b0 = jaxclp.initial_beliefs(ctx.prior, y, ctx.train)
    out = jaxclp.clp_star(ctx.graph, ctx.prior, b0, H, alpha=jnp.asarray(ALPHAS))
    return {("alpha", a): out[i] for i, a in enumerate(ALPHAS)}


def method_clp(ctx: Context, variants=CLP_VARIANTS) -> dict:
    y = _labels0(ctx)
    cands = {}
    for norm, l1, src in variants:
        res = jaxclp.clp_beliefs(ctx.graph, ctx.prior, y, ctx.train, alphas=ALPHAS, normalization=norm,
                                 l1_normalize=l1, prior_source=src, spectrum=False)
        for i, a in enumerate(ALPHAS):
            if res.valid[i]:
                cands[("normalization", norm, "l1", l1, "prior", src, "alpha", a)] = res.beliefs[i]
    return cands


def method_clp_paper(ctx: Context) -> dict:
    """CLP restricted to the paper's update: sym-normalized, linear, MLP prior (alpha on validation)."""
    return method_clp(ctx, variants=(("sym", False, "mlp"),))


def method_gcn(ctx: Context) -> dict:
    r = jaxclp.fit_gcn(ctx.key, ctx.graph, ctx.features, _labels0(ctx), ctx.train, ctx.val,
                       num_classes=ctx.num_classes)
    return {("gcn",): r.prior}


def method_h2gcn(ctx: Context) -> dict:
    r = jaxclp.fit_h2gcn(ctx.key, ctx.graph, ctx.features, _labels0(ctx), ctx.train, ctx.val,
                         num_classes=ctx.num_classes)
    return {("h2gcn",): r.prior}


METHODS: dict[str, Callable[[Context], dict]] = {
    "mlp": method_mlp,
    "link": method_link,
    "lp": method_lp,
    "cs": method_cs,
    "clp_star": method_clp_star,
    "clp": method_clp,
    "clp_paper": method_clp_paper,
    "gcn": method_gcn,
    "h2gcn": method_h2gcn,
}
NEEDS_PRIOR = {"mlp", "cs", "clp_star", "clp", "clp_paper"}
