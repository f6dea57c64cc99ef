"""A PyTorch Geometric graph (``torch_geometric.data.Data``) as a jaxclp :class:`Dataset`, without importing torch.

PyG users hold their graphs as ``Data`` objects (``Planetoid``, ``WebKB``, ``WikipediaNetwork``,
``HeterophilousGraphDataset``, ...). :func:`from_pyg` reads the attributes PyG's node-classification datasets
use, by duck typing (any object with these attributes, each a torch tensor or an array):

* ``edge_index`` (2, m) int: edge ``s -> r`` in column ``(s, r)``, as PyG stores it (an undirected graph lists
  both directions);
* ``num_nodes`` (optional: else ``x``'s or ``y``'s rows);
* ``x`` (n, d) float features (optional; a torch sparse tensor is densified);
* ``y`` (n,) or (n, 1) int labels, ``-1`` (or NaN in a float ``y``) for an unlabelled node (multi-label (n, C)
  targets are refused);
* ``edge_weight`` (m,) (or a 1-D ``edge_attr``) nonnegative edge weights (optional);
* ``train_mask`` / ``val_mask`` / ``test_mask`` (n,) or (n, S) bool -> the published splits (PyG's WebKB,
  WikipediaNetwork and Actor hold 10 splits as (n, 10) columns; HeterophilousGraphDataset too).
"""

from __future__ import annotations

import numpy as np

from jaxclp.datasets._base import Dataset, RawData, build_dataset, check_unlabelled, integral

__all__ = ["from_pyg"]

_MASKS = ("train_mask", "val_mask", "test_mask")


def _array(value, what: str) -> np.ndarray:
    """A torch tensor (CPU or not, dense or sparse) or array-like as a numpy array."""
    if getattr(value, "is_sparse", False) or "sparse" in str(getattr(value, "layout", "")):
        value = value.to_dense()  # torch sparse COO / CSR
    elif hasattr(value, "toarray"):
        value = value.toarray()  # scipy.sparse
    if hasattr(value, "detach"):
        value = value.detach()
        value = value.cpu() if hasattr(value, "cpu") else value
        value = value.numpy()
    try:
        return np.asarray(value)
    except Exception as err:  # noqa: BLE001 - any object numpy cannot read
        raise ValueError(f"from_pyg: data.{what} could not be read as an array ({type(value).__name__}: {err})") \
            from None


def _get(data, name: str):
    value = getattr(data, name, None)
    if value is None and hasattr(data, "__getitem__") and not isinstance(data, (np.ndarray, list, tuple)):
        try:
            value = data[name]
        except (KeyError, TypeError, IndexError):
            value = None
    return value


