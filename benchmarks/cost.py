"""Where `clp`'s seconds go, per graph and split: compilation, prior fits (by predictor), CLP candidates, selection.

``python -m benchmarks.cost [--datasets a,b] [--runs S] [--method clp] [--tag before]`` runs the runner's
method (default ``clp``) on ``S`` medium splits of each graph, exactly as ``jaxclp run`` does (same contexts,
same records; the persistent XLA cache off, so every compilation is paid), with the library calls it makes
wrapped in stage timers (:class:`benchmarks.compile_time._Recorder`: exclusive wall time per stage,
and JAX's own compile events attributed to the innermost stage):

* ``mlp priors``: the runner's MLP priors, every depth, vmapped over the splits (shared by every method that
  builds on the MLP; the record's ``seconds`` add its per-split share);
* ``prior <name>``: each base predictor ``clp`` fits (LINK, LINKX, GCN, H2GCN, the tuned GNNs' grids);
* ``clp grid``: CLP's candidates on the chosen predictor (closed forms, per-step L1, spectral, authors' step);
* ``selection``: validation/test scoring of candidates and references;
* ``other``: the rest of the wall time (loading, splits, Python).

``compile`` is JAX's trace + lower + backend-compile time; ``#comp`` the number of backend compilations. Results
go to ``benchmarks/results/cost_<tag>.{json,md}``, with the command, the machine and its load. Timings on the
shared 2-core machine are indicative; compare ratios measured in one run.

``python -m benchmarks.cost --merge A.json=CONDITIONS,B.json=CONDITIONS --tag gpu --compare cpu``
gathers the rows of runs made elsewhere (``benchmarks/device_cost.sh`` on a lent GPU: one JSON per process) into
``cost_<tag>.{json,md}``, each row keeping its run's machine, command and the conditions it ran under (e.g. how
many processes shared the host), and sets them beside the rows of ``cost_<compare>.json`` graph by graph:
compilation (seconds, programs) and the steady state (the splits after the first) apart.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time

from benchmarks import _common as C
from benchmarks.compile_time import _patched, _Recorder

MEDIUM = ("texas", "cornell", "wisconsin", "actor", "chameleon", "squirrel", "usa-airports", "brazil-airports",
          "europe-airports", "wiki", "twitch-en", "twitch-ru", "deezer-europe", "minesweeper")
DEFAULT_DATA_URL = "file:///work/shared/datasets"


def _data_root() -> str:
    url = os.environ.get("JAXCLP_DATA_URL", DEFAULT_DATA_URL)
    return url[len("file://"):] if url.startswith("file://") else url


def _instrument(rec: _Recorder):
    import jaxclp.priors as P
    from jaxclp.experiments import candidates, methods as M, runner as R

    fit_prior = P.fit_prior

    @functools.wraps(fit_prior)
    def timed_fit_prior(prior, *args, **kwargs):
        stage = f"prior {prior}" if isinstance(prior, str) else "prior (object)"
        return rec.wrap(stage, fit_prior)(prior, *args, **kwargs)

    return _patched([
        (R, "mlp_priors", rec.wrap("mlp priors", R.mlp_priors)),
        (P, "fit_prior", timed_fit_prior),
        (M, "fit_prior", timed_fit_prior),  # methods imports the name: patch where it is looked up
        (M, "method_clp", rec.wrap("clp grid", M.method_clp)),
        (candidates, "_first_best", rec.wrap("selection", candidates._first_best)),  # select
        (M, "_first_best", rec.wrap("selection", candidates._first_best)),  # the lean grid's per-group best
        (candidates, "validation_scores", rec.wrap("selection", candidates.validation_scores)),
        (R, "score_test", rec.wrap("selection", R.score_test)),
        (R, "reference_scores", rec.wrap("selection", R.reference_scores)),
    ])


def profile(dataset: str, method: str, runs: int, **run_options) -> dict:
    """One graph: the runner's ``method`` on ``runs`` medium splits, stage by stage (see the module docstring)."""
    import jax

    from jaxclp.experiments import runner as R
    from jaxclp.experiments.runner import BASE_SEED  # minesweeper's seed-0 split is all mines

    jax.clear_caches()
    rec = _Recorder()
    listener_d = rec.on_duration
    jax.monitoring.register_event_duration_secs_listener(listener_d)
    try:
        t0 = time.perf_counter()
        with _instrument(rec), tempfile.TemporaryDirectory() as tmp:
            recs = R.run(dataset, "medium", [method], runs=runs, out=tmp, progress=False, data_root=_data_root(),
                         seed=BASE_SEED.get(dataset, 0), **run_options)
        wall = time.perf_counter() - t0
    finally:
        jax.monitoring.unregister_event_duration_listener(listener_d)
    staged = sum(rec.wall.values())
    stages = {s: {"wall": rec.wall[s], "compile": rec.compile.get(s, 0.0), "compilations": rec.count.get(s, 0)}
              for s in rec.wall}
    stages["other"] = {"wall": wall - staged + rec.wall.get("other", 0.0), "compile": rec.compile.get("other", 0.0),
                       "compilations": rec.count.get("other", 0)}
    return {"dataset": dataset, "method": method, "runs": runs, "wall": wall, "stages": stages,
            "record_seconds": [r["seconds"] for r in recs], "test": [r["test"] for r in recs],
            "params": [r["params"] for r in recs], "skipped": [r.get("skipped") for r in recs],
            "compilations": sum(rec.count.values()), "compile": sum(rec.compile.values())}


