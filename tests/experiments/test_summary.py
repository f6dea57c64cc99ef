"""experiments/summary.py: the paper column beside our numbers, from hand-made records."""

import json

import numpy as np
import pytest

from jaxclp.experiments import summary


def _records(dataset, split, method, tests, metric="accuracy"):
    return [{"type": "result", "dataset": dataset, "split": split, "run": i, "method": method, "metric": metric,
             "val": 0.5, "test": t, "params": {}, "seconds": 0.1} for i, t in enumerate(tests)]


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _row(text, dataset, split):
    return _cells(next(ln for ln in text.splitlines() if ln.startswith(f"| {dataset} | {split} |")))


def test_paper_column_and_flags():
    recs = (_records("texas", "medium", "clp", [0.69, 0.70, 0.71])          # paper CLP 69.63 ± 3.75
            + _records("texas", "medium", "clp_paper", [0.50, 0.52, 0.48])  # far below: flagged
            + _records("texas", "medium", "clp_star", [0.60, 0.61, 0.62])   # no paper row
            + _records("coauthor-physics", "sparse", "h2gcn", [0.955, 0.956])  # paper 95.57 ± 0.16
            + _records("acm", "medium", "mlp", [0.8, 0.9]))                 # paper has no medium for ACM
    text = summary.markdown(recs, "t")
    cells = _row(text, "texas", "medium")
    header = _cells(next(ln for ln in text.splitlines() if ln.startswith("| dataset |")))
    clp = cells[header.index("clp")]
    assert "paper 69.6 ± 3.8, Δ +0.4" in clp and "⚠" not in clp
    clp_paper = cells[header.index("clp_paper")]
    # ours 50.0 ± 2.0, paper 69.63 ± 3.75: |Δ| = 19.6 > hypot(2, 3.75) = 4.25
    assert "paper 69.6 ± 3.8, Δ -19.6 ⚠" in clp_paper
    assert "paper" not in cells[header.index("clp_star")]
    phys = _row(text, "coauthor-physics", "sparse")
    assert "paper 95.6 ± 0.2, Δ -0.0" in phys[header.index("h2gcn")]
    assert not any("paper" in c for c in _row(text, "acm", "medium"))


def test_paper_cell_threshold():
    # Δ exactly inside / outside hypot(std_ours, std_paper); paper texas/medium/mlp = 67.94 ± 3.87
    ours = np.array([70.0, 72.0])  # mean 71, std 1.414 -> spread 4.12, Δ 3.06: no flag
    assert summary.paper_cell("texas", "medium", "mlp", ours) == "<br>paper 67.9 ± 3.9, Δ +3.1"
    assert summary.paper_cell("texas", "medium", "mlp", np.array([80.0, 80.0])).endswith("⚠")
    assert summary.paper_cell("minesweeper", "medium", "mlp", ours) == ""


def test_no_paper_number_beside_another_metric():
    """The paper's deezer-europe numbers are accuracies: beside ROC-AUC records (``jaxclp run --metric roc_auc``)
    no paper number is shown, in result cells or empty ones; beside accuracy records it is."""
    acc = summary.markdown(_records("deezer-europe", "medium", "mlp", [0.66, 0.67]), "t")
    assert "paper" in _row(acc, "deezer-europe", "medium")[4]  # after the chance column
    auc = summary.markdown(_records("deezer-europe", "medium", "mlp", [0.70, 0.71], metric="roc_auc"), "t",
                           methods=("mlp", "cs"))
    row = _row(auc, "deezer-europe", "medium")
    assert row[2] == "roc_auc" and not any("paper" in c for c in row)
    assert summary.paper_cell("deezer-europe+dagger", "medium", "clp", None, "roc_auc") == ""
    assert summary.paper_cell("deezer-europe", "medium", "mlp", None, "accuracy").startswith("<br>paper ")


def test_columns_without_results_show_the_paper_number():
    recs = _records("texas", "medium", "mlp", [0.6, 0.7])
    text = summary.markdown(recs, "t", methods=("mlp", "gcn", "h2gcn"))
    header = _cells(next(ln for ln in text.splitlines() if ln.startswith("| dataset |")))
    assert header[3:] == ["chance", "mlp", "gcn", "h2gcn"]
    row = _row(text, "texas", "medium")
    assert row[header.index("gcn")] == "–<br>paper 54.2 ± 3.2"  # paper GCN texas/medium 54.17 ± 3.18
    assert "gcn" not in summary.markdown(recs, "t")  # only the records' methods by default


