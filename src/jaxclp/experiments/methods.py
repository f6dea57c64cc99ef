"""The methods of the paper's tables as candidate generators, and validation-only selection.

Every method maps a :class:`Context` (which holds labels with the TEST labels already removed) to a dict
``config -> (n, K) scores``. :func:`select` picks a config on validation; test labels enter only in
:func:`jaxclp.experiments.runner.score_test`, after selection.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import itertools
import warnings
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import jaxclp
from jaxclp.baselines import fit_link
from jaxclp.clp import DEFAULT_ALPHAS
from jaxclp.end_to_end import DEFAULT_CONFIG, fit_end_to_end
from jaxclp.gnn import fit_gnn_grid, tuned_grid, tuned_train_config
from jaxclp.gnn import TUNED_DEPTHS as GNN_DEPTHS
from jaxclp.gnn import TUNED_DROPOUT as GNN_DROPOUT
from jaxclp.gnn import TUNED_FFN as GNN_FFN
from jaxclp.gnn import TUNED_HIDDEN as GNN_HIDDEN
from jaxclp.gnn import TUNED_LR as GNN_LR
from jaxclp.gnn import TUNED_PLAIN_DEPTHS as GNN_PLAIN_DEPTHS
from jaxclp.gnn import TwoHopTooLarge, default_two_hop_graph, fit_gcn, fit_h2gcn
from jaxclp.nonlinear import NONLINEAR_ALPHAS
from jaxclp.nonlinear import POSTS as NONLINEAR_POSTS
from jaxclp.nonlinear import STARTS as NONLINEAR_STARTS
from jaxclp.nonlinear import WEIGHTS as NONLINEAR_WEIGHTS
from jaxclp.nonlinear import nonlinear_grid, nonlinear_propagate, nonlinear_starts
from jaxclp.priors import DEADLINE_PRIORS, TUNED_PRIORS, fit_prior
from jaxclp.search import CLP_PRIOR_CANDIDATES, GRID_COST, GRID_KIND_NAMES, MLP_DEPTHS, Decisions, Search, SearchPlan
from jaxclp.selection import first_best, prior_first, validation_scores

ALPHAS = DEFAULT_ALPHAS
CS_ALPHAS = (0.1, 0.3, 0.5, 0.7, 0.9)
CS_FIXED_ALPHAS = (0.9, 1.0)  # C&S with a fixed scale: correction alphas
CS_SCALES = (1.0, 20.0)  # ... and scales (20: PyG's example)
CLP_VARIANTS = tuple(itertools.product(("sym", "row", "none"), (False, True), ("mlp", "b0")))
# spectrally scaled operators (A^F_k / rho_k): every alpha < 1 converges, so the grid extends toward 1
CLP_SPECTRAL_VARIANTS = tuple(itertools.product(("sym", "row"), ("mlp", "b0")))
SPECTRAL_ALPHAS = ALPHAS + (0.95, 0.99)


class GraphViews:
    """Graphs derived from a run's graph, built on first use and shared by the run's splits (one value per run,
    handed to every split's :class:`Context`).

    Args:
        graph: the run's graph.
    """

    def __init__(self, graph):
        self.graph = graph

    @functools.cached_property
    def two_hop(self):
        """H2GCN's 2-hop graph (:func:`jaxclp.gnn.default_two_hop_graph`; raises
        :class:`jaxclp.gnn.TwoHopTooLarge` on a hub-heavy graph)."""
        return default_two_hop_graph(self.graph)


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
            :func:`fit_base_priors` fits; None: the paper's settings with ``metric``.
        cache: per-split memo shared by the methods run on this context (a fresh dict per ``Context``): a
            model fitted by two methods with the same inputs and settings (LINK, GCN, H2GCN: the baseline
            rows and :func:`method_clp_prior`'s base predictors) is fitted once, and :func:`method_clp`'s
            grid on the runner's MLP prior (``clp_mlp``) is computed once for ``clp_mlp`` and ``clp``. Keys:
            ``("fit", name, TrainConfig)`` (prior-independent; kept by :func:`with_prior`) and
            ``("clp_grid", ...)`` (this context's prior; dropped by :func:`with_prior`). Change the prior
            only through :func:`with_prior`.
        base_priors: the base predictors ``clp`` may try (names of :data:`jaxclp.priors.PRIORS` or ``"mlp"``);
            None: :data:`CLP_PRIOR_CANDIDATES`.
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
    best, best_score = _first_best(candidates, y, jnp.asarray(val_mask), metric)
    if best is None:
        raise ValueError("no candidate has a finite validation score")
    return best, best_score


def _validation_labels(labels_visible, val_mask) -> jax.Array:
    """``labels_visible`` as a jax array; ValueError where a validation node has no label (-1)."""
    y = jnp.asarray(labels_visible)
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
        return validation_scores(metric, [cands[k] for k in on_prior[i]], y, jnp.asarray(val_mask))

    search = getattr(cands, "search", None)

    def decide(i, fits):  # another predictor's grid under the deadline: the search decides (the first split's)
        if not (pending and ("base_prior", names[i]) in cands.pending):
            return True  # computed already: nothing to spend
        return search.other_grid(names[i], fits) if search is not None else fits()

    choice = prior_first(validation_scores(metric, [cands.references[k] for k in names], y, jnp.asarray(val_mask)),
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


def _cached(ctx: Context, key: tuple, compute: Callable[[], object]):
    """``ctx.cache[key]``, computed by ``compute()`` on the first request. Methods share fits and
    :func:`method_clp`'s grid through it; the records are identical with or without it, only the time differs."""
    if key not in ctx.cache:
        ctx.cache[key] = compute()
    return ctx.cache[key]


