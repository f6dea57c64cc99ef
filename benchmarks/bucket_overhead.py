"""What shape buckets cost: a prior's fit on padded inputs against the same fit on the graph's own shapes.

``python -m benchmarks.bucket_overhead [--quick]`` fits the priors of ``PRIORS`` on synthetic user graphs
(``benchmarks.time_limit.user_graph``) whose node count lies just above a bucket boundary (the most padding
:func:`jaxclp.buckets.bucket` adds: up to 25 %), once on the graph's own shapes and once through
``jaxclp.fit_prior(..., shape_buckets=True)``, each variant in a fresh process: every fit runs once to compile, then
``REPEATS`` times with a fixed number of epochs (patience 0: both variants train the same epochs), keeping the
minimum seconds; the process's peak resident memory is read at its end. The priors of the two variants are compared
(max absolute difference, predictions that differ). Results: ``benchmarks/results/bucket_overhead.{json,md}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import _common as C

PRIORS = ("mlp", "link", "gcn", "h2gcn", "gcn_tuned", "linkx")
SIZES = (2561, 10241)  # bucket(n + 1) = 3072 and 12288: 20 % padding of the nodes
REPEATS = 2
EPOCHS = 100

WORKER = r'''
import json, resource, sys, time
import jax, numpy as np
import jaxclp
from jaxclp import buckets
path, out, padded, names, epochs, repeats = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4].split(","), int(sys.argv[5]), int(sys.argv[6])
z = np.load(path)
n = int(z["node_labels"].shape[0])
g = jaxclp.Graph.from_edge_index(z["edges"].T, n)
x = z["node_features"]
y = z["node_labels"]
rng = np.random.default_rng(0)
tm = rng.random(n) < 0.5
vm = ~tm & (rng.random(n) < 0.5)
labels = np.where(tm | vm, y, -1)
cfg = jaxclp.TrainConfig(epochs=epochs, patience=0)
res = {"nodes": n, "edges": g.num_edges, "padded_nodes": buckets.node_bucket(n),
       "padded_edges": buckets.bucket(g.num_edges, buckets.MIN_EDGES), "fits": {}}
priors = {}
for name in names:
    def fit():
        r = jaxclp.fit_prior(name, jax.random.key(0), g, x, labels, tm, vm, int(y.max()) + 1, cfg, shape_buckets=padded)
        return jax.block_until_ready(r.prior)
    t = time.perf_counter(); fit(); first = time.perf_counter() - t
    times = []
    for _ in range(repeats):
        t = time.perf_counter(); p = fit(); times.append(time.perf_counter() - t)
    priors[name] = np.asarray(p)
    res["fits"][name] = {"first_s": first, "min_s": min(times)}
res["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
np.savez(out + ".npz", **priors)
json.dump(res, open(out, "w"))
'''


def _variant(src: Path, graph: Path, padded: bool, names, epochs: int, repeats: int, tmp: Path) -> tuple[dict, Path]:
    script = tmp / "worker.py"
    script.write_text(WORKER)
    out = tmp / f"{graph.stem}_{int(padded)}.json"
    env = dict(os.environ, PYTHONPATH=str(src))
    subprocess.run([sys.executable, str(script), str(graph), str(out), "1" if padded else "0", ",".join(names),
                    str(epochs), str(repeats)], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.read_text()), Path(str(out) + ".npz")


def measure(src: Path, sizes=SIZES, names=PRIORS, epochs: int = EPOCHS, repeats: int = REPEATS) -> list[dict]:
    import numpy as np

    from benchmarks.time_limit import user_graph

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for n in sizes:
            graph = user_graph(tmp / f"user{n}.npz", n, seed=n)
            C.log(f"[bucket_overhead] {n} nodes: exact shapes, then buckets")
            exact, pe = _variant(src, graph, False, names, epochs, repeats, tmp)
            padded, pp = _variant(src, graph, True, names, epochs, repeats, tmp)
            a, b = np.load(pe), np.load(pp)
            for name in names:
                rows.append(dict(nodes=n, edges=exact["edges"], padded_nodes=padded["padded_nodes"],
                                 padded_edges=padded["padded_edges"], prior=name,
                                 exact_s=exact["fits"][name]["min_s"], padded_s=padded["fits"][name]["min_s"],
                                 ratio=padded["fits"][name]["min_s"] / exact["fits"][name]["min_s"],
                                 max_abs_diff=float(np.abs(a[name] - b[name]).max()),
                                 predictions_differing=int((a[name].argmax(1) != b[name].argmax(1)).sum()),
                                 exact_peak_mib=exact["peak_rss_mib"], padded_peak_mib=padded["peak_rss_mib"]))
    return rows


def markdown(payload: dict) -> str:
    rows = payload["rows"]
    lines = ["# What shape buckets cost", "", f"Command: `{payload['command']}`", "",
             f"Checkout: {payload['checkout']}", "", C.machine_header_md(payload["machine"]), "",
             f"Each prior fitted with {payload['epochs']} epochs (patience 0), compiled first, then the minimum of "
             f"{payload['repeats']} fits; one fresh process per graph and variant (module docstring). `ratio` = "
             "padded / exact seconds; `max |diff|`: the two priors' largest difference, `differ`: nodes whose "
             "predicted class differs (the padding is the same computation up to rounding, which training may "
             "amplify). Peak memory is the process's (every prior of the row's graph).", "",
             C.md_table(["nodes", "edges", "padded to", "prior", "exact s", "padded s", "ratio", "max |diff|",
                         "differ"],
                        [[r["nodes"], r["edges"], f"{r['padded_nodes']} / {r['padded_edges']}", r["prior"],
                          f"{r['exact_s']:.2f}", f"{r['padded_s']:.2f}", f"{r['ratio']:.2f}",
                          f"{r['max_abs_diff']:.1e}", r["predictions_differing"]] for r in rows]), ""]
    peaks = {}
    for r in rows:
        peaks[r["nodes"]] = (r["exact_peak_mib"], r["padded_peak_mib"])
    lines += ["Peak resident memory (MiB), exact -> padded: "
              + "; ".join(f"{n} nodes {a:.0f} -> {b:.0f} ({b / a:.2f}x)" for n, (a, b) in peaks.items()) + ".", ""]
    worst = max(r["ratio"] for r in rows)
    lines += [f"Largest time ratio: {worst:.2f}x (the padding adds up to "
              f"{max(r['padded_nodes'] / r['nodes'] for r in rows):.2f}x the nodes and "
              f"{max(r['padded_edges'] / r['edges'] for r in rows):.2f}x the edges)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    a, src, checkout = C.src_arguments(argv, __doc__, "one small graph, MLP and GCN, 5 epochs (a smoke run)")
    if a.quick:
        rows = measure(src, sizes=(130,), names=("mlp", "gcn"), epochs=5, repeats=1)
        epochs, repeats = 5, 1
    else:
        rows = measure(src)
        epochs, repeats = EPOCHS, REPEATS
    payload = dict(command=C.command_line("bucket_overhead", argv), checkout=checkout, machine=C.machine_info(),
                   epochs=epochs, repeats=repeats, rows=rows)
    return C.quick_or_report("bucket_overhead", payload, markdown, a.quick)


if __name__ == "__main__":
    raise SystemExit(main())