def test_table_homophily_target_runs_the_papers_grid(tmp_path, monkeypatch):
    from jaxclp.experiments import reproduce

    calls = []
    monkeypatch.setattr(reproduce, "run", lambda name, split, methods, runs, d, **kw: calls.append(
        (name, split, tuple(methods), runs, d.name)))
    monkeypatch.setattr(reproduce, "write_summary", lambda d, title="", methods=(): (d, title, tuple(methods)))
    (d, title, methods), = reproduce.table_homophily(tmp_path, runs=3, dagger=False)
    assert "WikiCS" in title and "not obtainable" in title
    assert methods == reproduce.TABLE_METHODS and {"gcn", "h2gcn"} <= set(methods)
    assert {c[0] for c in calls} == {"dblp", "coauthor-cs", "acm", "coauthor-physics"}
    assert {c[1] for c in calls} == {"sparse", "medium", "dense"} and len(calls) == 12
    assert all(c[2] == reproduce.TABLE_METHODS and c[3] == 3 and c[4] == "table_homophily" for c in calls)
    assert "table_homophily" in reproduce.TARGETS


def test_base_prior_counts_of_clp():
    recs = _records("chameleon", "medium", "clp", [0.5, 0.6, 0.55])
    for r, p in zip(recs, ("gcn", "link", "gcn")):
        r["params"] = {"base_prior": p}
    text = summary.markdown(recs, "t")
    assert "### clp: base prior chosen on validation" in text
    assert "| chameleon | gcn ×2, link ×1 |" in text
    assert "| prior alone (alpha 0) |" not in text  # no record kept its prior alone
    header = _cells(next(ln for ln in text.splitlines() if ln.startswith("| dataset |")))
    assert header.index("clp") > 0


def test_variant_counts_name_the_prior_alone():
    """A clp record that kept its base predictor alone (alpha 0, no CLP variant) is counted as such, not as a
    variant of Nones; the others by normalization / step / prior source."""
    recs = _records("texas", "medium", "clp", [0.5, 0.6, 0.55])
    recs[0]["params"] = {"alpha": 0.0, "base_prior": "h2gcn", "mlp_depth": 1}
    recs[1]["params"] = {"alpha": 0.0, "base_prior": "mlp", "mlp_depth": 1}
    recs[2]["params"] = {"alpha": 0.5, "base_prior": "mlp", "normalization": "sym", "l1": True, "prior": "mlp"}
    text = summary.markdown(recs, "t")
    assert "| prior alone (alpha 0) | 2 |" in text
    assert "| sym/l1/mlp | 1 |" in text
    assert "None/linear/None" not in text
    assert "| texas | prior alone (alpha 0) ×2, sym/l1/mlp ×1 |" in text


def _paired_row(text, dataset):
    block = text[text.index("### `clp` paired per split"):]
    return _cells(next(ln for ln in block.splitlines() if ln.startswith(f"| {dataset} |")))


def test_paired_table_hand_computed():
    """clp vs mlp, vs the prior it chose (reference, or the same-named record of older files) and vs the best
    baseline, paired per run; numbers computed by hand."""
    clp = _records("texas", "medium", "clp", [0.60, 0.70, 0.65])
    for r, p in zip(clp, ("link", "link", "mlp")):
        r["params"] = {"base_prior": p}
    clp[0]["references"] = {"link": {"val": 0.5, "test": 0.55}}  # run 0: the reference (0.60 - 0.55 = +5)
    recs = (clp + _records("texas", "medium", "mlp", [0.50, 0.60, 0.70])     # Δ vs mlp: +10, +10, -5
            + _records("texas", "medium", "link", [0.58, 0.71, 0.40])        # run 1: no reference -> link record
            + _records("texas", "medium", "lp", [0.62, 0.66, 0.64])          # best baseline by mean (64.0)
            + _records("texas", "medium", "clp_paper", [0.9, 0.9, 0.9]))     # a CLP variant, not a baseline
    row = _paired_row(summary.markdown(recs, "t"), "texas")
    # columns: dataset split clp Δmlp >1std Δprior best Δbest within
    assert row[2] == "65.0"
    assert row[3] == "+5.0 ± 8.7 (2/1/0)"           # diffs 10, 10, -5: mean 5, std 8.66
    assert row[4] == "no"                            # gap 65 - 60 = 5 is not above mlp's std 10
    # vs chosen prior: run 0 +5 (reference), run 1 70 - 71 = -1 (link record), run 2 65 - 70 = -5 (mlp record)
    assert row[5] == "-0.3 ± 5.0 (1/2/0)"
    assert row[6] == "lp 64.0" and row[7] == "+1.0 ± 3.0 (2/1/0)"   # diffs -2, +4, +1
    assert row[8] == "yes"                           # 64 - 65 < std of lp


