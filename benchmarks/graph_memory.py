"""Memory and time of graph construction and one solve on one device: peak RSS per edge of the user's path

Three measurements, each in its OWN fresh subprocess (so that every peak is that of one job):

* ``pipeline`` -- the user's path ``Graph.from_edge_index`` (int32 (2, m/2) input of undirected pairs,
  ``symmetrize=True``) + ``estimate_compatibility`` + ``solve`` (alpha 0.9, "sym", method "auto", tol 1e-6):
  peak resident memory per directed edge of the graph, the process baseline (python + jax + jaxclp imported,
  backend started, before any data) INCLUDED in it and also reported on its own, and the user's input arrays
  (edge index, prior, labels, train mask) included. Peak = ``VmHWM`` of ``/proc/self/status`` and
  ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (both reported; the target uses the larger). After the peak
  is taken the same process counts the products of one more ``solve`` (every executed CSR product of
  :mod:`jaxclp.sparse`, counted with ``jax.debug.callback`` after ``jax.clear_caches()``) and times one
  product, one transposed product, ``norm_bounds`` and the solve.
* ``build`` / ``build_old`` -- ``Graph.from_edge_index`` alone on the same input: the library's constructor and
  a verbatim copy of the previous constructor (``_old_from_edge_index`` below: int64/float64,
  ``np.lexsort``, ``np.maximum.at``, two more lexsorts for the symmetry test); time and peak RSS.

Targets: peak <= 60 B per directed edge at n = 1e6, m = 2e7, K = 8; ``from_edge_index`` >= 5x
faster at m = 2e7; a solve costs its iterations plus at most two products.

Usage: ``python -m benchmarks.graph_memory [--quick] [--out DIR]`` (quick: n = 2e4, m = 4e5, seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import _common as C

FULL = {"n": 1_000_000, "avg_degree": 20}
QUICK = {"n": 20_000, "avg_degree": 20}
K = 8
ALPHA = 0.9
TARGET_B_PER_EDGE = 60.0
TARGET_SPEEDUP = 5.0
TARGET_EXTRA_PRODUCTS = 2


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _peak_mib() -> dict:
    """Peak resident memory of this process so far: ``VmHWM`` and ``ru_maxrss`` (KiB on Linux), in MiB."""
    hwm = _status_kib("VmHWM")
    return {"vmhwm_mib": None if hwm is None else hwm / 1024.0,
            "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}


def _peak(d: dict) -> float:
    return max(v for v in d.values() if v is not None)


# ------------------------------------------------------------------------------------ the old constructor
def _old_from_edge_index(edge_index, num_nodes, *, weights=None, symmetrize=True, deduplicate=True,
                         self_loops="drop"):
    """The previous ``Graph.from_edge_index`` (int64/float64, lexsorts; validation trimmed to what this input needs)."""
    import jax.numpy as jnp

    from jaxclp.graph import Graph
    from jaxclp.sparse import host_row_pointers

    ei = np.asarray(edge_index).astype(np.int64)
    if ei.size and (ei.min() < 0 or ei.max() >= num_nodes):
        raise ValueError("out of range")
    m = ei.shape[1]
    w = np.ones(m, dtype=np.float64) if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    s, r = ei[0], ei[1]
    if self_loops in ("drop", "add"):
        keep = s != r
        s, r, w = s[keep], r[keep], w[keep]
    if symmetrize:
        s, r, w = np.concatenate([s, r]), np.concatenate([r, s]), np.concatenate([w, w])
    if self_loops == "add":
        loop = np.arange(num_nodes)
        s, r, w = np.concatenate([s, loop]), np.concatenate([r, loop]), np.concatenate([w, np.ones(num_nodes)])
    order = np.lexsort((s, r))
    s, r, w = s[order], r[order], w[order]
    if deduplicate and s.size:
        key = r * num_nodes + s
        first = np.ones(key.shape[0], dtype=bool)
        first[1:] = key[1:] != key[:-1]
        seg = np.cumsum(first) - 1
        wmax = np.full(int(first.sum()), -np.inf)
        np.maximum.at(wmax, seg, w)
        s, r, w = s[first], r[first], wmax
    fwd = np.lexsort((w, s, r))
    bwd = np.lexsort((w, r, s))
    sym = bool(np.array_equal(s[fwd], r[bwd]) and np.array_equal(r[fwd], s[bwd]) and np.allclose(w[fwd], w[bwd]))
    return Graph(senders=jnp.asarray(s, dtype=jnp.int32), receivers=jnp.asarray(r, dtype=jnp.int32),
                 weights=jnp.asarray(w, dtype=jnp.result_type(float)), num_nodes=num_nodes, symmetric=sym,
                 indptr=host_row_pointers(r, num_nodes))


# ------------------------------------------------------------------------------------------- generation
def generate(path: Path, n: int, avg_degree: float, seed: int = 0) -> dict:
    """Writes the user's input: edge_index (2, n * avg_degree / 2) int32 of undirected pairs (each once; the
    generator's repeats and loops included), prior (n, K) float32, labels (n,) int32, train mask (n,) bool."""
    t0 = time.perf_counter()
    src, dst, labels = C.synthetic_edges(n, avg_degree, K, seed=seed)
    path.mkdir(parents=True, exist_ok=True)
    np.save(path / "edge_index.npy", np.stack([src, dst]).astype(np.int32))
    del src, dst
    np.save(path / "labels.npy", labels.astype(np.int32))
    np.save(path / "prior.npy", C.synthetic_prior(labels, K, seed=seed))
    rng = np.random.default_rng(seed + 2)
    train = rng.random(n) < 0.1
    train[0] = True
    np.save(path / "train.npy", train)
    meta = {"n": n, "pairs": int(n * avg_degree // 2), "gen_s": time.perf_counter() - t0}
    (path / "meta.json").write_text(json.dumps(meta))
    return meta


# ------------------------------------------------------------------------------------------- workers
def _baseline():
    """Imports jax + jaxclp and starts the backend; returns the resident memory at that point (MiB)."""
    import jax
    import jax.numpy as jnp

    import jaxclp  # noqa: F401

    jax.block_until_ready(jnp.ones(8) + 1)
    cur = _status_kib("VmRSS")
    return {"baseline_rss_mib": None if cur is None else cur / 1024.0, **{f"baseline_{k}": v
                                                                        for k, v in _peak_mib().items()}}


def worker_build(path: Path, old: bool) -> dict:
    out = _baseline()
    from jaxclp.graph import Graph

    meta = json.loads((path / "meta.json").read_text())
    n = meta["n"]
    ei = np.load(path / "edge_index.npy")
    build = _old_from_edge_index if old else Graph.from_edge_index
    t0 = time.perf_counter()
    g = build(ei, n)
    import jax

    jax.block_until_ready(g.senders)
    out["build_s"] = time.perf_counter() - t0
    out["m"] = g.num_edges
    out["symmetric"] = bool(g.symmetric)
    out["peak"] = _peak_mib()
    out["loadavg"] = list(os.getloadavg())
    return out


def worker_pipeline(path: Path, repeats: int) -> dict:
    out = _baseline()
    import jax
    import jax.numpy as jnp

    import jaxclp
    from jaxclp.graph import Graph
    from jaxclp.operator import clp_operator, norm_bounds

    meta = json.loads((path / "meta.json").read_text())
    n = meta["n"]
    ei = np.load(path / "edge_index.npy")
    prior = jnp.asarray(np.load(path / "prior.npy"))
    labels = jnp.asarray(np.load(path / "labels.npy"))
    train = jnp.asarray(np.load(path / "train.npy"))
    out["after_input"] = _peak_mib()
    t0 = time.perf_counter()
    g = Graph.from_edge_index(ei, n)  # int32 input, symmetrize=True, deduplicate, drop loops
    jax.block_until_ready(g.senders)
    out["build_s"] = time.perf_counter() - t0
    out["after_build"] = _peak_mib()
    t0 = time.perf_counter()
    b0 = jaxclp.initial_beliefs(prior, labels, train)
    H, _ = jaxclp.estimate_compatibility(g, prior, labels, train)
    jax.block_until_ready((b0, H))
    out["compat_s"] = time.perf_counter() - t0
    out["after_compat"] = _peak_mib()
    t0 = time.perf_counter()
    sol = jaxclp.solve(g, b0, H, prior, alpha=ALPHA, normalization="sym", method="auto", tol=1e-6)
    jax.block_until_ready(sol.value)
    out["solve_first_s"] = time.perf_counter() - t0
    out["peak"] = _peak_mib()  # the target: everything above, baseline and input included
    out.update(m=g.num_edges, n=n, K=K, method=sol.method, iterations=int(np.asarray(sol.iterations).max()),
               converged=bool(np.asarray(sol.converged).all()),
               rel_residual=float(np.asarray(sol.relative_residual).max()),
               transpose_stored=g.transpose_perm is not None)

    # ---- timings (after the peak was recorded)
    op = clp_operator(g, b0, H, normalization="sym")
    mv = jax.jit(lambda o, x: o.matvec(x))
    rmv = jax.jit(lambda o, x: o.rmatvec(x))
    bare = Graph(senders=g.senders, receivers=g.receivers, weights=g.weights, num_nodes=n, symmetric=g.symmetric,
                 indptr=g.indptr)  # no transposed CSR: the gather + segment_sum fallback (before)
    kw = dict(repeats=repeats, warmup=1 if repeats > 1 else 0, min_repeats=min(3, repeats), budget_s=20.0)
    t_mv, _ = C.time_call(lambda: mv(op, b0), **kw)
    t_rmv, _ = C.time_call(lambda: rmv(op, b0), **kw)
    t_rmv_old, _ = C.time_call(lambda: rmv(op._replace(graph=bare), b0), **kw)
    t_nb, _ = C.time_call(lambda: norm_bounds(op), **kw)
    t_nb_old, _ = C.time_call(lambda: norm_bounds(op._replace(graph=bare)), **kw)
    t_solve, _ = C.time_call(
        lambda: jaxclp.solve(g, b0, H, prior, alpha=ALPHA, normalization="sym", method="auto", tol=1e-6),
        sync=lambda s_: (jax.block_until_ready(s_.value), s_)[1], **kw)
    out["times"] = {"matvec_s": t_mv.median, "rmatvec_s": t_rmv.median, "rmatvec_before_s": t_rmv_old.median,
                    "norm_bounds_s": t_nb.median, "norm_bounds_before_s": t_nb_old.median,
                    "solve_s": t_solve.median, "foreign_cores": max(t.foreign_cores or 0 for t in
                                                                    (t_mv, t_rmv, t_rmv_old, t_nb, t_solve))}
    out["solve_in_products"] = t_solve.median / t_mv.median

    # ---- count the products of one solve: every executed CSR product of jaxclp.sparse (the fused step
    # kernel and the plain CSR kernel, FFI or XLA path), counted at run time after fresh traces
    from jaxclp import sparse as S

    counts = {"csr_mm": 0, "scaled_mm": 0}
    orig = {"csr_mm": S._csr_mm, "scaled_mm": S._scaled_mm}

    def counting(name):
        def kernel(*a):
            def bump():
                counts[name] += 1
            jax.debug.callback(bump)
            return orig[name](*a)
        return kernel

    S._csr_mm, S._scaled_mm = counting("csr_mm"), counting("scaled_mm")
    try:
        jax.clear_caches()
        sol2 = jaxclp.solve(g, b0, H, prior, alpha=ALPHA, normalization="sym", method="auto", tol=1e-6)
        jax.block_until_ready(sol2.value)
        jax.effects_barrier()
    finally:
        S._csr_mm, S._scaled_mm = orig["csr_mm"], orig["scaled_mm"]
    out["products"] = dict(counts)
    out["products_total"] = counts["csr_mm"] + counts["scaled_mm"]
    out["products_extra"] = out["products_total"] - int(np.asarray(sol2.iterations).max())
    out["method"] = sol2.method
    out["loadavg"] = list(os.getloadavg())
    return out


def run_worker(path: Path, mode: str, repeats: int, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.graph_memory", "--worker", str(path), "--mode", mode,
           "--repeats", str(repeats)]
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=C.module_env())
    except subprocess.TimeoutExpired:
        return {"mode": mode, "error": f"timeout after {timeout:.0f} s"}
    if r.returncode != 0:
        return {"mode": mode, "error": f"exit {r.returncode}: {r.stderr.strip()[-600:]}"}
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["mode"] = mode
    res["wall_s"] = time.time() - t0
    return res


# ------------------------------------------------------------------------------------------- outputs
def summarize(rows: list[dict]) -> dict:
    by = {r["mode"]: r for r in rows}
    s = {}
    p = by.get("pipeline", {})
    if "peak" in p:
        m = p["m"]
        s["m"] = m
        s["peak_mib"] = _peak(p["peak"])
        s["baseline_mib"] = p["baseline_rss_mib"]
        s["peak_b_per_edge"] = s["peak_mib"] * 2**20 / m
        s["baseline_b_per_edge"] = p["baseline_rss_mib"] * 2**20 / m
        s["peak_above_baseline_b_per_edge"] = (s["peak_mib"] - p["baseline_rss_mib"]) * 2**20 / m
        s["memory_target_met"] = s["peak_b_per_edge"] <= TARGET_B_PER_EDGE
        s["iterations"] = p["iterations"]
        s["products_total"] = p["products_total"]
        s["products_extra"] = p["products_extra"]
        s["method"] = p.get("method")
        s["products_target_met"] = p["products_extra"] <= TARGET_EXTRA_PRODUCTS
        s["solve_in_products"] = p["solve_in_products"]
    if "build_s" in by.get("build", {}) and "build_s" in by.get("build_old", {}):
        s["build_s"] = by["build"]["build_s"]
        s["build_old_s"] = by["build_old"]["build_s"]
        s["build_speedup"] = s["build_old_s"] / s["build_s"]
        s["build_peak_mib"] = _peak(by["build"]["peak"])
        s["build_old_peak_mib"] = _peak(by["build_old"]["peak"])
        mm = by["build"]["m"]
        s["build_peak_b_per_edge"] = s["build_peak_mib"] * 2**20 / mm
        s["build_old_peak_b_per_edge"] = s["build_old_peak_mib"] * 2**20 / mm
        s["speed_target_met"] = s["build_speedup"] >= TARGET_SPEEDUP
    return s


def write_markdown(path: Path, payload: dict) -> None:
    s = payload["summary"]
    rows = payload["rows"]
    by = {r["mode"]: r for r in rows}
    lines = ["# Graph construction and one solve on one device: peak memory per edge and time", "",
             C.machine_header_md(payload["machine"]), "",
             f"Command: `{payload['command']}`. Load average at start {payload['loadavg_start'][0]:.2f}, at end "
             f"{payload['loadavg_end'][0]:.2f} (2 cores shared with other jobs: times are indicative, memory is "
             f"not affected). Elapsed {payload['elapsed_s']:.0f} s.", "",
             (__doc__ or "").split("\n\n", 1)[1].split("\n\nUsage")[0].strip(), "",
             f"Graph: n = {payload['n']}, {payload['pairs']} random undirected pairs (int32 input) -> "
             f"m = {s.get('m')} directed edges after symmetrizing and deduplicating; K = {K}, float32.", ""]
    if payload["quick"]:
        lines += ["Quick mode: a tiny graph, so the per-edge memory is dominated by the process baseline and is not "
                  "comparable with the target (the full size is).", ""]
    errors = [r for r in rows if "error" in r]
    if errors:
        lines += ["Errors: " + "; ".join(f"{r['mode']}: {r['error'][:200]}" for r in errors), ""]
    lines += ["## Targets", ""]
    body = []
    if "peak_b_per_edge" in s:
        body.append(["peak RSS per directed edge, from_edge_index + estimate_compatibility + solve "
                     "(baseline and input included)", f"<= {TARGET_B_PER_EDGE:.0f} B",
                     f"{s['peak_b_per_edge']:.1f} B ({s['peak_mib']:.0f} MiB; baseline {s['baseline_mib']:.0f} MiB "
                     f"= {s['baseline_b_per_edge']:.1f} B/edge)", "met" if s["memory_target_met"] else "MISSED"])
    if "build_speedup" in s:
        body.append(["from_edge_index time, before / after", f">= {TARGET_SPEEDUP:.0f}x",
                     f"{s['build_old_s']:.2f} s / {s['build_s']:.2f} s = {s['build_speedup']:.1f}x",
                     "met" if s["speed_target_met"] else "MISSED"])
    if "products_extra" in s:
        body.append(["CSR products per solve (executed)", f"iterations + <= {TARGET_EXTRA_PRODUCTS}",
                     f"{s['products_total']} = {s['iterations']} iterations + {s['products_extra']} "
                     f"(solve time = {s['solve_in_products']:.1f} x one product)",
                     "met" if s["products_target_met"] else "MISSED"])
    lines += [C.md_table(["what", "target", "measured", ""], body), ""]
    p = by.get("pipeline", {})
    if "peak" in p:
        lines += ["## Pipeline: peak RSS after each stage (MiB, whole process)", ""]
        stages = [("baseline (python + jax + jaxclp)", {"v": p["baseline_rss_mib"]}),
                  ("+ input arrays loaded", p["after_input"]), ("+ from_edge_index", p["after_build"]),
                  ("+ estimate_compatibility", p["after_compat"]), ("+ solve", p["peak"])]
        body = [[name, round(_peak(d)), round(_peak(d) * 2**20 / p["m"], 1)] for name, d in stages]
        lines += [C.md_table(["stage", "peak MiB", "B / directed edge"], body), ""]
        lines += [f"Stage times: from_edge_index {p['build_s']:.2f} s, estimate_compatibility {p['compat_s']:.2f} s "
                  f"(with compilation), first solve {p['solve_first_s']:.2f} s (with compilation); solve: "
                  f"{p['method']}, {p['iterations']} iterations, relative residual {p['rel_residual']:.1e}.", ""]
        t = p["times"]
        lines += ["## Products", "",
                  C.md_table(["operation", "ms (median)", "in products"],
                             [["one product (matvec, fused CSR kernel)", t["matvec_s"] * 1e3, 1.0],
                              ["rmatvec, transposed CSR (now)", t["rmatvec_s"] * 1e3, t["rmatvec_s"] / t["matvec_s"]],
                              ["rmatvec, gather + segment_sum (before)", t["rmatvec_before_s"] * 1e3,
                               t["rmatvec_before_s"] / t["matvec_s"]],
                              ["norm_bounds (now)", t["norm_bounds_s"] * 1e3, t["norm_bounds_s"] / t["matvec_s"]],
                              ["norm_bounds (before)", t["norm_bounds_before_s"] * 1e3,
                               t["norm_bounds_before_s"] / t["matvec_s"]],
                              ["solve (whole call)", t["solve_s"] * 1e3, t["solve_s"] / t["matvec_s"]]]), "",
                  f"Executed CSR products in one solve: {p['products_total']} ({p['products']['scaled_mm']} fused "
                  f"steps + {p['products']['csr_mm']} plain) for {p['iterations']} iterations: `norm_bounds` one "
                  f"product and one transposed product (plus one (m,) gather of the edge values into the transposed "
                  f"order), the loop one product per iteration, and for {p.get('method')!r} "
                  f"{'no separate residual product (the last iteration measures it)' if p.get('method') in ('neumann', 'jacobi') else 'one residual product'}. CPU used by other processes "
                  f"during these timings: up to {t['foreign_cores']:.2f} cores.", ""]
    if "build_speedup" in s:
        lines += ["## from_edge_index alone", "",
                  C.md_table(["constructor", "seconds", "peak RSS MiB", "B / directed edge (process)"],
                             [["before (int64/float64, lexsort)", s["build_old_s"], round(s["build_old_peak_mib"]),
                               round(s["build_old_peak_b_per_edge"], 1)],
                              ["now (int32, two counting sorts)", s["build_s"], round(s["build_peak_mib"]),
                               round(s["build_peak_b_per_edge"], 1)]]), ""]
    path.write_text("\n".join(lines))


def main(argv=None, out=None) -> dict | None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.graph_memory", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=out)
    ap.add_argument("--skip-old", action="store_true", help="do not time the old constructor")
    ap.add_argument("--n", type=int, default=None, help="number of nodes (default 1e6, quick 2e4; degree 20)")
    ap.add_argument("--generate", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="pipeline", help=argparse.SUPPRESS)
    ap.add_argument("--repeats", type=int, default=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.generate:
        generate(Path(args.generate), args.n, FULL["avg_degree"])
        return None
    if args.worker:
        path = Path(args.worker)
        if args.mode == "pipeline":
            res = worker_pipeline(path, args.repeats)
        elif args.mode in ("build", "build_old"):
            res = worker_build(path, old=args.mode == "build_old")
        else:
            raise ValueError(args.mode)
        print(json.dumps(C._jsonable(res)))
        return None
    t0 = time.time()
    load0 = list(os.getloadavg())
    od = C.out_dir(args.out)
    cfg = QUICK if args.quick else FULL
    path = od / "_scratch" / ("graph_memory_quick" if args.quick else "graph_memory")
    n = args.n or cfg["n"]
    # generated in a subprocess: this parent stays small, so the workers' ru_maxrss (which Linux starts at
    # the parent's high-water mark at fork) is their own
    gen = subprocess.run([sys.executable, "-m", "benchmarks.graph_memory", "--generate", str(path),
                          "--n", str(n)], capture_output=True, text=True, env=C.module_env())
    if gen.returncode != 0:
        raise RuntimeError(f"graph_memory: generation failed: {gen.stderr[-600:]}")
    meta = json.loads((path / "meta.json").read_text())
    C.log(f"graph_memory: n={meta['n']}, {meta['pairs']} pairs generated in {meta['gen_s']:.1f}s")
    timeout = 300 if args.quick else 1800
    rows = []
    modes = ["pipeline", "build"] + ([] if args.skip_old else ["build_old"])
    for mode in modes:
        res = run_worker(path, mode, repeats=1 if args.quick else args.repeats, timeout=timeout)
        rows.append(res)
        C.log(f"graph_memory: {mode}: " + (res["error"] if "error" in res else
                                   f"build {res['build_s']:.2f}s, peak {_peak(res['peak']):.0f} MiB"))
    for f in path.iterdir():
        f.unlink()
    path.rmdir()
    cmd = "python -m benchmarks.graph_memory" + (" --quick" if args.quick else "") + (
        " --skip-old" if args.skip_old else "") + (f" --n {args.n}" if args.n else "")
    payload = {"benchmark": "graph_memory", "quick": args.quick, "machine": C.machine_info(), "command": cmd,
               "n": meta["n"], "pairs": meta["pairs"], "K": K, "alpha": ALPHA, "loadavg_start": load0,
               "rows": rows, "summary": summarize(rows), "plots": []}
    payload["loadavg_end"] = list(os.getloadavg())
    return C.write_results(od, "graph_memory", payload, write_markdown, t0)


if __name__ == "__main__":
    main()
