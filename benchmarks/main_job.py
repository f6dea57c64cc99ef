"""The README's main job, ``jaxclp reproduce table2``, timed graph by graph on this machine: each graph in a fresh
process with a fresh XLA cache (so compilation is paid as on a new machine), then its records compared with the
committed ``results/table2`` (paired over the same splits: each method's mean and whether ``clp`` stays within one
std of its old mean and of the best method).

    python -m benchmarks.main_job                        # every table2 graph (hours on 2 cores)
    python -m benchmarks.main_job --datasets texas,wiki  # some of them
    python -m benchmarks.main_job --summarize OUT TIMES  # only the report, from a finished run
    ... --previous results/rerun/table2_main/times.txt          # beside an earlier run's wall seconds

``TIMES`` has one line per graph, ``<graph> rc=<code> secs=<wall seconds>``; the run writes it as it goes
(``OUT/times.txt``). ``--previous`` puts an earlier run's times file beside it (wall seconds per graph and the
ratio): on this shared machine the speed drifts between days, so a graph whose computation did not change says
how much of a difference is the machine. Results: ``benchmarks/results/main_job.{json,md}``.
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

TABLE2 = C.REPO / "results" / "table2" / "results.jsonl"
TARGET_S = 3600.0
"""The main job's target on 2 CPU cores: 60 min (issue 69; the project's first goal was 30)."""


def _scores(path: Path) -> dict:
    """``(dataset, method) -> {run: test %}`` of a records file's medium-split results."""
    out: dict = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("type") == "result" and r.get("split") == "medium":
            out.setdefault((r["dataset"], r["method"]), {})[r["run"]] = 100 * r["test"]
    return out


def paired_clp(new: dict, old: dict, graph: str) -> tuple[list, list, list]:
    """``(splits, new test %, old test %)`` of ``clp`` on ``graph`` over the splits both records hold, in order."""
    runs = sorted(set(new.get((graph, "clp"), {})) & set(old.get((graph, "clp"), {})))
    return runs, [new[(graph, "clp")][r] for r in runs], [old[(graph, "clp")][r] for r in runs]


def compare(new: dict, old: dict, graphs, methods) -> list[dict]:
    """Per graph: ``clp``'s new and old mean over the splits both hold, the old std, whether the new mean is within
    it, the best method of the new records (mean) and whether ``clp`` is within one std (the best's) of it."""
    rows = []
    for g in graphs:
        runs, n, o = paired_clp(new, old, g)
        if len(runs) < 2:
            continue
        means = {m: statistics.mean(new[(g, m)].values()) for m in methods if len(new.get((g, m), {})) >= 2}
        best = max(means, key=means.get)
        rows.append({"graph": g, "splits": len(runs), "clp_new": statistics.mean(n), "clp_old": statistics.mean(o),
                     "old_std": statistics.stdev(o), "within_old": abs(statistics.mean(n) - statistics.mean(o))
                     <= statistics.stdev(o), "best": best, "best_mean": means[best],
                     "within_best": means["clp"] >= means[best] - statistics.stdev(new[(g, best)].values())})
    return rows


def method_seconds(path: Path) -> dict:
    """``graph -> {method: [seconds per split]}`` of a records file's medium-split results (each record's own
    seconds: its fits and compilation, the split's MLP-prior fits counted in every method built on them)."""
    out: dict = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("type") == "result" and r.get("split") == "medium":
            out.setdefault(r["dataset"], {}).setdefault(r["method"], []).append(float(r["seconds"]))
    return out


def cost_rows(seconds: dict, graphs) -> list[dict]:
    """Per graph: the records' seconds summed, ``clp``'s share of them and its median seconds per split."""
    rows = []
    for g in graphs:
        per = seconds.get(g)
        if not per or "clp" not in per:
            continue
        total = sum(sum(v) for v in per.values())
        rows.append({"graph": g, "records_s": total, "clp_s": sum(per["clp"]), "clp_share": sum(per["clp"]) / total,
                     "clp_median_s": statistics.median(per["clp"]), "splits": len(per["clp"])})
    return rows


