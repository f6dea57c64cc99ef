"""Whole-process timing helper for A/B comparisons of the tuned-GNN grid program: runs one runner method on the
medium splits of a graph and prints the wall seconds, the test scores and the records' own seconds.

    python -m benchmarks.grid_tail chameleon gcn_tuned 3

Run it under ``/usr/bin/time -v`` with ``JAXCLP_XLA_CACHE=off``, alternating two checkouts (``PYTHONPATH``);
results in benchmarks/results/grid_tail.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from benchmarks import _common as C


def main(argv=None) -> None:
    from jaxclp.experiments import runner as R

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("method")
    ap.add_argument("runs", type=int)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        recs = R.run(a.dataset, "medium", [a.method], runs=a.runs, out=tmp, progress=False,
                     data_root=str(C.data_root()))
        wall = time.perf_counter() - t
    print(a.dataset, a.method, round(wall, 1), [round(r["test"], 4) for r in recs],
          [round(r["seconds"], 1) for r in recs])


if __name__ == "__main__":
    main()