def _markdown(payload: dict) -> str:
    lines = [f"# `{payload['method']}` cost by stage ({payload['tag']})", "",
             f"Command: `{payload['command']}`", "", C.machine_header_md(payload["machine"]), ""]
    if payload.get("note"):
        lines += [payload["note"], ""]
    if payload.get("compare_rows") is not None:
        lines += ["## Compilation and steady state beside `cost_" + payload["compare"] + "`", "",
                  compare_markdown(payload), "", "## By stage", ""]
    lines += [
             "Per graph: wall seconds of the whole run (all splits), then per stage `wall (compile)` summed over "
             "the splits; `#comp` = backend compilations in the run; `s/split` = the records' own seconds "
             "(median over splits; the first split pays the compilations).", ""]
    stage_names = sorted({s for r in payload["rows"] for s in r["stages"]},
                         key=lambda s: (s == "other", s != "mlp priors", s))
    merged = any("conditions" in r for r in payload["rows"])
    header = ["graph"] + (["conditions"] if merged else []) + ["splits", "wall s", "compile s", "#comp",
                                                               "s/split (median)"] + stage_names
    rows = []
    for r in payload["rows"]:
        import statistics

        cells = [r["dataset"]] + ([r.get("conditions", "")] if merged else []) + [r["runs"], f"{r['wall']:.1f}", f"{r['compile']:.1f}", r["compilations"],
                 f"{statistics.median(r['record_seconds']):.1f}" if r["record_seconds"] else "-"]
        for s in stage_names:
            st = r["stages"].get(s)
            cells.append(f"{st['wall']:.1f} ({st['compile']:.1f})" if st else "")
        rows.append(cells)
    lines.append(C.md_table(header, rows))
    before = _table2_seconds()
    share_rows = []
    for r in payload["rows"]:
        tuned = sum(st["wall"] for s, st in r["stages"].items() if s.endswith("_tuned"))
        la = r.get("load_average")
        share_rows.append([r["dataset"] + (f" ({r['conditions']})" if r.get("conditions") else ""), f"{100 * r['compile'] / r['wall']:.0f} %", f"{100 * tuned / r['wall']:.0f} %",
                           f"{before.get(r['dataset'], float('nan')):.1f}", f"{la[0]:.1f}" if la else "-"])
    lines += ["", "Where the time goes: the share of the run's wall time spent compiling, and in the tuned GNN priors' "
              "fits (gcn_tuned + sage_tuned: 8 specs each; one compiled program per grid since cost_after_r2, 8 "
              "before); beside it the committed table2 records' mean `clp` seconds per split (10 splits, compilation paid once per graph, so ~1/10 of it "
              "per split) and the 1-minute load average when the graph finished (above the usable cores means waiting).",
              "", C.md_table(["graph", "compile share", "tuned GNN priors share", "table2 records: s/split",
                              "load avg"], share_rows)]
    return "\n".join(lines) + "\n"


