"""Successive halving over the tuned GNN grids of ``clp``'s base predictors: what it saves, what it loses.

``python -m benchmarks.halving [--splits 3] [--datasets texas,...]``

``clp`` fits two tuned GNN priors per split (``gcn_tuned``, ``sage_tuned``), each a grid of 8 specs trained to
500 epochs or their early stop (patience 50), and keeps the spec with the best validation score: 55-79 % of
``clp``'s seconds on the medium-table graphs (``cost_after_r2.md``, in the git history).

The rule and its adoption criterion, written before this benchmark ran:

- **Rule** (:func:`jaxclp.gnn.fit_gnn_grid` ``rungs``, :data:`jaxclp.gnn.HALVING_RUNGS` = 50, 100, 200): all 8
  specs train 50 epochs; of those not early-stopped, the better half by validation score so far (then validation
  loss) goes on to 100 epochs, the better half of those to 200, the best to the end. A spec that goes on resumes
  where it was (its result is bitwise the one it reaches without rungs, ``tests/priors/test_gnn.py``); the others keep
  their best parameters so far and stay candidates. The spec is then chosen on validation as before.
- **Criterion**, over the 14 graphs of the medium table, splits 0..S-1 (the runner's keys and splits), both
  architectures: adopt the rule if (a) the tuned grids' seconds (compilation excluded: the first split's are
  left out of the sum) fall by at least 25 % in all, and (b) the chosen spec's validation score falls by at most
  0.5 points on average over every graph's splits and architectures, on every graph. If the rule fails, the
  fallback rungs (100, 200) are judged by the same criterion; if both fail, nothing is adopted.
- The test score of each choice is reported beside it for the reader, read after the choice; it decides nothing.

**A second rule, written after the result above (halving failed on the three airport graphs only, whose validation
sets hold 13-119 nodes; on the graphs with at least 500 validation nodes it cost at most 0.26 points), and judged
only on graphs that result did not see** (``--held-out``): *gated* halving, the primary rungs on a split with at
least :data:`GATE` = 500 validation nodes (one node at most 0.2 points), every spec to the end below it.
Held-out graphs: ACM and DBLP on their dense split (968 and 1,298 validation nodes), Coauthor-CS and
Coauthor-Physics on the medium split (1,833 and 3,449); 2 splits each. Criterion as above: the grids' seconds fall
by at least 25 % in all (first split left out), and the chosen spec's validation score falls by at most 0.5
points on every held-out graph. Results: ``benchmarks/results/halving_held_out.{json,md}``. Adopting it changes
``clp``'s records, so it waits for a table re-run.

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

from benchmarks import _common as C

RULES = {"primary": (50, 100, 200), "fallback": (100, 200)}
GATE = 500  # validation nodes from which the gated rule halves (jaxclp.gnn.HALVING_MIN_VAL)
HELD_OUT = {"acm": "dense", "dblp": "dense", "coauthor-cs": "medium", "coauthor-physics": "medium"}
MAX_VAL_DROP = 0.5  # points, per graph (mean over splits and architectures)
MIN_SAVING = 0.25  # share of the tuned grids' seconds


def trajectories(name: str, splits: int, convs=("gcn", "sage"), split_kind: str = "medium") -> list[dict]:
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
    sp = runner.get_splits(ds, split_kind, splits, seed)
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
                out.append(dict(graph=name, split=i, conv=conv, spec=j, points=points, num_val=int(va.sum()),
                                split_kind=split_kind))
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
    from jaxclp.train import blank_state

    union = gnn._grid_union(specs)
    st = dict(num_classes=int(num_classes), spec=union, cfg=cfg)
    out = []
    for s in specs:
        f = jnp.asarray([s.num_layers, s.residual, s.norm, s.ffn], jnp.int32)
        t0 = time.perf_counter()
        state = blank_state(gnn._grid_start, key, graph, x, y, train_mask, val_mask, f, key=key, **st)
        secs, points = time.perf_counter() - t0, []
        for i, until in enumerate(list(stops) + [cfg.epochs]):
            t0 = time.perf_counter()
            state, res = jax.block_until_ready(gnn._grid_chunk_jit(state, np.bool_(i == 0), np.int32(until), key,
                                                                   graph, x, y, train_mask, val_mask, f, **st))
            secs += time.perf_counter() - t0
            prior = res.prior
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
    at = point_at
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
    return outcome(specs, stop_at)


def point_at(rec: dict, until: int) -> dict:
    """The recorded point of one spec's trajectory at the rung ``until``."""
    return next(p for p in rec["points"] if p["until"] == until)


