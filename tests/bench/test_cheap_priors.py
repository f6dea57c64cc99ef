"""benchmarks.cheap_priors: the leave-one-grid-out replay on hand-made clp records."""

from __future__ import annotations

import json

import pytest

from benchmarks import cheap_priors as cp


def _record(run, chosen, test, refs, dataset="g", split="medium"):
    return {"type": "result", "method": "clp", "dataset": dataset, "split": split, "run": run, "test": test,
            "params": {"base_prior": chosen, "alpha": 0.5},
            "references": {n: {"val": v, "test": t} for n, (v, t) in refs.items()}}


def test_leave_one_out_replays_the_choice_without_the_grid(tmp_path):
    path = tmp_path / "results.jsonl"
    # split 0 chose sage_tuned: without it gcn alone (val 0.70, tied with gcn_tuned: first in the search's order)
    recs = [
        _record(0, "sage_tuned", 0.80, {"mlp": (0.60, 0.55), "gcn": (0.70, 0.66), "gcn_tuned": (0.70, 0.75),
                                         "sage_tuned": (0.74, 0.78)}),
        # split 1 chose the MLP: its record stands either way
        _record(1, "mlp", 0.62, {"mlp": (0.72, 0.61), "gcn": (0.70, 0.64), "gcn_tuned": (0.71, 0.60),
                                  "sage_tuned": (0.69, 0.59)}),
        {"type": "result", "method": "mlp", "dataset": "g", "split": "medium", "run": 0, "test": 0.1}]
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    rows = cp.leave_one_out(path, "sage_tuned")
    (key, row), = rows.items()
    assert key == "g/medium" and row["runs"] == 2 and row["chosen"] == 1
    assert row["val_change"] == pytest.approx(100 * (0.70 - 0.74) / 2)
    assert row["test_change"] == pytest.approx(100 * (0.66 - 0.80) / 2)
    assert row["clp_std"] == pytest.approx(100 * 0.09)  # population std of 0.80 and 0.62
    gcn = cp.leave_one_out(path, "gcn_tuned")["g/medium"]
    assert gcn["chosen"] == 0 and gcn["test_change"] == 0.0 and gcn["val_change"] == pytest.approx(0.0)
    v = cp.verdict({"table2": rows})
    assert v == {"failed": ["table2: g/medium"], "num_failed": 1, "adopted": False}  # -2 points < -MAX_VAL_DROP
    assert cp.verdict({"table2": {"g/medium": gcn}})["adopted"]
