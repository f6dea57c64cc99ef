"""Shared pieces of the figure targets: the quick switch, output paths, aggregation, binning, plotting, and a
prediction-exposing mirror of :func:`jaxclp.experiments.runner.run`.

Protocol (every target): hyperparameters (MLP depth, alpha, CLP variant, C&S alphas) are chosen on validation
only by :func:`jaxclp.experiments.candidates.select`; test labels enter only through
:func:`jaxclp.experiments.runner.score_test` and, for analysis quantities that by definition need all labels (node
homophily ``h_v``, the true compatibility matrix), after selection and never inside it.
"""

from __future__ import annotations

import collections
import json
import math
import os
import warnings
from pathlib import Path
from typing import Callable, Iterable, Sequence

import jax
import numpy as np

from jaxclp.experiments import runner
from jaxclp.experiments.identity import config_hash, data_identity, run_config, splits_sha256
from jaxclp.experiments.progress import _progress
from jaxclp.experiments.methods import NEEDS_PRIOR
from jaxclp.experiments.records import (RESULTS_FILE, RecordKey, _repair_tail, append_record, done_results, folder_lock,
                                        header_record, read_records, record_key, replace_stale_default,
                                        stale_records)
from jaxclp.datasets import Dataset, Splits
from jaxclp.train import TrainConfig

QUICK_ENV = "JAXCLP_ANALYSES_QUICK"
#: Module-level switch for the reduced ("quick") configurations: ``JAXCLP_ANALYSES_QUICK=1 jaxclp reproduce fig4``
#: (the ``jaxclp`` CLI has no ``--quick`` flag). Every target also takes ``quick=True/False``, which wins.
QUICK = os.environ.get(QUICK_ENV, "").strip().lower() not in ("", "0", "false", "no")

METHOD_LABELS = {"mlp": "MLP", "link": "LINK", "lp": "LP", "cs": "C&S", "clp_star": "CLP*", "clp": "CLP",
                 "clp_mlp": "CLP (MLP prior)",
                 "clp_paper": "CLP (paper update)", "gcn": "GCN", "h2gcn": "H2GCN"}
METHOD_STYLE = {"mlp": ("tab:gray", "o"), "link": ("tab:olive", "v"), "lp": ("tab:brown", "s"),
                "cs": ("tab:green", "^"), "clp_star": ("tab:orange", "D"), "clp": ("tab:red", "*"),
                "clp_mlp": ("tab:red", "*"),
                "clp_paper": ("tab:pink", "P"), "gcn": ("tab:blue", "x"), "h2gcn": ("tab:purple", "+")}


def resolve_quick(quick: bool | None) -> bool:
    """``quick`` if given, else the module switch :data:`QUICK` (env ``JAXCLP_ANALYSES_QUICK``)."""
    return QUICK if quick is None else bool(quick)


def figures_dir(out) -> Path:
    """``<out>/figures`` (created). The CLI's default ``--out results`` gives ``results/figures``."""
    d = Path(out) / "figures"
    d.mkdir(parents=True, exist_ok=True)
    return d


def records_dir(fig_dir: Path, name: str) -> Path:
    """Runner-format records of a target: ``<fig_dir>/records/<name>/results.jsonl``."""
    d = fig_dir / "records" / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_json(path: Path, obj) -> Path:
    path = Path(path)
    path.write_text(json.dumps(obj, indent=1, sort_keys=False, default=_json_default) + "\n")
    return path


def _json_default(x):
    if isinstance(x, (np.generic, jax.Array, np.ndarray)):
        a = np.asarray(x)
        return a.item() if a.ndim == 0 else a.tolist()
    if isinstance(x, Path):
        return str(x)
    return str(x)


