"""``jaxclp predict``: labels for the nodes of a graph that have none, from all the labels it has.

The evaluation commands (``run``, ``reproduce``) hide test labels to score a method; a user with a graph of their
own wants the opposite: every label they have used, and a prediction for every other node. :func:`predict` splits
the labelled nodes once into training and validation nodes (``val_fraction`` of them, uniformly at random, seeded),
builds the same :class:`jaxclp.experiments.candidates.Context` as a run's split, lets the method choose its
configuration on the validation nodes exactly as in the tables (e.g. ``clp``: base predictor, variant, alpha), and
returns the chosen configuration's (n, K) scores for every node. Where the chosen configuration's last step propagates
labels (``clp``, C&S, LP: :data:`jaxclp.experiments.refit.REFIT_METHODS`), that step is then recomputed from every
labelled node, training and validation (scikit-learn's ``refit``; PyG's C&S example feeds both to its correct and
smooth steps); the base predictor stays as it was trained. The validation score is the one of the choice, before
that refit. :func:`write_predictions` writes them as a CSV
(one row per node: its id, its given label or nothing, its role, the predicted label, one score column per class)
and a JSON sidecar (method, chosen configuration, validation score, counts, command).
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import json
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from jaxclp.datasets import Dataset
from jaxclp.metrics import evaluate
from jaxclp.datasets.splits import Splits, holdout_split
from jaxclp.search import CLP_PRIOR_CANDIDATES
from jaxclp.train import TrainConfig

from jaxclp.experiments import runner
from jaxclp.experiments.chance import chance_label, chance_score
from jaxclp.experiments.methods import METHODS, NEEDS_PRIOR
from jaxclp.experiments.records import RESULTS_FILE, read_records
from jaxclp.experiments.refit import REFIT_METHODS, Refit, refit_candidate

__all__ = ["Prediction", "predict", "previous_priors", "write_predictions"]


@dataclasses.dataclass(frozen=True)
class Prediction:
    """What :func:`predict` returns.

    Attributes:
        dataset: the :class:`jaxclp.datasets.Dataset`.
        method: the method name.
        scores: (n, K) float64 class scores of the chosen configuration, rows normalized to sum to 1 (negative
            scores clipped to 0; a row without mass is uniform).
        predicted: (n,) int class codes (argmax of ``scores``).
        classes: (K,) the user's label value of each class code.
        train: (n,) bool training nodes.
        val: (n,) bool validation nodes (the choice is made on them).
        params: the chosen configuration (as in a run's records).
        val_score: its validation score (the dataset's metric, 0-1).
        num_candidates: how many configurations the method compared.
        base_prior: for ``clp``, the base predictor validation chose (None for other methods).
        prior_val_score: for ``clp``, that predictor's own validation score (CLP at alpha = 0), else None.
        skipped: what the method left out for time (``time_limit``), in its order: MLP depths and training epochs,
            base predictors, kinds of CLP candidate, and ``"refit"`` where the limit had run out before it.
        refit: True where ``scores`` were recomputed from every labelled node (training + validation) after the
            choice (:func:`jaxclp.experiments.refit.refit_candidate`); False: the chosen candidate as computed
            from the training nodes (a trained model's scores, ``clp`` at alpha = 0, or ``refit=False``).
        refit_refused: True where the refit was asked for but the chosen alpha is past the convergence bound of
            the operator built from every labelled node (the "none" normalization: more labelled rows can raise its
            spectral radius), so the training-only propagation was kept.
        chance: the chance reference of ``val_score`` (0-1; :mod:`jaxclp.experiments.chance`): for accuracy, always
            answering the majority class of the training labels, scored on the validation nodes; 0.5 for ROC-AUC.
            None where unknown.
    """

    dataset: Dataset
    method: str
    scores: np.ndarray
    predicted: np.ndarray
    classes: np.ndarray
    train: np.ndarray
    val: np.ndarray
    params: dict
    val_score: float
    num_candidates: int
    base_prior: str | None = None
    prior_val_score: float | None = None
    skipped: tuple = ()
    refit: bool = False
    refit_refused: bool = False
    chance: float | None = None

    def explain(self) -> str:
        """One sentence for a person: which predictor produced the labels and what CLP's propagation added on
        validation, e.g. ``"labels from LINK alone (validation accuracy 0.81): CLP's propagation did not beat it on
        validation, so alpha = 0"`` or ``"labels from CLP's propagation on top of the MLP: validation accuracy 0.62
        -> 0.71 (alpha 0.9)"``, then how far the validation score is above chance (``"; +0.16 over chance (always
        the majority class: 0.55)"``); what was left out for time is named."""
        metric = {"accuracy": "accuracy", "roc_auc": "ROC-AUC"}.get(self.dataset.metric, self.dataset.metric)
        nval = int(np.asarray(self.val).sum())
        labelled = int(np.asarray(self.train).sum()) + nval
        refit = (f"; final labels propagated from all {labelled} labelled nodes" if self.refit else
                 f"; final labels propagated from the training nodes only: alpha {self.params.get('alpha')} is past "
                 f"the convergence bound of the operator built from all {labelled} labelled nodes"
                 if self.refit_refused else "")
        skipped = self._over_chance() + refit + (f"; left out for the time limit: {', '.join(self.skipped)}"
                                                 if self.skipped else "")
        if self.base_prior is None:
            return (f"labels from {self.method} (validation {metric} {self.val_score:.2f} on {nval} nodes, "
                    f"{self.num_candidates} configuration(s) compared){skipped}")
        name = _PRIOR_NAMES.get(self.base_prior, self.base_prior)
        alpha = self.params.get("alpha")
        if alpha is None or float(alpha) == 0.0:
            return (f"labels from {name} alone (validation {metric} {self.prior_val_score:.2f} on {nval} nodes): "
                    f"CLP's propagation did not beat it on validation, so alpha = 0{skipped}")
        return (f"labels from CLP's propagation on top of {name}: validation {metric} {self.prior_val_score:.2f} -> "
                f"{self.val_score:.2f} on {nval} nodes (alpha {float(alpha):g}){skipped}")

    def _over_chance(self) -> str:
        """``"; +0.16 over chance (always the majority class: 0.55)"``, or that the validation score is not above
        it; empty where the chance reference is unknown."""
        if self.chance is None:
            return ""
        what = chance_label(self.dataset.metric).removeprefix("chance (").removesuffix(")")
        gap = self.val_score - self.chance
        if gap > 0:
            return f"; {gap:+.2f} over chance ({what}: {self.chance:.2f} on the validation nodes)"
        return f"; NOT above chance ({what}: {self.chance:.2f} on the validation nodes)"


_PRIOR_NAMES = {"mlp": "the MLP", "link": "LINK", "linkx": "LINKX", "gcn": "GCN", "h2gcn": "H2GCN",
                "gcn_tuned": "the tuned GCN", "sage_tuned": "the tuned GraphSAGE", "gat_tuned": "the tuned GAT",
                "sage": "GraphSAGE", "gat": "GAT"}


def _normalize(scores) -> np.ndarray:
    s = np.clip(np.asarray(scores, dtype=np.float64), 0.0, None)
    tot = s.sum(axis=1, keepdims=True)
    return np.where(tot > 0, s / np.where(tot > 0, tot, 1.0), 1.0 / s.shape[1])


def predict(dataset: Dataset, method: str = "clp", *, val_fraction: float = 0.2, seed: int = 0,
            epochs: int = 500, priors=None, time_limit: float | None = None, refit: bool = True,
            shape_buckets: bool = False) -> Prediction:
    """Fits ``method`` on all labelled nodes of ``dataset`` and predicts every node.

    Args:
        dataset: a :class:`jaxclp.datasets.Dataset` (labels -1 for unlabelled nodes, e.g. from
            :func:`jaxclp.datasets.load_file`).
        method: a name from :data:`jaxclp.experiments.methods.METHODS` (default ``clp``: base predictor,
            variant and alpha chosen on the validation nodes).
        val_fraction: share of the labelled nodes held out for the choice
            (:func:`jaxclp.datasets.holdout_split`: stratified by class, every class keeps a training node;
            validation holds two classes wherever another class can spare a node).
        seed: seed of the hold-out and of every fit.
        epochs: maximal training epochs of the MLP and of the base predictors.
        priors: the base predictors ``clp`` may try (names of :data:`jaxclp.priors.PRIORS` or ``"mlp"``; a comma
            string or a sequence); None: its own list.
        time_limit: seconds ``clp`` may spend (>= 0): the MLP prior (its depths and epochs within a quarter of it),
            its base predictors, then CLP's candidates on the chosen one (the first closed-form variant always;
            :attr:`jaxclp.experiments.candidates.Context.time_limit`), and the refit if time is left; None: no limit.
        refit: after the choice, recompute the chosen configuration's propagation from every labelled node
            (:func:`jaxclp.experiments.refit.refit_candidate`); False: keep the scores propagated from the
            training nodes (what the validation score measured). Under ``time_limit`` only while time is left
            (else ``skipped`` names it).
        shape_buckets: fit the models on inputs padded to shape buckets (:mod:`jaxclp.buckets`: a graph of
            similar size reuses the compiled programs; the same computation up to rounding).

    Returns:
        :class:`Prediction`.

    Raises:
        ValueError: unknown method, bad ``val_fraction``, a training or validation part holding one class only.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(METHODS)}")
    if int(epochs) < 1:
        raise ValueError(f"epochs must be >= 1; got {epochs}")
    priors, time_limit = runner.check_priors(priors), runner.check_time_limit(time_limit)
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    ds = dataset
    labels = np.asarray(ds.labels)
    train, val = holdout_split(labels, val_fraction, seed)
    runner.check_splits(labels, train[None], val[None], [0], ds.name, f"predict (val_fraction {val_fraction})",
                        ds.label_values, "Every other class has a single labelled node, which must train: "
                        "label more nodes of another class.")
    sp = Splits(train=train[None], val=val[None], test=np.zeros((1, labels.size), bool), seeds=[int(seed)],
                name="predict")
    feats, _ = runner.node_features(ds)
    cfg = TrainConfig(epochs=int(epochs), metric=ds.metric)
    setup = runner.prepare_splits(ds, feats, sp, 1, [0], int(seed), cfg, method in NEEDS_PRIOR, priors, time_limit,
                                  shape_buckets)
    ctx = setup.context(0)
    cands, chosen, val_score = runner.choose(ctx, method)
    skipped = runner.left_out(ctx, cands, method)
    late = refit and method in REFIT_METHODS and deadline is not None and time.perf_counter() > deadline
    if late:
        skipped.append("refit")
    refitted = refit_candidate(ctx, method, chosen, cands, train | val) if refit and not late else Refit(None)
    params = runner.chosen_params(chosen, method, ctx.mlp_depth)
    scores = _normalize(cands[chosen] if refitted.scores is None else refitted.scores)
    classes = ds.label_values
    base, base_score = params.get("base_prior"), None
    refs = getattr(cands, "references", None) or {}
    if base is not None and base in refs:  # clp: the chosen predictor alone, scored as the choice was
        base_score = float(evaluate(ds.metric, jnp.asarray(refs[base]), jnp.asarray(ctx.labels), jnp.asarray(val)))
    return Prediction(dataset=ds, method=method, scores=scores, predicted=scores.argmax(axis=1), classes=classes,
                      train=train, val=val, params=params, val_score=float(val_score), num_candidates=len(cands),
                      base_prior=base if base_score is not None else None, prior_val_score=base_score,
                      skipped=tuple(skipped), refit=refitted.scores is not None,
                      refit_refused=refitted.refused, chance=chance_score(ds.metric, labels, train, val))


def previous_priors(path, data: dict) -> dict[str, int]:
    """The base predictors ``clp`` chose in an earlier run's records of the same data (``jaxclp run --out DIR``):
    ``name -> the number of its splits that chose it``, in :data:`jaxclp.search.CLP_PRIOR_CANDIDATES`' order (cheap
    first, as the search fits them; other names after, alphabetically).

    ``predict(..., priors=list(chosen))`` then fits only those: the run's choices, made on its validation nodes,
    narrow the search (``jaxclp predict --previous DIR``), so a prediction after a run does not search again.

    Args:
        path: the run's ``--out`` folder or its ``results.jsonl``.
        data: the identity of the graph to predict (:func:`jaxclp.experiments.identity.data_identity`): only
            ``clp`` records whose configuration holds the same data count.

    Raises:
        ValueError: no records file at ``path``, or no ``clp`` record of this data in it (naming what it holds).
    """
    path = Path(path)
    file = path / RESULTS_FILE if path.is_dir() else path
    if not file.is_file():
        raise ValueError(f"--previous {path}: no {RESULTS_FILE} there; name the --out folder of a `jaxclp run` "
                         f"on this graph with --methods including clp (or its {RESULTS_FILE})")
    clp = [r for r in read_records(file) if r.get("type") == "result" and r.get("method") == "clp"]
    same = [r for r in clp if (r.get("config") or {}).get("data") == data and (r.get("params") or {}).get("base_prior")]
    if not same:
        held = sorted({str(r.get("dataset")) for r in clp})
        raise ValueError(f"--previous {path}: no clp record of this graph in {file} ("
                         + (f"its clp records are of other data: {', '.join(held)}" if held else "it holds no clp record")
                         + "); run `jaxclp run` with --methods including clp on this graph and labels first, or drop "
                           "--previous")
    counts = collections.Counter(r["params"]["base_prior"] for r in same)
    order = {name: i for i, name in enumerate(CLP_PRIOR_CANDIDATES)}
    return dict(sorted(counts.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def write_predictions(pred: Prediction, path, argv=None) -> tuple[Path, Path]:
    """Writes ``pred`` as ``path`` (CSV) and ``path`` with suffix ``.json`` (the sidecar).

    CSV columns: ``node`` (the id of the input files, or the index), ``label`` (the given label; empty for an
    unlabelled node), ``role`` (``train``, ``val`` or ``unlabelled``), ``predicted`` (a label value),
    ``score_<label value>`` per class (rows sum to 1).

    Returns:
        ``(csv_path, json_path)``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds, labels = pred.dataset, np.asarray(pred.dataset.labels)
    ids = np.asarray(ds.node_ids) if ds.node_ids is not None else np.arange(labels.size)
    role = np.where(pred.train, "train", np.where(pred.val, "val", "unlabelled"))
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["node", "label", "role", "predicted"] + [f"score_{c}" for c in pred.classes])
        for i in range(labels.size):
            given = "" if labels[i] < 0 else pred.classes[labels[i]]
            w.writerow([ids[i], given, role[i], pred.classes[pred.predicted[i]]]
                       + [f"{v:.6g}" for v in pred.scores[i]])
    side = path.with_suffix(".json")
    info = {"dataset": ds.name, "method": pred.method, "metric": ds.metric, "val_score": pred.val_score,
            "params": pred.params, "num_candidates": pred.num_candidates, "num_nodes": int(labels.size),
            "num_train": int(pred.train.sum()), "num_val": int(pred.val.sum()),
            "num_unlabelled": int((labels < 0).sum()), "classes": [c.item() if hasattr(c, "item") else c
                                                                   for c in pred.classes],
            "refit": pred.refit, "refit_refused": pred.refit_refused, "chance_val_score": pred.chance,
            "explanation": pred.explain(),
            "argv": list(argv) if argv else None}
    if pred.base_prior is not None:
        info |= {"base_prior": pred.base_prior, "base_prior_val_score": pred.prior_val_score}
    if pred.skipped:
        info["skipped"] = list(pred.skipped)
    side.write_text(json.dumps(info, indent=1, default=str) + "\n")
    return path, side
