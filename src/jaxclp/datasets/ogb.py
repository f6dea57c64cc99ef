"""OGB node-property-prediction folders (Hu et al., NeurIPS 2020, snap-stanford/ogb), read as published.

An unpacked OGB download (``arxiv.zip`` -> ``arxiv/``; the same files sit under ``dataset/ogbn_arxiv/`` once the
``ogb`` package has fetched them) is a folder with

* ``raw/edge.csv.gz``: one edge ``u,v`` per line, node indices 0..n-1, no header (an undirected graph lists each
  pair once; a directed one, e.g. ogbn-arxiv's citations, lists ``u -> v``);
* ``raw/num-node-list.csv.gz``: the number of nodes n (one line);
* ``raw/node-label.csv.gz``: one label per line, in node order (``nan``: no label, as in ogbn-papers100M);
* ``raw/node-feat.csv.gz`` (optional): one row of d numbers per node;
* ``split/<name>/{train,valid,test}.csv.gz``: node indices, one per line -> the published split (one).

or, written by ``ogb.io.DatasetSaver`` (ogbn-papers100M), ``raw/data.npz`` (``edge_index`` (2, m),
``num_nodes_list``, optional ``node_feat``) with ``raw/node-label.npz`` (``node_label``, NaN = unlabelled); its
splits as above. Read with ``numpy.load(allow_pickle=False)``: a split stored only as ``split_dict.pt`` (a torch
pickle) is refused, never unpickled. Multi-task labels (ogbn-proteins: 112 binary columns) and heterogeneous
folders (ogbn-mag: ``raw/relations/``) are not single-label node classification and are refused.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np

from jaxclp.datasets._base import RawData, check_unlabelled, integral
from jaxclp.datasets._text import parse_table, read_text_bytes

__all__ = ["is_ogb_folder", "ogb_root", "read_ogb_folder", "SPLIT_FILES"]

SPLIT_FILES = ("train", "valid", "test")
"""The split files of ``split/<name>/`` (``<part>.csv.gz``), in the order train, validation, test."""


def ogb_root(path) -> Path | None:
    """The OGB dataset folder of ``path`` (the folder itself or its ``raw/``), or None when it is not one."""
    p = Path(path)
    if not p.is_dir():
        return None
    for root in (p, p.parent):
        raw = root / "raw"
        if raw.is_dir() and (p == root or p == raw) and any(
                (raw / f).is_file() for f in ("edge.csv.gz", "edge.csv", "data.npz")):
            return root
        if (raw / "relations").is_dir() and p in (root, raw):
            raise ValueError(f"{p}: a heterogeneous OGB folder (raw/relations/, e.g. ogbn-mag): jaxclp reads "
                             "graphs with one node type")
    return None


def is_ogb_folder(path) -> bool:
    """True when ``path`` is an OGB node-property folder (or its ``raw/``)."""
    return ogb_root(path) is not None


def _file(raw: Path, stem: str) -> Path | None:
    """``raw/<stem>.csv.gz`` (or an already decompressed ``<stem>.csv``), None where neither exists."""
    for name in (f"{stem}.csv.gz", f"{stem}.csv"):
        if (raw / name).is_file():
            return raw / name
    return None


def _table(path: Path, dtype, ncols: int | None = None) -> np.ndarray:
    """A headerless numeric table of ``path`` ((rows, ncols); ncols from the first line when None)."""
    data = read_text_bytes(path)
    if ncols is None:
        first = data.lstrip().split(b"\n", 1)[0]
        ncols = len(first.replace(b",", b" ").split())
    return parse_table(data, max(ncols, 1), dtype=dtype, where=str(path))


def _labels(raw: Path, n: int | None) -> np.ndarray:
    """(n,) int64 labels, -1 where the file says nan."""
    npz = raw / "node-label.npz"
    if npz.is_file():
        with np.load(npz, allow_pickle=False) as z:
            if "node_label" not in z.files:
                raise ValueError(f"{npz}: expected an array 'node_label'; has {z.files}")
            y = np.asarray(z["node_label"], dtype=np.float64)
        where = npz
    else:
        where = _file(raw, "node-label")
        if where is None:
            raise ValueError(f"{raw}: no node-label.csv.gz (or node-label.npz): an OGB node-property folder holds "
                             "its labels there")
        y = _table(where, np.float64)
    y = y.reshape(y.shape[0], -1) if y.ndim > 1 else y.reshape(-1, 1)
    if y.shape[1] != 1:
        raise ValueError(f"{where}: {y.shape[1]} label columns (multi-task labels, e.g. ogbn-proteins' 112 binary "
                         "tasks): jaxclp classifies each node into one class")
    y = y[:, 0]
    if n is not None and y.shape[0] != n:
        raise ValueError(f"{where}: {y.shape[0]} labels but the graph has {n} nodes")
    ints, _, bad = integral(y)
    if bad.any():
        rows = np.flatnonzero(bad)
        raise ValueError(f"{where}: labels must be integers; rows {(rows[:5] + 1).tolist()} hold "
                         f"{y[rows[:5]].tolist()}")
    return ints


def _split(root: Path, n: int, labels: np.ndarray):
    """The published split (``split/<name>/``) as ``(train, val, test)`` of (1, n) bool, or None."""
    folder = root / "split"
    names = sorted(d.name for d in folder.iterdir() if d.is_dir()) if folder.is_dir() else []
    if not names:
        return None
    if len(names) > 1:
        warnings.warn(f"{folder}: several split schemes {names}; none is used as the published split (pass a copy "
                      "of the folder with one of them under split/)", UserWarning, stacklevel=4)
        return None
    where = folder / names[0]
    masks = []
    for part in SPLIT_FILES:
        f = _file(where, part)
        if f is None:
            if (where / "split_dict.pt").is_file():
                raise ValueError(f"{where}: the split is stored only as split_dict.pt, a torch pickle, which jaxclp "
                                 "never unpickles; write train/valid/test.csv.gz (node indices, one per line)")
            raise ValueError(f"{where}: missing {part}.csv.gz (node indices, one per line)")
        idx = _table(f, np.int64, 1).reshape(-1)
        bad = np.flatnonzero((idx < 0) | (idx >= n))
        if bad.size:
            raise ValueError(f"{f}: node indices outside [0, {n}) on line(s) {(bad[:5] + 1).tolist()}")
        m = np.zeros(n, bool)
        m[idx] = True
        unl = np.flatnonzero(m & (labels < 0))
        if unl.size:
            raise ValueError(f"{f}: {unl.size} node(s) without a label (nan), e.g. {unl[:5].tolist()}")
        masks.append(m)
    for (a, ma), (b, mb) in ((("train", masks[0]), ("valid", masks[1])), (("train", masks[0]), ("test", masks[2])),
                             (("valid", masks[1]), ("test", masks[2]))):
        both = np.flatnonzero(ma & mb)
        if both.size:
            raise ValueError(f"{where}: {both.size} node(s) are in both {a} and {b}, e.g. {both[:5].tolist()}")
    return tuple(m[None, :] for m in masks)


def read_ogb_folder(path) -> RawData:
    """Reads an OGB node-property folder (see the module docstring).

    Args:
        path: the dataset folder (holding ``raw/`` and ``split/``) or its ``raw/``.

    Returns:
        :class:`RawData`: edges as listed (the graph options symmetrize them by default), labels (-1 where nan),
        features (None without ``node-feat``), the published split (one) where ``split/`` holds one scheme.

    Raises:
        ValueError: not an OGB folder, a heterogeneous one, multi-task or non-integer labels, node indices out of
            range, row counts that disagree, a pickled split (each naming the file).
    """
    root = ogb_root(path)
    if root is None:
        raise ValueError(f"{path}: not an OGB node-property folder (expected raw/edge.csv.gz or raw/data.npz)")
    raw = root / "raw"
    feats = None
    if (raw / "data.npz").is_file() and _file(raw, "edge") is None:
        with np.load(raw / "data.npz", allow_pickle=False) as z:
            if "edge_index" not in z.files:
                raise ValueError(f"{raw / 'data.npz'}: expected 'edge_index'; has {z.files}")
            edge_index = np.asarray(z["edge_index"], dtype=np.int64)
            n = int(np.asarray(z["num_nodes_list"]).reshape(-1)[0]) if "num_nodes_list" in z.files else None
            if "node_feat" in z.files:
                feats = np.asarray(z["node_feat"], dtype=np.float32)
        if edge_index.ndim != 2 or edge_index.shape[0] != 2:
            raise ValueError(f"{raw / 'data.npz'}: edge_index must have shape (2, m); got {edge_index.shape}")
    else:
        ef = _file(raw, "edge")
        edge_index = _table(ef, np.int64, 2).T
        nf = _file(raw, "num-node-list")
        n = int(_table(nf, np.int64, 1).reshape(-1)[0]) if nf is not None else None
        ff = _file(raw, "node-feat")
        if ff is not None:
            feats = _table(ff, np.float32)
    labels = _labels(raw, n)
    n = labels.shape[0] if n is None else n
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
        bad = np.flatnonzero(((edge_index < 0) | (edge_index >= n)).any(axis=0))
        raise ValueError(f"{raw}: edges name nodes outside [0, {n}), e.g. edge row(s) {(bad[:5] + 1).tolist()}")
    if feats is not None:
        feats = feats.reshape(feats.shape[0], -1)
        if feats.shape[0] != n:
            raise ValueError(f"{raw}: node features have {feats.shape[0]} rows but the graph has {n} nodes")
        bad = np.flatnonzero(~np.isfinite(feats).all(axis=1))
        if bad.size:
            raise ValueError(f"{raw}: node features contain NaN or inf in {bad.size} row(s), e.g. nodes "
                             f"{bad[:5].tolist()}")
    check_unlabelled(labels, os.fspath(raw))
    known = labels[labels >= 0]
    return RawData(edge_index=np.ascontiguousarray(edge_index), num_nodes=n, labels=labels.astype(np.int32),
                   num_classes=int(known.max()) + 1, features=feats, splits=_split(root, n, labels),
                   info={"ogb_root": str(root)})
