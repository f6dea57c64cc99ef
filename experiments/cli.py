"""``jaxclp`` console command: parse the config, call the orchestrator. Nothing else lives here."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import jax

from jaxclp.experiments import reproduce
from jaxclp.experiments.methods import METHODS
from jaxclp.experiments.runner import run
from jaxclp.experiments.summary import write_summary
from jaxclp.datasets.fetch import user_cache_dir

ALL_METHODS = "mlp,link,lp,cs,clp_star,clp"
XLA_CACHE_ENV = "JAXCLP_XLA_CACHE"
XLA_CACHE_MIN_COMPILE_SECONDS = 0.2


def xla_cache_dir(environ=None) -> Path | None:
    """JAX's persistent compilation cache for ``run``/``reproduce``: ``$JAXCLP_XLA_CACHE``, default
    ``<user cache dir>/xla``; ``off`` (or ``0``, ``none``, empty) disables it.

    Each (dataset shape, method) compiles once per machine instead of once per process (cold vs warm
    ``jaxclp run``: ``benchmarks/results/fixes.md``). ``bench`` never uses it (the benchmarks measure compile
    time).
    """
    v = (os.environ if environ is None else environ).get(XLA_CACHE_ENV)
    if v is not None and v.strip().lower() in ("", "0", "off", "none", "false", "no"):
        return None
    return Path(v).expanduser() if v else user_cache_dir() / "xla"


def _enable_xla_cache() -> None:
    path = xla_cache_dir()
    if path is not None:
        jax.config.update("jax_compilation_cache_dir", str(path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", XLA_CACHE_MIN_COMPILE_SECONDS)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jaxclp", description="Compatible Label Propagation experiments.")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run methods on one dataset and split")
    r.add_argument("--dataset", required=True)
    r.add_argument("--split", default="medium", choices=["sparse", "medium", "dense", "published"])
    r.add_argument("--methods", default=ALL_METHODS, help=f"comma list from {sorted(METHODS)}")
    r.add_argument("--runs", type=int, default=10)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--epochs", type=int, default=500)
    r.add_argument("--out", default="results/runs")
    r.add_argument("--data-root", default=None, help="dataset root (default $JAXCLP_DATA or user cache)")
    r.add_argument("--no-progress", action="store_true")
    q = sub.add_parser("reproduce", help="regenerate a table of results/")
    q.add_argument("target", choices=sorted(reproduce.TARGETS))
    q.add_argument("--out", default="results")
    q.add_argument("--runs", type=int, default=10)
    q.add_argument("--datasets", default=None, help="comma list overriding the target's datasets")
    q.add_argument("--data-root", default=None)
    s = sub.add_parser("summarize", help="write summary.md for a results directory")
    s.add_argument("dir")
    b = sub.add_parser("bench", help="benchmarks (see benchmarks/)")
    b.add_argument("rest", nargs=argparse.REMAINDER)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    a = _parser().parse_args(argv)
    if a.cmd in ("run", "reproduce"):
        _enable_xla_cache()
    if a.cmd == "run":
        run(a.dataset, a.split, a.methods.split(","), a.runs, a.out, seed=a.seed, epochs=a.epochs,
            progress=not a.no_progress, argv=["jaxclp", *argv], data_root=a.data_root)
        print(write_summary(a.out, title=f"jaxclp run ({a.dataset}, {a.split})"))
    elif a.cmd == "reproduce":
        datasets = a.datasets.split(",") if a.datasets else None
        for path in reproduce.TARGETS[a.target](Path(a.out), runs=a.runs, datasets=datasets,
                                                data_root=a.data_root, argv=["jaxclp", *argv]):
            print(path)
    elif a.cmd == "summarize":
        print(write_summary(a.dir))
    elif a.cmd == "bench":
        from jaxclp.benchmarks.run import main as bench_main

        return bench_main(a.rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
