"""Successive halving over the tuned GNN grids of ``clp``'s base predictors: what it saves, what it loses.

``python -m jaxclp.benchmarks.halving [--splits 3] [--datasets texas,...]``

``clp`` fits two tuned GNN priors per split (``gcn_tuned``, ``sage_tuned``), each a grid of 8 specs trained to
500 epochs or their early stop (patience 50), and keeps the spec with the best validation score: 55-79 % of
``clp``'s seconds on the medium-table graphs (``cost_after_r2.md``).

The rule and its adoption criterion, written before this benchmark ran:

- **Rule** (:func:`jaxclp.gnn.fit_gnn_grid` ``rungs``, :data:`jaxclp.gnn.HALVING_RUNGS` = 50, 100, 200): all 8
  specs train 50 epochs; of those not early-stopped, the better half by validation score so far (then validation
  loss) goes on to 100 epochs, the better half of those to 200, the best to the end. A spec that goes on resumes
  where it was (its result is bitwise the one it reaches without rungs, ``tests/test_gnn.py``); the others keep
  their best parameters so far and stay candidates. The spec is then chosen on validation as before.
- **Criterion**, over the 14 graphs of the medium table, splits 0..S-1 (the runner's keys and splits), both
  architectures: adopt the rule if (a) the tuned grids' seconds (compilation excluded: the first split's are
  left out of the sum) fall by at least 25 % in all, and (b) the chosen spec's validation score falls by at most
  0.5 points on average over every graph's splits and architectures, on every graph. If the rule fails, the
  fallback rungs (100, 200) are judged by the same criterion; if both fail, nothing is adopted.
- The test score of each choice is reported beside it for the reader, read after the choice; it decides nothing.

One run computes both: every spec is trained through the rungs without halving (its state read at each rung),
and halving is replayed on the recorded scores; a spec's seconds are those of the epochs it would run.
Results: ``benchmarks/results/halving.{json,md}``.
"""

from __future__ import annotations

import argparse
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp.benchmarks import _common as C

RULES = {"primary": (50, 100, 200), "fallback": (100, 200)}
MAX_VAL_DROP = 0.5  # points, per graph (mean over splits and architectures)
MIN_SAVING = 0.25  # share of the tuned grids' seconds


def trajectories(name: str, splits: int, convs=("gcn", "sage")) -> list[dict]:
    """Every spec of each tuned grid trained through all rungs of :data:`RULES` without halving, per split: its
    (best validation score, validation loss, stopped, seconds so far, test score of its best parameters) at each
    rung and at the end."""
    from jaxclp.datasets import load
    from jaxclp.experiments import methods, runner
    from jaxclp.priors import _gnn_features

    ds = load(name, root=C.data_root())
    feats, _ = runner.node_features(ds)
    x = _gnn_features(feats, ds.num_nodes, "tuned")
    from jaxclp.experiments.reproduce import BASE_SEED

    seed = BASE_SEED.get(name, 0)  # the table's (minesweeper: 1, its seed-0 split holds only mines)
    sp = runner.get_splits(ds, "medium", splits, seed)
    keys = jax.random.split(jax.random.key(seed), max(splits, 10))  # the runner's keys of a 10-split run
    labels = np.asarray(ds.labels)
    stops = sorted(set(r for rule in RULES.values() for r in rule))
    out = []
    for i in range(splits):
        tr, va, te = (np.asarray(m[i]) for m in (sp.train, sp.val, sp.test))
        y = jnp.asarray(runner.visible_labels(labels, tr, va))
        tm, vm = jnp.asarray(tr), jnp.asarray(va)
        cfg = methods.gnn_train_config(ds.metric)._replace(epochs=500, patience=50)
        for conv in convs:
            specs = methods.gnn_grid(conv)
            for j, points in enumerate(grid_trajectories(keys[i], ds.graph, x, y, tm, vm, labels, te, ds.metric,
                                                         ds.num_classes, specs, cfg, stops)):
                out.append(dict(graph=name, split=i, conv=conv, spec=j, points=points))
                C.log(f"halving: {name} split {i} {conv} spec {j}: {points[-1]['epoch']} epochs, "
                      f"val {points[-1]['val']:.4f}, {points[-1]['seconds']:.1f} s")
    return out


