"""Does ``jaxclp predict --time-limit`` hold? Whole-process wall time against the limit, per graph and checkout.

Each run is a fresh ``python -m jaxclp predict --dataset GRAPH --time-limit L`` process with a fresh XLA cache
(compilation paid, as on a new machine), its wall seconds and peak memory taken from the operating system
(``os.wait4``); the predictions' JSON says which predictor was chosen, its validation score and what was left out
for time. ``--checkout NAME=PATH`` runs another checkout's source (``PATH/src`` on ``PYTHONPATH``) the same way, in
turn with this one's, so a before/after pair shares the machine's state.

Command: ``python -m jaxclp.benchmarks.time_limit --graphs wiki,minesweeper --limit 60 --checkout before=WORKTREE``
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

from jaxclp.benchmarks._common import machine_header_md, machine_info, md_table, save_report

HERE = Path(__file__).resolve().parents[2]
"""This checkout's ``src`` folder."""


def run_once(src: Path, graph: str, limit: float, priors: str | None = None) -> dict:
    """One fresh ``jaxclp predict`` process of the checkout whose ``src`` folder is ``src``."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(src), JAXCLP_XLA_CACHE=str(Path(tmp) / "xla"))
        out = Path(tmp) / "pred.csv"
        cmd = [sys.executable, "-m", "jaxclp", "predict", "--dataset", graph, "--time-limit", f"{limit:g}",
               "--out", str(out), "--no-progress"] + (["--priors", priors] if priors else [])
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        text = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{text[-2000:]}")
        info = json.loads(out.with_suffix(".json").read_text())
    return dict(wall_s=wall, peak_gib=usage.ru_maxrss / 2**20, base_prior=info.get("base_prior"),
                val_score=info.get("val_score"), alpha=(info.get("params") or {}).get("alpha"),
                skipped=info.get("skipped", []))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--graphs", default="wiki,minesweeper")
    p.add_argument("--limit", type=float, default=60.0)
    p.add_argument("--priors", default=None, help="predict's --priors (default: clp's own list)")
    p.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH",
                   help="another checkout to run beside this one (its src/ on PYTHONPATH)")
    p.add_argument("--name", default="after", help="this checkout's name in the table")
    p.add_argument("--tag", default="time_limit")
    p.add_argument("--note", default="", help="a paragraph saying what the checkouts are")
    a = p.parse_args(argv)
    info = machine_info()
    checkouts = [(a.name, HERE)] + [(c.split("=", 1)[0], Path(c.split("=", 1)[1]).resolve() / "src")
                                    for c in a.checkout]
    rows, recs = [], []
    for graph in a.graphs.split(","):
        for name, src in checkouts:
            r = dict(graph=graph, checkout=name, limit_s=a.limit, **run_once(src, graph, a.limit, a.priors))
            recs.append(r)
            print(json.dumps(r), flush=True)
            tuned_cut = [s for s in r["skipped"] if " epochs after " in s and "_tuned" in s]
            rows.append([graph, name, f"{r['wall_s']:.1f}", f"{r['wall_s'] - a.limit:+.1f}", f"{r['peak_gib']:.2f}",
                         r["base_prior"], f"{r['val_score']:.4f}", f"{r['alpha']:g}",
                         ", ".join(tuned_cut) or "-", len(r["skipped"])])
    cmd = "python -m jaxclp.benchmarks.time_limit " + " ".join(argv if argv is not None else sys.argv[1:])
    opts = f"--time-limit {a.limit:g}" + (f" --priors {a.priors}" if a.priors else "")
    md = (f"# `jaxclp predict {opts}`: whole-process wall time against the limit\n\n"
          f"Command: `{cmd}`\n\n{machine_header_md(info)}\n\n"
          "Each row is one fresh process with a fresh XLA cache (compilation, loading and writing included), "
          f"`--dataset GRAPH {opts} --no-progress`; `over` = wall - limit (the limit bounds `clp`'s fit; "
          "loading the data, starting Python and writing the predictions come on top); `tuned GNN cut` = the "
          "tuned GNN priors whose training the limit stopped (`NAME epochs after E`); `left out` = everything the "
          "predictions' JSON names as left out for time.\n\n"
          + (a.note + "\n\n" if a.note else "")
          + md_table(["graph", "checkout", "wall s", "over", "peak GiB", "chosen prior", "val score", "alpha",
                      "tuned GNN cut", "left out"], rows) + "\n")
    save_report(a.tag, dict(command=cmd, machine=info, runs=recs, note=a.note), md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
