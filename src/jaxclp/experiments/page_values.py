"""Numbers in the prose of the README and the documentation, generated from the committed records and benchmark
results (the tables have :mod:`jaxclp.experiments.results_tables`; this is its inline counterpart).

A number in a page is written between two HTML comments that name where it comes from::

    our LINK gets <!-- n:mean:table2:medium:usa-airports:link -->55.6<!-- /n --> against the paper's ...

Markdown renders the comments as nothing, so the page reads as before; :func:`render` recomputes every such value
and the test suite checks that each page equals its rendering, so a number in the prose cannot drift from what it
cites. The key is ``KIND:ARGS[:FORMAT]`` (``FORMAT`` a Python format spec; a signed one, ``+.1f``, writes a minus
as ``−``):

* ``mean:TARGET:SPLIT:DATASET:METHOD`` / ``std:...``: the test score in percent over the runs of
  ``results/TARGET`` (as the tables: the last record per run; default ``.1f``).
* ``paper:SPLIT:DATASET:METHOD`` / ``paperstd:...``: the paper's mean / std (:func:`jaxclp.experiments.paper.paper_number`;
  default ``.1f``).
* ``diff:TARGET:SPLIT:DATASET:METHOD``: our mean minus the paper's (default ``+.1f``).
* ``json:FILE:KEY``: a value of a committed JSON file (``FILE`` relative to the repository root, ``KEY`` dotted:
  dict keys, list positions, or ``rows[case=clp_texas]`` (``rows[nodes=50000,mode=lean]``) for the one element of a list with those
  values; default
  ``g``).
* ``fact:NAME``: a count or figure computed from records or results by :data:`FACTS`.
* ``figure:NAME``: a finding of the figures' data (:func:`jaxclp.experiments.figure_facts.facts`; default ``.1f``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

import numpy as np

VALUE = re.compile(r"<!-- n:(?P<key>.+?) -->(?P<body>[^<]*)<!-- /n -->")
"""An inline generated value: ``<!-- n:KEY -->VALUE<!-- /n -->``."""


class Sources:
    """The committed records and results under a repository ``root``, each read once."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._records: dict = {}
        self._json: dict = {}
        self._records: dict = {}
        self._scores: dict = {}
        self._once: dict = {}
        self._figures: dict | None = None

    def records(self, folder: str) -> list:
        """The records of ``root/folder/results.jsonl`` (:func:`jaxclp.experiments.runner.read_records`)."""
        if folder not in self._records:
            from jaxclp.experiments.runner import RESULTS_FILE, read_records

            self._records[folder] = read_records(self.root / folder / RESULTS_FILE)
        return self._records[folder]

    def once(self, fn, *args):
        """``fn(self, *args)``, computed on the first call only (facts that share a computation)."""
        key = (fn, args)
        if key not in self._once:
            self._once[key] = fn(self, *args)
        return self._once[key]

    def figures(self) -> dict:
        """:func:`jaxclp.experiments.figure_facts.facts` of ``root``."""
        if self._figures is None:
            from jaxclp.experiments.figure_facts import facts

            self._figures = facts(self.root)
        return self._figures

    def scores(self, target: str) -> tuple[dict, dict]:
        """``(aggregate, last)`` of ``results/TARGET`` (:func:`jaxclp.experiments.summary.aggregate`)."""
        if target not in self._scores:
            from jaxclp.experiments.summary import aggregate

            self._scores[target] = aggregate(self.records(f"results/{target}"))
        return self._scores[target]

    def cell(self, target: str, split: str, dataset: str, method: str) -> np.ndarray:
        agg, _ = self.scores(target)
        if (dataset, split, method) not in agg:
            raise ValueError(f"results/{target} has no {split} records of {method} on {dataset}")
        return agg[(dataset, split, method)]

    def json(self, file: str):
        if file not in self._json:
            self._json[file] = json.loads((self.root / file).read_text())
        return self._json[file]


def _paper(split: str, dataset: str, method: str, which: int = 0) -> float:
    from jaxclp.experiments.paper import paper_number

    p = paper_number(dataset, split, method)
    if p is None:
        raise ValueError(f"the paper has no number for {method} on {dataset} ({split})")
    return p[which]


