"""Processed cache: a compact ``.npz`` of the parsed :class:`RawData`, so later loads skip the text parsing.

Stored at ``<cache dir>/<name>-<key>.npz`` (:func:`jaxclp.datasets.fetch.processed_dir`: ``$JAXCLP_CACHE`` or
``<user cache dir>/_processed``, never next to the raw files unless asked: the data root may be a shared,
read-only copy). The key hashes the cache format version, the dataset name, the builder options, the identity
of every source file (registry sha256, or size and mtime for a file whose hash is unknown; ``absent`` for a
missing optional file) and the data root's resolved path: entries are per data root, as when they lived inside
it (a root without its files still hits only its own entries). A cache hit never reads the raw files.
Graph options (direction, self-loops, deduplication) are applied after the cache, so they share one entry.

Content check: every entry records the entry it was written as (``<name>-<key>``) and the identity of its
source files (:func:`source_identity`: the sha256 of each, as in the key). :func:`load_raw` refuses an entry
whose recorded name/key is not the file's own (e.g. a valid entry of another dataset copied or renamed under
this key) or whose sources differ from ``expected_sources``; :func:`jaxclp.datasets.load` then warns and
rebuilds it from the raw files.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from jaxclp.datasets._base import RawData
from jaxclp.datasets.registry import DatasetSpec

__all__ = ["CACHE_VERSION", "atomic_savez", "cache_key", "cache_path", "save_raw", "load_raw", "source_identity"]

CACHE_VERSION = 2  # 2: entries record their own name/key and source sha256s (content check)


def source_identity(spec: DatasetSpec, root: Path) -> list | None:
    """``[(role, relative path, sha256 | size/mtime | "absent"), ...]`` of a dataset's source files, or None
    if a file of unknown hash is missing."""
    ident = []
    for role in sorted(spec.files):
        fs = spec.files[role]
        p = Path(root) / fs.path
        if fs.optional and not p.exists():
            ident.append((role, fs.path, "absent"))
        elif fs.sha256 is not None:
            ident.append((role, fs.path, fs.sha256))
        elif p.exists():
            st = p.stat()
            ident.append((role, fs.path, f"size={st.st_size};mtime={st.st_mtime_ns}"))
        else:
            return None
    return ident


def cache_key(spec: DatasetSpec, root: Path, options: dict) -> str | None:
    """Cache key of a dataset, or None if a file of unknown hash is missing (no key can be formed)."""
    ident = source_identity(spec, root)
    if ident is None:
        return None
    blob = json.dumps({"v": CACHE_VERSION, "name": spec.name, "root": str(Path(root).resolve()), "files": ident,
                       "options": {k: options[k] for k in sorted(options)}}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def cache_path(cache_dir: Path, name: str, key: str) -> Path:
    """``<cache_dir>/<name>-<key>.npz``."""
    return Path(cache_dir) / f"{name}-{key}.npz"


def _jsonable(x):
    return json.loads(json.dumps(x, default=str))


def save_raw(path: Path, raw: RawData, sources: list | None = None) -> None:
    """Writes ``raw`` atomically (temporary file + rename), with the entry's own name (``path``'s stem) and
    ``sources`` (:func:`source_identity`) recorded for :func:`load_raw`'s content check."""
    path = Path(path)
    arrays = {
        "edge_index": raw.edge_index.astype(np.int32 if raw.num_nodes < 2**31 else np.int64),
        "labels": np.asarray(raw.labels, np.int32),
        "meta": np.frombuffer(json.dumps({"num_nodes": int(raw.num_nodes), "num_classes": int(raw.num_classes),
                                          "info": raw.info, "version": CACHE_VERSION, "entry": path.stem,
                                          "sources": _jsonable(sources)}).encode(), np.uint8),
    }
    f = raw.features
    if f is not None:
        if not sp.issparse(f):
            f = np.asarray(f, np.float32)
            if f.size and np.count_nonzero(f) < 0.25 * f.size:
                f = sp.csr_matrix(f)
        if sp.issparse(f):
            f = sp.csr_matrix(f, dtype=np.float32)
            arrays.update(feat_data=f.data, feat_indices=f.indices, feat_indptr=f.indptr,
                          feat_shape=np.asarray(f.shape, np.int64))
        else:
            arrays["features"] = f
    if raw.splits is not None:
        arrays.update(split_train=raw.splits[0], split_val=raw.splits[1], split_test=raw.splits[2])
    if raw.node_ids is not None:
        arrays["node_ids"] = np.asarray(raw.node_ids)
    atomic_savez(path, **arrays)


def atomic_savez(path: Path, **arrays) -> None:
    """``np.savez(path, **arrays)`` through a temporary file in the same folder and a rename, so a reader never
    sees a partial file (folders created as needed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            np.savez(out, **arrays)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_raw(path: Path, expected_sources: list | None = None) -> RawData:
    """Reads a cache entry written by :func:`save_raw`.

    Raises:
        ValueError: a damaged entry, another cache version, an entry written under another name/key (e.g. a
            valid entry of another dataset placed here), or recorded sources that differ from
            ``expected_sources`` (when given). The caller rebuilds the entry.
    """
    path = Path(path)
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(bytes(z["meta"]).decode())
        if meta.get("version") != CACHE_VERSION:
            raise ValueError(f"{path}: cache version {meta.get('version')} != {CACHE_VERSION}")
        if meta.get("entry") != path.stem:
            raise ValueError(f"{path}: the entry was written as {meta.get('entry')!r}, not {path.stem!r} "
                             "(another dataset's or another key's data): not served")
        if expected_sources is not None and meta.get("sources") != _jsonable(expected_sources):
            raise ValueError(f"{path}: recorded source files {meta.get('sources')} differ from "
                             f"{_jsonable(expected_sources)}: not served")
        feats = None
        if "feat_data" in z.files:
            feats = sp.csr_matrix((z["feat_data"], z["feat_indices"], z["feat_indptr"]),
                                  shape=tuple(int(s) for s in z["feat_shape"]))
        elif "features" in z.files:
            feats = z["features"]
        splits = None
        if "split_train" in z.files:
            splits = (z["split_train"], z["split_val"], z["split_test"])
        return RawData(edge_index=z["edge_index"].astype(np.int64), num_nodes=meta["num_nodes"],
                       labels=z["labels"], num_classes=meta["num_classes"], features=feats, splits=splits,
                       node_ids=z["node_ids"] if "node_ids" in z.files else None, info=meta["info"])