def outcome(specs: list[dict], stop_at: dict) -> dict:
    """One grid's result when spec ``j`` stops at the rung ``stop_at[j]`` (None: trained to the end): the spec
    chosen on validation (the first with the best score, as ``tuned_gnn_prior``), its validation and test score,
    and the seconds and epochs of all specs up to where they stop."""
    final = [point_at(s, stop_at[j]) if stop_at[j] is not None else s["points"][-1] for j, s in enumerate(specs)]
    best = 0
    for j, p in enumerate(final):
        if np.isfinite(p["val"]) and not p["val"] <= final[best]["val"]:
            best = j
    return dict(spec=best, val=final[best]["val"], test=final[best]["test"],
                seconds=sum(p["seconds"] for p in final), epochs=sum(p["epoch"] for p in final))


def _grids(trajs: list[dict]) -> dict[tuple, list]:
    """``(graph, split, conv) -> that grid's trajectories``, in spec order."""
    grids: dict[tuple, list] = {}
    for t in trajs:
        grids.setdefault((t["graph"], t["split"], t["conv"]), []).append(t)
    return {k: sorted(v, key=lambda t: t["spec"]) for k, v in grids.items()}


def _judge(rows: list[dict], arm: str) -> dict:
    """The criterion on ``rows``' arm ``arm`` against ``"full"``: seconds saved (splits after the first), the mean
    validation and test change per graph (points), and whether it passes."""
    timed = [r for r in rows if r["split"] > 0]
    saving = 1 - sum(r[arm]["seconds"] for r in timed) / max(sum(r["full"]["seconds"] for r in timed), 1e-9)
    graphs = list(dict.fromkeys(r["graph"] for r in rows))
    change = {k: {g: float(np.mean([100 * (r[arm][k] - r["full"][k]) for r in rows if r["graph"] == g]))
                  for g in graphs} for k in ("val", "test")}
    ok = saving >= MIN_SAVING and all(d >= -MAX_VAL_DROP for d in change["val"].values())
    return dict(saving=saving, val_change=change["val"], test_change=change["test"], adopted=ok)


def summarize(trajs: list[dict]) -> dict:
    rows = []
    for (g, i, conv), specs in _grids(trajs).items():
        rows.append(dict(graph=g, split=i, conv=conv, full=replay(specs, ()),
                         **{rule: replay(specs, rungs) for rule, rungs in RULES.items()}))
    verdict = {rule: dict(rungs=RULES[rule], **_judge(rows, rule)) for rule in RULES}
    chosen = next((rule for rule in RULES if verdict[rule]["adopted"]), None)
    return dict(rows=rows, verdict=verdict, adopted=chosen)


