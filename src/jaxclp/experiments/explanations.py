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
              epochs: int = 500) -> jaxclp.CLP:
    """:class:`jaxclp.CLP` (closed form, the given base predictors) fitted on the dataset's labelled nodes."""
    labels = np.asarray(dataset.labels)
    if int((labels >= 0).sum()) < 2:
        raise ValueError(f"{dataset.name} has {int((labels >= 0).sum())} labelled node(s): explain needs labelled "
                         "nodes (a label per node in the labels file, -1 or nothing for unlabelled)")
    feats, _ = runner.node_features(dataset)
    priors = list(priors or DEFAULT_PRIORS)  # one prior alone is always propagated; of several, validation chooses
    model = jaxclp.CLP(prior=priors[0] if len(priors) == 1 else priors, time_limit=time_limit, seed=seed, epochs=epochs,
                       metric=dataset.metric)
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