def mean_std(values: Sequence[float]) -> dict:
    """Mean and sample standard deviation (ddof=1; 0 for a single value) of finite values."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], float)
    if v.size == 0:
        return {"mean": None, "std": None, "n": 0}
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0, "n": int(v.size)}


def last_results(path: Path) -> dict[RecordKey, dict]:
    """:class:`~jaxclp.experiments.records.RecordKey` ``(dataset, split, run, method) -> record`` (the last result
    record of each key)."""
    out = {}
    for r in read_records(Path(path)):
        if r.get("type") == "result":
            out[record_key(r)] = r
    return out


def last_extras(path: Path, kind: str) -> dict:
    """``(dataset, split, run) -> record`` for the extra records of type ``kind``."""
    out = {}
    for r in read_records(Path(path)):
        if r.get("type") == kind:
            out[(r["dataset"], r["split"], r["run"])] = r
    return out


def test_scores(results: dict, dataset: str, split: str, method: str, runs: int) -> list[float]:
    """Test scores of runs ``0..runs-1`` that have a record."""
    return [results[(dataset, split, i, method)]["test"] for i in range(runs)
            if (dataset, split, i, method) in results]


# ------------------------------------------------------------------------------------------ binning
def homophily_bins(h, width: float = 0.1) -> np.ndarray:
    """Bin index of each node homophily ``h_v`` on the grid ``{0, width, ..., 1}`` (nearest grid point).

    With ``width = 0.1`` there are 11 bins labelled 0.0, 0.1, ..., 1.0; bin ``b`` holds
    ``(b - 0.5) width <= h_v < (b + 0.5) width`` (bins 0 and 10 are half-width and hold h_v = 0 and h_v = 1
    exactly). Ties at a half-point go up (0.05 -> bin 1). A tiny tolerance absorbs float error (h = 0.35
    computed as 0.34999... -> bin 4).

    Raises:
        ValueError: any h outside [0, 1] or NaN.
    """
    h = np.asarray(h, float)
    if h.size and (np.any(~np.isfinite(h)) or h.min() < -1e-12 or h.max() > 1 + 1e-12):
        raise ValueError("node homophily values must lie in [0, 1]")
    nbins = int(round(1.0 / width)) + 1
    b = np.floor(h / width + 0.5 + 1e-9).astype(int)
    return np.clip(b, 0, nbins - 1)


def bin_centers(width: float = 0.1) -> np.ndarray:
    return np.round(np.arange(int(round(1.0 / width)) + 1) * width, 10)


# ------------------------------------------------------------------------------------------ plotting
def pyplot():
    """matplotlib.pyplot on the Agg backend (no display)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def errorbar(ax, x, mean, std, method: str, label: str | None = None, **kw):
    color, marker = METHOD_STYLE.get(method, (None, "o"))
    x, mean, std = (np.asarray(a, float) for a in (x, mean, std))
    ok = np.isfinite(mean)
    return ax.errorbar(x[ok], mean[ok], yerr=np.nan_to_num(std[ok]), label=label or METHOD_LABELS.get(method, method),
                       color=kw.pop("color", color), marker=kw.pop("marker", marker),
                       markersize=kw.pop("markersize", 4),
                       capsize=kw.pop("capsize", 2), linewidth=kw.pop("linewidth", 1.2), **kw)


def save_figure(fig, path: Path) -> Path:
    fig.savefig(path, dpi=130, bbox_inches="tight")
    pyplot().close(fig)
    return Path(path)


