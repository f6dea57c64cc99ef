"""The heterophilous-graphs ``.npz`` format (Platonov et al., ICLR 2023, yandex-research/heterophilous-graphs).

Accepts any file of that format (chameleon, squirrel, their ``_filtered``/``_directed`` variants, minesweeper,
tolokers, roman_empire, amazon_ratings, questions, ...).
"""

from __future__ import annotations

import warnings

import numpy as np

from jaxclp.datasets._base import RawData, check_unlabelled
from jaxclp.datasets._text import basename

__all__ = ["read_heterophilous_npz", "REQUIRED_KEYS"]

REQUIRED_KEYS = ("node_features", "node_labels", "edges")
MASK_KEYS = ("train_masks", "val_masks", "test_masks")


def read_heterophilous_npz(path) -> RawData:
    """Reads a heterophilous-graphs ``.npz`` file.

    Format (``numpy.load``): ``node_features`` float (n, d); ``node_labels`` int (n,); ``edges`` int (m, 2),
    each undirected edge stored once (symmetrize it, which :func:`jaxclp.datasets.load` does by default);
    optionally ``train_masks``, ``val_masks``, ``test_masks`` bool (num_splits, n). Node index = row.

    Args:
        path: file path.

    Returns:
        :class:`RawData` with the published splits (or None when the masks are absent).

    Raises:
        ValueError: missing keys or inconsistent shapes.
    """
    where = basename(path)
    with np.load(path, allow_pickle=False) as z:
        missing = [k for k in REQUIRED_KEYS if k not in z.files]
        if missing:
            raise ValueError(f"{where}: not a heterophilous-graphs npz, missing keys {missing} (has {z.files})")
        feats = np.asarray(z["node_features"], dtype=np.float32)
        labels = np.asarray(z["node_labels"]).reshape(-1)
        edges = np.asarray(z["edges"])
        masks = [np.asarray(z[k]) for k in MASK_KEYS] if all(k in z.files for k in MASK_KEYS) else None
    n = labels.shape[0]
    if feats.ndim == 1:
        feats = feats[:, None]
    if feats.shape[0] != n:
        raise ValueError(f"{where}: node_features has {feats.shape[0]} rows but node_labels has {n}")
    if edges.ndim != 2 or 2 not in edges.shape:
        raise ValueError(f"{where}: edges must have shape (m, 2); got {edges.shape}")
    edge_index = (edges.T if edges.shape[1] == 2 else edges).astype(np.int64)
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
        raise ValueError(f"{where}: edges reference nodes outside [0, {n})")
    if not np.issubdtype(labels.dtype, np.integer):
        if not np.all(np.mod(labels, 1) == 0):
            raise ValueError(f"{where}: node_labels must be integers")
    labels = labels.astype(np.int64)
    check_unlabelled(labels, where)
    splits = None
    if masks is not None:
        masks = [m.reshape(1, -1) if m.ndim == 1 else m for m in masks]
        if all(m.ndim == 2 and m.shape[0] == n != m.shape[1] for m in masks):  # PyG's (n, S) columns
            warnings.warn(f"{where}: masks of shape {masks[0].shape} read as {masks[0].shape[1]} splits of {n} "
                          "nodes (PyG's (n, num_splits) layout; this format's own is (num_splits, n))", UserWarning,
                          stacklevel=3)
            masks = [m.T for m in masks]
        for k, m in zip(MASK_KEYS, masks):
            if m.shape[1] != n:
                raise ValueError(f"{where}: {k} has shape {m.shape}, expected (num_splits, {n})")
        splits = tuple(m.astype(bool) for m in masks)
    return RawData(edge_index=np.ascontiguousarray(edge_index), num_nodes=n, labels=labels.astype(np.int32),
                   num_classes=int(labels.max()) + 1, features=feats, splits=splits)
