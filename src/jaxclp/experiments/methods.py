"""The methods of the paper's tables as candidate generators.

Every method maps a :class:`~jaxclp.experiments.candidates.Context` (which holds labels with the TEST labels
already removed) to a dict ``config -> (n, K) scores`` (:data:`METHODS`); the runner chooses among them on
validation (:func:`jaxclp.experiments.candidates.select`, or a method's own rule such as ``clp``'s
:func:`jaxclp.experiments.candidates.select_prior_first`); test labels enter only in
:func:`jaxclp.experiments.runner.score_test`, after selection. Each method's grid is read from this module's
constants by :mod:`jaxclp.experiments.specs` (its hash).
"""

from __future__ import annotations

import functools
import itertools
import warnings
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

import jaxclp
from jaxclp import _checks
from jaxclp.baselines import fit_link
from jaxclp.buckets import node_count
from jaxclp.clp import DEFAULT_ALPHAS
from jaxclp.compatibility import masked_labels
from jaxclp.end_to_end import DEFAULT_CONFIG, fit_end_to_end
from jaxclp.fit_threads import fit_threads
from jaxclp.graph import cpu_resident
from jaxclp.gnn import fit_gnn_grid, tuned_grid, tuned_train_config
from jaxclp.gnn import TUNED_DEPTHS as GNN_DEPTHS
from jaxclp.gnn import TUNED_DROPOUT as GNN_DROPOUT
from jaxclp.gnn import TUNED_FFN as GNN_FFN
from jaxclp.gnn import TUNED_HIDDEN as GNN_HIDDEN
from jaxclp.gnn import TUNED_LR as GNN_LR
from jaxclp.gnn import TUNED_PLAIN_DEPTHS as GNN_PLAIN_DEPTHS
from jaxclp.gnn import TwoHopTooLarge, fit_gcn, fit_h2gcn
from jaxclp.nonlinear import NONLINEAR_ALPHAS
from jaxclp.nonlinear import POSTS as NONLINEAR_POSTS
from jaxclp.nonlinear import STARTS as NONLINEAR_STARTS
from jaxclp.nonlinear import WEIGHTS as NONLINEAR_WEIGHTS
from jaxclp.nonlinear import nonlinear_grid
from jaxclp.priors import DEADLINE_PRIORS, TUNED_PRIORS, fit_prior
from jaxclp.search import CLP_PRIOR_CANDIDATES, GRID_COST, GRID_KIND_NAMES, MLP_DEPTHS, Decisions, Search, SearchPlan
from jaxclp.experiments.candidates import (Candidates, Context, _first_best, fit_inputs, fit_two_hop,
                                           propagation_inputs, select_prior_first, status, unpadded, with_prior)

