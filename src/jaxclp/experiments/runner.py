"""The experiment orchestrator: datasets x splits x methods -> JSON Lines records, resumable.

One record per (dataset, split, run, method); a header record per invocation (versions, git commit, argv).
Records are appended with a single ``write`` of one line to a file opened with O_APPEND (atomic for our line
sizes on POSIX), so an interrupted run leaves only whole records and is resumed by skipping them.

Configuration-keyed resume. Every record carries ``config``, every option that can change a number (dataset,
split kind, base seed, the training settings incl. epochs, the feature kind, the metric, the identity of the
data: the registry's sha256 of every source file for a named dataset, a sha256 of the arrays for a
:class:`Dataset` passed in, the jaxclp version and whether JAX runs in float64), and ``config_hash``, a
short stable hash of it. A run skips only the keys (dataset, split, run, method, config_hash) already
present. If ``out`` holds results of the same (dataset, split, method) from another configuration (records
without ``config``, written by older versions, count as another configuration), :func:`run` refuses
with :class:`StaleResultsError` and says how to proceed: another ``out``, or ``replace_stale=True``
(``--replace-stale``), which moves those records to ``results.stale.jsonl`` beside ``results.jsonl`` and
recomputes. A folder therefore never mixes
configurations for one (dataset, split, method), and the summary never shows a number of another setup.
Each result record also carries its method's definition (``method_spec``: the candidate grid and a code
revision, :mod:`jaxclp.experiments.specs`) and ``method_hash``; a finished key is skipped only when both hashes
are the current ones, and records of another method definition are stale in the same way (a changed grid is
never served as the new method's numbers).
The number of runs is not part of the configuration: split ``i`` uses seed ``seed + i`` and its own PRNG key
whatever ``runs`` is, so ``--runs 10`` after ``--runs 2`` computes runs 2..9 only.

Concurrent writers. The whole check-and-run of one :func:`run` call holds an advisory lock
(``fcntl.flock`` on ``out/.lock``, POSIX; no lock where ``fcntl`` is missing): a second process on the same
folder waits, then re-reads the finished keys and skips them, so no key is written twice.

Many processes. Under ``jax.distributed`` (``jaxclp run --coordinator ...``) every process runs the same
work (process 0's finished keys are broadcast to all, so they agree on it) and only process 0
(:func:`is_writer`) creates the folder, takes the lock and writes records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import contextvars
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import jaxclp
from jaxclp.datasets import Dataset, load, random_splits
from jaxclp.datasets import node_features as _node_features
from jaxclp.datasets.featurize import csr_for_density
from jaxclp.datasets.fetch import data_root as _data_root, sha256sum
from jaxclp.datasets.registry import REGISTRY, canonical_name
from jaxclp.features import as_features
from jaxclp.gnn import check_two_hop_size
from jaxclp.metrics import evaluate
from jaxclp import search
from jaxclp.search import MLP_DEPTHS, Decisions, mlp_deadline, mlp_depth_fits
from jaxclp.mlp import fit_mlp_splits
from jaxclp.priors import PRIORS
from jaxclp.train import TrainConfig, stopped_early

from jaxclp.experiments.records import RecordKey, record_key
from jaxclp.experiments.methods import (METHODS, NEEDS_PRIOR, Context, GraphViews, reporting, select, status,
                                       visible_labels)
from jaxclp.experiments.specs import method_hash, method_spec

RESULTS_FILE = "results.jsonl"
STALE_FILE = "results.stale.jsonl"
LOCK_FILE = ".lock"
# minesweeper's mines are exactly numpy.random.default_rng(0).permutation(10000)[:2000], so seed 0 would put
# every mine and nothing else into train + validation (the runner refuses such a split): the tables' splits of
# it use seeds 1..10 instead of 0..9 (recorded in every record's "seed").
BASE_SEED = {"minesweeper": 1}


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def header_record(argv: Sequence[str] | None = None) -> dict:
    import flax
    import optax

    return {"type": "header", "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "argv": list(argv or []),
            "jaxclp": jaxclp.__version__, "jax": jax.__version__, "flax": flax.__version__,
            "optax": optax.__version__, "numpy": np.__version__, "python": platform.python_version(),
            "backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()],
            "cpu_count": os.cpu_count(), "git_commit": git_commit()}


def append_record(path: Path, record: dict) -> None:
    """Appends one JSON line atomically (single write, O_APPEND)."""
    line = (json.dumps(record, sort_keys=True, default=_json_default) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def _json_default(x):
    if isinstance(x, (np.generic, jax.Array)):
        return np.asarray(x).item() if np.ndim(x) == 0 else np.asarray(x).tolist()
    return str(x)


def read_records(path: Path) -> list[dict]:
    """All complete records of a results file (a torn last line is ignored)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


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
    return float(evaluate(metric, jnp.asarray(scores), jnp.asarray(labels), jnp.asarray(test_mask)))


