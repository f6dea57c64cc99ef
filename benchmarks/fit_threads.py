"""What running independent fits side by side on the CPU's cores gives (:mod:`jaxclp.fit_threads`).

``python -m benchmarks.fit_threads [--src DIR] [--quick]`` fits a split's two tuned GNN priors (``gcn_tuned`` and
``sage_tuned``: :func:`jaxclp.priors.tuned_gnn_prior` with its default grid of 8 specs, 500 epochs, patience 50) on
synthetic user graphs (``benchmarks.time_limit.user_graph``) of each size in ``SIZES``, in one fresh process per
size: compiled first, then ``REPEATS`` pairs alternating the specs one at a time (``fit_threads`` patched to 1) and
side by side (the library's rule), each timed whole (wall and process CPU seconds); the priors of the two variants
are compared bit for bit. Peak resident memory of each variant is read in a process of its own on the largest graph.

Results: ``benchmarks/results/fit_threads.{json,md}``. Timings on the shared 2-core machine are indicative; the
ratio is paired within one process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import _common as C

SIZES = (300, 900, 2200, 6000)
REPEATS = 2
KINDS = ("gcn", "sage")

WORKER = r'''
import hashlib, json, resource, statistics, sys, time
import jax, jax.numpy as jnp, numpy as np
import jaxclp
from jaxclp import fit_threads, priors
from jaxclp.gnn import grid
path, out, variants, repeats, kinds = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4]), sys.argv[5].split(",")
z = np.load(path)
n = int(z["node_labels"].shape[0])
g = jaxclp.Graph.from_edge_index(z["edges"].T, n)
x, y = jnp.asarray(z["node_features"]), np.asarray(z["node_labels"])
rng = np.random.default_rng(0)
perm = rng.permutation(n)
tm, vm = np.zeros(n, bool), np.zeros(n, bool)
tm[perm[:n // 10]] = True
vm[perm[n // 10:n // 5]] = True
k = int(y.max()) + 1
rule = fit_threads.fit_threads

def fit(variant):
    grid.fit_threads = rule if variant == "side by side" else (lambda num_nodes: 1)
    h = hashlib.sha256()
    for kind in kinds:
        r = priors.tuned_gnn_prior(jax.random.key(0), g, x, y, tm, vm, k, kind=kind)
        h.update(np.asarray(r.prior).tobytes())
    return h.hexdigest()

fit(variants[0])  # compiles
res = {"nodes": n, "threads": rule(n), "wall": {v: [] for v in variants}, "cpu": {v: [] for v in variants},
       "hash": {}}
for _ in range(repeats):
    for v in variants:
        t, c = time.perf_counter(), time.process_time()
        res["hash"][v] = fit(v)
        res["wall"][v].append(time.perf_counter() - t)
        res["cpu"][v].append(time.process_time() - c)
res["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
json.dump(res, open(out, "w"))
'''

VARIANTS = ("one at a time", "side by side")


def _worker(src: Path, graph: Path, variants, repeats: int, tmp: Path, kinds=KINDS) -> dict:
    script = tmp / "worker.py"
    script.write_text(WORKER)
    out = tmp / f"{graph.stem}_{len(variants)}.json"
    env = dict(os.environ, PYTHONPATH=str(src), JAXCLP_XLA_CACHE=str(tmp / "xla"))
    subprocess.run([sys.executable, str(script), str(graph), str(out), ",".join(variants), str(repeats),
                    ",".join(kinds)], env=env,
                   check=True, capture_output=True, text=True)
    return json.loads(out.read_text())


def measure(src: Path, sizes=SIZES, repeats: int = REPEATS, kinds=KINDS, memory: bool = True) -> dict:
    """Rows per size (and, with ``memory``, each variant's peak memory on the largest graph) for the tuned grids
    ``kinds`` (``gcn``, ``sage``)."""
    from benchmarks.time_limit import user_graph

    rows, memory = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for n in sizes:
            graph = user_graph(tmp / f"user{n}.npz", n, seed=n)
            C.log(f"[fit_threads] {n} nodes")
            r = _worker(src, graph, VARIANTS, repeats, tmp, kinds)
            one, two = (r["wall"][v] for v in VARIANTS)
            rows.append(dict(nodes=n, threads=r["threads"], one_s=min(one), side_s=min(two),
                             one_median_s=sorted(one)[len(one) // 2], side_median_s=sorted(two)[len(two) // 2],
                             one_cpu_s=min(r["cpu"][VARIANTS[0]]), side_cpu_s=min(r["cpu"][VARIANTS[1]]),
                             ratios=[a / b for a, b in zip(one, two)],
                             same_bits=r["hash"][VARIANTS[0]] == r["hash"][VARIANTS[1]]))
        for v in VARIANTS if memory else ():  # peak memory: one variant per process
            memory[v] = _worker(src, tmp / f"user{max(sizes)}.npz", (v,), 1, tmp, kinds)["peak_rss_mib"]
    return dict(rows=rows, memory_nodes=max(sizes), memory=memory)


def markdown(payload: dict) -> str:
    rows = payload["rows"]
    lines = ["# Independent fits side by side on the CPU's cores", "", f"Command: `{payload['command']}`", "",
             f"Checkout: {payload['checkout']}", "", C.machine_header_md(payload["machine"]), "",
             "A split's tuned GCN and tuned SAGE priors (8 specs each, 500 epochs, patience 50; 10 % / 10 % training"
             " / validation nodes: no halving) fitted with the grid's specs one at a time and side by side "
             f"(`threads` of `jaxclp.fit_threads.fit_threads`), {payload['repeats']} pairs alternating in one "
             "process after a compiling fit (module docstring). Seconds are the minimum (median) over the pairs; "
             "`speed-up` = one at a time / side by side, per pair; `bits` = the priors equal bit for bit.", "",
             C.md_table(["nodes", "threads", "one at a time s", "side by side s", "speed-up", "CPU s one / side",
                         "bits"],
                        [[r["nodes"], r["threads"], f"{r['one_s']:.2f} ({r['one_median_s']:.2f})",
                          f"{r['side_s']:.2f} ({r['side_median_s']:.2f})",
                          ", ".join(f"{q:.2f}x" for q in r["ratios"]),
                          f"{r['one_cpu_s']:.1f} / {r['side_cpu_s']:.1f}", "equal" if r["same_bits"] else "DIFFER"]
                         for r in rows]), ""]
    m = payload["memory"]
    if m:
        lines += [f"Peak resident memory of a process fitting the {payload['memory_nodes']}-node graph's two grids "
                  f"(compiling included): one at a time {m[VARIANTS[0]]:.0f} MiB, side by side "
                  f"{m[VARIANTS[1]]:.0f} MiB."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    return C.sizes_main("fit_threads", __doc__, argv, measure, markdown, (SIZES, REPEATS), ((200,), 1))


if __name__ == "__main__":
    raise SystemExit(main())