def _fit_key(name: str, cfg) -> tuple:
    """Cache key of a fitted model: its name and TrainConfig. The key, the graph, features, training and
    validation masks of the split are the same for every method; the labels outside ``train | val`` differ
    (-1 in ``ctx.labels``, 0 in :func:`_labels0`) but are never read (``jaxclp.train`` zeroes them before the
    loop), so the same name and config give bit-identical outputs (tests/test_experiments.py checks it)."""
    return ("fit", name, cfg)


def _two_hop(ctx: Context):
    """The run's 2-hop graph (:attr:`Context.views`), or None (the fit builds it)."""
    return None if ctx.views is None else ctx.views.two_hop


def _labels0(ctx: Context) -> jax.Array:
    return jnp.where(ctx.labels >= 0, ctx.labels, 0)


def method_mlp(ctx: Context) -> dict:
    return {("depth", d): p for d, p in ctx.priors.items()}


def method_link(ctx: Context) -> dict:
    """LINK, early-stopped on ``ctx.metric`` like every trained model (until revision 1 it stopped on accuracy
    everywhere, also on the ROC-AUC datasets)."""
    cfg = jaxclp.TrainConfig(metric=ctx.metric)
    scores = _cached(ctx, _fit_key("link", cfg),
                     lambda: fit_link(ctx.key, ctx.graph, _labels0(ctx), ctx.train, ctx.val, ctx.num_classes,
                                      cfg))
    return {("link",): scores}


def method_lp(ctx: Context) -> dict:
    out = jaxclp.label_propagation(ctx.graph, _labels0(ctx), ctx.train, ctx.num_classes,
                                   alpha=jnp.asarray(ALPHAS))
    return {("alpha", a): out[i] for i, a in enumerate(ALPHAS)}


def method_cs(ctx: Context) -> dict:
    """C&S on validation over autoscale (PyG's cap; alpha_correct x alpha_smooth in ``CS_ALPHAS``) and the
    fixed scales ``CS_SCALES`` ("FDiff-scale": training residuals held fixed) for ``CS_FIXED_ALPHAS``
    (alpha_correct = 1 runs ``jaxclp.baselines.ALPHA_ONE_LAYERS`` = 50 steps, as PyG's example)."""
    y = _labels0(ctx)
    out = {}
    grid = [(a1, "auto") for a1 in CS_ALPHAS] + [(a1, s) for a1 in CS_FIXED_ALPHAS for s in CS_SCALES]
    for a1, scale in grid:
        smooth = jaxclp.correct_and_smooth(ctx.graph, ctx.prior, y, ctx.train, alpha_correct=a1,
                                           alpha_smooth=jnp.asarray(CS_ALPHAS), scale=scale)
        out.update({("alpha_correct", a1, "alpha_smooth", a2, "scale", scale): smooth[j]
                    for j, a2 in enumerate(CS_ALPHAS)})
    return out


