"""Appends the records a device run made to the committed results: ``python -m jaxclp.benchmarks.merge_records
OUT TARGET`` appends every line of ``OUT/TARGET/results.jsonl`` that ``results/TARGET/results.jsonl`` does not hold
(header records included, in their order), after checking each is a complete JSON record. Prints the count.

Used after ``benchmarks/device_reproduce.sh OUT TARGET ...`` (whose OUT was seeded with the committed records by
``python -m jaxclp.benchmarks.merge_records --seed OUT TARGET DATASETS``, :func:`seed`, so the new lines are exactly the
device's). With ``--replace-stale`` runs, then run ``jaxclp reproduce TARGET --out
results --replace-stale --datasets ...`` here: it moves the superseded records aside and computes nothing.
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


if __name__ == "__main__":
    if sys.argv[1] == "--seed":
        for name, n in seed(Path(sys.argv[2]), sys.argv[3], sys.argv[4]).items():
            print(f"seeded {n} record(s) of {name}")
        sys.exit(0)
    out, target = Path(sys.argv[1]), sys.argv[2]
    n = merge(out / target / "results.jsonl", Path("results") / target / "results.jsonl")
    print(f"appended {n} record(s) to results/{target}/results.jsonl")