def own_work(records: list, target_s: float = TARGET_S) -> dict:
    """The main job's records split into ``clp``'s own work and everything else, each split's MLP prior counted
    once: every method built on it records the prior's seconds too (the ``mlp`` record's seconds of that split),
    so they are subtracted from those methods.

    Returns:
        ``rest_minutes``: the other methods; ``clp_own_minutes``: ``clp`` less the MLP prior; ``clp_budget_s``:
        seconds per ``clp`` split that would leave the job at ``target_s`` (the target less the rest, over the
        splits); ``clp_cut``: how many times less ``clp`` would need.
    """
    from jaxclp.experiments.methods import NEEDS_PRIOR

    recs = [r for r in records if r.get("type") == "result"]
    mlp = {(r["dataset"], r["run"]): r["seconds"] for r in recs if r["method"] == "mlp"}
    rest = clp = 0.0
    for r in recs:
        own = r["seconds"] - (mlp.get((r["dataset"], r["run"]), 0.0) if r["method"] in NEEDS_PRIOR - {"mlp"} else 0.0)
        if r["method"] == "clp":
            clp += own
        else:
            rest += own
    splits = sum(r["method"] == "clp" for r in recs)
    budget = max(target_s - rest, 0.0)
    return {"rest_minutes": rest / 60, "clp_own_minutes": clp / 60, "clp_budget_s": budget / max(splits, 1),
            "clp_cut": clp / max(budget, 1e-9)}


