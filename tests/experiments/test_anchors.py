"""experiments/anchors.py: record identity across GNNSpec versions and the table's columns (no training)."""

import json

import numpy as np
import pytest

from jaxclp.experiments import anchors
from jaxclp.gnn import GNNSpec

from files import platonov_npz


def _rec(spec: dict, val, test, model="sage", epochs=300, lr=3e-3):
    return {"dataset": "minesweeper", "model": model, "spec": spec, "metric": "roc_auc", "epochs": epochs,
            "lr": lr, "splits": len(test), "val": val, "test": test, "seconds": 1.0}


def test_key_fills_fields_added_later():
    new = GNNSpec("sage", 64, 3, False, True, True, 0.2, heads=4)._asdict()
    old = {k: v for k, v in new.items() if k not in ("ffn", "input_dropout")}
    # an old record had no ffn (= False) and dropped its input features (= input_dropout True)
    assert anchors._key(_rec(old, [0.9], [0.9])) == anchors._key(_rec({**new, "input_dropout": True}, [0.9], [0.9]))
    assert anchors._key(_rec(old, [0.9], [0.9])) != anchors._key(_rec(new, [0.9], [0.9]))
    assert anchors._key(_rec(new, [0.9], [0.9])) != anchors._key(_rec({**new, "ffn": True}, [0.9], [0.9]))


def test_table_selects_on_validation_and_names_the_config():
    base = GNNSpec("sage", 64, 3, False, True, True, 0.2, heads=4)._asdict()
    runs = [_rec(base, [0.91, 0.93], [0.95, 0.95]),  # best test, worse validation: must not be selected
            _rec({**base, "hidden": 256, "ffn": True}, [0.94, 0.94], [0.93, 0.92], epochs=1000, lr=3e-5)]
    md = anchors.table({"runs": runs, "commands": ["python -m jaxclp.experiments.anchors --ffn"]})
    row = next(line for line in md.splitlines() if line.startswith("| minesweeper | sage | 92.50"))
    assert "p=256" in row and "FFN blocks" in row and "1000 epochs" in row
    want = 92.5 - anchors.PUBLISHED["minesweeper"]["sage"][0]
    assert f"{want:+.2f}" in row
    within = abs(want) <= anchors.PUBLISHED["minesweeper"]["sage"][1] + np.std([93.0, 92.0])
    assert f"| {'yes' if within else 'no'} |" in row
    assert md.count("| minesweeper | sage |") == 3  # the selected row + both configs listed
    json.dumps(runs)  # records stay JSON


def test_load_anchor_dataset_from_a_file_follows_platonovs_metric(tmp_path):
    ds = anchors.load_anchor_dataset(str(platonov_npz(tmp_path / "two.npz")))
    assert ds.name == "two" and ds.metric == "roc_auc" and ds.splits.train.shape == (3, 40)
    assert anchors.load_anchor_dataset(str(platonov_npz(tmp_path / "four.npz", classes=4))).metric == "accuracy"
    assert anchors.load_anchor_dataset(str(tmp_path / "two.npz"), metric="accuracy").metric == "accuracy"
    with pytest.raises(ValueError, match="no published splits"):
        anchors.load_anchor_dataset(str(platonov_npz(tmp_path / "nomask.npz", masks=False)))
    with pytest.raises(ValueError, match="metric"):
        anchors.load_anchor_dataset(str(tmp_path / "two.npz"), metric="f1")


