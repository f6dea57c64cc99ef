"""Entry point: ``python -m benchmarks.run [--quick] [--out DIR] [which ...]`` from the root of a clone.

``which`` is any of :data:`ORDER` (default: all, in that order);
``summary`` alone only rebuilds ``SUMMARY.md`` from the JSON files already in the results directory.
``--quick`` runs tiny sizes (about a minute, CI smoke test). Results: JSON + markdown + PNG per benchmark in
``benchmarks/results/`` and ``SUMMARY.md`` there.
"""

from __future__ import annotations

import argparse
import time
import traceback

from benchmarks import _common as C

ORDER = ("throughput", "solvers", "end_to_end", "scaling", "graph_memory", "halo", "sharded", "gnn", "sparse_features",
         "rng", "speedups", "file_reader", "grid_memory", "alpha_chunks")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description="jaxclp benchmarks (see benchmarks/README "
                                 "in the module docstrings); writes JSON, markdown and PNG results.")
    ap.add_argument("which", nargs="*", metavar="which",
                    help=f"benchmarks to run, any of {', '.join(ORDER)}, 'all' (default) or 'summary'")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, about a minute (CI smoke)")
    ap.add_argument("--out", default=None, help="results directory (default benchmarks/results)")
    args = ap.parse_args(argv)
    bad = [w for w in args.which if w not in (*ORDER, "summary", "all")]
    if bad:
        ap.error(f"unknown benchmark(s) {bad}; choose from {', '.join(ORDER)}, all, summary")
    which = [w for w in ORDER if not args.which or "all" in args.which or w in args.which]
    if args.which == ["summary"]:
        which = []
    od = C.out_dir(args.out)
    common = (["--quick"] if args.quick else []) + ["--out", str(od)]
    t0 = time.time()
    failures = []
    for name in which:
        C.log(f"run: {name} {'(quick)' if args.quick else ''}")
        module = __import__(f"benchmarks.{name}", fromlist=["main"])
        try:
            module.main(common)
        except Exception:  # noqa: BLE001 - one failing benchmark must not lose the others
            failures.append(name)
            C.log(f"run: {name} FAILED\n{traceback.format_exc()}")
    from benchmarks import summary

    summary.main(["--out", str(od)])
    C.log(f"run: done in {time.time() - t0:.0f} s; failures: {failures or 'none'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
