"""The result tables of the documentation, generated from the committed records (no hand-pasted numbers).

Each generated table sits in a results page (``docs/results/*.md``) between ``<!-- jaxclp:NAME -->`` and
``<!-- /jaxclp:NAME -->``; :func:`render` recomputes every such block from ``results/`` and :func:`update` writes
it back. The test suite checks that every page equals its rendering, so a table cannot drift from the records it
cites. Numbers in the prose of the README and the documentation are generated the same way, inline
(:mod:`jaxclp.experiments.page_values`), and rewritten by the same command.

    python -m jaxclp.experiments.results_tables            # rewrite the blocks of ./docs/results/*.md from ./results
    python -m jaxclp.experiments.results_tables --check    # exit 1 if they differ

This module renders what the records (``results/``) hold. The tables and facts of the benchmarks' results belong
to the clone's ``benchmarks`` package, which passes them in (``blocks=``, ``facts=``): this repository's pages hold
both, and ``python -m benchmarks.pages [--check]`` renders them (what tests/package/test_readme.py checks).

Cells: mean ± sample std (ddof 1) of the test score in percent over the runs, ``(n)`` where fewer runs than the
row's most complete method have, ``‡`` where a record was made under an earlier definition of its method (its
``method_hash`` differs from today's: stale, recomputed by the next ``--replace-stale`` run); **bold** = the best
mean among the row's complete, current cells. The ``chance`` column holds the score of a constant answer on the
row's test nodes (accuracy: the majority class of each split's training labels, mean over the runs, from the headers
or the folder's ``chance.json``: :func:`jaxclp.experiments.chance_rebuild.for_records`; ROC-AUC: 50), and ``≤ chance``
marks a cell whose mean is not above it by more than its std (:func:`jaxclp.experiments.chance.beats_chance`).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxclp.experiments import page_values
from jaxclp.experiments.anchors import compact_table
from jaxclp.experiments.chance import NOT_ABOVE, beats_chance, chance_percent, read_stored
from jaxclp.experiments.chance_rebuild import for_records
from jaxclp.experiments.page_values import Sources
from jaxclp.experiments.reproduce import HOMOPHILY
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
    list per folder of ``paired.results``): later folders only where their ``config_hash`` equals the first
    folder's for that dataset, and a (dataset, split, method) only from the first folder that has it. A row whose
    ``paired.method`` records were made under an earlier definition of it (stale, as the tables' cells) is kept
    with ``‡`` after its dataset; the other methods' stale records are left out. "–" without any record of
    ``paired.method``."""
    splits = (paired.split,) if isinstance(paired.split, str) else tuple(paired.split)
    sets = [[r for r in records if r.get("type") == "result" and r.get("split") in splits]
            for records in record_sets]
    hashes = current_hashes({r["method"] for results in sets for r in results})  # None: never current
    first = {r["dataset"]: r.get("config_hash") for r in (sets[0] if sets else [])}
    owner: dict = {}  # (dataset, method) -> the folder that supplies it
    merged, stale = [], set()
    for i, results in enumerate(sets):
        for r in results:
            key, current = (r["dataset"], r["method"]), hashes[r["method"]]
            old = r.get("method_hash") != current
            if current is None or (old and r["method"] != paired.method) or owner.setdefault(key, i) != i:
                continue
            if i == 0 or r.get("config_hash") == first.get(r["dataset"]):
                merged.append(r)
                if old:
                    stale.add((r["dataset"], r["split"]))
    agg, last = aggregate(merged)
    return paired_table(agg, last, paired.method, heading=False, marked=stale) or "–"


