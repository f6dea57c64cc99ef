"""Appends the records a device run made to the committed results: ``python -m benchmarks.merge_records
OUT TARGET`` appends every line of ``OUT/TARGET/results.jsonl`` that ``results/TARGET/results.jsonl`` does not hold
(header records included, in their order), after checking each is a complete JSON record. Prints the count.

Used after ``benchmarks/device_reproduce.sh OUT TARGET ...`` (whose OUT was seeded with the committed records, so
the new lines are exactly the device's). With ``--replace-stale`` runs, then run ``jaxclp reproduce TARGET --out
results --replace-stale --datasets ...`` here: it moves the superseded records aside and computes nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


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
    out, target = Path(sys.argv[1]), sys.argv[2]
    n = merge(out / target / "results.jsonl", Path("results") / target / "results.jsonl")
    print(f"appended {n} record(s) to results/{target}/results.jsonl")
