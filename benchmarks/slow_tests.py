"""The test suite's ``slow`` tests, run and recorded: ``python -m benchmarks.slow_tests [--out DIR]
[pytest args ...]``.

CI (``.ci/run``) runs ``pytest -n 2 -q``, whose ``addopts`` exclude the tests marked ``slow``: long end-to-end runs
(whole runner targets, every prior, several compiled training loops) that assert nothing the fast suite does not
also assert on smaller inputs, but on the real configurations. Their checks still have to run somewhere: this
script runs every ``slow`` test in one pytest process (no xdist: one process compiles each program once) and
writes each test's outcome and seconds to ``slow_tests.json`` / ``slow_tests.md`` in the results directory,
with the machine, the command, the git revision and the wall time. Nothing here is a speed target; a failed test
is a failed check, and the script exits 1.

Extra arguments go to pytest (``-k fig4``, a file path ...). ``--quick`` is accepted (``run.py`` passes it) and
selects nothing different: the slow tests have no quick mode.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from benchmarks import _common as C

REPO = C.REPO


def _cases(junit: Path) -> list[dict]:
    """One row per test case of a junit XML report: id, outcome, seconds, and the first line of a failure."""
    rows = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        cls, name = case.get("classname", ""), case.get("name", "")
        path = cls.replace(".", "/") + ".py"
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = (el.get("message") or "").strip().splitlines()[0][:200] if el.get("message") else ""
                break
        rows.append({"test": f"{path}::{name}", "outcome": outcome, "seconds": round(float(case.get("time", 0)), 2),
                     "message": message})
    return rows


def write_markdown(od: Path, payload: dict) -> None:
    rows = sorted(payload["rows"], key=lambda r: -r["seconds"])
    counts = {o: sum(r["outcome"] == o for r in rows) for o in ("passed", "failed", "error", "skipped")}
    text = [
        "# The slow tests (`pytest -m slow`), outside CI",
        "",
        C.machine_header_md(payload["machine"]),
        "",
        f"**Command:** `{payload['command']}` at `{payload['revision']}`; wall time {payload['wall_s']:.0f} s; "
        + ", ".join(f"{v} {k}" for k, v in counts.items() if v) + ".",
        "",
        "Each row is one test's outcome and its seconds (setup + call + teardown as pytest's junit report gives "
        "them; " + ("pytest-xdist workers, each test file in one, " if " -n " in f" {payload['command']} " else
                    "one process, ")
        + "so the first test to compile a program pays for it). These tests are excluded from "
        "`.ci/run` by the `slow` marker (pyproject `addopts`); this file is how their checks are kept.",
        "",
        C.md_table(["test", "outcome", "s", "message"],
                   [[f"`{r['test']}`", r["outcome"], f"{r['seconds']:.1f}", r["message"].replace("|", "\\|")]
                    for r in rows]),
        "",
    ]
    (od / "slow_tests.md").write_text("\n".join(text))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.slow_tests", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="results directory (default benchmarks/results)")
    ap.add_argument("--quick", action="store_true", help="accepted for run.py; changes nothing")
    args, extra = ap.parse_known_args(argv)
    od = C.out_dir(args.out)
    machine = C.machine_info()  # before the run: its load average is the one the tests started under
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "slow.xml"
        cmd = [sys.executable, "-m", "pytest", "-m", "slow", "-q", "-p", "no:cacheprovider", "-o",
               "junit_family=xunit1", f"--junitxml={junit}", *extra]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO)
        wall = time.perf_counter() - t0
        rows = _cases(junit) if junit.exists() else []
    payload = {"machine": machine, "revision": C.git_describe(REPO),
               "command": shlex.join(["python", "-m", "pytest", "-m", "slow", *extra]), "returncode": proc.returncode,
               "wall_s": round(wall, 1), "rows": rows}
    (od / "slow_tests.json").write_text(json.dumps(payload, indent=1, default=str) + "\n")
    write_markdown(od, payload)
    C.log(f"slow_tests: {len(rows)} tests, rc {proc.returncode}, {wall:.0f} s -> {od / 'slow_tests.md'}")
    if proc.returncode not in (0, 5):  # 5: nothing selected
        raise SystemExit(1)
    return payload


if __name__ == "__main__":
    main()
