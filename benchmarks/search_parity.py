"""Same records after a refactor of ``clp``'s search: re-run ``clp`` (no time limit) on the first splits of a few
medium-table graphs and pair each new record with the committed one (``results/table2``): the chosen predictor,
its parameters, the validation and test scores. Also counts the committed records whose ``method_hash`` is not
today's (records a refactor would have made stale).

``python -m benchmarks.search_parity [--datasets texas,cornell,wisconsin,chameleon] [--runs 2]`` writes
``benchmarks/results/search_parity.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from jaxclp.experiments import specs
from jaxclp.experiments.records import record_key
from jaxclp.experiments.runner import run

from benchmarks._common import REPO

TABLE = REPO / "results" / "table2" / "results.jsonl"


def committed_records(path: Path = TABLE) -> dict:
    """``{RecordKey: record}`` of the result records in ``path`` (the last one of each key)."""
    out = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r.get("type") == "result":
            out[record_key(r)] = r
    return out


def same(new: dict, old: dict | None, tol: float = 1e-6) -> bool:
    """Whether two records of one key hold the same choice (``params``) and scores (``val``, ``test``)."""
    return (old is not None and new["params"] == old["params"] and abs(new["val"] - old["val"]) <= tol
            and abs(new["test"] - old["test"]) <= tol)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.search_parity", description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="texas,cornell,wisconsin,chameleon")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    a = p.parse_args(argv)
    committed = committed_records()
    hashes = {m: specs.method_hash(m) for m in {k.method for k in committed}}
    stale = sum(r.get("method_hash") != hashes[k.method] for k, r in committed.items())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ds in a.datasets.split(","):
            t0 = time.perf_counter()
            for r in run(ds, "medium", ["clp"], runs=a.runs, out=Path(tmp) / ds, progress=False):
                old = committed.get(record_key(r))
                rows.append({"dataset": ds, "run": r["run"], "base_prior": r["params"].get("base_prior"),
                             "alpha": r["params"].get("alpha"), "val": r["val"], "test": r["test"],
                             "committed_test": None if old is None else old["test"], "same": same(r, old)})
            print(f"{ds}: {time.perf_counter() - t0:.0f} s", flush=True)
    command = "python -m benchmarks.search_parity " + " ".join(argv or [f"--datasets {a.datasets}", f"--runs {a.runs}"])
    payload = {"command": command, "committed_records": len(committed), "stale_hashes": int(stale), "rows": rows,
               "all_same": all(r["same"] for r in rows)}
    out = Path(a.out)
    (out / "search_parity.json").write_text(json.dumps(payload, indent=1) + "\n")
    lines = ["# `clp` re-run against the committed records (search parity)", "", f"Command: `{command}`", "",
             f"Committed `results/table2` records: {len(committed)}; with a `method_hash` other than today's: "
             f"{stale}.", "", "| dataset | split | chosen predictor | alpha | val | test | committed test | same |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['dataset']} | {r['run']} | {r['base_prior']} | {r['alpha']} | {r['val']:.4f} | {r['test']:.4f} "
              f"| {r['committed_test']:.4f} | {'yes' if r['same'] else 'NO'} |" for r in rows]
    lines += ["", "Every split: the same predictor, parameters, validation and test score as the committed record."
              if payload["all_same"] else "Some splits differ from the committed records (rows marked NO)."]
    (out / "search_parity.md").write_text("\n".join(lines) + "\n")
    print(out / "search_parity.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
