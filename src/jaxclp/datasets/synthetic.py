"""Synthetic graphs with controlled edge homophily (CLP paper, simplified H2GCN syn-cora generation).

``num_classes`` classes of ``nodes_per_class`` nodes (default 10 x 1000). ``m = round(n * avg_degree / 2)``
undirected edges; exactly ``round(h * m)`` of them are intra-class (both ends uniform within one class; the
class of the first end is that of a uniform random node) and the rest inter-class (the second class is a
uniformly random *different* class). Edges are unique and loop-free, so the edge homophily of the result is
``round(h * m) / m`` and the average degree ``2 m / n``. Syn-1/2/3 of the paper use average degree 5/10/15.

Features: 2-D Gaussians (class ``c`` has mean ``radius * (cos, sin)(2 pi c / C)`` and covariance
``cov_scale * R diag(cov_diag) R^T`` where R rotates by the same angle; paper: radius 300, cov_scale 3500,
cov_diag (7, 2)), or rows sampled from a real dataset's features: synthetic class ``c`` is mapped to a real
class and each of its nodes gets a feature row drawn from that real class (with replacement only when the real
class is smaller than ``nodes_per_class``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from jaxclp.datasets._base import Dataset
from jaxclp.graph import Graph

__all__ = ["synthetic", "sample_edges", "gaussian_features", "features_from_real", "SYNTHETIC_DEGREES"]

SYNTHETIC_DEGREES = {"syn-1": 5, "syn-2": 10, "syn-3": 15}
_MAX_ROUNDS = 200


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _unique_pairs(rng, need: int, draw, n: int) -> np.ndarray:
    """Draws unique undirected pairs (keys lo * n + hi) with ``draw(k) -> (u, v)`` until ``need`` are found."""
    keys = np.zeros(0, np.int64)
    for _ in range(_MAX_ROUNDS):
        missing = need - keys.shape[0]
        if missing <= 0:
            break
        u, v = draw(int(missing * 1.05) + 16)
        new = np.minimum(u, v) * n + np.maximum(u, v)
        keys = np.unique(np.concatenate([keys, new]))
    else:
        raise RuntimeError(f"could not sample {need} distinct edges; too close to the number of possible pairs")
    if keys.shape[0] > need:
        keys = rng.choice(keys, need, replace=False)
    return keys


def sample_edges(labels, num_edges: int, h: float, seed=0) -> np.ndarray:
    """Samples unique undirected loop-free edges with exactly ``round(h * num_edges)`` intra-class edges.

    Args:
        labels: (n,) class ids 0..C-1.
        num_edges: m, number of undirected edges.
        h: target edge homophily in [0, 1].
        seed: int or numpy Generator.

    Returns:
        (2, m) int64 edge index, one column per undirected edge (random order).

    Raises:
        ValueError: h out of range, or more intra/inter-class edges requested than exist.
    """
    rng = _rng(seed)
    labels = np.asarray(labels, np.int64)
    n = labels.shape[0]
    if not 0.0 <= float(h) <= 1.0:
        raise ValueError(f"h must lie in [0, 1]; got {h}")
    classes, counts = np.unique(labels, return_counts=True)
    num_classes = int(labels.max()) + 1
    sizes = np.bincount(labels, minlength=num_classes)
    members = np.argsort(labels, kind="stable")  # nodes grouped by class
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    pos_in_class = np.empty(n, np.int64)
    pos_in_class[members] = np.arange(n) - start[labels[members]]
    m = int(num_edges)
    m_intra = int(round(float(h) * m))
    m_inter = m - m_intra
    cap_intra = int(np.sum(sizes * (sizes - 1) // 2))
    cap_inter = int((n * n - np.sum(sizes * sizes)) // 2)
    if m_intra > cap_intra:
        raise ValueError(f"{m_intra} intra-class edges requested but only {cap_intra} exist")
    if m_inter > cap_inter:
        raise ValueError(f"{m_inter} inter-class edges requested but only {cap_inter} exist")
    # nodes eligible as the first end of an intra edge: classes with >= 2 nodes
    ok_intra = np.flatnonzero(sizes[labels] >= 2)

    def draw_intra(k):
        u = ok_intra[rng.integers(0, ok_intra.shape[0], k)]
        c = labels[u]
        off = rng.integers(0, sizes[c] - 1)  # uniform over the class without u
        off = off + (off >= pos_in_class[u])
        return u, members[start[c] + off]

    nonempty = classes[counts > 0]

    def draw_inter(k):
        u = rng.integers(0, n, k)
        c = labels[u]
        # uniform different non-empty class
        j = rng.integers(0, nonempty.shape[0] - 1, k)
        ci = np.searchsorted(nonempty, c)
        c2 = nonempty[j + (j >= ci)]
        v = members[start[c2] + rng.integers(0, sizes[c2])]
        return u, v

    parts = []
    if m_intra:
        parts.append(_unique_pairs(rng, m_intra, draw_intra, n))
    if m_inter:
        if nonempty.shape[0] < 2:
            raise ValueError("inter-class edges need at least 2 classes")
        parts.append(_unique_pairs(rng, m_inter, draw_inter, n))
    keys = rng.permutation(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    return np.stack([keys // n, keys % n])


def gaussian_features(labels, num_classes: int | None = None, *, radius: float = 300.0, cov_scale: float = 3500.0,
                      cov_diag=(7.0, 2.0), seed=0) -> np.ndarray:
    """2-D Gaussian class-conditional features (CLP paper).

    Args:
        labels: (n,) class ids.
        num_classes: C (default max label + 1); class c has angle 2 pi c / C.
        radius, cov_scale, cov_diag: mean radius, covariance scale and eigenvalues (before scaling).
        seed: int or numpy Generator.

    Returns:
        (n, 2) float32.
    """
    rng = _rng(seed)
    labels = np.asarray(labels, np.int64)
    k = int(num_classes) if num_classes is not None else int(labels.max()) + 1
    theta = 2.0 * np.pi * labels / k
    cos, sin = np.cos(theta), np.sin(theta)
    z = rng.standard_normal((labels.shape[0], 2)) * np.sqrt(cov_scale * np.asarray(cov_diag, float))
    x = radius * cos + cos * z[:, 0] - sin * z[:, 1]
    y = radius * sin + sin * z[:, 0] + cos * z[:, 1]
    return np.stack([x, y], axis=1).astype(np.float32)


def features_from_real(labels, real_features, real_labels, num_classes: int | None = None, seed=0):
    """Feature rows sampled from a real dataset through a class mapping.

    Synthetic class c is mapped to real class ``perm[c % C_real]`` (``perm`` a random permutation of the real
    classes); each synthetic node gets a row of that real class, drawn without replacement when the real class
    has enough rows, else with replacement.

    Args:
        labels: (n,) synthetic class ids.
        real_features: (n_real, d) array or scipy sparse matrix.
        real_labels: (n_real,) real class ids.
        num_classes: number of synthetic classes (default max label + 1).
        seed: int or numpy Generator.

    Returns:
        ``(features, class_map, rows)``: (n, d) float32 array (CSR if the input is sparse), (C,) real class of
        each synthetic class, (n,) the real row used for each node.
    """
    rng = _rng(seed)
    labels = np.asarray(labels, np.int64)
    real_labels = np.asarray(real_labels).reshape(-1)
    if real_features.shape[0] != real_labels.shape[0]:
        raise ValueError(f"real_features has {real_features.shape[0]} rows but real_labels has "
                         f"{real_labels.shape[0]}")
    k = int(num_classes) if num_classes is not None else int(labels.max()) + 1
    real_classes = np.unique(real_labels)
    perm = rng.permutation(real_classes)
    class_map = perm[np.arange(k) % perm.shape[0]]
    rows = np.empty(labels.shape[0], np.int64)
    for c in range(k):
        nodes = np.flatnonzero(labels == c)
        pool = np.flatnonzero(real_labels == class_map[c])
        rows[nodes] = rng.choice(pool, nodes.shape[0], replace=pool.shape[0] < nodes.shape[0])
    if sp.issparse(real_features):
        feats = sp.csr_matrix(real_features, dtype=np.float32)[rows]
    else:
        feats = np.asarray(real_features, dtype=np.float32)[rows]
    return feats, class_map, rows


def synthetic(h: float, avg_degree: float = 5, num_classes: int = 10, nodes_per_class: int = 1000,
              features="gaussian", seed=0, *, features_from=None, name: str | None = None,
              **gaussian_kwargs) -> Dataset:
    """Generates a synthetic dataset (Syn-1/2/3 of the CLP paper for avg_degree 5/10/15).

    Args:
        h: target edge homophily in [0, 1] (hit exactly up to rounding of ``h * m``).
        avg_degree: average node degree; ``m = round(n * avg_degree / 2)`` undirected edges.
        num_classes: C.
        nodes_per_class: nodes per class (n = C * nodes_per_class). Node i has class ``i // nodes_per_class``.
        features: ``"gaussian"`` (2-D Gaussians), None / ``"none"`` (no features), or a
            ``(real_features, real_labels)`` pair (same as ``features_from``).
        seed: int or numpy Generator (edges are drawn first, then features).
        features_from: ``(real_features, real_labels)``: sample feature rows from a real dataset.
        name: dataset name (default ``"syn-h<h>-d<avg_degree>"``).
        **gaussian_kwargs: ``radius``, ``cov_scale``, ``cov_diag`` for the Gaussian features.

    Returns:
        :class:`Dataset` with an undirected graph, (n, 2) or (n, d) float32 features, (n,) int32 labels,
        ``splits=None`` (use :func:`jaxclp.datasets.random_splits`) and generation details in ``info``.
    """
    rng = _rng(seed)
    k, npc = int(num_classes), int(nodes_per_class)
    if k < 1 or npc < 1:
        raise ValueError(f"num_classes and nodes_per_class must be >= 1; got {num_classes}, {nodes_per_class}")
    if avg_degree < 0:
        raise ValueError(f"avg_degree must be >= 0; got {avg_degree}")
    if isinstance(features, tuple):
        features_from, features = features, "real"
    n = k * npc
    labels = np.repeat(np.arange(k, dtype=np.int64), npc)
    m = int(round(n * float(avg_degree) / 2))
    edges = sample_edges(labels, m, h, rng)
    graph = Graph.from_edge_index(edges, n)
    info = {"h_target": float(h), "avg_degree_target": float(avg_degree), "num_edges_undirected": m,
            "h": float(np.mean(labels[edges[0]] == labels[edges[1]])) if m else float("nan"),
            "avg_degree": 2.0 * m / n}
    if features_from is not None:
        feats, class_map, rows = features_from_real(labels, features_from[0], features_from[1], k, rng)
        info.update(features="real", class_map=class_map.tolist())
    elif features is None or features == "none":
        feats = None
        info.update(features=None)
    elif features == "gaussian":
        feats = gaussian_features(labels, k, seed=rng, **gaussian_kwargs)
        info.update(features="gaussian", **{kk: v for kk, v in gaussian_kwargs.items()})
    else:
        raise ValueError(f"features must be 'gaussian', None, or a (real_features, real_labels) pair; "
                         f"got {features!r}")
    if name is None:
        name = f"syn-h{float(h):.2f}-d{avg_degree:g}"
    return Dataset(name=name, graph=graph, features=feats, labels=labels.astype(np.int32), num_classes=k,
                   splits=None, metric="accuracy", info=info)