def method_clp_star(ctx: Context) -> dict:
    y = _labels0(ctx)
    H, _ = jaxclp.estimate_compatibility(ctx.graph, ctx.prior, y, ctx.train)
    b0 = jaxclp.initial_beliefs(ctx.prior, y, ctx.train)
    out = jaxclp.clp_star(ctx.graph, ctx.prior, b0, H, alpha=jnp.asarray(ALPHAS))
    return {("alpha", a): out[i] for i, a in enumerate(ALPHAS)}


def method_clp_authors(ctx: Context, _keep=None, **grid) -> dict:
    """The nonlinear step of the authors' code (:mod:`jaxclp.nonlinear`): start x alpha (0.1..1.0) x post x echo
    x adjacency weight, each at its best validation layer of 20 (everything chosen on validation). ``_keep``
    (internal: :func:`_clp_grid`'s pruning) filters each adjacency weight's group."""
    out, H = {}, None
    keep = _keep or (lambda group: group)
    for weight in grid.pop("weights", NONLINEAR_WEIGHTS):  # one adjacency weight at a time: half the peak memory
        res = nonlinear_grid(ctx.graph, ctx.prior, ctx.labels, ctx.train, ctx.val, metric=ctx.metric,
                             weights=(weight,), H=H, **grid)
        H, layers = res.H, np.asarray(res.layer)
        out.update(keep({("normalization", f"authors-{w}", "l1", "authors", "prior", start, "alpha", a, "post",
                          post, "echo", bool(echo), "layer", int(layers[i])): res.beliefs[i]
                         for i, (start, a, post, echo, w) in enumerate(res.configs)}))
        del res
    return out


def method_clp(ctx: Context, variants=CLP_VARIANTS, authors: bool = True, spectral: bool = True, *,
               search: Search | None = None, prior: str = "mlp") -> dict:
    """The runner's ``clp_mlp`` (CLP on the MLP prior): every CLP variant on validation: the paper's closed form /
    per-step L1 variants (``variants``), with ``spectral=True`` the spectrally scaled closed form
    (:data:`CLP_SPECTRAL_VARIANTS`, alphas up to 0.99) and, with ``authors=True``, the authors' propagation
    (:func:`method_clp_authors`) without the echo term (never chosen on chameleon's validation, 5 splits; it
    doubles the SpMMs).

    ``search`` (:func:`method_clp_prior` passes the split's under :attr:`Context.time_limit`): the groups of
    candidates are computed as :meth:`jaxclp.search.Search.grid` allows (the first closed-form variant always);
    ``prior`` names the predictor for its decisions. Candidates are in the same order either way, so a grid that
    leaves nothing out is the grid computed without a limit."""
    key = ("clp_grid", tuple(variants), bool(authors), bool(spectral))
    if search is None or not search.limited or key in ctx.cache:
        return dict(_cached(ctx, key, lambda: _clp_grid(ctx, variants, authors, spectral)))
    return _clp_grid(ctx, variants, authors, spectral, search=search, prior=prior)


GRID_MAX_BYTES = 4 << 30
"""Past this much of stored beliefs (about 312 (n, K) float arrays for ``clp_mlp``'s grid, ``312 * n * K * 4``
bytes), :func:`method_clp` keeps of each computed group (an authors' kernel, a variant's alphas) only its first
candidate with the best validation score: what :func:`select` and :func:`select_prior_first` would choose is
unchanged (the first maximum in insertion order is the first maximum of the group that holds it), the memory is
a few (n, K) arrays instead of ~312. No graph of the 18 datasets comes near it (Coauthor-CS: 0.34 GB); a
200k-node, 40-class graph needs ~10 GB, and its run was killed for memory before. The record's
``num_candidates`` then counts the kept candidates. Cross-fitted analyses, which read every candidate, run on
the 18 datasets only."""


