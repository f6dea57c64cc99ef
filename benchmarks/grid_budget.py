"""Where ``clp``'s CLP candidate grid spends its time, by kind of candidate (the closed form, the spectrally scaled
closed form, the per-step L1 variants, the authors' step), on an arxiv-shaped graph: the figures behind
:data:`jaxclp.search.GRID_COST`.

    python -m benchmarks.grid_budget --scale 0.25 --priors gcn

Runs ``jaxclp predict --method clp --time-limit none`` in this process with ``jaxclp.clp_beliefs`` and the
authors' grid wrapped by timers (each call blocked until its arrays are ready); writes
``benchmarks/results/grid_budget.{json,md}``.
"""

from __future__ import annotations

import argparse
import collections
import functools
import tempfile
import time
from pathlib import Path

from benchmarks import _common as C


def _kind(kwargs) -> str:
    if kwargs.get("spectral_scale"):
        return "spectral"
    return "l1" if kwargs.get("l1_normalize") else "closed"


def profile(scale: float, priors: str) -> dict:
    import jax

    import jaxclp
    from benchmarks import large_graph as LG
    from jaxclp.experiments import methods as M
    from jaxclp.experiments.cli import main as cli

    seconds, calls = collections.Counter(), collections.Counter()

    def timed(kind_of, f):
        @functools.wraps(f)
        def g(*args, **kwargs):
            t = time.perf_counter()
            out = f(*args, **kwargs)
            jax.block_until_ready(getattr(out, "beliefs", out))
            kind = kind_of(kwargs)
            seconds[kind] += time.perf_counter() - t
            calls[kind] += 1
            return out
        return g

    real_beliefs, real_nonlinear = jaxclp.clp_beliefs, M.nonlinear_grid
    jaxclp.clp_beliefs = timed(_kind, real_beliefs)
    M.nonlinear_grid = timed(lambda kwargs: "authors", real_nonlinear)  # GRID_COST's kind "authors"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            graph = LG.build(folder, scale=scale)
            t = time.perf_counter()
            cli(["predict", "--graph", str(folder / "edges.npy"), "--labels", str(folder / "labels.npy"),
                 "--features", str(folder / "features.npy"), "--method", "clp", "--priors", priors,
                 "--time-limit", "none", "--out", str(folder / "pred.csv"), "--no-progress"])
            wall = time.perf_counter() - t
    finally:
        jaxclp.clp_beliefs, M.nonlinear_grid = real_beliefs, real_nonlinear
    return {"graph": graph, "priors": priors, "wall": wall, "seconds": dict(seconds), "calls": dict(calls)}


def markdown(payload: dict) -> str:
    sec = payload["seconds"]
    closed = sec.get("closed") or float("nan")
    g = payload["graph"]
    lines = ["# `clp`'s CLP candidates: seconds by kind", "", f"Command: `{payload['command']}`", "",
             C.machine_header_md(payload["machine"]), "",
             f"Graph: arxiv-shaped, {g['nodes']} nodes, {g['undirected_edges']} undirected edges, {g['classes']} "
             f"classes; base predictors `{payload['priors']}`; `jaxclp predict` wall {payload['wall']:.1f} s "
             "(compilation included; the kinds' seconds include their compilation too).", "",
             "| kind | calls | seconds | relative to the closed form |", "|---|---|---|---|"]
    for kind in sorted(sec, key=sec.get):
        lines.append(f"| {kind} | {payload['calls'][kind]} | {sec[kind]:.1f} | {sec[kind] / closed:.1f} |")
    lines += ["", "`jaxclp.search.GRID_COST` holds these ratios (rounded): under `--time-limit` the "
              "closed form is always computed and the other kinds, cheapest first, only while ratio x the closed "
              "form's measured seconds fits the time left."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    import sys

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=0.25, help="fraction of arxiv's node count")
    p.add_argument("--priors", default="gcn", help="clp's base predictors (the grid runs on the chosen one)")
    a = p.parse_args(argv)
    payload = profile(a.scale, a.priors)
    payload |= {"command": "python -m benchmarks.grid_budget " + " ".join(argv or sys.argv[1:]),
                "machine": C.machine_info()}
    C.save_report("grid_budget", payload, markdown(payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