def _base_counts(last, dataset: str, split: str, method: str) -> str:
    c = collections.Counter(r["params"].get("base_prior") for (d, s, m, _), r in last.items()
                            if (d, s, m) == (dataset, split, method) and "base_prior" in r.get("params", {}))
    return ", ".join(f"{PRIOR_NAMES.get(k, k)} {v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


CHANCE_LEGEND = ("chance: the score of a constant answer on the same test nodes (accuracy: always the majority class "
                 "of each split's training labels, mean over the runs; ROC-AUC: 50); " + NOT_ABOVE + ": a mean not "
                 "above it by more than its std over the runs.")
"""The one-line legend under every generated :class:`Table`."""


def table_markdown(records, table: Table, datasets=DATASETS, chances=None) -> str:
    """The markdown table (header, separator, one row per dataset that has any record) of ``table``, then the
    chance legend (:data:`CHANCE_LEGEND`).

    ``chances``: ``{(dataset, split): {run: fraction}}`` (:func:`jaxclp.experiments.chance_rebuild.for_records`); None: the
    header records' own values. A row without one for every run shows ``?`` and no marker."""
    agg, last = aggregate(records)
    if chances is None:
        chances, _ = for_records(records, compute=False)
    stale = stale_cells(last, [m for m, _ in table.columns])
    heads = ["chance"] + [h for _, h in table.columns] + ([table.paper] if table.paper else [])
    lines = ["| dataset | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    unknown = False
    for d in datasets:
        keys = [(d, table.split, m) for m, _ in table.columns]
        if not any(k in agg for k in keys):
            continue
        row = [(k, r) for k, r in last.items() if k[:3] in keys]
        metric = row[-1][1].get("metric", "accuracy")
        chance = chance_percent(metric, sorted({k[3] for k, _ in row}), chances.get((d, table.split)))
        unknown |= chance is None
        full = max([len(agg[k]) for k in keys if k in agg] + [table.runs or 0])
        complete = [k for k in keys if k in agg and len(agg[k]) == full and k not in stale]
        best = max((agg[k].mean() for k in complete), default=None)
        cells = ["?" if chance is None else f"{chance:.1f}"]
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
            if chance is not None and not beats_chance(v, chance):
                txt += f" {NOT_ABOVE}"
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
    legend = CHANCE_LEGEND + (" ?: unknown (records made before the runs stored it, and no chance.json beside them: "
                              "`jaxclp summarize DIR` with the data offline rebuilds it)." if unknown else "")
    return "\n".join(lines + ["", legend])


def _anchors_block(root: Path) -> str:
    """The anchors' results (``results/anchors/results.json``): :func:`jaxclp.experiments.anchors.compact_table`."""
    return compact_table(json.loads((Path(root) / "results" / "anchors" / "results.json").read_text()))


RECORD_BLOCKS = {"anchors": _anchors_block}
"""Generated blocks of the records that are not a :class:`Table` or :class:`Paired`: name -> ``f(root) -> markdown``."""


_BLOCK = re.compile(r"(<!-- jaxclp:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /jaxclp:(?P=name) -->)", re.S)


def render(text: str, root: Path = Path("."), sources=None, blocks=None) -> str:
    """``text`` (a page) with every generated block and inline value recomputed from the records and results
    under ``root``.

    Args:
        sources: a :class:`jaxclp.experiments.page_values.Sources` of ``root`` to read through (pages rendered
            together share one, so each file is read once); default a new one.
        blocks: more generated blocks, name -> ``f(root) -> markdown`` (the benchmarks' tables), besides
            :data:`TABLES`, :data:`PAIRED` and :data:`RECORD_BLOCKS`.

    Raises:
        ValueError: a block names a table that none of these define.
    """
    src = sources or page_values.Sources(root)
    records = src.records
    other = {**(blocks or {}), **RECORD_BLOCKS}

    def block(m: re.Match) -> str:
        name = m.group("name")
        if name in PAIRED:
            p = PAIRED[name]
            return m.group(1) + paired_markdown([records(f) for f in p.results], p) + "\n" + m.group(4)
        if name in other:
            return m.group(1) + other[name](Path(root)) + "\n" + m.group(4)
        if name not in TABLES:
            raise ValueError(f"block jaxclp:{name} names no table; known: "
                             f"{sorted(TABLES) + sorted(PAIRED) + sorted(other)} (the benchmarks' tables: "
                             "python -m benchmarks.pages from a clone)")
        t = TABLES[name]
        recs = records(t.results)
        chances, _ = for_records(recs, stored=read_stored(Path(root) / t.results), compute=False)
        return m.group(1) + table_markdown(recs, t, t.datasets or DATASETS, chances) + "\n" + m.group(4)

    return page_values.render(_BLOCK.sub(block, text), src)


def pages(root: Path = Path(".")) -> list[Path]:
    """The pages that may hold generated tables or inline values (:mod:`jaxclp.experiments.page_values`): the
    README and every markdown page of the documentation, sorted."""
    readme = Path(root) / "README.md"
    return ([readme] if readme.is_file() else []) + sorted((Path(root) / "docs").rglob("*.md"))


def update(paths=None, root: Path = Path("."), blocks=None, facts=None) -> list[Path]:
    """Rewrites the generated blocks of each page in ``paths`` (default: :func:`pages`) in place from the records
    under ``root`` (and the extra ``blocks`` and ``facts``, as :func:`render` and
    :class:`jaxclp.experiments.page_values.Sources` take them); returns the pages that changed."""
    changed, src = [], Sources(root, facts=facts)
    for path in (pages(root) if paths is None else [Path(p) for p in paths]):
        text = path.read_text()
        new = render(text, root, src, blocks)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def main(argv=None, blocks=None, facts=None, prog: str = "python -m jaxclp.experiments.results_tables") -> int:
    """The command: rewrite (or ``--check``) every page of :func:`pages`; ``blocks`` and ``facts`` as
    :func:`update` takes them, ``prog`` the command's name in its messages."""
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".", help="the repository root (records under ROOT/results, pages under "
                                                "ROOT/README.md and ROOT/docs)")
    ap.add_argument("--check", action="store_true", help="exit 1 if a page's tables differ from the records")
    a = ap.parse_args(argv)
    root = Path(a.root)
    if a.check:
        src = Sources(root, facts=facts)
        stale = [str(p) for p in pages(root) if render(p.read_text(), root, src, blocks) != p.read_text()]
        print("the results pages match the records" if not stale else
              f"tables of {', '.join(stale)} differ from the records: run {prog}", file=sys.stderr)
        return 1 if stale else 0
    changed = update(root=root, blocks=blocks, facts=facts)
    print(f"updated {', '.join(map(str, changed))}" if changed else "the results pages are up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