def _grid_bytes(ctx: Context, variants, authors: bool, spectral: bool) -> int:
    """Bytes of the grid's stored beliefs: the authors' 160 configurations (echo off), 9 alphas per variant, 11 per
    spectral variant (312 for ``clp_mlp``, 9 for ``clp_paper``), each (n, K)."""
    num_authors = len(NONLINEAR_STARTS) * len(NONLINEAR_ALPHAS) * len(NONLINEAR_POSTS) * len(NONLINEAR_WEIGHTS)
    num = (num_authors * bool(authors) + len(ALPHAS) * len(variants)
           + len(SPECTRAL_ALPHAS) * len(CLP_SPECTRAL_VARIANTS) * bool(spectral))
    n, k = ctx.prior.shape
    return int(num) * int(n) * int(k) * jnp.dtype(ctx.prior.dtype).itemsize


def _group_best(ctx: Context, group: dict) -> dict:
    """The first entry of ``group`` with the best finite validation score, scored as :func:`select` scores (the
    whole group where none is finite: the choice then fails as it would have)."""
    best, _ = _first_best(group, jnp.asarray(ctx.labels), jnp.asarray(ctx.val), ctx.metric)
    return group if best is None else {best: group[best]}


def _clp_grid(ctx: Context, variants, authors: bool, spectral: bool, search: Search | None = None,
              prior: str = "mlp") -> dict:
    y = _labels0(ctx)
    lean = _grid_bytes(ctx, variants, authors, spectral) > GRID_MAX_BYTES
    keep = functools.partial(_group_best, ctx) if lean else (lambda group: group)

    def variant(norm, l1, src):
        res = jaxclp.clp_beliefs(ctx.graph, ctx.prior, y, ctx.train, alphas=ALPHAS, normalization=norm,
                                 l1_normalize=l1, prior_source=src, spectrum=False)
        return keep({("normalization", norm, "l1", l1, "prior", src, "alpha", a): res.beliefs[i]
                     for i, a in enumerate(ALPHAS) if res.valid[i]})

    def spectral_variant(norm, src):
        res = jaxclp.clp_beliefs(ctx.graph, ctx.prior, y, ctx.train, alphas=SPECTRAL_ALPHAS, normalization=norm,
                                 prior_source=src, spectrum=False, spectral_scale=True)
        return keep({("normalization", f"{norm}/rho", "l1", False, "prior", src, "alpha", a): res.beliefs[i]
                     for i, a in enumerate(SPECTRAL_ALPHAS) if res.valid[i]})

    # (kind, name, thunk) in the candidates' order: the authors' step (echo off: half the cost), the variants,
    # the spectrally scaled variants
    groups = [("authors", GRID_KIND_NAMES["authors"],
               lambda: method_clp_authors(ctx, echo=(False,), _keep=keep))] if authors else []
    groups += [("l1" if l1 else "closed", f"clp closed form {norm}/{src}", functools.partial(variant, norm, l1, src))
               for norm, l1, src in variants]
    groups += [("spectral", GRID_KIND_NAMES["spectral"], functools.partial(spectral_variant, norm, src))
               for norm, src in (CLP_SPECTRAL_VARIANTS if spectral else ())]
    return (search or Search()).grid(prior, groups)


def method_clp_paper(ctx: Context) -> dict:
    """CLP restricted to the paper's update: sym-normalized, linear, MLP prior (alpha on validation)."""
    return method_clp(ctx, variants=(("sym", False, "mlp"),), authors=False, spectral=False)


def method_clp_refined(ctx: Context) -> dict:
    """``clp_paper`` with the compatibility re-estimated once from the propagated beliefs
    (``jaxclp.clp_beliefs(..., compat="refined")``): sym-normalized, linear, MLP prior, alpha on validation."""
    y = _labels0(ctx)
    res = jaxclp.clp_beliefs(ctx.graph, ctx.prior, y, ctx.train, alphas=ALPHAS, normalization="sym",
                             prior_source="mlp", spectrum=False, compat="refined")
    return {("normalization", "sym", "l1", False, "prior", "mlp", "compat", "refined", "alpha", a): res.beliefs[i]
            for i, a in enumerate(ALPHAS) if res.valid[i]}


