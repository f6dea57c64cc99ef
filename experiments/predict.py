"""``jaxclp predict``: labels for the nodes of a graph that have none, from all the labels it has.

The evaluation commands (``run``, ``reproduce``) hide test labels to score a method; a user with a graph of their
own wants the opposite: every label they have used, and a prediction for every other node. :func:`predict` splits
the labelled nodes once into training and validation nodes (``val_fraction`` of them, uniformly at random, seeded),
builds the same :class:`jaxclp.experiments.methods.Context` as a run's split, lets the method choose its
configuration on the validation nodes exactly as in the tables (e.g. ``clp``: base predictor, variant, alpha), and
returns the chosen configuration's (n, K) scores for every node. :func:`write_predictions` writes them as a CSV
(one row per node: its id, its given label or nothing, its role, the predicted label, one score column per class)
and a JSON sidecar (method, chosen configuration, validation score, counts, command).
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np

from jaxclp.datasets import Dataset
from jaxclp.datasets.splits import Splits, holdout_split
from jaxclp.train import TrainConfig

from jaxclp.experiments import runner
from jaxclp.experiments.methods import METHODS, NEEDS_PRIOR

__all__ = ["Prediction", "predict", "write_predictions"]


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


def _normalize(scores) -> np.ndarray:
    s = np.clip(np.asarray(scores, dtype=np.float64), 0.0, None)
    tot = s.sum(axis=1, keepdims=True)
    return np.where(tot > 0, s / np.where(tot > 0, tot, 1.0), 1.0 / s.shape[1])


def predict(dataset: Dataset, method: str = "clp", *, val_fraction: float = 0.2, seed: int = 0,
            epochs: int = 500) -> Prediction:
    """Fits ``method`` on all labelled nodes of ``dataset`` and predicts every node.

    Args:
        dataset: a :class:`jaxclp.datasets.Dataset` (labels -1 for unlabelled nodes, e.g. from
            :func:`jaxclp.datasets.load_file`).
        method: a name from :data:`jaxclp.experiments.methods.METHODS` (default ``clp``: base predictor,
            variant and alpha chosen on the validation nodes).
        val_fraction: share of the labelled nodes held out for the choice
            (:func:`jaxclp.datasets.holdout_split`: every class keeps a training node; validation holds two
            classes wherever another class can spare a node).
        seed: seed of the hold-out and of every fit.
        epochs: maximal training epochs of the MLP and of the base predictors.

    Returns:
        :class:`Prediction`.

    Raises:
        ValueError: unknown method, bad ``val_fraction``, a training or validation part holding one class only.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(METHODS)}")
    if int(epochs) < 1:
        raise ValueError(f"epochs must be >= 1; got {epochs}")
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
    setup = runner.prepare_splits(ds, feats, sp, 1, [0], int(seed), cfg, method in NEEDS_PRIOR)
    ctx = setup.context(0)
    cands, chosen, val_score = runner.choose(ctx, method)
    scores = _normalize(cands[chosen])
    classes = ds.label_values
    return Prediction(dataset=ds, method=method, scores=scores, predicted=scores.argmax(axis=1), classes=classes,
                      train=train, val=val, params=runner.chosen_params(chosen, method, ctx.mlp_depth),
                      val_score=float(val_score), num_candidates=len(cands))


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
            "argv": list(argv) if argv else None}
    side.write_text(json.dumps(info, indent=1, default=str) + "\n")
    return path, side
