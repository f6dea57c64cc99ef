"""Geom-GCN text format (Pei et al., ICLR 2020): ``out1_graph_edges.txt``, ``out1_node_feature_label.txt`` and
the fixed split files ``<name>_split_0.6_0.2_<i>.npz``.

Used for Texas, Wisconsin, Cornell, Actor (``film``), and (edges + splits only) Chameleon and Squirrel, whose
feature files are replaced by the heterophilous-graphs npz (see :mod:`jaxclp.datasets.heterophilous`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp

from jaxclp.datasets._base import RawData
from jaxclp.datasets._text import IdIndex, basename, parse_table, read_bytes, split_header

__all__ = ["read_geom_gcn_edges", "read_geom_gcn_nodes", "read_geom_gcn_splits", "read_geom_gcn"]


def read_geom_gcn_edges(path) -> np.ndarray:
    """Reads ``out1_graph_edges.txt``.

    Format: TAB-separated, 1 header line (``node_id<TAB>node_id``), then ``source<TAB>target`` per line.

    Args:
        path: file path.

    Returns:
        (2, m) int64 raw node ids, one column per line (direction, duplicates and self-loops as listed).
    """
    table = parse_table(read_bytes(path), 2, header_lines=1, where=basename(path))
    return np.ascontiguousarray(table.T)


def read_geom_gcn_nodes(path, feature_format: str = "auto", num_features: int | None = None):
    """Reads ``out1_node_feature_label.txt``.

    Format: TAB-separated, 1 header line, then ``node_id<TAB>features<TAB>label``. ``features`` is either a
    dense comma-separated 0/1 vector (WebKB) or a comma-separated list of active feature indices (``film``,
    whose header says ``feature(feature_amount:931)``). Rows may be in any order.

    Args:
        path: file path.
        feature_format: ``"dense"``, ``"indices"`` or ``"auto"`` (indices when the header mentions
            ``feature_amount`` or the rows have different lengths).
        num_features: width for the ``"indices"`` format (default max index + 1).

    Returns:
        ``(node_ids, features, labels)``: (n,) int64 ids in file row order, (n, d) float32 dense array or
        CSR matrix (rows in file order), (n,) int64 labels.
    """
    where = basename(path)
    data = read_bytes(path)
    (header,), body = split_header(data, 1, where)
    lines = [ln.rstrip(b"\r") for ln in body.split(b"\n") if ln.strip()]
    if not lines:
        raise ValueError(f"{where}: no node lines")
    if feature_format not in ("auto", "dense", "indices"):
        raise ValueError(f"feature_format must be 'auto', 'dense' or 'indices'; got {feature_format!r}")
    if feature_format == "auto":
        lens = {ln.count(b",") for ln in lines[:50]}
        feature_format = "indices" if (b"feature_amount" in header or len(lens) > 1) else "dense"
    if feature_format == "dense":
        ncols = lines[0].count(b",") + 3  # id, d features, label
        table = parse_table(b"\n".join(lines), ncols, dtype=np.int64, where=where)
        return table[:, 0], table[:, 1:-1].astype(np.float32), table[:, -1]
    ids = np.empty(len(lines), dtype=np.int64)
    labels = np.empty(len(lines), dtype=np.int64)
    cols, rows = [], []
    for i, ln in enumerate(lines):
        parts = ln.split(b"\t")
        if len(parts) != 3:
            raise ValueError(f"{where}: line {i + 2} has {len(parts)} TAB-separated fields, expected 3")
        try:
            ids[i] = int(parts[0])
            labels[i] = int(parts[2])
            c = np.array(parts[1].split(b","), dtype=np.int64) if parts[1].strip() else np.zeros(0, np.int64)
        except ValueError as err:
            raise ValueError(f"{where}: line {i + 2}: {err}") from None
        cols.append(c)
        rows.append(np.full(c.shape[0], i, dtype=np.int64))
    col = np.concatenate(cols)
    row = np.concatenate(rows)
    if col.size and col.min() < 0:
        raise ValueError(f"{where}: negative feature index")
    d = int(num_features) if num_features is not None else (int(col.max()) + 1 if col.size else 0)
    if col.size and col.max() >= d:
        raise ValueError(f"{where}: feature index {int(col.max())} >= num_features={d}")
    feats = sp.csr_matrix((np.ones(col.size, np.float32), (row, col)), shape=(len(lines), d))
    feats.sum_duplicates()
    feats.data[:] = 1.0
    return ids, feats, labels


def read_geom_gcn_splits(paths: Sequence, num_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reads the fixed split files ``<name>_split_0.6_0.2_<i>.npz`` (keys train_mask, val_mask, test_mask).

    Args:
        paths: split files in split order.
        num_nodes: n (every mask must have this length).

    Returns:
        ``(train, val, test)`` bool arrays of shape (len(paths), n).
    """
    out = {k: [] for k in ("train_mask", "val_mask", "test_mask")}
    for p in paths:
        with np.load(p, allow_pickle=False) as z:
            for k in out:
                if k not in z.files:
                    raise ValueError(f"{basename(p)}: missing key {k!r} (has {z.files})")
                m = np.asarray(z[k]).reshape(-1)
                if m.shape[0] != num_nodes:
                    raise ValueError(f"{basename(p)}: {k} has length {m.shape[0]}, expected {num_nodes}")
                out[k].append(m.astype(bool))
    return tuple(np.stack(out[k]) for k in ("train_mask", "val_mask", "test_mask"))


def read_geom_gcn(edges_path, nodes_path=None, split_paths: Sequence = (), *, node_data=None,
                  feature_format: str = "auto", num_features: int | None = None) -> RawData:
    """Reads a Geom-GCN dataset.

    Node index = node id (the ids are 0..n-1; rows of the node file may be in any order, e.g. ``film``).
    Split masks are indexed by node id, as in Geom-GCN.

    Args:
        edges_path: ``out1_graph_edges.txt``.
        nodes_path: ``out1_node_feature_label.txt`` (or None when ``node_data`` is given).
        split_paths: split ``.npz`` files.
        node_data: optional ``(features, labels)`` already indexed by node id (used for chameleon/squirrel,
            whose node file is replaced by the heterophilous-graphs npz).
        feature_format, num_features: see :func:`read_geom_gcn_nodes`.

    Returns:
        :class:`RawData`.
    """
    if node_data is not None:
        feats, labels = node_data
        idx = IdIndex(np.arange(labels.shape[0]), "node data")
        node_ids = None
    else:
        if nodes_path is None:
            raise ValueError("read_geom_gcn needs nodes_path or node_data")
        row_ids, row_feats, row_labels = read_geom_gcn_nodes(nodes_path, feature_format, num_features)
        idx, row_to_index = IdIndex.from_rows(row_ids, basename(nodes_path))
        order = np.empty_like(row_to_index)
        order[row_to_index] = np.arange(row_to_index.shape[0])  # order[i] = file row of node i
        feats = row_feats[order]
        labels = row_labels[order]
        node_ids = None if idx.is_identity else idx.ids
    n = len(idx)
    raw_edges = read_geom_gcn_edges(edges_path)
    edge_index = idx.index(raw_edges, f"edges of {basename(edges_path)}").reshape(2, -1)
    labels = np.asarray(labels).astype(np.int64)
    if labels.size and labels.min() < 0:
        raise ValueError("negative labels in Geom-GCN node file")
    splits = read_geom_gcn_splits(split_paths, n) if len(split_paths) else None
    return RawData(edge_index=edge_index, num_nodes=n, labels=labels.astype(np.int32),
                   num_classes=int(labels.max()) + 1, features=feats, splits=splits, node_ids=node_ids)
