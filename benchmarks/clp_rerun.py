"""`clp` re-run against the committed table2 records: accuracy paired per split, and seconds per split.

``python -m benchmarks.clp_rerun [--new results/rerun/table2_clp/results.jsonl]`` pairs each ``clp`` record
of the re-run (this code: tuned GNN grids in one program, CSR features where mostly zero) with the committed
``results/table2`` record of the same dataset and split, and writes ``benchmarks/results/clp_rerun.{json,md}``:
mean ± std of both, the paired difference (new - old) with its std over splits, whether the new mean lies within
one std of the old one (the cost issue's bar), the base predictors chosen, and the records' seconds per split
(median; the first split of a graph pays its compilations) and their sum. The re-run was made with
``jaxclp run --dataset D --methods clp --runs 10 --out results/rerun/table2_clp`` per graph.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import numpy as np

from benchmarks import _common as C

ROOT = C.REPO
OLD = ROOT / "results" / "table2" / "results.jsonl"
NEW = ROOT / "results" / "rerun" / "table2_clp" / "results.jsonl"


def _clp_records(path: Path) -> dict:
    """``(dataset, split kind, split) -> record`` of the ``clp`` records (the last one of a pair wins; a record
    without a split kind counts as "medium", table2's)."""
    out = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("type") == "result" and r.get("method") == "clp":
            out[(r["dataset"], r.get("split", "medium"), int(r["run"]))] = r
    return out


def compare(old_path: Path = OLD, new_path: Path = NEW) -> list[dict]:
    """One row per (dataset, split kind) present in both files, over the splits present in both."""
    old, new = _clp_records(old_path), _clp_records(new_path)
    by_ds = collections.defaultdict(list)
    for key in sorted(set(old) & set(new)):
        by_ds[key[:2]].append(key)
    rows = []
    for (ds, kind), keys in by_ds.items():
        a = np.array([old[k]["test"] for k in keys]) * 100
        b = np.array([new[k]["test"] for k in keys]) * 100
        d = b - a
        sec_old = [old[k]["seconds"] for k in keys]
        sec_new = [new[k]["seconds"] for k in keys]
        chosen = collections.Counter(new[k]["params"].get("base_prior") for k in keys)
        rows.append(dict(dataset=ds, split=kind, runs=len(keys), metric=new[keys[0]]["metric"],
                         old_mean=float(a.mean()), old_std=float(a.std()), new_mean=float(b.mean()),
                         new_std=float(b.std()), diff_mean=float(d.mean()), diff_std=float(d.std()),
                         within_one_std=bool(abs(b.mean() - a.mean()) <= a.std()),
                         old_seconds_median=float(np.median(sec_old)), new_seconds_median=float(np.median(sec_new)),
                         old_seconds_sum=float(np.sum(sec_old)), new_seconds_sum=float(np.sum(sec_new)),
                         features=new[keys[0]].get("features"), chosen=dict(chosen)))
    return rows


def markdown(rows: list[dict], command: str, target: str = "table2") -> str:
    lines = [f"# `clp` re-run vs the committed {target} records", "", f"Command: `{command}`", "",
             C.machine_header_md(C.machine_info()), "",
             "Test score in % (accuracy, or ROC-AUC on the two-class graphs), mean ± std over the splits both hold; "
             "`new - old` is the paired difference per split (mean ± std); `within 1 std`: |new mean - old mean| <= "
             "old std. Seconds: the records' own per-split seconds (median over splits; the first split pays the "
             "graph's compilations) and their sum over the splits."
             + (" The old records were computed on a loaded machine (load 4-13), so their seconds overstate the old "
                "cost; the new ones were run one graph at a time." if target == "table2" else ""), "",
             "| graph | splits | old | new | new - old | within 1 std | s/split old | s/split new | sum s old | "
             "sum s new | base predictors chosen (new) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        chosen = ", ".join(f"{k} {v}" for k, v in sorted(r["chosen"].items(), key=lambda kv: -kv[1]))
        graph = r["dataset"] if r.get("split", "medium") == "medium" else f"{r['dataset']} ({r['split']})"
        lines.append(f"| {graph} | {r['runs']} | {r['old_mean']:.2f} ± {r['old_std']:.2f} | "
                     f"{r['new_mean']:.2f} ± {r['new_std']:.2f} | {r['diff_mean']:+.2f} ± {r['diff_std']:.2f} | "
                     f"{'yes' if r['within_one_std'] else '**no**'} | {r['old_seconds_median']:.1f} | "
                     f"{r['new_seconds_median']:.1f} | {r['old_seconds_sum']:.0f} | {r['new_seconds_sum']:.0f} | "
                     f"{chosen} |")
    if rows:
        n_ok = sum(r["within_one_std"] for r in rows)
        lines += ["", f"Within one std of the old mean: {n_ok} of {len(rows)} graphs. Seconds summed over these "
                  f"graphs' splits: old {sum(r['old_seconds_sum'] for r in rows):.0f} s, new "
                  f"{sum(r['new_seconds_sum'] for r in rows):.0f} s."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", default=str(OLD))
    p.add_argument("--new", default=str(NEW))
    p.add_argument("--name", default="clp_rerun", help="results file stem under benchmarks/results")
    p.add_argument("--target", default="table2", help="what the old records are, for the title")
    p.add_argument("--note", default="", help="a paragraph under the title: how the records were made")
    a = p.parse_args(argv)
    rows = compare(Path(a.old), Path(a.new))
    out = C.out_dir()
    command = "python -m benchmarks.clp_rerun " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(rows, command.strip(), a.target)
    if a.note:
        head, rest = text.split("\n\n", 1)
        text = f"{head}\n\n{a.note}\n\n{rest}"
    (out / f"{a.name}.json").write_text(json.dumps(rows, indent=1) + "\n")
    (out / f"{a.name}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