def merge_runs(sources: list[tuple[str, str]], compare: str | None = None) -> dict:
    """The rows of several ``cost`` JSONs (``(path, conditions)`` pairs) as one payload: each row keeps its run's
    ``machine``, ``command`` and ``conditions``; a graph measured under several conditions keeps one row each.
    ``compare``: the tag of a run to set beside them (its rows under ``compare_rows``)."""
    from pathlib import Path

    rows = []
    for path, conditions in sources:
        run = C.load_json(Path(path))
        if run is None:
            raise FileNotFoundError(f"--merge: no cost JSON at {path}")
        for r in run["rows"]:
            rows.append(dict(r, conditions=conditions, machine=run["machine"], command=run["command"]))
    order = {d: i for i, d in enumerate(MEDIUM)}
    rows.sort(key=lambda r: (order.get(r["dataset"], len(order)), r["dataset"]))
    payload = {"method": rows[0]["method"] if rows else "clp", "rows": rows, "machine": rows[0]["machine"] if rows
               else C.machine_info(), "merged": [{"path": str(p), "conditions": c} for p, c in sources]}
    if compare:
        other = C.load_json(C.RESULTS_DIR / f"cost_{compare}.json")
        if other is None:
            raise FileNotFoundError(f"--compare: no benchmarks/results/cost_{compare}.json")
        payload.update(compare=compare, compare_rows=other["rows"], compare_machine=other["machine"],
                       compare_command=other["command"])
    return payload


def split_seconds(row: dict) -> tuple[float, float | None]:
    """``(first split, median of the later splits)`` of a row's record seconds: the first split pays the graph's
    compilations, the later ones are the steady state (``None`` with one split)."""
    import statistics

    secs = row["record_seconds"]
    return secs[0], (statistics.median(secs[1:]) if len(secs) > 1 else None)


def compared_rows(payload: dict) -> dict:
    """``dataset -> row`` of the run a merged payload is compared with (empty without ``compare``)."""
    return {r["dataset"]: r for r in payload.get("compare_rows", [])}


def paired_rows(payload: dict) -> list:
    """``(row, compared row)`` of a merged payload's rows whose graph the compared run holds too."""
    base = compared_rows(payload)
    return [(r, base[r["dataset"]]) for r in payload["rows"] if r["dataset"] in base]


def compile_ratios(payload: dict) -> list[float]:
    """Compilation seconds of each paired row over its compared row's (every conditions)."""
    return [r["compile"] / b["compile"] for r, b in paired_rows(payload)]


def main_conditions(payload: dict) -> str:
    """The conditions most rows of a merged payload ran under (the others are side measurements)."""
    from collections import Counter

    return Counter(r["conditions"] for r in payload["rows"]).most_common(1)[0][0]


def ten_split_estimate(payload: dict, conditions: str) -> dict:
    """What ``clp`` alone would take over a table of 10 splits per graph, from a two-split run: per graph its first
    split (the compilations) plus 9 times its later split, summed over the graphs of ``conditions``; the same sum
    of the compared run over the same graphs. Seconds, and the compilation seconds within them."""
    pairs = [(r, b) for r, b in paired_rows(payload) if r["conditions"] == conditions and len(r["record_seconds"]) > 1]
    est = lambda r: split_seconds(r)[0] + 9 * split_seconds(r)[1]
    return {"graphs": len(pairs), "seconds": sum(est(r) for r, _ in pairs), "compile": sum(r["compile"] for r, _ in pairs),
            "compare_seconds": sum(est(b) for _, b in pairs), "compare_compile": sum(b["compile"] for _, b in pairs)}


def compare_markdown(payload: dict) -> str:
    """Graph by graph, the merged rows beside the ``compare`` run's: wall, compilation (seconds, programs), the
    first split and the steady state (later splits), and the ratios of compilation and steady state."""
    base = compared_rows(payload)
    fmt = lambda x: "-" if x is None else f"{x:.1f}"
    rows = []
    for r in payload["rows"]:
        first, later = split_seconds(r)
        b = base.get(r["dataset"])
        b_first, b_later = split_seconds(b) if b else (None, None)
        rows.append([r["dataset"], r["conditions"], f"{r['wall']:.1f}", f"{r['compile']:.1f} ({r['compilations']})",
                     fmt(first), fmt(later),
                     f"{b['wall']:.1f}" if b else "-", f"{b['compile']:.1f} ({b['compilations']})" if b else "-",
                     fmt(b_first), fmt(b_later),
                     f"{r['compile'] / b['compile']:.2f}" if b else "-",
                     f"{later / b_later:.2f}" if b and later is not None and b_later else "-"])
    m, cm = payload["machine"], payload.get("compare_machine") or {}
    dev = payload.get("device") or ", ".join(m.get("devices") or []) or m.get("backend", "?")
    return C.md_table(["graph", "conditions", "wall s", "compile s (programs)", "first split s", "later splits s",
                       f"{payload.get('compare', 'base')}: wall s", "compile s (programs)", "first split s",
                       "later splits s", "compile ratio", "steady ratio"], rows) + (
        f"\n\nLeft: {m.get('backend', '?')} ({dev}), jax {m.get('jax', '?')}; right: `cost_{payload.get('compare')}` "
        f"({cm.get('backend', '?')}, {cm.get('usable_cores', cm.get('cores', '?'))} cores, jax {cm.get('jax', '?')}). "
        "Ratios: left over right (compilation seconds; the median of the later splits' seconds). "
        + compare_summary(payload))


