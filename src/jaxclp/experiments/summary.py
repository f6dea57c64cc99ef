"""Markdown summaries of results files: mean ± std per method and dataset, paper numbers beside."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Sequence

import numpy as np

from jaxclp.datasets.registry import REGISTRY, canonical_name
from jaxclp.experiments.chance import (NOT_ABOVE, UNKNOWN_NOTE, beats_chance, chance_percent, read_stored,
                                      recorded_chances, write_stored)
from jaxclp.experiments.chance_rebuild import for_records
from jaxclp.experiments.analyses.common import METHOD_LABELS, METHOD_STYLE, pyplot
from jaxclp.experiments.methods import NEEDS_PRIOR
from jaxclp.experiments.paper import paper_number
from jaxclp.experiments.records import record_key
from jaxclp.experiments.records import RESULTS_FILE, read_records
from jaxclp.experiments.specs import method_hash

# The paper's reported numbers come from the CSV shipped in the package (jaxclp/data/paper_results.csv):
# ``paper_number(dataset, split, method) -> (mean, std) | None``, percent.

METHOD_ORDER = ("mlp", "link", "linkx", "lp", "cs", "clp_star", "clp_paper", "clp_authors", "clp_mlp", "clp",
                "clp_e2e", "gcn", "gcn_tuned", "h2gcn", "gcn_sep", "sage", "gat", "gat_sep")
BASELINES = ("mlp", "link", "linkx", "lp", "cs", "clp_star", "gcn", "gcn_tuned", "h2gcn", "gcn_sep", "sage", "gat",
             "gat_sep")
"""The methods ``clp`` is compared with (every method that is not a CLP variant)."""


def _std(v) -> float:
    """Sample std (ddof 1) of ``v``; 0 for a single value."""
    v = np.asarray(v, dtype=float)
    return float(v.std(ddof=1)) if v.size > 1 else 0.0


def _mean_std(v) -> str:
    """A cell's ``mean ± std (n)`` (``mean (1)`` for one run)."""
    return f"{v.mean():.1f} ± {_std(v):.1f} ({len(v)})" if len(v) > 1 else f"{v.mean():.1f} (1)"


def aggregate(records):
    """``(agg, last)``: ``agg`` maps (dataset, split, method) to the array of test scores (percent) over runs, taking
    the last record per run; ``last`` maps (dataset, split, method, run) to that record (method before run, unlike
    :class:`~jaxclp.experiments.records.RecordKey`: this module and its readers group by cell first)."""
    last = {}
    for r in records:
        if r.get("type") == "result":
            k = record_key(r)
            last[(k.dataset, k.split, k.method, k.run)] = r
    out = collections.defaultdict(list)
    for (d, s, m, _), r in sorted(last.items()):
        out[(d, s, m)].append(100.0 * r["test"])
    return {k: np.asarray(v) for k, v in out.items()}, last