def grid_trajectories(key, graph, x, y, train_mask, val_mask, labels, test_mask, metric: str, num_classes: int,
                      specs, cfg, stops) -> list[list[dict]]:
    """Each spec of one tuned grid trained through the epochs ``stops`` and then to ``cfg.epochs`` without
    halving (:func:`jaxclp.gnn.fit_gnn_grid`'s programs, resumed): per spec, at each stop, its best validation
    score and loss so far, whether it stopped early, its seconds so far and the test score of its best
    parameters (``labels`` on ``test_mask``: read for the report only)."""
    from jaxclp import gnn
    from jaxclp.metrics import masked_accuracy, roc_auc

    union = gnn._grid_union(specs)
    st = dict(num_classes=int(num_classes), spec=union, cfg=cfg)
    out = []
    for s in specs:
        f = jnp.asarray([s.num_layers, s.residual, s.norm, s.ffn], jnp.int32)
        t0 = time.perf_counter()
        state = jax.block_until_ready(gnn._grid_start_jit(key, graph, x, y, train_mask, val_mask, f, **st))
        secs, points = time.perf_counter() - t0, []
        for until in list(stops) + [cfg.epochs]:
            t0 = time.perf_counter()
            state = jax.block_until_ready(gnn._grid_until_jit(state, until, key, graph, x, y, train_mask, val_mask,
                                                              f, **st))
            secs += time.perf_counter() - t0
            prior = gnn._grid_outcome_jit(state, key, graph, x, f, **st).prior
            lab, te = jnp.asarray(labels), jnp.asarray(test_mask)
            test = float(masked_accuracy(prior, lab, te) if metric == "accuracy" else roc_auc(prior, lab, te))
            points.append(dict(until=until, epoch=int(state["epoch"]), val=float(state["best_m"]),
                               loss=float(state["best_loss"]), stopped=bool(gnn.train_stopped(state, cfg.patience)),
                               seconds=secs, test=test))
        out.append(points)
    return out