_SELECT = re.compile(r"(?P<field>[^=\[\]]+)\[(?P<conditions>[^\]]+)\]$")


def _lookup(obj, key: str):
    """``obj`` at the dotted ``key``: a dict key, a list position, or ``field[name=value]``, the one element of the
    list ``field`` whose ``name`` is ``value`` (found by content, so a re-run that reorders rows still finds it)."""
    for part in re.findall(r"(?:[^.\[\]]|\[[^\]]*\])+", key):  # dots inside [...] do not split
        m = _SELECT.match(part)
        if m:
            conditions = [c.split("=", 1) for c in m["conditions"].split(",")]
            hits = [x for x in obj[m["field"]] if all(str(x.get(k)) == v for k, v in conditions)]
            if len(hits) != 1:
                raise KeyError(f"{len(hits)} elements of {m['field']} have {m['conditions']}")
            obj = hits[0]
        else:
            obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


def _paper_flags(src: Sources, target: str = "table2", split: str = "medium", leave_out: tuple = ()) -> tuple[int, int]:
    """(cells of ``target``'s ``split`` with a paper number, those whose difference exceeds the combined spread),
    over the datasets not in ``leave_out`` (as the tables' ``⚠``)."""
    from jaxclp.experiments.summary import _std
    from jaxclp.experiments.paper import paper_number

    agg, _ = src.scores(target)
    cells = flagged = 0
    for (d, s, m), v in agg.items():
        p = paper_number(d, s, m)
        if s != split or p is None or d in leave_out:
            continue
        cells += 1
        flagged += abs(float(v.mean()) - p[0]) > float(np.hypot(_std(v), p[1]))
    return cells, flagged


def _clp_paper_vs_paper(src: Sources) -> tuple[int, int, int]:
    """``clp_paper`` (the paper's update, selected on validation) against the paper's CLP in table2: (graphs with a
    paper number, graphs within the combined spread, graphs where ours is lower)."""
    from jaxclp.experiments.summary import _std
    from jaxclp.experiments.paper import paper_number

    agg, _ = src.scores("table2")
    n = within = lower = 0
    for (d, s, m), v in agg.items():
        p = paper_number(d, s, m)
        if s != "medium" or m != "clp_paper" or p is None:
            continue
        n += 1
        within += abs(float(v.mean()) - p[0]) <= float(np.hypot(_std(v), p[1]))
        lower += float(v.mean()) < p[0]
    return n, within, lower


def _clp_mlp_depths(src: Sources, depth: int) -> tuple[int, int]:
    """(table2 ``clp`` records whose MLP prior has ``depth`` layers, all table2 ``clp`` records), medium split."""
    _, last = src.scores("table2")
    depths = [r["params"].get("mlp_depth") for k, r in last.items() if k[2] == "clp" and k[1] == "medium"]
    return sum(d == depth for d in depths), len(depths)


def _clp_closed_choices(src: Sources) -> tuple[int, int]:
    """(table2 ``clp`` records that chose a closed-form variant of the "none" normalization, those that chose any
    closed-form variant: ``l1`` False, not spectrally scaled), medium split."""
    _, last = src.scores("table2")
    norms = [r["params"].get("normalization") for k, r in last.items() if k[2] == "clp" and k[1] == "medium"
             and r["params"].get("l1") is False and "/rho" not in str(r["params"].get("normalization"))]
    return sum(n == "none" for n in norms), len(norms)


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
    at alpha * rho >= 0.98 (as ``jaxclp.benchmarks.summary``), the ``auto`` rule's slowdown, its float32 misses."""
    from jaxclp.benchmarks.summary import krylov_speedups

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
    median seconds per split against the 20 s target, its share of the records' seconds; and what the 30-minute
    target asks of ``clp`` (:func:`jaxclp.benchmarks.main_job.own_work` of the committed records)."""
    from jaxclp.benchmarks.main_job import own_work, previous_totals

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
            "over_target": seconds / 1800, **own_work(src.records("results/rerun/table2_main"))}


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
    (:func:`jaxclp.benchmarks.cost.ten_split_estimate`, for the conditions with the most graphs) in minutes, and
    the range of the compilation ratios (GPU over CPU) over every merged row."""
    from jaxclp.benchmarks.cost import compile_ratios, main_conditions, ten_split_estimate

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
    from jaxclp.benchmarks.halving import MAX_VAL_DROP

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