def test_paired_table_single_run_states_no_spread():
    """With one run there is no std: the paired cells give the difference alone and the one-std judgments '–'
    (not a 'yes'/'no' against a std of 0)."""
    clp = _records("texas", "medium", "clp", [0.60])
    clp[0]["params"] = {"base_prior": "mlp"}
    recs = clp + _records("texas", "medium", "mlp", [0.50]) + _records("texas", "medium", "lp", [0.70])
    row = _paired_row(summary.markdown(recs, "t"), "texas")
    assert row[3:] == ["+10.0 (1/0/0)", "–", "+10.0 (1/0/0)", "lp 70.0", "-10.0 (0/1/0)", "–"]


def test_paired_table_within_one_std_fails_when_far_below():
    recs = (_records("chameleon", "medium", "clp", [0.40, 0.42])
            + _records("chameleon", "medium", "link", [0.56, 0.57]))
    row = _paired_row(summary.markdown(recs, "t"), "chameleon")
    assert row[6] == "link 56.5" and row[7] == "-15.5 ± 0.7 (0/2/0)" and row[8] == "no"
    assert row[3] == "–" and row[5] == "–"           # no mlp record, no base prior known


def test_only_shows_exactly_the_given_columns():
    recs = _records("texas", "medium", "mlp", [0.6, 0.7]) + _records("texas", "medium", "lp", [0.5, 0.5])
    text = summary.markdown(recs, "t", methods=("mlp", "clp"), only=True)
    header = _cells(next(ln for ln in text.splitlines() if ln.startswith("| dataset |")))
    assert header[3:] == ["chance", "mlp", "clp"]


def test_compute_time_counts_the_mlp_prior_once_per_split():
    def rec(m, run, sec):
        return {"type": "result", "dataset": "texas", "split": "medium", "method": m, "run": run, "metric": "accuracy",
                "val": 0.5, "test": 0.5, "seconds": sec, "params": {}}

    # per split: the MLP prior took 10 s and 12 s; clp and cs include it, lp (no prior) does not
    records = [rec("mlp", 0, 10.0), rec("clp", 0, 25.0), rec("cs", 0, 11.0), rec("lp", 0, 3.0),
               rec("mlp", 1, 12.0), rec("clp", 1, 30.0), rec("cs", 1, 11.0), rec("lp", 1, 4.0),
               rec("clp", 2, 40.0)]  # a split without an mlp record keeps its full seconds
    _, last = summary.aggregate(records)
    sec = summary.compute_seconds(last, ["mlp", "clp", "cs", "lp"])
    assert sec == {"mlp": 22.0, "clp": 15.0 + 18.0 + 40.0, "cs": 1.0 + 0.0, "lp": 7.0}  # cs 11 - 12 clamps at 0
    md = summary.markdown(records, "t", ["mlp", "clp", "cs", "lp"], only=True)
    total = (22.0 + 73.0 + 1.0 + 7.0) / 3600
    assert f"**{total:.2f} h**" in md and "| clp | 3 | 1.2 |" in md


