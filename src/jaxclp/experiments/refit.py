"""Refitting a chosen candidate from more labelled nodes (``jaxclp predict``): :func:`refit_candidate`
recomputes the propagation step of a method of :data:`REFIT_METHODS` with the labels of every labelled node, on the
prior the candidate was computed on.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

import jaxclp
from jaxclp.nonlinear import STARTS as NONLINEAR_STARTS
from jaxclp.nonlinear import nonlinear_propagate, nonlinear_starts
from jaxclp.experiments.candidates import Context
from jaxclp.experiments.methods import _labels0


REFIT_METHODS = ("clp", "clp_mlp", "clp_paper", "cs", "lp")
"""Methods whose chosen candidate :func:`refit_candidate` recomputes from more labelled nodes: their last step
propagates labels (CLP's grid, C&S, LP); the others' scores come from a trained model and stay as fitted."""


class Refit(NamedTuple):
    """What :func:`refit_candidate` returns.

    Attributes:
        scores: (n, K) scores propagated from the new labelled nodes; None where nothing was refitted.
        refused: True where the chosen alpha is past the convergence bound of the operator built from them (the
            variant's own validity check: the "none" normalization's spectral radius grows with labelled rows).
    """

    scores: jax.Array | None
    refused: bool = False


def refit_candidate(ctx: Context, method: str, key: tuple, candidates: dict, train) -> Refit:
    """The (n, K) scores of ``method``'s candidate ``key`` recomputed with the labels of ``train`` (the
    propagation step only, as scikit-learn's ``refit``; the prior is the one the candidate was computed on,
    trained as it was). ``jaxclp predict`` calls it with every labelled node (training + validation), as PyG's
    C&S example feeds training and validation labels to its correct and smooth steps.

    ``train = ctx.train`` gives back ``candidates[key]`` as ``scores`` (to the solvers' tolerance; tested for every
    kind of key).

    Args:
        ctx: the context the candidates were computed on (its ``labels`` hold every label of ``train``).
        method: a name of :data:`REFIT_METHODS` (others: None).
        key: the chosen key of ``candidates``.
        candidates: ``METHODS[method](ctx)`` (``clp``: its ``references`` hold the base predictors).
        train: (n,) bool, the labelled nodes to propagate from.

    Returns:
        :class:`Refit`: ``scores`` None where there is nothing to refit (a method outside :data:`REFIT_METHODS`,
        ``clp`` at alpha = 0: the base predictor alone) or where the variant's bound refuses the alpha on
        ``train`` (``refused``).
    """
    if method not in REFIT_METHODS:
        return Refit(None)
    train = jnp.asarray(train)
    y = _labels0(ctx)
    p = dict(zip(key[0::2], key[1::2]))
    if method == "lp":  # no prior
        return Refit(jaxclp.label_propagation(ctx.graph, y, train, ctx.num_classes, alpha=p["alpha"]))
    prior = ctx.prior
    if method == "clp":
        prior = candidates.references[p.pop("base_prior")]
        if p == {"alpha": 0.0}:
            return Refit(None)
    if method == "cs":
        return Refit(jaxclp.correct_and_smooth(ctx.graph, prior, y, train, alpha_correct=p["alpha_correct"],
                                               alpha_smooth=jnp.asarray([p["alpha_smooth"]]), scale=p["scale"])[0])
    norm, alpha = p["normalization"], p["alpha"]
    if p["l1"] == "authors":
        H, _ = jaxclp.estimate_compatibility(ctx.graph, prior, y, train)
        b0 = jaxclp.initial_beliefs(prior, y, train)
        start = nonlinear_starts(prior, y, train)[NONLINEAR_STARTS.index(p["prior"])]
        layer = int(p["layer"])
        if layer == 0:
            return Refit(start)
        layers = nonlinear_propagate(ctx.graph, b0, H, start, alpha=alpha, num_layers=layer, post=p["post"],
                                     echo=p["echo"], weight=norm.removeprefix("authors-"))
        return Refit(layers[-1])
    spectral = norm.endswith("/rho")
    res = jaxclp.clp_beliefs(ctx.graph, prior, y, train, alphas=(alpha,), normalization=norm.removesuffix("/rho"),
                             l1_normalize=p["l1"], prior_source=p["prior"], spectrum=False, spectral_scale=spectral)
    return Refit(res.beliefs[0]) if bool(res.valid[0]) else Refit(None, refused=True)
