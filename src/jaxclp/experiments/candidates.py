"""What a method sees and returns, and how the runner chooses: the split's :class:`Context`, the
:class:`Candidates` a method returns, validation-only selection (:func:`select`, ``clp``'s
:func:`select_prior_first`), and the status line a long method reports to.

Every method (:data:`jaxclp.experiments.methods.METHODS`) maps a :class:`Context` (which holds labels with the
TEST labels already removed: :func:`visible_labels`) to a dict ``config -> (n, K) scores``. :func:`select` picks a
config on validation; test labels enter only in :func:`jaxclp.experiments.runner.score_test`, after selection.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
from typing import Callable, Sequence

import jax
import numpy as np

import jaxclp
from jaxclp import buckets
from jaxclp.gnn import default_two_hop_graph
from jaxclp.search import Decisions, Search
from jaxclp.selection import first_best, prior_first, validation_scores


class GraphViews:
    """Graphs derived from a run's graph, built on first use and shared by the run's splits (one value per run,
    handed to every split's :class:`Context`).

    Args:
        graph: the run's graph.
        features: the run's features as the models take them (:attr:`Context.features`); needed only with
            ``shape_buckets``.
        shape_buckets: fit the models of :data:`jaxclp.buckets.BUCKETED_PRIORS` on inputs padded to shape buckets
            (:mod:`jaxclp.buckets`: graphs of similar size share their compiled programs; the same computation up
            to rounding); False: on the inputs as they are.
    """

    def __init__(self, graph, features=None, shape_buckets: bool = False):
        self.graph = graph
        self.features = features
        self.shape_buckets = bool(shape_buckets)

    @functools.cached_property
    def two_hop(self):
        """H2GCN's 2-hop graph (:func:`jaxclp.gnn.default_two_hop_graph`; raises
        :class:`jaxclp.gnn.TwoHopTooLarge` on a hub-heavy graph)."""
        return default_two_hop_graph(self.graph)

    @functools.cached_property
    def padded(self) -> buckets.Padded:
        """The graph and features padded to their buckets (:func:`jaxclp.buckets.pad_inputs`; no labels: each
        split adds its own, :func:`jaxclp.buckets.with_split`)."""
        return buckets.pad_inputs(self.graph, self.features)

    @functools.cached_property
    def propagation(self) -> jaxclp.Graph:
        """The graph CLP's propagation stages run on (:func:`jaxclp.buckets.propagation_graph`: padded to its
        shape bucket, padding nodes marked; :func:`propagation_inputs`)."""
        return buckets.propagation_graph(self.graph)

    @functools.cached_property
    def padded_two_hop(self):
        """:attr:`two_hop` padded to the node bucket of :attr:`padded` (its edges to their own bucket)."""
        return buckets.pad_graph(self.two_hop, self.padded.graph.num_nodes)


def fit_inputs(ctx: "Context", name: str) -> buckets.Padded:
    """The inputs of the model ``name`` (a :data:`jaxclp.priors.PRIORS` name) fitted on ``ctx``'s split: padded to
    shape buckets where the run asks for them (:attr:`GraphViews.shape_buckets`) and ``name`` is one of
    :data:`jaxclp.buckets.BUCKETED_PRIORS`, else as they are (``num_nodes`` = the graph's: :func:`unpadded`
    returns a prior unchanged). Labels keep -1 outside ``train | val``; ``two_hop`` is None (H2GCN's callers take
    :func:`fit_two_hop`)."""
    v = ctx.views
    if v is None or not v.shape_buckets or name not in buckets.BUCKETED_PRIORS:
        return buckets.Padded(ctx.graph, ctx.features, ctx.labels, ctx.train, ctx.val, None, np.shape(ctx.labels)[-1])
    return buckets.with_split(v.padded, ctx.labels, ctx.train, ctx.val)


def fit_two_hop(ctx: "Context", inputs: buckets.Padded):
    """H2GCN's 2-hop graph for ``inputs`` (:func:`fit_inputs`): the run's, padded alike where ``inputs`` are; None
    without :attr:`Context.views` (the fit builds it)."""
    if ctx.views is None:
        return None
    return ctx.views.padded_two_hop if inputs.padded else ctx.views.two_hop


def propagation_inputs(ctx: "Context") -> tuple["Context", int | None]:
    """``ctx`` as CLP's propagation stages take it (``clp``'s grid, the authors' step, LP, C&S, CLP*): where the
    run asks for shape buckets, on :attr:`GraphViews.propagation` (the graph padded to its bucket, its padding
    nodes marked: the same operators and solves on the real nodes, to float rounding, compiled once per bucket)
    with the prior (uniform rows), labels (-1) and masks (False) padded alike; then also the real node count n
    whose rows the candidates keep. Otherwise ``(ctx, None)``."""
    v = ctx.views
    if v is None or not v.shape_buckets or v.graph is not ctx.graph:
        return ctx, None
    g, n = v.propagation, ctx.graph.num_nodes
    nb = g.num_nodes
    priors = {d: buckets.pad_prior(p, nb) for d, p in ctx.priors.items() if d == ctx.mlp_depth}  # none: LP alone
    padded = dataclasses.replace(ctx, graph=g, labels=buckets.pad_nodes(ctx.labels, nb, -1),
                                 train=buckets.pad_nodes(ctx.train, nb, False),
                                 val=buckets.pad_nodes(ctx.val, nb, False), priors=priors, cache={})
    return padded, n


def unpadded(inputs: buckets.Padded, prior):
    """``prior``'s first ``inputs.num_nodes`` rows (on the host; unchanged where ``inputs`` are not padded)."""
    return buckets.unpad_nodes(prior, inputs.num_nodes) if inputs.padded else prior


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
        train_cfg: the run's :class:`jaxclp.TrainConfig` (``--epochs`` etc.), used by the base predictors
            :func:`~jaxclp.experiments.methods.fit_base_priors` fits; None: the paper's settings with ``metric``.
        cache: per-split memo shared by the methods run on this context (a fresh dict per ``Context``): a
            model fitted by two methods with the same inputs and settings (LINK, GCN, H2GCN: the baseline
            rows and :func:`~jaxclp.experiments.methods.method_clp_prior`'s base predictors) is fitted once, and
            :func:`~jaxclp.experiments.methods.method_clp`'s grid on the runner's MLP prior (``clp_mlp``) is computed
            once for ``clp_mlp`` and ``clp``. Keys:
            ``("fit", name, TrainConfig)`` (prior-independent; kept by :func:`with_prior`) and
            ``("clp_grid", ...)`` (this context's prior; dropped by :func:`with_prior`). Change the prior
            only through :func:`with_prior`.
        base_priors: the base predictors ``clp`` may try (names of :data:`jaxclp.priors.PRIORS` or ``"mlp"``);
            None: :data:`jaxclp.search.CLP_PRIOR_CANDIDATES`.
        time_limit: seconds ``clp`` may spend on this split (:class:`jaxclp.search.Search`: its base
            predictors, then CLP's candidates on the chosen one); what was left out is named in the record's
            ``skipped``. The runner passes what remains of the user's limit after the split's share of the MLP
            priors (:data:`jaxclp.search.MLP_TIME_SHARE`). None: no limit.
        mlp_fit_seconds: seconds of one MLP prior fit on this split (the runner's mean over the depths it
            fitted, compilation included; 0 where unknown): under ``time_limit`` the first measurement of a
            base predictor's cost on this graph (:meth:`jaxclp.search.Search.spent`).
        mlp_cut: ``{depth: epochs}`` of the MLP priors whose training ``time_limit`` stopped before its end
            (:func:`jaxclp.experiments.runner.mlp_priors`); empty: none was.
        decisions: what the run's first split decided under ``time_limit`` for the method this context is for
            (:class:`jaxclp.search.Decisions`; the runner hands it on); None: this split decides.
        views: the run's :class:`GraphViews` (H2GCN's 2-hop graph, built once per run); None: built per fit.
        stated_time_limit: the user's limit per split, of which ``time_limit`` is what remains: named by the
            status messages of what the limit leaves out (``... would not fit in the time limit (20 s per
            split)``), never used to compute; None: they name ``time_limit``.
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
    train_cfg: jaxclp.TrainConfig | None = None
    base_priors: tuple | None = None
    time_limit: float | None = None
    mlp_fit_seconds: float = 0.0
    mlp_cut: dict = dataclasses.field(default_factory=dict, compare=False)
    decisions: Decisions | None = None
    views: GraphViews | None = dataclasses.field(default=None, compare=False, repr=False)
    stated_time_limit: float | None = dataclasses.field(default=None, compare=False)
    cache: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def prior(self) -> jax.Array:
        return self.priors[self.mlp_depth]


class Candidates(dict):
    """``config -> (n, K) scores``, the set :func:`select` chooses from, plus ``references``: named (n, K)
    scores the runner scores on validation and test and records beside the choice (``record["references"]``)
    but never chooses, e.g. each base predictor alone beside CLP run on it, for paired comparisons."""

    def __init__(self, *args, references: dict | None = None, rule: Callable | None = None,
                 pending: dict | None = None, skipped: Sequence[str] = (), search: Search | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.search = search
        """The :class:`jaxclp.search.Search` that made these candidates (``clp``): its deadline bounds what a rule
        computes of :attr:`pending`, its :meth:`~jaxclp.search.Search.decisions` go to the run's later splits."""
        self.skipped = search.skipped if search is not None else list(skipped)
        """Names of what :attr:`Context.time_limit` left out (the record's ``skipped``)."""
        self.references = dict(references or {})
        self.rule = rule
        """How the runner chooses among these candidates: ``rule(cands, labels_visible, val_mask, metric) ->
        (config, val_score)`` on validation only; None: :func:`select` (the best validation score)."""
        self.pending = dict(pending or {})
        """``key prefix -> thunk() -> {key suffix: (n, K) scores}``: groups of candidates not computed yet. A rule
        that needs only some groups expands those (:meth:`expand`); :func:`select` and anything iterating over
        every candidate expand all first. The choice is the same either way; only what gets computed differs."""

    def expand(self, prefix: tuple | None = None) -> Candidates:
        """Computes the pending group ``prefix`` (every pending group with None) into this dict; returns self."""
        for p in ([prefix] if prefix is not None else list(self.pending)):
            thunk = self.pending.pop(tuple(p), None)
            if thunk is not None:
                for key, scores in thunk().items():
                    self[tuple(p) + tuple(key)] = scores
        return self


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
    y = _validation_labels(labels_visible, val_mask)
    if isinstance(candidates, Candidates):
        candidates.expand()
    best, best_score = _first_best(candidates, y, jax.device_put(val_mask), metric)
    if best is None:
        raise ValueError("no candidate has a finite validation score")
    return best, best_score


def _validation_labels(labels_visible, val_mask) -> jax.Array:
    """``labels_visible`` as a jax array; ValueError where a validation node has no label (-1)."""
    y = jax.device_put(labels_visible)
    if bool(np.any(np.asarray(y)[np.asarray(val_mask)] < 0)):
        raise ValueError("validation labels missing (-1) inside val_mask")
    return y


def _first_best(candidates: dict, y, val_mask, metric: str) -> tuple[object, float]:
    """The first config with the best finite validation score and that score; ``(None, -inf)`` if none is finite
    (:func:`jaxclp.selection.first_best`)."""
    keys = list(candidates)
    i, best_score = first_best(validation_scores(metric, [candidates[k] for k in keys], y, val_mask))
    return (None if i is None else keys[i]), best_score


def select_prior_first(cands: Candidates, labels_visible, val_mask, metric: str) -> tuple[object, float]:
    """``clp``'s rule (revision 2), :func:`jaxclp.selection.prior_first` (the one :class:`jaxclp.CLP` uses): the
    base predictor with the best validation score alone (its ``references``), then the best of CLP's candidates
    on that predictor (keys ``("base_prior", name, ...)``); the predictor alone, ``("base_prior", name, "alpha",
    0.0)`` (CLP at alpha = 0 is its prior), when no CLP candidate on it scores higher on validation. Ties go to
    the simpler choice: the earlier predictor, the prior.

    Chosen over the joint maximum of revision 1 by 2-fold cross-fitting on validation nodes only
    (``jaxclp reproduce selection``, ``results/selection/summary.md``): with 20-500 validation nodes the best of
    ~2100 joint candidates is an optimistic pick that held-out validation nodes do not confirm. On a large
    validation set (:data:`jaxclp.selection.LARGE_VALIDATION` nodes, accuracy) the other predictors' grids are
    computed too and one of them replaces the choice where it is better by a clear margin
    (:func:`jaxclp.selection.prior_first`).
    """
    y = _validation_labels(labels_visible, val_mask)
    names = list(cands.references)
    on_prior = {}
    pending = isinstance(cands, Candidates)

    def candidate_scores(i):
        name = names[i]
        alone = ("base_prior", name, "alpha", 0.0)
        if pending and ("base_prior", name) in cands.pending:
            status(f"CLP candidates on {name}")
            cands.expand(("base_prior", name))  # only the grids the rule reads are computed
        on_prior[i] = [k for k in cands if k[:2] == ("base_prior", name) and k != alone]
        return validation_scores(metric, [cands[k] for k in on_prior[i]], y, jax.device_put(val_mask))

    search = getattr(cands, "search", None)

    def decide(i, fits):  # another predictor's grid under the deadline: the search decides (the first split's)
        if not (pending and ("base_prior", names[i]) in cands.pending):
            return True  # computed already: nothing to spend
        return search.other_grid(names[i], fits) if search is not None else fits()

    choice = prior_first(validation_scores(metric, [cands.references[k] for k in names], y, jax.device_put(val_mask)),
                         candidate_scores, num_val=int(np.asarray(val_mask).sum()), metric=metric,
                         deadline=None if search is None else search.deadline, decide=decide)
    if not choice.propagated:
        return ("base_prior", names[choice.prior], "alpha", 0.0), choice.score
    return on_prior[choice.prior][choice.candidate], choice.score


_STATUS: contextvars.ContextVar = contextvars.ContextVar("jaxclp_experiments_status", default=None)


def status(text: str) -> None:
    """Says what a long method is computing now (``jaxclp run`` shows it beside its progress bar, e.g. which of
    ``clp``'s base predictors is being fitted); a no-op outside :func:`reporting`."""
    callback = _STATUS.get()
    if callback is not None:
        callback(text)


@contextlib.contextmanager
def reporting(callback: Callable[[str], None] | None):
    """Sends :func:`status` messages to ``callback`` (None: nowhere) inside the block."""
    token = _STATUS.set(callback)
    try:
        yield
    finally:
        _STATUS.reset(token)


def with_prior(ctx: Context, prior) -> Context:
    """``ctx`` whose :attr:`Context.prior` is ``prior`` (n, K) (everything else unchanged; its cache keeps only the
    prior-independent fits, never ``ctx``'s CLP grid)."""
    return dataclasses.replace(ctx, priors={ctx.mlp_depth: prior},
                               cache={k: v for k, v in ctx.cache.items() if k[0] == "fit"})
