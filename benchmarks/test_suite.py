"""The README's test command timed on a clean clone: ``git clone`` of this checkout's HEAD into a temporary folder,
then ``bash .ci/run`` there (venv, install, the suite, the no-FFI rerun), as CI runs it.

    python -m benchmarks.test_suite            # clone HEAD, run .ci/run, write the results
    python -m benchmarks.test_suite --keep DIR # clone into DIR and leave it there

Results: ``benchmarks/results/test_suite.{json,md}`` (wall seconds of the whole command, install included; each
pytest run's counts and seconds as pytest reports them; the commit; the machine). The README's stated test time is
generated from this file.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import _common as C

_SUMMARY = re.compile(r"^=*\s*(?P<body>(?:\d+ \w+(?:, )?)+) in (?P<secs>[\d.]+)s", re.M)


def pytest_runs(output: str) -> list[dict]:
    """Each pytest run's final line in ``output``: ``{"passed": n, "skipped": n, ..., "seconds": s}``, in order."""
    runs = []
    for m in _SUMMARY.finditer(output):
        counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", m["body"])}
        runs.append({**counts, "seconds": float(m["secs"])})
    return runs


def markdown(payload: dict) -> str:
    runs = payload["runs"]
    lines = ["# The test command on a clean clone", "", f"Command: `{payload['command']}`", "",
             f"Commit: `{payload['commit']}`; `bash .ci/run` in a fresh `git clone` (a new venv, `pip install -e "
             "\".[dev]\"`, the suite, then the core tests again with `JAXCLP_NO_FFI=1`).", "",
             C.machine_header_md(payload["machine"]), "",
             f"Whole command: **{payload['seconds']:.0f} s** ({payload['minutes']} min {payload['rest_s']} s), exit "
             f"status {payload['returncode']}.", "", "| pytest run | passed | skipped | failed | seconds |",
             "|---|---|---|---|---|"]
    for name, r in zip(("the suite", "JAXCLP_NO_FFI=1 core tests"), runs):
        lines.append(f"| {name} | {r.get('passed', 0)} | {r.get('skipped', 0)} | {r.get('failed', 0)} | "
                     f"{r['seconds']:.0f} |")
    if payload.get("failed"):
        lines += ["", "Failed: " + ", ".join(f"`{t}`" for t in payload["failed"])]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keep", default=None, help="clone into this folder and keep it")
    a = p.parse_args(argv)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=C.REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    dest = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="jaxclp_ci_")) / "jaxclp"
    subprocess.run(["git", "clone", "-q", str(C.REPO), str(dest)], check=True)
    t0 = time.perf_counter()
    done = subprocess.run(["bash", ".ci/run"], cwd=dest, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    output = done.stdout + done.stderr
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", done.stdout, re.M)
    if done.returncode:  # pytest's report, then stderr without pip's lines about absent local index folders
        noise = "is ignored: it is neither a file nor a directory"
        print(done.stdout[-6000:], "\n".join(l for l in done.stderr.splitlines() if noise not in l)[-3000:],
              sep="\n", file=sys.stderr)
    if not a.keep:
        shutil.rmtree(dest.parent, ignore_errors=True)
    payload = {"command": "python -m benchmarks.test_suite " + " ".join(argv or sys.argv[1:]),
               "commit": commit, "machine": C.machine_info(), "seconds": seconds, "minutes": divmod(round(seconds), 60)[0],
               "rest_s": divmod(round(seconds), 60)[1], "returncode": done.returncode,
               "runs": pytest_runs(output), "failed": failed}
    C.save_report("test_suite", payload, markdown(payload))
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
