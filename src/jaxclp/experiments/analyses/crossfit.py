"""selection: how should ``clp`` choose its base predictor and its variant? Decided on validation nodes only.

The runner's ``clp`` chooses the prior (MLP, LINK, LINKX, GCN, H2GCN, tuned GCN, tuned SAGE) and CLP's variant
(normalization, start, alpha, layer, ...) JOINTLY: the best validation score among ~2100 candidates. On graphs
with few validation nodes that maximum is optimistic (a winner's curse), and a two-stage rule may generalize
better. This target compares selection rules by **2-fold cross-fitting on the validation nodes**: the validation
nodes of each split are halved (stratified by class, fixed seed), a rule chooses on one half and is scored on
the other, then the halves swap. Test labels are never read (the runner removes them before anything here
runs), so the comparison can decide the rule without touching the numbers it will be reported on.

Rules (each chooses one (n, K) score matrix from the split's candidates; ties go to the first, as
:func:`jaxclp.experiments.candidates.select`):

* ``joint``: today's ``clp``: the best of all candidates.
* ``two_stage``: the prior with the best validation score alone, then the best CLP candidate on that prior.
* ``two_stage_or_prior``: as ``two_stage``, but the chosen prior alone is a candidate too (CLP must beat it).
* ``prior``: the best prior alone (no CLP).
* ``mlp_clp``: CLP's variants on the MLP prior only (the runner's ``clp_mlp``).
* ``one_se``: the one-standard-error rule (Hastie, Tibshirani, Friedman, *Elements of Statistical Learning*,
  7.10) in both stages: the first prior in declared order (simplest first: MLP, LINK, LINKX, GCN, H2GCN, tuned
  GCN, tuned SAGE) whose score is within one standard error of the best prior's, the SE being that of their
  paired score difference on the same nodes (:func:`paired_se`); then CLP's best candidate on it only where it
  beats that prior alone by more than one SE of their difference, else the prior alone. A margin against the
  winner's curse: a more complex choice must earn its place by more than the noise of the nodes that choose it.

The candidates are exactly table2's ``clp`` candidates (same splits, keys and priors: :func:`split_candidates`
rebuilds them with the runner's own functions), so ``joint`` on the full validation set reproduces the choice
of table2's ``clp`` revision 1 (its validation score is recorded and checked against ``results/table2``'s
revision-1 records where present).
Held-out halves have half the validation nodes: every rule is noisier than with all of them, the simpler rules
less so; the comparison is between rules under the same noise.

Run: ``jaxclp reproduce selection --datasets texas,...`` (records ``<out>/selection/results.jsonl``, resumable;
``summary.md`` beside it).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxclp.datasets import Dataset
from jaxclp.experiments import runner
from jaxclp.experiments.identity import config_hash, data_identity, run_config
from jaxclp.experiments.progress import _progress, release_compiled
from jaxclp.experiments.records import (RESULTS_FILE, append_record, folder_lock, read_records, replace_stale_default,
                                        stale_records)
from jaxclp.experiments.analyses import common
from jaxclp.experiments.methods import METHODS
from jaxclp.metrics import check_metric, evaluate
from jaxclp.train import TrainConfig

RULES = ("joint", "two_stage", "two_stage_or_prior", "prior", "mlp_clp", "one_se")
DEFAULT_DATASETS = ("texas", "wisconsin", "cornell", "brazil-airports", "europe-airports", "usa-airports",
                    "twitch-ru", "chameleon")
QUICK_DATASETS = ("texas",)
SEED_OFFSET = 7919  # the halving's seed: split seed * SEED_OFFSET + run, independent of the model keys


def stratified_halves(labels_visible: np.ndarray, val_mask: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two disjoint (n,) bool masks covering ``val_mask``: each class's validation nodes shuffled and halved
    (an odd one goes to the first half in turn), so both halves hold every class that has >= 2 nodes."""
    rng = np.random.default_rng(seed)
    a = np.zeros_like(val_mask, dtype=bool)
    b = np.zeros_like(val_mask, dtype=bool)
    flip = 0
    for c in np.unique(labels_visible[val_mask]):
        idx = rng.permutation(np.flatnonzero(val_mask & (labels_visible == c)))
        half = (len(idx) + 1 - flip) // 2 if len(idx) % 2 else len(idx) // 2
        flip ^= len(idx) % 2
        a[idx[:half]] = True
        b[idx[half:]] = True
    return a, b


