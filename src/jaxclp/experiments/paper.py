"""The CLP paper's reported numbers (Zhong, Ivanov, Pang, TMLR 2022), shipped as package data.

``jaxclp/data/paper_results.csv`` holds every number of the paper's result tables, one row per
``(table, split, method, dataset)``: ``table`` is ``heterophily`` (main table at the medium split, appendix
table at sparse and dense) or ``homophily`` (WikiCS, DBLP, CS, ACM, Physics at sparse and dense); ``mean`` and
``std`` are percentages as printed (accuracy, or ROC-AUC for Twitch-EN, Twitch-RU and ogbn-proteins); ``OOM``
where the paper reports out-of-memory; ``note`` marks numbers the paper took from Lim et al. 2021. The rows were
extracted mechanically from the paper's LaTeX tables.

These are the paper's claims, not targets: the authors selected configurations on test accuracy, and their
Airports/Wiki loaders misalign labels with nodes (see the datasets README).

Names are mapped to ours: datasets as in :func:`jaxclp.datasets.available` (``CS`` -> ``coauthor-cs``,
``Physics`` -> ``coauthor-physics``, ``USA-Airports`` -> ``usa-airports``, ...), methods as in
:data:`jaxclp.experiments.methods.METHODS`. The paper's CLP row is reported for both our ``clp`` and
``clp_paper``; the † rows (spectral + diffusion features) are the methods ``clp`` / ``cs`` on a dataset named
``<name>+dagger`` (as :mod:`jaxclp.experiments.analyses.dagger` names them). The paper has no CLP* row.
"""

from __future__ import annotations

import csv
import functools
from importlib import resources

from jaxclp.datasets.registry import canonical_name

__all__ = ["paper_number", "paper_entry", "paper_rows", "DATASET_NAMES", "METHOD_NAMES", "DAGGER_SUFFIX"]

DAGGER_SUFFIX = "+dagger"

# paper dataset name -> our dataset name
DATASET_NAMES = {
    "Texas": "texas", "Wisconsin": "wisconsin", "Cornell": "cornell", "Actor": "actor", "Squirrel": "squirrel",
    "Chameleon": "chameleon", "USA-Airports": "usa-airports", "Brazil-Airports": "brazil-airports",
    "Europe-Airports": "europe-airports", "Wiki": "wiki", "deezer-europe": "deezer-europe",
    "Twitch-EN": "twitch-en", "Twitch-RU": "twitch-ru", "ogbn-proteins": "ogbn-proteins", "WikiCS": "wikics",
    "DBLP": "dblp", "CS": "coauthor-cs", "ACM": "acm", "Physics": "coauthor-physics",
}
# our method name -> paper method name (plain features, and on "<name>+dagger")
METHOD_NAMES = {"mlp": "MLP", "link": "LINK", "lp": "LP", "cs": "C&S", "clp": "CLP", "clp_paper": "CLP",
                "gcn": "GCN", "h2gcn": "H2GCN"}
DAGGER_METHOD_NAMES = {"clp": "CLP†", "clp_paper": "CLP†", "cs": "C&S†"}


@functools.lru_cache(maxsize=1)
def paper_rows() -> tuple[dict, ...]:
    """All rows of ``paper_results.csv`` as dicts (keys table, split, method, dataset, mean, std, note)."""
    text = resources.files("jaxclp").joinpath("data/paper_results.csv").read_text(encoding="utf-8")
    return tuple(csv.DictReader(text.splitlines()))


@functools.lru_cache(maxsize=1)
def _index() -> dict:
    out = {}
    for r in paper_rows():
        out[(DATASET_NAMES.get(r["dataset"], r["dataset"]), r["split"], r["method"])] = r
    return out


def paper_entry(dataset: str, split: str, method: str) -> dict | None:
    """The paper's row for one of our (dataset, split, method), or None when the paper has none.

    Args:
        dataset: our dataset name (``"texas"``, ``"coauthor-cs"``, ``"acm+dagger"``, ...).
        split: ``"sparse"``, ``"medium"`` or ``"dense"``.
        method: our method name (``"mlp"``, ``"clp"``, ...).

    Returns:
        The CSV row (``mean`` may be ``"OOM"``), or None.
    """
    dataset = str(dataset)
    names = METHOD_NAMES
    if dataset.endswith(DAGGER_SUFFIX):
        dataset, names = dataset[:-len(DAGGER_SUFFIX)], DAGGER_METHOD_NAMES
    paper_method = names.get(method)
    if paper_method is None:
        return None
    return _index().get((canonical_name(dataset), split, paper_method))


def paper_number(dataset: str, split: str, method: str) -> tuple[float, float] | None:
    """The paper's ``(mean, std)`` in percent for one of our (dataset, split, method).

    Args:
        dataset: our dataset name; ``"<name>+dagger"`` selects the paper's † rows (CLP†, C&S†).
        split: ``"sparse"`` (5/5/90), ``"medium"`` (10/10/80) or ``"dense"`` (48/32/20).
        method: our method name; ``clp`` and ``clp_paper`` both map to the paper's CLP.

    Returns:
        ``(mean, std)``, or None when the paper reports no number (method or split not in its tables, or OOM).

    Example:
        >>> paper_number("coauthor-physics", "sparse", "clp")
        (95.19, 0.15)
    """
    r = paper_entry(dataset, split, method)
    if r is None:
        return None
    try:
        return float(r["mean"]), float(r["std"])
    except ValueError:  # "OOM"
        return None
