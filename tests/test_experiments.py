"""The experiment runner: records, resumability, and that selection never sees test labels."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import jaxclp
from jaxclp.experiments import runner
from jaxclp.experiments.methods import select, visible_labels
from jaxclp.experiments.summary import markdown

METHODS = ("mlp", "link", "lp", "cs", "clp_star", "clp")
DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def _dataset(labels=None):
    ds = jaxclp.datasets.synthetic(h=0.2, avg_degree=5, num_classes=3, nodes_per_class=40, seed=0)
    return ds if labels is None else dataclasses.replace(ds, labels=labels)


def _results(tmp_path, ds, name):
    out = tmp_path / name
    recs = runner.run(ds, "medium", METHODS, runs=2, out=out, epochs=15, progress=False)
    return out, recs


def test_records_resume_and_test_label_isolation(tmp_path):
    ds = _dataset()
    out, recs = _results(tmp_path, ds, "a")
    assert len(recs) == 2 * len(METHODS)
    lines = (out / runner.RESULTS_FILE).read_text().splitlines()
    header = json.loads(lines[0])
    assert header["type"] == "header" and header["jax"] and "git_commit" in header
    for r in recs:
        assert {"dataset", "split", "run", "seed", "method", "metric", "val", "test", "params",
                "seconds"} <= set(r)
        assert 0.0 <= r["test"] <= 1.0 and 0.0 <= r["val"] <= 1.0
    # resumable: nothing left to do, file unchanged
    before = (out / runner.RESULTS_FILE).read_text()
    assert runner.run(ds, "medium", METHODS, runs=2, out=out, epochs=15, progress=False) == []
    assert (out / runner.RESULTS_FILE).read_text() == before
    # scramble only the test labels of both splits: val scores and choices must not move
    sp = runner.get_splits(ds, "medium", 2, 0)
    test_any = sp.test.any(0) & ~(sp.train | sp.val).any(0)
    y = np.asarray(ds.labels).copy()
    y[test_any] = (y[test_any] + 1) % 3
    _, recs2 = _results(tmp_path, _dataset(labels=y), "b")
    key = lambda r: (r["run"], r["method"])
    a, b = {key(r): r for r in recs}, {key(r): r for r in recs2}
    for k in a:
        assert a[k]["params"] == b[k]["params"], k
        assert a[k]["val"] == b[k]["val"], k
    assert any(a[k]["test"] != b[k]["test"] for k in a)
    text = markdown(runner.read_records(out / runner.RESULTS_FILE))
    assert "| syn" in text and "clp" in text and "±" in text


def test_visible_labels_and_select():
    y = np.array([0, 1, 2, 1])
    tr = np.array([True, False, False, False])
    va = np.array([False, True, False, False])
    np.testing.assert_array_equal(visible_labels(y, tr, va), [0, 1, -1, -1])
    cands = {"a": np.eye(3)[[0, 0, 0, 0]], "b": np.eye(3)[[0, 1, 0, 0]]}
    assert select(cands, visible_labels(y, tr, va), va, "accuracy") == ("b", 1.0)


def test_single_class_split_is_a_clear_error(tmp_path):
    """A split whose train (or validation) nodes all share one label is refused before anything is fitted,
    with the split, the class and the way out in the message (minesweeper + seed 0 is such a case)."""
    ds = _dataset()
    y = np.asarray(ds.labels)
    sp = runner.get_splits(ds, "medium", 2, 0)
    rigged = np.where(np.asarray(sp.train[1]) | np.asarray(sp.val[1]), 1, y)
    bad = _dataset(labels=rigged.astype(y.dtype))
    with pytest.raises(ValueError, match=r"split 1: every train node has label \[1\].*--seed"):
        runner.run(bad, "medium", ["mlp"], 2, tmp_path, progress=False, epochs=5)
    assert not (tmp_path / runner.RESULTS_FILE).exists()  # refused before the header record is written
    runner.check_splits(y, np.asarray(sp.train), np.asarray(sp.val), [0, 1], "syn", "medium")  # the real labels pass


def test_single_class_parts_hand_example():
    y = np.array([0, 0, 1, 1, 2])
    tr = np.array([[1, 1, 0, 0, 0], [1, 0, 1, 0, 0], [0, 0, 0, 0, 0]], bool)
    va = np.array([[0, 0, 1, 1, 0], [0, 0, 0, 1, 1], [1, 0, 1, 0, 0]], bool)
    # split 0: train {0}, val {1}; split 1 fine; split 2: empty train, val {0, 1}
    assert runner.single_class_parts(y, tr, va, [0, 1, 2]) == {0: {"train": [0], "validation": [1]},
                                                               2: {"train": []}}
    assert runner.single_class_parts(y, tr, va, [1]) == {}
    with pytest.raises(ValueError, match=r"split 2: every train node has label \[\]"):
        runner.check_splits(y, tr, va, [1, 2], "toy", "medium")


def test_minesweeper_seed0_collision_is_real():
    """The finding behind check_splits, on the published file: the mines are numpy's seed-0 permutation."""
    try:
        ds = jaxclp.datasets.load("minesweeper", root=str(DATA), download=False, cache=False)
    except FileNotFoundError:
        pytest.skip("needs ../shared/datasets")
    y = np.asarray(ds.labels)
    perm = np.random.default_rng(0).permutation(ds.num_nodes)
    assert y.sum() == 2000 and y[perm[:2000]].all()
    sp = runner.get_splits(ds, "medium", 1, 0)
    with pytest.raises(ValueError, match="minesweeper/medium split 0"):
        runner.check_splits(y, np.asarray(sp.train), np.asarray(sp.val), [0], ds.name, "medium")