def replay(specs: list[dict], rungs: tuple) -> dict:
    """Halving with ``rungs`` replayed on one grid's recorded trajectories: the chosen spec, its validation and
    test score, and the seconds the rule spends (each spec's seconds up to where it stops)."""
    def at(rec, until):
        return next(p for p in rec["points"] if p["until"] == until)

    stop_at = {j: None for j in range(len(specs))}  # None: to the end
    going = list(range(len(specs)))
    for r in rungs:
        going = [j for j in going if not at(specs[j], r)["stopped"]]
        rank = sorted(going, key=lambda j: (-at(specs[j], r)["val"], at(specs[j], r)["loss"], j))
        keep = sorted(rank[:(len(rank) + 1) // 2])
        for j in going:
            if j not in keep:
                stop_at[j] = r
        going = keep
    final = [at(s, stop_at[j]) if stop_at[j] is not None else s["points"][-1] for j, s in enumerate(specs)]
    best = 0
    for j, p in enumerate(final):  # the first spec with the best validation score, as tuned_gnn_prior
        if np.isfinite(p["val"]) and not p["val"] <= final[best]["val"]:
            best = j
    return dict(spec=best, val=final[best]["val"], test=final[best]["test"],
                seconds=sum(p["seconds"] for p in final), epochs=sum(p["epoch"] for p in final))


def summarize(trajs: list[dict]) -> dict:
    grids: dict[tuple, list] = {}
    for t in trajs:
        grids.setdefault((t["graph"], t["split"], t["conv"]), []).append(t)
    rows = []
    for (g, i, conv), specs in grids.items():
        specs = sorted(specs, key=lambda t: t["spec"])
        row = dict(graph=g, split=i, conv=conv, full=replay(specs, ()))
        for rule, rungs in RULES.items():
            row[rule] = replay(specs, rungs)
        rows.append(row)
    verdict = {}
    for rule in RULES:
        timed = [r for r in rows if r["split"] > 0]
        saving = 1 - sum(r[rule]["seconds"] for r in timed) / max(sum(r["full"]["seconds"] for r in timed), 1e-9)
        per_graph = {}
        for r in rows:
            per_graph.setdefault(r["graph"], []).append(100 * (r[rule]["val"] - r["full"]["val"]))
        drops = {g: float(np.mean(v)) for g, v in per_graph.items()}
        test = {g: float(np.mean([100 * (r[rule]["test"] - r["full"]["test"]) for r in rows if r["graph"] == g]))
                for g in per_graph}
        ok = saving >= MIN_SAVING and all(d >= -MAX_VAL_DROP for d in drops.values())
        verdict[rule] = dict(rungs=RULES[rule], saving=saving, val_change=drops, test_change=test, adopted=ok)
    chosen = next((rule for rule in RULES if verdict[rule]["adopted"]), None)
    return dict(rows=rows, verdict=verdict, adopted=chosen)


def markdown(payload: dict) -> str:
    s = payload["summary"]
    lines = ["# Successive halving over the tuned GNN grids of `clp`", "", f"Command: `{payload['command']}`", "",
             C.machine_header_md(payload["machine"]), "",
             "Rule and criterion (written before the run): see the docstring of `jaxclp.benchmarks.halving`. "
             f"Adopt if the tuned grids' seconds (first split left out: compilation) fall by >= "
             f"{100 * MIN_SAVING:.0f} % and the chosen spec's validation score falls by <= {MAX_VAL_DROP} points "
             "on every graph (mean over splits and both architectures). Test: read after, decides nothing.", ""]
    for rule, v in s["verdict"].items():
        lines += [f"## {rule}: rungs {', '.join(map(str, v['rungs']))} - "
                  f"{'adopted' if v['adopted'] else 'not adopted'}", "",
                  f"Seconds of the tuned grids: {100 * v['saving']:.0f} % less than training every spec to the end.",
                  ""]
        rows = [[g, f"{v['val_change'][g]:+.2f}", f"{v['test_change'][g]:+.2f}"] for g in v["val_change"]]
        lines += [C.md_table(["graph", "validation change (points)", "test change (points, for the reader)"], rows),
                  ""]
    lines += [f"Adopted: **{s['adopted'] or 'none'}**.", ""]
    per = {}
    for r in s["rows"]:
        d = per.setdefault(r["graph"], [0.0, 0.0, 0.0])
        if r["split"] > 0:
            d[0] += r["full"]["seconds"]
            d[1] += r["primary"]["seconds"]
            d[2] += r["fallback"]["seconds"]
    lines += ["Seconds per graph (splits after the first, both grids):", "",
              C.md_table(["graph", "every spec to the end", "primary", "fallback"],
                         [[g, f"{a:.1f}", f"{b:.1f}", f"{c:.1f}"] for g, (a, b, c) in per.items()]), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    from jaxclp.experiments.reproduce import HETEROPHILY

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--splits", type=int, default=3)
    p.add_argument("--datasets", default=",".join(HETEROPHILY))
    p.add_argument("--resume", action="store_true",
                   help="keep the graphs benchmarks/results/halving.json already holds, run the others")
    a = p.parse_args(argv)
    old = C.load_json(C.out_dir() / "halving.json") if a.resume else None
    trajs = [t for t in (old or {}).get("trajectories", []) if t["graph"] in a.datasets.split(",")]
    for name in a.datasets.split(","):
        if any(t["graph"] == name for t in trajs):
            continue
        trajs += trajectories(name, a.splits)
        payload = {"command": "python -m jaxclp.benchmarks.halving " + " ".join(argv if argv is not None
                                                                               else sys.argv[1:]),
                   "machine": C.machine_info(), "trajectories": trajs, "summary": summarize(trajs)}
        C.save_report("halving", payload, markdown(payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
