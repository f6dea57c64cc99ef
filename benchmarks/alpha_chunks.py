"""Time and peak memory of a vector of alphas solved at once vs a chunk at a time
(:data:`jaxclp.solve.SOLVE_CHUNK_BYTES`, :func:`jaxclp.solve.in_alpha_chunks`).

The closed form vmaps its alphas: every alpha's system is iterated until the slowest one converges (a vmapped
``lax.while_loop`` computes every lane each step and masks the finished ones), and every lane's working vectors
are held at once. A chunk of alphas stops at its own slowest alpha and holds only its own vectors.

Each row is a fresh subprocess (peak resident memory = its ``ru_maxrss``): a synthetic graph
(:func:`jaxclp.datasets.synthetic`, h = 0.3, average degree 10, K classes), a random Dirichlet prior, 40 % of the
nodes labelled, the CLP operator of ``clp_mlp``'s grid (sym or row Â, ρ-scaled for ``cg``/``bicgstab``: α up to
0.99 as in ``clp``'s grid; the paper's operator for ``neumann``), and :func:`jaxclp.solve.solve_operator` on 11
alphas (0.1, 0.2, ..., 0.9, 0.95, 0.99; ``clp``'s grid of the scaled operators) with the budget set so
that ``chunk`` alphas go together (``11`` = all at once, the library's behaviour below the budget; the library's
cap :data:`~jaxclp.solve.SOLVE_CHUNK_ALPHAS`, which these rows measured, switched off). Seconds:
min and median of ``repeats`` timed calls after one untimed call (compile excluded). ``max |diff|``: the largest
difference of the chunked value from the all-at-once value (float32; chunking changes only float rounding).

Usage: ``python -m benchmarks.alpha_chunks [--quick] [--out DIR]`` (also ``python -m benchmarks.run
alpha_chunks``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarks import _common as C

FULL = {"sizes": [[1250, 40], [5000, 40]], "methods": ["neumann", "cg", "bicgstab"], "chunks": [11, 4, 1],
        "repeats": 3}
QUICK = {"sizes": [[100, 4]], "methods": ["cg", "bicgstab"], "chunks": [11, 1], "repeats": 1}

CHILD = r"""
import importlib, json, resource, sys, time, warnings
import numpy as np, jax, jax.numpy as jnp, jaxclp
from jaxclp.operator import spectral_scale
S = importlib.import_module("jaxclp.solve")
warnings.simplefilter("ignore")
npc, k, method, chunk, repeats = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]),
                                  int(sys.argv[5]))
ds = jaxclp.datasets.synthetic(0.3, avg_degree=10, num_classes=k, nodes_per_class=npc, seed=0, features=None)
n = ds.num_nodes
rng = np.random.default_rng(0)
tm = rng.random(n) < 0.4
prior = jnp.asarray(rng.dirichlet(np.ones(k), n).astype(np.float32))
y = jnp.asarray(np.where(tm, np.asarray(ds.labels), -1))
b0 = jaxclp.initial_beliefs(prior, y, jnp.asarray(tm))
H, _ = jaxclp.estimate_compatibility(ds.graph, prior, y, jnp.asarray(tm))
norm = "row" if method == "bicgstab" else "sym"
op = jaxclp.clp_operator(ds.graph, b0, H, normalization=norm)
if method != "neumann":
    op, _ = spectral_scale(op)
alphas = jnp.asarray([.1, .2, .3, .4, .5, .6, .7, .8, .9, .95, .99], jnp.float32)
per_alpha = S.WORKING_VECTORS[method] * n * k * 4
S.SOLVE_CHUNK_MIN_SIZE = float("inf")  # the library's cap off: the budget alone sets the chunk
S.SOLVE_CHUNK_BYTES = float("inf") if chunk >= 11 else chunk * per_alpha + per_alpha // 2
assert S.alpha_chunk(method, (n, k), jnp.float32) == (2**31 if chunk >= 11 else chunk)
jax.block_until_ready(op)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
sol = S.solve_operator(op, prior, alpha=alphas, method=method, normalization=norm)
jax.block_until_ready(sol.value)
times = []
for _ in range(repeats):
    t = time.perf_counter()
    sol = S.solve_operator(op, prior, alpha=alphas, method=method, normalization=norm)
    jax.block_until_ready(sol.value)
    times.append(time.perf_counter() - t)
