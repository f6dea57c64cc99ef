"""The chance reference of records made before the runner stored it: rebuilt from the dataset's labels and the very
splits the records used (:func:`for_records`, :func:`rebuild`), where the dataset loads offline. Above the runner
(it rebuilds splits with :func:`jaxclp.experiments.runner.get_splits`); :mod:`jaxclp.experiments.chance` holds the
reference itself."""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from jaxclp.datasets import load
from jaxclp.datasets.fetch import default_base_url
from jaxclp.datasets.registry import REGISTRY, canonical_name
from jaxclp.experiments.chance import majority_share, recorded_chances
from jaxclp.experiments.identity import data_identity
from jaxclp.experiments.runner import get_splits

DERIVED = {"+dagger": "adds feature columns only (jaxclp.experiments.analyses.dagger.dagger_dataset)"}
"""Suffixes of derived datasets whose nodes, labels and published splits are their base dataset's: their chance
reference is rebuilt from the base dataset (``acm+dagger`` from ``acm``)."""



def _runs_of(records: Iterable[Mapping]) -> dict:
    """``{(dataset, split, config_hash): (config, {run: seed})}`` of the result records that carry a config and
    are scored by accuracy or also carry it (``test_accuracy``: a ROC-AUC record's chosen configuration's)."""
    out: dict = {}
    for r in records:
        if r.get("type") != "result" or not isinstance(r.get("config"), dict):
            continue
        if r["config"].get("metric", "accuracy") == "roc_auc" and r.get("test_accuracy") is None:
            continue
        cell = out.setdefault((r["dataset"], r["split"], r.get("config_hash")), (r["config"], {}))
        cell[1][int(r["run"])] = r.get("seed")
    return out


def _offline() -> bool:
    """Whether missing data files may be fetched without the network: ``$JAXCLP_DATA_URL`` names a file:// mirror."""
    base = default_base_url()
    return base is not None and base.startswith("file://")


def rebuild(dataset: str, split: str, config: Mapping, runs: Mapping, data_root=None, ds=None) -> dict | None:
    """The majority-class accuracy reference (fractions) of committed records, from the dataset's labels and the same
    splits the runner built (:func:`jaxclp.experiments.runner.get_splits` with the configuration's base seed).

    Checked before anything is computed, else None: the dataset is a registered one (or a :data:`DERIVED` form of one)
    that loads from the data root or a file:// mirror (never the network), or ``ds`` is given; its data identity today
    (:func:`jaxclp.experiments.identity.data_identity`: the registry's sha256 of every source file for a registered
    name, the sha256 of the arrays for ``ds``) equals the configuration's ``"data"``; the configuration names this
    dataset and split; every record's ``seed`` is the seed of its split (``config seed + run`` for random splits, as
    :attr:`jaxclp.datasets.Splits.seeds`).

    Args:
        dataset, split: the records' names.
        config: the records' ``config`` (:func:`jaxclp.experiments.identity.run_config`).
        runs: ``{run: the record's seed}``.
        data_root: the data root (default ``$JAXCLP_DATA`` or the user cache).
        ds: the :class:`~jaxclp.datasets.Dataset` the records ran on, where it is not a registered one (a user's
            graph, a synthetic one): checked by its arrays' sha256.

    Returns:
        ``{run: fraction}``, or None where the splits cannot be rebuilt and checked.
    """
    if config.get("dataset") != dataset or config.get("split") != split or not runs:
        return None
    if ds is not None:
        if ds.name != dataset or config.get("data") != data_identity(ds, ds):
            return None
    else:
        base, derived = dataset, False
        for suffix in DERIVED:
            if dataset.endswith(suffix):
                base, derived = dataset[: -len(suffix)], True
        if canonical_name(base) not in REGISTRY:
            return None
        try:
            ds = load(base, root=data_root, download=_offline())
        except Exception:  # noqa: BLE001 - missing or unreadable data: the reference stays unknown
            return None
        if not derived and config.get("data") != data_identity(base, ds, data_root):
            return None
    seed = int(config.get("seed", 0))
    try:
        sp = get_splits(ds, split, max(runs) + 1, seed)
    except ValueError:
        return None
    if sp.train.shape[0] <= max(runs):
        return None
    seeds = getattr(sp, "seeds", None)
    for i, s in runs.items():
        expected = seed + i if split != "published" else (None if seeds is None else seeds[i])
        if s is not None and expected is not None and int(s) != int(expected):
            return None
    labels = np.asarray(ds.labels)
    return {i: majority_share(labels, np.asarray(sp.train[i]), np.asarray(sp.test[i])) for i in sorted(runs)}


def for_records(records: Iterable[Mapping], data_root=None, stored: Mapping | None = None,
                compute: bool = True, datasets: Mapping | None = None) -> tuple[dict, dict]:
    """The accuracy chance reference of every (dataset, split) of ``records`` scored by accuracy or carrying it
    (ROC-AUC records' ``test_accuracy``), per run: the header records' own values
    (:func:`recorded_chances`) first; for accuracy records whose headers lack it, ``stored`` (:func:`read_stored`)
    values of their configuration, else (``compute``) :func:`rebuild` from the dataset where it loads offline
    (``datasets``: name -> :class:`~jaxclp.datasets.Dataset` for records of datasets that are not registered).

    Returns:
        ``(chances, stored)``: ``{(dataset, split): {run: fraction}}`` (a run of two configurations that disagree on
        it is left out: unknown), and the ``stored`` mapping with what was rebuilt added (:func:`write_stored`).
    """
    records = list(records)
    chances = recorded_chances(records)
    stored = dict(stored or {})
    merged: dict = {}
    for (d, s, h), (config, runs) in _runs_of(records).items():
        have = chances.get((d, s), {})
        missing = {i: seed for i, seed in runs.items() if i not in have}
        if not missing:
            continue
        values = stored.get((d, s, h))
        if (values is None or any(i not in values for i in missing)) and compute:
            values = rebuild(d, s, config, runs, data_root, (datasets or {}).get(d))
            if values is not None:
                stored[(d, s, h)] = values
        for i in missing:
            if values is not None and i in values:
                cell = merged.setdefault((d, s), {})
                cell[i] = values[i] if cell.get(i, values[i]) == values[i] else None
    for key, cell in merged.items():
        chances.setdefault(key, {}).update({i: v for i, v in cell.items() if v is not None})
    return chances, stored
