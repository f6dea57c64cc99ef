"""Choosing on validation: the one rule :class:`jaxclp.CLP` and the experiment runner's ``clp`` share.

Every choice the library makes (a prior among several, CLP's variant and alpha, whether to propagate at all) is
made here, from validation scores only:

* :func:`validation_scores`: the task metric of each (n, K) candidate on the validation nodes;
* :func:`first_best`: the first candidate with the best finite score (ties go to the earlier, i.e. simpler,
  candidate: grids list the prior before CLP, small alphas before large ones);
* :func:`prior_first`: the base predictor with the best validation score alone first, then the best of CLP's
  candidates on that predictor, and the predictor itself (CLP at alpha = 0) unless one of them scores strictly
  higher. Chosen over the joint maximum by 2-fold cross-fitting on validation nodes (``jaxclp reproduce
  selection``): with 20-500 validation nodes the best of ~2000 joint candidates is an optimistic pick that
  held-out validation nodes do not confirm.

Test labels never enter: callers pass labels with the test nodes removed (-1) and the validation mask.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp.metrics import evaluate

__all__ = ["Choice", "first_best", "prior_first", "validation_scores"]


class Choice(NamedTuple):
    """The outcome of :func:`prior_first`.

    Attributes:
        prior: index of the chosen base predictor.
        candidate: index of the chosen CLP candidate on it, or None where the predictor alone is kept (no CLP
            candidate scored strictly higher on validation).
        score: the validation score of the choice.
        prior_score: the chosen predictor's own validation score.
    """

    prior: int
    candidate: int | None
    score: float
    prior_score: float

    @property
    def propagated(self) -> bool:
        """Whether CLP's propagation was chosen (False: the predictor alone, CLP at alpha = 0)."""
        return self.candidate is not None


def validation_scores(metric: str, candidates, labels, val_mask) -> np.ndarray:
    """The validation ``metric`` of each candidate.

    Args:
        metric: ``"accuracy"`` or ``"roc_auc"`` (:func:`jaxclp.metrics.evaluate`).
        candidates: (C, n, K) scores, or a sequence of C (n, K) arrays.
        labels: (n,) int labels; read on ``val_mask`` only (never test labels).
        val_mask: (n,) bool.

    Returns:
        (C,) float numpy array (NaN where the metric is undefined).
    """
    y, vm = jnp.asarray(labels), jnp.asarray(val_mask)
    if isinstance(candidates, (list, tuple)):
        return np.array([float(evaluate(metric, jnp.asarray(c), y, vm)) for c in candidates], dtype=np.float64)
    return np.asarray(jax.vmap(lambda b: evaluate(metric, b, y, vm))(jnp.asarray(candidates)), dtype=np.float64)


def first_best(scores: Sequence[float]) -> tuple[int | None, float]:
    """The index of the first maximal finite score and that score; ``(None, -inf)`` where none is finite.

    Args:
        scores: (C,) validation scores in the candidates' order.

    Returns:
        ``(index, score)``.
    """
    best, best_score = None, -np.inf
    for i, s in enumerate(np.asarray(scores, dtype=np.float64).ravel()):
        if np.isfinite(s) and s > best_score:
            best, best_score = i, float(s)
    return best, best_score


def prior_first(prior_scores: Sequence[float], candidate_scores: Callable[[int], Sequence[float]],
                keep_prior: bool = True) -> Choice:
    """CLP's rule: the best base predictor alone first, then CLP on it only where it scores strictly higher.

    Args:
        prior_scores: (P,) validation scores of the base predictors alone, in their order.
        candidate_scores: ``i -> (C_i,)`` validation scores of CLP's candidates on predictor ``i``; called once,
            for the chosen predictor only (so only its candidates need computing).
        keep_prior: whether the predictor alone competes (False: a single given prior, CLP always propagates; its
            best candidate is chosen whatever its score against the prior).

    Returns:
        :class:`Choice`.

    Raises:
        ValueError: no predictor has a finite validation score (with ``keep_prior``; without, the first one is
            taken), or (with ``keep_prior`` False) no candidate has.
    """
    i, s_prior = first_best(prior_scores)
    if i is None and keep_prior:
        raise ValueError("no base predictor has a finite validation score")
    if i is None:  # the predictor does not compete: its own score (e.g. an undefined ROC-AUC) does not matter
        i = 0
    j, s_best = first_best(candidate_scores(i))
    if keep_prior and (j is None or not s_best > s_prior):
        return Choice(i, None, s_prior, s_prior)
    if j is None:
        raise ValueError("no candidate has a finite validation score")
    return Choice(i, j, s_best, s_prior)
