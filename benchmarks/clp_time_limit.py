"""``clp`` under a per-split time limit over the medium table, against its committed records: what the per-split
target (<= 20 s) costs in accuracy when the limit enforces it.

    python -m benchmarks.clp_time_limit --limit 20                      # every table2 graph
    python -m benchmarks.clp_time_limit --limit 20 --datasets texas,wiki

Each graph runs in a fresh process with a fresh XLA cache (compilation paid as on a new machine):
``jaxclp run --dataset G --methods clp --split medium --runs 10 --time-limit LIMIT``. Its records are paired with the
committed ``results/table2`` ``clp`` records split by split (same splits, same seeds): the paired difference of the
test accuracy (mean and std over the splits), whether the new mean is within one std of the old one, whether it is
still within one std of the best method of the committed table (the other methods' records unchanged), and the
records' own seconds per split (median: compilation once per graph). Results:
``benchmarks/results/clp_time_limit.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import _common as C
from benchmarks.main_job import TABLE2, _scores, method_seconds, paired_clp


def paired_rows(new: dict, old: dict, seconds: dict, graphs, methods) -> list[dict]:
    """Per graph: ``clp``'s paired difference (new - old, test %) over the splits both hold, whether the new mean is
    within one std of the old, and whether it is within one std of the best of the committed methods (``clp``'s
    own old records replaced by the new ones), with the new records' median and largest seconds per split."""
    rows = []
    for g in graphs:
        runs, n, o = paired_clp(new, old, g)
        if len(runs) < 2:
            continue
        d = [a - b for a, b in zip(n, o)]
        table = {m: old[(g, m)] for m in methods if m != "clp" and len(old.get((g, m), {})) >= 2}
        table["clp"] = new[(g, "clp")]
        means = {m: statistics.mean(v.values()) for m, v in table.items()}
        best = max(means, key=means.get)
        secs = seconds.get(g, {}).get("clp", [])
        rows.append({"graph": g, "splits": len(runs), "clp_new": statistics.mean(n), "clp_old": statistics.mean(o),
                     "old_std": statistics.stdev(o), "diff_mean": statistics.mean(d), "diff_std": statistics.stdev(d),
                     "within_old": abs(statistics.mean(n) - statistics.mean(o)) <= statistics.stdev(o),
                     "best": best, "best_mean": means[best],
                     "within_best": means["clp"] >= means[best] - statistics.stdev(table[best].values()),
                     "clp_median_s": statistics.median(secs) if secs else None,
                     "clp_max_s": max(secs) if secs else None})
    return rows


def summary(rows: list[dict], times: dict) -> dict:
    """Counts over the graphs: ``clp``'s median split at most 20 s, within its committed std, within one std of the
    best method; the whole processes' minutes."""
    return {"graphs": len(rows), "fast": sum(r["clp_median_s"] is not None and r["clp_median_s"] <= 20.0 for r in rows),
            "within_old": sum(r["within_old"] for r in rows), "within_best": sum(r["within_best"] for r in rows),
            "minutes": sum(times.values()) / 60}


def markdown(payload: dict) -> str:
    rows = payload["rows"]
    lines = ["# `clp` under a per-split time limit, against its committed table2 records", "",
             f"Command: `{payload['command']}`", "", C.machine_header_md(payload["machine"]), "",
             f"Each graph: one fresh process and XLA cache, `jaxclp run --dataset G --methods clp --split medium "
             f"--runs 10 --time-limit {payload['limit']:g}`; `diff` = new - committed test accuracy (%), paired over "
             "the same splits (mean ± std); `best` = the best mean of the committed table with `clp`'s records "
             "replaced by the new ones; `s/split` = the new records' own seconds (median, largest; the first split "
             "pays the compilations); `wall s` = the whole process.", ""]
    lines += [C.md_table(["graph", "wall s", "clp s/split (median)", "(largest)", "clp new", "clp committed ± std",
                         "diff (paired)", "within committed std", "best", "clp within 1 std of best"],
                        [[r["graph"], f"{payload['times'].get(r['graph'], float('nan')):.0f}",
                          f"{r['clp_median_s']:.1f}", f"{r['clp_max_s']:.1f}", f"{r['clp_new']:.2f}",
                          f"{r['clp_old']:.2f} ± {r['old_std']:.2f}", f"{r['diff_mean']:+.2f} ± {r['diff_std']:.2f}",
                          "yes" if r["within_old"] else "**no**", f"{r['best']} {r['best_mean']:.2f}",
                          "yes" if r["within_best"] else "**no**"] for r in rows])]
    if rows:
        c = summary(rows, payload["times"])
        lines += ["", f"{c['graphs']} graphs: `clp`'s median split at most 20 s on {c['fast']}; within its committed "
                  f"std on {c['within_old']}; within one std of the best method on {c['within_best']}; whole "
                  f"processes {c['minutes']:.1f} min in all."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from jaxclp.experiments.reproduce import HETEROPHILY, TABLE_METHODS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=",".join(HETEROPHILY))
    p.add_argument("--limit", type=float, default=20.0, help="--time-limit of every run (seconds per split)")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--out", default=None, help="records folder (default: a temporary one)")
    p.add_argument("--tag", default="clp_time_limit")
    a = p.parse_args(argv)
    out = Path(a.out or tempfile.mkdtemp(prefix="clp_time_limit_"))
    times = {}
    for name in a.datasets.split(","):
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as xla:
            env = dict(os.environ, JAXCLP_XLA_CACHE=xla)
            rc = subprocess.run([sys.executable, "-m", "jaxclp", "run", "--dataset", name, "--methods", "clp",
                                 "--split", "medium", "--runs", str(a.runs), "--time-limit", f"{a.limit:g}",
                                 "--no-progress", "--out", str(out / name)], env=env).returncode
        times[name] = time.perf_counter() - t0
        C.log(f"clp_time_limit: {name} rc={rc} {times[name]:.0f} s")
    new, seconds = {}, {}
    for name in times:
        path = out / name / "results.jsonl"
        if path.is_file():
            new.update(_scores(path))
            seconds.update(method_seconds(path))
    payload = {"command": "python -m benchmarks.clp_time_limit " + " ".join(argv or sys.argv[1:]),
               "machine": C.machine_info(), "limit": a.limit, "times": times,
               "rows": paired_rows(new, _scores(TABLE2), seconds, list(times), TABLE_METHODS)}
    payload["summary"] = summary(payload["rows"], times)
    C.save_report(a.tag, payload, markdown(payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