def read_times(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        name, rc, secs = line.split()
        out[name] = {"rc": int(rc.split("=")[1]), "seconds": float(secs.split("=")[1])}
    return out


def previous_totals(payload: dict) -> dict | None:
    """Against the earlier run of a payload (``--previous``), over the graphs both timed: ``graphs``, the earlier
    run's ``seconds`` and the ``median_ratio`` of this run's seconds to it per graph; None without one."""
    prev, times = payload.get("previous") or {}, payload["times"]
    both = [g for g in times if g in prev]
    if not both:
        return None
    return {"graphs": both, "seconds": sum(prev[g]["seconds"] for g in both),
            "median_ratio": statistics.median(times[g]["seconds"] / prev[g]["seconds"] for g in both)}


def markdown(payload: dict) -> str:
    made_by = f"Records and times made by: `{payload['made_by']}`\n\n" if payload.get("made_by") else ""
    lines = ["# The main job, `jaxclp reproduce table2`, timed graph by graph", "", f"Command: `{payload['command']}`",
             "", made_by + C.machine_header_md(payload["machine"]), "",
             "Each graph ran in a fresh process with a fresh XLA cache (compilation paid once per graph, as on a new "
             "machine), 10 splits x the table's 10 methods. `clp` new vs old: its mean test score (%) over the splits "
             "both the new and the committed records hold, beside the old std; `best`: the best method of the new "
             "records and whether `clp` is within one std of it.", "", tables(payload)]
    return "\n".join(lines) + "\n"


def tables(payload: dict) -> str:
    """The per-graph tables of a main-job payload (wall time and ``clp`` against the old records; where the records'
    seconds go) and the totals: what the results page and the benchmarks page show."""
    times, rows = payload["times"], {r["graph"]: r for r in payload["rows"]}
    prev = payload.get("previous") or {}
    head = "| graph | wall s | " + ("previous run s | ratio | " if prev else "")
    lines = [head + "clp new | clp old ± std | within old std | best (new) | clp within 1 std of best |",
             "|---|---|---|---|---|---|---|" + ("---|---|" if prev else "")]
    for g, t in times.items():
        r = rows.get(g)
        cells = ([f"{r['clp_new']:.2f}", f"{r['clp_old']:.2f} ± {r['old_std']:.2f}", "yes" if r["within_old"] else
                  "**no**", f"{r['best']} {r['best_mean']:.2f}", "yes" if r["within_best"] else "**no**"]
                 if r else ["–"] * 5)
        if prev:
            p = prev.get(g)
            cells = ([f"{p['seconds']:.0f}", f"{t['seconds'] / p['seconds']:.2f}"] if p else ["–", "–"]) + cells
        lines.append(f"| {g} | {t['seconds']:.0f}{'' if t['rc'] == 0 else ' (rc ' + str(t['rc']) + ')'} | "
                     + " | ".join(cells) + " |")
    total = sum(t["seconds"] for t in times.values())
    lines += ["", f"{len(times)} graphs, {total:.0f} s ({total / 60:.1f} min) in all."]
    before = previous_totals(payload)
    if before:
        lines[-1] += (f" The previous run took {before['seconds']:.0f} s ({before['seconds'] / 60:.1f} min) for the "
                      f"same {len(before['graphs'])} graphs ({payload.get('previous_note') or 'an earlier run'}).")
    cost = payload.get("cost") or []
    if cost:
        lines += ["", "Where the seconds go, from the new records' own seconds (each record: its fits and compilation; "
                  "the split's MLP-prior fits are counted in every method built on them, so the records sum to more "
                  "than the wall time):", "",
                  "| graph | records s | clp s | clp share | clp median s per split |", "|---|---|---|---|---|"]
        lines += [f"| {c['graph']} | {c['records_s']:.0f} | {c['clp_s']:.0f} | {100 * c['clp_share']:.0f} % | "
                  f"{c['clp_median_s']:.1f} |" for c in cost]
    missing = payload.get("not_run") or []
    if missing:
        lines += ["", f"Not run: {', '.join(missing)}."]
    return "\n".join(lines)


def main(argv=None) -> int:
    from jaxclp.experiments.reproduce import HETEROPHILY, TABLE_METHODS

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", default=",".join(HETEROPHILY))
    p.add_argument("--out", default=None, help="records folder (default: a temporary one)")
    p.add_argument("--summarize", nargs=2, metavar=("OUT", "TIMES"), default=None)
    p.add_argument("--made-by", default=None, help="with --summarize: how OUT and TIMES were made (a command)")
    p.add_argument("--previous", default=None, metavar="TIMES", help="an earlier run's times file, shown beside")
    p.add_argument("--previous-note", default=None, help="what the earlier run was (commit, day)")
    a = p.parse_args(argv)
    names = a.datasets.split(",")
    if a.summarize:
        out, times_file = Path(a.summarize[0]), Path(a.summarize[1])
    else:
        out = Path(a.out or tempfile.mkdtemp(prefix="main_job_"))
        out.mkdir(parents=True, exist_ok=True)
        times_file = out / "times.txt"
        for name in names:
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory() as xla:
                env = dict(os.environ, JAXCLP_XLA_CACHE=xla)
                rc = subprocess.run([sys.executable, "-m", "jaxclp", "reproduce", "table2", "--datasets", name,
                                     "--out", str(out)], env=env).returncode
            with times_file.open("a") as f:
                f.write(f"{name} rc={rc} secs={time.perf_counter() - t0:.0f}\n")
    times = read_times(times_file)
    records = out / "table2" / "results.jsonl"
    rows = compare(_scores(records), _scores(TABLE2), list(times), TABLE_METHODS)
    payload = {"cost": cost_rows(method_seconds(records), list(times)),
               "command": "python -m benchmarks.main_job " + " ".join(argv or sys.argv[1:]),
               "machine": C.machine_info(), "times": times, "rows": rows,
               "not_run": [n for n in HETEROPHILY if n not in times], "made_by": a.made_by,
               "previous": read_times(Path(a.previous)) if a.previous else None, "previous_note": a.previous_note}
    C.save_report("main_job", payload, markdown(payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