def from_pyg(data, *, name: str = "pyg", directed: bool = False, metric: str = "accuracy") -> Dataset:
    """Converts a PyG ``Data`` object (or any object with its attributes, see the module docstring).

    Args:
        data: the graph.
        name: dataset name (records and summaries use it).
        directed: keep ``edge_index``'s direction (default: symmetrize, as :func:`load_file` does; PyG's
            undirected graphs already list both directions, so that changes nothing there).
        metric: ``"accuracy"`` or ``"roc_auc"`` (binary graphs with rare positives).

    Returns:
        :class:`Dataset`: self-loops dropped and repeated edges merged as for every file; ``splits`` = the masks.

    Raises:
        ValueError: a missing or malformed ``edge_index``, labels that are not integers or are multi-label, node
            indices out of range, masks of the wrong shape or holding unlabelled nodes, NaN/inf features or bad
            edge weights (each naming the attribute).
    """
    if metric not in ("accuracy", "roc_auc"):
        raise ValueError(f"metric must be 'accuracy' or 'roc_auc'; got {metric!r}")
    raw_ei = _get(data, "edge_index")
    if raw_ei is None:
        raise ValueError("from_pyg: data has no edge_index")
    ei = _array(raw_ei, "edge_index")
    if ei.ndim != 2 or ei.shape[0] != 2 or not (np.issubdtype(ei.dtype, np.integer) or ei.size == 0):
        raise ValueError(f"from_pyg: data.edge_index must be a (2, m) integer array; got {ei.dtype} {ei.shape}")
    x = _get(data, "x")
    x = None if x is None else _array(x, "x")
    y = _get(data, "y")
    if y is None:
        raise ValueError("from_pyg: data has no y (node labels)")
    y = _array(y, "y")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"from_pyg: data.y has shape {y.shape}: multi-label or multi-task targets; jaxclp "
                         "classifies each node into one class (pass y of shape (n,))")
    numeric = np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)
    ints, _, bad = integral(y) if numeric else (y, None, None)
    if not numeric or bad.any():
        raise ValueError(f"from_pyg: data.y must hold integer class ids (NaN: unlabelled); got {y.dtype}")
    y = ints  # NaN -> -1, as OGB's papers100M writes a missing label
    n = _get(data, "num_nodes")
    n = int(n) if n is not None else int(y.shape[0])
    if y.shape[0] != n:
        raise ValueError(f"from_pyg: data.y has {y.shape[0]} rows but num_nodes is {n}")
    if ei.size and (ei.min() < 0 or ei.max() >= n):
        bad = np.flatnonzero(((ei < 0) | (ei >= n)).any(axis=0))
        raise ValueError(f"from_pyg: data.edge_index names nodes outside [0, {n}) in columns {bad[:5].tolist()}")
    if x is not None:
        x = x.reshape(x.shape[0], -1).astype(np.float32)
        if x.shape[0] != n:
            raise ValueError(f"from_pyg: data.x has {x.shape[0]} rows but num_nodes is {n}")
        bad = np.flatnonzero(~np.isfinite(x).all(axis=1))
        if bad.size:
            raise ValueError(f"from_pyg: data.x holds NaN or inf in {bad.size} row(s), e.g. nodes {bad[:5].tolist()}")
    w = _get(data, "edge_weight")
    if w is None:
        attr = _get(data, "edge_attr")
        w = attr if attr is not None and _array(attr, "edge_attr").squeeze().ndim == 1 else None
    if w is not None:
        w = _array(w, "edge_weight").reshape(-1).astype(np.float64)
        if w.shape[0] != ei.shape[1] or not np.all(np.isfinite(w)) or (w < 0).any():
            raise ValueError(f"from_pyg: edge weights must be {ei.shape[1]} finite values >= 0; got shape "
                             f"{w.shape}")
    y = y.astype(np.int64)
    check_unlabelled(y, f"from_pyg({name})")
    splits = None
    present = [_get(data, k) is not None for k in _MASKS]
    if any(present):
        if not all(present):
            raise ValueError(f"from_pyg: data has {[k for k, p in zip(_MASKS, present) if p]} but not all of "
                             f"{list(_MASKS)}")
        masks = []
        for k in _MASKS:
            m = _array(_get(data, k), k).astype(bool)
            m = m[:, None] if m.ndim == 1 else m
            if m.ndim != 2 or m.shape[0] != n:
                raise ValueError(f"from_pyg: data.{k} must have shape (n,) or (n, S) with n = {n}; got {m.shape}")
            masks.append(np.ascontiguousarray(m.T))
        if len({m.shape for m in masks}) != 1:
            raise ValueError(f"from_pyg: the masks hold different numbers of splits {[m.shape[0] for m in masks]}")
        unl = np.flatnonzero((masks[0] | masks[1] | masks[2]).any(axis=0) & (y < 0))
        if unl.size:
            raise ValueError(f"from_pyg: the masks hold {unl.size} unlabelled node(s) (y = -1), e.g. "
                             f"{unl[:5].tolist()}")
        splits = tuple(masks)
    known = y[y >= 0]
    raw = RawData(edge_index=ei.astype(np.int64), num_nodes=n, labels=y.astype(np.int32),
                  num_classes=int(known.max()) + 1, features=x, splits=splits, edge_weight=w,
                  info={"source": "from_pyg"})
    return build_dataset(raw, name, metric, directed=directed, info={"format": "pyg"})