def _scores(metric: str, mats: list, y: jax.Array, mask: np.ndarray) -> np.ndarray:
    m = jnp.asarray(mask)
    s = np.array([float(evaluate(metric, jnp.asarray(v), y, m)) for v in mats])
    return np.where(np.isfinite(s), s, -np.inf)


def _delong_placements(s: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DeLong's structural components of the AUC of scores ``s`` (m,) for binary labels ``y`` (m,): for each
    positive the share of negatives it outranks (ties one half), for each negative the share of positives that
    outrank it. Their means are both the AUC."""
    pos, neg = np.sort(s[y == 1]), np.sort(s[y == 0])
    v10 = (np.searchsorted(neg, s[y == 1], "left") + np.searchsorted(neg, s[y == 1], "right")) / (2.0 * len(neg))
    v01 = 1.0 - (np.searchsorted(pos, s[y == 0], "left") + np.searchsorted(pos, s[y == 0], "right")) / (2.0 * len(pos))
    return v10, v01


def paired_se(metric: str, a, b, labels: np.ndarray, mask: np.ndarray) -> float:
    """Standard error of ``score(a) - score(b)`` over the nodes of ``mask``, both scored on the same nodes.

    Accuracy: the sample std (ddof 1) of the per-node difference of correctness (argmax, first index on ties,
    as :func:`jaxclp.metrics.accuracy`), over sqrt(nodes). ROC-AUC (binary; column 1 of (n, 2) scores): DeLong,
    DeLong and Clarke-Pearson (1988)'s variance of the difference of two correlated AUCs. 0.0 with fewer than two
    nodes (or of either class, for ROC-AUC).

    Args:
        metric: "accuracy" or "roc_auc".
        a, b: (n, K) scores.
        labels: (n,) int labels (read on ``mask`` only).
        mask: (n,) bool.
    """
    a, b, y, m = np.asarray(a), np.asarray(b), np.asarray(labels), np.asarray(mask, bool)
    if metric == "accuracy":
        d = (a[m].argmax(1) == y[m]).astype(float) - (b[m].argmax(1) == y[m]).astype(float)
        return float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else 0.0
    check_metric(metric)  # roc_auc from here on
    col = (lambda x: x[:, 1] if x.ndim == 2 else x)
    ym = y[m]
    npos, nneg = int((ym == 1).sum()), int((ym == 0).sum())
    if npos < 2 or nneg < 2:
        return 0.0
    (v10a, v01a), (v10b, v01b) = _delong_placements(col(a)[m], ym), _delong_placements(col(b)[m], ym)
    var = np.var(v10a - v10b, ddof=1) / npos + np.var(v01a - v01b, ddof=1) / nneg
    return float(np.sqrt(max(var, 0.0)))


def choose(rule: str, keys: list, sel: np.ndarray, ref_names: list, ref_sel: np.ndarray,
           se=None) -> tuple[str, object]:
    """What ``rule`` picks, given the selection-half scores ``sel`` of the CLP candidates (``keys``, each
    starting ``("base_prior", name)``) and ``ref_sel`` of the priors alone (``ref_names``).

    ``se(x, y)``, needed by ``one_se`` only: the standard error of the score difference of two choices on the
    selection nodes, each ``("clp", index into keys)`` or ``("prior", index into ref_names)``.

    Returns:
        ``("clp", index into keys)`` or ``("prior", index into ref_names)``.
    """
    def best(idx):
        idx = list(idx)
        return idx[int(np.argmax(sel[idx]))]

    if rule == "joint":
        return "clp", best(range(len(keys)))
    if rule == "mlp_clp":
        return "clp", best(i for i, k in enumerate(keys) if k[1] == "mlp")
    p = int(np.argmax(ref_sel))
    if rule == "prior":
        return "prior", p
    if rule == "one_se":
        if se is None:
            raise ValueError("rule 'one_se' needs se(x, y), the standard error of a paired score difference")
        # the first (simplest) prior within one standard error of the best one
        p = next(q for q in range(len(ref_names))
                 if q == p or ref_sel[q] >= ref_sel[p] - se(("prior", p), ("prior", q)))
    on_p = [i for i, k in enumerate(keys) if k[1] == ref_names[p]]
    if not on_p:
        return "prior", p
    c = best(on_p)
    if rule == "one_se":
        return ("clp", c) if sel[c] - ref_sel[p] > se(("clp", c), ("prior", p)) else ("prior", p)
    if rule == "two_stage_or_prior" and ref_sel[p] >= sel[c]:
        return "prior", p
    if rule in ("two_stage", "two_stage_or_prior"):
        return "clp", c
    raise ValueError(f"unknown rule {rule!r}; choose from {RULES}")


def cross_fit(cands, labels_visible: np.ndarray, val_mask: np.ndarray, metric: str, seed: int) -> dict:
    """Both folds of one split: ``{"folds": [{rule: {"heldout", "selection", "prior"}}, ...], ...}``."""
    # CLP's candidates proper: a prior alone (CLP at alpha = 0, in `clp` revision 2's set) is a reference here
    keys = [k for k in cands if tuple(k[2:]) != ("alpha", 0.0)]
    ref_names = list(cands.references)
    mats = [cands[k] for k in keys]
    refs = [cands.references[n] for n in ref_names]
    y = jnp.asarray(labels_visible)
    a, b = stratified_halves(labels_visible, val_mask, seed)
    half_scores = {}
    for name, mask in (("a", a), ("b", b)):
        half_scores[name] = (_scores(metric, mats, y, mask), _scores(metric, refs, y, mask))
    folds = []
    for s_half, h_half, s_mask in (("a", "b", a), ("b", "a", b)):
        sel, ref_sel = half_scores[s_half]
        held, ref_held = half_scores[h_half]

        def se(u, v, s_mask=s_mask):
            mat = (lambda c: mats[c[1]] if c[0] == "clp" else refs[c[1]])
            return paired_se(metric, mat(u), mat(v), labels_visible, s_mask)

        fold = {}
        for rule in RULES:
            kind, i = choose(rule, keys, sel, ref_names, ref_sel, se)
            if kind == "clp":
                fold[rule] = {"selection": float(sel[i]), "heldout": float(held[i]), "prior": keys[i][1]}
            else:
                fold[rule] = {"selection": float(ref_sel[i]), "heldout": float(ref_held[i]), "prior": ref_names[i]}
        folds.append(fold)
    full = _scores(metric, mats, y, val_mask)
    return {"folds": folds, "val_sizes": [int(a.sum()), int(b.sum())], "num_candidates": len(keys),
            "joint_full_val": float(full.max())}


def split_contexts(name, runs: int, seed: int, data_root=None, epochs: int = 500, todo=None):
    """Yields ``(run, ds, ctx)`` for the medium splits ``todo`` (default all): the runner's own loading (``name``:
    a dataset name, or the Dataset already loaded), splits, features, MLP priors and context, as table2's."""
    ds = name if isinstance(name, Dataset) else runner.load(name, root=data_root)
    sp = runner.get_splits(ds, "medium", runs, seed)
    nruns = min(runs, sp.train.shape[0])
    todo = list(range(nruns)) if todo is None else list(todo)
    if not todo:
        return
    feats, _ = runner.node_features(ds)
    setup = runner.prepare_splits(ds, feats, sp, nruns, todo, seed, TrainConfig(epochs=epochs, metric=ds.metric),
                                  True)
    for j, i in enumerate(todo):
        yield i, ds, setup.context(j)


