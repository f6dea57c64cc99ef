"""Core containers of the data layer: :class:`RawData` (what a format parser returns) and :class:`Dataset`.

A parser turns the published files into a :class:`RawData`: an edge index exactly as the file lists it
(direction, duplicates and self-loops kept) but already mapped to node indices through an explicit
id -> index map, plus labels, features and published splits aligned with those indices. :func:`build_dataset`
then applies the graph options (symmetrize, deduplicate, self-loops) and returns a frozen :class:`Dataset`.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Mapping

import numpy as np
import scipy.sparse as sp

from jaxclp.graph import Graph
from jaxclp.datasets.splits import Splits
from jaxclp.metrics import check_metric

__all__ = ["Dataset", "RawData", "build_dataset", "edge_homophily", "encode_labels", "undirected_edges",
           "DENSE_FEATURES_MAX_BYTES"]

# Sparse features are kept sparse (scipy CSR) by default when their dense float32 form would exceed this
# (deezer-europe: 28281 x 31241 = 3.5 GB dense; Coauthor Physics: 34493 x 8415 = 1.16 GB; Coauthor CS:
# 18333 x 6805 = 0.5 GB at 0.9 % nonzeros, where the MLP's sparse first layer through the CSR kernel is 5x faster
# than the dense product, benchmarks/results/sparse_features.md). Was 1 GiB until session 16.
DENSE_FEATURES_MAX_BYTES = 2**28


@dataclasses.dataclass(frozen=True, eq=False)
class RawData:
    """Parsed content of a dataset's files, before the graph options are applied.

    Attributes:
        edge_index: (2, m) int64 node indices in [0, num_nodes); row 0 = source, row 1 = target, exactly as
            listed in the file (direction, duplicate lines and self-loops kept).
        num_nodes: n.
        labels: (n,) int32 class ids in [0, num_classes), or -1 for an unlabelled node.
        num_classes: C.
        features: (n, d) float32 dense array, scipy sparse CSR matrix, or None when the dataset has no features.
        splits: None, or a tuple ``(train, val, test)`` of bool arrays of shape (num_splits, n).
        node_ids: (n,) original node id of each index (the explicit id -> index map), or None when the
            ids in the files already are the indices 0..n-1.
        info: free-form metadata (e.g. original label values).
        edge_weight: optional (m,) nonnegative finite weight of each listed edge (None: unweighted, all 1).
    """

    edge_index: np.ndarray
    num_nodes: int
    labels: np.ndarray
    num_classes: int
    features: Any = None
    splits: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    node_ids: np.ndarray | None = None
    info: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    edge_weight: np.ndarray | None = None

    def __post_init__(self):
        n = int(self.num_nodes)
        ei = np.asarray(self.edge_index)
        if ei.ndim != 2 or ei.shape[0] != 2:
            pairs = ei.ndim == 2 and ei.shape[1] == 2
            hint = " (an (m, 2) list of pairs: pass its transpose, edge_index.T)" if pairs else ""
            raise ValueError(f"edge_index must have shape (2, m); got {ei.shape}{hint}")
        if ei.size and (ei.min() < 0 or ei.max() >= n):
            raise ValueError(f"edge_index has node indices outside [0, {n})")
        lab = np.asarray(self.labels)
        if lab.shape != (n,):
            raise ValueError(f"labels must have shape ({n},); got {lab.shape}")
        if lab.size and (lab.min() < -1 or lab.max() >= self.num_classes):
            raise ValueError(f"labels must lie in [0, {self.num_classes}) (-1: unlabelled); got "
                             f"[{lab.min()}, {lab.max()}]")
        if lab.size and lab.max() < 0:
            raise ValueError("labels: every node is unlabelled (-1)")
        if self.features is not None and self.features.shape[0] != n:
            raise ValueError(f"features must have {n} rows; got shape {self.features.shape}")
        if self.splits is not None:
            for part in self.splits:
                if part.ndim != 2 or part.shape[1] != n or part.dtype != np.bool_:
                    raise ValueError(f"split masks must be bool arrays of shape (num_splits, {n}); "
                                     f"got {part.dtype} {part.shape}")
        if self.node_ids is not None and np.asarray(self.node_ids).shape != (n,):
            raise ValueError(f"node_ids must have shape ({n},)")
        if self.edge_weight is not None:
            w = np.asarray(self.edge_weight)
            if w.shape != (ei.shape[1],):
                raise ValueError(f"edge_weight must have shape ({ei.shape[1]},); got {w.shape}")
            if w.size and not (np.all(np.isfinite(w)) and w.min() >= 0):
                raise ValueError("edge_weight must be finite and nonnegative")


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    """A node-classification dataset.

    Attributes:
        name: registry name, e.g. ``"texas"``.
        graph: :class:`jaxclp.graph.Graph` with n nodes (by default undirected: both directions of each
            unique edge, no self-loops).
        features: (n, d) float32 array, or None when the dataset has no node features (airports). A scipy
            CSR float32 matrix when the file stores sparse features whose dense form would exceed
            :data:`DENSE_FEATURES_MAX_BYTES` (256 MiB: deezer-europe, Coauthor CS and Physics), or when
            ``sparse_features=True`` was asked for.
        labels: (n,) int32 class ids, 0-based; -1 marks an unlabelled node (a user's graph,
            :func:`jaxclp.datasets.load_file`): in the graph, in no split (:func:`random_splits`'s ``labelled``),
            never scored.
        num_classes: C.
        splits: None, or the published fixed splits as a :class:`jaxclp.datasets.splits.Splits` with bool
            arrays ``train``, ``val``, ``test`` of shape (num_splits, n).
        metric: ``"accuracy"`` or ``"roc_auc"``.
        node_ids: (n,) original node id of index i (explicit id -> index map), or None if ids == indices.
        info: metadata (source files, original label values, generation parameters, ...).
    """

    name: str
    graph: Graph
    features: Any
    labels: np.ndarray
    num_classes: int
    splits: Any = None
    metric: str = "accuracy"
    node_ids: np.ndarray | None = None
    info: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        """n."""
        return int(self.graph.num_nodes)

    @property
    def label_values(self) -> np.ndarray:
        """(num_classes,) the original label of each class code: ``info["label_values"]`` (a user's file, e.g.
        ``["ant", "bee"]``), else the codes 0..C-1. ``label_values[labels]`` maps codes back (labelled nodes)."""
        return np.asarray(self.info.get("label_values", np.arange(self.num_classes)))

    @property
    def class_counts(self) -> np.ndarray:
        """(num_classes,) labelled nodes per class code (unlabelled nodes, -1, not counted)."""
        lab = np.asarray(self.labels)
        return np.bincount(lab[lab >= 0], minlength=self.num_classes)

    @property
    def num_features(self) -> int:
        """d, or 0 when there are no features."""
        return 0 if self.features is None else int(self.features.shape[1])

    @property
    def num_undirected_edges(self) -> int:
        """Number of unique undirected non-loop edges of :attr:`graph`."""
        return int(undirected_edges(self.graph).shape[1])

    def edge_homophily(self) -> float:
        """Fraction of unique undirected non-loop edges joining two nodes of the same class."""
        return edge_homophily(self.graph, self.labels)

    def with_metric(self, metric: str | None) -> "Dataset":
        """This dataset scored with ``metric`` (``"accuracy"`` or ``"roc_auc"``; None: unchanged). ROC-AUC is the
        binary metric (Platonov et al.'s choice for imbalanced two-class graphs): it needs exactly 2 classes.

        Raises:
            ValueError: an unknown metric, or ``"roc_auc"`` with other than 2 classes.
        """
        if metric is None or metric == self.metric:
            return self
        if check_metric(metric) == "roc_auc" and self.num_classes != 2:
            raise ValueError(f"{self.name}: metric 'roc_auc' is binary ROC-AUC and needs 2 classes; this dataset "
                             f"has {self.num_classes}")
        return dataclasses.replace(self, metric=metric)

    def describe(self) -> str:
        """One line for a person: nodes (isolated, unlabelled), unique undirected (or directed) edges, features,
        classes with their labelled-node counts in code order, published splits, metric.

        Example: ``"edges: 120 nodes (10 isolated), 314 undirected edges, 8 features, 4 classes (labelled nodes
        per class: 0=35, 1=40, 2=44, 3=1), metric accuracy"`` (classes by their original label values; with
        more than 12 classes the minimum, median and maximum count).
        """
        lab = np.asarray(self.labels)
        deg = np.bincount(np.asarray(self.graph.receivers), minlength=self.num_nodes) + \
            np.bincount(np.asarray(self.graph.senders), minlength=self.num_nodes)
        extra = [f"{int((deg == 0).sum())} isolated"] if (deg == 0).any() else []
        if (lab < 0).any():
            extra.append(f"{int((lab < 0).sum())} unlabelled")
        counts = self.class_counts
        values = self.label_values
        if self.num_classes <= 12:
            per_class = ", ".join(f"{v}={int(c)}" for v, c in zip(values, counts))
        else:
            small = int(np.argmin(counts))
            per_class = f"min {int(counts[small])} (class {values[small]}), median {int(np.median(counts))}, " \
                        f"max {int(counts.max())}"
        if self.info.get("directed"):
            edges = f"{self.graph.num_edges} directed edges"
        else:
            edges = f"{self.num_undirected_edges} undirected edges"
        feats = f"{self.num_features} features" if self.features is not None else "no features"
        splits = "" if self.splits is None else f", {self.splits.train.shape[0]} published splits"
        return (f"{self.name}: {self.num_nodes} nodes" + (f" ({', '.join(extra)})" if extra else "") +
                f", {edges}, {feats}, {self.num_classes} classes (labelled nodes per class: {per_class}){splits}, "
                f"metric {self.metric}")

    def __repr__(self) -> str:
        nsp = None if self.splits is None else self.splits.train.shape[0]
        return (f"Dataset(name={self.name!r}, num_nodes={self.num_nodes}, num_edges={self.graph.num_edges}, "
                f"num_features={self.num_features}, num_classes={self.num_classes}, splits={nsp}, "
                f"metric={self.metric!r})")


def undirected_edges(graph_or_edge_index, num_nodes: int | None = None) -> np.ndarray:
    """Unique undirected non-loop edges.

    Args:
        graph_or_edge_index: a :class:`Graph` or a (2, m) integer edge index.
        num_nodes: n (only needed for an edge index; default max index + 1).

    Returns:
        (2, E) int64 array with row 0 < row 1, sorted lexicographically.
    """
    if isinstance(graph_or_edge_index, Graph):
        s = np.asarray(graph_or_edge_index.senders, dtype=np.int64)
        r = np.asarray(graph_or_edge_index.receivers, dtype=np.int64)
        n = graph_or_edge_index.num_nodes
    else:
        ei = np.asarray(graph_or_edge_index, dtype=np.int64)
        s, r = ei[0], ei[1]
        n = int(num_nodes) if num_nodes is not None else (int(ei.max()) + 1 if ei.size else 1)
    lo, hi = np.minimum(s, r), np.maximum(s, r)
    keep = lo != hi
    key = np.unique(lo[keep] * n + hi[keep])
    return np.stack([key // n, key % n])


def edge_homophily(graph_or_edge_index, labels) -> float:
    """Edge homophily: fraction of unique undirected non-loop edges whose ends share a label, over the edges
    whose two ends are labelled (label -1: unlabelled).

    Args:
        graph_or_edge_index: a :class:`Graph` or a (2, m) edge index.
        labels: (n,) integer labels.

    Returns:
        h in [0, 1] (NaN for a graph without such edges).
    """
    labels = np.asarray(labels)
    e = undirected_edges(graph_or_edge_index, labels.shape[0])
    e = e[:, (labels[e[0]] >= 0) & (labels[e[1]] >= 0)]
    if e.shape[1] == 0:
        return float("nan")
    return float(np.mean(labels[e[0]] == labels[e[1]]))


def integral(values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Numeric ``values`` (labels or ids read from a file or array) as integers.

    Returns:
        ``(as_int, nan, bad)``: int64 values with NaN as -1 (the unlabelled mark), the NaN mask, and the mask of
        entries that are neither an integer nor NaN (a fraction, or inf) — each reader names those in its error.
    """
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.integer):
        none = np.zeros(values.shape, bool)
        return values.astype(np.int64), none, none
    nan, finite = np.isnan(values), np.isfinite(values)
    bad = ~nan & (~finite | (np.mod(np.where(finite, values, 0), 1) != 0))
    return np.where(finite, values, -1).astype(np.int64), nan, bad


