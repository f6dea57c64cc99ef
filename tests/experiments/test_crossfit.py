"""experiments/analyses/crossfit.py (target `selection`): the cross-fitted comparison of clp's selection rules (no model fits)."""

import numpy as np
import pytest

from jaxclp.experiments.analyses import crossfit as S
from jaxclp.experiments.candidates import Candidates


def test_stratified_halves_partition_validation_by_class(rng):
    n = 200
    labels = rng.integers(0, 3, n)
    val = rng.random(n) < 0.4
    a, b = S.stratified_halves(labels, val, seed=3)
    assert not np.any(a & b)
    np.testing.assert_array_equal(a | b, val)
    for c in range(3):
        na, nb = int((a & (labels == c)).sum()), int((b & (labels == c)).sum())
        assert abs(na - nb) <= 1
    # odd classes alternate which half gets the extra node, so the halves differ by at most one node overall
    assert abs(int(a.sum()) - int(b.sum())) <= 1
    a2, _ = S.stratified_halves(labels, val, seed=3)
    np.testing.assert_array_equal(a, a2)  # fixed seed
    assert not np.array_equal(a, S.stratified_halves(labels, val, seed=4)[0])


def test_choose_each_rule_by_hand():
    keys = [("base_prior", "mlp", "a", 0.1), ("base_prior", "mlp", "a", 0.5), ("base_prior", "link", "a", 0.1),
            ("base_prior", "link", "a", 0.5)]
    sel = np.array([0.60, 0.70, 0.80, 0.65])
    ref_names = ["mlp", "link"]
    ref_sel = np.array([0.75, 0.50])  # mlp alone is the better prior, link + CLP the best candidate
    assert S.choose("joint", keys, sel, ref_names, ref_sel) == ("clp", 2)
    assert S.choose("two_stage", keys, sel, ref_names, ref_sel) == ("clp", 1)
    assert S.choose("two_stage_or_prior", keys, sel, ref_names, ref_sel) == ("prior", 0)  # 0.75 >= 0.70
    assert S.choose("prior", keys, sel, ref_names, ref_sel) == ("prior", 0)
    assert S.choose("mlp_clp", keys, sel, ref_names, ref_sel) == ("clp", 1)
    # ties go to the first candidate, as candidates.select
    assert S.choose("joint", keys, np.array([0.7, 0.7, 0.7, 0.7]), ref_names, ref_sel) == ("clp", 0)
    ref_sel2 = np.array([0.75, 0.60])
    assert S.choose("two_stage_or_prior", keys, np.array([0.6, 0.8, 0.1, 0.1]), ref_names, ref_sel2) == ("clp", 1)
    with pytest.raises(ValueError, match="unknown rule"):
        S.choose("best", keys, sel, ref_names, ref_sel)


def test_cross_fit_scores_the_other_half(rng):
    n, k = 60, 3
    labels = rng.integers(0, k, n)
    val = np.zeros(n, bool)
    val[:30] = True
    y_vis = np.where(val, labels, -1)  # what the runner hands over: no label outside train/val here
    onehot = np.eye(k)[labels]
    noise = rng.random((n, k))
    cands = Candidates({("base_prior", "mlp", 1): noise, ("base_prior", "link", 1): onehot + 0.1 * noise},
                       references={"mlp": noise, "link": 0.5 * onehot + noise})
    res = S.cross_fit(cands, y_vis, val, "accuracy", seed=0)
    a, b = S.stratified_halves(y_vis, val, seed=0)
    assert res["val_sizes"] == [int(a.sum()), int(b.sum())]
    assert res["num_candidates"] == 2 and res["joint_full_val"] == 1.0
    for fold, held in zip(res["folds"], (b, a)):
        assert fold["joint"]["prior"] == "link" and fold["joint"]["heldout"] == 1.0
        assert fold["mlp_clp"]["prior"] == "mlp"
        assert fold["one_se"]["prior"] == "link"  # mlp (random scores) is far more than one SE below link
        expect = float((noise.argmax(1) == labels)[held].mean())
        assert fold["mlp_clp"]["heldout"] == pytest.approx(expect)


def test_summarize_pairs_rules_against_joint():
    def rec(run, joint, two):
        fold = {r: {"heldout": joint, "selection": 0.0, "prior": "mlp"} for r in S.RULES}
        fold["two_stage"] = {"heldout": two, "selection": 0.0, "prior": "mlp"}
        return {"type": "selection", "dataset": "g", "run": run, "metric": "accuracy", "folds": [fold, fold],
                "joint_full_val": 0.5}

    md = S.summarize([rec(0, 0.50, 0.60), rec(1, 0.50, 0.40), rec(2, 0.50, 0.70)])
    row = next(line for line in md.splitlines() if line.startswith("| g |"))
    assert "+6.7 ± 12.5 (2/0/1)" in row  # (10 - 10 + 20) / 3, population std of (10, -10, 20)
    assert "+0.0 ± 0.0 (0/3/0)" in row  # prior == joint everywhere