def markdown(records, title: str = "", methods=(), only: bool = False, chances=None) -> str:
    """The summary table of ``records``, then which variant / base prior validation chose and the paired
    comparisons of ``clp`` (:func:`paired_table`).

    The ``chance`` column holds the chance reference of the row's metric (:mod:`jaxclp.experiments.chance`): for
    accuracy, always answering the majority class of each split's training labels, scored on its test nodes (the
    run's header records hold it; ``?`` for records made before they did), for ROC-AUC 50; a method's cell gets
    ``≤ chance`` where its mean is not above it by more than its std.

    Args:
        records: result records, and the header records before them (their ``"chance"``; other records are
            ignored).
        title: heading.
        methods: columns to show even where no record has them yet (the cell then holds "–" and the paper's
            number, if any); the methods of the records are always shown unless ``only``.
        only: show the columns ``methods`` and no others.
        chances: ``{(dataset, split): {run: fraction}}`` (:func:`jaxclp.experiments.chance_rebuild.for_records`: rebuilt
            for records whose headers lack it); None: the header records' own values only.
    """
    agg, last = aggregate(records)
    chances = recorded_chances(records) if chances is None else chances
    present = set(methods) if only else {k[2] for k in agg} | set(methods)
    methods = [m for m in METHOD_ORDER if m in present] + sorted(present - set(METHOD_ORDER))
    rows = sorted({(k[0], k[1]) for k in agg})
    stale = stale_cells(last, methods)
    # the paper's columns only where the paper has a number for a shown cell: a user's own graph gets none
    with_paper = any(paper_number(d, s, m) is not None for d, s in rows for m in methods)
    paper = ("Paper: the CLP paper's mean ± std (Zhong et al., TMLR 2022; its configurations were selected on test "
             "accuracy) where its tables have the method, dataset and split; Δ = ours − paper; ⚠ marks |Δ| larger "
             "than the combined spread sqrt(std_ours² + std_paper²); ") if with_paper else ""
    lines = [f"## {title}" if title else "", "",
             "Test score in percent (accuracy, or ROC-AUC where the metric column says so): mean ± sample std (ddof 1) over "
             f"the runs (n), every hyperparameter chosen on validation only; bold: the best mean of the row. {paper}"
             "‡ marks a cell holding records made under an earlier definition "
             "of its method (stale: the next `--replace-stale` run recomputes them). chance: the score of a constant "
             "answer on the same test nodes (accuracy: always the majority class of each split's training labels; "
             f"ROC-AUC: 50); {NOT_ABOVE} marks a mean not above it by more than its std over the runs.", "",
             "| dataset | split | metric | chance | " + " | ".join(methods) + " |",
             "|---|---|---|---|" + "---|" * len(methods)]
    unknown = False
    for d, s in rows:
        metric = next(r["metric"] for r in last.values() if r["dataset"] == d and r["split"] == s)
        runs = sorted({i for (dd, ss, _, i) in last if (dd, ss) == (d, s)})
        chance = chance_percent(metric, runs, chances.get((d, s)))
        unknown |= chance is None
        cells = ["?" if chance is None else f"{chance:.1f}"]
        best = max((agg[(d, s, m)].mean() for m in methods if (d, s, m) in agg), default=None)
        for m in methods:
            v = agg.get((d, s, m))
            if v is None:
                cells.append("–" + paper_cell(d, s, m, None, metric))
                continue
            txt = _mean_std(v)
            if best is not None and np.isclose(v.mean(), best):
                txt = f"**{txt}**"
            if chance is not None and not beats_chance(v, chance):
                txt += f" {NOT_ABOVE}"
            txt += paper_cell(d, s, m, v, metric)
            if (d, s, m) in stale:
                txt += " ‡"
            cells.append(txt)
        lines.append(f"| {d} | {s} | {metric} | " + " | ".join(cells) + " |")
    if unknown:
        lines += ["", f"?: {UNKNOWN_NOTE}."]
    sections = [accuracy_table(last, methods, chances), variant_table(last), paired_table(agg, last),
                candidate_table(last) if "clp_e2e" in methods else "", skipped_table(last),
                compute_table(last, methods)]
    for sec in sections:  # a section without records (e.g. no clp: no variant table) is left out, not a gap
        if sec:
            lines += ["", sec]
    return "\n".join(lines).rstrip("\n")


