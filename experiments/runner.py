"""The experiment orchestrator: datasets x splits x methods -> JSON Lines records, resumable.

One record per (dataset, split, run, method); a header record per invocation (versions, git commit, argv).
Records are appended with a single ``write`` of one line to a file opened with O_APPEND (atomic for our line
sizes on POSIX), so an interrupted run leaves only whole records and is resumed by skipping them.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

import jaxclp
from jaxclp.datasets import Dataset, load, random_splits
from jaxclp.metrics import evaluate
from jaxclp.mlp import fit_mlp_splits
from jaxclp.train import TrainConfig

from jaxclp.experiments.methods import METHODS, NEEDS_PRIOR, Context, select, visible_labels

RESULTS_FILE = "results.jsonl"
MLP_DEPTHS = (1, 2, 3)
IDENTITY_FEATURES_MAX_NODES = 5000


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


def node_features(ds: Dataset) -> tuple[np.ndarray, str]:
    """Dense float32 features; featureless graphs get identity (n <= 5000) or one-hot log2-degree features."""
    if ds.features is not None:
        f = ds.features
        f = f.toarray() if hasattr(f, "toarray") else np.asarray(f)
        return f.astype(np.float32), "given"
    n = ds.num_nodes
    if n <= IDENTITY_FEATURES_MAX_NODES:
        return np.eye(n, dtype=np.float32), "identity"
    deg = np.asarray(ds.graph.in_degree())
    b = np.floor(np.log2(deg + 1)).astype(int)
    return np.eye(b.max() + 1, dtype=np.float32)[b], "log2-degree one-hot"


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


def check_splits(labels: np.ndarray, train: np.ndarray, val: np.ndarray, runs, name: str, split: str) -> None:
    """Raises ValueError for a split whose train or validation nodes hold a single class.

    Selection on such a split is meaningless (ROC-AUC is undefined, accuracy rewards the constant guess).
    It happens: minesweeper's mines are exactly ``numpy.random.default_rng(0).permutation(10000)[:2000]``,
    so seed 0 puts every mine, and nothing else, into train + validation. (The figures at tiny label rates
    keep such splits and flag them instead: :func:`jaxclp.experiments.analyses.common.run_mirror`.)
    """
    for i, parts in single_class_parts(labels, train, val, runs).items():
        part, classes = next(iter(parts.items()))
        raise ValueError(
            f"{name}/{split} split {i}: every {part} node has label {classes}; no method can be "
            "trained or selected on it. Use another --seed (splits use seeds seed..seed+runs-1) or "
            "--split published.")


def score_test(metric: str, scores, labels: np.ndarray, test_mask: np.ndarray) -> float:
    """The ONLY place test labels are used: after selection, on the chosen scores."""
    return float(evaluate(metric, jnp.asarray(scores), jnp.asarray(labels), jnp.asarray(test_mask)))


def get_splits(ds: Dataset, split: str, runs: int, seed: int):
    if split == "published":
        if ds.splits is None:
            raise ValueError(f"{ds.name} has no published splits")
        return ds.splits
    return random_splits(ds.num_nodes, split, num_splits=runs, seed=seed)


def run(dataset: str | Dataset, split: str = "medium", methods: Iterable[str] = ("mlp", "clp"),
        runs: int = 10, out: str | Path = "results/runs", *, seed: int = 0, epochs: int = 500,
        progress: bool = True, argv: Sequence[str] | None = None, data_root=None) -> list[dict]:
    """Runs ``methods`` on ``runs`` splits of one dataset; appends records to ``out/results.jsonl``.

    Args:
        dataset: a dataset name (see ``jaxclp.datasets.available()``) or a loaded Dataset.
        split: "sparse", "medium", "dense" or "published".
        methods: names from :data:`jaxclp.experiments.methods.METHODS`.
        runs: number of random splits (seeds ``seed + i``); published splits use all of theirs up to runs.
        out: output directory.
        seed: base seed (splits and model keys).
        epochs: MLP/LINK epochs (paper: 500).
        progress: show a progress bar.

    Returns:
        The new records.
    """
    methods = list(methods)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; choose from {sorted(METHODS)}")
    ds = dataset if isinstance(dataset, Dataset) else load(dataset, root=data_root)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / RESULTS_FILE
    done = {(r["dataset"], r["split"], r["run"], r["method"]) for r in read_records(path)
            if r.get("type") == "result"}
    sp = get_splits(ds, split, runs, seed)
    nruns = min(runs, sp.train.shape[0])
    todo = [i for i in range(nruns) if any((ds.name, split, i, m) not in done for m in methods)]
    if not todo:
        return []
    check_splits(np.asarray(ds.labels), np.asarray(sp.train), np.asarray(sp.val), todo, ds.name, split)
    append_record(path, header_record(argv) | {"dataset": ds.name, "split": split})
    feats, feat_kind = node_features(ds)
    x = jnp.asarray(feats)
    y = np.asarray(ds.labels)
    k = int(ds.num_classes)
    cfg = TrainConfig(epochs=epochs)
    keys = jax.random.split(jax.random.key(seed), nruns)
    tr, va, te = (np.asarray(sp.train), np.asarray(sp.val), np.asarray(sp.test))
    y_vis = np.stack([visible_labels(y, tr[i], va[i]) for i in todo])  # (S, n), test labels removed
    priors, mlp_seconds = (mlp_priors(keys, todo, x, y_vis, tr, va, k, cfg) if NEEDS_PRIOR & set(methods)
                           else ({}, 0.0))
    records = []
    bar = _progress(todo, progress, f"{ds.name}/{split}")
    for j, i in enumerate(bar):
        ctx = split_context(ds, x, y_vis[j], tr[i], va[i], keys[i], {d: priors[d][j] for d in priors})
        depth = ctx.mlp_depth
        for m in methods:
            if (ds.name, split, i, m) in done:
                continue
            t0 = time.perf_counter()
            cands = METHODS[m](ctx)
            cfg_m, val = select(cands, y_vis[j], va[i], ds.metric)
            test = score_test(ds.metric, cands[cfg_m], y, te[i])
            seconds = time.perf_counter() - t0 + (mlp_seconds if m in NEEDS_PRIOR else 0.0)
            rec = {"type": "result", "dataset": ds.name, "split": split, "run": i,
                   "seed": None if sp.seeds is None else sp.seeds[i], "method": m, "metric": ds.metric,
                   "val": val, "test": test, "params": _params(cfg_m, m, depth), "seconds": seconds,
                   "num_candidates": len(cands), "features": feat_kind}
            append_record(path, rec)
            records.append(rec)
    return records


def mlp_priors(keys, todo, x, y_vis, train, val, num_classes: int, cfg: TrainConfig) -> tuple[dict, float]:
    """MLP priors of every depth in :data:`MLP_DEPTHS`, each fit vmapped over the splits ``todo``.

    Args:
        keys: (nruns,) PRNG keys (one per split).
        todo: split indices to fit.
        x: (n, d) features.
        y_vis: (len(todo), n) labels with test labels removed.
        train, val: (nruns, n) bool masks.

    Returns:
        ``({depth: (len(todo), n, K) softmax}, seconds per split)``.
    """
    t0 = time.perf_counter()
    priors = {}
    for d in MLP_DEPTHS:
        res = fit_mlp_splits(keys[np.asarray(todo)], x, jnp.asarray(y_vis), jnp.asarray(train[todo]),
                             jnp.asarray(val[todo]), num_classes=num_classes, hidden=(64,) * d, cfg=cfg)
        priors[d] = jax.block_until_ready(res.prior)
    return priors, (time.perf_counter() - t0) / len(todo)


def split_context(ds: Dataset, x, y_vis, train, val, key, priors: dict) -> Context:
    """The :class:`Context` of one split, with the MLP depth chosen on validation (1 without priors)."""
    depth = select(priors, y_vis, val, ds.metric)[0] if priors else 1
    return Context(graph=ds.graph, features=x, labels=jnp.asarray(y_vis), train=jnp.asarray(train),
                   val=jnp.asarray(val), num_classes=int(ds.num_classes), metric=ds.metric, key=key,
                   priors=priors, mlp_depth=depth)


def _params(cfg, method, depth) -> dict:
    p = {"mlp_depth": cfg[1]} if method == "mlp" else {}
    if method != "mlp" and method in NEEDS_PRIOR:
        p["mlp_depth"] = depth
    items = cfg if method != "mlp" else ()
    for a, b in zip(items[0::2], items[1::2]):
        p[a] = b
    return p


def _progress(items, enabled: bool, desc: str):
    if not enabled:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, leave=False)
