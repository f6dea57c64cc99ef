"""Markdown summaries of results files: mean ± std per method and dataset, paper numbers beside."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np

from jaxclp.experiments.runner import RESULTS_FILE, read_records

# The paper's reported numbers (percent), keyed (dataset, split, method). The paper's tables were not
# available to us offline, so this is empty and the summary prints "n/a" rather than a remembered number.
# Fill it from the paper (Zhong, Ivanov, Pang, TMLR 2022) to get the difference column.
PAPER: dict[tuple[str, str, str], float] = {}

METHOD_ORDER = ("mlp", "link", "lp", "cs", "clp_star", "clp_paper", "clp", "gcn", "h2gcn")


def aggregate(records):
    """(dataset, split, method) -> array of test scores (percent), taking the last record per run."""
    last = {}
    for r in records:
        if r.get("type") == "result":
            last[(r["dataset"], r["split"], r["method"], r["run"])] = r
    out = collections.defaultdict(list)
    for (d, s, m, _), r in sorted(last.items()):
        out[(d, s, m)].append(100.0 * r["test"])
    return {k: np.asarray(v) for k, v in out.items()}, last


def markdown(records, title: str = "") -> str:
    agg, last = aggregate(records)
    methods = [m for m in METHOD_ORDER if any(k[2] == m for k in agg)] + sorted(
        {k[2] for k in agg} - set(METHOD_ORDER))
    rows = sorted({(k[0], k[1]) for k in agg})
    lines = [f"## {title}" if title else "", "",
             "Test score in percent (accuracy, or ROC-AUC where the metric column says so): mean ± sample std (ddof 1) over "
             "the runs (n), every hyperparameter chosen on validation only. Paper: the CLP paper's number "
             "where recorded (else n/a); Δ = ours − paper.", "",
             "| dataset | split | metric | " + " | ".join(methods) + " |",
             "|---|---|---|" + "---|" * len(methods)]
    for d, s in rows:
        metric = next(r["metric"] for r in last.values() if r["dataset"] == d and r["split"] == s)
        cells = []
        best = max((agg[(d, s, m)].mean() for m in methods if (d, s, m) in agg), default=None)
        for m in methods:
            v = agg.get((d, s, m))
            if v is None:
                cells.append("–")
                continue
            txt = f"{v.mean():.1f} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.1f} ({len(v)})"
            if best is not None and np.isclose(v.mean(), best):
                txt = f"**{txt}**"
            p = PAPER.get((d, s, m))
            txt += f"<br>paper {p:.1f}, Δ {v.mean() - p:+.1f}" if p is not None else ""
            cells.append(txt)
        lines.append(f"| {d} | {s} | {metric} | " + " | ".join(cells) + " |")
    lines += ["", variant_table(last)]
    return "\n".join(lines)


def variant_table(last) -> str:
    """How often each CLP variant (normalization, per-step L1, prior) won on validation."""
    counts = collections.Counter()
    per_ds = collections.defaultdict(collections.Counter)
    for r in last.values():
        if r["method"] == "clp":
            p = r["params"]
            v = f"{p.get('normalization')}/{'l1' if p.get('l1') else 'linear'}/{p.get('prior')}"
            counts[v] += 1
            per_ds[r["dataset"]][v] += 1
    if not counts:
        return ""
    lines = ["### CLP variant chosen on validation (normalization / per-step L1 / prior source)", "",
             "| variant | times chosen |", "|---|---|"]
    lines += [f"| {v} | {c} |" for v, c in counts.most_common()]
    lines += ["", "| dataset | most chosen variants |", "|---|---|"]
    lines += [f"| {d} | " + ", ".join(f"{v} ×{c}" for v, c in cnt.most_common(3)) + " |"
              for d, cnt in sorted(per_ds.items())]
    return "\n".join(lines)


def write_summary(out_dir, title: str = "", filename: str = "summary.md") -> Path:
    out_dir = Path(out_dir)
    records = read_records(out_dir / RESULTS_FILE)
    if not title:  # keep the title a reproduce target gave this directory
        old = out_dir / filename
        first = old.read_text().splitlines()[0] if old.exists() else ""
        title = first[3:] if first.startswith("## ") and len(first) > 3 else out_dir.name
    text = markdown(records, title)
    commands = sorted({" ".join(r["argv"]) for r in records if r.get("type") == "header" and r.get("argv")})
    if commands:
        text += "\n\nCommands that produced these records:\n\n" + "\n".join(f"    {c}" for c in commands)
    path = out_dir / filename
    path.write_text(text + "\n")
    return path