def split_candidates(name, runs: int, seed: int, data_root=None, epochs: int = 500, todo=None):
    """Yields ``(run, ds, ctx, cands)`` of table2's ``clp`` for the splits ``todo`` (default all)
    (:func:`split_contexts`), so the candidates are the table's."""
    for i, ds, ctx in split_contexts(name, runs, seed, data_root, epochs, todo):
        cands = METHODS["clp"](ctx)
        yield i, ds, ctx, (cands.expand() if hasattr(cands, "expand") else cands)  # every prior's grid


def selection_config(name: str, seed: int, data_root=None, epochs: int = 500, analysis: str = "selection",
                     rules=RULES) -> tuple[Dataset, dict, str]:
    """``(dataset, config, config_hash)`` of one dataset's selection records: the runner's
    :func:`~jaxclp.experiments.identity.run_config` of its medium split plus the definition of ``clp`` whose
    candidates are compared (its ``method_hash``), so records of another ``clp`` candidate set are stale; the
    analysis's name and rules too."""
    ds = runner.load(name, root=data_root)
    _, kind = runner.node_features(ds)
    config = run_config(ds, "medium", seed, TrainConfig(epochs=epochs, metric=ds.metric), kind,
                        data_identity(name, ds, data_root))
    config = config | {"analysis": analysis, "clp_method_hash": runner.method_hash("clp"), "rules": list(rules)}
    return ds, config, config_hash(config)


