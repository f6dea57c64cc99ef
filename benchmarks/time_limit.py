"""Does ``jaxclp predict --time-limit`` hold? Whole-process wall time against the limit, per graph and checkout.

Each run is a fresh ``python -m jaxclp predict --dataset GRAPH --time-limit L`` process with a fresh XLA cache
(compilation paid, as on a new machine), its wall seconds and peak memory taken from the operating system
(``os.wait4``); the predictions' JSON says which predictor was chosen, its validation score and what was left out
for time. ``--checkout NAME=PATH`` runs another checkout's source (``PATH/src`` on ``PYTHONPATH``) the same way, in
turn with this one's, so a before/after pair shares the machine's state.

Command: ``python -m benchmarks.time_limit --graphs wiki,minesweeper --limit 60 --checkout before=WORKTREE``;
with ``--run-sizes 300,3000`` it times ``jaxclp run --graph FILE`` with every default on synthetic user graphs of
those sizes instead.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import machine_header_md, machine_info, md_table, save_report

HERE = Path(__file__).resolve().parents[1] / "src"
"""This checkout's ``src`` folder."""


def _timed(cmd: list[str], env: dict) -> tuple[str, float, float]:
    """Runs ``cmd`` to its end: ``(its output, wall seconds, peak memory GiB from os.wait4)``; a failure raises
    with the output's tail."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    text = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({code}):\n{text[-2000:]}")
    return text, wall, usage.ru_maxrss / 2**20


def run_once(src: Path, graph: str, limit: float, priors: str | None = None, previous: str | None = None) -> dict:
    """One fresh ``jaxclp predict`` process of the checkout whose ``src`` folder is ``src`` (``previous``: its
    ``--previous`` records folder)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(src), JAXCLP_XLA_CACHE=str(Path(tmp) / "xla"))
        out = Path(tmp) / "pred.csv"
        cmd = [sys.executable, "-m", "jaxclp", "predict", "--dataset", graph, "--time-limit", f"{limit:g}",
               "--out", str(out), "--no-progress"] + (["--priors", priors] if priors else []) + (
                   ["--previous", str(previous)] if previous else [])
        text, wall, peak = _timed(cmd, env)
        info = json.loads(out.with_suffix(".json").read_text())
    return dict(wall_s=wall, peak_gib=peak, nodes=info.get("num_nodes"), base_prior=info.get("base_prior"),
                val_score=info.get("val_score"), alpha=(info.get("params") or {}).get("alpha"),
                skipped=info.get("skipped", []))