def test_run_on_a_users_file_writes_records_and_table(tmp_path):
    """End to end on a graph the registry does not know: every split scored, a row with no published number."""
    f = platonov_npz(tmp_path / "mygraph.npz", classes=3)
    res = anchors.run([str(f)], ["gcn"], [1], splits=2, epochs=3, hidden=8, dropout=0.0, lr=1e-2,
                      variants=["res_ln"], out=tmp_path / "out")
    (r,) = res["runs"]
    assert r["dataset"] == "mygraph" and r["metric"] == "accuracy" and r["splits"] == 2
    assert len(r["val"]) == len(r["test"]) == 2 and all(0.0 <= v <= 1.0 for v in r["val"] + r["test"])
    md = (tmp_path / "out" / "anchors.md").read_text()
    assert "| mygraph | gcn |" in md and "n/a" in md
    # resumable: the same config is not fitted again
    again = anchors.run([str(f)], ["gcn"], [1], splits=2, epochs=3, hidden=8, dropout=0.0, lr=1e-2,
                        variants=["res_ln"], out=tmp_path / "out")
    assert len(again["runs"]) == 1


def test_table_finds_the_published_number_of_a_file_named_like_platonovs_graph():
    spec = GNNSpec("sage", 64, 4, False, True, True, 0.2, heads=4)._asdict()
    rec = {**_rec(spec, [0.8], [0.85]), "dataset": "roman_empire", "metric": "accuracy"}
    row = next(line for line in anchors.table({"runs": [rec]}).splitlines() if line.startswith("| roman_empire | sage"))
    assert f"| {anchors.PUBLISHED['roman-empire']['sage'][0]:.2f} +- " in row


def test_heads_are_part_of_a_gat_config_and_shown():
    """--heads changes GAT's spec (a new config, not a resumed one) and the table names the heads of GAT rows."""
    (s4,) = anchors._specs("gat_sep", [5], 64, 0.2, ["res_ln"])
    (s8,) = anchors._specs("gat_sep", [5], 64, 0.2, ["res_ln"], heads=8)
    assert (s4.heads, s8.heads, s8.sep, s8.num_layers) == (4, 8, True, 5)
    r4, r8 = (_rec(s._asdict(), [0.9], [0.93], model="gat_sep") for s in (s4, s8))
    assert anchors._key(r4) != anchors._key(r8)
    r8["val"] = [0.95]  # higher validation: selected
    md = anchors.table({"runs": [r4, r8]})
    row = next(line for line in md.splitlines() if line.startswith("| minesweeper | gat_sep | 93.00"))
    assert "p=64, 8 heads" in row
    assert "| 64 | 8 | 0.003 |" in md and "| 64 | 4 | 0.003 |" in md
    sage = anchors.table({"runs": [_rec(anchors._specs("sage", [2], 64, 0.2, ["res_ln"])[0]._asdict(), [0.9], [0.9])]})
    assert "heads" not in next(line for line in sage.splitlines() if line.startswith("| minesweeper | sage |"))
    with pytest.raises(SystemExit):
        anchors.main(["--heads", "x"])


def test_resnet_is_blocks_without_message_passing_and_old_records_read_as_mlp():
    from jaxclp.experiments import anchors as A

    specs = A._specs("resnet", [1, 3], 64, 0.2, ["res_ln"], ffn=True)
    assert [(s.conv, s.num_layers, s.residual, s.norm, s.ffn) for s in specs] == [("none", 1, True, True, True),
                                                                                  ("none", 3, True, True, True)]
    assert [(s.conv, s.num_layers) for s in A._specs("mlp", [1, 3], 64, 0.2, ["res_ln"])] == [("gcn", 0)]
    old = {"dataset": "x", "model": "resnet", "spec": specs[0]._replace(conv="gcn", num_layers=0)._asdict(),
           "epochs": 500, "lr": 3e-3, "splits": 2, "val": [0.5, 0.5], "test": [0.4, 0.6], "seconds": 1.0}
    new = {**old, "spec": specs[0]._asdict(), "val": [0.4, 0.4], "test": [0.3, 0.3]}
    assert A._model_of(old) == "mlp" and A._model_of(new) == "resnet"
    text = A.table({"runs": [old, new]})
    assert "| x | mlp | 50.00 +- 10.00 |" in text and "| x | resnet | 30.00 +- 0.00 |" in text
