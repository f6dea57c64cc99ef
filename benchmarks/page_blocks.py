"""Generated blocks of the README and documentation pages that are not record tables: tables of the committed
benchmark results (``benchmarks/results/*.json``), rendered by :func:`jaxclp.experiments.results_tables.render`
(given as its ``blocks``, by :mod:`benchmarks.pages`) between ``<!-- jaxclp:NAME -->`` markers like the record
tables.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

from benchmarks._common import md_table


def _gcn_stage(root) -> list[str]:
    """The cost-targets row's note on a GCN prior at arxiv's size (``large_graph_stages.json``), if measured."""
    path = Path(root) / "benchmarks" / "results" / "large_graph_stages.json"
    rows = {r["prior"]: r for r in (_load(root, "large_graph_stages")["rows"] if path.is_file() else [])}
    g = rows.get("gcn")
    return ([f"a GCN prior reaches {g['closed_hidden']:.3f} with CLP's closed form, but its fit alone takes "
             f"{g['prior_s']:.0f} s on 2 cores (`large_graph_stages.md`)"] if g else [])


def _limited_clp(root) -> str:
    """The cost-targets row's note on ``clp`` under a per-split time limit (``clp_time_limit.json``), if measured."""
    if not (Path(root) / "benchmarks" / "results" / "clp_time_limit.json").is_file():
        return ""
    from benchmarks.clp_time_limit import summary

    t = _load(root, "clp_time_limit")
    c = summary(t["rows"], t.get("times", {}))
    return (f"; with `--time-limit {t['limit']:g}` (which leaves them out where they do not fit): {c['fast']} of "
            f"{c['graphs']} graphs, within its committed std on {c['within_old']} and within one std of the best "
            f"method on {c['within_best']} (`clp_time_limit.md`)")


def _load(root: Path, name: str) -> dict:
    """``benchmarks/results/<name>.json`` under the repository ``root``."""
    return json.loads((Path(root) / "benchmarks" / "results" / f"{name}.json").read_text())


def _cost_block(root: Path, name: str) -> str:
    """Per graph of a ``benchmarks.cost`` run: programs compiled, compilation's share of the wall time, each
    split's seconds, and the shares of the tuned GNN priors, CLP's candidates and the selection; then how many
    graphs meet the 20 s per split target on their last split (compilation paid in the first: what the median of
    ten splits measures), where the run has two splits."""
    d = _load(root, name)
    lines = ["| graph | programs compiled | compile | seconds per split | tuned GNN priors | CLP candidates | selection |",
             "|---|---|---|---|---|---|---|"]
    met = 0
    for r in d["rows"]:
        share = lambda *stages: 100 * sum(r["stages"][k]["wall"] for k in stages if k in r["stages"]) / r["wall"]
        secs = r["record_seconds"]
        met += secs[-1] <= 20.0
        lines.append(f"| {r['dataset']} | {r['compilations']} | {r['compile']:.0f} s ({100 * r['compile'] / r['wall']:.0f} %) "
                     f"| {', '.join(f'{x:.0f}' for x in secs)} | {share('prior gcn_tuned', 'prior sage_tuned'):.0f} % | "
                     f"{share('clp grid'):.0f} % | {share('selection'):.1f} % |")
    if min(len(r["record_seconds"]) for r in d["rows"]) >= 2:
        lines += ["", f"{met} of {len(d['rows'])} graphs take at most 20 s for their last split."]
    return "\n".join(lines)


_KERNEL_COLUMNS = (("jaxclp FactoredOperator.matvec", "jaxclp step (fused kernel)"),
                   ("jaxclp XLA path", "XLA path (before)"), ("scipy CSR @ dense", "scipy (1 thread)"),
                   ("torch.sparse.mm CSR", "torch.sparse.mm CSR (2 threads)"),
                   ("C CSR loop, factored (2 threads)", "C loop (2 threads)"))