def test_stale_cells_are_marked():
    """A cell holding a record of an earlier method definition (another method_hash) gets ‡; current ones do not."""
    from jaxclp.experiments.specs import method_hash

    cur = [dict(r, method_hash=method_hash("mlp")) for r in _records("texas", "medium", "mlp", [0.6, 0.7])]
    old = _records("texas", "medium", "clp", [0.6, 0.7])
    old[1]["method_hash"] = method_hash("clp")  # one current run, one of another definition: the cell is stale
    text = summary.markdown(cur + old, "t")
    header = _cells(next(ln for ln in text.splitlines() if ln.startswith("| dataset |")))
    cells = _row(text, "texas", "medium")
    assert cells[header.index("clp")].endswith(" ‡") and "‡" not in cells[header.index("mlp")]


def test_machines_groups_results_by_the_header_before_them(tmp_path):
    def header(backend, devices, jax_version):
        return {"type": "header", "argv": ["jaxclp", "reproduce", "t"], "backend": backend, "devices": devices,
                "jax": jax_version}

    recs = ([header("cpu", ["cpu:0"], "0.10.2")] + _records("texas", "medium", "mlp", [0.6, 0.7])
            + [header("gpu", ["cuda:0"], "0.11.2")] + _records("deezer-europe", "medium", "mlp", [0.6, 0.6, 0.7])
            + _records("minesweeper", "medium", "gcn", [0.9])
            + [header("cpu", ["cpu:0"], "0.10.2")] + _records("wiki", "medium", "mlp", [0.5]))
    assert summary.machines(recs) == [
        "gpu (cuda:0), jax 0.11.2: 4 result record(s); deezer-europe, minesweeper",
        "cpu (cpu:0), jax 0.10.2: 3 result record(s); texas, wiki"]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    text = summary.write_summary(tmp_path, title="t").read_text()
    assert "- gpu (cuda:0), jax 0.11.2: 4 result record(s); deezer-europe, minesweeper" in text


def test_plot_summary_without_records_is_none(tmp_path):
    from jaxclp.experiments.summary import plot_summary

    assert plot_summary(tmp_path) is None and not (tmp_path / "summary.png").exists()


def test_e2e_as_a_candidate_switches_only_on_the_mlp_prior_and_a_strictly_higher_val():
    clp = _records("texas", "medium", "clp", [0.60, 0.80, 0.60, 0.50])
    e2e = _records("texas", "medium", "clp_e2e", [0.70, 0.90, 0.40, 0.90])
    priors = ["mlp", "gcn", "mlp", "mlp"]
    refs = [0.60, 0.75, 0.65, 0.50]                 # the chosen prior alone, test
    for r, e, p, t, (cv, ev) in zip(clp, e2e, priors, refs, [(0.5, 0.55), (0.5, 0.9), (0.6, 0.7), (0.7, 0.7)]):
        r["params"] = {"base_prior": p, "alpha": 0.5}
        r["references"] = {p: {"test": t, "val": 0.4}}
        r["val"], e["val"] = cv, ev
    # run 0: MLP prior, e2e higher on val -> switched (0.70); run 1: a GCN prior -> kept; run 2: switched (0.40);
    # run 3: a tie on val -> kept (the first candidate wins ties)
    _, last = summary.aggregate(clp + e2e)
    runs = summary.with_candidate(last, "texas", "medium")
    assert [r["switched"] for r in runs] == [True, False, True, False]
    np.testing.assert_allclose([r["new"] for r in runs], [0.70, 0.80, 0.40, 0.50])
    text = summary.markdown(clp + e2e, "t")
    row = _row(text.split("with `clp_e2e` among its candidates")[1], "texas", "medium")
    # new - clp: +10, 0, -20, 0 -> mean -2.5, std 12.6; new - prior: +10, +5, -25, 0
    assert row[2:6] == ["2/4", "62.5", "60.0", "-2.5 ± 12.6 (1/1/2)"]
    assert row[7] == "-2.5 ± 15.5 (2/1/1)"
    assert "among its candidates" not in summary.markdown(clp, "t")


def test_sections_without_records_leave_no_blank_run():
    text = summary.markdown(_records("texas", "medium", "mlp", [0.6, 0.7]), "t")
    assert "\n\n\n" not in text and "### Compute time" in text


