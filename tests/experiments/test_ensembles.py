"""experiments/analyses/ensembles.py (target `prior_ensembles`): averaging clp's base predictors vs choosing one,
cross-fitted on validation halves (no model fits here)."""

import types

import numpy as np
import pytest

from jaxclp.experiments.analyses import crossfit
from jaxclp.experiments.analyses import ensembles as E


def test_choose_each_rule_by_hand():
    sel = np.array([0.60, 0.70, 0.70, 0.50, 0.65])
    assert E.choose("prior", sel) == [1]  # ties go to the earlier prior
    assert E.choose("mean_all", sel) == [0, 1, 2, 3, 4]
    assert E.choose("mean_top3", sel) == [1, 2, 4]
    se = {(1, 0): 0.05, (1, 2): 0.0, (1, 3): 0.3, (1, 4): 0.04}
    assert E.choose("mean_se", sel, lambda i, j: se[(i, j)]) == [1, 2, 3]  # 0.60 < 0.70 - 0.05; 0.65 < 0.66
    with_mean = np.append(sel, 0.71)
    assert E.choose("prior_or_mean", with_mean) == [0, 1, 2, 3, 4]
    assert E.choose("prior_or_mean", np.append(sel, 0.70)) == [1]  # the single prior on a tie
    with pytest.raises(ValueError, match="needs se"):
        E.choose("mean_se", sel)
    with pytest.raises(ValueError, match="unknown rule"):
        E.choose("vote", sel)


def test_ensemble_is_the_row_mean_of_its_members(rng):
    mats = [rng.dirichlet(np.ones(3), 10) for _ in range(4)]
    np.testing.assert_allclose(E.ensemble(mats, [0, 2, 3]), (mats[0] + mats[2] + mats[3]) / 3, rtol=1e-6)
    assert E.ensemble(mats, [1]) is mats[1]


def test_cross_fit_builds_on_one_half_and_scores_the_other(rng):
    """Two priors right on complementary halves of the classes: the mean beats either alone, and every rule's
    held-out score is what numpy computes for its members on the other half."""
    n, k = 90, 3
    labels = rng.integers(0, k, n)
    val = np.zeros(n, bool)
    val[:60] = True
    y_vis = np.where(val, labels, -1)
    onehot = np.eye(k)[labels]
    flat = np.full((n, k), 1.0 / k)
    good0 = np.where((labels < 2)[:, None], 0.6 * onehot + 0.4 * flat, rng.dirichlet(np.ones(k), n))
    good1 = np.where((labels >= 1)[:, None], 0.6 * onehot + 0.4 * flat, rng.dirichlet(np.ones(k), n))
    cands = {"mlp": flat + 1e-3 * rng.random((n, k)), "link": good0, "gcn": good1}
    res = E.cross_fit(cands, y_vis, val, "accuracy", seed=1)
    a, b = crossfit.stratified_halves(y_vis, val, seed=1)
    assert res["names"] == ["mlp", "link", "gcn"] and res["val_sizes"] == [int(a.sum()), int(b.sum())]
    acc = lambda m, mask: float((np.asarray(m).argmax(1) == labels)[mask].mean())  # noqa: E731
    for half, mask in (("a", a), ("b", b)):
        np.testing.assert_allclose(res["prior_scores"][half], [acc(cands[c], mask) for c in res["names"]], rtol=1e-6)
    for fold, (s, h) in zip(res["folds"], ((a, b), (b, a))):
        for rule, r in fold.items():
            mat = np.mean([cands[c] for c in r["members"]], axis=0)
            assert r["heldout"] == pytest.approx(acc(mat, h)) and r["selection"] == pytest.approx(acc(mat, s))
        assert fold["mean_all"]["members"] == ["mlp", "link", "gcn"]
        assert fold["mean_all"]["heldout"] > max(acc(cands[c], h) for c in cands)  # the mean fixes both halves
        assert len(fold["prior"]["members"]) == 1


