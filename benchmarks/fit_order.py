"""In which order a split's base predictors start when they run side by side (:func:`jaxclp.search.side_by_side_order`).

``python -m benchmarks.fit_order [--src DIR] [--quick]`` runs ``jaxclp run --graph FILE --methods clp --runs 3
--time-limit none`` in one process per synthetic user graph (``benchmarks.time_limit.user_graph``) of each size in
``SIZES``: once to compile (discarded), then ``REPEATS`` pairs alternating the two start orders of the fits that run
side by side on the CPU's cores (:mod:`jaxclp.fit_threads`):

* ``given``: the search's order (cheap first: LINK, LINKX, GCN, H2GCN, the tuned GCN grid, the tuned SAGE grid), the
  order before :func:`~jaxclp.search.side_by_side_order`;
* ``costliest first``: the library's rule (the tuned grids first, by :data:`jaxclp.search.PRIOR_COST`).

Each run is timed whole (wall seconds) and its records compared: the order of starting changes no fit, so the records
(test, validation, choice, every predictor's references) must be equal. Results:
``benchmarks/results/fit_order.{json,md}``. Timings on the shared 2-core machine are indicative; the ratio is paired
within one process.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import _common as C

SIZES = (300, 900)
REPEATS = 4
VARIANTS = ("given", "costliest first")

WORKER = r'''
import json, sys, time
from pathlib import Path
import jaxclp.search as S
from jaxclp.experiments.cli import main
graph, out, repeats = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
orders = {"given": lambda costs, threads: list(range(len(costs))), "costliest first": S.side_by_side_order}
def once(name, tag):
    S.side_by_side_order = orders[name]
    folder = out.parent / tag
    t = time.perf_counter()
    main(["run", "--graph", graph, "--out", str(folder), "--no-progress", "--methods", "clp", "--runs", "3",
          "--time-limit", "none"])
    wall = time.perf_counter() - t
    recs = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip()]
    recs = [r for r in recs if r.get("type") == "result"]
    kept = [json.dumps({k: r[k] for k in ("run", "test", "val", "params", "references")}, sort_keys=True) for r in recs]
    return wall, [r["seconds"] for r in recs], kept
once("costliest first", "compile")
res = {"wall": {v: [] for v in orders}, "split_s": {v: [] for v in orders}, "records": {}, "stable": True}
for i in range(repeats):
    for v in orders:
        wall, secs, kept = once(v, f"{v[0]}{i}")
        res["wall"][v].append(wall)
        res["split_s"][v] += secs
        res["stable"] &= kept == res["records"].setdefault(v, kept)
res["same_records"] = res["records"]["given"] == res["records"]["costliest first"]
del res["records"]
json.dump(res, open(out, "w"))
'''


def measure(src: Path, sizes=SIZES, repeats: int = REPEATS) -> dict:
    """One row per size: wall seconds of each order (all runs), ``clp``'s split seconds, records equal."""
    from benchmarks.time_limit import user_graph

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        script = tmp / "worker.py"
        script.write_text(WORKER)
        for n in sizes:
            graph = user_graph(tmp / f"user{n}.npz", n)
            C.log(f"[fit_order] {n} nodes")
            out = tmp / f"o{n}" / "result.json"
            out.parent.mkdir()
            env = dict(os.environ, PYTHONPATH=str(src), JAXCLP_XLA_CACHE=str(tmp / f"xla{n}"))
            subprocess.run([sys.executable, str(script), str(graph), str(out), str(repeats)], env=env, check=True,
                           capture_output=True, text=True)
            r = json.loads(out.read_text())
            a, b = (r["wall"][v] for v in VARIANTS)
            ratios = [y / x for x, y in zip(a, b)]
            rows.append(dict(nodes=n, wall=r["wall"], ratios=ratios, ratio_median=statistics.median(ratios),
                             min_s={v: min(r["wall"][v]) for v in VARIANTS},
                             median_s={v: statistics.median(r["wall"][v]) for v in VARIANTS},
                             split_median_s={v: statistics.median(r["split_s"][v]) for v in VARIANTS},
                             same_records=r["same_records"] and r["stable"]))
    return dict(rows=rows)


def markdown(payload: dict) -> str:
    given, first = VARIANTS
    body = [[r["nodes"], f"{r['min_s'][given]:.1f} ({r['median_s'][given]:.1f})",
             f"{r['min_s'][first]:.1f} ({r['median_s'][first]:.1f})",
             f"{r['ratio_median']:.2f} ({', '.join(f'{q:.2f}' for q in r['ratios'])})",
             f"{r['split_median_s'][given]:.1f} / {r['split_median_s'][first]:.1f}",
             "equal" if r["same_records"] else "DIFFER"] for r in payload["rows"]]
    return "\n".join([
        "# The start order of a split's base predictors side by side", "", f"Command: `{payload['command']}`", "",
        f"Checkout: {payload['checkout']}", "", C.machine_header_md(payload["machine"]), "",
        "`jaxclp run --graph user<n>.npz --methods clp --runs 3 --time-limit none` (synthetic user graphs: "
        "n nodes, 3 classes, 64 features, average degree 10), in one process per size: a compiling run, then "
        f"{payload['repeats']} pairs alternating the two orders in which the split's base predictors start on the "
        "CPU's cores: `given` (cheap first, the tuned GCN and SAGE grids last) and `costliest first` "
        "(`jaxclp.search.side_by_side_order`). Wall seconds of the whole run (3 splits): minimum (median); `ratio`: "
        "costliest first / given per pair, median (each pair); `clp s/split`: median of the records' seconds; "
        "`records`: test, validation, choice and every predictor's references equal across orders and repeats.", "",
        C.md_table(["nodes", "given s", "costliest first s", "ratio", "clp s/split given / costliest first",
                    "records"], body), ""])


def main(argv=None) -> int:
    return C.sizes_main("fit_order", __doc__, argv, measure, markdown, (SIZES, REPEATS), ((120,), 1))


if __name__ == "__main__":
    raise SystemExit(main())
