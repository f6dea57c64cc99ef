"""The README's and the documentation's generated tables and numbers, rendered with the benchmarks' ones.

The record tables and the facts of the records are :mod:`jaxclp.experiments.results_tables`' and
:mod:`jaxclp.experiments.page_values`'; the tables of the benchmarks' results (:data:`benchmarks.page_blocks.BLOCKS`)
and the facts computed from them (:data:`FACTS`, ``<!-- n:fact:NAME -->``) are this package's, since the library
never imports the benchmarks. This module passes them in::

    python -m benchmarks.pages            # rewrite the generated blocks and values of README.md and docs/**.md
    python -m benchmarks.pages --check    # exit 1 if a page differs from its rendering (tests/package/test_readme.py)
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from jaxclp.experiments import results_tables
from jaxclp.experiments.page_values import Sources

from benchmarks.page_blocks import BLOCKS


def _cheap_priors(src: Sources) -> dict:
    """``graph -> (cheap - clp mean difference, within clp's std)`` of ``benchmarks/results/cheap_priors.json``
    (as its table: percent, population std)."""
    out = {}
    for g, v in src.json("benchmarks/results/cheap_priors.json")["rows"].items():
        a, b = 100 * np.asarray(v["clp"]), 100 * np.asarray(v["cheap"])
        out[g] = (float((b - a).mean()), bool(abs((b - a).mean()) <= a.std()))
    return out


def _mlp_variants(src: Sources, variant: str, field: str = "compile_s") -> float:
    """Summed over the MLP depths of ``compile_time.json``'s MLP variants: ``field`` of ``variant``
    (``max_abs_prior_diff_vs_vmap``: the largest)."""
    rows = [r for r in src.json("benchmarks/results/compile_time.json")["variants"]["default"]["rows"]
            if r["variant"] == variant]
    values = [r[field] for r in rows]
    return max(values) if field.startswith("max") else sum(values)


def _solver_facts(src: Sources) -> dict:
    """Figures of ``solvers.json`` the benchmarks page quotes: the cells, the Krylov methods against plain iteration
    at alpha * rho >= 0.98 (as ``benchmarks.summary``), the ``auto`` rule's slowdown, its float32 misses."""
    from benchmarks.summary import krylov_speedups

    sv = src.json("benchmarks/results/solvers.json")
    rules = sv["rules"]
    rule = lambda prefix: next(v for k, v in rules.items() if k.startswith(prefix) and k.endswith("[median]"))
    speed = krylov_speedups(sv)
    misses = [c["methods"][c["auto"]]["rel_residual_max"] for c in sv["rows"]
              if c["methods"].get(c["auto"], {}).get("rel_residual_max", 0.0) > 1.5 * sv["tol"]]
    rho = [c["rho_max"] for c in sv["rows"] if c["op"] == "clp-sym"]
    return {"cells": len(sv["rows"]), "minutes": sv["elapsed_s"] / 60,
            "krylov_min": min(q for _, q in speed), "krylov_max": max(q for _, q in speed),
            "krylov_cells": len(speed), "krylov_big_min": min(q for n, q in speed if n >= 10_000),
            "krylov_big_max": max(q for n, q in speed if n >= 10_000),
            "auto_geomean": rule("library choose_method")["geomean_slowdown"],
            "auto_max": rule("library choose_method")["max_slowdown"],
            "neumann_geomean": rule("always neumann")["geomean_slowdown"],
            "auto_misses": len(misses), "auto_miss_max": max(misses), "auto_miss_factor": max(misses) / sv["tol"],
            "clp_sym_rho_min": min(rho), "clp_sym_rho_max": max(rho)}



_SOLVER_FACTS = ("cells", "minutes", "krylov_min", "krylov_max", "krylov_cells", "krylov_big_min", "krylov_big_max",
                 "auto_geomean", "auto_max", "neumann_geomean", "auto_misses", "auto_miss_max", "auto_miss_factor",
                 "clp_sym_rho_min", "clp_sym_rho_max")

def _main_job(src: Sources) -> dict:
    """Totals of ``main_job.json``: graphs timed, minutes, ``clp`` against the old records and the best method, its
    median seconds per split against the 20 s target, its share of the records' seconds; and what the target
    (:data:`benchmarks.main_job.TARGET_S`) asks of ``clp`` (:func:`benchmarks.main_job.own_work` of the committed
    records)."""
    from benchmarks.main_job import TARGET_S, own_work, previous_totals

    d = src.json("benchmarks/results/main_job.json")
    cost = d.get("cost") or []
    seconds = sum(t["seconds"] for t in d["times"].values())
    before = previous_totals(d) or {"seconds": 0.0, "median_ratio": 1.0}
    return {"graphs": len(d["times"]), "minutes": seconds / 60, "hours": seconds / 3600, "not_run": len(d["not_run"]),
            "previous_minutes": before["seconds"] / 60, "drift": before["median_ratio"],
            "compared": len(d["rows"]), "within_old": sum(r["within_old"] for r in d["rows"]),
            "within_best": sum(r["within_best"] for r in d["rows"]),
            "clp_20s": sum(c["clp_median_s"] <= 20.0 for c in cost), "clp_cost_graphs": len(cost),
            "clp_share": 100 * sum(c["clp_s"] for c in cost) / max(sum(c["records_s"] for c in cost), 1e-9),
            "over_target": seconds / TARGET_S, **own_work(src.records("results/rerun/table2_main"))}


_MAIN_JOB_FACTS = ("graphs", "minutes", "hours", "not_run", "previous_minutes", "drift", "compared", "within_old", "within_best", "clp_20s",
                   "clp_cost_graphs", "clp_share", "over_target", "rest_minutes", "clp_own_minutes", "clp_budget_s",
                   "clp_cut")


def _gpu_speedups(src: Sources) -> list[float]:
    """``CLP`` fit + select + predict: this machine's median seconds (``end_to_end.json``) / the GPU's
    (``device.json``), per graph both ran."""
    cpu = {r["dataset"]: r["jax"]["total"]["median"] for r in src.json("benchmarks/results/end_to_end.json")["rows"]}
    gpu = {r["dataset"]: r["time_s"] for r in src.json("benchmarks/results/device.json")["end_to_end"]}
    return [cpu[d] / gpu[d] for d in gpu if d in cpu]


def _gpu_clp_cost(src: Sources) -> dict:
    """``cost_gpu.json``: the estimate of ``clp`` over ten splits per graph on the GPU and on the compared CPU run
    (:func:`benchmarks.cost.ten_split_estimate`, for the conditions with the most graphs) in minutes, and
    the range of the compilation ratios (GPU over CPU) over every merged row."""
    from benchmarks.cost import compile_ratios, main_conditions, ten_split_estimate

    d = src.json("benchmarks/results/cost_gpu.json")
    e = ten_split_estimate(d, main_conditions(d))
    ratios = compile_ratios(d)
    return {"minutes": e["seconds"] / 60, "cpu_minutes": e["compare_seconds"] / 60, "graphs": e["graphs"],
            "compile_ratio_min": min(ratios), "compile_ratio_max": max(ratios)}


def _sparse_product_speedups(src: Sources) -> list[float]:
    """The CSR product of sparse features against a gather + ``segment_sum`` (``sparse_features.json``), per row."""
    return [r["speedup"] for r in src.json("benchmarks/results/sparse_features.json")["product"]]


def _halving(src: Sources, rule: str = "primary") -> dict:
    """Successive halving over the tuned grids (``benchmarks/results/halving.json``, ``rule``): the seconds saved
    (%), the largest fall of the chosen spec's validation score (points, mean over a graph's splits and both
    grids), the number of graphs past the criterion's limit, and of graphs measured."""
    from benchmarks.halving import MAX_VAL_DROP

    v = src.json("benchmarks/results/halving.json")["summary"]["verdict"][rule]
    drops = v["val_change"]
    return {"limit": MAX_VAL_DROP, "saving": 100 * v["saving"], "worst_drop": -min(drops.values()),
            "failing": sum(d < -MAX_VAL_DROP for d in drops.values()), "graphs": len(drops)}


def _halving_held_out(src: Sources) -> dict:
    """The gated rule on held-out graphs (``benchmarks/results/halving_held_out.json``): seconds saved (%), the
    graphs, the largest fall of the chosen spec's validation score (points; 0.0, never -0.0, where none fell)."""
    s = src.json("benchmarks/results/halving_held_out.json")["summary"]
    return {"saving": 100 * s["saving"], "graphs": len(s["val_change"]),
            "worst": 0.0 - min(s["val_change"].values())}


FACTS: dict[str, Callable[[Sources], object]] = {
    "cheap-priors-within": lambda s: sum(w for _, w in s.once(_cheap_priors).values()),
    "cheap-priors-graphs": lambda s: len(s.once(_cheap_priors)),
    "cheap-priors-wiki-loss": lambda s: -s.once(_cheap_priors)["wiki"][0],
    "cheap-priors-twitch-ru-loss": lambda s: -s.once(_cheap_priors)["twitch-ru"][0],
    **{f"halving-{k}": (lambda s, k=k: s.once(_halving)[k]) for k in ("saving", "worst_drop", "failing", "graphs")},
    "halving-fallback-saving": lambda s: s.once(_halving, "fallback")["saving"],
    "halving-limit": lambda s: s.once(_halving)["limit"],
    **{f"halving-held-out-{k}": (lambda s, k=k: s.once(_halving_held_out)[k]) for k in ("saving", "graphs", "worst")},
    "compile-mlp-vmap-s": lambda s: s.once(_mlp_variants, "vmap"),
    "compile-mlp-per-split-s": lambda s: s.once(_mlp_variants, "per split"),
    "compile-mlp-per-split-diff": lambda s: s.once(_mlp_variants, "per split", "max_abs_prior_diff_vs_vmap"),
    **{f"solvers-{k}": (lambda s, k=k: s.once(_solver_facts)[k]) for k in _SOLVER_FACTS},
    **{f"main-job-{k}": (lambda s, k=k: s.once(_main_job)[k]) for k in _MAIN_JOB_FACTS},
    "gpu-speedup-min": lambda s: min(s.once(_gpu_speedups)),
    "gpu-speedup-max": lambda s: max(s.once(_gpu_speedups)),
    **{f"gpu-clp-{k.replace('_', '-')}": (lambda s, k=k: s.once(_gpu_clp_cost)[k])
       for k in ("minutes", "cpu_minutes", "graphs", "compile_ratio_min", "compile_ratio_max")},
    "sparse-product-speedup-min": lambda s: min(s.once(_sparse_product_speedups)),
    "sparse-product-speedup-max": lambda s: max(s.once(_sparse_product_speedups)),
}
"""Named figures of the benchmarks' results: ``<!-- n:fact:NAME -->`` -> ``f(sources)`` (besides
:data:`jaxclp.experiments.page_values.FACTS`, the records' ones)."""


def sources(root: Path = Path(".")) -> Sources:
    """A :class:`jaxclp.experiments.page_values.Sources` of ``root`` that knows :data:`FACTS` too."""
    return Sources(root, facts=FACTS)


def render(text: str, root: Path = Path("."), src: Sources | None = None) -> str:
    """``text`` (a page) with every generated block and inline value recomputed, the benchmarks' included
    (:func:`jaxclp.experiments.results_tables.render` with :data:`benchmarks.page_blocks.BLOCKS`)."""
    return results_tables.render(text, root, src or sources(root), blocks=BLOCKS)


def update(paths=None, root: Path = Path(".")) -> list[Path]:
    """:func:`jaxclp.experiments.results_tables.update` with the benchmarks' blocks and facts."""
    return results_tables.update(paths, root, blocks=BLOCKS, facts=FACTS)


def main(argv=None) -> int:
    return results_tables.main(argv, blocks=BLOCKS, facts=FACTS, prog="python -m benchmarks.pages")


if __name__ == "__main__":
    raise SystemExit(main())
