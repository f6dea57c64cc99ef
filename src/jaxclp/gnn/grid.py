"""A tuned grid of :class:`TunedGNN` specs in one compiled program (:func:`fit_gnn_grid`), with successive halving
(:data:`HALVING_RUNGS`) and a deadline; the tuned recipe of Platonov et al. (2023) / Luo et al. (2024)
(:func:`tuned_grid`, :func:`tuned_train_config`, ``TUNED_*``)."""

from __future__ import annotations

import functools
import time
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph
import numpy as np

from jaxclp._rng import fast_key, init_key as _init_key
from jaxclp.features import SparseFeatures
from jaxclp.fit_threads import fit_threads, run_each
from jaxclp.gnn.fit import _TUNED_STATIC, GNNResult, _tuned_input, _validate
from jaxclp.gnn.layers import GATConv, GCNConv, GCNSepConv, SAGEConv
from jaxclp.gnn.models import GNNSpec, _check_spec, _model, tuned_gnn_graph
from jaxclp.graph import Graph
from jaxclp.mlp import SparseDense
from jaxclp.program_store import stored_jit
from jaxclp.sparse import transpose_plan
from jaxclp.train import (TrainConfig, blank_state, make_optimizer, next_chunk, train_chunk, train_outcome,
                          train_start, train_stopped, validation_metric)


HALVING_MIN_VAL = 500
"""Validation nodes from which successive halving applies (:func:`fit_gnn_grid`'s ``rungs_min_val``): one node is
then at most 0.2 points. Written after halving misled on validation sets of 13-119 nodes and judged on held-out
graphs (ACM, DBLP, Coauthor-CS/Physics: the same spec chosen, 27 % less time;
``benchmarks/results/halving_held_out.md``)."""

HALVING_RUNGS = (50, 100, 200)
"""Successive halving's rungs (epochs) for a tuned grid (:func:`fit_gnn_grid`'s ``rungs``): 8 specs train 50
epochs, the better 4 go on to 100, the better 2 to 200, the best one to the end (500, or its early stop)."""


# Platonov et al. (2023) / Luo et al. (2024)'s recipe for the tuned GNNs, chosen per split on validation:
# residual + LayerNorm blocks with a feed-forward layer at depths 1-5 and plain blocks at depths 1-3 (deeper plain
# GNNs oversmooth); hidden 64, dropout 0.2, Adam lr 1e-3, no weight decay, early stopping on the task metric.
TUNED_DEPTHS = (1, 2, 3, 4, 5)
TUNED_PLAIN_DEPTHS = (1, 2, 3)
TUNED_HIDDEN = 64
TUNED_DROPOUT = 0.2
TUNED_LR = 1e-3
TUNED_FFN = True


def _grid_static(spec: GNNSpec) -> GNNSpec:
    """What a grid program compiles in: ``spec`` without the per-candidate fields (depth, residual, norm, ffn)."""
    return spec._replace(num_layers=0, residual=False, norm=False, ffn=False)


def _grid_union(specs: Sequence[GNNSpec]) -> GNNSpec:
    """The spec whose parameters hold every spec's of ``specs`` (same static fields): the deepest, with LayerNorms
    and feed-forward layers where any spec has them."""
    return specs[0]._replace(num_layers=max(s.num_layers for s in specs), residual=True,
                             norm=any(s.norm for s in specs), ffn=any(s.ffn for s in specs))


def _drop(rate: float, key, x):
    """Inverted dropout of an array or of :class:`jaxclp.features.SparseFeatures`' stored values (as
    ``flax.linen.Dropout``: keep with probability ``1 - rate``, scale by its inverse)."""
    if rate == 0.0:
        return x
    values = x.values if isinstance(x, SparseFeatures) else x
    keep = jax.random.bernoulli(key, 1.0 - rate, values.shape)
    out = jax.lax.select(keep, values / (1.0 - rate), jnp.zeros_like(values))
    return x.with_values(out) if isinstance(x, SparseFeatures) else out


