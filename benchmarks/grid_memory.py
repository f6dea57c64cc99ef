"""Peak memory of ``clp_mlp``'s candidate grid (the runner's CLP on one prior: ~312 configurations) on large
synthetic graphs: the grid stored whole, as before session 27, vs the lean grid (:data:`GRID_MAX_BYTES`: past it
each computed group keeps its first best candidate; the authors' kernel in chunks of :data:`GRID_CHUNK_BYTES`;
since session 28 the closed-form solves' alphas in chunks of :data:`jaxclp.solve.SOLVE_CHUNK_BYTES`). ``lean27``
is session 27's lean grid (every alpha of a solve vmapped at once), for the difference the solve chunks make.
(The committed rows ran before :data:`jaxclp.solve.SOLVE_CHUNK_ALPHAS`: their ``lean`` had the memory budget
alone, 8 alphas per chunk at 50k x 40 and 2 at 200k x 40; the cap now makes the first 4.)

Each row runs in a fresh subprocess (peak resident memory = the child's ``ru_maxrss``): a synthetic graph
(:func:`jaxclp.datasets.synthetic`, h = 0.3, average degree 10), a random Dirichlet prior (no MLP: the grid
alone), 40 % of the nodes for training and 20 % of the rest for validation, then
:func:`jaxclp.experiments.methods.method_clp` and :func:`~jaxclp.experiments.candidates.select`. ``whole`` sets all three
budgets to infinity (``pruned``, in ``--quick``: the grid budget to 0, every group pruned); rows whose whole grid would need more than 70 % of the available memory (~600 ``n K``
float32 values, measured) are not run and say so. Both modes must choose the same configuration with the same
validation score.

Usage: ``python -m benchmarks.grid_memory [--quick] [--out DIR]`` (also ``python -m benchmarks.run
grid_memory``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks import _common as C

FULL = {"sizes": [[1250, 40], [5000, 40]], "modes": ["whole", "lean27", "lean"]}  # nodes per class, classes: 50k, 200k nodes
QUICK = {"sizes": [[50, 4]], "modes": ["whole", "lean27", "lean", "pruned"]}  # pruned: GRID_MAX_BYTES = 0 (CI smoke)
BYTES_PER_NK_WHOLE = 600 * 4
"""The whole grid's peak per n * K (measured: 4.8 GB for 50k nodes x 40 classes)."""

CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np, jax, jax.numpy as jnp, jaxclp
import importlib
import jaxclp.nonlinear as A
from jaxclp.experiments import candidates, methods as M
S = importlib.import_module("jaxclp.solve")  # the module (jaxclp.solve is the function)
warnings.simplefilter("ignore")
npc, k, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if mode in ("whole", "lean27"):  # every alpha of a solve at once (no budget, no cap)
    S.SOLVE_CHUNK_BYTES = S.SOLVE_CHUNK_MIN_SIZE = float("inf")
if mode == "whole":
    M.GRID_MAX_BYTES = A.GRID_CHUNK_BYTES = float("inf")
if mode == "pruned":
    M.GRID_MAX_BYTES = 0
ds = jaxclp.datasets.synthetic(0.3, avg_degree=10, num_classes=k, nodes_per_class=npc, seed=0, features=None)
n = ds.num_nodes
y = np.asarray(ds.labels)
rng = np.random.default_rng(0)
tm = rng.random(n) < 0.4
vm = (~tm) & (rng.random(n) < 0.2)
prior = jnp.asarray(rng.dirichlet(np.ones(k), n).astype(np.float32))
vis = np.where(tm | vm, y, -1).astype(np.int32)
ctx = candidates.Context(graph=ds.graph, features=None, labels=jnp.asarray(vis), train=jnp.asarray(tm),
                         val=jnp.asarray(vm), num_classes=k, metric="accuracy", key=jax.random.key(0),
                         priors={1: prior}, mlp_depth=1)
t = time.perf_counter()
cands = M.method_clp(ctx)
cfg, val = candidates.select(cands, vis, vm, "accuracy")
print(json.dumps({"nodes": n, "edges": int(ds.graph.num_edges), "classes": k, "mode": mode,
                  "seconds": time.perf_counter() - t, "stored": len(cands), "choice": repr(cfg), "val": val,
                  "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def _available_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("inf")


def grid(cfg: dict) -> list:
    rows = []
    for npc, k in cfg["sizes"]:
        for mode in cfg["modes"]:
            need = BYTES_PER_NK_WHOLE * npc * k * k / 2**30
            if mode == "whole" and need > 0.7 * _available_gib():
                rows.append({"nodes": npc * k, "classes": k, "mode": mode, "skipped":
                             f"needs ~{need:.0f} GiB, more than 70 % of the {_available_gib():.0f} GiB available"})
                continue
            C.log(f"grid_memory: {npc * k} nodes, {k} classes, {mode}")
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, "-c", CHILD, str(npc), str(k), mode], capture_output=True,
                                 text=True)
            if out.returncode != 0:
                rows.append({"nodes": npc * k, "classes": k, "mode": mode,
                             "failed": f"exit {out.returncode}: {out.stderr.strip().splitlines()[-1:]}"})
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            row["load_at_start"] = load
            rows.append(row)
    return rows


def write_markdown(path: Path, payload: dict) -> None:
    rows = []
    for r in payload["grid"]:
        if "skipped" in r or "failed" in r:
            rows.append([f"{r['nodes']:,}", r["classes"], r["mode"], "–", "–", "–", r.get("skipped") or r["failed"]])
            continue
        rows.append([f"{r['nodes']:,}", r["classes"], r["mode"], f"{r['peak_gib']:.2f}", f"{r['seconds']:.0f}",
                     r["stored"], f"val {r['val']:.4f}, {r['choice']}"])
    lines = ["# Peak memory of clp_mlp's candidate grid: whole vs lean "
             "(`python -m benchmarks.grid_memory`)", "", C.machine_header_md(payload["machine"]), "",
             "Peak resident GiB of a fresh process computing the grid and choosing on validation (synthetic graph, "
             "random prior, no MLP); seconds of the grid and the choice (compile included; one run each, load average "
             "at its start in the JSON); `stored` = candidates "
             "kept. `whole`: every candidate stored, the authors' 80 configurations in one vmapped kernel and every "
             "alpha of a closed-form solve at once (before session 27); `lean27`: session 27's budgets (grid, "
             "authors' chunks), the solves' alphas still at once; `lean`: the library's budgets (since session 28 "
             "also `jaxclp.solve.SOLVE_CHUNK_BYTES`).", "",
             C.md_table(["nodes", "classes", "mode", "peak GiB", "seconds", "stored", "choice"], rows), ""]
    path.write_text("\n".join(lines))


def main(argv=None, out=None) -> dict:
    return C.sections_main("grid_memory", __doc__, {"grid": grid}, FULL, QUICK, write_markdown, argv, out)


if __name__ == "__main__":
    main()