def test_paper_legend_only_where_the_paper_has_a_number():
    """A user's graph (no paper number in any cell) gets no paper legend and no paper cell; a registered dataset
    with the paper's method keeps both."""
    mine = summary.markdown(_records("my_graph", "medium", "clp", [0.6, 0.7]), "t")
    assert "paper" not in mine.lower() and "Δ = ours" not in mine
    assert "| my_graph | medium | accuracy | ? | **65.0 ± 7.1 (2)** ‡ |" in mine  # ‡: the records have no method_hash
    texas = summary.markdown(_records("texas", "medium", "clp", [0.6, 0.7]), "t")
    assert "Paper: the CLP paper's mean ± std" in texas and "paper 69.6 ± 3.8" in texas


def test_skipped_base_predictors_are_listed_with_the_time_limit():
    recs = _records("g", "medium", "clp", [0.6, 0.7, 0.8])
    for r, skipped in zip(recs, (["gcn_tuned", "sage_tuned"], ["sage_tuned"], [])):
        r["skipped"] = skipped
        r["config"] = {"time_limit": 30.0}
    text = summary.markdown(recs, "t")
    assert "### Left out for time" in text
    assert "| g | medium | clp | 30 | gcn_tuned (1 of 3), sage_tuned (2 of 3) |" in text
    assert "Left out for time" not in summary.markdown(_records("g", "medium", "clp", [0.6]), "t")


def test_majority_share_by_hand():
    """The chance reference of accuracy: the majority class of the TRAINING labels (not of the test nodes), scored on
    the test nodes; unlabelled nodes count nowhere; ROC-AUC's is 50 %."""
    from jaxclp.experiments import chance

    y = np.array([0, 0, 0, 1, 1, 2, 1, 1, 1, 0, -1, 2])
    train = np.zeros(12, bool)
    train[[0, 1, 2, 3, 4, 10]] = True        # training: three 0s, two 1s (node 10 unlabelled): majority 0
    test = np.zeros(12, bool)
    test[[5, 6, 7, 8, 9, 10, 11]] = True     # test: 2, 1, 1, 1, 0, (unlabelled), 2 -> one 0 among six labelled
    assert chance.majority_share(y, train, test) == 1 / 6
    assert chance.chance_score("accuracy", y, train, test) == 1 / 6
    assert chance.chance_score("roc_auc", y, train, test) == 0.5
    assert chance.split_chances(y, np.stack([train, test]), np.stack([test, train])) == [1 / 6, 2 / 5]
    # (the second split swaps them: majority 1 of 2,1,1,1,0,2, two 1s among 0,0,0,1,1)
    assert chance.chance_percent("roc_auc", [0, 1], None) == 50.0
    assert chance.chance_percent("accuracy", [0, 1], {0: 0.6, 1: 0.7}) == pytest.approx(65.0)
    assert chance.chance_percent("accuracy", [0, 1], {0: 0.6}) is None  # a run without a recorded value: unknown
    assert chance.beats_chance([66.0, 67.0], 65.0) and not chance.beats_chance([64.0, 68.0], 65.0)
    assert not chance.beats_chance([65.0], 65.0) and chance.beats_chance([65.1], 65.0)


def test_summary_chance_column_and_marker():
    """summary.md's chance column: the mean over the runs of the header's per-split majority shares (accuracy), 50
    for ROC-AUC, '?' with a one-line note for records without it; '≤ chance' on a method whose mean is within its std
    of chance (lp: 66.0 ± 2.8 vs 65.0), not on one above it by more (mlp: 66.5 ± 0.7)."""
    header = {"type": "header", "dataset": "g", "split": "medium", "chance": [0.6, 0.7]}
    recs = ([header] + _records("g", "medium", "mlp", [0.66, 0.67]) + _records("g", "medium", "lp", [0.64, 0.68])
            + _records("h", "medium", "mlp", [0.52, 0.53], metric="roc_auc"))
    text = summary.markdown(recs, "t")
    header_cells = _cells(next(ln for ln in text.splitlines() if ln.startswith("| dataset |")))
    row = _row(text, "g", "medium")
    assert row[header_cells.index("chance")] == "65.0"
    assert row[header_cells.index("lp")].split("‡")[0].strip() == "66.0 ± 2.8 (2) ≤ chance"
    assert "≤ chance" not in row[header_cells.index("mlp")]
    auc = _row(text, "h", "medium")
    assert auc[header_cells.index("chance")] == "50.0" and "≤ chance" not in auc[header_cells.index("mlp")]
    assert "unknown" not in text
    old = summary.markdown(_records("g", "medium", "mlp", [0.66, 0.67]), "t")
    assert _row(old, "g", "medium")[3] == "?" and "?: chance: unknown for these records" in old


