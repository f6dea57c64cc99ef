"""Where `clp`'s seconds go, per graph and split: compilation, prior fits (by predictor), CLP candidates, selection.

``python -m jaxclp.benchmarks.cost [--datasets a,b] [--runs S] [--method clp] [--tag before]`` runs the runner's
method (default ``clp``) on ``S`` medium splits of each graph, exactly as ``jaxclp run`` does (same contexts,
same records; the persistent XLA cache off, so every compilation is paid), with the library calls it makes
wrapped in stage timers (:class:`jaxclp.benchmarks.compile_time._Recorder`: exclusive wall time per stage,
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
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time

from jaxclp.benchmarks import _common as C
from jaxclp.benchmarks.compile_time import _patched, _Recorder

MEDIUM = ("texas", "cornell", "wisconsin", "actor", "chameleon", "squirrel", "usa-airports", "brazil-airports",
          "europe-airports", "wiki", "twitch-en", "twitch-ru", "deezer-europe", "minesweeper")
DEFAULT_DATA_URL = "file:///work/shared/datasets"


def _data_root() -> str:
    url = os.environ.get("JAXCLP_DATA_URL", DEFAULT_DATA_URL)
    return url[len("file://"):] if url.startswith("file://") else url


def _instrument(rec: _Recorder):
    import jaxclp.priors as P
    from jaxclp.experiments import methods as M
    from jaxclp.experiments import runner as R

    fit_prior = P.fit_prior

    @functools.wraps(fit_prior)
    def timed_fit_prior(prior, *args, **kwargs):
        stage = f"prior {prior}" if isinstance(prior, str) else "prior (object)"
        return rec.wrap(stage, fit_prior)(prior, *args, **kwargs)

    return _patched([
        (R, "mlp_priors", rec.wrap("mlp priors", R.mlp_priors)),
        (P, "fit_prior", timed_fit_prior),
        (M, "method_clp", rec.wrap("clp grid", M.method_clp)),
        (M, "_first_best", rec.wrap("selection", M._first_best)),
        (M, "validation_scores", rec.wrap("selection", M.validation_scores)),
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
             f"Command: `{payload['command']}`", "", C.machine_header_md(payload["machine"]), "",
             "Per graph: wall seconds of the whole run (all splits), then per stage `wall (compile)` summed over "
             "the splits; `#comp` = backend compilations in the run; `s/split` = the records' own seconds "
             "(median over splits; the first split pays the compilations).", ""]
    stage_names = sorted({s for r in payload["rows"] for s in r["stages"]},
                         key=lambda s: (s == "other", s != "mlp priors", s))
    header = ["graph", "splits", "wall s", "compile s", "#comp", "s/split (median)"] + stage_names
    rows = []
    for r in payload["rows"]:
        import statistics

        cells = [r["dataset"], r["runs"], f"{r['wall']:.1f}", f"{r['compile']:.1f}", r["compilations"],
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
        share_rows.append([r["dataset"], f"{100 * r['compile'] / r['wall']:.0f} %", f"{100 * tuned / r['wall']:.0f} %",
                           f"{before.get(r['dataset'], float('nan')):.1f}", f"{la[0]:.1f}" if la else "-"])
    lines += ["", "Where the time goes: the share of the run's wall time spent compiling, and in the tuned GNN priors' "
              "fits (gcn_tuned + sage_tuned: 8 specs each; one compiled program per grid since cost_after_r2, 8 "
              "before); beside it the committed table2 records' mean `clp` seconds per split (10 splits, compilation paid once per graph, so ~1/10 of it "
              "per split) and the 1-minute load average when the graph finished (2 cores: above 2 means waiting).",
              "", C.md_table(["graph", "compile share", "tuned GNN priors share", "table2 records: s/split",
                              "load avg"], share_rows)]
    return "\n".join(lines) + "\n"


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
    a = p.parse_args(argv)
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
    payload.update({"tag": a.tag, "method": a.method, "command": "python -m jaxclp.benchmarks.cost " + " ".join(argv or sys.argv[1:]),
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