_MISALIGNED = ("usa-airports", "brazil-airports", "europe-airports", "wiki", "deezer-europe")

FACTS: dict[str, Callable[[Sources], object]] = {
    "table2-paper-cells": lambda s: s.once(_paper_flags)[0],
    "table2-paper-flagged": lambda s: s.once(_paper_flags)[1],
    "table2-paper-cells-aligned": lambda s: s.once(_paper_flags, "table2", "medium", _MISALIGNED)[0],
    "table2-paper-flagged-aligned": lambda s: s.once(_paper_flags, "table2", "medium", _MISALIGNED)[1],
    "table2-clp_paper-graphs": lambda s: s.once(_clp_paper_vs_paper)[0],
    "table2-clp_paper-within": lambda s: s.once(_clp_paper_vs_paper)[1],
    "table2-clp_paper-lower": lambda s: s.once(_clp_paper_vs_paper)[2],
    "cheap-priors-within": lambda s: sum(w for _, w in s.once(_cheap_priors).values()),
    "cheap-priors-graphs": lambda s: len(s.once(_cheap_priors)),
    "cheap-priors-wiki-loss": lambda s: -s.once(_cheap_priors)["wiki"][0],
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
    "table2-clp-mlp-depth1": lambda s: s.once(_clp_mlp_depths, 1)[0],
    "table2-clp-records": lambda s: s.once(_clp_mlp_depths, 1)[1],
    "table2-clp-closed-none": lambda s: s.once(_clp_closed_choices)[0],
    "table2-clp-closed": lambda s: s.once(_clp_closed_choices)[1],
}
"""Named figures that are not one cell: ``fact:NAME`` -> ``f(sources)``."""


def value(key: str, src: Sources) -> str:
    """The text of the inline value ``key`` (see the module docstring).

    Raises:
        ValueError: an unknown kind or fact, or a key whose source holds no such value.
    """
    kind, _, rest = key.partition(":")
    args = rest.split(":")
    arity = {"mean": 4, "std": 4, "diff": 4, "paper": 3, "paperstd": 3, "json": 2, "fact": 1, "figure": 1}
    if kind not in arity:
        raise ValueError(f"inline value {key!r}: unknown kind {kind!r}; choose from {sorted(arity)}")
    if len(args) not in (arity[kind], arity[kind] + 1):
        raise ValueError(f"inline value {key!r}: {kind} takes {arity[kind]} arguments and an optional format")
    fmt = args[arity[kind]] if len(args) > arity[kind] else {"diff": "+.1f", "json": "g", "fact": ""}.get(kind, ".1f")
    args = args[:arity[kind]]
    if kind in ("mean", "std"):
        from jaxclp.experiments.summary import _std

        v = src.cell(*args)
        x = float(v.mean()) if kind == "mean" else _std(v)
    elif kind in ("paper", "paperstd"):
        x = _paper(*args, which=int(kind == "paperstd"))
    elif kind == "diff":
        x = float(src.cell(*args).mean()) - _paper(*args[1:])
    elif kind == "json":
        try:
            x = _lookup(src.json(args[0]), args[1])
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"inline value {key!r}: {args[0]} has no {args[1]!r} ({e})") from None
    elif kind == "figure":
        figures = src.figures()
        if args[0] not in figures:
            raise ValueError(f"inline value {key!r}: the figures have no {args[0]!r}; known: {sorted(figures)}")
        x = figures[args[0]]
    else:
        if args[0] not in FACTS:
            raise ValueError(f"inline value {key!r}: unknown fact; known: {sorted(FACTS)}")
        x = FACTS[args[0]](src)
    text = format(x, fmt)
    if fmt.startswith("+"):
        if float(format(abs(float(x)), fmt[1:])) == 0.0:  # "+0.0" / "-0.0": a difference that rounds to zero
            return format(0.0, fmt[1:])
        return text.replace("-", "−")
    return text


def render(text: str, src: Sources) -> str:
    """``text`` with every inline value recomputed from ``src``."""
    return VALUE.sub(lambda m: f"<!-- n:{m['key']} -->{value(m['key'], src)}<!-- /n -->", text)
