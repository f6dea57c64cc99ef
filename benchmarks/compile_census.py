"""How many XLA programs a ``jaxclp run`` compiles, which ones, and what a second graph or a second run pays.

``python -m benchmarks.compile_census [--src DIR] [--tag NAME] [--quick]`` runs each case below as a fresh
``jaxclp run --graph FILE`` process of the checkout whose ``src`` folder is ``--src`` (default: this clone's), with
JAX's compile log on (``jax_log_compiles``: one "Finished XLA compilation of NAME" line per backend compilation) and
JAX's compile events summed (``jax.monitoring``: tracing, lowering, backend compilation). JAX logs and times a
program read from the persistent cache as it does a compiled one: ``programs`` counts both, ``cache hits`` the reads,
``#XLA`` the difference (programs XLA compiled in this process). Graphs are ``benchmarks.time_limit.user_graph``'s
synthetic user graphs (n nodes, ``max(3, n // 600)`` classes, 64 features, average degree 10).

Cases, in order, all on ONE persistent XLA cache folder that starts empty (as a new user's machine):

* ``first graph``: ``--methods clp --runs 3 --time-limit none`` on the 900-node graph (issue 69's target command);
* ``similar graph``: the same on a 960-node graph (another size in the same shape bucket, :mod:`jaxclp.buckets`);
* ``second graph``: the same on the 2200-node graph (another bucket: what the cache serves a new graph);
* ``same graph again``: the first case again (what the cache serves an identical shape);
* ``defaults``: ``jaxclp run --graph`` with every default (methods, 10 splits, default time limit) on the 300-
  and 900-node graphs, each with a fresh cache.

``--args "..."`` appends options to every case (``--args=--exact-shapes``: the graph's own shapes, no buckets).

Results: ``benchmarks/results/compile_census_<tag>.{json,md}`` (programs by name with counts and seconds, call
sites of the compilations). Timings on the shared 2-core machine are indicative; counts are exact.
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

WORKER = r'''
import collections, json, logging, re, sys, time, traceback
import jax
jax.config.update("jax_log_compiles", True)
recs = []
class H(logging.Handler):
    def emit(self, r):
        m = r.getMessage()
        mm = re.match(r"Finished XLA compilation of (.*) in ([0-9.e-]+) sec", m)
        if mm:
            fr = [f for f in traceback.extract_stack() if "/jaxclp/" in f.filename]
            where = ";".join(f"{f.filename.split('/jaxclp/')[-1]}:{f.name}" for f in fr[-2:])
            recs.append((mm.group(1), float(mm.group(2)), where))
        elif "ompilation cache hit" in m:
            recs.append(("cache hit", 0.0, ""))
h = H(); h.setLevel(logging.DEBUG)
for name in ("jax", "jax._src"):
    lg = logging.getLogger(name); lg.addHandler(h); lg.setLevel(logging.DEBUG); lg.propagate = False
events = collections.defaultdict(float)
counts = collections.Counter()
def listen(ev, s, **k):
    events[ev] += s; counts[ev] += 1
jax.monitoring.register_event_duration_secs_listener(listen)
from jaxclp.experiments.cli import main
t = time.perf_counter(); rc = main(sys.argv[2:]); wall = time.perf_counter() - t
xla = [r for r in recs if r[0] != "cache hit"]
by = collections.defaultdict(lambda: [0, 0.0])
for n, s, _ in xla:
    by[n][0] += 1; by[n][1] += s
keys = ("/jax/core/compile/backend_compile_duration", "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration")
json.dump(dict(rc=rc, wall=wall, compile_s=sum(events[k] for k in keys), trace_s=events[keys[1]],
               lower_s=events[keys[2]], backend_s=events[keys[0]], backend_events=counts[keys[0]],
               programs_loaded=len(xla), cache_hits=sum(1 for r in recs if r[0] == "cache hit"),
               programs=sorted(([k, v[0], round(v[1], 3)] for k, v in by.items()), key=lambda r: -r[2]),
               sites=collections.Counter(w for _, _, w in xla).most_common()), open(sys.argv[1], "w"), indent=1)
'''

SIZES = {"first": 900, "similar": 960, "second": 2200, "small": 300}


def _case(src: Path, cache: Path, graph: Path, args: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "census.json"
        script = Path(tmp) / "worker.py"
        script.write_text(WORKER)
        env = dict(os.environ, PYTHONPATH=str(src), JAXCLP_XLA_CACHE=str(cache))
        cmd = [sys.executable, str(script), str(out), "run", "--graph", str(graph), "--out", str(Path(tmp) / "run"),
               "--no-progress", *args]
        t = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
        res = json.loads(out.read_text())
    res["process_wall"] = wall
    res["xla_compilations"] = res["programs_loaded"] - res["cache_hits"]  # JAX logs a cache read as one too
    res["args"] = ["jaxclp", "run", "--graph", graph.name, *args]
    return res


def census(src: Path, quick: bool = False, extra: list[str] = ()) -> list[dict]:
    """Every case of the module docstring (``quick``: the clp cases with 1 split, no defaults cases; ``extra``:
    options appended to every case)."""
    from benchmarks.time_limit import user_graph

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        graphs = {n: user_graph(tmp / f"user{n}.npz", n, seed=n) for n in set(SIZES.values())}
        runs = "1" if quick else "3"
        clp = ["--methods", "clp", "--runs", runs, "--time-limit", "none", *extra]
        cache = tmp / "xla"
        for name, n in (("first graph", 900), ("similar graph", 960), ("second graph", 2200),
                        ("same graph again", 900)):
            C.log(f"[compile_census] {name}: {n} nodes")
            rows.append(dict(case=name, nodes=n, **_case(src, cache, graphs[n], clp)))
        if not quick:
            for n in (300, 900):
                C.log(f"[compile_census] defaults: {n} nodes")
                rows.append(dict(case="defaults", nodes=n, **_case(src, tmp / f"xla{n}", graphs[n], [*extra])))
    return rows


def markdown(payload: dict) -> str:
    lines = [f"# Compilations of `jaxclp run` ({payload['tag']})", "", f"Command: `{payload['command']}`", "",
             f"Checkout: {payload['checkout']}", "", C.machine_header_md(payload["machine"]), "",
             "One fresh process per row (module docstring): `programs` = programs compiled or read from the persistent "
             "cache (the compile log), `cache hits` = those read from the cache, `#XLA` = those XLA compiled, `compile s` = JAX's trace + lower + backend "
             "seconds (a cache read counts as backend seconds), `wall s` = the command's seconds. `compile s` sums "
             "every program's seconds, those compiled at the same time in `jaxclp.fit_threads`' threads included "
             "(each slower while two share the cores): it can exceed the wall seconds they took.", ""]
    if payload.get("compare"):
        lines += [comparison(payload), ""]
    rows = [[r["case"], r["nodes"], " ".join(r["args"][2:]), f"{r['wall']:.1f}", f"{r['compile_s']:.1f}",
             f"{r['trace_s'] + r['lower_s']:.1f}", f"{r['backend_s']:.1f}", r["programs_loaded"], r["cache_hits"],
             r["xla_compilations"]]
            for r in payload["rows"]]
    lines.append(C.md_table(["case", "nodes", "arguments", "wall s", "compile s", "trace+lower s", "backend s",
                             "programs", "cache hits", "#XLA"], rows))
    first = payload["rows"][0]
    lines += ["", f"## Programs of the first graph ({first['programs_loaded']} compilations)", "",
              C.md_table(["program", "compilations", "backend s"], [p for p in first["programs"][:30]])]
    tiny = [p for p in first["programs"] if p[2] / max(p[1], 1) < 0.1]
    lines += ["", f"Programs under 0.1 s each: {sum(p[1] for p in tiny)} compilations, "
              f"{sum(p[2] for p in tiny):.1f} s (most are single jnp operations run outside jit).", "",
              "Call sites (two innermost jaxclp frames) with the most compilations:", "",
              C.md_table(["site", "compilations"], first["sites"][:15])]
    return "\n".join(lines) + "\n"


def comparison(payload: dict) -> str:
    """Markdown: each case of ``payload["compare"]`` (an earlier run, e.g. the checkout before a change) beside the
    same case of this run."""
    before = {(r["case"], r["nodes"]): r for r in payload["compare"]["rows"]}
    rows = []
    for r in payload["rows"]:
        b = before.get((r["case"], r["nodes"]))
        if b is None:
            continue
        rows.append([r["case"], r["nodes"], f"{b['xla_compilations']} -> {r['xla_compilations']}",
                     f"{b['compile_s']:.1f} -> {r['compile_s']:.1f}", f"{b['wall']:.1f} -> {r['wall']:.1f}"])
    return (f"Beside the run of checkout {payload['compare']['checkout']} (`{payload['compare']['command']}`, "
            f"same machine, {payload['compare']['machine']['date_utc']} UTC, load average at its start "
            f"{payload['compare']['machine']['loadavg_at_start'][0]:.2f}). The counts are exact; the seconds move "
            "with the shared machine's state, so compare seconds only between runs made back to back:\n\n"
            + C.md_table(["case", "nodes", "#XLA", "compile s", "wall s"], rows))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", default=str(C.REPO / "src"), help="the src folder of the checkout to measure")
    p.add_argument("--tag", default="cpu")
    p.add_argument("--quick", action="store_true", help="1 split, no defaults cases (a smoke run)")
    p.add_argument("--args", default="", help="options appended to every case, e.g. --args=--exact-shapes")
    p.add_argument("--compare", default=None, metavar="JSON",
                   help="with --markdown-only: an earlier run's JSON to set beside compile_census_<tag>.json (kept "
                        "inside it; the earlier file can then go)")
    p.add_argument("--markdown-only", action="store_true", help="rewrite compile_census_<tag>.md from its JSON")
    a = p.parse_args(argv)
    if a.markdown_only:
        path = C.RESULTS_DIR / f"compile_census_{a.tag}.json"
        payload = C.load_json(path)
        if a.compare:
            payload["compare"] = C.load_json(Path(a.compare))
            payload["compare"].pop("compare", None)
        C.save_report(f"compile_census_{a.tag}", payload, markdown(payload))
        return 0
    src = Path(a.src).resolve()
    rows = census(src, quick=a.quick, extra=a.args.split())
    checkout = C.checkout_of(src)
    payload = dict(tag=a.tag, command="python -m benchmarks.compile_census " + " ".join(argv or sys.argv[1:]),
                   checkout=checkout, machine=C.machine_info(), rows=rows)
    C.save_report(f"compile_census_{a.tag}", payload, markdown(payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