np.save(sys.argv[6], np.asarray(sol.value))
print(json.dumps({"nodes": n, "classes": k, "method": sol.method, "chunk": chunk, "seconds": times,
                  "converged": bool(np.asarray(sol.converged).all()),
                  "iterations_max": int(np.asarray(sol.iterations).max()),
                  "iterations_per_alpha": np.asarray(sol.iterations).max(axis=1).tolist(),
                  "peak_before_solve_gib": base,
                  "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def grid(cfg: dict) -> list:
    import tempfile

    import numpy as np

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for npc, k in cfg["sizes"]:
            for method in cfg["methods"]:
                ref = None
                for chunk in cfg["chunks"]:
                    C.log(f"alpha_chunks: {npc * k} nodes, {k} classes, {method}, {chunk} alpha(s) per chunk")
                    load = os.getloadavg()[0]
                    val = os.path.join(tmp, f"{npc}_{k}_{method}_{chunk}.npy")
                    out = subprocess.run([sys.executable, "-c", CHILD, str(npc), str(k), method, str(chunk),
                                          str(cfg["repeats"]), val], capture_output=True, text=True)
                    if out.returncode != 0:
                        rows.append({"nodes": npc * k, "classes": k, "method": method, "chunk": chunk,
                                     "failed": f"exit {out.returncode}: {out.stderr.strip().splitlines()[-1:]}"})
                        continue
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                    value = np.load(val)
                    if ref is None:
                        ref = value
                    row["max_abs_diff"] = float(np.max(np.abs(value - ref)))
                    row["load_at_start"] = load
                    rows.append(row)
    return rows


def write_markdown(path, payload: dict) -> None:
    import statistics

    rows = []
    for r in payload["grid"]:
        if "failed" in r:
            rows.append([f"{r['nodes']:,}", r["classes"], r["method"], r["chunk"], "–", "–", "–", "–",
                         r["failed"]])
            continue
        s = r["seconds"]
        rows.append([f"{r['nodes']:,}", r["classes"], r["method"], "all 11" if r["chunk"] >= 11 else r["chunk"],
                     f"{min(s):.2f} / {statistics.median(s):.2f}", f"{r['peak_gib']:.2f}",
                     f"{r['iterations_max']}", "yes" if r["converged"] else "no", f"{r['max_abs_diff']:.1e}"])
    lines = ["# Alphas of a closed-form solve: all at once vs in chunks (`python -m benchmarks.alpha_chunks`)",
             "", C.machine_header_md(payload["machine"]), "",
             "Each row a fresh process: 11 alphas solved by `jaxclp.solve.solve_operator` with `chunk` alphas "
             "vmapped together (`all 11` = one vmapped solve, the library's behaviour below "
             "`SOLVE_CHUNK_BYTES`); seconds min / median of the timed calls after one untimed call (compile "
             "excluded); peak resident GiB of the process; `iters` = the most iterations any alpha needed; "
             "`max |diff|` = largest difference from the all-at-once value (float32). Operators: the paper's "
             "(sym Â, ρ ≈ 0.1-0.3) for neumann, ρ-scaled (sym for cg, row for bicgstab) for the others. Load "
             "average at each row's start in the JSON.", "",
             C.md_table(["nodes", "classes", "method", "chunk", "seconds (min / median)", "peak GiB", "iters",
                         "converged", "max |diff|"], rows), ""]
    path.write_text("\n".join(lines))


def main(argv=None, out=None) -> dict:
    return C.sections_main("alpha_chunks", __doc__, {"grid": grid}, FULL, QUICK, write_markdown, argv, out)


if __name__ == "__main__":
    main()