# Search space of the tuned GNNs (Platonov et al. 2023; Luo et al. 2024), chosen per split on validation: the
# library's recipe (jaxclp.gnn.tuned_grid): residual + LayerNorm blocks at depths 1-5 (Platonov et al.'s protocol:
# their depth grid, every block residual and normalized) and plain blocks at depths 1-3 (deeper plain GNNs
# oversmooth); hidden 64, dropout 0.2, Adam lr 1e-3, no weight decay, <= 500 epochs with early stopping (patience
# 50) on the task metric. 8 fits per split and architecture. Depth is what closed our gap to Platonov et al.'s SAGE
# on minesweeper (results/anchors/width: L=3 92.30, L=4 93.88 vs their 93.51 +- 0.57); their feed-forward blocks
# (GNN_FFN) closed it for GAT-sep on minesweeper (L=5: 92.98 -> 93.85 vs 93.91 +- 0.35) and for GCN on
# squirrel-filtered (L=4: 35.74 -> 37.83 vs 39.47 +- 1.47) (results/anchors), and never cost more than 0.1 point
# where measured. GNN_* are the library's constants (jaxclp.gnn.TUNED_*), named here for the methods' spec hashes.


def gnn_train_config(metric: str, lr: float = GNN_LR, weight_decay: float = 0.0):
    """TrainConfig of the tuned GNNs (:func:`jaxclp.gnn.tuned_train_config`): early stopping and best epoch on the
    task ``metric``."""
    return tuned_train_config(jaxclp.TrainConfig(metric=metric), lr, weight_decay)


def gnn_grid(conv: str, sep: bool = False, depths=GNN_DEPTHS, plain_depths=GNN_PLAIN_DEPTHS) -> list:
    """The :class:`jaxclp.gnn.GNNSpec` candidates of one architecture (:func:`jaxclp.gnn.tuned_grid`): residual +
    LayerNorm blocks (with Platonov et al.'s feed-forward layer, :data:`GNN_FFN`) at ``depths``, plain blocks at
    ``plain_depths``."""
    return tuned_grid(conv, sep, depths=depths, plain_depths=plain_depths, hidden=GNN_HIDDEN, dropout=GNN_DROPOUT,
                      heads=4, ffn=GNN_FFN)


def _tuned_candidates(ctx: Context, conv: str, sep: bool = False) -> dict:
    specs = gnn_grid(conv, sep)
    fits = fit_gnn_grid(ctx.key, ctx.graph, ctx.features, _labels0(ctx), ctx.train, ctx.val,
                        num_classes=ctx.num_classes, specs=specs, cfg=gnn_train_config(ctx.metric))
    return {("layers", spec.num_layers, "res_ln", spec.residual): r.prior for spec, r in zip(specs, fits)}


def method_gcn(ctx: Context) -> dict:
    """Kipf & Welling's 2-layer GCN, the paper's setup (hidden 64, lr 0.01, wd 5e-5, dropout 0.5), early-stopped
    on ``ctx.metric``. One candidate: this is the paper's GCN row."""
    cfg = jaxclp.TrainConfig(metric=ctx.metric)
    prior = _cached(ctx, _fit_key("gcn", cfg),
                    lambda: fit_gcn(ctx.key, ctx.graph, ctx.features, _labels0(ctx), ctx.train, ctx.val,
                                    num_classes=ctx.num_classes, cfg=cfg).prior)
    return {("gcn",): prior}


def method_gcn_tuned(ctx: Context) -> dict:
    """Kipf's GCN (``("gcn",)``) and the tuned GCN grid (:func:`gnn_grid`), chosen on validation: 9 fits per split,
    about 40 % of a table's time on Actor, so the paper's tables run :func:`method_gcn` and the tuned GNNs have
    their own target (``jaxclp reproduce table_gnn``)."""
    return method_gcn(ctx) | _tuned_candidates(ctx, "gcn")


