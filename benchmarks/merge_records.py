"""Appends the records a device run made to the committed results: ``python -m benchmarks.merge_records
OUT TARGET`` appends every line of ``OUT/TARGET/results.jsonl`` that ``results/TARGET/results.jsonl`` does not hold
(header records included, in their order), after checking each is a complete JSON record. Prints the count.

Used after ``benchmarks/device_reproduce.sh OUT TARGET ...`` (whose OUT was seeded with the committed records by
``python -m benchmarks.merge_records --seed OUT TARGET DATASETS``, :func:`seed`, so the new lines are exactly the
device's). With ``--replace-stale`` runs, then run ``jaxclp reproduce TARGET --out
results --replace-stale --datasets ...`` here: it moves the superseded records aside and computes nothing.

``python -m benchmarks.merge_records --complete-pairs CHECKOUT TARGET [--runs 10]`` takes the records of a
``jaxclp reproduce TARGET --replace-stale`` re-run made in another checkout (a git worktree) that may have been
stopped part-way (:func:`complete_pairs`): no table cell mixes two configurations.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def seed(out: Path, target: str, datasets: str, results: Path = Path("results")) -> dict:
    """Copies the committed records a device run of ``target`` on ``datasets`` resumes from into ``out``: the lines of
    ``results/<t>/results.jsonl`` for ``target`` and the targets it shares records with (``reproduce.SHARES``)
    whose dataset is one of ``datasets`` (a comma list; ``"-"``: every record) — a dataset's † variant
    ``<name>+dagger``, which ``table_homophily`` runs for ``<name>``, with it; for a figure target the whole
    ``results/figures/records`` tree. Returns ``{target or "figures/records": records seeded}``."""
    from jaxclp.experiments.analyses import TARGETS as FIGURES
    from jaxclp.experiments.reproduce import SHARES
    from jaxclp.experiments.paper import DAGGER_SUFFIX

    wanted = set(datasets.split(","))
    counts = {}
    for t in (target,) + tuple(SHARES.get(target, ())):
        src = Path(results) / t / "results.jsonl"
        lines = src.read_text().splitlines() if src.exists() else []
        keep = [ln for ln in lines if "-" in wanted
                or (json.loads(ln).get("dataset") or "").removesuffix(DAGGER_SUFFIX) in wanted]
        (Path(out) / t).mkdir(parents=True, exist_ok=True)
        (Path(out) / t / "results.jsonl").write_text("".join(ln + "\n" for ln in keep))
        counts[t] = len(keep)
    records = Path(results) / "figures" / "records"
    if target in FIGURES and records.is_dir():  # figure targets keep their records under figures/records/<name>/
        import shutil

        shutil.copytree(records, Path(out) / "figures" / "records", dirs_exist_ok=True)
        counts["figures/records"] = sum(len(p.read_text().splitlines()) for p in records.rglob("results.jsonl"))
    return counts


def merge(src: Path, dst: Path) -> int:
    have = set(dst.read_text().splitlines()) if dst.exists() else set()
    new = []
    for line in Path(src).read_text().splitlines():
        if line and line not in have:
            json.loads(line)  # a torn line raises here, before anything is written
            new.append(line)
            have.add(line)
    if new:
        dst.parent.mkdir(parents=True, exist_ok=True)
        with open(dst, "a") as f:
            f.write("".join(line + "\n" for line in new))
    return len(new)


def complete_pairs(checkout: Path, target: str, results: Path = Path("results"), runs: int = 10) -> dict:
    """Takes a re-run's records from ``checkout/results/<target>`` into ``results/<target>`` per (dataset, split)
    pair, whole pairs only.

    The re-run's records are the checkout's lines that ``results/<target>`` holds neither in ``results.jsonl`` nor
    in ``results.stale.jsonl`` (so a checkout made before other records were taken in brings back nothing they
    replaced). A pair of them is complete when every method the re-run touched there (its old records absent from
    the checkout, i.e. moved aside by ``--replace-stale``, or new records written) has ``runs`` distinct runs of new
    records: its new records replace the old ones in ``results/<target>/results.jsonl`` and the old ones are
    appended to ``results.stale.jsonl`` beside it. An incomplete pair keeps its old records, and its new ones are
    written to ``results/rerun/<target>_partial/results.jsonl`` (replacing that file), to be appended to the
    results before the re-run is resumed. Every other line of ``results/<target>/results.jsonl`` stays as it is;
    the re-run's header records are appended.

    Returns:
        ``{"complete": [(dataset, split), ...], "incomplete": {(dataset, split): {method: runs}}, "moved": n,
        "partial": n}``.
    """
    main_file = Path(results) / target / "results.jsonl"
    stale_file = main_file.with_name("results.stale.jsonl")
    m_lines = main_file.read_text().splitlines()
    w_lines = (Path(checkout) / "results" / target / "results.jsonl").read_text().splitlines()
    known = set(m_lines) | (set(stale_file.read_text().splitlines()) if stale_file.exists() else set())
    w_set = set(w_lines)
    new = [ln for ln in w_lines if ln not in known]
    rec = {ln: json.loads(ln) for ln in new + [ln for ln in m_lines if ln not in w_set]}  # each line parsed once
    pair = {ln: (r.get("dataset"), r.get("split")) for ln, r in rec.items() if r.get("type") == "result"}
    removed = [ln for ln in m_lines if ln not in w_set and ln in pair]  # result lines the re-run moved aside
    runs_of: dict = {}  # (dataset, split) -> {method: set of runs of new records}
    for ln in removed:
        runs_of.setdefault(pair[ln], {}).setdefault(rec[ln]["method"], set())
    for ln in new:
        if ln in pair:
            runs_of.setdefault(pair[ln], {}).setdefault(rec[ln]["method"], set()).add(rec[ln].get("run"))
    complete, incomplete = [], {}
    for p in sorted({pair[ln] for ln in new if ln in pair}, key=str):
        if all(len(r) >= runs for r in runs_of[p].values()):
            complete.append(p)
        else:
            incomplete[p] = {m: len(r) for m, r in sorted(runs_of[p].items())}
    keep = set(complete)
    moved = [ln for ln in removed if pair[ln] in keep]
    partial = [ln for ln in new if ln in pair and pair[ln] not in keep]
    gone = set(moved)
    out = [ln for ln in m_lines if ln not in gone] + [ln for ln in new if ln not in pair or pair[ln] in keep]
    main_file.write_text("".join(ln + "\n" for ln in out))
    if moved:
        with open(stale_file, "a") as f:
            f.write("".join(ln + "\n" for ln in moved))
    if partial:
        folder = Path(results) / "rerun" / f"{target}_partial"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.jsonl").write_text("".join(ln + "\n" for ln in partial))
    return {"complete": complete, "incomplete": incomplete, "moved": len(moved), "partial": len(partial)}


if __name__ == "__main__":
    if sys.argv[1] == "--complete-pairs":
        n_runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 10
        rep = complete_pairs(Path(sys.argv[2]), sys.argv[3], runs=n_runs)
        for pair in rep["complete"]:
            print(f"complete: {pair[0]}/{pair[1]}")
        for pair, counts in rep["incomplete"].items():
            print(f"incomplete (old records kept): {pair[0]}/{pair[1]} {counts}")
        print(f"{rep['moved']} old record(s) moved to results.stale.jsonl; {rep['partial']} new record(s) of "
              f"incomplete pairs kept in results/rerun/{sys.argv[3]}_partial")
        sys.exit(0)
    if sys.argv[1] == "--seed":
        for name, n in seed(Path(sys.argv[2]), sys.argv[3], sys.argv[4]).items():
            print(f"seeded {n} record(s) of {name}")
        sys.exit(0)
    out, target = Path(sys.argv[1]), sys.argv[2]
    n = merge(out / target / "results.jsonl", Path("results") / target / "results.jsonl")
    print(f"appended {n} record(s) to results/{target}/results.jsonl")