def check_unlabelled(labels: np.ndarray, where: str) -> None:
    """Integer ``labels`` of a file: -1 marks an unlabelled node (a warning says how many); any other negative
    label, or no labelled node at all, raises ValueError naming ``where``."""
    if labels.size and labels.min() < -1:
        raise ValueError(f"{where}: negative labels other than -1 (the unlabelled mark), e.g. "
                         f"{np.unique(labels[labels < -1])[:5].tolist()}")
    report_unlabelled(labels == -1, where)


def report_unlabelled(unlabelled: np.ndarray, where: str, marks: str = "-1", hint: str = "") -> None:
    """The one report of a file's unlabelled nodes (``unlabelled``: (n,) bool): ValueError naming ``where`` when every
    node is unlabelled, else a warning with their count (none without any); ``marks`` names the label values that
    mark them, ``hint`` is appended to the warning."""
    k = int(np.sum(unlabelled))
    if k and k == np.size(unlabelled):
        raise ValueError(f"{where}: every node is unlabelled (label {marks}); nothing to train on or score")
    if k:
        warnings.warn(f"{where}: {k} of {np.size(unlabelled)} node(s) have label {marks} and are treated as "
                      f"unlabelled (in the graph, in no split, never scored; scikit-learn's convention){hint}",
                      stacklevel=4)