# ------------------------------------------------------------------------------------------ the mirror
def run_mirror(ds: Dataset, split: str, methods: Iterable[str], runs: int, out, *, splits: Splits | None = None,
               seed: int = 0, epochs: int = 500, extra: Callable | None = None, extra_type: str | None = None,
               argv: Sequence[str] | None = None, progress: bool = False, replace_stale: bool | None = None) -> Path:
    """:func:`jaxclp.experiments.runner.run` with the chosen scores exposed to ``extra``.

    Same protocol, step for step: the same splits (``runner.get_splits`` or the given ``splits``), keys
    ``split(key(seed), nruns)``, labels with test labels removed (``visible_labels``), vmapped MLP priors of depths
    ``runner.MLP_DEPTHS``, depth chosen on validation, :data:`jaxclp.experiments.methods.METHODS` candidates, ``select``
    on validation, ``runner.score_test``; the result records are written in the runner's format (so
    ``jaxclp summarize`` reads them). tests/experiments/test_analyses.py checks that the records equal the runner's.

    ``extra(i, ctx, chosen, test_mask)`` is called once per split after selection, with
    ``chosen = {method: (config, val, scores)}``; it returns a dict stored as a record of type ``extra_type``
    (with dataset/split/run added). It may use all labels for ANALYSIS (e.g. h_v), never to choose anything.
    A split is skipped when all its result records (and its extra record) exist: the mirror is resumable, keyed
    on the configuration as the runner is: records carry ``config`` / ``config_hash`` (the runner's
    :func:`~jaxclp.experiments.identity.run_config` of the dataset's arrays, plus a sha256 of ``splits`` when given,
    and ``extra_type``) and each method's ``method_spec`` / ``method_hash``; only records of the current hashes
    count as done. Records of another configuration or method definition (records without hashes, written before
    the mirror had them, included) make it refuse with :class:`~jaxclp.experiments.records.StaleResultsError`, or,
    with ``replace_stale`` (default: the runner's ``replacing_stale()`` context, i.e. ``jaxclp reproduce
    --replace-stale``), move them — extra records of another configuration too — to ``results.stale.jsonl`` and
    recompute. The check-and-run holds the folder lock.

    Unlike the runner, a split whose train or validation nodes hold a single class is NOT refused (at a 1 %
    label rate on a small graph that is a property of the label rate, and the figure should show it): it is
    run, a ``UserWarning`` names it, and its result records carry ``"single_class": {part: labels}``
    (:func:`runner.single_class_parts`; count them with :func:`single_class_runs`).

    Returns:
        The records path.
    """
    methods = list(methods)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / RESULTS_FILE
    replace_stale = replace_stale_default(replace_stale)
    sp = splits if splits is not None else runner.get_splits(ds, split, runs, seed)
    nruns = min(runs, sp.train.shape[0])
    feats, feat_kind = runner.node_features(ds)
    cfg = TrainConfig(epochs=epochs, metric=ds.metric)
    data = data_identity(ds, ds)
    if splits is not None:
        data = data | {"splits_sha256": splits_sha256(sp)}
    config = run_config(ds, split, seed, cfg, feat_kind, data) | {"extra_type": extra_type}
    chash = config_hash(config)
    mhash = {m: runner.method_hash(m) for m in methods}
    with folder_lock(out):
        _repair_tail(path)
        stale_records(path, ds.name, split, methods, config, chash, replace_stale, mhash,
                      extra_types=(extra_type,) if extra_type else ())
        done = done_results(path, chash, mhash)
        done_extra = ({key for key, r in last_extras(path, extra_type).items() if r.get("config_hash") == chash}
                      if extra is not None else set())
        todo = [i for i in range(nruns) if any((ds.name, split, i, m) not in done for m in methods)
                or (extra is not None and (ds.name, split, i) not in done_extra)]
        if not todo:
            return path
        append_record(path, header_record(argv) | {
            "dataset": ds.name, "split": split, "producer": "experiments.analyses.run_mirror", "config": config,
            "config_hash": chash})
        setup = runner.prepare_splits(ds, feats, sp, nruns, todo, seed, cfg,
                                      bool(NEEDS_PRIOR & set(methods)) or extra is not None)
        degenerate = runner.single_class_parts(setup.labels, setup.train, setup.val, todo)
        for i, parts in degenerate.items():
            warnings.warn(f"{ds.name}/{split} split {i}: single-class {parts}; run and flagged in the records "
                          "('single_class'), selection on it is meaningless", stacklevel=2)
        for j, i in enumerate(_progress(todo, progress, f"{ds.name}/{split}")):
            ctx = setup.context(j)
            chosen = {}
            for m in methods:
                if (ds.name, split, i, m) in done and extra is None:
                    continue
                fields, chosen[m] = runner.score_method(ctx, m, setup.labels, setup.test[i], setup.mlp_seconds)
                if (ds.name, split, i, m) in done:
                    continue
                append_record(path, {
                    "type": "result", "dataset": ds.name, "split": split, "run": i,
                    "seed": None if sp.seeds is None else sp.seeds[i]} | fields | {"features": feat_kind}
                    | ({"single_class": degenerate[i]} if i in degenerate else {})
                    | {"config": config, "config_hash": chash, "method_spec": runner.method_spec(m),
                       "method_hash": mhash[m]})
            if extra is not None:
                rec = extra(i, ctx, chosen, setup.test[i])
                append_record(path, {"type": extra_type, "dataset": ds.name, "split": split, "run": i}
                              | rec | {"config_hash": chash})
    return path


def single_class_runs(results: dict, dataset: str, split: str, method: str, runs: int) -> list[int]:
    """The runs among ``range(runs)`` whose result record (in :func:`last_results`) run_mirror flagged
    ``single_class``."""
    return [i for i in range(runs) if "single_class" in results.get((dataset, split, i, method), {})]


def fmt_pm(stats: dict, scale: float = 100.0, digits: int = 1) -> str:
    if stats is None or stats.get("mean") is None:
        return "–"
    return f"{scale * stats['mean']:.{digits}f} ± {scale * stats['std']:.{digits}f} ({stats['n']})"


def group(records: Iterable[dict], key: Callable) -> dict:
    out = collections.defaultdict(list)
    for r in records:
        out[key(r)].append(r)
    return out


def nan_to_none(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x
