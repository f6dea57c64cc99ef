"""Independent float64 numpy/scipy reference implementation of CLP (Zhong, Ivanov, Pang, TMLR 2022).

Written from the method's semantics, not from the library code:

* a graph is a list of directed edges s -> r with weight w; the adjacency is ``A[r, s] = w`` (repeated
  edges add up in the dense matrix);
* ``Ahat``: "sym" ``A[r,s] / sqrt(deg_in(r) deg_out(s))``, "row" ``A[r,s] / deg_in(r)``, "none" ``A``;
  a zero degree gives a zero row/column;
* ``B0 = M*Y + (1-M)*D``; ``H = Sinkhorn((M*Y)^T A^T B0)`` with the RAW A in this A[r, s] convention (the
  paper's A[i, j] for i -> j; H[sender class, receiver class]; smoothing C/mean(C) + eps);
* ``F[e, k] = (B0[s] H)[k] B0[r, k]``, ``A^F_k = diag(B0[:, k]) Ahat diag(G[:, k])``, ``G = B0 H``;
* iteration ``B <- (1-a) D + a A^F_k B`` from ``B0``; closed form ``B_k = (1-a)(I - a A^F_k)^{-1} D_k``.

Everything is dense float64 numpy (graphs in the tests are small). Also holds the random test-graph
generators shared by the test modules, and :func:`host_devices_env` for the tests that start processes.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import scipy.sparse as sp

# ----------------------------------------------------------------------------------------------- graphs


def build_edges(edge_index, n, weights=None, *, symmetrize=True, deduplicate=True, self_loops="drop"):
    """Reference edge-list construction. Returns (senders, receivers, weights) sorted by (receiver, sender).

    Straightforward Python: a list of (s, r, w) triples, dict-based deduplication (max weight).
    """
    ei = np.asarray(edge_index, dtype=np.int64).reshape(2, -1)
    m = ei.shape[1]
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64)
    edges = []
    for j in range(m):
        s, r, wj = int(ei[0, j]), int(ei[1, j]), float(w[j])
        if s == r and self_loops in ("drop", "add"):
            continue
        edges.append((s, r, wj))
    if symmetrize:
        edges = edges + [(r, s, wj) for (s, r, wj) in edges]
    if self_loops == "add":
        edges = edges + [(i, i, 1.0) for i in range(n)]
    if deduplicate:
        best: dict[tuple[int, int], float] = {}
        for s, r, wj in edges:
            best[(s, r)] = max(best.get((s, r), -np.inf), wj)
        edges = [(s, r, wj) for (s, r), wj in best.items()]
    # stable sort by (receiver, sender); duplicates (not deduplicated) keep a deterministic weight order
    edges = sorted(edges, key=lambda t: (t[1], t[0], t[2]))
    if not edges:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    s, r, wj = zip(*edges)
    return np.array(s, np.int64), np.array(r, np.int64), np.array(wj, np.float64)


def dense_adjacency(senders, receivers, weights, n):
    """A[r, s] = sum of the weights of the edges s -> r."""
    a = np.zeros((n, n))
    for s, r, w in zip(np.asarray(senders), np.asarray(receivers), np.asarray(weights, dtype=np.float64)):
        a[int(r), int(s)] += float(w)
    return a


def graph_dense(graph):
    """Dense raw adjacency of a jaxclp Graph (read only its edge arrays), in float64."""
    return dense_adjacency(np.asarray(graph.senders), np.asarray(graph.receivers),
                           np.asarray(graph.weights, dtype=np.float64), graph.num_nodes)


def _safe_inverse(x):
    out = np.zeros_like(x, dtype=np.float64)
    pos = x > 0
    out[pos] = 1.0 / x[pos]
    return out


def normalize(a, normalization):
    """Dense Ahat from a dense raw adjacency."""
    a = np.asarray(a, dtype=np.float64)
    if normalization == "none":
        return a.copy()
    d_in = a.sum(axis=1)   # row r: mass into r
    d_out = a.sum(axis=0)  # column s: mass out of s
    if normalization == "row":
        return _safe_inverse(d_in)[:, None] * a
    if normalization == "sym":
        return np.sqrt(_safe_inverse(d_in))[:, None] * a * np.sqrt(_safe_inverse(d_out))[None, :]
    raise ValueError(normalization)


def edge_normalized_values(senders, receivers, weights, n, normalization):
    """Per-edge Ahat values (a repeated edge keeps its own share), via scipy.sparse degrees."""
    s = np.asarray(senders)
    r = np.asarray(receivers)
    w = np.asarray(weights, dtype=np.float64)
    a = sp.coo_matrix((w, (r, s)), shape=(n, n)).tocsr()  # duplicates summed: degrees are exact
    d_in = np.asarray(a.sum(axis=1)).ravel()
    d_out = np.asarray(a.sum(axis=0)).ravel()
    if normalization == "none":
        return w.copy()
    if normalization == "row":
        return w * _safe_inverse(d_in)[r]
    return w * np.sqrt(_safe_inverse(d_in)[r] * _safe_inverse(d_out)[s])


# ----------------------------------------------------------------------------------------------- sinkhorn


def sinkhorn(c, *, smoothing=1e-6, tol=1e-13, max_iters=1_000_000):
    """Plain (non-log) alternating row/column normalization of the smoothed matrix, to high accuracy.

    Smoothing as specified: ``C / mean(C) + smoothing`` (``mean`` replaced by the smallest positive
    double when C is all zero); the global scale does not change the doubly-stochastic limit.
    """
    c = np.asarray(c, dtype=np.float64)
    scale = max(c.mean(), np.finfo(np.float64).tiny)
    p = c / scale + smoothing
    for _ in range(max_iters):
        p = p / p.sum(axis=1, keepdims=True)
        p = p / p.sum(axis=0, keepdims=True)
        if np.max(np.abs(p.sum(axis=1) - 1.0)) <= tol:
            break
    return p


def smoothed(c, smoothing=1e-6):
    c = np.asarray(c, dtype=np.float64)
    return c / max(c.mean(), np.finfo(np.float64).tiny) + smoothing


def cross_ratio_defect(p, c):
    """max |log(P / C) - (f_i + g_j)|: zero iff P = diag(u) C diag(v) (C strictly positive)."""
    lr = np.log(p) - np.log(c)
    f = lr[:, :1]
    g = lr[:1, :] - lr[0, 0]
    return float(np.max(np.abs(lr - f - g)))


# ----------------------------------------------------------------------------------------------- CLP


def one_hot(labels, k):
    y = np.zeros((len(labels), k))
    y[np.arange(len(labels)), np.asarray(labels)] = 1.0
    return y


def initial_beliefs(prior, labels, mask):
    prior = np.asarray(prior, dtype=np.float64)
    b0 = prior.copy()
    for i in np.flatnonzero(np.asarray(mask)):
        b0[i] = 0.0
        b0[i, int(labels[i])] = 1.0
    return b0


def compatibility_counts(a_raw, prior, labels, mask):
    """C = (M*Y)^T A B0 with the paper's raw A[i, j] = weight of i -> j (the TRANSPOSE of ``a_raw``, which is
    A[r, s]): row i sums the beliefs of the receivers of training nodes of class i, so H[sender class,
    receiver class] as the edge weights F use it. Only training labels are read."""
    k = np.asarray(prior).shape[1]
    mask = np.asarray(mask)
    lab = np.where(mask, np.asarray(labels), 0)
    b0 = initial_beliefs(prior, lab, mask)
    my = one_hot(lab, k) * mask[:, None]
    return my.T @ np.asarray(a_raw, dtype=np.float64).T @ b0


def compatibility(a_raw, prior, labels, mask, smoothing=1e-6):
    return sinkhorn(compatibility_counts(a_raw, prior, labels, mask), smoothing=smoothing)


def edge_weights(senders, receivers, b0, h):
    """F[e, k] = (b0[s_e] @ H)[k] * b0[r_e, k], edge by edge."""
    b0 = np.asarray(b0, dtype=np.float64)
    h = np.asarray(h, dtype=np.float64)
    m, k = len(senders), b0.shape[1]
    f = np.zeros((m, k))
    for e in range(m):
        s, r = int(senders[e]), int(receivers[e])
        for c in range(k):
            f[e, c] = sum(b0[s, j] * h[j, c] for j in range(k)) * b0[r, c]
    return f


def clp_operators(ahat, b0, h):
    """(K, n, n) dense A^F_k[r, s] = Ahat[r, s] * b0[r, k] * G[s, k], G = b0 @ H."""
    ahat = np.asarray(ahat, dtype=np.float64)
    b0 = np.asarray(b0, dtype=np.float64)
    g = b0 @ np.asarray(h, dtype=np.float64)
    k = b0.shape[1]
    return np.stack([np.diag(b0[:, c]) @ ahat @ np.diag(g[:, c]) for c in range(k)])


def closed_form(ops, prior, alpha):
    """(n, K) B_k = (1 - a) (I - a A^F_k)^{-1} D_k."""
    prior = np.asarray(prior, dtype=np.float64)
    k, n, _ = ops.shape
    out = np.zeros((n, k))
    for c in range(k):
        out[:, c] = np.linalg.solve(np.eye(n) - alpha * ops[c], (1.0 - alpha) * prior[:, c])
    return out


def iterate(ops, prior, b0, alpha, num_iters, l1_normalize=False):
    """The reference loop B <- (1-a) D + a A^F_k B from B0 (optionally L1-normalizing rows)."""
    prior = np.asarray(prior, dtype=np.float64)
    b = np.asarray(b0, dtype=np.float64).copy()
    k = b.shape[1]
    for _ in range(num_iters):
        new = np.zeros_like(b)
        for c in range(k):
            new[:, c] = (1.0 - alpha) * prior[:, c] + alpha * ops[c] @ b[:, c]
        if l1_normalize:
            s = new.sum(axis=1, keepdims=True)
            new = np.where(s > 0, new / np.where(s > 0, s, 1.0), new)
        b = new
    return b


def residual(ops, prior, x, alpha):
    """(K,) ||(1-a) D_k - (I - a A^F_k) x_k||_2 and the relative version."""
    prior = np.asarray(prior, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    k, n, _ = ops.shape
    res = np.zeros(k)
    rel = np.zeros(k)
    for c in range(k):
        rhs = (1.0 - alpha) * prior[:, c]
        res[c] = np.linalg.norm(rhs - (x[:, c] - alpha * ops[c] @ x[:, c]))
        den = np.linalg.norm(rhs)
        rel[c] = res[c] / den if den > 0 else res[c]
    return res, rel


def spectral_radii(ops):
    """(K,) max |eigenvalue| of every dense operator."""
    return np.array([np.max(np.abs(np.linalg.eigvals(op))) for op in ops])


# ----------------------------------------------------------------------------------------------- generators


def random_edge_index(rng, n, m, *, loops=0, duplicates=0, isolated=0):
    """(2, m') random directed edge index on nodes [0, n - isolated) plus ``loops`` self-loops and
    ``duplicates`` repeated edges; the last ``isolated`` nodes have no edge at all."""
    live = n - isolated
    s = rng.integers(0, live, size=m)
    r = rng.integers(0, live, size=m)
    keep = s != r
    s, r = s[keep], r[keep]
    if loops:
        lp = rng.choice(live, size=loops, replace=False)
        s, r = np.concatenate([s, lp]), np.concatenate([r, lp])
    if duplicates and s.size:
        j = rng.integers(0, s.size, size=duplicates)
        s, r = np.concatenate([s, s[j]]), np.concatenate([r, r[j]])
    perm = rng.permutation(s.size)
    return np.stack([s[perm], r[perm]]).astype(np.int64)


def connected_edge_index(rng, n, extra):
    """Directed ring 0 -> 1 -> ... -> 0 plus ``extra`` random chords: strongly connected."""
    ring = np.stack([np.arange(n), (np.arange(n) + 1) % n])
    s = rng.integers(0, n, size=extra)
    r = rng.integers(0, n, size=extra)
    keep = s != r
    return np.concatenate([ring, np.stack([s[keep], r[keep]])], axis=1).astype(np.int64)


def random_problem(rng, n, k, *, train_frac=0.3, peaked=1.0):
    """(prior, labels, train_mask): strictly positive softmax-like prior rows, random labels, nonempty
    training mask containing every class at least once when n >= k."""
    logits = peaked * rng.normal(size=(n, k))
    prior = np.exp(logits)
    prior /= prior.sum(axis=1, keepdims=True)
    labels = rng.integers(0, k, size=n)
    labels[:k] = np.arange(k)[: min(k, n)]
    mask = rng.random(n) < train_frac
    mask[: min(k, n)] = True
    return prior, labels.astype(np.int32), mask


def unique_pairs(rng, nodes, count, exclude=()):
    """``count`` distinct unordered pairs {i, j}, i != j, from ``nodes``, avoiding ``exclude``."""
    nodes = np.asarray(nodes)
    chosen = set(tuple(sorted(p)) for p in exclude)
    start = len(chosen)
    out = []
    while len(out) < count:
        i, j = rng.choice(nodes, size=2, replace=False)
        p = (int(min(i, j)), int(max(i, j)))
        if p not in chosen:
            chosen.add(p)
            out.append(p)
    assert len(chosen) == start + count
    return np.array(out, dtype=np.int64).reshape(-1, 2).T


def directed_edges_exact(rng, n, m, *, loops=0, duplicates=0, isolated=0):
    """Exactly ``m`` directed edges (columns) on nodes [0, n - isolated): ``loops`` self-loops,
    ``duplicates`` repeats of earlier edges, the rest random non-loop edges (may repeat too)."""
    live = n - isolated
    plain = m - loops - duplicates
    s = rng.integers(0, live, size=plain)
    r = (s + rng.integers(1, live, size=plain)) % live  # r != s
    lp = rng.choice(live, size=loops, replace=False)
    s, r = np.concatenate([s, lp]), np.concatenate([r, lp])
    j = rng.integers(0, s.size, size=duplicates)
    s, r = np.concatenate([s, s[j]]), np.concatenate([r, r[j]])
    perm = rng.permutation(m)
    return np.stack([s[perm], r[perm]]).astype(np.int64)


def same_size_graphs(rng, n=40, m=200, isolated=3):
    """Edge lists of test graphs with EXACTLY ``m`` edges each once built (jaxclp kernels then compile once
    for all of them):

    * "undirected": m/2 distinct undirected pairs (isolated nodes at the end), build with symmetrize=True;
    * "undirected_loops": (m - n)/2 pairs, build with symmetrize=True, self_loops="add";
    * "directed": m edges with self-loops and repeated edges, build with symmetrize=False,
      deduplicate=False, self_loops="keep";
    * "connected_undirected": ring + chords, m/2 pairs, symmetrize=True (connected);
    * "connected_directed": directed ring + chords, m edges, symmetrize=False, deduplicate=False
      (strongly connected).

    Returns a dict kind -> (edge_index, from_edge_index kwargs).
    """
    live = np.arange(n - isolated)
    ring = [(i, (i + 1) % n) for i in range(n)]
    ring_ei = np.array(ring, dtype=np.int64).T
    chords = rng.integers(0, n, size=(2, 4 * m))
    chords = chords[:, chords[0] != chords[1]][:, : m - n]
    return {
        "undirected": (unique_pairs(rng, live, m // 2), dict()),
        "undirected_loops": (unique_pairs(rng, live, (m - n) // 2), dict(self_loops="add")),
        "directed": (directed_edges_exact(rng, n, m, loops=4, duplicates=8, isolated=isolated),
                     dict(symmetrize=False, deduplicate=False, self_loops="keep")),
        "connected_undirected": (np.concatenate([ring_ei, unique_pairs(rng, np.arange(n), m // 2 - n,
                                                                       exclude=ring)], axis=1), dict()),
        "connected_directed": (np.concatenate([ring_ei, chords], axis=1),
                               dict(symmetrize=False, deduplicate=False)),
    }


@functools.lru_cache(maxsize=None)
def _graph_specs(seed, n, m):
    rng = np.random.default_rng(seed)
    specs = same_size_graphs(rng, n=n, m=m)
    ei, kw = specs["directed"]
    kw["weights"] = rng.integers(1, 9, size=ei.shape[1]) / 4.0  # dyadic: exact in any float width
    return specs


def graph_spec(kind, *, seed=0, n=40, m=200):
    """(edge_index, from_edge_index kwargs) of the ``kind`` test graph of :func:`same_size_graphs`."""
    ei, kw = _graph_specs(seed, n, m)[kind]
    return ei, dict(kw)


def host_devices_env(devices: int | None = None, **extra: str) -> dict:
    """The environment of a test's child process: this one's, on the CPU, with ``devices`` forced host devices.

    ``XLA_FLAGS`` keeps the suite's own flags (conftest.py's SUITE_XLA_FLAGS, which compile faster) and drops any
    host device count, which the child sets itself (its scripts append ``--xla_force_host_platform_device_count``
    to ``XLA_FLAGS`` before importing jax) or ``devices`` sets here.
    """
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
    if devices is not None:
        flags.append(f"--xla_force_host_platform_device_count={int(devices)}")
    return dict(os.environ, XLA_FLAGS=" ".join(flags), JAX_PLATFORMS="cpu", **extra)
