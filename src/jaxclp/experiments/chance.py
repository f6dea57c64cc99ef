"""The chance reference of a ranking: what a constant answer scores on the same nodes.

For accuracy: always answering the majority class of the split's TRAINING labels, scored on the split's test nodes
(or a prediction's validation nodes); for ROC-AUC: 50 (a constant score ranks no positive above a negative). The
runner stores the accuracy reference of every split in the run's header record (``"chance"``: one fraction per
split index; result records and their hashes are unchanged), and the rankings (``jaxclp run``'s,
``summary.md``) read it from there. Records made before it was stored have no accuracy reference in their headers:
:func:`jaxclp.experiments.chance_rebuild.for_records` rebuilds it from the dataset's labels and the very splits the
records used (the configuration's seed and data identity checked against the records) where the dataset loads offline,
and keeps it in ``chance.json`` beside the records (:data:`CHANCE_FILE`, what the results pages read); where it
cannot, the rankings say so (``?``) instead of guessing it.

A method "does not beat chance" where its mean test score is not above the chance reference by more than its own
sample std over the runs (:func:`beats_chance`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

ROC_AUC_CHANCE = 0.5
"""ROC-AUC of any constant (or random) score."""

CHANCE_WORDS = {"accuracy": "always the majority class", "roc_auc": "a constant score"}
"""What the chance reference of each metric answers (the ranking's line: ``chance (always the majority class)``)."""


def majority_share(labels, train, eval_mask) -> float:
    """Accuracy (0-1) of always answering the most frequent class of ``labels[train]`` on ``eval_mask``'s nodes.

    Args:
        labels: (n,) int class codes, negative for unlabelled nodes (never counted).
        train: (n,) bool: the nodes whose labels fix the majority class (ties: the lowest class code).
        eval_mask: (n,) bool: the nodes it is scored on (a split's test nodes).

    Returns:
        The share of the labelled nodes of ``eval_mask`` in that class; 0.0 without any.
    """
    y = np.asarray(labels)
    tr = np.asarray(train, bool) & (y >= 0)
    ev = np.asarray(eval_mask, bool) & (y >= 0)
    if not tr.any() or not ev.any():
        return 0.0
    majority = int(np.argmax(np.bincount(y[tr])))
    return float(np.mean(y[ev] == majority))


def chance_score(metric: str, labels, train, eval_mask) -> float:
    """The chance reference (0-1) of ``metric`` on ``eval_mask``: :func:`majority_share` for accuracy,
    :data:`ROC_AUC_CHANCE` for ROC-AUC."""
    if metric == "roc_auc":
        return ROC_AUC_CHANCE
    return majority_share(labels, train, eval_mask)


def split_chances(labels, train, test) -> list[float]:
    """:func:`majority_share` of every split: ``train``/``test`` (R, n) bool masks; one fraction per split index
    (what the runner writes to the header record's ``"chance"``)."""
    train, test = np.atleast_2d(np.asarray(train, bool)), np.atleast_2d(np.asarray(test, bool))
    return [majority_share(labels, train[i], test[i]) for i in range(train.shape[0])]


def recorded_chances(records: Iterable[Mapping]) -> dict:
    """``{(dataset, split): {run: fraction}}`` from the header records' ``"chance"`` lists (a later header of a
    (dataset, split) overrides an earlier one's values split by split)."""
    out: dict = {}
    for r in records:
        if r.get("type") == "header" and isinstance(r.get("chance"), list) and "dataset" in r and "split" in r:
            cell = out.setdefault((r["dataset"], r["split"]), {})
            cell.update({i: float(v) for i, v in enumerate(r["chance"]) if v is not None})
    return out


def chance_percent(metric: str, runs: Iterable[int], recorded: Mapping | None) -> float | None:
    """The chance reference in percent of a ranking over ``runs`` (split indices): 50 for ROC-AUC; for accuracy
    the mean of the recorded per-split values (``recorded``: ``{run: fraction}``, one cell of
    :func:`recorded_chances`); None where a run has none recorded (records made before the reference was stored)."""
    if metric == "roc_auc":
        return 100.0 * ROC_AUC_CHANCE
    runs = list(runs)
    if not recorded or not runs or any(i not in recorded for i in runs):
        return None
    return 100.0 * float(np.mean([recorded[i] for i in runs]))


def beats_chance(values, chance: float) -> bool:
    """Whether test scores ``values`` (percent, one per run) beat ``chance`` (percent): the mean is above it by
    more than the sample std (ddof 1; 0 for a single run, then the mean must be above it)."""
    v = np.asarray(values, dtype=float)
    std = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return float(v.mean()) - float(chance) > std


def chance_label(metric: str) -> str:
    """``chance (always the majority class)`` / ``chance (a constant score)``."""
    return f"chance ({CHANCE_WORDS.get(metric, 'a constant answer')})"


NOT_ABOVE = "≤ chance"
"""The marker of a method that does not beat chance (:func:`beats_chance`)."""

UNKNOWN_NOTE = ("chance: unknown for these records (made before jaxclp stored the majority-class reference in the "
                "run's header, and their dataset could not be loaded offline to rebuild it: with the data available, "
                "`jaxclp summarize DIR` computes it; or run again into a new --out)")

CHANCE_FILE = "chance.json"
"""Beside ``results.jsonl``: the accuracy references :func:`jaxclp.experiments.chance_rebuild.for_records` rebuilt
for records whose headers lack them (generated by ``jaxclp summarize`` / ``reproduce``; read by the rankings and the results pages)."""

def read_stored(folder) -> dict:
    """``{(dataset, split, config_hash): {run: fraction}}`` of ``folder``'s :data:`CHANCE_FILE` ({} without one)."""
    path = Path(folder) / CHANCE_FILE
    if not path.is_file():
        return {}
    rows = json.loads(path.read_text())["rows"]
    return {(r["dataset"], r["split"], r["config_hash"]): {int(k): float(v) for k, v in r["chance"].items()}
            for r in rows}


def write_stored(folder, stored: Mapping) -> Path | None:
    """Writes ``stored`` (as :func:`read_stored` returns it) to ``folder``'s :data:`CHANCE_FILE`; None when empty."""
    if not stored:
        return None
    rows = [{"dataset": d, "split": s, "config_hash": h, "chance": {str(i): v for i, v in sorted(c.items())}}
            for (d, s, h), c in sorted(stored.items(), key=lambda kv: tuple(map(str, kv[0])))]
    path = Path(folder) / CHANCE_FILE
    about = ("The accuracy of always answering the majority class of each split's training labels, scored on its test "
             "nodes (fractions, per run), rebuilt from the dataset and the splits the records used for records whose "
             "header lacks it: generated by jaxclp.experiments.chance_rebuild.for_records (jaxclp summarize DIR).")
    path.write_text(json.dumps({"about": about, "rows": rows}, indent=1) + "\n")
    return path