def _kernel_block(root: Path) -> str:
    """One CLP step per K from ``throughput_kernel.json``: min / median ms of the library step and its rivals, then
    the ratios the kernel's targets name (K = 5 against torch and the C loop, K = 40 against the XLA path)."""
    d = _load(root, "throughput_kernel")
    pick = lambda res, prefix: next(r for r in res["rows"] if r["name"].startswith(prefix))
    lines = ["| K | " + " | ".join(h for _, h in _KERNEL_COLUMNS) + " |", "|---" * (len(_KERNEL_COLUMNS) + 1) + "|"]
    for res in d["results"]:
        cells = [f"{pick(res, p)['min_ms']:.3g} / {pick(res, p)['median_ms']:.3g}" for p, _ in _KERNEL_COLUMNS]
        lines.append(f"| {res['K']} | " + " | ".join(cells) + " |")
    by_k = {res["K"]: res for res in d["results"]}
    ratio = lambda k, a, b, stat: pick(by_k[k], a)[stat] / pick(by_k[k], b)[stat]
    step, xla, torch, c2 = (p for p, _ in (_KERNEL_COLUMNS[0], _KERNEL_COLUMNS[1], _KERNEL_COLUMNS[3],
                                           _KERNEL_COLUMNS[4]))
    lines += ["", f"At K = 5 the step takes {ratio(5, step, torch, 'min_ms'):.2f}× torch's time on minima and "
              f"{ratio(5, step, torch, 'median_ms'):.2f}× on medians, {ratio(5, step, c2, 'min_ms'):.2f}× / "
              f"{ratio(5, step, c2, 'median_ms'):.2f}× the 2-thread C loop's; at K = 40 the XLA path takes "
              f"{ratio(40, xla, step, 'min_ms'):.1f}× / {ratio(40, xla, step, 'median_ms'):.1f}× the step's time."]
    return "\n".join(lines)


def _end_to_end_block(root: Path) -> str:
    """``end_to_end.json``: jaxclp's ``CLP`` pipeline against the PyTorch implementation, per graph (medians)."""
    rows = []
    for r in _load(root, "end_to_end")["rows"]:
        j, t = r["jax"], r["torch"]
        ps = lambda side: f"{1e3 * side['propagation_selection']['median']:.1f}"
        rows.append([r["dataset"], f"{j['total']['median']:.2f}", f"{t['total']['median']:.2f}",
                     f"{t['total']['median'] / j['total']['median']:.2f}",
                     f"{j['mlp']['median']:.2f} / {t['mlp']['median']:.2f}", f"{ps(j)} / {ps(t)}",
                     f"{j['total']['compile']:.1f}", f"{100 * r['same_prior_prediction_agreement']:.0f} %"])
    return md_table(["graph", "jaxclp s", "torch s", "speed-up", "MLP s (jaxclp / torch)",
                     "propagation + selection ms (jaxclp / torch)", "jaxclp compile s",
                     "same-prior predictions equal"], rows)


def _grid_memory_block(root: Path) -> str:
    """``grid_memory.json``: peak memory, seconds and the chosen candidate of ``clp_mlp``'s grid per size and mode."""
    rows, first = [], {}
    for r in _load(root, "grid_memory")["grid"]:
        size = f"{r['nodes'] // 1000}k × {r['classes']}"
        if "skipped" in r:
            rows.append([size, r["mode"], "–", "–", "–", f"not run: {r['skipped']}"])
            continue
        first.setdefault(size, r["choice"])
        rows.append([size, r["mode"], f"{r['peak_gib']:.2f}", f"{r['seconds']:.0f}", r["stored"],
                     "yes" if r["choice"] == first[size] else "**no**"])
    return md_table(["nodes × classes", "mode", "peak GiB", "seconds", "candidates kept",
                     "same choice as the first row of its size"], rows)


def _alpha_chunks_block(root: Path) -> str:
    """``alpha_chunks.json``: a closed-form solve's 11 α at once vs in chunks, per size and method."""
    rows = [[f"{r['nodes'] // 1000}k × {r['classes']}", r["method"], r["chunk"],
             f"{min(r['seconds']):.2f} / {float(np.median(r['seconds'])):.2f}", f"{r['peak_gib']:.2f}",
             r["iterations_max"], r["converged"], f"{r['max_abs_diff']:.1e}"] for r in _load(root, "alpha_chunks")["grid"]]
    return md_table(["nodes × classes", "method", "α per chunk", "seconds (min / median)", "peak GiB",
                     "iterations (max)", "converged", "max difference from all at once"], rows)


