"""Racing the tuned GNN grids of ``clp`` against the base predictors already fitted: what it saves, what it loses.

``python -m benchmarks.racing``

``clp`` fits its base predictors cheap first (:data:`jaxclp.search.CLP_PRIOR_CANDIDATES`: the MLP,
LINK, LINKX, GCN, H2GCN, then the two tuned GNN grids) and then keeps the predictor with the best validation score
(:func:`jaxclp.experiments.candidates.select_prior_first`). The two tuned grids (8 specs each, lr 1e-3, up to 500
epochs, patience 50) are 42-78 % of ``clp``'s seconds (``cost_cpu.md``), yet on most splits of most graphs
none of their specs ends above the cheap predictors' best validation score: the grid was trained for nothing.

The rule and its adoption criterion, written before this benchmark was run or its data read:

- **Rule** (``race``: race points P, margin delta): the *incumbent* v* is the best validation score of the base
  predictors fitted before the tuned grids on the same split (``mlp, link, linkx, gcn, h2gcn``). Each tuned grid
  trains as today (gated successive halving, :data:`jaxclp.gnn.HALVING_RUNGS` from
  :data:`jaxclp.gnn.HALVING_MIN_VAL` validation nodes); at each race point p (an epoch count), after the halving
  of that rung if any, every spec still training whose best validation score so far is below v* - delta stops
  there and keeps its best parameters so far (it stays a candidate of its grid). Racing only removes training
  that today's rule does: a spec that is never stopped by it ends exactly where it ends today.
- **Arms**, judged in this order: *primary* P = (50, 100, 200), delta = 2 points; *fallback* P = (100, 200),
  delta = 3 points. The first arm that passes is adopted; if neither passes, nothing is.
- **Criterion**, over the 14 graphs of the medium table, splits 0..2 (the runner's keys and splits; the spec
  trajectories of ``halving.json``, the other predictors' validation scores from the ``clp`` records of
  ``results/table2``), both grids: adopt if (a) the tuned grids' seconds (compilation excluded: the first split
  left out) fall by at least 25 % in all against today's rule, and (b) the validation score of the predictor
  ``clp`` chooses (the best of all seven predictors' validation scores) falls by at most 0.5 points on average
  over each graph's splits, on every graph. The arm adopted must then also pass (b) on the held-out graphs with
  recorded trajectories (``halving_held_out.json``: ACM and DBLP dense, Coauthor-CS and Coauthor-Physics medium,
  2 splits; incumbents from the ``clp`` records of ``results/table_homophily``).
- The test score of the predictor chosen is reported beside it for the reader, read after the choice; it decides
  nothing.

The rule is replayed, not implemented in :func:`jaxclp.gnn.fit_gnn_grid` (it was not adopted): a spec's seconds
are those of the epochs it runs (``halving.json``'s seconds so far at each rung), its validation score the best so
far where it stops, as :func:`benchmarks.halving.outcome` reads them. Results:
``benchmarks/results/racing.{json,md}``.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

import numpy as np

from benchmarks import _common as C
from benchmarks.halving import MAX_VAL_DROP, _grids, outcome, point_at

ARMS = {"primary": ((50, 100, 200), 0.02), "fallback": ((100, 200), 0.03)}
CHEAP = ("mlp", "link", "linkx", "gcn", "h2gcn")  # fitted before the tuned grids (CLP_PRIOR_CANDIDATES' order)
TUNED = ("gcn_tuned", "sage_tuned")
MIN_SAVING = 0.25  # share of the tuned grids' seconds (splits after the first)
HELD_OUT_TABLE = "table_homophily"  # holds clp records of the held-out graphs on these split kinds
HELD_OUT_SPLITS = {"acm": "dense", "dblp": "dense", "coauthor-cs": "medium", "coauthor-physics": "medium"}


def replay(specs: list[dict], floor: float | None, race: tuple = ()) -> dict:
    """Today's rule (gated halving) with racing against ``floor`` at the epochs ``race`` (None: no racing), replayed
    on one grid's recorded trajectories (:func:`benchmarks.halving.trajectories`): the chosen spec, its
    validation and test score, the seconds the rule spends (each spec's seconds up to where it stops)."""
    from jaxclp.gnn import HALVING_MIN_VAL, HALVING_RUNGS

    at = point_at
    halve = HALVING_RUNGS if specs[0]["num_val"] >= HALVING_MIN_VAL else ()
    points = sorted(set(halve) | (set(race) if floor is not None else set()))
    stop_at = {j: None for j in range(len(specs))}
    going = list(range(len(specs)))
    for r in points:
        going = [j for j in going if not at(specs[j], r)["stopped"]]
        keep = going
        if r in halve:
            rank = sorted(going, key=lambda j: (-at(specs[j], r)["val"], at(specs[j], r)["loss"], j))
            keep = sorted(rank[:(len(rank) + 1) // 2])
        if floor is not None and r in race:
            keep = [j for j in keep if not at(specs[j], r)["val"] < floor]
        for j in going:
            if j not in keep:
                stop_at[j] = r
        going = keep
    return outcome(specs, stop_at)


def best_on_validation(scores: dict, names: list) -> str:
    """The predictor of ``names`` with the best validation score in ``scores`` (``{name: {"val", ...}}``), the first
    of ``names`` on ties: ``clp``'s choice among predictors taken alone."""
    return max(names, key=lambda n: (scores[n]["val"], -names.index(n)))


def references(table: str, splits: dict[str, str]) -> dict[str, dict[int, dict]]:
    """``dataset -> run -> {predictor: {"val", "test"}}`` from the ``clp`` records of ``results/TABLE`` (their
    references), for each dataset of ``splits`` on its split kind (read in one pass)."""
    out = {g: {} for g in splits}
    for line in (Path("results") / table / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("type") == "result" and r.get("method") == "clp" and splits.get(r["dataset"]) == r["split"]:
            ref = r["references"]
            out[r["dataset"]][int(r["run"])] = ast.literal_eval(ref) if isinstance(ref, str) else ref
    return out


def validation_sizes(trajs: list[dict], split_kind: str = "medium") -> None:
    """Fills in each trajectory's ``num_val`` (validation nodes of its split; ``halving.json`` predates the field)
    from the runner's splits of its graph."""
    from jaxclp.datasets import load
    from jaxclp.experiments import runner
    from jaxclp.experiments.reproduce import BASE_SEED

    sizes = {}
    for t in trajs:
        if "num_val" in t:
            continue
        g = t["graph"]
        if g not in sizes:
            ds = load(g, root=C.data_root())
            sp = runner.get_splits(ds, split_kind, 3, BASE_SEED.get(g, 0))
            sizes[g] = [int(np.asarray(v).sum()) for v in sp.val]
        t["num_val"] = sizes[g][t["split"]]


def rows(trajs: list[dict], refs: dict[str, dict[int, dict]]) -> list[dict]:
    """Per (graph, split): today's tuned grids and each arm's, and the predictor ``clp`` chooses under each (the
    first with the best validation score among the cheap ones and the two grids, in fitting order)."""
    grids = _grids(trajs)
    out = []
    for g, i in dict.fromkeys((g, i) for g, i, _ in grids):
        ref = refs[g][i]
        incumbent = max(ref[n]["val"] for n in CHEAP if n in ref)
        row = dict(graph=g, split=i, incumbent=incumbent, recorded={n: ref[n]["val"] for n in TUNED if n in ref})
        for arm, (race, delta) in [("today", ((), None))] + list(ARMS.items()):
            tuned = {f"{conv}_tuned": replay(grids[(g, i, conv)], None if delta is None else incumbent - delta, race)
                     for conv in ("gcn", "sage")}
            scores = {n: ref[n] for n in CHEAP if n in ref} | tuned
            name = best_on_validation(scores, list(scores))
            row[arm] = dict(choice=name, val=scores[name]["val"], test=scores[name]["test"],
                            seconds=sum(t["seconds"] for t in tuned.values()),
                            tuned_val={n: t["val"] for n, t in tuned.items()})
            if arm == "today":  # what no racing rule can beat: the grids that end above the incumbent, nothing else
                row["oracle_seconds"] = sum(t["seconds"] for t in tuned.values() if not t["val"] < incumbent)
        out.append(row)
    return out


def judge(rs: list[dict], arm: str, need_saving: bool = True) -> dict:
    timed = [r for r in rs if r["split"] > 0]
    saving = 1 - sum(r[arm]["seconds"] for r in timed) / max(sum(r["today"]["seconds"] for r in timed), 1e-9)
    graphs = list(dict.fromkeys(r["graph"] for r in rs))
    change = {k: {g: float(np.mean([100 * (r[arm][k] - r["today"][k]) for r in rs if r["graph"] == g]))
                  for g in graphs} for k in ("val", "test")}
    changed = {g: sum(r[arm]["choice"] != r["today"]["choice"] for r in rs if r["graph"] == g) for g in graphs}
    secs = {g: [sum(r[k]["seconds"] for r in timed if r["graph"] == g) for k in ("today", arm)] for g in graphs}
    ok = (saving >= MIN_SAVING or not need_saving) and all(d >= -MAX_VAL_DROP for d in change["val"].values())
    return dict(saving=saving, val_change=change["val"], test_change=change["test"], choice_changed=changed,
                seconds=secs, passes=ok)


def oracle(rs: list[dict]) -> dict:
    """The bound on any racing rule: the share of today's tuned-grid seconds (splits after the first) spent on grids
    that end below the incumbent (an oracle that skips exactly those, at no cost), overall and per graph."""
    timed = [r for r in rs if r["split"] > 0]
    share = lambda xs: 1 - sum(r["oracle_seconds"] for r in xs) / max(sum(r["today"]["seconds"] for r in xs), 1e-9)  # noqa: E731
    return dict(saving=share(timed), per_graph={g: share([r for r in timed if r["graph"] == g])
                                                for g in dict.fromkeys(r["graph"] for r in rs)})


def main_job_bound(per_graph: dict[str, float], out: Path) -> dict:
    """What the oracle's saving would make of the main job (a model, not a measurement): per graph, the main job's
    wall seconds (``main_job.json``) less wall x ``clp``'s share of the records x the tuned grids' share of
    ``clp``'s wall (``cost_cpu.json``, 2 splits) x the oracle's saving on that graph."""
    job, cost = C.load_json(out / "main_job.json"), C.load_json(out / "cost_cpu.json")
    tuned = {r["dataset"]: sum(r["stages"][f"prior {n}"]["wall"] for n in TUNED) / r["wall"] for r in cost["rows"]}
    share = {c["graph"]: c["clp_share"] for c in job["cost"]}
    wall = {g: t["seconds"] for g, t in job["times"].items()}
    saved = {g: wall[g] * share[g] * tuned[g] * per_graph.get(g, 0.0) for g in wall}
    none = {g: wall[g] * share[g] * tuned[g] for g in wall}
    return dict(minutes=sum(wall.values()) / 60, bound_minutes=(sum(wall.values()) - sum(saved.values())) / 60,
                without_tuned_minutes=(sum(wall.values()) - sum(none.values())) / 60)


def summarize(medium: list[dict], held: list[dict]) -> dict:
    verdict, adopted = {}, None
    for arm in ARMS:
        v = dict(race=ARMS[arm][0], delta=ARMS[arm][1], medium=judge(medium, arm),
                 held_out=judge(held, arm, need_saving=False) if held else None)
        v["adopted"] = adopted is None and v["medium"]["passes"] and (not held or v["held_out"]["passes"])
        if v["adopted"]:
            adopted = arm
        verdict[arm] = v
        if adopted is None and v["medium"]["passes"]:
            break  # the first arm passing the medium table is the one judged on the held-out graphs
    return dict(verdict=verdict, adopted=adopted, oracle={"medium": oracle(medium), "held_out": oracle(held)})


def _section(title: str, j: dict, with_seconds: bool) -> list[str]:
    head = ["graph", "validation change (points)", "test change (for the reader)", "choice changed (splits)"]
    if with_seconds:
        head += ["s today (splits > 0)", "s racing"]
    body = []
    for g in j["val_change"]:
        row = [g, f"{j['val_change'][g]:+.2f}", f"{j['test_change'][g]:+.2f}", str(j["choice_changed"][g])]
        if with_seconds:
            row += [f"{j['seconds'][g][0]:.1f}", f"{j['seconds'][g][1]:.1f}"]
        body.append(row)
    return [title, "", C.md_table(head, body), ""]


def markdown(payload: dict) -> str:
    s = payload["summary"]
    lines = ["# Racing the tuned GNN grids of `clp` against the predictors fitted before them", "",
             f"Command: `{payload['command']}`", "",
             "Data: the spec trajectories of `halving.json` (medium table, splits 0-2) and `halving_held_out.json` "
             "(ACM, DBLP dense; Coauthor-CS, Coauthor-Physics medium; splits 0-1), the other predictors' "
             "validation scores from the `clp` records of `results/table2` and `results/table_homophily`. "
             "No model is fitted: the rule is replayed on recorded trajectories.", "",
             "Rule and criterion (written before the replay): the docstring of `benchmarks.racing`. Adopt "
             f"the first arm whose tuned-grid seconds fall by >= {100 * MIN_SAVING:.0f} % (splits after the "
             f"first) and whose chosen predictor's validation score falls by <= {MAX_VAL_DROP} points on every "
             "medium-table graph (mean over splits), and by as little on every held-out graph. Test: read after, "
             "decides nothing.", ""]
    for arm, v in s["verdict"].items():
        lines += [f"## {arm}: race at epochs {', '.join(map(str, v['race']))}, margin {100 * v['delta']:g} points"
                  f" - {'adopted' if v['adopted'] else 'not adopted'}", "",
                  f"Seconds of the tuned grids on the medium table: {100 * v['medium']['saving']:.0f} % less than "
                  f"today's rule; criterion {'met' if v['medium']['passes'] else 'not met'} there.", ""]
        lines += _section("Medium table (splits 0-2):", v["medium"], True)
        if v["held_out"] is not None:
            lines += [f"Held-out graphs: {100 * v['held_out']['saving']:.0f} % of the tuned grids' seconds saved; "
                      f"criterion (b) {'met' if v['held_out']['passes'] else 'not met'}.", ""]
            lines += _section("Held-out graphs (splits 0-1):", v["held_out"], True)
    lines += [f"Adopted: **{s['adopted'] or 'none'}**.", ""]
    o = s["oracle"]
    lines += ["## The bound on any racing rule", "",
              "An oracle that skips, at no cost, exactly the tuned grids whose best spec ends below the incumbent "
              "(and trains the others as today) would save "
              f"{100 * o['medium']['saving']:.0f} % of the tuned grids' seconds on the medium table and "
              f"{100 * o['held_out']['saving']:.0f} % on the held-out graphs (splits after the first). Per graph:", "",
              C.md_table(["graph", "oracle saving"],
                         [[g, f"{100 * v:.0f} %"] for part in ("medium", "held_out")
                          for g, v in o[part]["per_graph"].items()]), "",
              f"On the main job (`main_job.md`: {s['main_job']['minutes']:.0f} min), that oracle would leave about "
              f"{s['main_job']['bound_minutes']:.0f} min (a model: per graph, the wall time less its `clp` share x the "
              "tuned grids' share of `clp` (`cost_cpu.md`) x the oracle's saving), and leaving the tuned grids out "
              f"altogether about {s['main_job']['without_tuned_minutes']:.0f} min: the 30-minute target is out of "
              "reach of any rule that only decides which tuned grids to train.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.parse_args(argv)
    out = C.out_dir()
    medium_trajs = C.load_json(out / "halving.json")["trajectories"]
    held_trajs = C.load_json(out / "halving_held_out.json")["trajectories"]
    validation_sizes(medium_trajs)
    refs = references("table2", {t["graph"]: "medium" for t in medium_trajs})
    held_refs = references(HELD_OUT_TABLE, {t["graph"]: HELD_OUT_SPLITS[t["graph"]] for t in held_trajs})
    medium, held = rows(medium_trajs, refs), rows(held_trajs, held_refs)
    summary = summarize(medium, held)
    summary["main_job"] = main_job_bound(summary["oracle"]["medium"]["per_graph"], out)
    payload = {"command": "python -m benchmarks.racing " + " ".join(argv if argv is not None
                                                                          else sys.argv[1:]),
               "rows": {"medium": medium, "held_out": held}, "summary": summary}
    C.save_report("racing", payload, markdown(payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
