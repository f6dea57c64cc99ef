"""SDCN text format (Bo et al., WWW 2020) for ACM and DBLP: ``<X>_graph.txt`` + ``<X>_label.txt`` (+ features).

Node index = line number of the label file (0-based ids, as the graph file uses). The SDCN feature files
(``ACM.txt``, ``DBLP.txt``) are not available here; equivalent published copies are read instead:

* a ``.zip`` holding a dense whitespace matrix ``*.feature`` (AM-GCN ``acm.zip`` -> ``acm/acm.feature``);
* a ``.mat`` with key ``fea`` / ``features`` (AGCN ``DBLP.mat``; its ``gnd`` = label + 1 is checked);
* a dense whitespace ``.txt`` matrix (the SDCN original).
"""

from __future__ import annotations

import zipfile

import numpy as np

from jaxclp.datasets._base import RawData
from jaxclp.datasets._text import basename, parse_table, read_bytes
from jaxclp.datasets.tadw import read_mat_features

__all__ = ["read_sdcn", "read_dense_matrix_text"]


def read_dense_matrix_text(data: bytes, where: str = "file") -> np.ndarray:
    """Parses a dense whitespace-separated matrix (one row per line) into float32 (n, d)."""
    first = data.lstrip().split(b"\n", 1)[0].split()
    return parse_table(data, len(first), dtype=np.float32, where=where)


def _labels_from_zip(z: zipfile.ZipFile):
    names = [nm for nm in z.namelist() if nm.endswith(".label")]
    if len(names) == 1:
        return parse_table(z.read(names[0]), 1, where=names[0]).reshape(-1)
    return None


def read_sdcn(graph_path, label_path, features_path=None) -> RawData:
    """Reads an SDCN-format dataset.

    Args:
        graph_path: space-separated ``u v`` per line, 0-based, no header (both directions listed).
        label_path: one integer label per line; line i = node i. n = number of lines (some nodes may have no
            edge, e.g. DBLP nodes 0 and 4056).
        features_path: optional ``.zip`` / ``.mat`` / ``.txt`` feature file (see module docstring).

    Returns:
        :class:`RawData`.

    Raises:
        ValueError: parse errors, or a feature file whose own labels disagree with ``label_path``.
    """
    labels = parse_table(read_bytes(label_path), 1, where=basename(label_path)).reshape(-1)
    n = labels.shape[0]
    edge_index = parse_table(read_bytes(graph_path), 2, where=basename(graph_path)).T
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
        raise ValueError(f"{basename(graph_path)}: node ids outside [0, {n}) (n from {basename(label_path)})")
    feats = None
    if features_path is not None:
        fp = str(features_path)
        other_labels = None
        if fp.endswith(".zip"):
            with zipfile.ZipFile(fp) as z:
                names = [nm for nm in z.namelist() if nm.endswith(".feature")]
                if len(names) != 1:
                    raise ValueError(f"{basename(fp)}: expected one '*.feature' member, found {names}")
                feats = read_dense_matrix_text(z.read(names[0]), f"{basename(fp)}:{names[0]}")
                other_labels = _labels_from_zip(z)
        elif fp.endswith(".mat"):
            feats, mat = read_mat_features(fp, keys=("fea", "features", "feature", "X"))
            if "gnd" in mat:
                other_labels = np.asarray(mat["gnd"]).reshape(-1).astype(np.int64)
                if other_labels.min() == labels.min() + 1:
                    other_labels = other_labels - 1  # gnd is 1-based
        else:
            feats = read_dense_matrix_text(read_bytes(fp), basename(fp))
        if feats.shape[0] != n:
            raise ValueError(f"{basename(fp)}: {feats.shape[0]} feature rows but {n} labels")
        if other_labels is not None and not np.array_equal(other_labels, labels):
            raise ValueError(f"{basename(fp)}: its labels disagree with {basename(label_path)}; "
                             "feature rows are not aligned with the nodes")
    if labels.min() < 0:
        raise ValueError(f"{basename(label_path)}: negative labels")
    return RawData(edge_index=np.ascontiguousarray(edge_index), num_nodes=n, labels=labels.astype(np.int32),
                   num_classes=int(labels.max()) + 1, features=feats)
