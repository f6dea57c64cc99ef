"""``jaxclp predict`` (``jaxclp.experiments.predict``): every labelled node used, every node predicted."""

import csv
import json

import numpy as np
import pytest

from jaxclp.datasets import load_file
from jaxclp.experiments import cli
from jaxclp.experiments.predict import predict, write_predictions


def _two_cliques(tmp_path, label_rows):
    """Two 6-cliques (nodes 10..15 and 20..25) joined by the edge 15-20; labels as given."""
    edges = [(a, b) for c in (10, 20) for a in range(c, c + 6) for b in range(a + 1, c + 6)] + [(15, 20)]
    (tmp_path / "e.csv").write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in edges))
    (tmp_path / "y.csv").write_text("node,label\n" + "".join(f"{n},{v}\n" for n, v in label_rows))
    return tmp_path / "e.csv", tmp_path / "y.csv"


def test_predict_label_propagation_on_two_cliques(tmp_path):
    """Label propagation from 3 labelled nodes per clique gives every unlabelled node its clique's label (by
    hand: a clique's nodes are connected to its labelled nodes only through the clique, the bridge is one edge);
    the CSV lists every node with its role, the user's label values and scores summing to 1."""
    rows = [(n, "ant" if n < 20 else "bee") if n in (10, 11, 12, 21, 22, 23) else (n, "?")
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    with pytest.warns(UserWarning, match="6 of 12 node"):
        ds = load_file(e, labels=y)
    pred = predict(ds, "lp", val_fraction=0.34, seed=0)
    assert list(pred.classes) == ["ant", "bee"]
    got = dict(zip(ds.node_ids.tolist(), pred.classes[pred.predicted].tolist()))
    assert got == {n: "ant" if n < 20 else "bee" for n in got}
    assert pred.val.sum() == 2 and pred.train.sum() == 4 and pred.val_score == 1.0
    np.testing.assert_allclose(pred.scores.sum(axis=1), 1.0)
    path, side = write_predictions(pred, tmp_path / "out" / "p.csv", argv=["jaxclp", "predict"])
    with open(path) as f:
        table = list(csv.DictReader(f))
    assert [r["node"] for r in table] == [str(n) for n in ds.node_ids]
    assert {r["node"]: r["role"] for r in table if r["role"] != "unlabelled"}.keys() == {"10", "11", "12", "21",
                                                                                            "22", "23"}
    assert all(r["label"] == "" for r in table if r["role"] == "unlabelled")
    assert all(r["predicted"] == ("ant" if int(r["node"]) < 20 else "bee") for r in table)
    assert list(table[0])[-2:] == ["score_ant", "score_bee"]
    info = json.loads(side.read_text())
    assert info["method"] == "lp" and info["num_unlabelled"] == 6 and info["classes"] == ["ant", "bee"]
    assert info["params"] == pred.params and "alpha" in info["params"]


def test_cli_predict(tmp_path, capsys):
    rows = [(n, 0 if n < 20 else 1) if n in (10, 11, 12, 21, 22, 23) else (n, -1)
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    out = tmp_path / "pred.csv"
    with pytest.warns(UserWarning):
        assert cli.main(["predict", "--graph", str(e), "--labels", str(y), "--method", "lp", "--val-fraction",
                         "0.34", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert str(out) in printed and "6 unlabelled" in printed and "lp chose" in printed
    with open(out) as f:
        assert [r["predicted"] for r in csv.DictReader(f)] == ["0"] * 6 + ["1"] * 6
    assert json.loads(out.with_suffix(".json").read_text())["argv"][:2] == ["jaxclp", "predict"]
    with pytest.warns(UserWarning):  # the choice by validation ROC-AUC (two classes): the same labels here
        assert cli.main(["predict", "--graph", str(e), "--labels", str(y), "--method", "lp", "--val-fraction",
                         "0.34", "--metric", "roc_auc", "--out", str(out)]) == 0
    assert "validation roc_auc" in capsys.readouterr().out
    with open(out) as f:
        assert [r["predicted"] for r in csv.DictReader(f)] == ["0"] * 6 + ["1"] * 6
    assert cli.main(["predict", "--dataset", "texas", "--labels", str(y), "--weighted", "--out", str(out)]) == 2
    assert "--labels, --weighted only apply to --graph FILE" in capsys.readouterr().err
    # --weighted: a third column; the bridge made light, the cliques heavy, the same labels come out
    e.write_text("".join(f"{ln},{0.01 if ln == '15,20' else 5}\n" for ln in e.read_text().split()[1:]))
    with pytest.warns(UserWarning):
        assert cli.main(["predict", "--graph", str(e), "--labels", str(y), "--weighted", "--method", "lp",
                         "--val-fraction", "0.34", "--out", str(out)]) == 0
    with open(out) as f:
        assert [r["predicted"] for r in csv.DictReader(f)] == ["0"] * 6 + ["1"] * 6


def test_cli_predict_reports_what_it_fits(tmp_path, capsys, monkeypatch):
    """`jaxclp predict` prints the methods' status lines (clp's base predictors) to stderr; --no-progress not."""
    from jaxclp.experiments import methods

    lp = methods.METHODS["lp"]

    def reporting_lp(ctx, *a, **k):
        methods.status("base predictor demo")
        return lp(ctx, *a, **k)

    monkeypatch.setitem(methods.METHODS, "lp", reporting_lp)
    rows = [(n, 0 if n < 20 else 1) if n in (10, 11, 12, 21, 22, 23) else (n, -1)
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    args = ["predict", "--graph", str(e), "--labels", str(y), "--method", "lp", "--val-fraction", "0.34",
            "--out", str(tmp_path / "pred.csv")]
    with pytest.warns(UserWarning):
        assert cli.main(args) == 0
    assert "jaxclp: lp: base predictor demo" in capsys.readouterr().err
    with pytest.warns(UserWarning):
        assert cli.main(args + ["--no-progress"]) == 0
    assert "base predictor demo" not in capsys.readouterr().err


def test_predict_few_labels_one_class_validation(tmp_path, capsys):
    """With 3 labelled nodes per clique and one validation node, validation would hold one class on every
    seed: the hold-out moves a node of the other class over (both cliques still train), so predict runs; where
    no other class can spare a node the error names the user's label and what to do."""
    rows = [(n, "ant" if n < 20 else "bee") if n in (10, 11, 12, 21, 22, 23) else (n, "?")
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    with pytest.warns(UserWarning):
        ds = load_file(e, labels=y)
    for seed in range(3):
        pred = predict(ds, "lp", val_fraction=0.1, seed=seed)
        assert pred.val.sum() == 2 and set(pred.classes[np.asarray(ds.labels)[pred.val]]) == {"ant", "bee"}
        assert pred.classes[pred.predicted].tolist() == ["ant"] * 6 + ["bee"] * 6
    rows = [(n, "ant" if n < 20 else "bee") if n in (10, 11, 12, 21) else (n, "?")
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    with pytest.warns(UserWarning):
        assert cli.main(["predict", "--graph", str(e), "--labels", str(y), "--method", "lp", "--out",
                         str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err
    assert "every validation node has label ['ant']" in err and "label more nodes of another class" in err