ALPHAS = DEFAULT_ALPHAS
CS_ALPHAS = (0.1, 0.3, 0.5, 0.7, 0.9)
CS_FIXED_ALPHAS = (0.9, 1.0)  # C&S with a fixed scale: correction alphas
CS_SCALES = (1.0, 20.0)  # ... and scales (20: PyG's example)
CLP_VARIANTS = tuple(itertools.product(("sym", "row", "none"), (False, True), ("mlp", "b0")))
# spectrally scaled operators (A^F_k / rho_k): every alpha < 1 converges, so the grid extends toward 1
CLP_SPECTRAL_VARIANTS = tuple(itertools.product(("sym", "row"), ("mlp", "b0")))
SPECTRAL_ALPHAS = ALPHAS + (0.95, 0.99)


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
    loop), so the same name and config give bit-identical outputs (tests/experiments/test_runner.py checks it)."""
    return ("fit", name, cfg)


def _labels0(ctx: Context) -> jax.Array:
    """``ctx.labels`` with -1 replaced by 0 (:func:`jaxclp.compatibility.masked_labels`: on the host)."""
    return masked_labels(ctx.labels)


def _rows(x: jax.Array, num_nodes: int | None = None) -> list:
    """``[x[0], x[1], ...]``: the rows of a stack of candidates (A, N, K), each cut to its first ``num_nodes``
    nodes where given (the real nodes of :func:`~jaxclp.experiments.candidates.propagation_inputs`, on the host).
    On the CPU each row is read on the host and put back (no program); on an accelerator each is taken by one
    small program with a traced index (``x[i]`` with a Python int runs two eager programs; unstacking in one
    program compiles ~1 s for 80 rows)."""
    if cpu_resident(x) or num_nodes is not None:
        host = np.asarray(x)
        cut = slice(None) if num_nodes is None else slice(0, num_nodes)
        return [jax.device_put(host[i, cut]) for i in range(x.shape[0])]
    return [_row(x, np.int32(i)) for i in range(x.shape[0])]


def _alpha_grid(alphas: tuple) -> jax.Array:
    """The methods' alpha grids in JAX's default float dtype, cast on the host (:func:`jaxclp._checks.device_array`)."""
    return _checks.device_array(alphas, jnp.result_type(float))


@jax.jit
def _row(x, i):
    return x[i]


def method_mlp(ctx: Context) -> dict:
    return {("depth", d): p for d, p in ctx.priors.items()}


def method_link(ctx: Context) -> dict:
    """LINK, early-stopped on ``ctx.metric`` like every trained model (until revision 1 it stopped on accuracy
    everywhere, also on the ROC-AUC datasets)."""
    cfg = jaxclp.TrainConfig(metric=ctx.metric)

    def fit():
        p = fit_inputs(ctx, "link")
        return unpadded(p, fit_link(ctx.key, p.graph, masked_labels(p.labels), p.train_mask, p.val_mask,
                                    ctx.num_classes, cfg, **node_count(p, "link")))

    return {("link",): _cached(ctx, _fit_key("link", cfg), fit)}


def method_lp(ctx: Context) -> dict:
    ctx, n = propagation_inputs(ctx)
    out = jaxclp.label_propagation(ctx.graph, _labels0(ctx), ctx.train, ctx.num_classes,
                                   alpha=_alpha_grid(ALPHAS))
    rows = _rows(out, n)
    return {("alpha", a): rows[i] for i, a in enumerate(ALPHAS)}


def method_cs(ctx: Context) -> dict:
    """C&S on validation over autoscale (PyG's cap; alpha_correct x alpha_smooth in ``CS_ALPHAS``) and the
    fixed scales ``CS_SCALES`` ("FDiff-scale": training residuals held fixed) for ``CS_FIXED_ALPHAS``
    (alpha_correct = 1 runs ``jaxclp.baselines.ALPHA_ONE_LAYERS`` = 50 steps, as PyG's example)."""
    ctx, n = propagation_inputs(ctx)
    y = _labels0(ctx)
    out = {}
    grid = [(a1, "auto") for a1 in CS_ALPHAS] + [(a1, s) for a1 in CS_FIXED_ALPHAS for s in CS_SCALES]
    for a1, scale in grid:
        smooth = _rows(jaxclp.correct_and_smooth(ctx.graph, ctx.prior, y, ctx.train, alpha_correct=a1,
                                                 alpha_smooth=_alpha_grid(CS_ALPHAS), scale=scale), n)
        out.update({("alpha_correct", a1, "alpha_smooth", a2, "scale", scale): smooth[j]
                    for j, a2 in enumerate(CS_ALPHAS)})
    return out


def method_clp_star(ctx: Context) -> dict:
    ctx, n = propagation_inputs(ctx)
    y = _labels0(ctx)
    H, _ = jaxclp.estimate_compatibility(ctx.graph, ctx.prior, y, ctx.train)
    b0 = jaxclp.initial_beliefs(ctx.prior, y, ctx.train)
    out = jaxclp.clp_star(ctx.graph, ctx.prior, b0, H, alpha=_alpha_grid(ALPHAS))
    rows = _rows(out, n)
    return {("alpha", a): rows[i] for i, a in enumerate(ALPHAS)}


def method_clp_authors(ctx: Context, _keep=None, **grid) -> dict:
    """The nonlinear step of the authors' code (:mod:`jaxclp.nonlinear`): start x alpha (0.1..1.0) x post x echo
    x adjacency weight, each at its best validation layer of 20 (everything chosen on validation). ``_keep``
    (internal: :func:`_clp_grid`'s pruning) filters each adjacency weight's group."""
    out, H = {}, None
    keep = _keep or (lambda group: group)
    ctx, n = propagation_inputs(ctx)
    for weight in grid.pop("weights", NONLINEAR_WEIGHTS):  # one adjacency weight at a time: half the peak memory
        res = nonlinear_grid(ctx.graph, ctx.prior, ctx.labels, ctx.train, ctx.val, metric=ctx.metric,
                             weights=(weight,), H=H, **grid)
        H, layers, rows = res.H, np.asarray(res.layer), _rows(res.beliefs, n)
        out.update(keep({("normalization", f"authors-{w}", "l1", "authors", "prior", start, "alpha", a, "post",
                          post, "echo", bool(echo), "layer", int(layers[i])): rows[i]
                         for i, (start, a, post, echo, w) in enumerate(res.configs)}))
        del rows
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
    lean = _grid_bytes(ctx, variants, authors, spectral) > GRID_MAX_BYTES
    keep = functools.partial(_group_best, ctx) if lean else (lambda group: group)
    pc, n = propagation_inputs(ctx)  # the candidates' rows: ctx's nodes (keep and the choice read ctx)
    y = _labels0(pc)

    def variant(norm, l1, src):
        res = jaxclp.clp_beliefs(pc.graph, pc.prior, y, pc.train, alphas=ALPHAS, normalization=norm,
                                 l1_normalize=l1, prior_source=src, spectrum=False)
        rows = _rows(res.beliefs, n)
        return keep({("normalization", norm, "l1", l1, "prior", src, "alpha", a): rows[i]
                     for i, a in enumerate(ALPHAS) if res.valid[i]})

    def spectral_variant(norm, src):
        res = jaxclp.clp_beliefs(pc.graph, pc.prior, y, pc.train, alphas=SPECTRAL_ALPHAS, normalization=norm,
                                 prior_source=src, spectrum=False, spectral_scale=True)
        rows = _rows(res.beliefs, n)
        return keep({("normalization", f"{norm}/rho", "l1", False, "prior", src, "alpha", a): rows[i]
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
    ctx, n = propagation_inputs(ctx)
    y = _labels0(ctx)
    res = jaxclp.clp_beliefs(ctx.graph, ctx.prior, y, ctx.train, alphas=ALPHAS, normalization="sym",
                             prior_source="mlp", spectrum=False, compat="refined")
    rows = _rows(res.beliefs, n)
    return {("normalization", "sym", "l1", False, "prior", "mlp", "compat", "refined", "alpha", a): rows[i]
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
    p = fit_inputs(ctx, f"{conv}_tuned")
    fits = fit_gnn_grid(ctx.key, p.graph, p.features, masked_labels(p.labels), p.train_mask, p.val_mask,
                        num_classes=ctx.num_classes, specs=specs, cfg=gnn_train_config(ctx.metric))
    return {("layers", spec.num_layers, "res_ln", spec.residual): unpadded(p, r.prior) for spec, r in zip(specs, fits)}


def method_gcn(ctx: Context) -> dict:
    """Kipf & Welling's 2-layer GCN, the paper's setup (hidden 64, lr 0.01, wd 5e-5, dropout 0.5), early-stopped
    on ``ctx.metric``. One candidate: this is the paper's GCN row."""
    cfg = jaxclp.TrainConfig(metric=ctx.metric)
    def fit():
        p = fit_inputs(ctx, "gcn")
        return unpadded(p, fit_gcn(ctx.key, p.graph, p.features, masked_labels(p.labels), p.train_mask, p.val_mask,
                                   num_classes=ctx.num_classes, cfg=cfg).prior)

    return {("gcn",): _cached(ctx, _fit_key("gcn", cfg), fit)}


def method_gcn_tuned(ctx: Context) -> dict:
    """Kipf's GCN (``("gcn",)``) and the tuned GCN grid (:func:`gnn_grid`), chosen on validation: 9 fits per split,
    about 40 % of a table's time on Actor, so the paper's tables run :func:`method_gcn` and the tuned GNNs have
    their own target (``jaxclp reproduce table_gnn``)."""
    return method_gcn(ctx) | _tuned_candidates(ctx, "gcn")


def method_h2gcn(ctx: Context) -> dict:
    cfg = jaxclp.TrainConfig(metric=ctx.metric)
    def fit():
        p = fit_inputs(ctx, "h2gcn")
        return unpadded(p, fit_h2gcn(ctx.key, p.graph, p.features, masked_labels(p.labels), p.train_mask,
                                     p.val_mask, two_hop=fit_two_hop(ctx, p), num_classes=ctx.num_classes,
                                     cfg=cfg).prior)

    return {("h2gcn",): _cached(ctx, _fit_key("h2gcn", cfg), fit)}


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
    search = search or Search(ctx.time_limit, ctx.decisions, status, stated_limit=ctx.stated_time_limit)
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
            p = fit_inputs(ctx, name)
            extra = {"two_hop": fit_two_hop(ctx, p)} if name == "h2gcn" else node_count(p, name)
            res = fit_prior(name, ctx.key, p.graph, p.features, p.labels, p.train_mask, p.val_mask,
                            ctx.num_classes, fit_cfg, **opts, **extra)
            return res._replace(prior=unpadded(p, res.prior))

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
    fitted = search.fit_priors(names, fit, free=free, clocked=DEADLINE_PRIORS, fitted_before=before,
                               threads=fit_threads(ctx.graph.num_nodes))
    return {names[i]: prior for i, prior in fitted.items()}


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
    search = Search(ctx.time_limit, ctx.decisions, status, stated_limit=ctx.stated_time_limit)
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


def clp_plan_of_record(record: dict) -> tuple[SearchPlan, Decisions | None]:
    """The plan a ``clp`` result record was computed under, read back from it: its base predictors (the run's
    ``--priors``, else the method's list as its ``method_spec`` holds it), its time limit (``config``), and the
    :class:`jaxclp.search.Decisions` it followed (None without a limit). What was left out is the record's
    ``skipped``.

    Raises:
        ValueError: not a ``clp`` result record.
    """
    if record.get("type") != "result" or record.get("method") != "clp":
        raise ValueError(f"not a clp result record (type {record.get('type')!r}, method {record.get('method')!r})")
    config = record.get("config", {})
    grid = record.get("method_spec", {}).get("grid", {})
    priors = config.get("priors") or grid.get("priors")
    return clp_plan(priors, config.get("time_limit")), Decisions.from_record(record)


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