def method_h2gcn(ctx: Context) -> dict:
    cfg = jaxclp.TrainConfig(metric=ctx.metric)
    prior = _cached(ctx, _fit_key("h2gcn", cfg),
                    lambda: fit_h2gcn(ctx.key, ctx.graph, ctx.features, _labels0(ctx), ctx.train, ctx.val,
                                      two_hop=_two_hop(ctx),
                                      num_classes=ctx.num_classes, cfg=cfg).prior)
    return {("h2gcn",): prior}


def method_sage(ctx: Context) -> dict:
    """GraphSAGE (mean aggregator; ego and neighbours always separate), grid :func:`gnn_grid`."""
    return _tuned_candidates(ctx, "sage")


def method_gat(ctx: Context) -> dict:
    """GAT (4 heads, self-loops), grid :func:`gnn_grid`."""
    return _tuned_candidates(ctx, "gat")


def method_gat_sep(ctx: Context) -> dict:
    """GAT-sep (ego embedding kept apart, attention over neighbours only), grid :func:`gnn_grid`."""
    return _tuned_candidates(ctx, "gat", sep=True)


def method_gcn_sep(ctx: Context) -> dict:
    """GCN-sep (ego embedding kept apart, sym-normalized neighbours without loops), grid :func:`gnn_grid`."""
    return _tuned_candidates(ctx, "gcn", sep=True)


# ------------------------------------------------------------------------- priors as a pipeline stage
def prior_train_config(ctx: Context):
    """TrainConfig of the priors fitted here: the run's (``ctx.train_cfg``: the paper's MLP settings unless the
    user changed them), early stopping on ``ctx.metric``."""
    cfg = ctx.train_cfg if ctx.train_cfg is not None else jaxclp.TrainConfig()
    return cfg._replace(metric=ctx.metric)


def fit_base_priors(ctx: Context, names=CLP_PRIOR_CANDIDATES, search: Search | None = None) -> dict:
    """``name -> (n, K)`` prior of every base predictor in ``names`` (:data:`jaxclp.priors.PRIORS`).

    ``"mlp"`` is the runner's MLP prior (``ctx.prior``, its depth chosen on validation); the others are fitted
    here with the split's key, on the training labels, early-stopped on validation (``ctx.labels`` holds no
    test label); the tuned GNNs (``"gcn_tuned"``, ...) take :func:`prior_train_config`'s epochs, patience and
    metric with their own recipe's learning rate and weight decay (:func:`gnn_train_config`'s). Every prior runs on
    sparse features too (deezer-europe, Coauthor-Physics; `clp` revision 0 left the GNN priors out there).
    H2GCN is left out, with a warning, where its 2-hop graph exceeds :data:`jaxclp.gnn.MAX_TWO_HOP_EDGES`
    (:class:`jaxclp.gnn.TwoHopTooLarge`; no graph of the 18 datasets comes within 20x of it) and other predictors
    remain; asked for alone it raises.

    Which predictors are fitted, and for how long, is ``search``'s (:meth:`jaxclp.search.Search.fit_priors`; None:
    a search of ``ctx.time_limit`` following ``ctx.decisions``): the MLP prior, fitted before, counts as the first;
    fits already in ``ctx.cache`` cost nothing and are always used.
    """
    search = search or Search(ctx.time_limit, ctx.decisions, status)
    cfg = prior_train_config(ctx)

    def fit(i, deadline, epochs):
        name = names[i]
        status(f"base predictor {name}")
        fit_cfg = cfg if epochs is None else cfg._replace(epochs=epochs)
        # a tuned GNN's candidates: this module's grid (the one the spec hashes read), as table_gnn's
        opts = {"grid": gnn_grid(name.split("_")[0]), "lr": GNN_LR} if name in TUNED_PRIORS else {}
        if deadline is not None:
            opts["deadline"] = deadline
        def compute():  # H2GCN reads the run's 2-hop graph (built on first use; TwoHopTooLarge caught below)
            extra = {"two_hop": _two_hop(ctx)} if name == "h2gcn" else {}
            return fit_prior(name, ctx.key, ctx.graph, ctx.features, ctx.labels, ctx.train, ctx.val,
                             ctx.num_classes, fit_cfg, **opts, **extra)

        try:
            if deadline is None:
                return jax.block_until_ready(_cached(ctx, _fit_key(name, fit_cfg), lambda: compute().prior)), None
            res = compute()
            if res.stopped_at is not None and epochs is None:  # the first split: cached at the epochs it reached
                fit_cfg = cfg._replace(epochs=res.stopped_at)
            ctx.cache[_fit_key(name, fit_cfg)] = res.prior
            return jax.block_until_ready(res.prior), res.stopped_at
        except TwoHopTooLarge as err:  # a hub-heavy graph: H2GCN's 2-hop graph does not fit; the others still do
            if name != "h2gcn" or len(names) == 1:
                raise
            status(f"base predictor h2gcn left out: {err}")
            warnings.warn(f"clp: base predictor h2gcn left out of the choice: {err}", stacklevel=3)
            return None, None

    def free(name, epochs):
        return _fit_key(name, cfg if epochs is None else cfg._replace(epochs=epochs)) in ctx.cache

    # fitted before, for every split at once: free here, but its seconds say what a fit costs here (a unit from
    # LINK alone, mostly compilation, made GCN look 6x cheaper than it was at 169k nodes)
    before = {"mlp": (ctx.prior, float(ctx.mlp_fit_seconds))} if "mlp" in names else {}
    fitted = search.fit_priors(names, fit, free=free, clocked=DEADLINE_PRIORS, fitted_before=before)
    return {names[i]: prior for i, prior in fitted.items()}


