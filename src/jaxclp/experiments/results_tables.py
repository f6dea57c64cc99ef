"""The result tables of the documentation, generated from the committed records (no hand-pasted numbers).

Each generated table sits in a results page (``docs/results/*.md``) between ``<!-- jaxclp:NAME -->`` and
``<!-- /jaxclp:NAME -->``; :func:`render` recomputes every such block from ``results/`` and :func:`update` writes
it back. The test suite checks that every page equals its rendering, so a table cannot drift from the records it
cites. Numbers in the prose of the README and the documentation are generated the same way, inline
(:mod:`jaxclp.experiments.page_values`), and rewritten by the same command.

    python -m jaxclp.experiments.results_tables            # rewrite the blocks of ./docs/results/*.md from ./results
    python -m jaxclp.experiments.results_tables --check    # exit 1 if they differ (what tests/test_readme.py checks)

Cells: mean ± sample std (ddof 1) of the test score in percent over the runs, ``(n)`` where fewer runs than the
row's most complete method have, ``‡`` where a record was made under an earlier definition of its method (its
``method_hash`` differs from today's: stale, recomputed by the next ``--replace-stale`` run); **bold** = the best
mean among the row's complete, current cells.
"""

from __future__ import annotations

import argparse
import collections
import functools
import re
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxclp.experiments.reproduce import HOMOPHILY
from jaxclp.experiments.runner import RESULTS_FILE, read_records
from jaxclp.experiments.summary import _std, aggregate, current_hashes, paired_table, stale_cells
from jaxclp.experiments.paper import paper_number

DATASETS = ("texas", "wisconsin", "cornell", "actor", "chameleon", "squirrel", "usa-airports", "brazil-airports",
            "europe-airports", "wiki", "twitch-en", "twitch-ru", "minesweeper", "deezer-europe")
PAGES = "docs/results"
"""The folder of the pages that hold generated blocks, relative to the repository root."""
PRIOR_NAMES = {"mlp": "MLP", "link": "LINK", "linkx": "LINKX", "gcn": "GCN", "h2gcn": "H2GCN",
               "gcn_tuned": "tuned GCN", "sage_tuned": "SAGE"}


class Table(NamedTuple):
    """One generated table of the results pages.

    Attributes:
        results: folder of the records, relative to the repository root.
        split: the split of the rows.
        columns: (method, header) pairs, in order.
        paper: header of the paper's CLP column, or "" for none.
        base_counts: append to the ``clp`` cell how often validation chose each base predictor.
        runs: the protocol's number of runs (10 splits): a cell with fewer is marked ``(n)`` and never bold even
            where every cell of its row has as few (a target stopped part-way); None: the row's most complete cell.
        datasets: the rows, in order (a dataset without any record is left out); None: :data:`DATASETS`.
    """

    results: str
    split: str
    columns: tuple
    paper: str = ""
    base_counts: bool = False
    runs: int | None = None
    datasets: tuple | None = None


_TABLE_COLUMNS = tuple((m, m) for m in ("mlp", "link", "lp", "cs", "clp_star", "gcn", "h2gcn", "clp_paper", "clp_mlp",
                                         "clp"))
TABLES = {
    "table2": Table("results/table2", "medium", _TABLE_COLUMNS, paper="paper CLP", runs=10),
    "table4-sparse": Table("results/table4", "sparse", _TABLE_COLUMNS, paper="paper CLP", runs=10),
    "table4-dense": Table("results/table4", "dense", _TABLE_COLUMNS, paper="paper CLP", runs=10),
    **{f"table5-{s}": Table("results/table5", s, _TABLE_COLUMNS, paper="paper CLP", runs=10, datasets=("acm", "dblp"))
       for s in ("sparse", "medium", "dense")},
    **{f"table_homophily-{s}": Table("results/table_homophily", s, _TABLE_COLUMNS, paper="paper CLP", runs=10,
                                     datasets=HOMOPHILY + tuple(f"{d}+dagger" for d in HOMOPHILY))
       for s in ("sparse", "medium", "dense")},
    "ablation": Table("results/table2", "medium",
                      (("mlp", "MLP"), ("clp_paper", "paper's update (`clp_paper`)"),
                       ("clp_authors", "+ authors' step (`clp_authors`)"),
                       ("clp_mlp", "+ all variants incl. ρ-scaling (`clp_mlp`)"),
                       ("clp", "+ prior chosen on val. (`clp`)"),
                       ("clp_e2e", "MLP trained through the solve (`clp_e2e`)")), base_counts=True, runs=10),
    "table_gnn": Table("results/table_gnn", "medium",
                       (("mlp", "mlp"), ("gcn", "gcn (paper's)"), ("gcn_tuned", "gcn_tuned"), ("sage", "sage"),
                        ("gat", "gat"), ("gat_sep", "gat_sep"), ("gcn_sep", "gcn_sep"), ("h2gcn", "h2gcn")), runs=10),
}