def summarize_gated(trajs: list[dict], gate: int = GATE) -> dict:
    """The gated rule on held-out graphs: the primary rungs where a split has at least ``gate`` validation nodes,
    every spec to the end below it; seconds saved (splits after the first) and validation change per graph."""
    rows = []
    for (g, i, conv), specs in _grids(trajs).items():
        gated = specs[0]["num_val"] >= gate
        rows.append(dict(graph=g, split=i, conv=conv, num_val=specs[0]["num_val"], gated=gated,
                         full=replay(specs, ()), rule=replay(specs, RULES["primary"] if gated else ())))
    timed = [r for r in rows if r["split"] > 0]
    graphs = sorted({r["graph"] for r in rows})
    secs = {g: [sum(r[k]["seconds"] for r in timed if r["graph"] == g) for k in ("full", "rule")] for g in graphs}
    judged = _judge(rows, "rule")
    order = lambda d: {g: d[g] for g in graphs}  # noqa: E731
    return dict(rows=rows, gate=gate, saving=judged["saving"], val_change=order(judged["val_change"]),
                test_change=order(judged["test_change"]), seconds=secs, adopted=judged["adopted"])


def markdown_gated(payload: dict) -> str:
    s = payload["summary"]
    lines = ["# Gated successive halving on held-out graphs", "", f"Command: `{payload['command']}`", "",
             C.machine_header_md(payload["machine"]), "",
             f"Rule (written after `halving.md`, judged here only): the rungs {RULES['primary']} on a split with at "
             f"least {s['gate']} validation nodes, every spec to the end below. Criterion: the grids' seconds "
             f"fall by >= {100 * MIN_SAVING:.0f} % (first split left out) and the chosen spec's validation score "
             f"by <= {MAX_VAL_DROP} points on every graph. Test: read after, decides nothing.", "",
             f"Seconds of the tuned grids: {100 * s['saving']:.0f} % less. "
             f"**{'Passes' if s['adopted'] else 'Fails'}** the criterion.", ""]
    nval = {}
    for r in s["rows"]:
        nval.setdefault(r["graph"], set()).add(r["num_val"])
    rows = [[g, "/".join(map(str, sorted(nval[g]))), f"{s['val_change'][g]:+.2f}", f"{s['test_change'][g]:+.2f}",
             f"{s['seconds'][g][0]:.1f}", f"{s['seconds'][g][1]:.1f}"] for g in s["val_change"]]
    lines += [C.md_table(["graph", "validation nodes", "validation change (points)", "test change (for the reader)",
                          "s, every spec to the end", "s, gated halving"], rows), ""]
    return "\n".join(lines)


def markdown(payload: dict) -> str:
    s = payload["summary"]
    lines = ["# Successive halving over the tuned GNN grids of `clp`", "", f"Command: `{payload['command']}`", "",
             C.machine_header_md(payload["machine"]), "",
             "Rule and criterion (written before the run): see the docstring of `benchmarks.halving`. "
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
    p.add_argument("--held-out", action="store_true",
                   help="the gated rule on the held-out graphs (HELD_OUT; --datasets and --splits default to them "
                        "and 2); results halving_held_out.*")
    a = p.parse_args(argv)
    command = "python -m benchmarks.halving " + " ".join(argv if argv is not None else sys.argv[1:])
    if a.held_out:
        names = list(HELD_OUT) if a.datasets == ",".join(HETEROPHILY) else a.datasets.split(",")
        trajs = []
        for name in names:
            trajs += trajectories(name, a.splits if "--splits" in (argv or sys.argv) else 2,
                                  split_kind=HELD_OUT.get(name, "medium"))
            payload = {"command": command, "machine": C.machine_info(), "trajectories": trajs,
                       "summary": summarize_gated(trajs)}
            C.save_report("halving_held_out", payload, markdown_gated(payload))
        return 0
    old = C.load_json(C.out_dir() / "halving.json") if a.resume else None
    trajs = [t for t in (old or {}).get("trajectories", []) if t["graph"] in a.datasets.split(",")]
    for name in a.datasets.split(","):
        if any(t["graph"] == name for t in trajs):
            continue
        trajs += trajectories(name, a.splits)
        payload = {"command": "python -m benchmarks.halving " + " ".join(argv if argv is not None
                                                                               else sys.argv[1:]),
                   "machine": C.machine_info(), "trajectories": trajs, "summary": summarize(trajs)}
        C.save_report("halving", payload, markdown(payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