def with_prior(ctx: Context, prior) -> Context:
    """``ctx`` whose :attr:`Context.prior` is ``prior`` (n, K) (everything else unchanged; its cache keeps only the
    prior-independent fits, never ``ctx``'s CLP grid)."""
    return dataclasses.replace(ctx, priors={ctx.mlp_depth: prior},
                               cache={k: v for k, v in ctx.cache.items() if k[0] == "fit"})


def method_clp_prior(ctx: Context, priors=None, lazy: bool = True, **clp_options) -> Candidates:
    """The runner's ``clp``: CLP on several base predictors, chosen on validation by
    :func:`select_prior_first` (the best predictor alone first, then CLP's variant on it, or the predictor
    itself at alpha = 0 when no variant beats it on validation).

    Every prior of ``priors`` (:func:`fit_base_priors`) goes through :func:`method_clp`'s whole candidate grid
    (``clp_options`` pass to it); the candidate key starts with ``("base_prior", name)``, so the record's
    ``params["base_prior"]`` says which prior validation chose (``params["prior"]`` stays CLP's start /
    residual source, as in ``clp_mlp``). Each prior alone is a reference (never chosen): the record keeps its
    validation and test score, so what CLP adds on top of the prior it chose is a paired number per split.

    With ``lazy`` (default) each predictor's grid is a pending group (:attr:`Candidates.pending`):
    :func:`select_prior_first` computes only the chosen predictor's, the one it reads (the record's
    ``num_candidates`` counts what was computed); ``lazy=False`` computes every grid (the cross-fit of
    ``jaxclp reproduce selection`` needs them all). The choice and its scores are the same either way (tested).

    ``priors`` None: ``ctx.base_priors``, else :data:`jaxclp.search.CLP_PRIOR_CANDIDATES`. What is computed under
    ``ctx.time_limit`` is one :class:`jaxclp.search.Search`'s (``candidates.search``): its
    :meth:`~jaxclp.search.Search.decisions` go to the run's later splits (``ctx.decisions``); the candidates'
    ``skipped`` names what it left out.
    """
    if priors is None:
        priors = ctx.base_priors if ctx.base_priors is not None else CLP_PRIOR_CANDIDATES
    search = Search(ctx.time_limit, ctx.decisions, status)
    bases = fit_base_priors(ctx, priors, search)
    cands = Candidates(references=bases, rule=select_prior_first, search=search)
    for name, prior in bases.items():
        base_ctx = ctx if prior is ctx.prior else with_prior(ctx, prior)  # the MLP prior: clp_mlp's cached grid
        cands[("base_prior", name, "alpha", 0.0)] = prior  # CLP at alpha = 0: the prior itself
        cands.pending[("base_prior", name)] = functools.partial(method_clp, base_ctx, **clp_options,
                                                                search=search, prior=name)
    return cands if lazy else cands.expand()


