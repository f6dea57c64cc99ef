"""struc2vec air-traffic networks (Ribeiro et al., KDD 2017): ``<name>.edgelist`` + ``labels-<name>.txt``.

USA-, Brazil- and Europe-Airports. There are no node features.

The node list is the label file: node index = id when the ids are 0..n-1 (Brazil, Europe), otherwise the row
of the label file (USA: raw ids 10005..16746, rows not sorted). Edge endpoints are mapped through this explicit
map. (The CLP authors' loader numbered nodes in order of first appearance in the edge list while keeping the
labels in file order, which misaligns labels and nodes; see the datasets README.)
"""

from __future__ import annotations

import numpy as np

from jaxclp.datasets._base import RawData
from jaxclp.datasets._text import IdIndex, basename, parse_table, read_bytes

__all__ = ["read_struc2vec_labels", "read_struc2vec"]


def _has_header(data: bytes) -> int:
    first = data.split(b"\n", 1)[0].split()
    try:
        [int(t) for t in first]
        return 0
    except ValueError:
        return 1


def read_struc2vec_labels(path) -> tuple[np.ndarray, np.ndarray]:
    """Reads ``labels-<name>.txt``: optional header ``node label``, then ``node_id label`` per line.

    Returns:
        ``(node_ids, labels)``: (n,) int64 each, in file row order.
    """
    data = read_bytes(path)
    table = parse_table(data, 2, header_lines=_has_header(data), where=basename(path))
    return table[:, 0], table[:, 1]


def read_struc2vec(edgelist_path, labels_path) -> RawData:
    """Reads a struc2vec airport dataset.

    Args:
        edgelist_path: ``<name>.edgelist``, whitespace-separated ``u v`` raw ids, no header.
        labels_path: ``labels-<name>.txt``.

    Returns:
        :class:`RawData` without features (``features=None``); ``node_ids`` holds the raw airport id of each
        index when the ids are not 0..n-1.
    """
    row_ids, row_labels = read_struc2vec_labels(labels_path)
    idx, row_to_index = IdIndex.from_rows(row_ids, basename(labels_path))
    labels = np.empty_like(row_labels)
    labels[row_to_index] = row_labels
    data = read_bytes(edgelist_path)
    raw = parse_table(data, 2, where=basename(edgelist_path)).T
    edge_index = idx.index(raw, f"edges of {basename(edgelist_path)}").reshape(2, -1)
    if labels.min() < 0:
        raise ValueError(f"{basename(labels_path)}: negative labels")
    return RawData(edge_index=edge_index, num_nodes=len(idx), labels=labels.astype(np.int32),
                   num_classes=int(labels.max()) + 1, features=None,
                   node_ids=None if idx.is_identity else idx.ids)