_THROUGHPUT_COLUMNS = (("jaxclp factored", "jaxclp (fused kernel)"), ("scipy per-class CSR", "scipy per-class CSR"),
                       ("scipy CSR @ dense", "scipy CSR @ dense"), ("torch.sparse.mm CSR", "torch.sparse.mm CSR (2 threads)"),
                       ("torch index_add_ (PyG-style gather", "torch index_add_ (PyG)"),
                       ("C CSR loop, factored (2 threads)", "C loop 2 threads, factored"),
                       ("C CSR loop, edgewise (2 threads)", "C loop 2 threads, edgewise"))


def _throughput_block(root: Path) -> str:
    """``throughput.json``: one CLP step per K, median / min ms per implementation, and the bandwidth bound."""
    d = _load(root, "throughput")
    lines = ["| K | " + " | ".join(h for _, h in _THROUGHPUT_COLUMNS) + " | bandwidth bound |",
             "|---" * (len(_THROUGHPUT_COLUMNS) + 2) + "|"]
    for res in sorted(d["results"], key=lambda r: r["K"]):
        pick = lambda prefix: next(r for r in res["rows"] if r["name"].startswith(prefix))
        cells = [f"{1e3 * pick(p)['time_s']:.3g} / {1e3 * pick(p)['time_min_s']:.3g}" for p, _ in _THROUGHPUT_COLUMNS]
        bound = res.get("analysis", {}).get("bandwidth_bound_ms")
        lines.append(f"| {res['K']} | " + " | ".join(cells) + f" | {'–' if bound is None else f'{bound:.2f}'} |")
    return "\n".join(lines)


def _main_job_block(root: Path) -> str:
    """``main_job.json``: the README's main job timed graph by graph (:func:`benchmarks.main_job.tables`)."""
    from benchmarks.main_job import tables

    return tables(_load(root, "main_job"))


def _halo_block(root: Path, shards: int = 8) -> str:
    """``halo.json``: what one product communicates per graph and partitioner on ``shards`` shards."""
    rows = [[r["graph"], r["partition"], f"{100 * r['received_fraction']:.1f} %", f"{100 * r['edge_cut']:.1f} %",
             f"{r['ppermute_bytes'] / 2**20:.2f}", f"{r['allgather_bytes'] / 2**20:.1f}", r["rounds"],
             f"{r['plan_s']:.1f}"] for r in _load(root, "halo")["plans"] if r["num_shards"] == shards]
    return md_table(["graph", "partition", "remote rows received", "edge cut", "MiB per step (ppermute)",
                     "all-gather MiB", "ppermute rounds", "plan s"], rows)


_SHARDED_RUNS = (("sharded", "gather product"), ("sharded_csr", "per-shard CSR product"),
                 ("sharded_lean_plan", "CSR product, lean plan"))


def _sharded_block(root: Path) -> str:
    """The products-shaped runs of ``sharded.json``, ``sharded_csr.json`` and ``sharded_lean_plan.json`` (K = 47 rows):
    peak memory, bytes per edge, one product's seconds and the halo per step."""
    rows = []
    for name, label in _SHARDED_RUNS:
        for r in _load(root, name)["derived"]:
            if r.get("k", 47) != 47 or "peak_mib" not in r:
                continue
            product = r["times"]["product"] if "times" in r else r["step_s"]
            rows.append([label, f"{r['n']:,}", f"{r['m'] / 1e6:.1f}M", r["devices"], r["partition"],
                         f"{r['peak_mib'] / 1024:.1f}", f"{r['peak_b_per_edge']:.0f}",
                         f"{r['sharded_graph_b_per_edge']:.0f}", f"{product:.2f}", f"{r['halo_mib_per_step']:.0f}"])
    return md_table(["run", "n", "directed edges", "devices", "partition", "peak GiB", "peak B per edge",
                     "sharded graph B per edge", "one product s", "halo MiB per step"], rows)


def _papers100m_block(root: Path) -> str:
    from benchmarks.papers100m_plan import markdown

    return markdown(_load(root, "papers100m_plan")["rows"])


BLOCKS = {"throughput_kernel": _kernel_block, "end_to_end": _end_to_end_block, "halo": _halo_block,
          "sharded_runs": _sharded_block, "papers100m_plan": _papers100m_block, "main_job": _main_job_block,
          "throughput": _throughput_block, "grid_memory": _grid_memory_block, "alpha_chunks": _alpha_chunks_block,
          "cost_cpu": functools.partial(_cost_block, name="cost_cpu")}