def _conv_module(spec: GNNSpec, symmetric: bool) -> nn.Module:
    """The block convolution :class:`TunedGNN` builds for ``spec`` (same parameter layout)."""
    if spec.conv == "gcn":
        return (GCNSepConv if spec.sep else GCNConv)(spec.hidden, True, symmetric)
    if spec.conv == "sage":
        return SAGEConv(spec.hidden, True)
    if spec.conv == "gat":
        return GATConv(spec.hidden, spec.heads, spec.sep, True)
    return nn.Dense(spec.hidden)


def _grid_logits(params, union: GNNSpec, flags, graph: jraph.GraphsTuple, plan, num_classes: int,
                 symmetric: bool, key, train: bool) -> jax.Array:
    """:class:`TunedGNN`'s logits for the candidate ``flags`` = (depth, residual, norm, ffn) (int32 (4,), traced),
    computed with the parameters of ``union`` (:func:`_grid_union`). Blocks past ``depth`` are skipped by a
    ``lax.cond`` (no arithmetic), and so is the tail a candidate does not use (plain or feed-forward).
    With ``train=False`` this is ``TunedGNN(spec).apply`` on the candidate's parameters; the dropout masks are
    drawn from ``key`` folded with the position of each dropout, not as flax draws them."""
    p = params["params"]
    depth, residual, norm, ffn = flags[0], flags[1] > 0, flags[2] > 0, flags[3] > 0
    rate = union.dropout if train else 0.0
    drop = lambda x, i: _drop(rate, jax.random.fold_in(key, i), x)
    x = graph.nodes
    x = drop(x, 0) if union.input_dropout else x
    first = (SparseDense if isinstance(x, SparseFeatures) else nn.Dense)(union.hidden)
    h = nn.relu(drop(first.apply({"params": p["input"]}, x), 1))
    conv = _conv_module(union, symmetric)
    layer_norm, dense = nn.LayerNorm(), nn.Dense(union.hidden)

    def block(h, i, q):
        """Block ``i`` (an int32 operand) on ``h``, its parameters ``q`` (``conv``, ``norm``, ``ffn``) as operands: one
        function for every block, so JAX traces it (and differentiates the ``lax.cond`` around it) once, not per
        block; the same arithmetic and dropout bits as a block written out per ``i``."""
        z = jnp.where(norm, layer_norm.apply({"params": q["norm"]}, h), h) if union.norm else h
        z = conv.apply({"params": q["conv"]}, z) if union.conv == "none" else conv.apply({"params": q["conv"]},
                                                                                          graph, z, plan)
        plain = lambda z: drop(nn.relu(z), 2 + 3 * i)
        if union.ffn:
            feed_forward = lambda z: drop(
                dense.apply({"params": q["ffn"]}, nn.gelu(drop(z, 3 + 3 * i), approximate=False)), 4 + 3 * i)
            tail = jax.lax.cond(ffn, feed_forward, plain, z)
        else:
            tail = plain(z)
        return jnp.where(residual, h + tail, tail)

    out_dtype = {}  # a block's output dtype per input dtype: every block maps a dtype alike (traced once)
    skip = lambda h, i, q: h.astype(out_dtype[h.dtype])
    for i in range(union.num_layers):
        q = {"conv": p[f"conv{i}"]}
        q |= {"norm": p[f"norm{i}"]} if union.norm else {}
        q |= {"ffn": p[f"ffn{i}"]} if union.ffn else {}
        if h.dtype not in out_dtype:  # a float64 graph (x64) promotes the block's output
            out_dtype[h.dtype] = jax.eval_shape(block, h, jnp.int32(i), q).dtype
        h = jax.lax.cond(i < depth, block, skip, h, jnp.int32(i), q)
    if union.norm:
        h = jnp.where(norm, layer_norm.apply({"params": p["norm_out"]}, h), h)
    return nn.Dense(num_classes).apply({"params": p["output"]}, h)


