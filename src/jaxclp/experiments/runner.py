"""The experiment protocol: datasets x splits x methods -> JSON Lines records, resumable.

:func:`run` runs methods (:data:`jaxclp.experiments.methods.METHODS`) on the splits of one dataset, one record per
(dataset, split, run, method), appended to ``out/results.jsonl`` with a header record per invocation
(:mod:`jaxclp.experiments.records`: appending, reading, resuming, stale records, the folder lock). Each split
follows one protocol: test labels removed (:func:`jaxclp.experiments.candidates.visible_labels`), the MLP priors of
every depth fitted for every split at once (:func:`mlp_priors`), the method's candidates chosen on validation
(:func:`choose`), the choice scored on the test nodes (:func:`score_test`, the only place test labels are used).

Configuration-keyed resume. Every record carries ``config`` and ``config_hash``
(:mod:`jaxclp.experiments.identity`: every option that can change a number, the identity of the data included). A
run skips only the keys (dataset, split, run, method, config_hash) already present. If ``out`` holds results of the
same (dataset, split, method) from another configuration (records without ``config``, written by older versions,
count as another configuration), :func:`run` refuses with :class:`jaxclp.experiments.records.StaleResultsError` and
says how to proceed: another ``out``, or ``replace_stale=True`` (``--replace-stale``), which moves those records to
``results.stale.jsonl`` beside ``results.jsonl`` and recomputes. A folder therefore never mixes configurations for
one (dataset, split, method), and the summary never shows a number of another setup. Each result record also
carries its method's definition (``method_spec``: the candidate grid and a code revision,
:mod:`jaxclp.experiments.specs`) and ``method_hash``; a finished key is skipped only when both hashes are the
current ones, and records of another method definition are stale in the same way (a changed grid is never served
as the new method's numbers). The number of runs is not part of the configuration: split ``i`` uses seed
``seed + i`` and its own PRNG key whatever ``runs`` is, so ``--runs 10`` after ``--runs 2`` computes runs 2..9
only.

Concurrent writers. The whole check-and-run of one :func:`run` call holds an advisory lock
(:func:`jaxclp.experiments.records.folder_lock`: ``fcntl.flock`` on ``out/.lock``, POSIX; no lock where ``fcntl``
is missing): a second process on the same folder waits, then re-reads the finished keys and skips them, so no key
is written twice.

Many processes. Under ``jax.distributed`` (``jaxclp run --coordinator ...``) every process runs the same
work (process 0's finished keys are broadcast to all, so they agree on it) and only process 0
(:func:`is_writer`) creates the folder, takes the lock and writes records.

Progress (the job, its ETA, the bar, the interrupt's folder) is :mod:`jaxclp.experiments.progress`'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
import time
from pathlib import Path
from typing import Iterable, Sequence

import jax
import numpy as np

from jaxclp.datasets import Dataset, load, random_splits
from jaxclp.datasets import node_features as _node_features
from jaxclp.datasets.featurize import csr_for_density
from jaxclp.buckets import unpad_nodes, with_split
from jaxclp.features import as_features
from jaxclp.gnn import check_two_hop_size
from jaxclp.graph import cpu_resident
from jaxclp.metrics import evaluate
from jaxclp import search
from jaxclp.search import MLP_DEPTHS, Decisions, mlp_deadline, mlp_depth_fits
from jaxclp.mlp import fit_mlp_splits
from jaxclp.priors import PRIORS
from jaxclp.train import TrainConfig, stopped_early

from jaxclp.experiments.chance import split_chances
from jaxclp.experiments.candidates import Context, GraphViews, reporting, select, status, visible_labels
from jaxclp.experiments.identity import config_hash, data_identity, run_config
from jaxclp.experiments.methods import METHODS, NEEDS_PRIOR
from jaxclp.experiments.progress import _JOB, _StatusLine, _duration, _note_active, _progress, release_compiled
from jaxclp.experiments.records import (RESULTS_FILE, RecordKey, _repair_tail, append_record, done_results,
                                        folder_lock, header_record, replace_stale_default, reuse_records,
                                        stale_records)
from jaxclp.experiments.specs import method_hash, method_spec

# minesweeper's mines are exactly numpy.random.default_rng(0).permutation(10000)[:2000], so seed 0 would put
# every mine and nothing else into train + validation (the runner refuses such a split): the tables' splits of
# it use seeds 1..10 instead of 0..9 (recorded in every record's "seed").
BASE_SEED = {"minesweeper": 1}


def node_features(ds: Dataset, kind: str = "auto"):
    """The model input features and their kind: :func:`jaxclp.datasets.node_features`.

    Default (``"auto"``): the dataset's own features (scipy CSR float32 when sparse and over 256 MiB dense, as
    deezer-europe and Coauthor CS and Physics, or mostly zeros: :data:`jaxclp.datasets.featurize.
    SPARSE_FEATURES_MAX_DENSITY`; else a dense float32 array); for featureless graphs the paper's single
    feature ``log(degree + 1)`` (``"log-degree"``). Options ``"identity"``, ``"degree-onehot"``. The returned kind
    is what the records' ``"features"`` field holds, with ``"/csr"`` appended where the features became CSR for
    their density alone (the same model, another float rounding than the dense product: such records are kept
    apart from dense-feature ones).
    """
    feats, kind = _node_features(ds, kind)
    return feats, kind + ("/csr" if csr_for_density(feats) else "")


def single_class_parts(labels: np.ndarray, train: np.ndarray, val: np.ndarray, runs) -> dict[int, dict[str, list]]:
    """The splits among ``runs`` whose train or validation nodes hold a single class (or none).

    Returns:
        ``{split index: {"train" | "validation": [the labels present]}}``, only for offending splits.
    """
    out = {}
    for i in runs:
        for part, mask in (("train", train[i]), ("validation", val[i])):
            classes = np.unique(labels[mask])
            if classes.size < 2:
                out.setdefault(int(i), {})[part] = classes.tolist()
    return out


def check_splits(labels: np.ndarray, train: np.ndarray, val: np.ndarray, runs, name: str, split: str,
                 label_values=None, advice: str = "Use another --seed (splits use seeds seed..seed+runs-1) or "
                                                  "--split published.") -> None:
    """Raises ValueError for a split whose train or validation nodes hold a single class.

    ``label_values`` ((C,), optional: :attr:`jaxclp.datasets.Dataset.label_values`) names the class in the
    message as the user's file spells it (``'bee'``, not the code ``1``); ``advice`` ends the message.

    Selection on such a split is meaningless (ROC-AUC is undefined, accuracy rewards the constant guess).
    It happens: minesweeper's mines are exactly ``numpy.random.default_rng(0).permutation(10000)[:2000]``,
    so seed 0 puts every mine, and nothing else, into train + validation. (The figures at tiny label rates
    keep such splits and flag them instead: :func:`jaxclp.experiments.analyses.common.run_mirror`.)
    """
    for i, parts in single_class_parts(labels, train, val, runs).items():
        part, classes = next(iter(parts.items()))
        if label_values is not None:
            classes = [np.asarray(label_values)[c].item() for c in classes]
        raise ValueError(
            f"{name}/{split} split {i}: every {part} node has label {classes}; no method can be "
            f"trained or selected on it. {advice}")


def score_test(metric: str, scores, labels: np.ndarray, test_mask: np.ndarray) -> float:
    """The ONLY place test labels are used: after selection, on the chosen scores (and on a method's
    references, which are never chosen from)."""
    return float(evaluate(metric, jax.device_put(scores), jax.device_put(labels), jax.device_put(test_mask)))


def reference_scores(metric: str, cands, labels_visible, labels, val_mask, test_mask) -> dict:
    """``{"references": {name: {"val", "test"}}}`` for a method's references
    (:attr:`jaxclp.experiments.candidates.Candidates.references`: scored like the choice, never chosen, e.g. the base
    prior alone beside CLP on it), or ``{}``."""
    refs = getattr(cands, "references", None)
    if not refs:
        return {}
    return {"references": {name: {"val": score_test(metric, s, labels_visible, val_mask),
                                  "test": score_test(metric, s, labels, test_mask)} for name, s in refs.items()}}


def get_splits(ds: Dataset, split: str, runs: int, seed: int):
    """The splits of ``ds``: its published ones, or ``runs`` random splits of kind ``split`` (seeds ``seed + i``)
    of the labelled nodes (label >= 0; a dataset without unlabelled nodes: every node, as always)."""
    labelled = np.asarray(ds.labels) >= 0
    if split == "published":
        if ds.splits is None:
            raise ValueError(f"{ds.name} has no published splits (train/val/test masks); use random splits: --split "
                             "sparse, medium, dense or TRAIN/VAL/TEST rates such as 60/20/20")
        sp = ds.splits
        bad = np.flatnonzero((np.asarray(sp.train) | np.asarray(sp.val) | np.asarray(sp.test)).any(axis=0) & ~labelled)
        if bad.size:
            raise ValueError(f"{ds.name}: the published splits contain {bad.size} unlabelled node(s) (label -1), "
                             f"e.g. node index {bad[:5].tolist()}")
        return sp
    return random_splits(ds.num_nodes, split, num_splits=runs, seed=seed, labelled=labelled)


def is_writer() -> bool:
    """Whether this process writes records and summaries: process 0 of a ``jax.distributed`` job (always
    true in a single process)."""
    return jax.process_index() == 0


def _agree_on_done(done: set, name: str, split: str, nruns: int, methods: list) -> set:
    """Process 0's finished (dataset, split, run, method) keys, broadcast to every process of a
    ``jax.distributed`` job so that all of them run the same work (a collective needs every process)."""
    from jax.experimental import multihost_utils

    mask = np.array([[(name, split, i, m) in done for m in methods] for i in range(nruns)], dtype=np.int32)
    mask = np.asarray(multihost_utils.broadcast_one_to_all(mask))
    return {(name, split, i, m) for i in range(nruns) for j, m in enumerate(methods) if mask[i, j]}


def run(dataset: str | Dataset, split: str = "medium", methods: Iterable[str] = ("mlp", "clp"),
        runs: int = 10, out: str | Path = "results/runs", *, seed: int = 0, epochs: int = 500,
        progress: bool = True, argv: Sequence[str] | None = None, data_root=None,
        replace_stale: bool | None = None, reuse: Sequence[str | Path] = (), metric: str | None = None,
        priors: Sequence[str] | None = None, time_limit: float | None = None,
        shape_buckets: bool = False) -> list[dict]:
    """Runs ``methods`` on ``runs`` splits of one dataset; appends records to ``out/results.jsonl``.

    Resumable and safe for concurrent callers on one ``out`` (see the module docstring): only keys of the
    same configuration are skipped, results of another configuration are refused (or moved aside with
    ``replace_stale=True``), and the check-and-run holds ``out/.lock``.

    Args:
        dataset: a dataset name (see ``jaxclp.datasets.available()``) or a loaded Dataset.
        split: "sparse", "medium", "dense" or "published".
        methods: names from :data:`jaxclp.experiments.methods.METHODS`.
        runs: number of random splits (seeds ``seed + i``), >= 1; published splits use all of theirs up to
            runs.
        out: output directory.
        seed: base seed (splits and model keys).
        epochs: MLP/LINK epochs (paper: 500), >= 1.
        progress: show a progress bar.
        argv: the command line, stored in the header record.
        data_root: dataset root for a dataset name.
        replace_stale: move records of another configuration for the same (dataset, split, method) to
            ``out/results.stale.jsonl`` and recompute them, instead of refusing. None (default): False, or
            True inside ``with replacing_stale():`` (how ``jaxclp reproduce --replace-stale`` reaches the
            runs of a target).
        reuse: other output folders (e.g. another table target over the same splits): their records of this
            configuration (same dataset, split, ``config_hash`` and ``method_hash``: the same computation) that
            ``out`` lacks are copied into ``out/results.jsonl`` with their header records (:func:`reuse_records`)
            instead of being recomputed.
        metric: ``"accuracy"`` or ``"roc_auc"`` (two classes) for validation selection, early stopping and
            scoring, instead of the dataset's own (:meth:`jaxclp.datasets.Dataset.with_metric`); part of the
            configuration, so records of the two metrics never mix.
        priors: the base predictors ``clp`` may try (names of :data:`jaxclp.priors.PRIORS`, ``"mlp"`` the runner's
            MLP prior; :func:`check_priors`); None: the method's own list. Part of the configuration when given.
        time_limit: seconds per split ``clp`` may spend (>= 0): its base predictors, then CLP's costlier
            candidates (:attr:`jaxclp.experiments.candidates.Context.time_limit`; what was left out for time is
            named in the record's ``"skipped"``); None: no limit. Part of the configuration when given.
        shape_buckets: fit the models on inputs padded to shape buckets (:mod:`jaxclp.buckets`): a graph of
            similar size reuses the compiled programs (the persistent cache's too); results equal those of exact
            shapes up to rounding (which training can amplify, :data:`jaxclp.buckets.BUCKETED_PRIORS`). Part of
            the configuration when True.

    Resuming prints ``reusing N records, computing M`` (stderr) when some of the work is already in ``out``.
    Inside :func:`~jaxclp.experiments.progress.job` the progress bar names the job's position (``dataset 4/14
    actor``), the split and the method, and shows an overall ETA from the job's own split times (a range until
    :data:`~jaxclp.experiments.progress.ETA_SINGLE_SPLITS` splits are done, the first split's compilation apart);
    with ``progress`` a line per finished dataset and split stays on stderr with its time.

    Returns:
        The new records (not the copied ones).

    Raises:
        ValueError: unknown method, ``runs`` or ``epochs`` < 1, a single-class split.
        StaleResultsError: (a ValueError) ``out`` holds results of another configuration and
            ``replace_stale`` is False.
    """
    methods = check_methods(methods)
    priors = check_priors(priors)
    time_limit = check_time_limit(time_limit)
    replace_stale = replace_stale_default(replace_stale)
    if int(runs) < 1:
        raise ValueError(f"runs must be >= 1; got {runs}")
    if int(epochs) < 1:
        raise ValueError(f"epochs must be >= 1; got {epochs}")
    ds = (dataset if isinstance(dataset, Dataset) else load(dataset, root=data_root)).with_metric(metric)
    sp = get_splits(ds, split, runs, seed)
    nruns = min(runs, sp.train.shape[0])
    feats, feat_kind = node_features(ds)
    cfg = (TrainConfig(epochs=epochs, metric=ds.metric) if "metric" in TrainConfig._fields
           else TrainConfig(epochs=epochs))
    config = run_config(ds, split, seed, cfg, feat_kind, data_identity(dataset, ds, data_root), priors, time_limit,
                        shape_buckets)
    chash = config_hash(config)
    mhash = {m: method_hash(m) for m in methods}
    out = Path(out)
    path = out / RESULTS_FILE
    writer = is_writer()  # under jax.distributed only process 0 touches the folder
    if writer:
        out.mkdir(parents=True, exist_ok=True)
        _note_active(out)
    with folder_lock(out) if writer else contextlib.nullcontext():
        if writer:
            _repair_tail(path)
            stale_records(path, ds.name, split, methods, config, chash, replace_stale, mhash)
            for src in reuse:
                reuse_records(Path(src) / RESULTS_FILE, path, ds.name, split, chash, mhash)
        done = done_results(path, chash, mhash)
        if jax.process_count() > 1:
            done = _agree_on_done(done, ds.name, split, nruns, methods)
        todo = [i for i in range(nruns) if any(RecordKey(ds.name, split, i, m) not in done for m in methods)]
        reused = sum(RecordKey(ds.name, split, i, m) in done for i in range(nruns) for m in methods)
        computing = nruns * len(methods) - reused
        tracker = _JOB.get()
        if tracker is not None:
            tracker.begin(ds.name, split, computing, splits=len(todo), methods=len(methods))
        if reused and writer:
            print(f"jaxclp: {ds.name}/{split}: reusing {reused} records in {path}, computing {computing}",
                  file=sys.stderr, flush=True)
        if not todo:
            return []
        check_splits(np.asarray(ds.labels), np.asarray(sp.train), np.asarray(sp.val), todo, ds.name, split,
                     ds.label_values)
        if "h2gcn" in methods:  # a hub-heavy graph: refused now, not after hours of the other methods
            check_two_hop_size(ds.graph)
        if writer:
            # the accuracy of always answering each split's majority training class on its test nodes: the chance
            # line of the rankings (jaxclp.experiments.chance; a header field, so result records and hashes keep)
            chance = split_chances(np.asarray(ds.labels), np.asarray(sp.train)[:nruns], np.asarray(sp.test)[:nruns])
            append_record(path, header_record(argv) | {"dataset": ds.name, "split": split, "config": config,
                                                       "config_hash": chash, "chance": chance})
        records = []
        t_start = time.perf_counter()
        where = (f"dataset {tracker.index}/{tracker.total} {ds.name}" if tracker is not None and tracker.total > 1
                 else ds.name) + f" ({split})"
        bar = _progress(todo, progress, where)
        show = _StatusLine(bar, tracker)
        with reporting(show):
            needs_prior = bool(NEEDS_PRIOR & set(methods))
            if needs_prior:
                show.at("MLP priors")
            setup = prepare_splits(ds, feats, sp, nruns, todo, seed, cfg, needs_prior, priors, time_limit,
                                   shape_buckets)
            # method -> what its splits decided under the time limit so far (the first split's, and a later split's
            # for a predictor first chosen there): the next splits follow it (jaxclp.search.Decisions)
            decisions = {}
            for j, i in enumerate(bar):
                if tracker is not None:
                    tracker.split_start()
                ctx = setup.context(j)
                for m in methods:
                    if RecordKey(ds.name, split, i, m) in done:
                        continue
                    show.at(f"split {i + 1}/{nruns}, method {m}")
                    t_rec = time.perf_counter()
                    fields, _ = score_method(dataclasses.replace(ctx, decisions=decisions.get(m)), m, setup.labels,
                                             setup.test[i], setup.mlp_seconds)
                    if "decisions" in fields:
                        decisions[m] = Decisions.from_record(fields)
                    rec = ({"type": "result", "dataset": ds.name, "split": split, "run": i,
                            "seed": None if sp.seeds is None else sp.seeds[i]} | fields
                           | {"features": feat_kind, "config": config, "config_hash": chash,
                              "method_spec": method_spec(m), "method_hash": mhash[m]})
                    if writer:
                        append_record(path, rec)
                    records.append(rec)
                    if tracker is not None:
                        tracker.record(time.perf_counter() - t_rec)
                    release_compiled()
                if tracker is not None:
                    tracker.split_end()
        if hasattr(bar, "close"):
            bar.close()
        if progress and writer:
            eta = tracker.eta_text() if tracker is not None else None
            print(f"jaxclp: {where} done: {len(records)} records in {_duration(time.perf_counter() - t_start)}"
                  + (f"; whole job: {eta}" if eta else ""), file=sys.stderr, flush=True)
    return records


def split_names(text: str) -> list[str]:
    """A comma list as typed (``"mlp, lp"``): the names without surrounding spaces, empty ones dropped."""
    return [t.strip() for t in text.split(",") if t.strip()]


def check_priors(priors) -> tuple[str, ...] | None:
    """``priors`` (a comma string or a sequence of base predictor names) as a tuple; None stays None.

    Raises:
        ValueError: an unknown name (naming the choices: :data:`jaxclp.priors.PRIORS`), or an empty list.
    """
    if priors is None:
        return None
    names = split_names(priors) if isinstance(priors, str) else [str(p).strip() for p in priors if str(p).strip()]
    choices = sorted(set(PRIORS) | {"mlp"})
    unknown = [p for p in names if p not in choices]
    if unknown or not names:
        raise ValueError(f"--priors: unknown base predictor(s) {unknown}; choose from {', '.join(choices)}"
                         if unknown else f"--priors names no base predictor; choose from {', '.join(choices)}")
    return tuple(dict.fromkeys(names))


def check_time_limit(time_limit) -> float | None:
    """``--time-limit`` checked by :func:`jaxclp.search.check_time_limit` (seconds >= 0, or None)."""
    return search.check_time_limit(time_limit, "--time-limit")


def check_methods(methods) -> list[str]:
    """``methods`` as a list; ValueError naming the unknown ones and the choices."""
    methods = list(methods)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {sorted(METHODS)}")
    return methods


def mlp_priors(keys, todo, x, y_vis, train, val, num_classes: int, cfg: TrainConfig,
               time_limit: float | None = None, views: GraphViews | None = None) -> tuple[dict, float, dict]:
    """MLP priors of every depth in :data:`MLP_DEPTHS`, each fit vmapped over the splits ``todo``.

    Args:
        keys: (nruns,) PRNG keys (one per split).
        todo: split indices to fit.
        x: (n, d) features.
        y_vis: (len(todo), n) labels with test labels removed.
        train, val: (nruns, n) bool masks.
        views: the run's :class:`GraphViews`; with :attr:`GraphViews.shape_buckets` the fits run on its padded
            features, the labels and masks padded alike, and the priors keep the first n rows; the depths then
            share one compiled program (:func:`jaxclp.mlp.fit_mlp_splits`' ``shared_depths``).

    Returns:
        ``({depth: (len(todo), n, K) softmax}, seconds per split, {depth: epochs})``. Under ``time_limit``
        (seconds per split) the depths fit :data:`jaxclp.search.MLP_TIME_SHARE` of it
        (:func:`jaxclp.search.mlp_deadline`, :func:`jaxclp.search.mlp_depth_fits`): the depths that would not start within
        it are absent, and training stops where it runs out (:func:`jaxclp.mlp.fit_mlp_splits`' ``deadline``: the
        first depth too; each split keeps its best epoch so far); the third dict holds the epochs run by each
        depth so stopped (:func:`left_out` names both).
    """
    t0 = time.perf_counter()
    priors, cut = {}, {}
    stop, last = mlp_deadline(t0, time_limit, len(todo)), 0.0
    # the depths' shared inputs, made once (each indexing or conversion of a device array compiles a program)
    rows = np.asarray(todo)
    split_keys = keys if np.array_equal(rows, np.arange(len(keys))) else keys[rows]
    n = int(np.shape(y_vis)[-1])
    padded = views is not None and views.shape_buckets
    if padded:
        p = with_split(views.padded, y_vis, train[rows], val[rows])
        x, y_todo, train_todo, val_todo = p.features, p.labels, p.train_mask, p.val_mask
    else:
        y_todo, train_todo, val_todo = (jax.device_put(a) for a in (y_vis, train[rows], val[rows]))
    for d in MLP_DEPTHS:
        if priors and not mlp_depth_fits((time.perf_counter() - t0) / len(todo), last, time_limit):
            status(f"MLP prior depth {d} and deeper skipped: they would not fit in the time limit "
                   f"({search.limit_words(time_limit)})")
            break
        t1 = time.perf_counter()
        res = fit_mlp_splits(split_keys, x, y_todo, train_todo, val_todo, num_classes=num_classes,
                             hidden=(64,) * d, cfg=cfg, deadline=stop, shared_depths=MLP_DEPTHS if padded else ())
        priors[d] = jax.block_until_ready(unpad_nodes(res.prior, n, axis=1) if padded else res.prior)
        last = (time.perf_counter() - t1) / len(todo)
        epochs = cut_epochs(res.info, cfg)
        if epochs is not None:
            cut[d] = epochs
            status(f"MLP prior depth {d}: training stopped at epoch {epochs} of {cfg.epochs} for the time limit "
                   f"({search.limit_words(time_limit)})")
    return priors, (time.perf_counter() - t0) / len(todo), cut


def cut_epochs(info, cfg: TrainConfig) -> int | None:
    """The most epochs run by a split whose training neither early-stopped nor reached ``cfg.epochs`` (a deadline
    stopped it; ``info``: the batched :class:`jaxclp.train.TrainInfo`), None where no split was stopped so."""
    run = np.atleast_1d(np.asarray(info.epochs_run))
    stopped = (run < cfg.epochs) & ~np.atleast_1d(np.asarray(stopped_early(info, cfg.patience)))
    return int(run[stopped].max()) if stopped.any() else None


def left_out(ctx: Context, cands, method: str) -> list[str]:
    """What ``method`` left out for time on this split: the MLP prior depths its context lacks (``"mlp depth
    3"``, :func:`mlp_priors` under a time limit), the epochs of a depth whose training the limit stopped
    (``"mlp depth 1 epochs after 150"``), then the candidates' own ``skipped`` (base predictors, kinds of CLP
    candidate)."""
    on_prior = method in NEEDS_PRIOR and ctx.priors
    depths = [f"mlp depth {d}" for d in MLP_DEPTHS if on_prior and d not in ctx.priors]
    cut = [f"mlp depth {d} epochs after {e}" for d, e in (ctx.mlp_cut.items() if on_prior else ())]
    return depths + cut + list(getattr(cands, "skipped", None) or ())


@dataclasses.dataclass(frozen=True)
class SplitSetup:
    """What every split of one (dataset, split kind) run shares, built once by :func:`prepare_splits`: the
    features as the models take them, labels, per-split PRNG keys and masks, the visible labels and MLP priors of
    the splits ``todo`` (index ``j`` of ``todo`` = split ``todo[j]``). Used by :func:`run`, the figures' mirror
    (:func:`jaxclp.experiments.analyses.common.run_mirror`) and the selection analysis, so all three build the
    same contexts."""

    ds: Dataset
    x: object
    labels: np.ndarray
    keys: jax.Array
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    todo: tuple
    y_vis: np.ndarray
    priors: dict
    mlp_seconds: float
    cfg: TrainConfig
    base_priors: tuple | None = None
    time_limit: float | None = None
    mlp_cut: dict = dataclasses.field(default_factory=dict)
    views: GraphViews | None = None

    def context(self, j: int) -> Context:
        """The :class:`Context` of split ``todo[j]`` (:func:`split_context`); its ``time_limit`` is what remains
        of :attr:`time_limit` after the split's share of the MLP priors (:attr:`mlp_seconds`), so a limit bounds
        the whole fit."""
        i = self.todo[j]
        key, priors = _split_row(self.keys, self.priors, i, j)
        left = None if self.time_limit is None else max(0.0, float(self.time_limit) - float(self.mlp_seconds))
        # seconds of one MLP fit on this split (the depths' mean, compilation included): the time budget's
        # first measurement of what a base predictor costs on this graph
        return split_context(self.ds, self.x, self.y_vis[j], self.train[i], self.val[i], key, priors, self.cfg,
                             self.base_priors, left, float(self.mlp_seconds) / max(len(self.priors), 1),
                             self.mlp_cut, self.views, stated_time_limit=self.time_limit)


def _split_row(keys: jax.Array, priors: dict, i: int, j: int):
    """``(keys[i], {depth: priors[depth][j]})``: on the CPU sliced on the host (the key's data unwrapped and
    wrapped again, no program), elsewhere in one program with traced indices (:func:`_split_row_jit`)."""
    if cpu_resident(keys, *priors.values()):
        data = np.asarray(jax.random.key_data(keys))[i]
        key = jax.device_put(jax.random.wrap_key_data(data, impl=jax.random.key_impl(keys)))
        return key, {d: jax.device_put(np.asarray(p)[j]) for d, p in priors.items()}
    return _split_row_jit((keys, priors), jax.device_put(np.asarray([i, j], np.int32)))


@jax.jit
def _split_row_jit(keys_and_priors, ij):
    """``(keys[i], {depth: priors[depth][j]})`` with traced indices: one program for every split (``x[i]`` with a
    Python int compiles a static slice per index value)."""
    keys, priors = keys_and_priors
    return keys[ij[0]], {d: p[ij[1]] for d, p in priors.items()}


@functools.partial(jax.jit, static_argnames="num")
def _split_keys_jit(seed, num):
    return jax.random.split(jax.random.key(seed), num)


def split_keys(seed: int, num: int) -> jax.Array:
    """``jax.random.split(jax.random.key(seed), num)``: the splits' keys, in one compiled program (the two eager
    calls compile two) for seeds in int32's range; the same bits."""
    if 0 <= int(seed) < 2 ** 31:
        return _split_keys_jit(np.int32(seed), int(num))
    return jax.random.split(jax.random.key(seed), num)


def prepare_splits(ds: Dataset, feats, sp, nruns: int, todo, seed: int, cfg: TrainConfig,
                   with_priors: bool, base_priors: tuple | None = None,
                   time_limit: float | None = None, shape_buckets: bool = False) -> SplitSetup:
    """The shared setup of the splits ``todo`` of ``sp`` (see :class:`SplitSetup`): keys
    ``split(key(seed), nruns)``, test labels removed (:func:`visible_labels`), MLP priors of every depth
    (vmapped over the splits; skipped without ``with_priors``); ``base_priors`` and ``time_limit`` go to every
    split's :class:`Context` (``clp``'s base predictors and their time budget; None: the method's defaults);
    ``shape_buckets``: the models fit on inputs padded to shape buckets (:class:`GraphViews`)."""
    todo = tuple(int(i) for i in todo)
    x = as_features(feats)  # dense jax array, or SparseFeatures for a CSR (never densified)
    y = np.asarray(ds.labels)
    keys = split_keys(seed, nruns)
    tr, va, te = (np.asarray(sp.train), np.asarray(sp.val), np.asarray(sp.test))
    y_vis = np.stack([visible_labels(y, tr[i], va[i]) for i in todo])  # (S, n), test labels removed
    views = GraphViews(ds.graph, x, shape_buckets)
    priors, secs, cut = (mlp_priors(keys, list(todo), x, y_vis, tr, va, int(ds.num_classes), cfg, time_limit, views)
                         if with_priors else ({}, 0.0, {}))
    return SplitSetup(ds, x, y, keys, tr, va, te, todo, y_vis, priors, secs, cfg, base_priors, time_limit, cut,
                      views)


def split_context(ds: Dataset, x, y_vis, train, val, key, priors: dict, cfg: TrainConfig | None = None,
                  base_priors: tuple | None = None, time_limit: float | None = None,
                  mlp_fit_seconds: float = 0.0, mlp_cut: dict | None = None,
                  views: GraphViews | None = None, stated_time_limit: float | None = None) -> Context:
    """The :class:`Context` of one split, with the MLP depth chosen on validation (1 without priors); ``cfg``
    is the run's training configuration (the base predictors a method fits use it); ``base_priors``,
    ``time_limit``, ``mlp_fit_seconds`` and ``mlp_cut``: :attr:`Context.base_priors`, :attr:`Context.time_limit`
    (None: the method's defaults), :attr:`Context.mlp_fit_seconds`, :attr:`Context.mlp_cut`;
    ``stated_time_limit``: :attr:`Context.stated_time_limit` (the user's limit, for the status messages)."""
    depth = select(priors, y_vis, val, ds.metric)[0] if priors else 1
    return Context(graph=ds.graph, features=x, labels=jax.device_put(y_vis), train=jax.device_put(train),
                   val=jax.device_put(val), num_classes=int(ds.num_classes), metric=ds.metric, key=key,
                   priors=priors, mlp_depth=depth, train_cfg=cfg,
                   base_priors=None if base_priors is None else tuple(base_priors), time_limit=time_limit,
                   mlp_fit_seconds=float(mlp_fit_seconds), mlp_cut=dict(mlp_cut or {}), views=views,
                   stated_time_limit=stated_time_limit)


def score_method(ctx: Context, method: str, labels: np.ndarray, test_mask: np.ndarray,
                 mlp_seconds: float = 0.0) -> tuple[dict, tuple]:
    """One method on one split, the protocol every record follows: its candidates, the choice on validation,
    the test score of the choice (and of its references).

    Args:
        ctx: the split's :class:`Context` (from :func:`split_context`; its labels have the test labels removed).
        method: a name from :data:`jaxclp.experiments.methods.METHODS`.
        labels: (n,) all labels (used for the test score only, after selection).
        test_mask: (n,) bool.
        mlp_seconds: the split's MLP-prior time, added to the methods built on the prior.

    Returns:
        ``(fields, (config, val, scores))``: the record's method fields (method, metric, val, test, params, seconds,
        num_candidates and references, if any) and the chosen candidate with its (n, K) scores.
    """
    t0 = time.perf_counter()
    cands, cfg_m, val = choose(ctx, method)
    y_vis, val_mask = np.asarray(ctx.labels), np.asarray(ctx.val)
    test = score_test(ctx.metric, cands[cfg_m], labels, test_mask)
    seconds = time.perf_counter() - t0 + (mlp_seconds if method in NEEDS_PRIOR else 0.0)
    fields = {"method": method, "metric": ctx.metric, "val": val, "test": test,
              "params": chosen_params(cfg_m, method, ctx.mlp_depth), "seconds": seconds,
              "num_candidates": len(cands)}
    if ctx.metric == "roc_auc":  # the same choice's accuracy, shown beside ROC-AUC (summary.md); chosen on ROC-AUC
        fields["test_accuracy"] = score_test("accuracy", cands[cfg_m], labels, test_mask)
    fields |= reference_scores(ctx.metric, cands, y_vis, labels, val_mask, test_mask)
    skipped = left_out(ctx, cands, method)
    if skipped:  # base predictors / CLP candidate kinds the method left out for time (``time_limit``): recorded
        fields["skipped"] = skipped
    made_by = getattr(cands, "search", None)
    if made_by is not None and made_by.limited:  # what the later splits of the run follow (jaxclp.search.Decisions)
        fields["decisions"] = made_by.decisions().as_dict()
    return fields, (cfg_m, val, cands[cfg_m])


def choose(ctx: Context, method: str) -> tuple:
    """``method``'s candidates on ``ctx`` and its choice on validation (its own rule, e.g. ``clp``'s predictor
    first, else :func:`select`): ``(candidates, chosen key, validation score)``. Test labels are not involved."""
    cands = METHODS[method](ctx)
    chosen, val = (getattr(cands, "rule", None) or select)(cands, np.asarray(ctx.labels), np.asarray(ctx.val),
                                                           ctx.metric)
    return cands, chosen, val


def chosen_params(cfg, method, depth) -> dict:
    """A record's ``params``: the chosen candidate key ``cfg`` of ``method`` as a dict (with the MLP depth the
    split chose where the method builds on the MLP prior)."""
    p = {"mlp_depth": cfg[1]} if method == "mlp" else {}
    if method != "mlp" and method in NEEDS_PRIOR:
        p["mlp_depth"] = depth
    items = cfg if method != "mlp" else ()
    for a, b in zip(items[0::2], items[1::2]):
        p[a] = b
    return p
