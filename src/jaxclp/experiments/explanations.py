"""``jaxclp explain``: fit :class:`jaxclp.CLP` on a graph's labelled nodes and explain some nodes' labels exactly
(:mod:`jaxclp.explain`), in words and as JSON."""

from __future__ import annotations

import numpy as np

import jaxclp
from jaxclp.datasets import Dataset
from jaxclp.explain import hops
from jaxclp.experiments import runner

DEFAULT_PRIORS = ("mlp", "link")
"""The base predictors ``jaxclp explain`` lets :class:`jaxclp.CLP` choose from by default."""


def node_index(dataset: Dataset, ids) -> list[int]:
    """The indices of the user's node ids (as the graph's files name them); ValueError for an unknown id."""
    n = dataset.num_nodes
    names = np.asarray(dataset.node_ids) if dataset.node_ids is not None else np.arange(n)
    lookup = {str(v.item() if hasattr(v, "item") else v): i for i, v in enumerate(names)}
    out = []
    for node in ids:
        key = str(node).strip()
        if key not in lookup:
            example = ", ".join(str(v) for v in list(lookup)[:3])
            raise ValueError(f"--node {node}: no such node in {dataset.name} ({n} nodes; ids as the graph's files "
                             f"name them, e.g. {example})")
        out.append(lookup[key])
    return out


def fit_model(dataset: Dataset, *, priors=None, time_limit=None, seed: int = 0, val_fraction: float = 0.2,
              epochs: int = 500, shape_buckets: bool = False) -> jaxclp.CLP:
    """:class:`jaxclp.CLP` (closed form, the given base predictors) fitted on the dataset's labelled nodes
    (``shape_buckets``: :class:`jaxclp.CLP`'s)."""
    labels = np.asarray(dataset.labels)
    if int((labels >= 0).sum()) < 2:
        raise ValueError(f"{dataset.name} has {int((labels >= 0).sum())} labelled node(s): explain needs labelled "
                         "nodes (a label per node in the labels file, -1 or nothing for unlabelled)")
    feats, _ = runner.node_features(dataset)
    priors = list(priors or DEFAULT_PRIORS)  # one prior alone is always propagated; of several, validation chooses
    model = jaxclp.CLP(prior=priors[0] if len(priors) == 1 else priors, time_limit=time_limit, seed=seed, epochs=epochs,
                       metric=dataset.metric, shape_buckets=shape_buckets)
    return model.fit(dataset.graph, feats, labels, val_fraction=val_fraction)


def _value(v):
    return v.item() if hasattr(v, "item") else v


def explain_nodes(model: jaxclp.CLP, dataset: Dataset, ids, top: int = 5) -> tuple[list[str], dict]:
    """The sentences and the JSON document of ``jaxclp explain`` for the node ids ``ids`` (the user's).

    JSON: the model, and per node its predicted class, probability, score per class and per class the score split
    into ``labelled_term`` (the training nodes' terms, the ``top`` largest listed as ``contributions``:
    {node, label, hops, contribution}; ``other_labelled`` the rest) and ``prior_term`` (every other node's term:
    the base predictor's share), ``labelled_term + prior_term = score`` to the solver's tolerance.
    """
    index = node_index(dataset, ids)
    ex = model.explain(index, tol=1e-8)  # float32: the solves stop at the precision floor
    names = np.asarray(dataset.node_ids) if dataset.node_ids is not None else np.arange(dataset.num_nodes)
    label_values = np.asarray(dataset.label_values)
    classes = [_value(label_values[c]) for c in model.classes_]
    given = np.asarray(dataset.labels)
    train, val = np.asarray(ex.train_mask), np.asarray(model.val_mask_)  # train: the labels in the scores
    contributions = np.asarray(ex.contributions, np.float64)
    scores = np.asarray(ex.scores, np.float64)
    prior_name = model.prior_name_
    doc = {"graph": dataset.name, "classes": classes,
           "model": {"prior": prior_name, "propagated": bool(model.propagated_), "alpha": float(ex.alpha),
                     "normalization": model.normalization_, "prior_source": model.prior_source_,
                     "spectral_scale": bool(model.spectral_scale_), "method": ex.method,
                     "num_train": int(np.sum(model.train_mask_)), "num_val": int(val.sum())},
           "nodes": []}
    lines = []
    top = max(int(top), 0)
    for q, i in enumerate(index):
        dist = hops(dataset.graph, i)
        s = scores[q]
        total = s.sum()
        pred = int(np.argmax(s))
        role = ("train" if model.train_mask_[i] else "validation" if val[i]
                else "labelled" if given[i] >= 0 else "unlabelled")
        per_class = []
        for k in range(len(classes)):
            c = contributions[q, :, k]
            lab_idx = np.flatnonzero(train)
            order = lab_idx[np.lexsort((lab_idx, -c[lab_idx]))]
            order = order[c[order] > 0]
            shown = order if top == 0 else order[:top]
            labelled, prior_term = float(c[train].sum()), float(c[~train].sum())
            per_class.append({
                "class": classes[k], "score": float(s[k]), "labelled_term": labelled, "prior_term": prior_term,
                "other_labelled": float(labelled - c[shown].sum()), "num_labelled": int(order.size),
                "contributions": [{"node": _value(names[j]), "label": _value(label_values[given[j]]),
                                   "hops": int(dist[j]), "contribution": float(c[j])} for j in shown]})
        doc["nodes"].append({
            "node": _value(names[i]), "role": role,
            "label": None if given[i] < 0 else _value(label_values[given[i]]),
            "predicted": classes[pred], "probability": float(s[pred] / total) if total > 0 else None,
            "scores": [float(v) for v in s], "per_class": per_class,
            "completeness_gap": float(np.max(np.abs(contributions[q].sum(axis=0) - s)))})
        lines.append(_sentence(names[i], classes, pred, s, per_class[pred], model, prior_name))
    return lines, doc