def run_dataset(name: str, out: Path, runs: int = 10, data_root=None, epochs: int = 500, progress: bool = True,
                replace_stale: bool | None = None, *, record_type: str = "selection", rules=RULES,
                candidates=None, fit=None):
    """Appends one record per split of ``name`` not yet in ``out/results.jsonl``.

    Config-keyed like the runner: a split is done only if its record has the current ``config_hash``
    (:func:`selection_config`). Selection records of another configuration or ``clp`` definition (or without a
    hash, written before records had one) make it refuse with :class:`~jaxclp.experiments.records.StaleResultsError`,
    or with ``replace_stale`` (default: :func:`~jaxclp.experiments.records.replacing_stale`, i.e.
    ``--replace-stale``) move them to ``results.stale.jsonl`` and recompute. Holds the folder lock.

    Another cross-fitted analysis (``jaxclp reproduce prior_ensembles``) passes its ``record_type``, ``rules`` (in
    the configuration), ``candidates`` (as :func:`split_candidates`; default it) and ``fit(cands, labels_visible,
    val_mask, metric, seed) -> dict`` (default :func:`cross_fit`).
    """
    candidates = split_candidates if candidates is None else candidates
    fit = cross_fit if fit is None else fit
    seed = runner.BASE_SEED.get(name, 0)
    path = out / RESULTS_FILE
    ds, config, chash = selection_config(name, seed, data_root, epochs, record_type, rules)
    with folder_lock(out):
        stale_records(path, ds.name, "medium", (), config, chash, replace_stale_default(replace_stale),
                      extra_types=(record_type,))
        done = {r["run"] for r in read_records(path) if r.get("type") == record_type
                and r.get("dataset") == ds.name and r.get("config_hash") == chash}
        todo = [i for i in range(runs) if i not in done]
        gen = candidates(ds, runs, seed, data_root, epochs, todo)
        for i, ds, ctx, cands in _progress(gen, progress, f"{record_type} {name}"):
            t0 = time.perf_counter()
            res = fit(cands, np.asarray(ctx.labels), np.asarray(ctx.val), ctx.metric, seed * SEED_OFFSET + i)
            append_record(path, {"type": record_type, "dataset": ds.name, "split": "medium", "run": i,
                                 "seed": seed, "metric": ctx.metric, "seconds": time.perf_counter() - t0}
                                 | res | {"config_hash": chash})
            release_compiled()  # as the runner: compiled executables of many graphs exhaust vm.max_map_count


def paired_cell(d: np.ndarray) -> str:
    """``mean ± std (W/T/L)`` of per-split differences ``d`` (points): population std, splits won / tied
    (within 1e-9) / lost, as this module's and :mod:`~jaxclp.experiments.analyses.ensembles`' summaries print."""
    w, t, l_ = int((d > 1e-9).sum()), int((np.abs(d) <= 1e-9).sum()), int((d < -1e-9).sum())
    return f"{d.mean():+.1f} ± {d.std():.1f} ({w}/{t}/{l_})"