"""Block name (``<!-- jaxclp:NAME -->``) -> ``f(root) -> markdown``."""


def _programs(row: dict, names) -> tuple[int, float]:
    """``(compilations, XLA seconds)`` of a compile-census row's programs named in ``names`` (``jit(NAME)``)."""
    picked = [(n, s) for p, n, s in row["programs"] if p.removeprefix("jit(").removesuffix(")") in names]
    return sum(n for n, _ in picked), sum(s for _, s in picked)


_MODEL_LOOPS = ("_step_chunk", "_mlp_depths_chunk", "_link_kernel")
"""The compile census's programs of the trained priors other than the tuned grids (LINKX, GCN and H2GCN share
``_step_chunk``; the MLP depths; LINK)."""


def compile_target_rows(root: Path) -> list[list[str]]:
    """Issue 69's targets for a new graph on 2 CPU cores (compiling, a second graph, ``jaxclp run`` with defaults,
    ``clp`` over 3 splits, ``predict`` leaving nothing out), against ``compile_census_cpu.json`` (fresh caches, one
    process per row), ``fit_threads.json`` (a split's tuned grids) and ``time_limit.json`` (``predict``), each
    with why it is missed; no row for a file not committed."""
    res = Path(root) / "benchmarks" / "results"
    rows: list[list[str]] = []
    if not (res / "compile_census_cpu.json").is_file():
        return rows
    census = _load(root, "compile_census_cpu")
    case = {(r["case"], r["nodes"]): r for r in census["rows"]}
    first = case.get(("first graph", 900))
    grids = {r["nodes"]: r["side_s"] for r in _load(root, "fit_threads")["rows"]} if (
        res / "fit_threads.json").is_file() else {}
    status = lambda ok: "met" if ok else "**missed**"
    if first:
        c = first["compile_s"]
        rows.append([f"`clp` on a first graph ({first['nodes']} nodes, `--methods clp --runs 3 --time-limit none`), "
                     "seconds compiling", "≤ 8 s",
                     f"{c:.1f} s ({first['xla_compilations']} programs; trace + lowering "
                     f"{first['trace_s'] + first['lower_s']:.1f} s, XLA {first['backend_s']:.1f} s)", status(c <= 8),
                     f"the programs the search needs: the two tuned GNN grids {_programs(first, ('_grid_chunk_jit',))[1]:.1f}"
                     f" s of XLA, the other trained priors' loops {_programs(first, _MODEL_LOOPS)[1]:.1f} s; XLA's own "
                     "flags do not move it (`xla_flags.md`); under 8 s needs fewer model families in the default "
                     "search, a recipe change (`racing.md`, `halving.md` tried the cheaper ones; leaving either tuned "
                     "grid out fails the same validation criterion: `cheap_priors.md`)"])
        for key, label in ((("similar graph", 960), "same buckets"), (("second graph", 2200), "another bucket")):
            r = case.get(key)
            if not r:
                continue
            share = r["compile_s"] / c
            why = ("" if share <= 0.25 else
                   f"every process traces and lowers what `jaxclp.program_store` does not hold "
                   f"({r['trace_s'] + r['lower_s']:.1f} s) and reads the {r['cache_hits']} cached executables back "
                   f"({r['backend_s']:.1f} s); {r['xla_compilations']} compiled again" if label == "same buckets" else
                   "buckets serve graphs within 25 % of a size: a graph of another bucket compiles every model "
                   "program again")
            rows.append([f"a second graph of {r['nodes']} nodes after the first ({label})",
                         "≤ 1/4 of the first's compile seconds",
                         f"{r['compile_s']:.1f} s, {100 * share:.0f} % ({r['cache_hits']} programs read from the "
                         "cache)", status(share <= 0.25), why])
    pair = {}  # nodes -> {cache: run} of this checkout's cold and warm runs, one after the other
    if (res / "run_user_graphs_warm.json").is_file():
        for r in _load(root, "run_user_graphs_warm")["runs"]:
            if r.get("checkout", "after") == "after":
                pair.setdefault(r["nodes"], {})[r["cache"]] = r
    for nodes, target in ((300, 30.0), (900, 60.0)):
        r = case.get(("defaults", nodes))
        if not r:
            continue
        grid = f"; the two tuned grids alone take {grids[nodes]:.1f} s per split (`fit_threads.md`)" if nodes in grids else ""
        runs = pair.get(nodes, {})
        again = (f"; with every program already compiled (a warm cache) {runs['warm']['wall_s']:.0f} s against "
                 f"{runs['cold']['wall_s']:.0f} s cold in a separate pair of runs (`run_user_graphs_warm.md`, another "
                 "hour of this shared machine): out of reach while `clp` trains both tuned grids on every split"
                 if {"warm", "cold"} <= set(runs) else "")
        rows.append([f"`jaxclp run --graph` with every default, {nodes} nodes", f"≤ {target:.0f} s",
                     f"{r['wall']:.0f} s", status(r["wall"] <= target),
                     f"{r['compile_s']:.0f} s compiling, then 10 splits of six methods, `clp`'s search with its seven "
                     f"base predictors in each{grid}{again}"])
    if first:
        grid = f"; the two tuned grids take {grids[900]:.1f} s per split (`fit_threads.md`)" if 900 in grids else ""
        rows.append([f"`jaxclp run --methods clp --runs 3 --time-limit none`, {first['nodes']} nodes", "≤ 30 s",
                     f"{first['wall']:.0f} s", status(first["wall"] <= 30),
                     f"{first['compile_s']:.0f} s compiling (summed over programs compiled side by side), then 3 "
                     f"splits{grid}"])
    if (res / "time_limit.json").is_file():
        t = _load(root, "time_limit")
        runs = [r for r in t["runs"] if r.get("nodes") and r["nodes"] <= 10_000 and r.get("checkout") == "after"]
        if runs:
            out = [r for r in runs if r["skipped"]]
            rows.append(["`jaxclp predict` (60 s), graphs up to ~10k nodes: nothing left out", "none left out",
                         "; ".join(f"{r['graph']} ({r['nodes']} nodes): {len(r['skipped'])} left out"
                                   for r in runs), status(not out),
                         "; ".join(f"{r['graph']}: {', '.join(r['skipped'])}" for r in out)
                         + (" (`time_limit.md`): compiling and the first fits fill the minute on 2 cores" if out else "")])
    return rows


