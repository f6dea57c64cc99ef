"""Numbers in the prose of the README and the documentation, generated from the committed records and benchmark
results (the tables have :mod:`jaxclp.experiments.results_tables`; this is its inline counterpart).

This module knows the records (``results/``); the facts computed from the benchmarks' results are the clone's
``benchmarks`` package's (it passes them in as ``Sources(root, facts=...)``: ``python -m benchmarks.pages``
renders the pages with both). The generic ``json:`` kind reads any committed JSON file.

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
* ``fact:NAME``: a count or figure computed from the records by :data:`FACTS`, or by the ``facts`` a
  :class:`Sources` was given (the benchmarks' results).
* ``figure:NAME``: a finding of the figures' data (:func:`jaxclp.experiments.figure_facts.facts`; default ``.1f``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

import numpy as np

from jaxclp.experiments.figure_facts import facts as figure_facts
from jaxclp.experiments.paper import paper_number
from jaxclp.experiments.records import RESULTS_FILE, read_records
from jaxclp.experiments.summary import _std, aggregate

VALUE = re.compile(r"<!-- n:(?P<key>.+?) -->(?P<body>[^<]*)<!-- /n -->")
"""An inline generated value: ``<!-- n:KEY -->VALUE<!-- /n -->``."""


class Sources:
    """The committed records and results under a repository ``root``, each read once.

    Args:
        root: the repository root.
        facts: more ``fact:NAME`` -> ``f(sources)`` besides :data:`FACTS` (which they may not rename).
    """

    def __init__(self, root: Path, facts: dict | None = None):
        self.root = Path(root)
        self.facts = dict(facts or {})
        self._json: dict = {}
        self._records: dict = {}
        self._scores: dict = {}
        self._once: dict = {}
        self._figures: dict | None = None

    def records(self, folder: str) -> list:
        """The records of ``root/folder/results.jsonl`` (:func:`jaxclp.experiments.records.read_records`)."""
        if folder not in self._records:
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
            self._figures = figure_facts(self.root)
        return self._figures

    def scores(self, target: str) -> tuple[dict, dict]:
        """``(aggregate, last)`` of ``results/TARGET`` (:func:`jaxclp.experiments.summary.aggregate`)."""
        if target not in self._scores:
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


_MISALIGNED = ("usa-airports", "brazil-airports", "europe-airports", "wiki", "deezer-europe")

FACTS: dict[str, Callable[[Sources], object]] = {
    "table2-paper-cells": lambda s: s.once(_paper_flags)[0],
    "table2-paper-flagged": lambda s: s.once(_paper_flags)[1],
    "table2-paper-cells-aligned": lambda s: s.once(_paper_flags, "table2", "medium", _MISALIGNED)[0],
    "table2-paper-flagged-aligned": lambda s: s.once(_paper_flags, "table2", "medium", _MISALIGNED)[1],
    "table2-clp_paper-graphs": lambda s: s.once(_clp_paper_vs_paper)[0],
    "table2-clp_paper-within": lambda s: s.once(_clp_paper_vs_paper)[1],
    "table2-clp_paper-lower": lambda s: s.once(_clp_paper_vs_paper)[2],
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
        facts = {**src.facts, **FACTS}
        if args[0] not in facts:
            raise ValueError(f"inline value {key!r}: unknown fact; known: {sorted(facts)} (the benchmarks' facts: "
                             "python -m benchmarks.pages from a clone)")
        x = facts[args[0]](src)
    text = format(x, fmt)
    if fmt.startswith("+"):
        if float(format(abs(float(x)), fmt[1:])) == 0.0:  # "+0.0" / "-0.0": a difference that rounds to zero
            return format(0.0, fmt[1:])
        return text.replace("-", "−")
    return text


def render(text: str, src: Sources) -> str:
    """``text`` with every inline value recomputed from ``src``."""
    return VALUE.sub(lambda m: f"<!-- n:{m['key']} -->{value(m['key'], src)}<!-- /n -->", text)