def _committed_style(ds, split="medium", seed=3, runs=3, metric="accuracy"):
    """Result records as a run made before the runner stored the chance reference: no header chance, each record
    with its configuration (seed, data identity) and ``seed`` = base seed + run."""
    from jaxclp.experiments.identity import config_hash, data_identity, run_config
    from jaxclp.train import TrainConfig

    config = run_config(ds, split, seed, TrainConfig(epochs=5), "given", data_identity(ds, ds))
    return [{"type": "header", "dataset": ds.name, "split": split, "config": config}] + [
        {"type": "result", "dataset": ds.name, "split": split, "run": i, "seed": seed + i, "method": "mlp",
         "metric": metric, "val": 0.5, "test": 0.6, "params": {}, "config": config, "config_hash": config_hash(config)}
        for i in range(runs)]


def test_chance_for_committed_records_is_a_hand_count(tmp_path):
    """chance_rebuild.for_records rebuilds the splits a committed record set used (its config's seed and data identity) and
    scores the majority TRAINING class on each split's test nodes: equal to a count by hand on those nodes; a record
    whose seed is not its split's, or a dataset whose arrays differ from the config's, gives nothing (unknown); the
    values go to chance.json, which serves them without the dataset."""
    import collections
    import dataclasses

    import jaxclp
    from jaxclp.datasets import random_splits
    from jaxclp.experiments import chance, chance_rebuild

    ds = jaxclp.datasets.synthetic(h=0.3, avg_degree=4, num_classes=3, nodes_per_class=20, seed=1)
    labels = np.asarray(ds.labels).copy()
    labels[:15] = 0  # unbalanced: class 0 is the majority of most training sets
    ds = dataclasses.replace(ds, labels=labels)
    recs = _committed_style(ds)
    chances, stored = chance_rebuild.for_records(recs, datasets={ds.name: ds})
    sp = random_splits(ds.num_nodes, "medium", num_splits=3, seed=3)
    for i in range(3):
        train, test = np.asarray(sp.train[i]), np.asarray(sp.test[i])
        majority = collections.Counter(labels[train].tolist()).most_common()
        top = min(c for c, n in majority if n == majority[0][1])  # ties: the lowest class
        hand = sum(int(labels[j] == top) for j in np.flatnonzero(test)) / int(test.sum())
        assert chances[(ds.name, "medium")][i] == pytest.approx(hand)
    assert set(stored) == {(ds.name, "medium", recs[1]["config_hash"])}
    # the percent the summary shows: their mean
    want = 100 * np.mean([chances[(ds.name, "medium")][i] for i in range(3)])
    text = summary.markdown(recs, "t", chances=chances)
    assert _row(text, ds.name, "medium")[3] == f"{want:.1f}"
    # a record whose seed is not its split's (another split), or other labels than the config's: unknown
    bad = [dict(r, seed=99) if r.get("run") == 1 else r for r in recs]
    assert chance_rebuild.for_records(bad, datasets={ds.name: ds})[0] == {}
    other = dataclasses.replace(ds, labels=np.roll(labels, 1))
    assert chance_rebuild.for_records(recs, datasets={ds.name: other})[0] == {}
    # ROC-AUC records need no dataset; the header's own values win over a rebuild
    assert chance_rebuild.for_records(_committed_style(ds, metric="roc_auc"))[0] == {}
    # ROC-AUC records that carry the chosen configuration's accuracy get the same accuracy reference
    binary = dataclasses.replace(ds, labels=(labels != 0).astype(labels.dtype), num_classes=2)
    auc = binary.with_metric("roc_auc")
    auc_recs = _committed_style(auc, metric="roc_auc")
    assert auc_recs[1]["config"]["metric"] == "roc_auc"
    assert chance_rebuild.for_records(auc_recs, datasets={ds.name: auc})[0] == {}
    with_acc = [dict(r, test_accuracy=0.7) if r["type"] == "result" else r for r in auc_recs]
    got = chance_rebuild.for_records(with_acc, datasets={ds.name: auc})[0][(ds.name, "medium")]
    y = np.asarray(binary.labels)
    for i in range(3):
        train, test = np.asarray(sp.train[i]), np.asarray(sp.test[i])
        top = int(y[train].mean() > 0.5)  # ties (exactly half): the lowest class, 0
        assert got[i] == pytest.approx(float(np.mean(y[test] == top)))
    # chance.json: written, read back, used without the dataset (what the results pages do)
    chance.write_stored(tmp_path, stored)
    again, _ = chance_rebuild.for_records(recs, stored=chance.read_stored(tmp_path), compute=False)
    assert again == {k: dict(v) for k, v in chances.items()}
    assert chance_rebuild.for_records(recs, compute=False)[0] == {}