def clp_plan(priors=None, time_limit: float | None = None, graph=None, num_features: int = 1,
             epochs: int = 500) -> SearchPlan:
    """The :class:`jaxclp.search.SearchPlan` of the runner's ``clp`` (and ``jaxclp predict``): the MLP prior's
    depths, ``priors`` (None: :data:`jaxclp.search.CLP_PRIOR_CANDIDATES`), every kind of CLP candidate of
    :func:`method_clp`'s grid; with ``graph``, its expected seconds (``jaxclp run --plan``)."""
    priors = tuple(priors) if priors is not None else CLP_PRIOR_CANDIDATES
    kinds = sorted({"l1" if l1 else "closed" for _, l1, _ in CLP_VARIANTS} | {"spectral", "authors"},
                   key=GRID_COST.get)
    fields = dict(priors=priors, mlp_depths=MLP_DEPTHS, grid_kinds=tuple(kinds), time_limit=time_limit,
                  closed_variants=tuple(f"{n}/{s}" for n, l1, s in CLP_VARIANTS if not l1))
    if graph is None:
        return SearchPlan(**fields)
    return SearchPlan.for_graph(graph, num_features, epochs, **fields)


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


def method_linkx(ctx: Context) -> dict:
    """LINKX (Lim et al. 2021; :func:`jaxclp.priors.linkx_prior`, hidden 64, MLP_f of 2 layers) alone."""
    return {("linkx",): fit_base_priors(ctx, ("linkx",))["linkx"]}


def method_clp_e2e(ctx: Context) -> dict:
    """``clp_paper`` with the MLP prior trained THROUGH the closed-form CLP (:func:`jaxclp.fit_end_to_end`):
    the MLP of the depth validation chose for the prior (``ctx.mlp_depth``) is refitted with the split's key
    (warm start), then fine-tuned on the cross-entropy of the CLP output of the training nodes with the label
    trick (sym-normalized, linear, MLP prior); one fit per alpha of :data:`jaxclp.end_to_end.DEFAULT_ALPHAS`,
    each early-stopped on validation (``ctx.metric``) with the warm start as a candidate; alpha on validation."""
    res = fit_end_to_end(ctx.key, ctx.graph, ctx.features, ctx.labels, ctx.train, ctx.val, ctx.num_classes,
                         normalization="sym", hidden=(64,) * ctx.mlp_depth,
                         cfg=DEFAULT_CONFIG._replace(metric=ctx.metric))
    return {("train", "e2e", "alpha", float(a)): res.all_beliefs[i] for i, a in enumerate(res.alphas)}


METHODS: dict[str, Callable[[Context], dict]] = {
    "mlp": method_mlp,
    "link": method_link,
    "lp": method_lp,
    "cs": method_cs,
    "clp_star": method_clp_star,
    "clp_mlp": method_clp,
    "clp_paper": method_clp_paper,
    "clp_refined": method_clp_refined,
    "clp_authors": method_clp_authors,
    "gcn": method_gcn,
    "gcn_tuned": method_gcn_tuned,
    "h2gcn": method_h2gcn,
    "sage": method_sage,
    "gat": method_gat,
    "gat_sep": method_gat_sep,
    "gcn_sep": method_gcn_sep,
    "clp": method_clp_prior,
    "linkx": method_linkx,
    "clp_e2e": method_clp_e2e,
}
NEEDS_PRIOR = {"mlp", "cs", "clp_star", "clp", "clp_paper", "clp_authors", "clp_mlp", "clp_refined", "clp_e2e"}