def _sentence(name, classes, pred, s, entry, model, prior_name) -> str:
    """``node 4711 is class 1 (0.83): 61% from 12 labelled nodes within 2 hops, top: 88 (class 1, 1 hop, 22%),
    ...; 39% from the prior (mlp)``."""
    total = s.sum()
    head = f"node {_value(name)} is class {classes[pred]} ({s[pred] / total if total > 0 else 0:.2f})"
    score = entry["score"]
    if score <= 0:
        return f"{head}: score 0"
    if not model.propagated_:
        return f"{head}: 100% from the prior ({prior_name}); validation kept the prior alone (no propagation)"
    pct = lambda v: f"{100 * v / score:.0f}%"  # noqa: E731
    parts = []
    if entry["num_labelled"]:
        far = max((c["hops"] for c in entry["contributions"]), default=0)
        listed = ", ".join(f"{c['node']} (class {c['label']}, {c['hops']} hop{'' if c['hops'] == 1 else 's'}, "
                           f"{pct(c['contribution'])})" for c in entry["contributions"])
        more = ", ..." if entry["num_labelled"] > len(entry["contributions"]) else ""
        parts.append(f"{pct(entry['labelled_term'])} from {entry['num_labelled']} labelled node"
                     f"{'' if entry['num_labelled'] == 1 else 's'}"
                     + (f" (top within {far} hop{'' if far == 1 else 's'})" if listed else "")
                     + (f", top: {listed}{more}" if listed else ""))
    parts.append(f"{pct(entry['prior_term'])} from the prior ({prior_name})")
    return f"{head}: " + "; ".join(parts)


PLOT_HOPS = 2
"""Hops of a query's neighbourhood that ``jaxclp explain --plot`` draws."""
PLOT_MAX_NODES = 60
"""The most nodes drawn per query: past it, the query and the nodes with the largest terms of its predicted class."""


def neighbourhood(graph, node: int, contributions, train, max_hops: int = PLOT_HOPS,
                  max_nodes: int = PLOT_MAX_NODES) -> np.ndarray:
    """The nodes drawn for ``node``: those within ``max_hops`` edges of it (:func:`jaxclp.explain.hops`), at most
    ``max_nodes``: the query first, then labelled before unlabelled nodes, each by its term (``contributions``, (n,),
    largest first), then nearer first, then by index.

    Returns:
        (m,) node indices, the query first.
    """
    dist = hops(graph, node, max_hops)
    near = np.flatnonzero(dist >= 0)
    near = near[near != node]
    c = np.asarray(contributions, np.float64)[near]
    order = near[np.lexsort((near, dist[near], -c, ~np.asarray(train)[near]))]
    return np.concatenate([[int(node)], order[:max(int(max_nodes) - 1, 0)]]).astype(np.int64)