def _grid_apply(graph, features, flags, *, num_classes, spec):
    """``(apply_fn, the model's graph, its transpose plan)`` of the grid candidate ``flags`` (union ``spec``):
    ``apply_fn(params, key, train)`` gives its logits (:func:`_grid_logits`)."""
    gt = tuned_gnn_graph(graph, spec.conv, spec.sep, nodes=features)
    symmetric = bool(graph.symmetric) and spec.conv == "gcn"
    plan = None if symmetric or spec.conv == "none" else transpose_plan(gt.senders, gt.receivers, graph.num_nodes)

    def apply_fn(p, k, train):
        return _grid_logits(p, spec, flags, gt, plan, num_classes, bool(graph.symmetric), fast_key(k), train)

    return apply_fn, gt, plan


def _grid_model(key, graph, features, flags, *, num_classes, spec):
    """``(apply_fn, initial params, dropout key)`` of the grid candidate ``flags`` (union ``spec``)."""
    apply_fn, gt, plan = _grid_apply(graph, features, flags, num_classes=num_classes, spec=spec)
    init_key, drop_key = jax.random.split(key)
    params = _model(spec, num_classes, bool(graph.symmetric)).init(_init_key(init_key), gt, plan, train=False)
    return apply_fn, params, drop_key


def _grid_start(key, graph, features, labels, train_mask, val_mask, flags, *, num_classes, spec, cfg) -> dict:
    """:func:`jaxclp.train.train_start`'s state of the grid candidate ``flags`` (keyed as :func:`fit_gnn`)."""
    apply_fn, params, drop_key = _grid_model(key, graph, features, flags, num_classes=num_classes, spec=spec)
    return train_start(apply_fn, make_optimizer(cfg), params, drop_key, labels, train_mask, val_mask,
                       validation_metric(cfg.metric))


@functools.partial(stored_jit, static_argnames=_TUNED_STATIC)
def _grid_chunk_jit(state, fresh, until, key, graph, features, labels, train_mask, val_mask, flags, *, num_classes,
                    spec, cfg):
    """One chunk of the grid candidate ``flags``'s fit (:func:`jaxclp.train.train_chunk`) and its outcome so far:
    ``(state, GNNResult)``. One program per union ``spec`` for every candidate, every chunk, halving's rungs and
    a fit without a deadline."""
    apply_fn, _, _ = _grid_apply(graph, features, flags, num_classes=num_classes, spec=spec)
    start = lambda: _grid_start(key, graph, features, labels, train_mask, val_mask, flags, num_classes=num_classes,
                                spec=spec, cfg=cfg)
    state = train_chunk(apply_fn, start, fresh, until, state, labels, train_mask, val_mask, cfg)
    best, info = train_outcome(state)
    return state, GNNResult(jax.nn.softmax(apply_fn(best, state["eval_key"], False), axis=-1), best, info)


def _spec_params(params: dict, spec: GNNSpec) -> dict:
    """The entries of a union parameter tree that :class:`TunedGNN` ``(spec)`` has."""
    keep = {"input", "output"} | {f"conv{i}" for i in range(spec.num_layers)}
    keep |= {f"norm{i}" for i in range(spec.num_layers) if spec.norm} | ({"norm_out"} if spec.norm else set())
    keep |= {f"ffn{i}" for i in range(spec.num_layers) if spec.ffn}
    return {"params": {k: v for k, v in params["params"].items() if k in keep}}