def test_selection_is_a_reproduce_target():
    from jaxclp.experiments import reproduce

    assert reproduce.TARGETS["selection"] is S.selection


def test_clp_rule_is_the_cross_fitted_two_stage_or_prior(rng):
    """candidates.select_prior_first (clp revision 2) picks what crossfit's two_stage_or_prior picks, on random
    candidates with many ties, and returns the prior alone under its alpha = 0 key."""
    import jax.numpy as jnp

    from jaxclp.experiments.candidates import select_prior_first
    from jaxclp.metrics import evaluate

    n, k = 40, 3
    labels = rng.integers(0, k, n)
    val = rng.random(n) < 0.5
    y_vis = np.where(val, labels, -1)
    for trial in range(20):
        names = ["mlp", "link", "gcn"]
        refs = {nm: rng.random((n, k)) for nm in names}
        cands = Candidates(references=refs)
        for nm in names:
            cands[("base_prior", nm, "alpha", 0.0)] = refs[nm]
            for a in (0.1, 0.5, 0.9):
                cands[("base_prior", nm, "alpha", a)] = rng.random((n, k))
        cfg, val_score = select_prior_first(cands, y_vis, val, "accuracy")
        keys = [key for key in cands if key[2:] != ("alpha", 0.0)]
        score = lambda m: float(evaluate("accuracy", jnp.asarray(m), jnp.asarray(y_vis), jnp.asarray(val)))  # noqa: E731
        sel = np.array([score(cands[key]) for key in keys])
        ref_sel = np.array([score(refs[nm]) for nm in names])
        kind, i = S.choose("two_stage_or_prior", keys, sel, names, ref_sel)
        expect = ("base_prior", names[i], "alpha", 0.0) if kind == "prior" else keys[i]
        assert cfg == expect, trial
        assert val_score == pytest.approx(score(cands[cfg]))


def test_selection_records_are_config_keyed(tmp_path, monkeypatch, rng):
    """run_dataset resumes only records of the current configuration and clp definition: a record without a
    hash (written before records had one) makes it refuse; replace_stale moves it to results.stale.jsonl and
    recomputes that split; a changed clp definition makes every record stale."""
    import json
    import types

    from jaxclp.datasets import synthetic
    from jaxclp.experiments import records, runner

    ds = synthetic(0.5, 4, num_classes=3, nodes_per_class=20, seed=0, name="g")
    n, k = ds.num_nodes, 3
    labels = np.asarray(ds.labels)
    val = rng.random(n) < 0.5
    y_vis = np.where(val, labels, -1)
    onehot = np.eye(k)[labels]
    calls = []

    def fake_candidates(name, runs, seed, data_root=None, epochs=500, todo=None):
        for i in todo:
            calls.append(i)
            noise = np.random.default_rng(i).random((n, k))
            cands = Candidates({("base_prior", "mlp", 1): noise, ("base_prior", "link", 1): onehot + noise},
                               references={"mlp": noise, "link": onehot + noise})
            yield i, ds, types.SimpleNamespace(labels=y_vis, val=val, metric="accuracy"), cands

    monkeypatch.setattr(S, "split_candidates", fake_candidates)
    monkeypatch.setattr(runner, "load", lambda name, root=None: ds)
    S.run_dataset("g", tmp_path, runs=3, progress=False)
    path = tmp_path / records.RESULTS_FILE
    recs = records.read_records(path)
    assert calls == [0, 1, 2] and len({r["config_hash"] for r in recs}) == 1
    S.run_dataset("g", tmp_path, runs=3, progress=False)
    assert calls == [0, 1, 2]  # resumed: nothing recomputed
    legacy = {key: v for key, v in recs[1].items() if key != "config_hash"}
    path.write_text("".join(json.dumps(r) + "\n" for r in (recs[0], legacy, recs[2])))
    with pytest.raises(records.StaleResultsError, match="another configuration"):
        S.run_dataset("g", tmp_path, runs=3, progress=False)
    S.run_dataset("g", tmp_path, runs=3, progress=False, replace_stale=True)
    assert calls == [0, 1, 2, 1]
    assert [r["run"] for r in records.read_records(tmp_path / records.STALE_FILE)] == [1]
    monkeypatch.setattr(runner, "method_hash", lambda m: "another clp")
    with records.replacing_stale():
        S.run_dataset("g", tmp_path, runs=3, progress=False)
    assert calls == [0, 1, 2, 1, 0, 1, 2]