class Paired(NamedTuple):
    """A generated per-split comparison of ``method`` with the baselines of several targets' records.

    Attributes:
        results: folders of the records; the first holds ``method``'s, the others add baselines (e.g. the tuned
            GNNs of ``results/table_gnn``) for the datasets whose configuration (``config_hash``: data, splits,
            training settings) equals the first folder's, run by run: the same splits.
        split: the split of the rows, or a tuple of splits (one row per dataset and split).
        method: the method compared (:func:`jaxclp.experiments.summary.paired_table`).
    """

    results: tuple
    split: str | tuple
    method: str = "clp"


PAIRED = {
    "clp-paired": Paired(("results/table2", "results/table_gnn"), "medium"),
    **{f"clp-paired-{s}": Paired(("results/table4",), s) for s in ("sparse", "dense")},
    "clp-paired-table5": Paired(("results/table5",), ("sparse", "medium", "dense")),
}


def paired_markdown(record_sets, paired: Paired) -> str:
    """:func:`jaxclp.experiments.summary.paired_table` of ``paired.method`` over the merged ``record_sets`` (one
    list per folder of ``paired.results``): current records only (a stale one, made under another definition of
    its method, is left out, so a row appears once re-run), later folders only where their ``config_hash``
    equals the first folder's for that dataset, and a (dataset, split, method) only from the first folder
    that has it. "–" without any current record of ``paired.method``."""
    splits = (paired.split,) if isinstance(paired.split, str) else tuple(paired.split)
    sets = [[r for r in records if r.get("type") == "result" and r.get("split") in splits]
            for records in record_sets]
    hashes = current_hashes({r["method"] for results in sets for r in results})  # None: never current
    first = {r["dataset"]: r.get("config_hash") for r in (sets[0] if sets else [])}
    owner: dict = {}  # (dataset, method) -> the folder that supplies it
    merged = []
    for i, results in enumerate(sets):
        for r in results:
            key, current = (r["dataset"], r["method"]), hashes[r["method"]]
            if current is None or r.get("method_hash") != current or owner.setdefault(key, i) != i:
                continue
            if i == 0 or r.get("config_hash") == first.get(r["dataset"]):
                merged.append(r)
    agg, last = aggregate(merged)
    return paired_table(agg, last, paired.method, heading=False) or "–"