def fit_gnn_grid(key: jax.Array, graph: Graph, features, labels, train_mask, val_mask, *, num_classes: int,
                 specs: Sequence[GNNSpec], cfg: TrainConfig = TrainConfig(),
                 rungs: Sequence[int] = (), rungs_min_val: int = 0,
                 deadline: float | None = None) -> list["GNNResult"]:
    """Trains every :class:`TunedGNN` of ``specs`` (as :func:`fit_gnn`, same ``key``), compiling one program for
    all specs that differ only in depth, residual connections, LayerNorm and feed-forward layers (a tuned grid,
    :func:`tuned_grid`: one program instead of 8).

    Each candidate starts from the parameters :func:`fit_gnn` would start from (the union model's, whose blocks
    are initialized by name), takes the same optimizer steps and is early-stopped the same way; blocks past its
    depth are skipped at run time. Only the dropout masks are drawn differently from :func:`fit_gnn`'s, so with
    ``dropout=0`` the two agree to float rounding, and otherwise as two seeds do.

    Args:
        key: PRNG key (initialisation and dropout), the same for every spec.
        graph, features, labels, train_mask, val_mask, num_classes, cfg: as :func:`fit_gnn`.
        specs: the candidates (any :class:`GNNSpec`s; those sharing conv, hidden, sep, dropout, heads and
            input dropout share a program).
        rungs: successive halving (:data:`HALVING_RUNGS`; empty: every spec trained to the end). At each rung
            (an epoch count, ascending), of the specs still training (not early-stopped) the better half (rounded
            up) goes on, ranked by their best validation ``cfg.metric`` so far (then lower validation loss, then
            order); the others stop there and keep their best parameters so far. A spec that goes on resumes where
            it was, so its result is the one it would reach without rungs; only the halved specs' are shorter.
        rungs_min_val: halve only where ``val_mask`` holds at least this many nodes (:data:`HALVING_MIN_VAL`:
            on smaller validation sets the early ranking misled, ``benchmarks/results/halving.md``); below it
            every spec trains to the end.
        deadline: a :func:`time.perf_counter` time (None: none). The specs then train in rounds
            (every spec still training advances one round; :data:`jaxclp.train.DEADLINE_EPOCHS` epochs first, then
            :func:`jaxclp.train.next_chunk`'s, rungs included), and training stops where the next round would
            end past ``deadline`` or the last one did: every spec keeps its best parameters so far, so the results
            are those of ``cfg.epochs`` cut to that round's end. A grid that ends before the deadline gives the
            results it gives without one, bit for bit.

    Returns:
        one :class:`GNNResult` per spec, in order; ``params`` holds the spec's own parameters
        (``TunedGNN(spec).apply(params, ...)`` gives its logits); ``info.epochs_run`` says where a halved spec
        (or every spec, under a ``deadline`` that ran out) stopped.

    Raises:
        ValueError: an empty ``specs``, rungs that are not positive ascending integers, or the checks of
            :func:`fit_gnn`.
    """
    specs = [_check_spec(s) for s in specs]
    if not specs:
        raise ValueError("specs is empty: pass at least one GNNSpec")
    num_classes, _, x = _validate(graph, features, labels, train_mask, val_mask, num_classes, (specs[0].hidden,),
                                  specs[0].dropout, scalar_hidden=False, to_features=_tuned_input(specs[0]))
    inputs = {_tuned_input(specs[0]): x}
    for s in specs[1:]:  # a group with input dropout takes the features as given (see _tuned_input)
        if _tuned_input(s) not in inputs:
            inputs[_tuned_input(s)] = _tuned_input(s)(features, jnp.float32)
    groups: dict[GNNSpec, list[GNNSpec]] = {}
    for s in specs:
        groups.setdefault(_grid_static(s), []).append(s)
    unions = {k: _grid_union(v) for k, v in groups.items()}
    rungs = tuple(rungs)
    if any(not isinstance(r, (int, np.integer)) or r < 1 for r in rungs) or list(rungs) != sorted(set(rungs)):
        raise ValueError(f"rungs must be ascending positive epoch counts, e.g. {HALVING_RUNGS}; got {rungs!r}")
    y, tm, vm = jnp.asarray(labels), jnp.asarray(train_mask), jnp.asarray(val_mask)
    flags = [jnp.asarray([s.num_layers, s.residual, s.norm, s.ffn], jnp.int32) for s in specs]
    if rungs and int(np.asarray(val_mask).sum()) < int(rungs_min_val):
        rungs = ()
    static = [dict(num_classes=num_classes, spec=unions[_grid_static(s)], cfg=cfg) for s in specs]
    data = [(graph, inputs[_tuned_input(s)]) for s in specs]
    blanks: dict = {}  # one blank state per union: every candidate of a union has its shapes
    for s, (g, x), f, st in zip(specs, data, flags, static):
        if _grid_static(s) not in blanks:
            blanks[_grid_static(s)] = blank_state(_grid_start, key, g, x, y, tm, vm, f, key=key, **st)
    states = [blanks[_grid_static(s)] for s in specs]
    outs: list = [None] * len(specs)

    def advance(i, until):
        states[i], outs[i] = _grid_chunk_jit(states[i], np.bool_(outs[i] is None), np.int32(until), key, *data[i], y,
                                             tm, vm, flags[i], **static[i])
        return states[i]

    going = list(range(len(specs)))
    threads = fit_threads(graph.num_nodes)  # the specs of a round side by side on the CPU's cores
    done, rate, t = 0, None, time.perf_counter()
    while True:
        until = min([r for r in rungs if r > done] + [cfg.epochs])
        if deadline is not None:  # rounds of next_chunk's epochs, rungs included; 0: the next would end past it
            chunk = next_chunk(done, rate, deadline, t)
            if chunk == 0:
                break
            until = min(until, done + chunk)
        run_each([functools.partial(advance, i, until) for i in going], threads)
        if until == cfg.epochs:
            break
        going = [i for i in going if not bool(train_stopped(states[i], cfg.patience))]  # waits for the round
        now = time.perf_counter()
        rate, done, t = (now - t) / (until - done), until, now
        if deadline is not None and now > deadline:
            break
        if until in rungs:
            rank = sorted(going, key=lambda i: (-float(states[i]["best_m"]), float(states[i]["best_loss"]), i))
            going = sorted(rank[:(len(rank) + 1) // 2])
    for i in range(len(specs)):
        if outs[i] is None:  # no epoch to run (cfg.epochs 0): the initial parameters, evaluated
            advance(i, 0)
    return [r._replace(params=_spec_params(r.params, s)) for s, r in zip(specs, outs)]


def tuned_grid(conv: str = "gcn", sep: bool = False, *, depths: Sequence[int] = TUNED_DEPTHS,
               plain_depths: Sequence[int] = TUNED_PLAIN_DEPTHS, hidden: int = TUNED_HIDDEN,
               dropout: float = TUNED_DROPOUT, heads: int = 4, ffn: bool = TUNED_FFN) -> list[GNNSpec]:
    """The :class:`GNNSpec` candidates of one tuned architecture: plain blocks at ``plain_depths``, then residual +
    LayerNorm blocks (with the feed-forward layer when ``ffn``) at ``depths`` (8 specs by default).

    Args:
        conv: block type, one of :data:`CONVS`.
        sep: keep the ego embedding apart (GCN-sep, GAT-sep; SAGE always does).
        depths, plain_depths: numbers of blocks of the residual / plain candidates.
        hidden, dropout, heads, ffn: as :class:`GNNSpec`.

    Returns:
        list of :class:`GNNSpec`, plain first, each depth ascending.
    """
    specs = [GNNSpec(conv=conv, hidden=hidden, num_layers=d, sep=sep, residual=r, norm=r, dropout=dropout,
                     heads=heads, ffn=r and ffn) for r, ds in ((False, plain_depths), (True, depths)) for d in ds]
    return [_check_spec(s) for s in specs]


def tuned_train_config(cfg: TrainConfig = TrainConfig(), lr: float = TUNED_LR,
                       weight_decay: float = 0.0) -> TrainConfig:
    """``cfg`` (epochs, patience, optimizer, metric kept) with the tuned recipe's learning rate and weight decay."""
    return cfg._replace(lr=float(lr), weight_decay=float(weight_decay))
