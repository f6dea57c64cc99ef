"""experiments/anchors.py: record identity across GNNSpec versions and the table's columns (no training)."""

import json

import numpy as np

from jaxclp.experiments import anchors
from jaxclp.gnn import GNNSpec


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