def _base_counts(last, dataset: str, split: str, method: str) -> str:
    c = collections.Counter(r["params"].get("base_prior") for (d, s, m, _), r in last.items()
                            if (d, s, m) == (dataset, split, method) and "base_prior" in r.get("params", {}))
    return ", ".join(f"{PRIOR_NAMES.get(k, k)} {v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def table_markdown(records, table: Table, datasets=DATASETS) -> str:
    """The markdown table (header, separator, one row per dataset that has any record) of ``table``."""
    agg, last = aggregate(records)
    stale = stale_cells(last, [m for m, _ in table.columns])
    heads = [h for _, h in table.columns] + ([table.paper] if table.paper else [])
    lines = ["| dataset | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    for d in datasets:
        keys = [(d, table.split, m) for m, _ in table.columns]
        if not any(k in agg for k in keys):
            continue
        full = max([len(agg[k]) for k in keys if k in agg] + [table.runs or 0])
        complete = [k for k in keys if k in agg and len(agg[k]) == full and k not in stale]
        best = max((agg[k].mean() for k in complete), default=None)
        cells = []
        for k in keys:
            v = agg.get(k)
            if v is None:
                cells.append("–")
                continue
            txt = f"{v.mean():.1f} ± {_std(v):.1f}" if len(v) > 1 else f"{v.mean():.1f}"  # one run: no spread
            if k in complete and best is not None and np.isclose(v.mean(), best):
                txt = f"**{txt}**"
            if len(v) < full:
                txt += f" ({len(v)})"
            if table.base_counts and k[2] == "clp":
                counts = _base_counts(last, *k)
                txt += f" ({counts})" if counts else ""
            if k in stale:
                txt += " ‡"
            cells.append(txt)
        if table.paper:
            p = paper_number(d, table.split, "clp")
            cells.append(f"{p[0]:.1f} ± {p[1]:.1f}" if p else "–")
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _anchors_block(root: Path) -> str:
    import json

    from jaxclp.experiments.anchors import compact_table

    return compact_table(json.loads((root / "results" / "anchors" / "results.json").read_text()))


def _cost_block(root: Path, name: str) -> str:
    """Per graph of a ``jaxclp.benchmarks.cost`` run: programs compiled, compilation's share of the wall time, each
    split's seconds, and the shares of the tuned GNN priors, CLP's candidates and the selection; then how many
    graphs meet the 20 s per split target on their last split (compilation paid in the first: what the median of
    ten splits measures), where the run has two splits."""
    import json

    d = json.loads((root / "benchmarks" / "results" / f"{name}.json").read_text())
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
    import json

    d = json.loads((root / "benchmarks" / "results" / "throughput_kernel.json").read_text())
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
    import json

    d = json.loads((root / "benchmarks" / "results" / "end_to_end.json").read_text())
    lines = ["| graph | jaxclp s | torch s | speed-up | MLP s (jaxclp / torch) | propagation + selection ms "
             "(jaxclp / torch) | jaxclp compile s | same-prior predictions equal |", "|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        j, t = r["jax"], r["torch"]
        lines.append(f"| {r['dataset']} | {j['total']['median']:.2f} | {t['total']['median']:.2f} | "
                     f"{t['total']['median'] / j['total']['median']:.2f} | {j['mlp']['median']:.2f} / "
                     f"{t['mlp']['median']:.2f} | {1e3 * j['propagation_selection']['median']:.1f} / "
                     f"{1e3 * t['propagation_selection']['median']:.1f} | {j['total']['compile']:.1f} | "
                     f"{100 * r['same_prior_prediction_agreement']:.0f} % |")
    return "\n".join(lines)


def _grid_memory_block(root: Path) -> str:
    """``grid_memory.json``: peak memory, seconds and the chosen candidate of ``clp_mlp``'s grid per size and mode."""
    import json

    d = json.loads((root / "benchmarks" / "results" / "grid_memory.json").read_text())
    lines = ["| nodes × classes | mode | peak GiB | seconds | candidates kept | same choice as the first row of its size |",
             "|---|---|---|---|---|---|"]
    first: dict = {}
    for r in d["grid"]:
        size = f"{r['nodes'] // 1000}k × {r['classes']}"
        if "skipped" in r:
            lines.append(f"| {size} | {r['mode']} | – | – | – | not run: {r['skipped']} |")
            continue
        first.setdefault(size, r["choice"])
        lines.append(f"| {size} | {r['mode']} | {r['peak_gib']:.2f} | {r['seconds']:.0f} | {r['stored']} | "
                     f"{'yes' if r['choice'] == first[size] else '**no**'} |")
    return "\n".join(lines)


def _alpha_chunks_block(root: Path) -> str:
    """``alpha_chunks.json``: a closed-form solve's 11 α at once vs in chunks, per size and method."""
    import json

    d = json.loads((root / "benchmarks" / "results" / "alpha_chunks.json").read_text())
    lines = ["| nodes × classes | method | α per chunk | seconds (min / median) | peak GiB | iterations (max) | "
             "converged | max difference from all at once |", "|---|---|---|---|---|---|---|---|"]
    for r in d["grid"]:
        t = r["seconds"]
        secs = f"{min(t):.2f} / {float(np.median(t)):.2f}"
        lines.append(f"| {r['nodes'] // 1000}k × {r['classes']} | {r['method']} | {r['chunk']} | {secs} | "
                     f"{r['peak_gib']:.2f} | {r['iterations_max']} | {r['converged']} | {r['max_abs_diff']:.1e} |")
    return "\n".join(lines)


_THROUGHPUT_COLUMNS = (("jaxclp factored", "jaxclp (fused kernel)"), ("scipy per-class CSR", "scipy per-class CSR"),
                       ("scipy CSR @ dense", "scipy CSR @ dense"), ("torch.sparse.mm CSR", "torch.sparse.mm CSR (2 threads)"),
                       ("torch index_add_ (PyG-style gather", "torch index_add_ (PyG)"),
                       ("C CSR loop, factored (2 threads)", "C loop 2 threads, factored"),
                       ("C CSR loop, edgewise (2 threads)", "C loop 2 threads, edgewise"))


def _throughput_block(root: Path) -> str:
    """``throughput.json``: one CLP step per K, median / min ms per implementation, and the bandwidth bound."""
    import json

    d = json.loads((root / "benchmarks" / "results" / "throughput.json").read_text())
    lines = ["| K | " + " | ".join(h for _, h in _THROUGHPUT_COLUMNS) + " | bandwidth bound |",
             "|---" * (len(_THROUGHPUT_COLUMNS) + 2) + "|"]
    for res in sorted(d["results"], key=lambda r: r["K"]):
        pick = lambda prefix: next(r for r in res["rows"] if r["name"].startswith(prefix))
        cells = [f"{1e3 * pick(p)['time_s']:.3g} / {1e3 * pick(p)['time_min_s']:.3g}" for p, _ in _THROUGHPUT_COLUMNS]
        bound = res.get("analysis", {}).get("bandwidth_bound_ms")
        lines.append(f"| {res['K']} | " + " | ".join(cells) + f" | {'–' if bound is None else f'{bound:.2f}'} |")
    return "\n".join(lines)


def _main_job_block(root: Path) -> str:
    """``main_job.json``: the README's main job timed graph by graph (:func:`jaxclp.benchmarks.main_job.tables`)."""
    import json

    from jaxclp.benchmarks.main_job import tables

    return tables(json.loads((root / "benchmarks" / "results" / "main_job.json").read_text()))


def _halo_block(root: Path, shards: int = 8) -> str:
    """``halo.json``: what one product communicates per graph and partitioner on ``shards`` shards."""
    import json

    d = json.loads((root / "benchmarks" / "results" / "halo.json").read_text())
    lines = ["| graph | partition | remote rows received | edge cut | MiB per step (ppermute) | all-gather MiB | "
             "ppermute rounds | plan s |", "|---|---|---|---|---|---|---|---|"]
    for r in d["plans"]:
        if r["num_shards"] == shards:
            lines.append(f"| {r['graph']} | {r['partition']} | {100 * r['received_fraction']:.1f} % | "
                         f"{100 * r['edge_cut']:.1f} % | {r['ppermute_bytes'] / 2**20:.2f} | "
                         f"{r['allgather_bytes'] / 2**20:.1f} | {r['rounds']} | {r['plan_s']:.1f} |")
    return "\n".join(lines)


_SHARDED_RUNS = (("sharded", "gather product"), ("sharded_csr", "per-shard CSR product"),
                 ("sharded_lean", "CSR product, lean plan"))


def _sharded_block(root: Path) -> str:
    """The products-shaped runs of ``sharded.json``, ``sharded_csr.json`` and ``sharded_lean.json`` (K = 47 rows):
    peak memory, bytes per edge, one product's seconds and the halo per step."""
    import json

    lines = ["| run | n | directed edges | devices | partition | peak GiB | peak B per edge | sharded graph B per "
             "edge | one product s | halo MiB per step |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, label in _SHARDED_RUNS:
        d = json.loads((root / "benchmarks" / "results" / f"{name}.json").read_text())
        for r in d["derived"]:
            if r.get("k", 47) != 47 or "peak_mib" not in r:
                continue
            lines.append(f"| {label} | {r['n']:,} | {r['m'] / 1e6:.1f}M | {r['devices']} | {r['partition']} | "
                         f"{r['peak_mib'] / 1024:.1f} | {r['peak_b_per_edge']:.0f} | {r['sharded_graph_b_per_edge']:.0f} | "
                         f"{r['times']['product'] if 'times' in r else r['step_s']:.2f} | {r['halo_mib_per_step']:.0f} |")
    return "\n".join(lines)


def _papers100m_block(root: Path) -> str:
    import json

    from jaxclp.benchmarks.papers100m_plan import markdown

    return markdown(json.loads((root / "benchmarks" / "results" / "papers100m_plan.json").read_text())["rows"])


OTHER_BLOCKS = {"anchors": _anchors_block, "throughput_kernel": _kernel_block, "end_to_end": _end_to_end_block,
                "halo": _halo_block, "sharded_runs": _sharded_block, "papers100m_plan": _papers100m_block,
                "main_job": _main_job_block,
                "throughput": _throughput_block,
                "grid_memory": _grid_memory_block, "alpha_chunks": _alpha_chunks_block, **{f"cost_after_{r}": functools.partial(_cost_block, name=f"cost_after_{r}")
                                              for r in ("r1", "r2")}}
"""Generated blocks that are not record tables: name -> ``f(root) -> markdown``."""

_BLOCK = re.compile(r"(<!-- jaxclp:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /jaxclp:(?P=name) -->)", re.S)


def render(text: str, root: Path = Path(".")) -> str:
    """``text`` (a page) with every generated block recomputed from the records under ``root``.

    Raises:
        ValueError: a block names a table that :data:`TABLES` does not define.
    """
    cache: dict[str, list] = {}

    def records(folder: str) -> list:
        if folder not in cache:
            cache[folder] = read_records(Path(root) / folder / RESULTS_FILE)
        return cache[folder]

    def block(m: re.Match) -> str:
        name = m.group("name")
        if name in PAIRED:
            p = PAIRED[name]
            return m.group(1) + paired_markdown([records(f) for f in p.results], p) + "\n" + m.group(4)
        if name in OTHER_BLOCKS:
            return m.group(1) + OTHER_BLOCKS[name](Path(root)) + "\n" + m.group(4)
        if name not in TABLES:
            raise ValueError(f"block jaxclp:{name} names no table; known: "
                             f"{sorted(TABLES) + sorted(PAIRED) + sorted(OTHER_BLOCKS)}")
        t = TABLES[name]
        return m.group(1) + table_markdown(records(t.results), t, t.datasets or DATASETS) + "\n" + m.group(4)

    from jaxclp.experiments import page_values

    return page_values.render(_BLOCK.sub(block, text), page_values.Sources(root))


def pages(root: Path = Path(".")) -> list[Path]:
    """The pages that may hold generated tables or inline values (:mod:`jaxclp.experiments.page_values`): the
    README and every markdown page of the documentation, sorted."""
    readme = Path(root) / "README.md"
    return ([readme] if readme.is_file() else []) + sorted((Path(root) / "docs").rglob("*.md"))


def update(paths=None, root: Path = Path(".")) -> list[Path]:
    """Rewrites the generated blocks of each page in ``paths`` (default: :func:`pages`) in place from the records
    under ``root``; returns the pages that changed."""
    changed = []
    for path in (pages(root) if paths is None else [Path(p) for p in paths]):
        text = path.read_text()
        new = render(text, root)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m jaxclp.experiments.results_tables", description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".", help="the repository root (records under ROOT/results, pages under "
                                                "ROOT/README.md and ROOT/docs)")
    ap.add_argument("--check", action="store_true", help="exit 1 if a page's tables differ from the records")
    a = ap.parse_args(argv)
    root = Path(a.root)
    if a.check:
        stale = [str(p) for p in pages(root) if render(p.read_text(), root) != p.read_text()]
        print("the results pages match the records" if not stale else
              f"tables of {', '.join(stale)} differ from the records: run python -m jaxclp.experiments.results_tables",
              file=sys.stderr)
        return 1 if stale else 0
    changed = update(root=root)
    print(f"updated {', '.join(map(str, changed))}" if changed else "the results pages are up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