def encode_labels(raw) -> tuple[np.ndarray, np.ndarray]:
    """Maps arbitrary label values to 0..C-1 (sorted order, like sklearn's LabelEncoder).

    Args:
        raw: (n,) label values.

    Returns:
        ``(labels, classes)``: (n,) int32 codes and (C,) the original value of each code.
    """
    classes, codes = np.unique(np.asarray(raw), return_inverse=True)
    return codes.astype(np.int32).reshape(-1), classes


def build_dataset(raw: RawData, name: str, metric: str, *, directed: bool = False, self_loops: str = "drop",
                  deduplicate: bool = True, sparse_features: bool | None = None, info=None) -> Dataset:
    """Applies the graph options to parsed data and returns a :class:`Dataset`.

    Args:
        raw: parsed data.
        name: dataset name.
        metric: evaluation metric name.
        directed: keep the file's edge direction (default: symmetrize).
        self_loops: ``"drop"`` (default), ``"keep"`` (the file's loops) or ``"add"`` (one loop per node).
        deduplicate: merge repeated edges (default True).
        sparse_features: True: features as a scipy CSR matrix; False: a dense array; None (default): sparse
            features stay CSR when their dense float32 form would exceed :data:`DENSE_FEATURES_MAX_BYTES`,
            everything else is dense.
        info: extra metadata merged into ``raw.info``. ``info["file_self_loops"]`` is set to the (k,) sorted
            indices of the nodes that have a self-loop in the file (whatever ``self_loops`` does with them),
            so degree conventions that count a loop (networkx: twice) can be reproduced.
    """
    graph = Graph.from_edge_index(raw.edge_index, raw.num_nodes, weights=raw.edge_weight, symmetrize=not directed,
                                  deduplicate=deduplicate, self_loops=self_loops)
    feats = raw.features
    if feats is not None:
        if sparse_features is None:
            dense_bytes = 4 * int(feats.shape[0]) * int(feats.shape[1])
            sparse_features = sp.issparse(feats) and dense_bytes > DENSE_FEATURES_MAX_BYTES
        if sparse_features:
            feats = sp.csr_matrix(feats, dtype=np.float32)
        elif sp.issparse(feats):
            feats = np.asarray(feats.toarray(), dtype=np.float32)
        else:
            feats = np.ascontiguousarray(feats, dtype=np.float32)
    splits = None
    if raw.splits is not None:
        splits = Splits(train=raw.splits[0], val=raw.splits[1], test=raw.splits[2], seeds=None,
                        name=f"{name}/published")
    meta = dict(raw.info)
    meta.update(info or {})
    meta.update(directed=directed, self_loops=self_loops, deduplicate=deduplicate)
    ei = np.asarray(raw.edge_index)
    meta["file_self_loops"] = np.unique(ei[0][ei[0] == ei[1]]).astype(np.int64)
    return Dataset(name=name, graph=graph, features=feats, labels=np.asarray(raw.labels, dtype=np.int32),
                   num_classes=int(raw.num_classes), splits=splits, metric=metric,
                   node_ids=None if raw.node_ids is None else np.asarray(raw.node_ids), info=meta)
