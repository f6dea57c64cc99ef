"""Whole-process timing helper for A/B comparisons of the tuned-GNN grid program: runs one runner method on
the medium splits of a graph and prints the wall seconds, test scores and the records' seconds.

    python -m jaxclp.benchmarks.grid_tail chameleon gcn_tuned 3

Run it under ``/usr/bin/time -v`` (JAXCLP_XLA_CACHE=off), alternating two checkouts via PYTHONPATH; results in
benchmarks/results/grid_tail.md.
"""
import os
import sys, tempfile, time
from jaxclp.experiments import runner as R
ds, method, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
with tempfile.TemporaryDirectory() as tmp:
    t = time.perf_counter()
    recs = R.run(ds, "medium", [method], runs=runs, out=tmp, progress=False, data_root=os.environ.get("JAXCLP_DATA_ROOT", "/work/shared/datasets"))
    print(ds, method, round(time.perf_counter() - t, 1), [round(r["test"], 4) for r in recs], [round(r["seconds"], 1) for r in recs])