def summarize(records: list[dict], table2: Path | None = None) -> str:
    """The markdown summary: per dataset, each rule's held-out score (mean of the two folds per split, then
    mean +- std over splits) and each rule's paired difference to ``joint`` with wins/ties/losses."""
    by = {}
    for r in records:
        if r.get("type") == "selection":
            by.setdefault(r["dataset"], {})[r["run"]] = r
    t2 = {}
    if table2 is not None and (table2 / RESULTS_FILE).exists():
        for r in read_records(table2 / RESULTS_FILE):
            if (r.get("type") == "result" and r.get("method") == "clp" and r.get("split") == "medium"
                    and r.get("method_spec", {}).get("revision") == 1):  # revision 1 chose the joint maximum
                t2[(r["dataset"], r["run"])] = r["val"]
    head = ["dataset", "splits", "metric"] + [f"{r}" for r in RULES] + \
           [f"{r} - joint (W/T/L)" for r in RULES if r != "joint"] + ["joint = table2 clp rev. 1"]
    rows = []
    totals = {r: [] for r in RULES if r != "joint"}
    for ds in sorted(by):
        runs = [by[ds][i] for i in sorted(by[ds])]
        scale = 100.0
        # a rule added after some records were made (e.g. one_se) has no value in them: "–" for that dataset
        per = {rule: np.array([np.mean([f[rule]["heldout"] for f in r["folds"]]) for r in runs]) * scale
               for rule in RULES if all(rule in f for r in runs for f in r["folds"])}
        row = [ds, len(runs), runs[0]["metric"]]
        row += [f"{per[rule].mean():.1f} ± {per[rule].std():.1f}" if rule in per else "–" for rule in RULES]
        for rule in RULES:
            if rule == "joint":
                continue
            if rule not in per:
                row.append("–")
                continue
            d = per[rule] - per["joint"]
            totals[rule].append(d.mean())
            row.append(paired_cell(d))
        match = [abs(t2[(ds, r["run"])] - r["joint_full_val"]) < 1e-9 for r in runs if (ds, r["run"]) in t2]
        row.append(f"{sum(match)}/{len(match)}" if match else "-")
        rows.append(row)
    lines = ["## Selection rules for `clp`, cross-fitted on validation nodes (medium split, 10/10/80)", "",
             "Each split's validation nodes are halved (stratified by class); a rule chooses on one half and is "
             "scored on the other, then the halves swap; the cell is the mean of the two held-out scores, mean ± "
             "std over splits (accuracy or ROC-AUC, %). Differences are paired per split against `joint` (today's "
             "`clp`); W/T/L counts splits. No test label is read. Rules: see "
             "`experiments/analyses/crossfit.py`. Last column: splits where `joint` on the whole validation set "
             "has the validation score table2 recorded for `clp` revision 1 (which chose the joint maximum): the "
             "candidates are the table's.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    if rows:
        lines += ["", "Mean over datasets of the per-dataset mean difference to `joint`: " +
                  ", ".join(f"{r} {np.mean(v):+.2f}" for r, v in totals.items() if v) + "."]
    return "\n".join(lines) + "\n"


def selection(out: Path, *, runs=10, datasets=None, data_root=None, argv=None, quick: bool | None = None) -> list:
    """The ``selection`` target: records and summary in ``<out>/selection/``."""
    quick = common.QUICK if quick is None else quick
    d = Path(out) / ("selection_quick" if quick else "selection")
    d.mkdir(parents=True, exist_ok=True)
    names = datasets or (QUICK_DATASETS if quick else DEFAULT_DATASETS)
    for name in names:
        run_dataset(name, d, runs=2 if quick else runs, data_root=data_root, epochs=20 if quick else 500)
    summary = d / "summary.md"
    summary.write_text(summarize(read_records(d / RESULTS_FILE), Path(out) / "table2") +
                       f"\nCommand: `{' '.join(argv) if argv else 'jaxclp reproduce selection'}`.\n")
    return [summary]


if __name__ == "__main__":  # pragma: no cover
    import sys

    print(json.dumps([str(p) for p in selection(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("results"))]))
