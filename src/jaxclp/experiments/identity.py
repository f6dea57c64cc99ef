"""A run's identity: the configuration that keys its records, and the hashes of the data it ran on.

Every record carries ``config`` (:func:`run_config`), every option that can change a number (dataset, split kind,
base seed, the training settings incl. epochs, the feature kind, the metric, the identity of the data
(:func:`data_identity`: the registry's sha256 of every source file for a named dataset, a sha256 of the arrays,
:func:`dataset_sha256`, for a :class:`~jaxclp.datasets.Dataset` passed in), the jaxclp version and whether JAX runs
in float64), and ``config_hash`` (:func:`config_hash`), a short stable hash of it: a resumed run skips only the
keys of the same ``config_hash`` (:mod:`jaxclp.experiments.records`).

The number of runs is not part of the configuration: split ``i`` uses seed ``seed + i`` and its own PRNG key
whatever ``runs`` is, so ``--runs 10`` after ``--runs 2`` computes runs 2..9 only.
"""

from __future__ import annotations

import hashlib
import json
from typing import Sequence

import jax
import numpy as np

import jaxclp
from jaxclp.datasets import Dataset
from jaxclp.datasets.fetch import data_root as _data_root, sha256sum
from jaxclp.datasets.registry import REGISTRY, canonical_name
from jaxclp.train import TrainConfig
from jaxclp.experiments.records import _json_default


def config_hash(config: dict) -> str:
    """A short stable hash (12 hex digits of sha256) of a configuration dict (canonical JSON)."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=_json_default)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def run_config(ds: Dataset, split: str, seed: int, cfg: TrainConfig, feature_kind: str, data: dict,
               priors: Sequence[str] | None = None, time_limit: float | None = None,
               shape_buckets: bool = False) -> dict:
    """Every option of a run that can change a number (the runs count excepted: see the module docstring).

    ``priors``, ``time_limit`` and ``shape_buckets`` (models fitted on inputs padded to shape buckets: results
    the same computation up to rounding, :mod:`jaxclp.buckets`) enter only when given (True), so the records of a default run keep
    the configuration hash they had before these options existed."""
    config = {"dataset": ds.name, "split": split, "seed": int(seed), "train": dict(cfg._asdict()),
              "features": feature_kind, "metric": ds.metric, "data": data, "jaxclp": jaxclp.__version__,
              "x64": bool(jax.config.jax_enable_x64)}
    if priors is not None:
        config["priors"] = list(priors)
    if time_limit is not None:
        config["time_limit"] = float(time_limit)
    if shape_buckets:
        config["shape_buckets"] = True
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