def plot_explanations(model: jaxclp.CLP, dataset: Dataset, ids, path, *, max_hops: int = PLOT_HOPS,
                      max_nodes: int = PLOT_MAX_NODES, seed: int = 0):
    """Draws each query's neighbourhood (:func:`neighbourhood`) into the PNG ``path``, one panel per query.

    Labelled (training) nodes are coloured by their label and sized by their term of the query's predicted class
    (area proportional to the share of the score); other nodes are small and grey; the query is drawn larger with
    a black ring, coloured by its predicted class. The layout is networkx's ``spring_layout`` with ``seed`` (the
    same picture every run); matplotlib's Agg canvas (no display needed).

    Args:
        model: the fitted :class:`jaxclp.CLP`.
        dataset: its :class:`jaxclp.datasets.Dataset` (node ids and label values for the legend).
        ids: the user's node ids (as :func:`node_index` reads them).
        path: the PNG file to write (its folder is created).
        max_hops, max_nodes: the neighbourhood drawn.
        seed: the layout's seed.

    Returns:
        The path written (:class:`pathlib.Path`).
    """
    from pathlib import Path

    import networkx as nx
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    index = node_index(dataset, ids)
    ex = model.explain(index, tol=1e-8)
    contributions = np.asarray(ex.contributions, np.float64)
    scores = np.asarray(ex.scores, np.float64)
    train = np.asarray(ex.train_mask)
    given = np.asarray(dataset.labels)
    names = np.asarray(dataset.node_ids) if dataset.node_ids is not None else np.arange(dataset.num_nodes)
    label_values = np.asarray(dataset.label_values)
    class_names = [str(_value(label_values[c])) for c in model.classes_]
    to_class = {int(c): i for i, c in enumerate(model.classes_)}  # a dataset label -> its column of the scores
    palette = [f"C{i % 10}" for i in range(len(class_names))]
    senders, receivers = np.asarray(dataset.graph.senders), np.asarray(dataset.graph.receivers)
    cols = min(len(index), 3)
    rows = -(-len(index) // cols)
    fig = Figure(figsize=(4.2 * cols, 4.0 * rows + 0.5), dpi=80)
    FigureCanvasAgg(fig)
    for q, i in enumerate(index):
        ax = fig.add_subplot(rows, cols, q + 1)
        pred = int(np.argmax(scores[q]))
        c = contributions[q, :, pred]
        nodes = neighbourhood(dataset.graph, i, c, train, max_hops, max_nodes)
        keep = np.isin(senders, nodes) & np.isin(receivers, nodes) & (senders != receivers)
        g = nx.Graph()
        g.add_nodes_from(nodes.tolist())
        g.add_edges_from(zip(senders[keep].tolist(), receivers[keep].tolist()))
        pos = nx.spring_layout(g, seed=seed)
        share = c / scores[q, pred] if scores[q, pred] > 0 else np.zeros_like(c)
        size = {int(j): 30 + 1200 * share[j] for j in nodes}
        labelled = [int(j) for j in nodes[1:] if train[j]]
        other = [int(j) for j in nodes[1:] if not train[j]]
        nx.draw_networkx_edges(g, pos, ax=ax, edge_color="0.75", width=0.6)
        nx.draw_networkx_nodes(g, pos, nodelist=other, ax=ax, node_size=20, node_color="0.7")
        nx.draw_networkx_nodes(g, pos, nodelist=labelled, ax=ax, node_size=[size[j] for j in labelled],
                               node_color=[palette[to_class[int(given[j])]] for j in labelled],
                               edgecolors="white", linewidths=0.5)
        nx.draw_networkx_nodes(g, pos, nodelist=[int(i)], ax=ax, node_size=max(size[int(i)], 250),
                               node_color=palette[pred], edgecolors="black", linewidths=2.0, node_shape="*")
        top = sorted(labelled, key=lambda j: -c[j])[:3]
        nx.draw_networkx_labels(g, pos, labels={int(i): str(_value(names[i]))} |
                                {j: str(_value(names[j])) for j in top}, ax=ax, font_size=7)
        lab = float(c[train].sum() / scores[q, pred]) if scores[q, pred] > 0 else 0.0
        ax.set_title(f"node {_value(names[i])}: class {class_names[pred]} "
                     f"({scores[q, pred] / scores[q].sum():.2f})\n{100 * lab:.0f}% from labelled nodes, "
                     f"{len(nodes)} nodes within {max_hops} hops", fontsize=8)
        ax.set_axis_off()
    handles = [Line2D([], [], marker="o", linestyle="", color=palette[k], label=f"labelled {name}")
               for k, name in enumerate(class_names)]
    handles.append(Line2D([], [], marker="o", linestyle="", color="0.7", label="other node"))
    handles.append(Line2D([], [], marker="*", linestyle="", color="0.3", markeredgecolor="black", markersize=10,
                          label="query (predicted class)"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=7, frameon=False)
    fig.text(0.5, 0.995, "size: the labelled node's share of the query's predicted-class score (CLP, exact)",
             ha="center", va="top", fontsize=7)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out