def user_graph(path: Path, n: int, seed: int = 0) -> Path:
    """A user's graph file as ``jaxclp run --graph`` reads it (Platonov et al.'s ``.npz`` layout): ``n`` nodes in
    ``max(3, n // 600)`` classes, average degree 10, edge homophily 0.3
    (:func:`jaxclp.datasets.synthetic.sample_edges`), 64 Gaussian features around class means (signal 0.4 per
    feature)."""
    import numpy as np

    from jaxclp.datasets.synthetic import sample_edges

    rng = np.random.default_rng(seed)
    k = max(3, n // 600)
    y = rng.integers(0, k, n)
    edges = np.asarray(sample_edges(y, n * 5, 0.3, seed=seed)).T
    x = (0.4 * rng.normal(size=(k, 64))[y] + rng.normal(size=(n, 64))).astype(np.float32)
    np.savez(path, node_features=x, node_labels=y, edges=edges)
    return path


def run_graph_once(src: Path, graph: Path, cache: Path | None = None) -> dict:
    """One fresh ``jaxclp run --graph GRAPH`` process (every default: methods, 10 splits, time limit) of the
    checkout whose ``src`` folder is ``src``: wall seconds, peak memory, the best method and ``clp``'s records.
    ``cache``: the persistent XLA cache folder to use (and fill); None: a fresh, empty one."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=str(src), JAXCLP_XLA_CACHE=str(cache or Path(tmp) / "xla"))
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "jaxclp", "run", "--graph", str(graph), "--out", str(out), "--no-progress"]
        text, wall, peak = _timed(cmd, env)
        recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    clp = [r for r in recs if r.get("type") == "result" and r.get("method") == "clp"]
    best = next((line for line in text.splitlines() if line.startswith("best on ")), "")
    skipped = sorted({s for r in clp for s in r.get("skipped") or ()})
    secs = sorted(float(r["seconds"]) for r in clp)
    return dict(wall_s=wall, peak_gib=peak, best=best, clp_seconds=secs,
                clp_median_s=secs[len(secs) // 2] if secs else None, clp_skipped=skipped,
                clp_time_limit=(clp[0].get("config") or {}).get("time_limit") if clp else None)


def main_run(a, info, checkouts, cmd) -> int:
    """``--run-sizes``: ``jaxclp run`` on user graphs of those sizes, each checkout in turn."""
    rows, recs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(v) for v in a.run_sizes.split(",")):
            graph = user_graph(Path(tmp) / f"user{n}.npz", n)
            for i, (name, src) in enumerate(checkouts):
                # --warm: twice on one cache folder, empty and then filled by the first run; else a fresh one
                folder = Path(tmp) / f"xla_{n}_{i}" if a.warm else None
                for state in ("cold", "warm") if a.warm else ("fresh",):
                    r = dict(nodes=n, checkout=name, cache=state, **run_graph_once(src, graph, folder))
                    recs.append(r)
                    print(json.dumps(r), flush=True)
                    rows.append([n, name if state == "fresh" else f"{name}, {state} cache", f"{r['wall_s']:.1f}",
                                 f"{r['peak_gib']:.2f}", f"{r['clp_median_s']:.1f}", f"{r['clp_seconds'][-1]:.1f}",
                                 r["clp_time_limit"] or "none", ", ".join(r["clp_skipped"]) or "-",
                                 r["best"].removeprefix("best on ")])
    md = ("# `jaxclp run --graph FILE` with every default: whole-process wall time on user graphs\n\n"
          f"Command: `{cmd}`\n\n{machine_header_md(info)}\n\n"
          + ("Each checkout runs twice, on one persistent XLA cache folder: empty (`cold cache`), then filled "
             "by that first run (`warm cache`: nothing left to compile, tracing and cache reads aside). "
             if a.warm else "")
          + "Each row is one fresh process" + ("" if a.warm else " with a fresh XLA cache")
          + ": `jaxclp run --graph user<n>.npz --out DIR "
          "--no-progress` (the default methods, 10 medium splits, the default time limit of the checkout) on a "
          "synthetic user graph (`user_graph`: n nodes, max(3, n // 600) classes, average degree 10, edge "
          "homophily 0.3, 64 features). `clp s/split` = median and largest of `clp`'s records' seconds (the first "
          "split pays the compilations); `clp left out` = what `clp`'s records name as left out or stopped for "
          "time.\n\n" + (a.note + "\n\n" if a.note else "")
          + md_table(["nodes", "checkout", "wall s", "peak GiB", "clp s/split (median)", "clp s/split (max)",
                      "clp time limit", "clp left out", "best"], rows) + "\n")
    save_report(a.tag, dict(command=cmd, machine=info, runs=recs, note=a.note), md)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--graphs", default="wiki,minesweeper")
    p.add_argument("--limit", type=float, default=60.0)
    p.add_argument("--priors", default=None, help="predict's --priors (default: clp's own list)")
    p.add_argument("--previous", default=None, metavar="DIR",
                   help="also run this checkout with predict's --previous DIR (a run's records of these graphs, "
                        "e.g. results/table2), as the row 'NAME --previous'")
    p.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH",
                   help="another checkout to run beside this one (its src/ on PYTHONPATH)")
    p.add_argument("--name", default="after", help="this checkout's name in the table")
    p.add_argument("--tag", default="time_limit")
    p.add_argument("--note", default="", help="a paragraph saying what the checkouts are")
    p.add_argument("--warm", action="store_true",
                   help="with --run-sizes: run each checkout twice on one XLA cache (cold, then warm)")
    p.add_argument("--run-sizes", default=None, metavar="N,N",
                   help="time `jaxclp run --graph` on synthetic user graphs of these sizes instead of predict")
    a = p.parse_args(argv)
    info = machine_info()
    checkouts = [(a.name, HERE)] + [(c.split("=", 1)[0], Path(c.split("=", 1)[1]).resolve() / "src")
                                    for c in a.checkout]
    args = list(argv if argv is not None else sys.argv[1:])
    if "--note" in args:  # the note is printed under the command, not inside it
        i = args.index("--note")
        del args[i:i + 2]
    cmd = shlex.join(["python", "-m", "benchmarks.time_limit", *args])
    if a.run_sizes:
        return main_run(a, info, checkouts, cmd)
    rows, recs = [], []
    arms = [(name, src, None) for name, src in checkouts] + (
        [(f"{a.name} --previous", HERE, Path(a.previous).resolve())] if a.previous else [])
    for graph in a.graphs.split(","):
        for name, src, previous in arms:
            r = dict(graph=graph, checkout=name, limit_s=a.limit,
                     **run_once(src, graph, a.limit, a.priors, previous))
            recs.append(r)
            print(json.dumps(r), flush=True)
            tuned_cut = [s for s in r["skipped"] if " epochs after " in s and "_tuned" in s]
            rows.append([graph, name, f"{r['wall_s']:.1f}", f"{r['wall_s'] - a.limit:+.1f}", f"{r['peak_gib']:.2f}",
                         r["base_prior"], f"{r['val_score']:.4f}", f"{r['alpha']:g}",
                         ", ".join(tuned_cut) or "-", ", ".join(r["skipped"]) or "-"])
    opts = f"--time-limit {a.limit:g}" + (f" --priors {a.priors}" if a.priors else "")
    md = (f"# `jaxclp predict {opts}`: whole-process wall time against the limit\n\n"
          f"Command: `{cmd}`\n\n{machine_header_md(info)}\n\n"
          "Each row is one fresh process with a fresh XLA cache (compilation, loading and writing included), "
          f"`--dataset GRAPH {opts} --no-progress`; `over` = wall - limit (the limit bounds `clp`'s fit; "
          "loading the data, starting Python and writing the predictions come on top); `tuned GNN cut` = the "
          "tuned GNN priors whose training the limit stopped (`NAME epochs after E`); `left out` = everything the "
          "predictions' JSON names as left out for time"
          + (f"; `NAME --previous` = the same with `--previous {a.previous}` (only the base predictors `clp` chose "
             "in those records)" if a.previous else "") + ".\n\n"
          + (a.note + "\n\n" if a.note else "")
          + md_table(["graph", "checkout", "wall s", "over", "peak GiB", "chosen prior", "val score", "alpha",
                      "tuned GNN cut", "left out"], rows) + "\n")
    save_report(a.tag, dict(command=cmd, machine=info, runs=recs, note=a.note), md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
