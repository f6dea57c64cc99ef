"""Writes the worked example of ``docs/guide/explain_example.md``: a CLP fit on a real graph, exact explanations of
a few predictions, the neighbourhood plot, and a warm update after new labels arrive.

Usage::

    JAXCLP_DATA_URL=... python docs/examples/explain_example.py --dataset twitch-ru --out docs/guide

writes ``OUT/explain_example.md`` (the page), ``OUT/explain_example.png`` (the plot) and
``OUT/explain_example.json`` (the numbers). ``--dataset synthetic`` runs on a small generated graph (the test).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import jaxclp
from jaxclp.experiments import runner
from jaxclp.experiments.explanations import explain_nodes, plot_explanations

ALPHAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
KNOWN, ARRIVING = 0.5, 0.1
"""Shares of the labelled nodes known at fit time and arriving afterwards (the rest is the test set)."""


def _dataset(name: str):
    if name == "synthetic":
        return jaxclp.datasets.synthetic(0.3, avg_degree=6, num_classes=3, nodes_per_class=50, seed=0)
    return jaxclp.datasets.load(name)


def run(dataset: str, out: Path, *, epochs: int = 200, seed: int = 0) -> dict:
    """Fits, explains, plots and updates; returns the numbers the page shows (also written as JSON)."""
    ds = _dataset(dataset)
    y = np.asarray(ds.labels)
    rng = np.random.default_rng(seed)
    labelled = np.flatnonzero(y >= 0)
    order = rng.permutation(labelled)
    n_known, n_new = int(KNOWN * order.size), int(ARRIVING * order.size)
    known, arriving, test = order[:n_known], order[n_known:n_known + n_new], order[n_known + n_new:]
    given = np.full(ds.num_nodes, -1)
    given[known] = y[known]
    feats, _ = runner.node_features(ds)
    model = jaxclp.CLP(prior="mlp", alphas=ALPHAS, spectral_scale=[False, True], epochs=epochs, seed=seed,
                       num_classes=ds.num_classes,
                       metric=ds.metric)
    t = time.perf_counter()
    model.fit(ds.graph, feats, given)
    fit_s = time.perf_counter() - t
    before = model.predict()
    acc_before = float(np.mean(before[test] == y[test]))
    majority = float(np.mean(y[test] == np.bincount(y[known]).argmax()))
    # three test nodes: of the first 200 and the 50 likeliest of the second class, the one whose predicted-class
    # score owes most to labelled nodes for each of two predicted classes (the likeliest of a class none is
    # predicted), and the least confident one
    proba = np.asarray(model.predict_proba())
    pool = np.union1d(test[:200], test[np.argsort(-proba[test, 1])[:50]])
    ex = model.explain(pool)
    cls_idx = np.searchsorted(model.classes_, before[pool])
    rows = np.arange(pool.size)
    share = np.asarray(ex.labelled_term)[rows, cls_idx] / np.maximum(np.asarray(ex.scores)[rows, cls_idx], 1e-30)
    picks = []
    for cls in model.classes_[:2]:
        cand = np.flatnonzero(before[pool] == cls)
        if cand.size:
            picks.append(int(pool[cand[np.argmax(share[cand])]]))
        else:
            picks.append(int(pool[np.argmax(proba[pool, np.searchsorted(model.classes_, cls)])]))
    rest = pool[~np.isin(pool, picks)]
    picks.append(int(rest[np.argmin(proba[rest].max(axis=1))]))
    names = np.asarray(ds.node_ids) if ds.node_ids is not None else np.arange(ds.num_nodes)
    ids = [str(names[i].item() if hasattr(names[i], "item") else names[i]) for i in picks]
    lines, doc = explain_nodes(model, ds, ids, top=3)
    out.mkdir(parents=True, exist_ok=True)
    png = plot_explanations(model, ds, ids, out / "explain_example.png")
    # the update: the arriving labels join (with the fit's validation labels: every known label trains now)
    given_after = given.copy()
    given_after[arriving] = y[arriving]
    t = time.perf_counter()
    res = model.update(given_after, model.train_mask_ | np.isin(np.arange(ds.num_nodes), arriving), cold=True)
    update_s = time.perf_counter() - t
    after = model.predict()
    acc_after = float(np.mean(after[test] == y[test]))
    changed = np.flatnonzero(before != after)
    changed_test = np.intersect1d(changed, test)
    warm, cold = res.iterations
    lines_after, doc_after = explain_nodes(model, ds, ids, top=3)
    numbers = {
        "dataset": ds.name, "about": ('(Twitch\'s Russian streamers; label 1 marks an account flagged "mature"). '
                                     if ds.name.startswith("twitch") else ""), "nodes": int(ds.num_nodes), "edges": int(ds.num_undirected_edges),
        "classes": [str(v) for v in np.asarray(ds.label_values)], "labelled": int(labelled.size),
        "known": int(known.size), "arriving": int(arriving.size), "test": int(test.size),
        "model": doc["model"], "fit_s": fit_s, "sentences": lines, "explanations": doc,
        "test_accuracy_before": acc_before, "test_majority": majority, "test_accuracy_after": acc_after,
        "update": {"method": res.method, "alpha": res.alpha, "iterations_warm": None if warm is None else
                   warm.tolist(), "iterations_cold": None if cold is None else cold.tolist(),
                   "max_abs_warm_minus_cold": None if res.cold is None else
                   float(np.max(np.abs(np.asarray(res.beliefs) - np.asarray(res.cold.value)))),
                   "seconds_with_cold_check": update_s, "train_after": int(np.sum(model.train_mask_)),
                   "predictions_changed": int(changed.size), "test_predictions_changed": int(changed_test.size)},
        "sentences_after": lines_after, "explanations_after": doc_after, "plot": png.name,
        "command": "python docs/examples/explain_example.py " + " ".join(sys.argv[1:]),
    }
    (out / "explain_example.json").write_text(json.dumps(numbers, indent=1) + "\n")
    (out / "explain_example.md").write_text(page({**numbers, "_json": _repo_path(out / "explain_example.json")}))
    return numbers


def _repo_path(path: Path) -> str | None:
    """``path`` relative to the repository holding this script (posix), or None outside it."""
    repo = Path(__file__).resolve().parents[2]
    try:
        return Path(path).resolve().relative_to(repo).as_posix()
    except ValueError:
        return None


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def _n(r: dict, selector: str, fmt: str) -> str:
    """The measured value ``selector`` (dotted path) of ``r`` formatted with ``fmt``; inside the repository a
    generated inline value (``<!-- n:json:... -->``) reading it from the page's JSON, so the docs' check of
    hand-written measurements (tests/experiments/test_page_values.py) and ``python -m benchmarks.pages`` see it."""
    v = r
    for part in selector.split("."):
        v = v[part]
    text = format(v, fmt)
    path = r.get("_json")
    return f"<!-- n:json:{path}:{selector}:{fmt} -->{text}<!-- /n -->" if path else text


def page(r: dict) -> str:
    """The markdown page of :func:`run`'s numbers."""
    m, u = r["model"], r["update"]
    variant = f"{m['normalization']}, prior_source {m['prior_source']}" + (", rho-scaled" if m["spectral_scale"]
                                                                          else "")
    rows = "\n".join(f"| {k} | {w} | {c} |" for k, (w, c) in
                     enumerate(zip(u["iterations_warm"] or [], u["iterations_cold"] or [])))
    sent = "\n".join(f"    {s}" for s in r["sentences"])
    sent_after = "\n".join(f"    {s}" for s in r["sentences_after"])
    gaps = max(nd["completeness_gap"] for nd in r["explanations"]["nodes"])
    return f"""# A worked example: explaining labels on {r['dataset']}, then updating

*Generated by `{r['command']}` (numbers, figure and this page; rerun it to refresh them).*

The graph: **{r['dataset']}**, {r['nodes']:,} nodes, {r['edges']:,} undirected edges, classes {r['classes']}
{r['about']}Of its {r['labelled']:,} labelled nodes,
{r['known']:,} ({_pct(KNOWN)}) are known when the model is fitted, {r['arriving']:,} ({_pct(ARRIVING)}) arrive
afterwards, and the other {r['test']:,} are the test set, never used.

## The fit

```python
model = jaxclp.CLP(prior="mlp", alphas=(0.1, ..., 0.9, 0.95, 0.99), spectral_scale=[False, True],
                   num_classes=K)               # every class declared: an arriving label may be of any
model.fit(graph, features, labels_known)       # -1 for the unknown labels; 20% of the known held out
```

Validation chose alpha = {m['alpha']:g} ({variant}; solver `{m['method']}`), trained on {m['num_train']:,}
labelled nodes with {m['num_val']:,} held out ({_n(r, 'fit_s', '.1f')} s). Test accuracy: {_n(r, 'test_accuracy_before', '.1%')}
(the majority class alone: {_n(r, 'test_majority', '.1%')}).

## Why these labels

`model.explain(nodes)` splits each score into one exact term per source node (`jaxclp.explain`); `jaxclp explain
--node ID --top 3` prints it in words. Three test nodes (of the first 200 test nodes and the 50 likeliest to be of
the second class, the one whose score owes most to labelled nodes for each of two predicted classes, or the
likeliest of a class none is predicted, and the least confident one):

```
{sent}
```

The terms add up to the scores (largest gap {gaps:.1e}, the solver's tolerance). The prior's share is what the MLP
said about the node and its unlabelled neighbours; the labelled nodes' share is what the known labels added
through the graph.

![The three nodes' neighbourhoods](explain_example.png)

*Each panel: the node (star, coloured by its predicted class) and at most 60 nodes within 2 hops (networkx's
spring layout, seed 0); labelled nodes coloured by their label and sized by their share of the node's
predicted-class score; other nodes small and grey. `jaxclp explain --plot FILE.png` draws the same.*

## New labels arrive: a warm update

```python
res = model.update(labels_after, model.train_mask_ | arriving, cold=True)   # -1 for unknown labels
res.iterations                                 # (warm, cold) per class (cold: only with cold=True)
```

The fitted MLP prior, H, alpha and the solver stay; B0, the edge weights and the solution change. The update
trains on {u['train_after']:,} labelled nodes (the fit's training nodes and the arriving ones: `train_mask` given;
without it the fit's validation labels would join too), re-solves from the previous solution and equals the cold
solve to the solver's tolerance (largest difference {u['max_abs_warm_minus_cold']:.1e} here; {_n(r, 'update.seconds_with_cold_check', '.1f')} s
for both solves):

| class | iterations warm | iterations cold |
|---|---|---|
{rows}

{u['predictions_changed']:,} predictions changed ({u['test_predictions_changed']:,} on the test set); test
accuracy {_n(r, 'test_accuracy_before', '.1%')} -> {_n(r, 'test_accuracy_after', '.1%')}. The same three nodes, explained
after the update:

```
{sent_after}
```

On a 100,000-node graph with 1% of the nodes newly labelled, warm and cold solves of every method are compared in
`benchmarks/results/warm_update.md`.
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="twitch-ru", help="a jaxclp.datasets name, or 'synthetic' (small, fast)")
    ap.add_argument("--out", default="docs/guide", help="folder of the page, the figure and the JSON")
    ap.add_argument("--epochs", type=int, default=200, help="MLP training epochs at most")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    r = run(a.dataset, Path(a.out), epochs=a.epochs, seed=a.seed)
    print("\n".join(r["sentences"]))
    print(Path(a.out) / "explain_example.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