def test_write_summary_fills_the_chance_of_old_records(tmp_path):
    """write_summary: records without a header chance get it from chance.json beside them; '?' without one (the
    dataset of these records is not registered, so it cannot be rebuilt)."""
    import jaxclp
    from jaxclp.experiments import chance, chance_rebuild

    ds = jaxclp.datasets.synthetic(h=0.3, avg_degree=4, num_classes=3, nodes_per_class=20, seed=1)
    recs = _committed_style(ds)
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert _row(summary.write_summary(tmp_path).read_text(), ds.name, "medium")[3] == "?"
    chances, stored = chance_rebuild.for_records(recs, datasets={ds.name: ds})
    chance.write_stored(tmp_path, stored)
    want = 100 * np.mean(list(chances[(ds.name, "medium")].values()))
    assert _row(summary.write_summary(tmp_path).read_text(), ds.name, "medium")[3] == f"{want:.1f}"


def test_roc_auc_rows_show_the_same_choices_accuracy_beside_chance():
    """A ROC-AUC row's records carry the chosen configuration's test accuracy: summary.md shows it, mean ± std over
    the runs, beside the majority-class chance of the header (hand-computed), marking a mean not above it."""
    recs = [{"type": "header", "dataset": "g", "split": "medium", "chance": [0.6, 0.7]}]
    for m, accs in (("mlp", (0.62, 0.68)), ("clp", (0.80, 0.84))):
        for i, (auc, a) in enumerate(zip((0.7, 0.8), accs)):
            recs.append({"type": "result", "dataset": "g", "split": "medium", "run": i, "method": m,
                         "metric": "roc_auc", "val": 0.5, "test": auc, "params": {}, "seconds": 0.1,
                         "test_accuracy": a})
    text = summary.markdown(recs, methods=("mlp", "clp"))
    row = next(line for line in text.splitlines() if line.startswith("| g | medium | 65.0 |"))
    assert "65.0 ± 4.2 (2) ≤ chance" in row and "82.0 ± 2.8 (2) |" in row  # chance (60 + 70) / 2 = 65
    assert "### Accuracy of the same choices (ROC-AUC rows)" in text
    without = [{k: v for k, v in r.items() if k != "test_accuracy"} for r in recs]  # records made before it
    assert "### Accuracy" not in summary.markdown(without, methods=("mlp", "clp"))


def test_runner_records_the_accuracy_of_a_roc_auc_choice():
    """score_method on a ROC-AUC split also scores the chosen configuration's accuracy on the test nodes: equal to
    the argmax of the chosen scores against the test labels (counted here)."""
    import jaxclp
    from jaxclp.experiments import runner

    ds = jaxclp.datasets.synthetic(0.3, 4, num_classes=2, nodes_per_class=30, seed=0).with_metric("roc_auc")
    sp = runner.get_splits(ds, "medium", 1, 0)
    feats, _ = runner.node_features(ds)
    setup = runner.prepare_splits(ds, feats, sp, 1, [0], 0, jaxclp.TrainConfig(epochs=5), True)
    fields, (_, _, scores) = runner.score_method(setup.context(0), "lp", setup.labels, setup.test[0])
    test = np.asarray(setup.test[0])
    expected = float(np.mean(np.asarray(scores).argmax(1)[test] == np.asarray(ds.labels)[test]))
    assert fields["metric"] == "roc_auc" and fields["test_accuracy"] == pytest.approx(expected)
