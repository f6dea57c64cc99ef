"""Small inputs the tests of several folders build (files under tmp_path, graphs), so that no test module imports
another."""

import contextlib
import logging
import re

import jax
import jax.numpy as jnp
import numpy as np

import jaxclp


def platonov_npz(path, n=40, classes=2, masks=True, seed=0):
    """A Platonov et al. layout .npz at ``path``: a ring of ``n`` nodes, ``classes`` labels, random features, and
    (``masks``) 3 published splits (2/4 train, 1/4 val, 1/4 test)."""
    rng = np.random.default_rng(seed)
    edges = np.stack([np.arange(n), (np.arange(n) + 1) % n], 1)
    arrays = {"node_features": rng.random((n, 3)).astype(np.float32), "node_labels": np.arange(n) % classes,
              "edges": edges}
    if masks:
        part = np.stack([np.roll(np.arange(n) % 4, s) for s in range(3)])  # 3 splits: 2/4 train, 1/4 val, 1/4 test
        arrays |= {"train_masks": part < 2, "val_masks": part == 2, "test_masks": part == 3}
    np.savez(path, **arrays)
    return path


def features_graph(seed=0, n=300, k=3, d=8, h=0.1):
    """A synthetic graph of ``k`` classes with features that carry the class (a shifted one-hot block), and random
    train (20 %) / validation (about 20 %) masks: ``(graph, x, y, train, val)``."""
    syn = jaxclp.datasets.synthetic(h=h, avg_degree=6, num_classes=k, nodes_per_class=n // k, seed=seed)
    rng = np.random.default_rng(seed)
    y = np.asarray(syn.labels)
    x = rng.normal(size=(n, d)).astype(np.float32)
    x[:, :k] += 1.5 * np.eye(k)[y]
    tm = rng.random(n) < 0.2
    vm = (~tm) & (rng.random(n) < 0.25)
    return syn.graph, x, y, tm, vm


def explain_files(tmp_path, labelled=True):
    """``jaxclp explain`` arguments for a 45-node, 3-class edge list (80% of edges within classes) and labels
    (60% labelled; none with ``labelled=False``), written as CSV files under ``tmp_path``."""
    rng = np.random.default_rng(0)
    n = 45
    y = np.repeat([0, 1, 2], 15)
    edges = set()
    for i in range(n):
        for _ in range(3):
            j = int(rng.choice(np.flatnonzero(y == y[i]))) if rng.random() < 0.8 else int(rng.integers(n))
            if i != j:
                edges.add((min(i, j), max(i, j)))
    (tmp_path / "edges.csv").write_text("src,dst\n" + "".join(f"n{a},n{b}\n" for a, b in sorted(edges)))
    names = ["ant", "bee", "cat"]
    rows = [f"n{i},{names[y[i]] if labelled and rng.random() < 0.6 else ''}\n" for i in range(n)]
    (tmp_path / "labels.csv").write_text("node,label\n" + "".join(rows))
    return ["explain", "--graph", str(tmp_path / "edges.csv"), "--labels", str(tmp_path / "labels.csv")]


def noisy_prior_problem(seed=0, n=300, k=3):
    """A homophilous synthetic graph (n nodes, k classes), its labels, random train (20 %) / validation masks and a
    prior that points at the true class on 60 % of the nodes and at the next class elsewhere:
    ``(graph, y, train_mask, val_mask, prior)``."""
    syn = jaxclp.datasets.synthetic(h=0.8, avg_degree=6, num_classes=k, nodes_per_class=n // k, seed=seed)
    rng = np.random.default_rng(seed)
    y = np.asarray(syn.labels)
    tm = rng.random(n) < 0.2
    vm = (~tm) & (rng.random(n) < 0.25)
    prior = jnp.asarray(0.5 / k + 0.5 * np.eye(k)[np.where(rng.random(n) < 0.6, y, (y + 1) % k)])
    return syn.graph, y, tm, vm, prior


def propagation_problem(n=173, k=3, seed=7):
    """A random graph of ``n`` nodes (4n draws of directed pairs, loops dropped), ``k`` labels, a softmax prior
    leaning to them and random train (~30 %) / validation (~30 % of the rest) masks: ``(graph, prior, labels,
    train, val)`` for label propagation's and C&S's tests."""
    rng = np.random.default_rng(seed)
    m = 4 * n
    s, r = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = s != r
    g = jaxclp.Graph.from_edge_index(np.stack([s[keep], r[keep]]), n)
    y = rng.integers(0, k, n)
    prior = jax.nn.softmax(jnp.asarray(rng.normal(size=(n, k)) + 2.0 * np.eye(k)[y]), axis=1)
    train = jnp.asarray(rng.random(n) < 0.3)
    val = jnp.asarray((rng.random(n) < 0.3) & ~np.asarray(train))
    return g, jax.block_until_ready(prior), jnp.asarray(y), train, val


@contextlib.contextmanager
def compiled_programs():
    """Collects the names of the XLA programs compiled inside the block."""
    names = []

    class Handler(logging.Handler):
        def emit(self, record):
            m = re.match(r"Finished XLA compilation of jit\((.*)\) in", record.getMessage())
            if m and not getattr(record, "counted", False):  # a record reaches both loggers: count it once
                record.counted = True
                names.append(m.group(1))

    handler = Handler(level=logging.DEBUG)
    loggers = [logging.getLogger(n) for n in ("jax", "jax._src")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    before = jax.config.jax_log_compiles
    jax.config.update("jax_log_compiles", True)  # every thread's (jax.log_compiles sets its own thread's only)
    try:
        yield names
    finally:
        jax.config.update("jax_log_compiles", before)
        for lg, level in zip(loggers, levels):
            lg.removeHandler(handler)
            lg.setLevel(level)