def test_paired_se_accuracy_by_hand():
    # 4 nodes, K = 2: a is right on nodes 0, 1, 2; b on 0 and 3 -> d = (0, 1, 1, -1), std (ddof 1) / sqrt(4)
    y = np.array([0, 1, 0, 1])
    a = np.array([[1, 0], [0, 1], [1, 0], [1, 0]], float)
    b = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], float)
    d = np.array([0, 1, 1, -1], float)
    assert S.paired_se("accuracy", a, b, y, np.ones(4, bool)) == pytest.approx(d.std(ddof=1) / 2)
    assert S.paired_se("accuracy", a, a, y, np.ones(4, bool)) == 0.0
    assert S.paired_se("accuracy", a, b, y, np.array([True, False, False, False])) == 0.0  # one node
    # only the masked nodes count
    m = np.array([False, True, True, True])
    assert S.paired_se("accuracy", a, b, y, m) == pytest.approx(np.array([1, 1, -1.0]).std(ddof=1) / np.sqrt(3))
    with pytest.raises(ValueError, match="metric"):
        S.paired_se("f1", a, b, y, m)


def test_delong_placements_average_to_the_auc(rng):
    """Both placement means equal the AUC (ties one half), checked against jaxclp's roc_auc and against the
    O(m n) pairwise definition of the structural components."""
    import jax.numpy as jnp

    from jaxclp.metrics import roc_auc

    y = rng.integers(0, 2, 80)
    s = rng.integers(0, 6, 80).astype(float)  # many ties
    v10, v01 = S._delong_placements(s, y)
    psi = (s[y == 1][:, None] > s[y == 0][None, :]) + 0.5 * (s[y == 1][:, None] == s[y == 0][None, :])
    np.testing.assert_allclose(v10, psi.mean(1))
    np.testing.assert_allclose(v01, psi.mean(0))
    auc = float(roc_auc(jnp.asarray(s), jnp.asarray(y), jnp.ones(80, bool)))
    assert v10.mean() == pytest.approx(auc, abs=1e-6) and v01.mean() == pytest.approx(auc, abs=1e-6)


def test_paired_se_roc_auc_matches_the_monte_carlo_spread():
    """DeLong's SE of AUC(a) - AUC(b) for two correlated scorers equals, on average, the standard deviation of
    that difference over independent samples of the same model (2000 samples of 200 nodes; within 8 %)."""
    from jaxclp.metrics import roc_auc
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    diffs, ses = [], []
    for _ in range(2000):
        y = rng.integers(0, 2, 200)
        z = rng.normal(size=200)  # shared noise: the two scorers are correlated
        a = 1.0 * y + z + 0.5 * rng.normal(size=200)
        b = 0.6 * y + z + 0.5 * rng.normal(size=200)
        diffs.append(_auc(a, y) - _auc(b, y))
        ses.append(S.paired_se("roc_auc", np.stack([-a, a], 1), b, y, np.ones(200, bool)))
    assert np.mean(ses) == pytest.approx(np.std(diffs, ddof=1), rel=0.08)
    # and the fast AUC used here is jaxclp's
    assert _auc(a, y) == pytest.approx(float(roc_auc(jnp.asarray(a), jnp.asarray(y), jnp.ones(200, bool))), abs=1e-6)
    # fewer than two nodes of a class: 0.0
    assert S.paired_se("roc_auc", a, b, np.r_[1, np.zeros(199, int)], np.ones(200, bool)) == 0.0


def _auc(s, y):
    v10, _ = S._delong_placements(s, y)
    return float(v10.mean())


def test_choose_one_se_by_hand():
    keys = [("base_prior", "mlp", "a", 0.1), ("base_prior", "link", "a", 0.1), ("base_prior", "gcn", "a", 0.1)]
    ref_names = ["mlp", "link", "gcn"]
    ref_sel = np.array([0.70, 0.74, 0.80])  # gcn is the best prior
    sel = np.array([0.75, 0.76, 0.83])

    def se_const(v):
        return lambda x, y: v

    # SE 0.04: neither mlp (0.70) nor link (0.74) is within one SE of gcn (0.80); gcn + CLP gains 0.03 <= 0.04
    assert S.choose("one_se", keys, sel, ref_names, ref_sel, se_const(0.04)) == ("prior", 2)
    # SE 0.065: link is within one SE of gcn (0.74 >= 0.735) and comes first; link + CLP gains 0.02 <= 0.065
    assert S.choose("one_se", keys, sel, ref_names, ref_sel, se_const(0.065)) == ("prior", 1)
    # SE 0.11: mlp (0.70 >= 0.69); CLP on mlp gains 0.05, not more than 0.11
    assert S.choose("one_se", keys, sel, ref_names, ref_sel, se_const(0.11)) == ("prior", 0)
    # SE 0.01: gcn; its CLP gains 0.03 > 0.01
    assert S.choose("one_se", keys, sel, ref_names, ref_sel, se_const(0.01)) == ("clp", 2)
    # the SE asked for is that of the pair being compared
    asked = []
    S.choose("one_se", keys, sel, ref_names, ref_sel, lambda x, y: asked.append((x, y)) or 0.0)
    assert asked == [(("prior", 2), ("prior", 0)), (("prior", 2), ("prior", 1)), (("clp", 2), ("prior", 2))]
    with pytest.raises(ValueError, match="one_se"):
        S.choose("one_se", keys, sel, ref_names, ref_sel)
