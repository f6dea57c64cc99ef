"""TADW-style document network (Yang et al., IJCAI 2015): ``graph.txt`` + ``group.txt`` (+ features).

Used for Wiki. Features: the TADW ``tfidf.txt`` is not available here; the equivalent ``wiki.mat`` (GAGE
repository, key ``feature``: sparse (n, d) TF-IDF, rows by node id) is read instead. A ``.txt``/``.npy``
dense (n, d) matrix is also accepted.

Node index = node id of ``group.txt`` (ids 0..n-1). Raw labels are 1-based with gaps (12 and 14 never occur in
Wiki); they are encoded to 0..C-1 in sorted order (C = 17 for Wiki), like the paper's LabelEncoder.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from jaxclp.datasets._base import RawData, encode_labels
from jaxclp.datasets._text import IdIndex, basename, parse_table, read_bytes

__all__ = ["read_tadw", "read_mat_features"]


def read_mat_features(path, keys=("feature", "features", "fea", "X", "attrb")):
    """Reads a feature matrix from a MATLAB v5 ``.mat`` file (first key of ``keys`` present).

    Returns:
        ``(features, mat)``: (n, d) CSR matrix or float32 array, and the full loadmat dict.
    """
    import scipy.io as sio

    mat = sio.loadmat(path)
    for k in keys:
        if k in mat:
            x = mat[k]
            feats = sp.csr_matrix(x, dtype=np.float32) if sp.issparse(x) else np.asarray(x, dtype=np.float32)
            return feats, mat
    raise ValueError(f"{basename(path)}: no feature matrix under keys {list(keys)} "
                     f"(has {[k for k in mat if not k.startswith('__')]})")


def read_tadw(graph_path, group_path, features_path=None) -> RawData:
    """Reads a TADW-format dataset.

    Args:
        graph_path: ``graph.txt``, ``source<TAB>target`` per line, no header (directed; duplicates and loops
            as listed).
        group_path: ``group.txt``, ``node_id<TAB>label`` per line, no header.
        features_path: optional ``.mat`` (key ``feature``), ``.npy`` or whitespace text matrix with rows in
            node-id order.

    Returns:
        :class:`RawData`; ``info["label_values"]`` holds the raw label of each class code.
    """
    table = parse_table(read_bytes(group_path), 2, where=basename(group_path))
    idx, row_to_index = IdIndex.from_rows(table[:, 0], basename(group_path))
    raw_labels = np.empty_like(table[:, 1])
    raw_labels[row_to_index] = table[:, 1]
    labels, classes = encode_labels(raw_labels)
    n = len(idx)
    raw = parse_table(read_bytes(graph_path), 2, where=basename(graph_path)).T
    edge_index = idx.index(raw, f"edges of {basename(graph_path)}").reshape(2, -1)
    feats = None
    if features_path is not None:
        fp = str(features_path)
        if fp.endswith(".mat"):
            feats, mat = read_mat_features(fp)
            if "group" in mat and idx.is_identity:  # check the row order against group.txt
                g = sp.csr_matrix(mat["group"])
                if g.shape == (n, int(raw_labels.max())) and np.all(np.diff(g.indptr) == 1):
                    if not np.array_equal(g.indices + 1, raw_labels):
                        raise ValueError(f"{basename(fp)}: its 'group' matrix disagrees with "
                                         f"{basename(group_path)}; rows are not aligned")
        elif fp.endswith(".npy"):
            feats = np.load(fp, allow_pickle=False).astype(np.float32)
        else:
            data = read_bytes(fp)
            first = data.split(b"\n", 1)[0].split()
            feats = parse_table(data, len(first), dtype=np.float32, where=basename(fp))
        if feats.shape[0] != n:
            raise ValueError(f"{basename(fp)}: {feats.shape[0]} feature rows but {n} nodes")
    return RawData(edge_index=edge_index, num_nodes=n, labels=labels, num_classes=int(classes.shape[0]),
                   features=feats, node_ids=None if idx.is_identity else idx.ids,
                   info={"label_values": classes.tolist()})