def reference_scores(metric: str, cands, labels_visible, labels, val_mask, test_mask) -> dict:
    """``{"references": {name: {"val", "test"}}}`` for a method's references (:attr:`jaxclp.experiments.methods.Candidates.references`:
    scored like the choice, never chosen, e.g. the base prior alone beside CLP on it), or ``{}``."""
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
        priors: Sequence[str] | None = None, time_limit: float | None = None) -> list[dict]:
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
            candidates (:attr:`jaxclp.experiments.methods.Context.time_limit`; what was left out for time is
            named in the record's ``"skipped"``); None: no limit. Part of the configuration when given.

    Resuming prints ``reusing N records, computing M`` (stderr) when some of the work is already in ``out``.
    Inside :func:`job` the progress bar names the job's position (``dataset 4/14 actor``), the split and the
    method, and shows an overall ETA from the job's own record times once :data:`ETA_MIN_RECORDS` exist; with
    ``progress`` a line per finished dataset and split stays on stderr with its time.

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
    config = run_config(ds, split, seed, cfg, feat_kind, data_identity(dataset, ds, data_root), priors, time_limit)
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
            tracker.begin(ds.name, split, computing)
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
            append_record(path, header_record(argv) | {"dataset": ds.name, "split": split, "config": config,
                                                       "config_hash": chash})
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
            setup = prepare_splits(ds, feats, sp, nruns, todo, seed, cfg, needs_prior, priors, time_limit)
            decisions = {}  # method -> what its first split computed decided under the time limit (later splits follow)
            for j, i in enumerate(bar):
                ctx = setup.context(j)
                for m in methods:
                    if RecordKey(ds.name, split, i, m) in done:
                        continue
                    show.at(f"split {i + 1}/{nruns}, method {m}")
                    t_rec = time.perf_counter()
                    fields, _ = score_method(dataclasses.replace(ctx, decisions=decisions.get(m)), m, setup.labels,
                                             setup.test[i], setup.mlp_seconds)
                    if "decisions" in fields:
                        decisions.setdefault(m, Decisions.from_record(fields))
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
        if hasattr(bar, "close"):
            bar.close()
        if progress and writer:
            eta = tracker.eta() if tracker is not None else None
            print(f"jaxclp: {where} done: {len(records)} records in {_duration(time.perf_counter() - t_start)}"
                  + (f"; whole job: about {_duration(eta)} left" if eta else ""), file=sys.stderr, flush=True)
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


class _StatusLine:
    """A :func:`jaxclp.experiments.methods.status` callback that writes the progress bar's postfix (``split 3/10,
    method clp: base predictor gcn_tuned; job ETA ~12 min``); :meth:`at` sets its first part. A no-op without a
    bar (``progress=False``)."""

    def __init__(self, bar, tracker: "Job | None" = None):
        self._set = getattr(bar, "set_postfix_str", None)
        self._where = ""
        self._tracker = tracker

    def __call__(self, text: str = "") -> None:
        if self._set is not None:
            eta = self._tracker.eta() if self._tracker is not None else None
            self._set(self._where + (f": {text}" if text else "") + (f"; job ETA ~{_duration(eta)}" if eta else ""),
                      refresh=True)

    def at(self, where: str) -> None:
        self._where = where
        self()


def reuse_records(src: Path, dst: Path, dataset: str, split: str, chash: str, mhash: dict) -> int:
    """Copies ``src``'s result records of (``dataset``, ``split``) with configuration hash ``chash`` and, per
    method, the method hash ``mhash[method]`` (methods absent from ``mhash`` are not copied) into ``dst`` when
    ``dst`` has no result of that (dataset, split, run, method) of this configuration; the header records of
    that configuration come along (they name the machine and the command that made the copied records).
    Records are copied verbatim. Returns how many results were copied."""
    if not Path(src).exists() or Path(src).resolve() == Path(dst).resolve():
        return 0
    existing = read_records(dst)
    have = {(r["run"], r["method"]) for r in existing if r.get("type") == "result"
            and r.get("dataset") == dataset and r.get("split") == split and r.get("config_hash") == chash
            and r.get("method_hash") == mhash.get(r.get("method"))}
    headers = {json.dumps(r, sort_keys=True) for r in existing if r.get("type") == "header"}
    copied, new_headers = [], []
    for r in read_records(src):
        if r.get("dataset") != dataset or r.get("split") != split or r.get("config_hash") != chash:
            continue
        if r.get("type") == "header":
            if json.dumps(r, sort_keys=True) not in headers:
                new_headers.append(r)
        elif (r.get("type") == "result" and r.get("method_hash") == mhash.get(r.get("method"))
              and (r["run"], r["method"]) not in have):
            have.add((r["run"], r["method"]))
            copied.append(r)
    if copied:
        for r in new_headers + copied:
            append_record(dst, r)
    return len(copied)


MAP_FRACTION = 0.5
""":func:`release_compiled` drops the compiled executables once the process holds this fraction of the kernel's
``vm.max_map_count`` memory mappings."""


def memory_maps() -> tuple[int, int] | None:
    """``(mappings this process holds, vm.max_map_count)`` on Linux; None where /proc does not say."""
    try:
        with open("/proc/self/maps", "rb") as f:
            held = sum(1 for _ in f)
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
    except (OSError, ValueError):
        return None
    return held, limit


def release_compiled(fraction: float | None = None) -> bool:
    """Drops JAX's in-memory compiled executables (``jax.clear_caches``) when the process holds more than
    ``fraction`` (default :data:`MAP_FRACTION`) of the kernel's memory-mapping limit; returns whether it did.

    Every XLA:CPU executable keeps its machine code in LLVM memory mappings. A process that compiles thousands of
    them (``table_gnn``: ~45 GNN configurations per graph, ~10k mappings for each small graph) reaches
    ``vm.max_map_count`` (65530 by default) after a few graphs and dies inside LLVM ("Cannot allocate memory",
    then SIGSEGV: measured on table_gnn's third graph). Checked after every method of every split; below the
    threshold nothing is dropped (tests and short runs keep their executables), above it the next computations
    recompile (the CLI's persistent compilation cache serves them from disk).
    """
    maps = memory_maps()
    if maps is None or maps[0] <= (MAP_FRACTION if fraction is None else fraction) * maps[1]:
        return False
    jax.clear_caches()
    gc.collect()
    return True


def mlp_priors(keys, todo, x, y_vis, train, val, num_classes: int, cfg: TrainConfig,
               time_limit: float | None = None) -> tuple[dict, float, dict]:
    """MLP priors of every depth in :data:`MLP_DEPTHS`, each fit vmapped over the splits ``todo``.

    Args:
        keys: (nruns,) PRNG keys (one per split).
        todo: split indices to fit.
        x: (n, d) features.
        y_vis: (len(todo), n) labels with test labels removed.
        train, val: (nruns, n) bool masks.

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
    for d in MLP_DEPTHS:
        if priors and not mlp_depth_fits((time.perf_counter() - t0) / len(todo), last, time_limit):
            status(f"MLP prior depth {d} and deeper skipped: time limit {time_limit:g} s")
            break
        t1 = time.perf_counter()
        res = fit_mlp_splits(keys[np.asarray(todo)], x, jnp.asarray(y_vis), jnp.asarray(train[todo]),
                             jnp.asarray(val[todo]), num_classes=num_classes, hidden=(64,) * d, cfg=cfg,
                             deadline=stop)
        priors[d] = jax.block_until_ready(res.prior)
        last = (time.perf_counter() - t1) / len(todo)
        epochs = cut_epochs(res.info, cfg)
        if epochs is not None:
            cut[d] = epochs
            status(f"MLP prior depth {d}: training stopped at epoch {epochs} of {cfg.epochs} for the time limit "
                   f"{time_limit:g} s")
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
        key, priors = _split_row((self.keys, self.priors), jnp.asarray([i, j], jnp.int32))
        left = None if self.time_limit is None else max(0.0, float(self.time_limit) - float(self.mlp_seconds))
        # seconds of one MLP fit on this split (the depths' mean, compilation included): the time budget's
        # first measurement of what a base predictor costs on this graph
        return split_context(self.ds, self.x, self.y_vis[j], self.train[i], self.val[i], key, priors, self.cfg,
                             self.base_priors, left, float(self.mlp_seconds) / max(len(self.priors), 1),
                             self.mlp_cut, self.views)


@jax.jit
def _split_row(keys_and_priors, ij):
    """``(keys[i], {depth: priors[depth][j]})`` with traced indices: one program for every split (``x[i]`` with a
    Python int compiles a static slice per index value)."""
    keys, priors = keys_and_priors
    return keys[ij[0]], {d: p[ij[1]] for d, p in priors.items()}


def prepare_splits(ds: Dataset, feats, sp, nruns: int, todo, seed: int, cfg: TrainConfig,
                   with_priors: bool, base_priors: tuple | None = None,
                   time_limit: float | None = None) -> SplitSetup:
    """The shared setup of the splits ``todo`` of ``sp`` (see :class:`SplitSetup`): keys
    ``split(key(seed), nruns)``, test labels removed (:func:`visible_labels`), MLP priors of every depth
    (vmapped over the splits; skipped without ``with_priors``); ``base_priors`` and ``time_limit`` go to every
    split's :class:`Context` (``clp``'s base predictors and their time budget; None: the method's defaults)."""
    todo = tuple(int(i) for i in todo)
    x = as_features(feats)  # dense jax array, or SparseFeatures for a CSR (never densified)
    y = np.asarray(ds.labels)
    keys = jax.random.split(jax.random.key(seed), nruns)
    tr, va, te = (np.asarray(sp.train), np.asarray(sp.val), np.asarray(sp.test))
    y_vis = np.stack([visible_labels(y, tr[i], va[i]) for i in todo])  # (S, n), test labels removed
    priors, secs, cut = (mlp_priors(keys, list(todo), x, y_vis, tr, va, int(ds.num_classes), cfg, time_limit)
                         if with_priors else ({}, 0.0, {}))
    return SplitSetup(ds, x, y, keys, tr, va, te, todo, y_vis, priors, secs, cfg, base_priors, time_limit, cut,
                      GraphViews(ds.graph))


def split_context(ds: Dataset, x, y_vis, train, val, key, priors: dict, cfg: TrainConfig | None = None,
                  base_priors: tuple | None = None, time_limit: float | None = None,
                  mlp_fit_seconds: float = 0.0, mlp_cut: dict | None = None,
                  views: GraphViews | None = None) -> Context:
    """The :class:`Context` of one split, with the MLP depth chosen on validation (1 without priors); ``cfg``
    is the run's training configuration (the base predictors a method fits use it); ``base_priors``,
    ``time_limit``, ``mlp_fit_seconds`` and ``mlp_cut``: :attr:`Context.base_priors`, :attr:`Context.time_limit`
    (None: the method's defaults), :attr:`Context.mlp_fit_seconds`, :attr:`Context.mlp_cut`."""
    depth = select(priors, y_vis, val, ds.metric)[0] if priors else 1
    return Context(graph=ds.graph, features=x, labels=jnp.asarray(y_vis), train=jnp.asarray(train),
                   val=jnp.asarray(val), num_classes=int(ds.num_classes), metric=ds.metric, key=key,
                   priors=priors, mlp_depth=depth, train_cfg=cfg,
                   base_priors=None if base_priors is None else tuple(base_priors), time_limit=time_limit,
                   mlp_fit_seconds=float(mlp_fit_seconds), mlp_cut=dict(mlp_cut or {}), views=views)


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


# ------------------------------------------------------------------------- the whole job: position, ETA, interrupt
ETA_MIN_RECORDS = 3
"""A job's ETA is shown once this many records of it have been computed (before, one record's time says little:
early rates misled by a factor of six)."""


def _duration(seconds: float) -> str:
    """``"45s"``, ``"3m12s"``, ``"2h05m"``."""
    s = int(round(max(float(seconds), 0.0)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class Job:
    """What one command runs in all: ``total`` (dataset, split kind) units of :func:`run`, each of
    ``records_per_unit`` records (runs x methods) at most. :func:`run` calls :meth:`begin` per unit and
    :meth:`record` per computed record; :meth:`eta` is the mean compute time of the records computed so far times
    the records still to compute (the current unit's, exactly; each later unit's, at most ``records_per_unit``),
    None before :data:`ETA_MIN_RECORDS` records (tqdm's early rate misled)."""

    def __init__(self, total: int = 1, records_per_unit: int | None = None):
        self.total, self.records_per_unit = int(total), records_per_unit
        self.index, self.left_in_unit, self.seconds = 0, 0, []

    def begin(self, dataset: str, split: str, computing: int) -> None:
        self.index += 1
        self.left_in_unit = int(computing)

    def record(self, seconds: float) -> None:
        self.seconds.append(float(seconds))
        self.left_in_unit = max(self.left_in_unit - 1, 0)

    def eta(self) -> float | None:
        if len(self.seconds) < ETA_MIN_RECORDS:
            return None
        later = max(self.total - self.index, 0) * (self.records_per_unit or 0)
        return float(np.mean(self.seconds)) * (self.left_in_unit + later)


_JOB: contextvars.ContextVar = contextvars.ContextVar("jaxclp_job", default=None)


@contextlib.contextmanager
def job(total: int, records_per_unit: int | None = None):
    """Within the block, :func:`run` calls are units of one :class:`Job` of ``total`` (dataset, split kind) units
    (the progress bar says ``dataset 4/14 actor`` and shows the job's ETA). Yields the :class:`Job`."""
    tracker = Job(total, records_per_unit)
    token = _JOB.set(tracker)
    try:
        yield tracker
    finally:
        _JOB.reset(token)


_ACTIVE: dict = {"out": None, "summary": {}}
"""The folder :func:`run` writes now and how its summary is titled: read by the CLI's interrupt handler (on its
own thread, hence a plain module dict and not a context variable) to say where the kept records are and write
their summary."""


def _note_active(out: Path) -> None:
    if _ACTIVE["out"] is None or Path(_ACTIVE["out"]).resolve() != Path(out).resolve():
        _ACTIVE.update(out=Path(out), summary={})


@contextlib.contextmanager
def summary_target(out, **summary_kwargs):
    """Within the block, an interrupted command's summary of ``out`` is written with ``summary_kwargs``
    (:func:`jaxclp.experiments.summary.write_summary`'s title, methods, ...)."""
    previous = dict(_ACTIVE)
    _ACTIVE.update(out=Path(out), summary=dict(summary_kwargs))
    try:
        yield
    finally:
        _ACTIVE.clear()
        _ACTIVE.update(previous)


def active_output() -> tuple[Path | None, dict]:
    """``(folder, summary options)`` of the :func:`run` in progress or last begun (None: none yet)."""
    return _ACTIVE["out"], dict(_ACTIVE["summary"])


BAR_FORMAT = "{desc}: {n_fmt}/{total_fmt} splits |{bar:12}| {elapsed}{postfix}"
"""The progress bar without tqdm's rate and remaining-time guess (from the first split's rate: it showed 31 min
left on a graph that finished in under 5); the job's ETA from its records' own times is in the postfix."""
TICK_SECONDS = 1.0
"""How often a running bar redraws (its clock moves between updates; tqdm redraws only on an update)."""


def _progress(items, enabled: bool, desc: str):
    if not enabled:
        return items
    from tqdm.auto import tqdm

    bar = tqdm(items, desc=desc, leave=False, bar_format=BAR_FORMAT)
    if getattr(sys.stderr, "isatty", lambda: False)():  # a log file gets no line per second
        _tick(bar)
    return bar


def _tick(bar) -> None:
    """Redraws ``bar`` every :data:`TICK_SECONDS` until it closes (a daemon thread; tqdm's lock serializes the
    redraws with the main thread's updates)."""
    import threading

    def loop():
        while not getattr(bar, "disable", True) and getattr(bar, "n", 0) < (bar.total or 0):
            time.sleep(TICK_SECONDS)
            try:
                if getattr(bar, "disable", True):
                    return
                bar.refresh()
            except Exception:  # noqa: BLE001 - a closed bar: nothing to redraw
                return

    threading.Thread(target=loop, name="jaxclp-progress", daemon=True).start()


# ------------------------------------------------------------------------- configuration, staleness, lock
class StaleResultsError(ValueError):
    """``out`` holds results of another configuration for the same (dataset, split, method)."""


_REPLACE_STALE = contextvars.ContextVar("jaxclp_replace_stale", default=False)


@contextlib.contextmanager
def replacing_stale(enabled: bool = True):
    """Within the block, :func:`run` calls that do not pass ``replace_stale`` use ``enabled``."""
    token = _REPLACE_STALE.set(bool(enabled))
    try:
        yield
    finally:
        _REPLACE_STALE.reset(token)


def replace_stale_default(replace_stale: bool | None) -> bool:
    """``replace_stale`` as given, or (None) the :func:`replacing_stale` context's setting: the default of every
    config-keyed writer (:func:`run`, the figures' mirror, the selection analysis)."""
    return _REPLACE_STALE.get() if replace_stale is None else bool(replace_stale)


def done_results(path: Path, chash: str, method_hashes: dict) -> set:
    """``(dataset, split, run, method)`` keys of the result records in ``path`` made under configuration ``chash``
    and their method's current definition (``method_hashes``: method -> method_hash): the keys a resumed run
    skips."""
    return {record_key(r) for r in read_records(path)
            if r.get("type") == "result" and r.get("config_hash") == chash
            and r.get("method_hash") == method_hashes.get(r.get("method"))}


def config_hash(config: dict) -> str:
    """A short stable hash (12 hex digits of sha256) of a configuration dict (canonical JSON)."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=_json_default)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def run_config(ds: Dataset, split: str, seed: int, cfg: TrainConfig, feature_kind: str, data: dict,
               priors: Sequence[str] | None = None, time_limit: float | None = None) -> dict:
    """Every option of a run that can change a number (the runs count excepted: see the module docstring).

    ``priors`` and ``time_limit`` enter only when given, so the records of a default run keep the configuration
    hash they had before these options existed."""
    config = {"dataset": ds.name, "split": split, "seed": int(seed), "train": dict(cfg._asdict()),
              "features": feature_kind, "metric": ds.metric, "data": data, "jaxclp": jaxclp.__version__,
              "x64": bool(jax.config.jax_enable_x64)}
    if priors is not None:
        config["priors"] = list(priors)
    if time_limit is not None:
        config["time_limit"] = float(time_limit)
    return config


def data_identity(dataset: str | Dataset, ds: Dataset, data_root=None) -> dict:
    """Identity of the data a run uses.

    For a registered name: the registry's sha256 of every source file (the file's own sha256 where the
    registry has none; ``"absent"`` for a missing optional file) and the loader options. For a
    :class:`Dataset` passed in (synthetic, derived, a user's file): a sha256 of its arrays.
    """
    if not isinstance(dataset, Dataset) and canonical_name(dataset) in REGISTRY:
        spec = REGISTRY[canonical_name(dataset)]
        root = _data_root(data_root)
        files = {}
        for fs in sorted(spec.files.values(), key=lambda f: f.path):
            p = root / fs.path
            if fs.sha256 is not None and (p.exists() or not fs.optional):
                files[fs.path] = fs.sha256
            elif p.exists():
                files[fs.path] = sha256sum(p)
            else:
                files[fs.path] = "absent"
        return {"files": files, "options": dict(spec.options)}
    return {"arrays_sha256": dataset_sha256(ds)}


def _hash_array(h, tag: str, a) -> None:
    """Feeds one array into the sha256 ``h``: its tag, dtype, shape and bytes."""
    a = np.ascontiguousarray(np.asarray(a))
    h.update(f"{tag}:{a.dtype.str}:{a.shape};".encode())
    h.update(a.tobytes())


def dataset_sha256(ds: Dataset) -> str:
    """sha256 over a Dataset's graph, labels, features and published splits (dtype, shape and bytes)."""
    h = hashlib.sha256()
    add = lambda tag, a: _hash_array(h, tag, a)  # noqa: E731
    g = ds.graph
    h.update(f"n={g.num_nodes};k={int(ds.num_classes)};".encode())
    add("senders", g.senders)
    add("receivers", g.receivers)
    add("weights", g.weights)
    add("labels", ds.labels)
    f = ds.features
    if f is not None:
        if hasattr(f, "tocsr"):
            f = f.tocsr()
            for tag in ("data", "indices", "indptr"):
                add("features." + tag, getattr(f, tag))
            add("features.shape", np.asarray(f.shape))
        else:
            add("features", f)
    if ds.splits is not None:
        for tag in ("train", "val", "test"):
            add("splits." + tag, getattr(ds.splits, tag))
    return h.hexdigest()


def splits_sha256(sp) -> str:
    """sha256 over a :class:`~jaxclp.datasets.Splits`' train/val/test masks (dtype, shape and bytes)."""
    h = hashlib.sha256()
    for tag in ("train", "val", "test"):
        _hash_array(h, tag, getattr(sp, tag))
    return h.hexdigest()


def _config_diff(old: dict | None, new: dict) -> str:
    if not old:
        return "no configuration recorded (an older jaxclp)"
    diffs = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            a, b = old.get(key), new.get(key)
            if isinstance(a, dict) and isinstance(b, dict):
                sub = [f"{key}.{s}: {a.get(s)!r} -> {b.get(s)!r}" for s in sorted(set(a) | set(b))
                       if a.get(s) != b.get(s)]
                diffs += sub[:3]
            else:
                diffs.append(f"{key}: {a!r} -> {b!r}")
    return ", ".join(diffs[:4]) or "a different configuration hash"


def _spec_diff(old: dict | None, new: dict) -> str:
    if not old:
        return "no method definition recorded (an older jaxclp)"
    diffs = [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in ("function", "revision") if old.get(k) != new.get(k)]
    og, ng = old.get("grid") or {}, new.get("grid") or {}
    diffs += [f"grid.{k}: {og.get(k)!r} -> {ng.get(k)!r}" for k in sorted(set(og) | set(ng)) if og.get(k) != ng.get(k)]
    return ", ".join(diffs[:3]) or "a different method hash"


def stale_records(path: Path, dataset: str, split: str, methods, config: dict, chash: str,
                  replace: bool, method_hashes: dict | None = None, extra_types: Sequence[str] = ()) -> list[dict]:
    """Results in ``path`` of (dataset, split, one of methods) from a configuration other than ``chash``, or
    (with ``method_hashes``, method -> :func:`jaxclp.experiments.specs.method_hash`) from another definition of
    their method (records without ``method_hash``, written before it existed, count as another definition);
    also records of a type in ``extra_types`` (per-split analysis records, e.g. the figures' ``"micro"``) of
    (dataset, split) from a configuration other than ``chash``.

    With ``replace=True`` they are moved to ``STALE_FILE`` beside ``path`` (appended there first, then
    ``path`` is rewritten without them, atomically); else :class:`StaleResultsError` is raised. Call with the
    folder lock held.
    """
    methods, extra_types = set(methods), set(extra_types)

    def is_stale(r):
        if r.get("dataset") != dataset or r.get("split") != split:
            return False
        if r.get("type") in extra_types:
            return r.get("config_hash") != chash
        return (r.get("type") == "result" and r.get("method") in methods
                and (r.get("config_hash") != chash
                     or (method_hashes is not None and r.get("method_hash") != method_hashes.get(r["method"]))))

    stale = [r for r in read_records(path) if is_stale(r)]
    if not stale:
        return []
    if not replace:
        last = stale[-1]
        if last.get("config_hash") != chash:
            hashes = sorted({str(r.get("config_hash")) for r in stale})
            why = (f"another configuration ({_config_diff(last.get('config'), config)}; "
                   f"config_hash {', '.join(hashes)} vs {chash})")
        else:
            m = last["method"]
            why = (f"another definition of method {m!r} ({_spec_diff(last.get('method_spec'), method_spec(m))}; "
                   f"method_hash {last.get('method_hash')} vs {method_hashes[m]})")
        raise StaleResultsError(
            f"{path} holds {len(stale)} result(s) of {dataset}/{split} from {why}; "
            f"nothing was run. Use a new --out, or --replace-stale (replace_stale=True) to move them to "
            f"{path.parent / STALE_FILE} and recompute.")
    keep, moved = [], []
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn line: dropped with the rewrite
        (moved if is_stale(r) else keep).append(line)
    stale_path = path.parent / STALE_FILE
    fd = os.open(stale_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, ("\n".join(moved) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp = path.with_name(f".{path.name}.rewrite")
    with open(tmp, "w") as f:
        f.write("".join(line + "\n" for line in keep))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    print(f"jaxclp: moved {len(moved)} result(s) of {dataset}/{split} from another configuration to {stale_path}",
          file=sys.stderr)
    return stale


def _repair_tail(path: Path) -> None:
    """Ends a results file that lost its last newline (a torn write) with one, so the next record starts on
    its own line and the torn line stays unreadable (ignored) instead of corrupting the next record."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
    if last != b"\n":
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b"\n")
        finally:
            os.close(fd)


@contextlib.contextmanager
def folder_lock(out: Path, verbose: bool = True):
    """Holds an exclusive advisory lock on ``out/.lock`` (``fcntl.flock``; released when the process dies).

    A second holder waits (saying so on stderr when ``verbose``). Without ``fcntl`` (Windows) no lock is
    taken.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    fd = os.open(Path(out) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if verbose:
                print(f"jaxclp: another run holds {Path(out) / LOCK_FILE}; waiting for it to finish",
                      file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