def test_summarize_pairs_rules_against_prior_and_states_the_criterion():
    def rec(ds, run, prior, mean, val=(10, 10)):
        fold = {r: {"heldout": prior, "selection": 0.0, "members": ["mlp"]} for r in E.RULES}
        fold["mean_all"] = {"heldout": mean, "selection": 0.0, "members": ["mlp", "link"]}
        return {"type": E.RECORD_TYPE, "dataset": ds, "run": run, "metric": "accuracy", "folds": [fold, fold],
                "val_sizes": list(val)}

    big = (E.GATE_NODES // 2, E.GATE_NODES // 2)  # a split of GATE_NODES validation nodes: the gate opens
    recs = [rec("texas", 0, 0.5, 0.6), rec("texas", 1, 0.5, 0.5), rec("chameleon", 0, 0.7, 0.68, big)]
    text = E.summarize(recs)
    assert "| texas | 2 | accuracy | 20 | 50.0 ± 0.0 | 55.0 ± 5.0 |" in text
    assert "+5.0 ± 5.0 (1/1/0)" in text and "-2.0 ± 0.0 (0/0/1)" in text
    assert "`mean_all`: +1.50 on average over 2 datasets, lowest chameleon -2.00: does not meet" in text
    assert "`mean_top3`: +0.00" in text and "`mean_gated`" not in text.split("Criterion")[1]
    # mean_gated: the prior on texas (20 validation nodes), the mean on chameleon (GATE_NODES)
    row = next(line for line in text.splitlines() if line.startswith("| chameleon"))
    assert row.split(" | ")[9] == "68.0 ± 0.0" and row.split(" | ")[14] == "-2.0 ± 0.0 (0/0/1)"
    row = next(line for line in text.splitlines() if line.startswith("| texas"))
    assert row.split(" | ")[9] == "50.0 ± 0.0"
    assert "Confirmation" not in text  # none of its datasets yet
    conf = recs + [rec("squirrel", 0, 0.4, 0.45, big), rec("actor", 0, 0.3, 0.29, big)]
    assert ("actor -1.00, squirrel +5.00; +2.00 on average: hypothesis does not hold (incomplete)."
            in E.summarize(conf))
    conf.append(rec("minesweeper", 0, 0.5, 0.52, big))
    assert "minesweeper +2.00, squirrel +5.00; +2.00 on average: hypothesis HOLDS (> 0 on average and on at least two)." in E.summarize(conf)


def test_prior_ensembles_is_a_reproduce_target_with_its_own_config(monkeypatch, tmp_path, rng):
    """The target is registered; its records are keyed by their own configuration (a selection record's hash
    differs), and a rerun resumes."""
    from jaxclp.datasets import synthetic
    from jaxclp.experiments import records, reproduce, runner

    assert reproduce.TARGETS["prior_ensembles"] is E.prior_ensembles
    ds = synthetic(0.5, 4, num_classes=3, nodes_per_class=20, seed=0, name="g")
    n = ds.num_nodes
    labels = np.asarray(ds.labels)
    val = rng.random(n) < 0.5
    y_vis = np.where(val, labels, -1)
    calls = []

    def fake_priors(name, runs, seed, data_root=None, epochs=500, todo=None):
        for i in todo:
            calls.append(i)
            yield i, ds, types.SimpleNamespace(labels=y_vis, val=val, metric="accuracy"), \
                {"mlp": rng.dirichlet(np.ones(3), n), "link": np.eye(3)[labels] * 0.5 + 1 / 6}

    monkeypatch.setattr(E, "split_priors", fake_priors)
    monkeypatch.setattr(runner, "load", lambda name, root=None: ds)
    E.run_dataset("g", tmp_path, runs=2, progress=False)
    E.run_dataset("g", tmp_path, runs=2, progress=False)
    recs = records.read_records(tmp_path / records.RESULTS_FILE)
    assert calls == [0, 1] and [r["type"] for r in recs] == [E.RECORD_TYPE] * 2
    assert recs[0]["config_hash"] != crossfit.selection_config("g", 0)[2]
    assert recs[0]["config_hash"] == crossfit.selection_config("g", 0, analysis=E.RECORD_TYPE,
                                                               rules=E.RULES)[2]
