"""Can XLA's own options buy back the compile seconds of a first graph? ``clp`` under XLA:CPU compiler flags.

``python -m benchmarks.xla_flags [--variants NAME ...]`` runs issue 69's target command, ``jaxclp run --graph
user900.npz --methods clp --runs 3 --time-limit none`` (:func:`benchmarks.time_limit.user_graph`'s 900-node graph),
once per variant below, each in a fresh process on a fresh, empty persistent cache (a new user's first graph), with
``XLA_FLAGS`` set to the variant's flags. Measured as :mod:`benchmarks.compile_census` does (JAX's compile log and
compile events): wall seconds, compile seconds (trace + lower + XLA backend), the backend seconds of the heaviest
programs, and ``clp``'s chosen predictor and test accuracy per split (the flags must not change what is computed
beyond round-off).

Variants (every one a flag of jaxlib 0.10.2's XLA:CPU; an unknown flag aborts the process):

* ``default``: no flag (what users run);
* ``O1``: ``--xla_backend_optimization_level=1`` (LLVM -O1 instead of -O2);
* ``no-expensive-passes``: ``--xla_llvm_disable_expensive_passes=true``;
* ``codegen-split-1``: ``--xla_cpu_parallel_codegen_split_count=1`` (one LLVM module per program, no split);
* ``O0``: ``--xla_backend_optimization_level=0`` (what the test suite uses, tests/conftest.py);
* ``no-fusion-emitters``: ``--xla_cpu_use_fusion_emitters=false`` (XLA:CPU's elemental IR emitter for fusions
  instead of its newer MLIR fusion emitters).

Results: ``benchmarks/results/xla_flags.{json,md}``. Timings on the shared 2-core machine move +-15 % within the
hour: compare rows of one run only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import _common as C
from benchmarks.compile_census import WORKER

VARIANTS = {
    "default": "",
    "O1": "--xla_backend_optimization_level=1",
    "no-expensive-passes": "--xla_llvm_disable_expensive_passes=true",
    "codegen-split-1": "--xla_cpu_parallel_codegen_split_count=1",
    "O0": "--xla_backend_optimization_level=0",
    "no-fusion-emitters": "--xla_cpu_use_fusion_emitters=false",
}
NODES = 900
ARGS = ["--methods", "clp", "--runs", "3", "--time-limit", "none"]


def _clp_records(results: Path) -> list[dict]:
    """``clp``'s result records of a run folder's results file, by split (``run``): chosen prior, alpha, scores."""
    rows = []
    for line in results.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("type") == "result" and rec.get("method") == "clp":
            params = rec.get("params") or {}
            rows.append(dict(run=rec["run"], test=rec["test"], val=rec["val"], prior=params.get("base_prior"),
                             alpha=params.get("alpha")))
    return sorted(rows, key=lambda r: r["run"])


def run_variant(src: Path, graph: Path, flags: str) -> dict:
    """One fresh ``jaxclp run`` process of ``src`` on ``graph`` with ``XLA_FLAGS=flags`` and an empty cache."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "worker.py").write_text(WORKER)
        env = dict(os.environ, PYTHONPATH=str(src), JAXCLP_XLA_CACHE=str(tmp / "xla"), XLA_FLAGS=flags)
        cmd = [sys.executable, str(tmp / "worker.py"), str(tmp / "census.json"), "run", "--graph", str(graph),
               "--out", str(tmp / "run"), "--no-progress", *ARGS]
        t = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"XLA_FLAGS={flags!r} {' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
        res = json.loads((tmp / "census.json").read_text())
        res["clp"] = _clp_records(tmp / "run" / "results.jsonl")
    res["process_wall"] = wall
    res["flags"] = flags
    return res


def markdown(payload: dict) -> str:
    rows = payload["rows"]
    base = next((r for r in rows if r["variant"] == "default"), rows[0])
    lines = ["# XLA:CPU compiler flags and the compile seconds of a first graph (xla_flags)", "",
             f"Command: `{payload['command']}`", "", f"Checkout: {payload['checkout']}", "",
             C.machine_header_md(payload["machine"]), "",
             f"`jaxclp run --graph user{NODES}.npz {' '.join(ARGS)}`, one fresh process per row on an empty "
             "persistent cache, `XLA_FLAGS` as shown (module docstring). `compile s` = trace + lower + XLA backend "
             "(JAX's compile events), `backend s` = the XLA part; `run s` = wall - compile (training, solving, "
             "Python); the heaviest programs' backend seconds summed over their compilations; `same choices` = "
             "clp's prior and test score per split equal to the `default` row's.", ""]
    heavy = [p[0] for p in base["programs"][:3]]
    table = []
    for r in rows:
        progs = {p[0]: p[2] for p in r["programs"]}
        same = [(c["prior"], round(c["test"], 6)) for c in r["clp"]] == \
            [(c["prior"], round(c["test"], 6)) for c in base["clp"]]
        table.append([r["variant"], f"`{r['flags']}`" if r["flags"] else "", f"{r['wall']:.1f}",
                      f"{r['compile_s']:.1f}", f"{r['backend_s']:.1f}", f"{r['wall'] - r['compile_s']:.1f}",
                      r["programs_loaded"], *[f"{progs.get(h, 0.0):.1f}" for h in heavy],
                      "yes" if same else "no"])
    lines.append(C.md_table(["variant", "XLA_FLAGS", "wall s", "compile s", "backend s", "run s", "programs",
                             *[f"{h} s" for h in heavy], "same choices"], table))
    lines += ["", "Findings (computed from the rows above):", ""]
    for r in rows:
        if r is base:
            continue
        lines.append(f"* `{r['variant']}`: compile {r['compile_s'] / base['compile_s']:.2f}x the default's, "
                     f"run (wall - compile) {(r['wall'] - r['compile_s']) / max(base['wall'] - base['compile_s'], 1e-9):.2f}x, "
                     f"wall {r['wall'] / base['wall']:.2f}x.")
    lines += ["", f"The default's compile seconds are {base['compile_s']:.1f} s for {base['programs_loaded']} "
              f"programs, {base['trace_s'] + base['lower_s']:.1f} s of them tracing and lowering (Python, "
              "no flag changes it); issue 69's target is 8 s."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", default=str(C.REPO / "src"), help="the src folder of the checkout to measure")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    a = p.parse_args(argv)
    from benchmarks.time_limit import user_graph

    src = Path(a.src).resolve()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        graph = user_graph(Path(tmp) / f"user{NODES}.npz", NODES, seed=NODES)
        for name in a.variants:
            C.log(f"[xla_flags] {name}: XLA_FLAGS={VARIANTS[name]!r}")
            rows.append(dict(variant=name, **run_variant(src, graph, VARIANTS[name])))
    payload = dict(command=C.command_line("xla_flags", argv if argv is not None else sys.argv[1:]),
                   checkout=C.checkout_of(src), machine=C.machine_info(), rows=rows)
    C.save_report("xla_flags", payload, markdown(payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
