"""The Shchur et al. (2018) ``.npz`` CSR format (``shchur/gnn-benchmark``): Coauthor CS / Physics, Amazon, ...

Keys: the CSR parts of the adjacency ``adj_data``, ``adj_indices``, ``adj_indptr``, ``adj_shape``; of the node
attributes ``attr_data``, ``attr_indices``, ``attr_indptr``, ``attr_shape`` (or a dense ``attr_matrix``);
``labels`` (n,) int. The files also hold ``node_names``, ``attr_names`` and ``class_names``; some of those are
object arrays that need pickle. Only the numeric arrays are read, with ``numpy.load(allow_pickle=False)``:
nothing is ever unpickled, and a file whose needed arrays need pickle is refused.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from jaxclp.datasets._base import RawData, check_unlabelled
from jaxclp.datasets._text import basename

__all__ = ["read_shchur_npz", "ADJ_KEYS", "ATTR_KEYS"]

ADJ_KEYS = ("adj_data", "adj_indices", "adj_indptr", "adj_shape")
ATTR_KEYS = ("attr_data", "attr_indices", "attr_indptr", "attr_shape")


def _get(z, key: str, where: str) -> np.ndarray:
    try:
        a = z[key]
    except ValueError as err:  # object array: numpy refuses it with allow_pickle=False
        raise ValueError(f"{where}: array {key!r} needs pickle to load ({err}); refusing to unpickle it. "
                         "Store it as a numeric array.") from None
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
        raise ValueError(f"{where}: array {key!r} must be numeric; got dtype {a.dtype}")
    return a


def _csr(z, prefix: str, where: str) -> sp.csr_matrix:
    data, indices, indptr, shape = (_get(z, f"{prefix}_{k}", where) for k in ("data", "indices", "indptr",
                                                                                "shape"))
    shape = tuple(int(s) for s in np.asarray(shape).reshape(-1))
    if len(shape) != 2:
        raise ValueError(f"{where}: {prefix}_shape must hold 2 numbers; got {shape}")
    try:
        m = sp.csr_matrix((data, indices, indptr), shape=shape)
        m.check_format(full_check=True)
    except ValueError as err:
        raise ValueError(f"{where}: inconsistent CSR arrays {prefix}_* ({err})") from None
    return m


def read_shchur_npz(path) -> RawData:
    """Reads a Shchur-format ``.npz`` (e.g. ``ms_academic_cs.npz``, ``ms_academic_phy.npz``).

    Args:
        path: file path.

    Returns:
        :class:`RawData`: ``edge_index`` (2, nnz) from the stored adjacency entries (Coauthor: symmetric, both
        directions stored, no self-loops), ``features`` (n, d) float32 CSR (bag-of-words counts) or None when
        the file has no attributes, ``labels`` (n,) 0-based. Node index = row.

    Raises:
        ValueError: missing keys (message lists them and the keys present), arrays that need pickle,
            inconsistent shapes, negative labels other than -1 (unlabelled, with a warning), non-integer labels.
    """
    where = basename(path)
    with np.load(path, allow_pickle=False) as z:
        missing = [k for k in ADJ_KEYS + ("labels",) if k not in z.files]
        if missing:
            raise ValueError(f"{where}: not a Shchur-format npz, missing keys {missing} (has {z.files})")
        adj = _csr(z, "adj", where)
        labels = _get(z, "labels", where).reshape(-1)
        feats = None
        if all(k in z.files for k in ATTR_KEYS):
            feats = _csr(z, "attr", where).astype(np.float32)
        elif "attr_matrix" in z.files:
            feats = np.asarray(_get(z, "attr_matrix", where), dtype=np.float32)
    n = adj.shape[0]
    if adj.shape != (n, n):
        raise ValueError(f"{where}: adjacency must be square; got shape {adj.shape}")
    if labels.shape[0] != n:
        raise ValueError(f"{where}: labels has {labels.shape[0]} entries but the adjacency has {n} nodes")
    if feats is not None and feats.shape[0] != n:
        raise ValueError(f"{where}: attributes have {feats.shape[0]} rows but the adjacency has {n} nodes")
    if not np.issubdtype(labels.dtype, np.integer):
        if not np.all(np.mod(labels, 1) == 0):
            raise ValueError(f"{where}: labels must be integers")
    labels = labels.astype(np.int64)
    check_unlabelled(labels, where)
    coo = adj.tocoo()
    edge_index = np.stack([coo.row, coo.col]).astype(np.int64)
    return RawData(edge_index=edge_index, num_nodes=n, labels=labels.astype(np.int32),
                   num_classes=int(labels.max()) + 1 if labels.size else 0, features=feats)
