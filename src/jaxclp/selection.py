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
  held-out validation nodes do not confirm. On a large validation set (at least :data:`LARGE_VALIDATION` nodes,
  accuracy) that reason is gone, and one more step applies: CLP's candidates on every other predictor are scored
  too, and the best of them replaces the prior-first choice where it scores higher by more than
  :data:`MARGIN_SE` standard errors (:func:`switch_margin`). A predictor that is weak alone can be the best one to
  propagate (an MLP that sees no edges, beside LINK that does; ``benchmarks/results/large_graph.md``).

Test labels never enter: callers pass labels with the test nodes removed (-1) and the validation mask.
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp.metrics import evaluate

__all__ = ["Choice", "LARGE_VALIDATION", "MARGIN_SE", "first_best", "prior_first", "switch_margin",
           "validation_scores"]


class Choice(NamedTuple):
    """The outcome of :func:`prior_first`.

    Attributes:
        prior: index of the chosen base predictor.
        candidate: index of the chosen CLP candidate on it, or None where the predictor alone is kept (no CLP
            candidate scored strictly higher on validation).
        score: the validation score of the choice.
        prior_score: the chosen predictor's own validation score.
        left_out: the other predictors whose CLP candidates the large-validation step did not compute for time
            (``prior_first``'s ``deadline``).
    """

    prior: int
    candidate: int | None
    score: float
    prior_score: float
    left_out: tuple = ()

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


LARGE_VALIDATION = 5000
"""Validation nodes from which :func:`prior_first` also propagates the predictors it did not choose (accuracy only).
The cross-fitted comparison that chose the prior-first rule had 20-500 validation nodes (``results/selection``); at
5000 an accuracy's standard error is at most 0.71 points, so a gap of several points between two predictors'
best propagations is not selection noise. No graph of the paper's tables reaches it on its medium split (the
largest, deezer-europe: 2,828), so those records are unchanged; the dense (48/32/20) splits of deezer-europe and
the Coauthor graphs do (5,867 to 11,038): deezer-europe's dense ``clp`` records were re-run with it (no choice
changed), the Coauthor graphs' committed ones were made before it."""

MARGIN_SE = 3.0
"""How many standard errors (:func:`switch_margin`) another predictor's best CLP candidate must beat the
prior-first choice by on a large validation set to replace it."""


def switch_margin(a: float, b: float, num_val: int) -> float:
    """``MARGIN_SE`` standard errors of the difference of two accuracies ``a`` and ``b`` on ``num_val`` nodes,
    counted as if independent (``sqrt((a (1 - a) + b (1 - b)) / num_val)``; the same nodes make the paired
    difference's error smaller, so the margin is conservative)."""
    var = max(a * (1.0 - a), 0.0) + max(b * (1.0 - b), 0.0)
    return MARGIN_SE * float(np.sqrt(var / max(int(num_val), 1)))


def prior_first(prior_scores: Sequence[float], candidate_scores: Callable[[int], Sequence[float]],
                keep_prior: bool = True, *, num_val: int | None = None, metric: str = "accuracy",
                deadline: float | None = None,
                decide: Callable[[int, Callable[[], bool]], bool] | None = None) -> Choice:
    """CLP's rule: the best base predictor alone first, then CLP on it only where it scores strictly higher; on a
    large validation set, another predictor's propagation where it is clearly better.

    Args:
        prior_scores: (P,) validation scores of the base predictors alone, in their order.
        candidate_scores: ``i -> (C_i,)`` validation scores of CLP's candidates on predictor ``i``; called for
            the chosen predictor (so only its candidates need computing), and, with ``num_val`` at least
            :data:`LARGE_VALIDATION` and ``metric`` accuracy, once for each other predictor with a finite score,
            in their order.
        keep_prior: whether the predictor alone competes (False: a single given prior, CLP always propagates; its
            best candidate is chosen whatever its score against the prior).
        num_val: the number of validation nodes the scores were computed on (None: the prior-first choice only).
        metric: the scores' metric; the large-validation step applies to ``"accuracy"`` only (no standard error
            of a ROC-AUC is assumed).
        deadline: a :func:`time.perf_counter` time (None: none). The large-validation step computes another
            predictor's candidates only where the chosen predictor's took (timed here) would end before it; the
            others are listed in :attr:`Choice.left_out`.
        decide: ``(i, fits) -> bool``, whether predictor ``i``'s candidates are computed, given ``fits()``, the
            deadline's answer (None: ``fits()``); a caller that must decide the same on every split (the runner:
            the first split decides) answers from its memo.

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
    t0 = time.perf_counter()
    j, s_best = first_best(candidate_scores(i))
    first_seconds = time.perf_counter() - t0
    if keep_prior and (j is None or not s_best > s_prior):
        choice = Choice(i, None, s_prior, s_prior)
    elif j is None:
        raise ValueError("no candidate has a finite validation score")
    else:
        choice = Choice(i, j, s_best, s_prior)
    if not (keep_prior and metric == "accuracy" and num_val is not None and int(num_val) >= LARGE_VALIDATION):
        return choice
    best, left_out = choice, []
    fits = lambda: deadline is None or time.perf_counter() + first_seconds <= deadline  # noqa: E731
    for p, s_p in enumerate(np.asarray(prior_scores, dtype=np.float64).ravel()):
        if p == i or not np.isfinite(s_p):
            continue
        if not (decide(p, fits) if decide is not None else fits()):
            left_out.append(p)
            continue
        q, s_q = first_best(candidate_scores(p))
        if q is not None and s_q > choice.score + switch_margin(choice.score, s_q, num_val) and s_q > best.score:
            best = Choice(p, q, s_q, float(s_p))
    return best._replace(left_out=tuple(left_out))
