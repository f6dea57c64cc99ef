"""Node features for the models: the dataset's own, or structural features for featureless graphs.

The CLP paper gives each node of the featureless Airports graphs ONE feature, ``log(degree + 1)`` (its table:
kappa = 1, "OSF", structure-only features); the authors' loader computes the degree with networkx on the
undirected simple graph ``nx.Graph(edges)``: repeated and reversed edges count once, a self-loop counts twice.
That is the default here (``"log-degree"``); ``"identity"`` (one-hot node id) and ``"degree-onehot"`` (one-hot
degree value) are the alternatives.

Sparse features are never densified when their dense float32 form would exceed ``max_dense_bytes``
(256 MiB): they are returned as a scipy CSR float32 matrix (deezer-europe: 28281 x 31241, 3.5 GB dense;
Coauthor Physics: 1.16 GB; Coauthor CS: 0.5 GB), which the MLP's first layer takes directly (``jaxclp.features.as_features``). Mostly-zero
features are CSR too (:data:`SPARSE_FEATURES_MAX_DENSITY`): bag-of-words features of 0.5-0.9 % nonzeros
(Chameleon, Squirrel, Actor, Twitch) make the first layer of every model ~9-15x cheaper as a sparse product
(``benchmarks/results/sparse_features.md``: one MLP fit on Chameleon 2.2 s dense, 0.2 s CSR, same test accuracy).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from jaxclp.datasets._base import DENSE_FEATURES_MAX_BYTES, undirected_edges
from jaxclp.features import SPARSE_INPUT_DENSITY

__all__ = ["node_features", "FEATURE_KINDS", "networkx_degree", "SPARSE_FEATURES_MAX_DENSITY",
           "SPARSE_FEATURES_MIN_ENTRIES", "sparse_by_density"]

FEATURE_KINDS = ("auto", "given", "log-degree", "identity", "degree-onehot")
SPARSE_FEATURES_MAX_DENSITY = SPARSE_INPUT_DENSITY
"""The GNNs' threshold (:data:`jaxclp.features.SPARSE_INPUT_DENSITY`, 5 %), applied once for every model: features with at most this share of nonzeros (and at least :data:`SPARSE_FEATURES_MIN_ENTRIES` entries) are
given to the models as CSR: the sparse first layer costs O(nnz * width) instead of O(n * d * width). Wiki's
TF-IDF features (13 % nonzero) stay dense; Chameleon, Squirrel, Actor and Twitch (0.5-0.9 %) become CSR."""
SPARSE_FEATURES_MIN_ENTRIES = 1 << 20
"""Below this many entries (n * d) features stay dense whatever their density (a dense product is then fast)."""


def sparse_by_density(x, max_density: float = SPARSE_FEATURES_MAX_DENSITY) -> bool:
    """Whether (n, d) features ``x`` (dense or scipy.sparse) are mostly zeros and large enough to be taken as CSR
    (:data:`SPARSE_FEATURES_MAX_DENSITY`, :data:`SPARSE_FEATURES_MIN_ENTRIES`)."""
    entries = int(x.shape[0]) * int(x.shape[1])
    if entries < SPARSE_FEATURES_MIN_ENTRIES:
        return False
    nnz = x.nnz if sp.issparse(x) else int(np.count_nonzero(x))
    return nnz <= max_density * entries


def networkx_degree(ds) -> np.ndarray:
    """Degree of each node as ``networkx.Graph(edges).degree`` gives it (the CLP authors' convention).

    Unique undirected neighbours other than the node itself, plus 2 for a node with a self-loop. Self-loops are
    taken from ``ds.info["file_self_loops"]`` (the file's loops, recorded by the loaders even when the graph
    drops them, as it does by default), else from the graph.

    Args:
        ds: a :class:`jaxclp.datasets.Dataset`.

    Returns:
        (n,) int64 degrees.
    """
    n = ds.num_nodes
    e = undirected_edges(ds.graph)
    deg = np.bincount(e.reshape(-1), minlength=n).astype(np.int64)
    loops = (ds.info or {}).get("file_self_loops") if hasattr(ds, "info") else None
    if loops is None:
        s, r = np.asarray(ds.graph.senders), np.asarray(ds.graph.receivers)
        loops = np.unique(s[s == r])
    deg[np.asarray(loops, dtype=np.int64)] += 2
    return deg


def _out(x, max_dense_bytes: int, max_density: float = SPARSE_FEATURES_MAX_DENSITY):
    """CSR float32 if ``x`` is sparse and too large dense, or mostly zeros (:func:`sparse_by_density`), else a
    dense float32 numpy array."""
    dense_bytes = 4 * int(x.shape[0]) * int(x.shape[1])
    if (sp.issparse(x) and dense_bytes > max_dense_bytes) or sparse_by_density(x, max_density):
        return sp.csr_matrix(x, dtype=np.float32)
    if sp.issparse(x):
        return np.asarray(x.toarray(), dtype=np.float32)
    return np.ascontiguousarray(x, dtype=np.float32)


def csr_for_density(features, max_dense_bytes: int = DENSE_FEATURES_MAX_BYTES) -> bool:
    """Whether :func:`node_features` returned ``features`` as CSR for their density alone: CSR although their dense
    float32 form fits ``max_dense_bytes`` (the same model as on dense features, another float rounding)."""
    return sp.issparse(features) and 4 * int(features.shape[0]) * int(features.shape[1]) <= max_dense_bytes


def node_features(ds, kind: str = "auto", *, max_dense_bytes: int = DENSE_FEATURES_MAX_BYTES,
                  max_density: float = SPARSE_FEATURES_MAX_DENSITY):
    """The (n, d) input features of a dataset for the MLP/GNN models.

    Args:
        ds: a :class:`jaxclp.datasets.Dataset`.
        kind: ``"auto"`` (default: the dataset's features, else ``"log-degree"``), ``"given"`` (the dataset's
            features; error if it has none), ``"log-degree"`` (one column ``log(degree + 1)``, natural log,
            degree as networkx counts it, see :func:`networkx_degree`; the paper's Airports features),
            ``"identity"`` (n columns, one-hot node index), ``"degree-onehot"`` (max degree + 1 columns,
            one-hot of the degree).
        max_dense_bytes: sparse features (and the identity / one-hot kinds) whose dense float32 form would
            exceed this are returned as scipy CSR.
        max_density: features (dense or sparse) of at least :data:`SPARSE_FEATURES_MIN_ENTRIES` entries with at
            most this share of nonzeros are returned as scipy CSR (0 keeps them dense).

    Returns:
        ``(features, kind)``: (n, d) float32 numpy array or scipy CSR float32 matrix, and the resolved kind
        (``"given"``, ``"log-degree"``, ``"identity"`` or ``"degree-onehot"``).

    Raises:
        ValueError: unknown ``kind``, or ``"given"`` for a dataset without features.
    """
    if kind not in FEATURE_KINDS:
        raise ValueError(f"kind must be one of {FEATURE_KINDS}; got {kind!r}")
    if kind == "auto":
        kind = "given" if ds.features is not None else "log-degree"
    n = ds.num_nodes
    if kind == "given":
        if ds.features is None:
            raise ValueError(f"dataset {ds.name!r} has no node features; use kind='log-degree', 'identity' "
                             "or 'degree-onehot'")
        return _out(ds.features, max_dense_bytes, max_density), "given"
    if kind == "identity":
        return _out(sp.identity(n, dtype=np.float32, format="csr"), max_dense_bytes, max_density), "identity"
    deg = networkx_degree(ds)
    if kind == "log-degree":
        return np.log(deg + 1.0).astype(np.float32)[:, None], "log-degree"
    onehot = sp.csr_matrix((np.ones(n, np.float32), (np.arange(n), deg)), shape=(n, int(deg.max(initial=0)) + 1))
    return _out(onehot, max_dense_bytes, max_density), "degree-onehot"