def accuracy_table(last, methods, chances) -> str:
    """For the ROC-AUC rows: the test accuracy of the same choices (records' ``test_accuracy``; selection and early
    stopping stay on ROC-AUC) beside the majority-class chance, so that sibling graphs scored by ROC-AUC can still be
    read in accuracy; empty where no record has it."""
    acc: dict = {}
    for (d, s, m, i), r in sorted(last.items()):
        if r.get("test_accuracy") is not None:
            acc.setdefault((d, s), {}).setdefault(m, {})[i] = 100.0 * float(r["test_accuracy"])
    if not acc:
        return ""
    shown = [m for m in methods if any(m in row for row in acc.values())]
    lines = ["### Accuracy of the same choices (ROC-AUC rows)", "",
             "Test accuracy in percent of the configuration ROC-AUC chose (mean ± std over the runs); chance: always "
             f"the majority class of each split's training labels; {NOT_ABOVE} as above.", "",
             "| dataset | split | chance | " + " | ".join(shown) + " |", "|---|---|---|" + "---|" * len(shown)]
    for (d, s), row in sorted(acc.items()):
        runs = sorted({i for m in row for i in row[m]})
        chance = chance_percent("accuracy", runs, (chances or {}).get((d, s)))
        cells = ["?" if chance is None else f"{chance:.1f}"]
        for m in shown:
            v = np.asarray(list(row.get(m, {}).values()))
            if v.size == 0:
                cells.append("–")
                continue
            txt = _mean_std(v)
            cells.append(txt + (f" {NOT_ABOVE}" if chance is not None and not beats_chance(v, chance) else ""))
        lines.append(f"| {d} | {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def skipped_table(last) -> str:
    """Markdown section: the base predictors and kinds of CLP candidate a method left out for time (records' ``"skipped"``, ``--time-limit``),
    per (dataset, split, method): each with the number of splits it was left out of; empty when none was."""
    rows = collections.defaultdict(collections.Counter)
    splits = collections.Counter()
    limits = {}
    for (d, s, m, _), r in sorted(last.items()):
        splits[(d, s, m)] += 1
        for name in r.get("skipped") or ():
            rows[(d, s, m)][name] += 1
            limits[(d, s, m)] = (r.get("config") or {}).get("time_limit")
    if not rows:
        return ""
    lines = ["### Left out for time", "",
             "MLP depths or training epochs (`mlp ...`), base predictors, or kinds of CLP candidate on the chosen one "
             "(`clp ...`) that did not fit what remained of the split's time limit (`--time-limit`, seconds per "
             "split), so the method chose among the others; left out of n of the splits.", "",
             "| dataset | split | method | time limit (s) | left out (n splits) |", "|---|---|---|---|---|"]
    for (d, s, m), names in sorted(rows.items()):
        limit = limits.get((d, s, m))
        left = ", ".join(f"{k} ({c} of {splits[(d, s, m)]})" for k, c in sorted(names.items()))
        lines.append(f"| {d} | {s} | {m} | {'–' if limit is None else f'{limit:g}'} | {left} |")
    return "\n".join(lines)


def current_hashes(methods) -> dict:
    """method -> today's ``method_hash``; None for a method this version does not define (never current)."""
    out = {}
    for m in methods:
        try:
            out[m] = method_hash(m)
        except ValueError:
            out[m] = None
    return out


def stale_cells(last, methods) -> set:
    """The (dataset, split, method) of ``methods`` with a last record carrying another ``method_hash`` than today's
    definition (made under an earlier one: stale; a method this version does not define is never marked)."""
    current = {m: h for m, h in current_hashes(methods).items() if h is not None}
    return {(d, s, m) for (d, s, m, _), r in last.items() if m in current and r.get("method_hash") != current[m]}


def compute_seconds(last, methods) -> dict:
    """method -> seconds its records took, the MLP priors' fit counted once per split.

    Every record of a method built on the MLP prior (:data:`jaxclp.experiments.methods.NEEDS_PRIOR`) includes the
    split's prior fit in its ``seconds``; that share (the split's ``mlp`` record) is subtracted from all but the
    ``mlp`` record itself (clamped at 0: records of one split may come from runs whose prior fits took different
    times). Splits without an ``mlp`` record keep the full seconds.
    """
    mlp = {(d, s, run): r.get("seconds", 0.0) for (d, s, m, run), r in last.items() if m == "mlp"}
    out = collections.Counter()
    for (d, s, m, run), r in last.items():
        if m not in methods:
            continue
        sec = float(r.get("seconds", 0.0))
        if m != "mlp" and m in NEEDS_PRIOR:
            sec = max(sec - mlp.get((d, s, run), 0.0), 0.0)
        out[m] += sec
    return dict(out)


def compute_table(last, methods) -> str:
    """Markdown section: the compute time of the shown methods' records (:func:`compute_seconds`)."""
    sec = compute_seconds(last, methods)
    if not sec:
        return ""
    n = collections.Counter(m for (_, _, m, _) in last if m in sec)
    lines = ["### Compute time", "",
             "Sum of the records' `seconds` (fit, selection and scoring per split; measured on whatever machine and "
             f"load made each record), the MLP priors counted once per split: **{sum(sec.values()) / 3600:.2f} h** "
             "for the methods shown. A fit shared through the runner's per-split cache counts where it was made "
             "(e.g. GCN and H2GCN inside `clp`, which fits them as base predictors before their own rows).", "",
             "| method | records | minutes |", "|---|---|---|"]
    lines += [f"| {m} | {n[m]} | {sec[m] / 60:.1f} |" for m in methods if m in sec]
    return "\n".join(lines)


def _paper_metric(dataset: str) -> str | None:
    """The metric of the paper's numbers for ``dataset`` (our registry's, ``<name>+dagger`` as ``<name>``); None
    for a graph the registry does not know."""
    spec = REGISTRY.get(canonical_name(dataset.removesuffix("+dagger")))
    return None if spec is None else spec.metric


def paper_cell(dataset: str, split: str, method: str, values, metric: str | None = None) -> str:
    """``"<br>paper X ± s, Δ +d"`` (with ``⚠`` when |Δ| exceeds the combined spread), or ``""`` if no number.

    Args:
        dataset, split, method: our names.
        values: (n,) our test scores in percent, or None (no result of ours: the paper's number alone).
        metric: the metric of our scores; none of the paper's numbers is shown when it differs from the paper's
            (e.g. ``jaxclp run --metric roc_auc`` on deezer-europe, whose paper numbers are accuracies).
    """
    p = paper_number(dataset, split, method)
    if p is None or (metric is not None and _paper_metric(dataset) not in (None, metric)):
        return ""
    if values is None:
        return f"<br>paper {p[0]:.1f} ± {p[1]:.1f}"
    v = np.asarray(values, dtype=float)
    std = _std(v)
    delta = float(v.mean()) - p[0]
    flag = " ⚠" if abs(delta) > float(np.hypot(std, p[1])) else ""
    return f"<br>paper {p[0]:.1f} ± {p[1]:.1f}, Δ {delta:+.1f}{flag}"


def variant_table(last) -> str:
    """How often each CLP variant (normalization, per-step L1, prior) won on validation; "prior alone (alpha 0)"
    where ``clp`` kept its chosen base predictor without propagation."""
    counts = collections.Counter()
    per_ds = collections.defaultdict(collections.Counter)
    for r in last.values():
        if r["method"] in ("clp", "clp_mlp"):
            p = r["params"]
            if p.get("alpha") == 0.0 and p.get("normalization") is None:  # validation kept the prior alone
                v = "prior alone (alpha 0)"
            else:
                v = f"{p.get('normalization')}/{'l1' if p.get('l1') else 'linear'}/{p.get('prior')}"
            counts[v] += 1
            per_ds[r["dataset"]][v] += 1
    base = collections.defaultdict(collections.Counter)
    for r in last.values():
        if r["method"] == "clp" and "base_prior" in r["params"]:
            base[r["dataset"]][r["params"]["base_prior"]] += 1
    lines = []
    if counts:
        lines += ["### CLP variant chosen on validation (normalization / per-step L1 / prior source)", "",
                  "| variant | times chosen |", "|---|---|"]
        lines += [f"| {v} | {c} |" for v, c in counts.most_common()]
        lines += ["", "| dataset | most chosen variants |", "|---|---|"]
        lines += [f"| {d} | " + ", ".join(f"{v} ×{c}" for v, c in cnt.most_common(3)) + " |"
                  for d, cnt in sorted(per_ds.items())]
    if base:
        lines += ["" if lines else "", "### clp: base prior chosen on validation", "",
                  "| dataset | base prior ×times |", "|---|---|"]
        lines += [f"| {d} | " + ", ".join(f"{p} ×{c}" for p, c in cnt.most_common()) + " |"
                  for d, cnt in sorted(base.items())]
    return "\n".join(lines).strip("\n")


def _pm(d) -> str:
    """``mean ± sample std`` of paired differences; the mean alone for a single run (no spread to state)."""
    d = np.asarray(d, dtype=float)
    return f"{d.mean():+.1f} ± {_std(d):.1f}" if d.size > 1 else f"{d.mean():+.1f}"


def _yes_no(ok: bool, ref) -> str:
    """``yes``/``no`` of a one-std judgment, ``–`` where ``ref`` has a single run (its std is undefined)."""
    return ("yes" if ok else "no") if np.asarray(ref).size > 1 else "–"


def _wlt(d) -> str:
    d = np.asarray(d, dtype=float)
    return f"{int((d > 1e-9).sum())}/{int((d < -1e-9).sum())}/{int((np.abs(d) <= 1e-9).sum())}"


def paired(last, dataset: str, split: str, a: str, b: str) -> np.ndarray:
    """Paired differences (percent points) of method ``a`` minus method ``b`` over the runs both have."""
    runs = sorted(k[3] for k in last if k[:3] == (dataset, split, a) and (dataset, split, b, k[3]) in last)
    return np.asarray([100.0 * (last[(dataset, split, a, i)]["test"] - last[(dataset, split, b, i)]["test"])
                       for i in runs])


def _prior_alone(last, r: dict) -> dict | None:
    """The score record (``val``, ``test``) of the base prior validation chose for result ``r``, alone: the
    record's reference (:func:`jaxclp.experiments.runner.reference_scores`), or for records made before references
    existed, the same split's record of the method named like the prior; None with neither."""
    base = r["params"]["base_prior"]
    ref = r.get("references", {}).get(base)
    if ref is not None:
        return ref
    k = record_key(r)
    return last.get((k.dataset, k.split, base, k.run))


def over_chosen_prior(last, dataset: str, split: str, method: str = "clp") -> np.ndarray:
    """Paired differences (points) of ``method`` minus the base prior its validation chose, alone, per run.

    The prior's own score is the record's reference (:func:`jaxclp.experiments.runner.reference_scores`); for
    records made before references existed, the same split's record of the method named like the prior (the
    ``mlp``, ``link``, ``linkx``, ``gcn`` or ``h2gcn`` column: the same predictor, key and split). Runs with neither are left
    out.
    """
    out = []
    for (d, s, m, i), r in sorted(last.items()):
        if (d, s, m) != (dataset, split, method) or "base_prior" not in r["params"]:
            continue
        ref = _prior_alone(last, r)
        if ref is not None:
            out.append(100.0 * (r["test"] - ref["test"]))
    return np.asarray(out)


def paired_table(agg, last, method: str = "clp", heading: bool = True, marked=frozenset()) -> str:
    """Per graph and split: ``method`` against its MLP, against the prior validation chose for it, and against
    the best baseline (:data:`BASELINES`, by mean), each paired over the runs both have (mean ± sample std,
    wins/losses/ties). Empty without records of ``method``; ``heading``: start with a title and the legend;
    ``marked``: the (dataset, split) rows whose dataset gets ``‡`` (records of an earlier definition)."""
    rows = sorted({(d, s) for (d, s, m) in agg if m == method})
    if not rows:
        return ""
    lines = [f"### `{method}` paired per split", "",
             "Δ in points, mean ± sample std over the runs both methods have; W/L/T = runs won / lost / tied. "
             "'> 1 std' compares the mean gap with the other method's std over runs; 'within 1 std' "
             "holds when the best baseline's mean is at most one of ITS stds above ours ('–' with a single run: "
             "no std).", ""] if heading else []
    lines += [f"| dataset | split | {method} | Δ vs mlp (W/L/T) | > 1 std | Δ vs chosen prior alone (W/L/T) | "
             "best baseline | Δ vs best (W/L/T) | within 1 std |",
             "|---|---|---|---|---|---|---|---|---|"]
    for d, s in rows:
        ours = agg[(d, s, method)]
        cells = [f"{ours.mean():.1f}"]
        if (d, s, "mlp") in agg:
            dm, mlp = paired(last, d, s, method, "mlp"), agg[(d, s, "mlp")]
            gap_ok = ours.mean() - mlp.mean() > _std(mlp)
            cells += [f"{_pm(dm)} ({_wlt(dm)})" if dm.size else "–", _yes_no(gap_ok, mlp)]
        else:
            cells += ["–", "–"]
        dp = over_chosen_prior(last, d, s, method)
        cells.append(f"{_pm(dp)} ({_wlt(dp)})" if dp.size else "–")
        base = [(agg[(d, s, b)].mean(), b) for b in BASELINES if (d, s, b) in agg]
        if base:
            _, b = max(base)
            v = agg[(d, s, b)]
            db = paired(last, d, s, method, b)
            within = v.mean() - ours.mean() <= _std(v)
            cells += [f"{b} {v.mean():.1f}", f"{_pm(db)} ({_wlt(db)})" if db.size else "–",
                      _yes_no(within, v)]
        else:
            cells += ["–", "–", "–"]
        lines.append(f"| {d}{' ‡' if (d, s) in marked else ''} | {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def with_candidate(last, dataset: str, split: str, extra: str = "clp_e2e", method: str = "clp",
                   base: str = "mlp") -> list[dict]:
    """What ``method`` would have scored with ``extra`` among its candidates, per run, from the records alone.

    ``clp`` chooses its base predictor on validation first, then CLP's best variant on it (or the predictor
    alone); ``clp_e2e`` fine-tunes the MLP prior, so it competes only where validation chose ``base``: there it
    replaces the choice when its validation score is strictly higher (the first candidate wins ties, as
    :func:`jaxclp.experiments.candidates.select`). Both records hold the validation score of their own choice on
    the same validation nodes, so no fit is needed. Runs that lack either record, or the chosen prior's score,
    are left out.

    Returns:
        One dict per run: ``run``, ``switched`` (bool), and the test scores (fractions) ``method``, ``new`` (with
        the candidate) and ``prior`` (the base predictor validation chose, alone).
    """
    out = []
    for (d, s, m, i), r in sorted(last.items()):
        e = last.get((d, s, extra, i))
        if (d, s, m) != (dataset, split, method) or e is None or "base_prior" not in r["params"]:
            continue
        ref = _prior_alone(last, r)
        if ref is None:
            continue
        switched = r["params"]["base_prior"] == base and e["val"] > r["val"]
        out.append({"run": i, "switched": bool(switched), method: r["test"],
                    "new": e["test"] if switched else r["test"], "prior": ref["test"]})
    return out


def candidate_table(last, extra: str = "clp_e2e", method: str = "clp") -> str:
    """Per graph and split, :func:`with_candidate` as a Markdown table (empty without both methods' records)."""
    rows = sorted({(d, s) for (d, s, m, _) in last if m == method} & {(d, s) for (d, s, m, _) in last if m == extra})
    if not rows:
        return ""
    lines = [f"### `{method}` with `{extra}` among its candidates (from the records, no new fit)", "",
             f"Where validation chose the MLP as `{method}`'s base predictor, `{extra}` (the MLP trained through "
             f"CLP's closed form) replaces `{method}`'s choice when its validation score is strictly higher. "
             "Δ in points, paired per run (mean ± sample std, W/L/T).", "",
             f"| dataset | split | runs switched | {method} | with {extra} | Δ (W/L/T) | "
             f"{method} − chosen prior (W/L/T) | with {extra} − chosen prior (W/L/T) |",
             "|---|---|---|---|---|---|---|---|"]
    for d, s in rows:
        runs = with_candidate(last, d, s, extra, method)
        if not runs:
            continue
        col = {k: 100.0 * np.asarray([r[k] for r in runs]) for k in (method, "new", "prior")}
        dn, do, dp = col["new"] - col[method], col[method] - col["prior"], col["new"] - col["prior"]
        lines.append(f"| {d} | {s} | {sum(r['switched'] for r in runs)}/{len(runs)} | {col[method].mean():.1f} | "
                     f"{col['new'].mean():.1f} | {_pm(dn)} ({_wlt(dn)}) | {_pm(do)} ({_wlt(do)}) | "
                     f"{_pm(dp)} ({_wlt(dp)}) |")
    return "\n".join(lines)


def machines(records: Sequence[dict]) -> list[str]:
    """Which machines made the result records: one line per (backend, devices, jax version), with the number of
    result records and their datasets. A result record belongs to the last header record before it in the file
    (the runner writes a header when a run starts, and ``out/.lock`` keeps two runs from appending to one file)."""
    groups: dict[tuple, list] = {}
    current = None
    for r in records:
        if r.get("type") == "header":
            current = (r.get("backend", "?"), ", ".join(r.get("devices") or []) or "?", r.get("jax", "?"))
        elif r.get("type") == "result" and current is not None:
            g = groups.setdefault(current, [0, set()])
            g[0] += 1
            g[1].add(r.get("dataset"))
    return [f"{backend} ({devices}), jax {jax_version}: {n} result record(s); "
            + ", ".join(sorted(d for d in ds if d))
            for (backend, devices, jax_version), (n, ds) in sorted(groups.items(), key=lambda kv: -kv[1][0])]


def write_summary(out_dir, title: str = "", filename: str = "summary.md", methods=(), only: bool = False,
                  data_root=None) -> Path:
    """Writes ``out_dir/filename``: :func:`markdown` of ``out_dir``'s records, the commands and machines that made them.

    The chance column of records whose headers lack it (made before the runner stored it) comes from
    ``out_dir/chance.json``, else is rebuilt from the dataset where it loads offline (``data_root``, or a file://
    ``$JAXCLP_DATA_URL``) and added to ``chance.json`` (:func:`jaxclp.experiments.chance_rebuild.for_records`); ``?`` where
    neither can give it."""
    out_dir = Path(out_dir)
    records = read_records(out_dir / RESULTS_FILE)
    before = read_stored(out_dir)
    chances, stored = for_records(records, data_root=data_root, stored=before)
    if stored != before:
        write_stored(out_dir, stored)
    if not title:  # keep the title a reproduce target gave this directory
        old = out_dir / filename
        first = old.read_text().splitlines()[0] if old.exists() else ""
        title = first[3:] if first.startswith("## ") and len(first) > 3 else out_dir.name
    text = markdown(records, title, methods, only, chances=chances)
    commands = sorted({" ".join(r["argv"]) for r in records if r.get("type") == "header" and r.get("argv")})
    if commands:
        text += "\n\nCommands that produced these records:\n\n" + "\n".join(f"    {c}" for c in commands)
    made_on = machines(records)
    if made_on:
        text += "\n\nMachines that made them (backend, devices, jax; the header record before each result):\n\n" + \
            "\n".join(f"- {m}" for m in made_on)
    path = out_dir / filename
    path.write_text(text + "\n")
    return path


def plot_summary(out_dir, filename: str = "summary.png", title: str = "") -> Path | None:
    """A dot plot of ``out_dir``'s records beside its summary.md: one panel per (dataset, split), one point per method
    (mean test score over the runs, error bar ± 1 sample std, the number of runs beside it; points rather than bars,
    the axis not starting at 0), methods in :data:`METHOD_ORDER`. Returns the PNG's path, or None when there is no
    result record."""
    out_dir = Path(out_dir)
    agg, last = aggregate(read_records(out_dir / RESULTS_FILE))
    if not agg:
        return None
    metric = {(d, s): r.get("metric", "accuracy") for (d, s, _, _), r in last.items()}
    panels = sorted({(d, s) for d, s, _ in agg})
    per = {p: [m for m in METHOD_ORDER if p + (m,) in agg]
           + sorted(m for dd, ss, m in agg if (dd, ss) == p and m not in METHOD_ORDER) for p in panels}
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), squeeze=False,
                             figsize=(sum(max(3.0, 0.42 * len(per[p]) + 1.0) for p in panels), 3.8))
    for ax, (d, s) in zip(axes[0], panels):
        methods = per[(d, s)]
        means = [float(np.mean(agg[(d, s, m)])) for m in methods]
        stds = [_std(agg[(d, s, m)]) for m in methods]
        colors = [METHOD_STYLE.get(m, ("tab:blue", "o"))[0] or "tab:blue" for m in methods]
        x = np.arange(len(methods))
        for xi, mu, sd, c, m in zip(x, means, stds, colors, methods):
            ax.errorbar([xi], [mu], yerr=[sd], fmt="o", color=c, capsize=3, markersize=5)
            ax.annotate(f"{mu:.1f}\nn={len(agg[(d, s, m)])}", (xi, mu + sd), textcoords="offset points", xytext=(0, 3),
                        ha="center", va="bottom", fontsize=6)
        ax.set_ylim(max(0.0, min(mu - sd for mu, sd in zip(means, stds)) - 3.0),
                    min(104.0, max(mu + sd for mu, sd in zip(means, stds)) + 6.0))
        ax.set_xlim(-0.6, len(methods) - 0.4)
        ax.set_xticks(x, [METHOD_LABELS.get(m, m) for m in methods], rotation=60, ha="right", fontsize=8)
        ax.set_title(f"{d} / {s}", fontsize=9)
        ax.set_ylabel(f"test {metric[(d, s)].replace('_', '-')} (%)", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = out_dir / filename
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path