def _cost_targets_block(root: Path) -> str:
    """The cost targets of the project (the main job, ``clp`` per split, ``predict`` on an arxiv-shaped graph, the
    test command) against what the committed results measured, with the gap where one is missed."""
    from benchmarks.main_job import TARGET_S, previous_totals

    job = _load(root, "main_job")
    cost = job.get("cost") or []
    minutes = sum(t["seconds"] for t in job["times"].values()) / 60
    met20 = [c for c in cost if c["clp_median_s"] <= 20.0]
    slowest = max(cost, key=lambda c: c["clp_median_s"]) if cost else None
    big = _load(root, "large_graph")
    mine, pyg = big["jaxclp"], big["pyg_mlp_cs"]
    behind = mine["accuracy"] < pyg["accuracy"]
    before = previous_totals(job)
    drift = (f"; the previous run took {before['seconds'] / 60:.0f} min for these graphs, median ratio "
             f"{before['median_ratio']:.2f} (this shared machine's speed drifts between days)" if before else "")
    target = TARGET_S / 60
    rows = [["`jaxclp reproduce table2`, fresh cache", f"≤ {target:.0f} min (the first goal: 30)",
             f"{minutes:.0f} min for {len(job['times'])} of 14 graphs", "**missed**" if minutes > target else "met",
             (f"{minutes / target:.1f}x the target: the tuned GNN priors `clp` fits on every split (successive "
              f"halving trims them only on graphs with 500 validation nodes or more){drift}" if minutes > target
              else "")],
            ["`clp` per split (median, compilation once)", "≤ 20 s",
             f"{len(met20)} of {len(cost)} graphs"
             + (f"; slowest {slowest['graph']} {slowest['clp_median_s']:.0f} s" if slowest else ""),
             "met" if cost and len(met20) == len(cost) else "**missed**",
             "training the tuned GNN priors" + _limited_clp(root)],
            ["`jaxclp predict --method clp`, arxiv-shaped graph", "≤ 2 min, ≤ 4 GiB, ≥ PyG MLP + C&S accuracy, faster",
             f"{mine['wall']:.0f} s, {mine['peak_gib']:.2f} GiB, accuracy {mine['accuracy']:.3f} (PyG {pyg['wall']:.0f} s, "
             f"{pyg['accuracy']:.3f})",
             "met" if mine["wall"] <= 120 and mine["peak_gib"] <= 4 and not behind and mine["wall"] < pyg["wall"]
             else "**missed**",
             "; ".join(([f"{mine['wall'] - 120:.0f} s over 2 min (`large_graph.md` names what ran and what was left "
                         "out)"] if mine["wall"] > 120 else [])
                       + ([f"{mine['wall'] - pyg['wall']:.0f} s slower than PyG"] if mine["wall"] >= pyg["wall"] else [])
                       + ([f"{mine['peak_gib'] - 4:.2f} GiB over 4 GiB"] if mine["peak_gib"] > 4 else [])
                       + ([f"accuracy {100 * (pyg['accuracy'] - mine['accuracy']):.1f} points below PyG: what fits in "
                           f"the {mine.get('time_limit') or 60:g} s limit (`large_graph.md` names what it left out) is "
                           "not the MLP trained to its end with CLP's closed form on it, nor a GNN prior"]
                          + _gcn_stage(root) if behind else []))]]
    if (Path(root) / "benchmarks" / "results" / "cost_gpu.json").is_file():
        from benchmarks.cost import compile_ratios, main_conditions, ten_split_estimate

        g = _load(root, "cost_gpu")
        e, ratios = ten_split_estimate(g, main_conditions(g)), compile_ratios(g)
        rows.append([f"`clp` over the medium table on one GPU ({g.get('device') or g['machine'].get('backend')}), fresh cache",
                     "≤ 15 min",
                     f"~{e['seconds'] / 60:.0f} min for {e['graphs']} of 14 graphs, estimated from 2 splits per graph "
                     f"({e['compile'] / 60:.0f} min compiling); 2 CPU cores: ~{e['compare_seconds'] / 60:.0f} min",
                     "met" if e["seconds"] <= 900 and e["graphs"] == 14 else "**missed**",
                     "compilation: XLA:GPU compiles `clp`'s programs "
                     f"{min(ratios):.1f}-{max(ratios):.1f}x slower than XLA:CPU "
                     "(`cost_gpu.md`); the later splits are faster only where training dominates"])
    suite = Path(root) / "benchmarks" / "results" / "test_suite.json"
    if suite.is_file():
        t = _load(root, "test_suite")
        rows.append(["the test command on a clean clone (`.ci/run`)", "≤ 12 min", f"{t['seconds'] / 60:.1f} min",
                     "met" if t["seconds"] <= 720 and t["returncode"] == 0 else "**missed**",
                     f"exit status {t['returncode']}" if t["returncode"] else
                     f"{t['seconds'] - 720:.0f} s over"
                     if t["seconds"] > 720 else ""])
    rows += compile_target_rows(root)
    return md_table(["what", "target", "measured", "", "why, where missed"], rows)


BLOCKS["cost_targets"] = _cost_targets_block


def _cost_gpu_block(root: Path) -> str:
    """``cost_gpu.json`` (``python -m benchmarks.cost --merge ...``): per graph, compilation and the steady
    state on the GPU beside the compared CPU run, with the ranges of their ratios."""
    from benchmarks.cost import compare_markdown, main_conditions, ten_split_estimate

    d = _load(root, "cost_gpu")
    conditions = main_conditions(d)
    e = ten_split_estimate(d, conditions)
    return compare_markdown(d) + (
        f"\n\nTen splits per graph, estimated as the first split plus 9 times the later one ({conditions}, "
        f"{e['graphs']} graphs): `clp` alone {e['seconds'] / 60:.0f} min on the GPU, {e['compile'] / 60:.0f} min of it "
        f"compiling; {e['compare_seconds'] / 60:.0f} min on the CPU ({e['compare_compile'] / 60:.0f} min compiling).")


BLOCKS["cost_gpu"] = _cost_gpu_block