def compare_summary(payload: dict) -> str:
    """One sentence per conditions of the merged rows: the range of the compilation and steady-state ratios over
    the graphs both runs hold, and the graphs whose steady state is faster than the compared run's."""
    groups: dict = {}
    for r, b in paired_rows(payload):
        later, b_later = split_seconds(r)[1], split_seconds(b)[1]
        if later is not None and b_later:
            groups.setdefault(r["conditions"], []).append((r["dataset"], r["compile"] / b["compile"], later / b_later))
    parts = []
    for cond, g in groups.items():
        comp, steady = [x[1] for x in g], [x[2] for x in g]
        faster = [d for d, _, s in g if s < 1.0]
        span = lambda v, f: f"{min(v):{f}}" if f"{min(v):{f}}" == f"{max(v):{f}}" else f"{min(v):{f}}-{max(v):{f}}"
        parts.append(f"{cond} ({len(g)} graph{'s' * (len(g) > 1)}): compilation {span(comp, '.1f')}x the "
                     f"compared run's seconds, the later splits {span(steady, '.2f')}x"
                     + (f" (faster on {', '.join(faster)})" if faster else " (faster on none)"))
    return "; ".join(parts) + "." if parts else ""


def _table2_seconds() -> dict:
    """``dataset -> mean seconds per split`` of the committed table2 ``clp`` records (0 where absent)."""
    import json
    from pathlib import Path

    path = C.REPO / "results" / "table2" / "results.jsonl"
    acc = {}
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r.get("type") == "result" and r.get("method") == "clp":
                acc.setdefault(r["dataset"], []).append(float(r["seconds"]))
    return {d: sum(v) / len(v) for d, v in acc.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=",".join(MEDIUM))
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--method", default="clp")
    p.add_argument("--tag", default="after")
    p.add_argument("--time-limit", type=float, default=None)
    p.add_argument("--priors", default=None, help="comma list of base predictors for clp (default: all)")
    p.add_argument("--markdown-only", action="store_true", help="rewrite cost_<tag>.md from its .json")
    p.add_argument("--merge", default=None, help="comma list of PATH=CONDITIONS: gather other runs' JSONs as cost_<tag>")
    p.add_argument("--compare", default=None, help="with --merge: the tag of a run to set beside them")
    p.add_argument("--note", default=None, help="with --merge: a paragraph saying how the runs were made")
    p.add_argument("--device", default=None, help="with --merge: the accelerator the runs used, in words")
    a = p.parse_args(argv)
    if a.merge:
        sources = [tuple(item.split("=", 1)) if "=" in item else (item, "") for item in a.merge.split(",")]
        payload = merge_runs(sources, a.compare)
        payload.update(tag=a.tag, note=a.note, device=a.device, command="python -m benchmarks.cost " + " ".join(argv or sys.argv[1:]))
        out = C.RESULTS_DIR / f"cost_{a.tag}.json"
        C.save_json(out, payload)
        out.with_suffix(".md").write_text(_markdown(payload))
        return 0
    if a.markdown_only:
        out = C.RESULTS_DIR / f"cost_{a.tag}.json"
        out.with_suffix(".md").write_text(_markdown(C.load_json(out)))
        return 0
    os.environ.setdefault("JAXCLP_XLA_CACHE", "off")
    opts = {}
    if a.time_limit is not None:
        opts["time_limit"] = a.time_limit
    if a.priors:
        opts["priors"] = tuple(a.priors.split(","))
    out = C.RESULTS_DIR / f"cost_{a.tag}.json"
    payload = C.load_json(out) or {}
    rows = {r["dataset"]: r for r in payload.get("rows", [])}
    payload.update({"tag": a.tag, "method": a.method, "command": "python -m benchmarks.cost " + " ".join(argv or sys.argv[1:]),
                    "machine": C.machine_info()})
    for name in a.datasets.split(","):
        C.log(f"cost: {name} ...")
        rows[name] = profile(name, a.method, a.runs, **opts)
        rows[name]["load_average"] = os.getloadavg()
        payload["rows"] = [rows[d] for d in MEDIUM + tuple(sorted(set(rows) - set(MEDIUM))) if d in rows]
        C.save_json(out, payload)
        out.with_suffix(".md").write_text(_markdown(payload))
        C.log(f"cost: {name} {rows[name]['wall']:.1f} s, compile {rows[name]['compile']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
