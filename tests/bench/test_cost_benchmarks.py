"""benchmarks/cost.py, grid_budget.py and large_graph.py: their pieces on tiny inputs (the runs themselves are
benchmarks, committed under benchmarks/results with their commands)."""

import json
import numpy as np
import pytest

from benchmarks import cost, grid_budget, large_graph


@pytest.mark.slow  # 24-30 s on 2 cores (a whole clp run profiled twice); in slow_tests
def test_cost_profile_attributes_stages_and_compilations(monkeypatch, tmp_path):
    """One tiny graph through the runner's clp with two base predictors: every stage the pipeline runs appears,
    the stage walls sum to the run's wall, and compilation is counted where it happens."""
    import jaxclp

    ds = jaxclp.datasets.synthetic(0.3, 4, num_classes=3, nodes_per_class=30, seed=0)
    monkeypatch.setattr(cost, "_data_root", lambda: str(tmp_path))
    from jaxclp.experiments import runner

    real_run = runner.run
    monkeypatch.setattr(runner, "run", lambda dataset, *a, **kw: real_run(ds, *a, **kw))
    row = cost.profile("tiny", "clp", 1, priors=("mlp", "link"), epochs=5)
    stages = row["stages"]
    assert {"mlp priors", "prior link", "clp grid", "selection", "other"} <= set(stages)
    assert abs(sum(s["wall"] for s in stages.values()) - row["wall"]) < 1e-6 * max(1.0, row["wall"]) + 1e-9
    assert row["compilations"] == sum(s["compilations"] for s in stages.values()) > 0
    assert all(0 <= s["compile"] for s in stages.values()) and len(row["record_seconds"]) == 1
    md = cost._markdown({"method": "clp", "tag": "t", "command": "c", "machine": _machine(), "rows": [row]})
    assert "| tiny | 1 |" in md and "prior link" in md


def test_cost_merge_sets_runs_beside_the_compared_one(monkeypatch, tmp_path):
    """--merge keeps each row's conditions and machine, orders graphs as the medium table, and the comparison's
    first-split / steady-state seconds and ratios are the hand-computed ones."""
    from benchmarks import _common as C

    machine = {"backend": "gpu", "devices": ["cuda:0"], "jax": "0.11.2"}
    row = lambda d, secs, comp: {"dataset": d, "method": "clp", "runs": len(secs), "wall": sum(secs) + 1.0,
                                 "compile": comp, "compilations": 10, "record_seconds": secs, "stages": {},
                                 "test": [0.5] * len(secs)}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"command": "ca", "machine": machine, "rows": [row("wiki", [30.0, 6.0, 4.0], 24.0)]}))
    b.write_text(json.dumps({"command": "cb", "machine": machine, "rows": [row("texas", [20.0, 5.0], 15.0)]}))
    monkeypatch.setattr(C, "RESULTS_DIR", tmp_path)
    (tmp_path / "cost_base.json").write_text(json.dumps({
        "command": "cpu", "machine": {"backend": "cpu", "usable_cores": 2, "jax": "0.10.2"},
        "rows": [row("texas", [10.0, 10.0], 5.0), row("wiki", [40.0, 20.0], 8.0)]}))
    payload = cost.merge_runs([(str(a), "4 at once"), (str(b), "alone")], compare="base")
    assert [(r["dataset"], r["conditions"], r["command"]) for r in payload["rows"]] == [
        ("texas", "alone", "cb"), ("wiki", "4 at once", "ca")]
    assert cost.split_seconds(payload["rows"][1]) == (30.0, 5.0)  # the median of the later splits
    assert cost.split_seconds(row("x", [7.0], 1.0)) == (7.0, None)
    md = cost.compare_markdown(payload)
    # texas: compile 15 / 5 = 3.00, steady 5 / 10 = 0.50; wiki: 24 / 8 = 3.00, 5 / 20 = 0.25
    assert "| texas | alone | 26.0 | 15.0 (10) | 20.0 | 5.0 | 21.0 | 5.0 (10) | 10.0 | 10.0 | 3.00 | 0.50 |" in md
    assert "| wiki | 4 at once | 41.0 | 24.0 (10) | 30.0 | 5.0 | 61.0 | 8.0 (10) | 40.0 | 20.0 | 3.00 | 0.25 |" in md
    assert cost.compare_summary(payload) == (
        "alone (1 graph): compilation 3.0x the compared run's seconds, the later splits 0.50x (faster on texas); "
        "4 at once (1 graph): compilation 3.0x the compared run's seconds, the later splits 0.25x (faster on wiki).")
    with pytest.raises(FileNotFoundError, match="--compare"):
        cost.merge_runs([(str(a), "")], compare="missing")
    # ten splits estimated as the first + 9 x the later one: alone (texas) 20 + 9 * 5 = 65 s vs 10 + 9 * 10 = 100 s
    assert cost.ten_split_estimate(payload, "alone") == {
        "graphs": 1, "seconds": 65.0, "compile": 15.0, "compare_seconds": 100.0, "compare_compile": 5.0}
    assert cost.main_conditions(dict(payload, rows=payload["rows"] + [dict(payload["rows"][1])])) == "4 at once"
    assert cost.compile_ratios(payload) == [3.0, 3.0]


def _machine():
    from benchmarks import _common as C

    return C.machine_info()


def test_large_graph_files_and_scoring(tmp_path):
    facts = large_graph.build(tmp_path, scale=0.005)
    edges, labels, x, truth = (np.load(tmp_path / f) for f in ("edges.npy", "labels.npy", "features.npy",
                                                                 "truth.npy"))
    assert facts["nodes"] == truth.size == labels.size == x.shape[0] and x.shape[1] == 128
    assert edges.shape == (facts["undirected_edges"], 2) and np.all(edges[:, 0] < edges[:, 1])
    hidden = labels < 0
    assert facts["hidden"] == hidden.sum() and 0.2 < hidden.mean() < 0.36
    np.testing.assert_array_equal(labels[~hidden], truth[~hidden])
    # a predictions file right on every hidden node but the first scores (h - 1) / h
    pred = truth.copy()
    first = np.flatnonzero(hidden)[0]
    pred[first] = (truth[first] + 1) % facts["classes"]
    (tmp_path / "p.csv").write_text("node,label,role,predicted,score_0\n" + "".join(
        f"{i},{'' if labels[i] < 0 else labels[i]},x,{p},1.0\n" for i, p in enumerate(pred)))
    assert large_graph.accuracy_of_predictions(tmp_path / "p.csv", tmp_path) == (hidden.sum() - 1) / hidden.sum()


def test_clp_rerun_pairs_records_by_dataset_and_split(tmp_path):
    """clp_rerun pairs the splits both files hold (other methods and unpaired splits ignored); the paired
    difference, its std and the one-std bar are computed by hand here."""
    import json

    from benchmarks import clp_rerun

    def rec(ds, run, test, seconds, method="clp", prior="mlp"):
        return json.dumps({"type": "result", "method": method, "dataset": ds, "run": run, "test": test,
                           "seconds": seconds, "metric": "accuracy", "params": {"base_prior": prior}})

    old = [rec("a", 0, 0.50, 10.0), rec("a", 1, 0.60, 30.0), rec("a", 2, 0.90, 1.0), rec("a", 0, 0.1, 1.0, "mlp")]
    new = [rec("a", 0, 0.56, 4.0, prior="link"), rec("a", 1, 0.62, 2.0), rec("b", 0, 0.7, 1.0)]
    (tmp_path / "old.jsonl").write_text("\n".join(old) + "\n")
    (tmp_path / "new.jsonl").write_text("\n".join(new) + "\n")
    row, = clp_rerun.compare(tmp_path / "old.jsonl", tmp_path / "new.jsonl")
    assert row["dataset"] == "a" and row["runs"] == 2 and row["chosen"] == {"link": 1, "mlp": 1}
    np.testing.assert_allclose([row["old_mean"], row["old_std"], row["new_mean"]], [55.0, 5.0, 59.0])
    np.testing.assert_allclose([row["diff_mean"], row["diff_std"]], [4.0, 2.0])
    assert row["within_one_std"] is True and row["old_seconds_sum"] == 40.0 and row["new_seconds_median"] == 3.0
    assert "| a | 2 | 55.00 ± 5.00 | 59.00 ± 3.00 | +4.00 ± 2.00 | yes |" in clp_rerun.markdown([row], "cmd")
    # split kinds pair apart (table4's sparse and dense records of one graph); table2's carry none: "medium"
    kind = lambda line, split: json.dumps(json.loads(line) | {"split": split})  # noqa: E731
    (tmp_path / "old.jsonl").write_text("\n".join([kind(old[0], "sparse"), kind(old[1], "dense")]) + "\n")
    (tmp_path / "new.jsonl").write_text("\n".join([kind(new[0], "sparse"), kind(new[1], "sparse")]) + "\n")
    row, = clp_rerun.compare(tmp_path / "old.jsonl", tmp_path / "new.jsonl")
    assert (row["split"], row["runs"], row["diff_mean"]) == ("sparse", 1, pytest.approx(6.0))
    assert "| a (sparse) | 1 |" in clp_rerun.markdown([row], "cmd", "table4")


def test_grid_budget_kinds_and_ratios():
    """grid_budget names each clp_beliefs call's kind as jaxclp.search.GRID_COST does, and its table gives each kind's
    seconds relative to the closed form's."""
    assert [grid_budget._kind(k) for k in ({}, {"l1_normalize": False}, {"l1_normalize": True},
                                           {"spectral_scale": True})] == ["closed", "closed", "l1", "spectral"]
    from jaxclp.search import GRID_COST

    assert set(GRID_COST) == {"closed", "spectral", "l1", "authors"} and GRID_COST["closed"] == 1.0
    payload = {"command": "c", "machine": _machine(), "priors": "gcn", "wall": 100.0,
               "graph": {"nodes": 10, "undirected_edges": 20, "classes": 4},
               "seconds": {"closed": 4.0, "authors": 26.0, "l1": 12.0}, "calls": {"closed": 12, "authors": 2, "l1": 12}}
    md = grid_budget.markdown(payload)
    rows = [line for line in md.splitlines() if line.startswith("| ") and line[2:4] != "ki"]
    assert rows == ["| closed | 12 | 4.0 | 1.0 |", "| l1 | 12 | 12.0 | 3.0 |", "| authors | 2 | 26.0 | 6.5 |"]


def test_main_job_compares_clp_with_the_old_records_per_graph(tmp_path):
    """main_job's report: clp's new and old means over the splits both hold, within the old std or not, the best
    method of the new records and clp within one std of it; the times file read as written."""
    from benchmarks import main_job

    old = {("g", "clp"): {0: 60.0, 1: 62.0, 2: 64.0}, ("h", "clp"): {0: 50.0, 1: 50.0}}  # g: mean 62, std 2
    new = {("g", "clp"): {0: 63.0, 1: 64.0, 2: 65.0, 3: 99.0},  # split 3 has no old partner: left out
           ("g", "mlp"): {0: 70.0, 1: 70.0, 2: 72.0},
           ("h", "clp"): {0: 40.0, 1: 42.0}, ("h", "lp"): {0: 42.0, 1: 42.0}}
    rows = {r["graph"]: r for r in main_job.compare(new, old, ["g", "h"], ("mlp", "lp", "clp"))}
    g, h = rows["g"], rows["h"]
    assert (g["splits"], g["clp_new"], g["clp_old"], g["old_std"], g["within_old"]) == (3, 64.0, 62.0, 2.0, True)
    # the best of g is the MLP (70.67, std 1.15): clp's mean over all its new splits (72.75) is above it
    assert g["best"] == "clp" and g["within_best"]
    # h: 41 vs an old 50 with std 0; the LP's 42 (std 0) is above clp's 41
    assert h["within_old"] is False and h["best"] == "lp" and h["within_best"] is False
    times = tmp_path / "t.txt"
    times.write_text("g rc=0 secs=12\nh rc=1 secs=3\n")
    assert main_job.read_times(times) == {"g": {"rc": 0, "seconds": 12.0}, "h": {"rc": 1, "seconds": 3.0}}
    records = tmp_path / "r.jsonl"
    rec = lambda m, run, s, split="medium": json.dumps({"type": "result", "split": split, "dataset": "g", "method": m,
                                                         "run": run, "seconds": s})
    records.write_text("\n".join([json.dumps({"type": "header"}), rec("clp", 0, 10.0), rec("clp", 1, 30.0),
                                   rec("clp", 2, 20.0), rec("mlp", 0, 40.0), rec("clp", 0, 999.0, "sparse")]))
    cost = main_job.cost_rows(main_job.method_seconds(records), ["g", "h"])
    assert cost == [{"graph": "g", "records_s": 100.0, "clp_s": 60.0, "clp_share": 0.6, "clp_median_s": 20.0,
                     "splits": 3}]
    # an earlier run's times beside: its seconds and the ratio per graph, its total over the same graphs
    payload = {"times": main_job.read_times(times), "rows": list(rows.values()), "cost": cost,
               "previous": {"g": {"rc": 0, "seconds": 8.0}}, "previous_note": "commit abc"}
    md = main_job.tables(payload)
    assert "| g | 12 | 8 | 1.50 | 64.00 | 62.00 ± 2.00 | yes |" in md and "| h | 3 (rc 1) | – | – | 41.00 |" in md
    assert "The previous run took 8 s (0.1 min) for the same 1 graphs (commit abc)." in md


def test_clp_time_limit_pairs_the_new_clp_records_with_the_committed_table():
    """clp_time_limit's rows: the paired difference over the splits both hold, within the committed std or not,
    and the best of the committed table with clp's records replaced by the new ones (hand-computed)."""
    from benchmarks import clp_time_limit

    old = {("g", "clp"): {0: 60.0, 1: 62.0, 2: 64.0}, ("g", "mlp"): {0: 61.0, 1: 63.0, 2: 65.0}}  # clp 62 ± 2
    new = {("g", "clp"): {0: 59.0, 1: 60.0, 2: 58.0, 3: 59.0}}  # split 3 has no committed partner: not paired
    seconds = {"g": {"clp": [30.0, 4.0, 5.0, 6.0]}}
    [r] = clp_time_limit.paired_rows(new, old, seconds, ["g", "h"], ("mlp", "clp"))
    assert (r["splits"], r["clp_new"], r["clp_old"], r["old_std"]) == (3, 59.0, 62.0, 2.0)
    assert r["diff_mean"] == -3.0 and r["diff_std"] == pytest.approx(7 ** 0.5)  # diffs -1, -2, -6: (4 + 1 + 9) / 2
    assert r["within_old"] is False  # |59 - 62| > 2
    # the committed MLP (63 ± 2) is now the best; clp's new mean 59 is below 63 - 2
    assert r["best"] == "mlp" and r["best_mean"] == 63.0 and r["within_best"] is False
    assert (r["clp_median_s"], r["clp_max_s"]) == (5.5, 30.0)
    md = clp_time_limit.markdown({"command": "c", "machine": _machine(), "limit": 20.0, "times": {"g": 61.0},
                                  "rows": [r]})
    assert "| g | 61 | 5.5 | 30.0 | 59.00 | 62.00 ± 2.00 | -3.00 ± 2.65 | **no** | mlp 63.00 | **no** |" in md
    assert "1 graphs: `clp`'s median split at most 20 s on 1; within its committed std on 0" in md
    assert clp_time_limit.summary([r], {"g": 61.0, "h": 59.0}) == {"graphs": 1, "fast": 1, "within_old": 0,
                                                                    "within_best": 0, "minutes": 2.0}


def test_cost_targets_note_counts_the_limited_clp_runs(tmp_path):
    """The cost-targets row's note on clp under a time limit: graphs at most 20 s per split (median), within the
    committed std, within one std of the best; nothing without the results file."""
    from benchmarks import page_blocks

    assert page_blocks._limited_clp(tmp_path) == ""
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    rows = [dict(clp_median_s=3.0, within_old=True, within_best=True),
            dict(clp_median_s=20.5, within_old=True, within_best=False),
            dict(clp_median_s=None, within_old=False, within_best=True)]
    (tmp_path / "benchmarks" / "results" / "clp_time_limit.json").write_text(json.dumps({"limit": 20.0, "rows": rows}))
    assert page_blocks._limited_clp(tmp_path) == (
        "; with `--time-limit 20` (which leaves them out where they do not fit): 1 of 3 graphs, within its committed "
        "std on 2 and within one std of the best method on 2 (`clp_time_limit.md`)")


def test_compile_target_rows_read_the_census_and_say_what_is_missed(tmp_path):
    """Issue 69's rows: compile seconds against 8 s, a second graph's share of the first's, the default runs' and
    clp's wall against their targets, predict's left-out list (graphs up to 10k nodes only); none without the
    census."""
    from benchmarks import page_blocks

    assert page_blocks.compile_target_rows(tmp_path) == []
    res = tmp_path / "benchmarks" / "results"
    res.mkdir(parents=True)
    progs = [["jit(_grid_chunk_jit)", 2, 4.0], ["jit(_step_chunk)", 3, 2.5], ["jit(_mlp_depths_chunk)", 1, 1.0],
             ["jit(_link_kernel)", 1, 0.5], ["jit(_solve_kernel)", 3, 0.75]]
    row = lambda case, nodes, c, wall, hits=0, xla=10: dict(
        case=case, nodes=nodes, compile_s=c, wall=wall, trace_s=1.0, lower_s=0.5, backend_s=c - 1.5,
        xla_compilations=xla, cache_hits=hits, programs=progs)
    census = {"rows": [row("first graph", 900, 7.5, 29.0), row("similar graph", 960, 2.0, 20.0, hits=8, xla=2),
                       row("defaults", 300, 9.0, 31.0), row("defaults", 900, 9.0, 58.0)]}
    (res / "compile_census_cpu.json").write_text(json.dumps(census))
    (res / "fit_threads.json").write_text(json.dumps({"rows": [{"nodes": 900, "side_s": 8.25}]}))
    listed = page_blocks.compile_target_rows(tmp_path)
    rows = {r[0].split(" (")[0].split(",")[0]: r for r in listed}
    first = rows["`clp` on a first graph"]
    assert first[2:4] == ["7.5 s (10 programs; trace + lowering 1.5 s, XLA 6.0 s)", "met"]
    assert "tuned GNN grids 4.0 s of XLA, the other trained priors' loops 4.0 s" in first[4]
    similar = rows["a second graph of 960 nodes after the first"]
    assert similar[2:4] == ["2.0 s, 27 % (8 programs read from the cache)", "**missed**"]  # 2 / 7.5 > 1/4
    assert "reads the 8 cached executables back (0.5 s); 2 compiled again" in similar[4]
    defaults = [r for r in listed if r[0].startswith("`jaxclp run --graph`")]
    assert [r[1:4] for r in defaults] == [["≤ 30 s", "31 s", "**missed**"], ["≤ 60 s", "58 s", "met"]]
    assert "warm cache" not in defaults[0][4]
    # a met share has no gap to explain; a warm run of the defaults says what is left without compiling
    census["rows"][1] = row("similar graph", 960, 1.5, 20.0, hits=8, xla=0)
    (res / "compile_census_cpu.json").write_text(json.dumps(census))
    (res / "run_user_graphs_warm.json").write_text(json.dumps({"runs": [
        dict(nodes=300, cache="cold", wall_s=50.0), dict(nodes=300, cache="warm", wall_s=40.0),
        dict(nodes=300, checkout="before", cache="cold", wall_s=70.0),
        dict(nodes=300, checkout="before", cache="warm", wall_s=60.0)]}))  # another checkout's pair: not read
    listed = page_blocks.compile_target_rows(tmp_path)
    rows = {r[0].split(" (")[0].split(",")[0]: r for r in listed}
    assert rows["a second graph of 960 nodes after the first"][2:] == [
        "1.5 s, 20 % (8 programs read from the cache)", "met", ""]
    defaults = [r for r in listed if r[0].startswith("`jaxclp run --graph`")]
    assert "with every program already compiled (a warm cache) 40 s against 50 s cold" in defaults[0][4]
    assert "warm cache" not in defaults[1][4]  # no warm run of 900 nodes
    (res / "run_user_graphs_warm.json").unlink()
    assert "8.2 s per split" in rows["`jaxclp run --methods clp --runs 3 --time-limit none`"][4]
    assert rows["`jaxclp run --methods clp --runs 3 --time-limit none`"][2:4] == ["29 s", "met"]
    # predict: the 10k-node rows of this checkout only; the gap names what was left out
    runs = [dict(graph="a", nodes=2405, checkout="after", skipped=["h2gcn", "gcn_tuned"]),
            dict(graph="b", nodes=10_000, checkout="after", skipped=[]),
            dict(graph="c", nodes=28_281, checkout="after", skipped=["sage_tuned"]),
            dict(graph="a", nodes=2405, checkout="before", skipped=["x"])]
    (res / "time_limit.json").write_text(json.dumps({"runs": runs}))
    pred = page_blocks.compile_target_rows(tmp_path)[-1]
    assert pred[2:5] == ["a (2405 nodes): 2 left out; b (10000 nodes): 0 left out", "**missed**",
                         "a: h2gcn, gcn_tuned (`time_limit.md`): compiling and the first fits fill the minute on 2 "
                         "cores"]


def test_test_suite_reads_each_pytest_summary_line():
    """test_suite's parser: the counts and seconds of each pytest run's last line, in order (as .ci/run prints)."""
    from benchmarks import test_suite

    out = ("....\n1134 passed, 3 skipped, 2 warnings in 495.12s (0:08:15)\nnoise 5 passed in the text\n"
           "== 259 passed, 40 skipped in 53.0s ==\n")
    assert test_suite.pytest_runs(out) == [{"passed": 1134, "skipped": 3, "warnings": 2, "seconds": 495.12},
                                          {"passed": 259, "skipped": 40, "seconds": 53.0}]



def test_large_graph_stages_on_a_tiny_graph(tmp_path):
    """The stage table's pieces on a 0.5 % graph, 3 epochs: one row per prior, accuracies in [0, 1], a closed-form
    choice from clp's grid, and the report names PyG's accuracy where given."""
    import jaxclp
    from benchmarks import _common as C
    from benchmarks import large_graph_stages as S
    from jaxclp.experiments.methods import ALPHAS

    facts = large_graph.build(tmp_path, scale=0.005)
    rows = S.stages(tmp_path, cfg=jaxclp.TrainConfig(epochs=3), priors=("mlp",))
    assert [r["prior"] for r in rows] == ["mlp"]
    r = rows[0]
    assert all(0 <= r[f] <= 1 for f in ("prior_val", "prior_hidden", "closed_val", "closed_hidden"))
    assert r["closed_choice"][0] in ("sym", "row", "none") and r["closed_choice"][2] in ALPHAS
    # one row per closed-form variant in the grid's order; the chosen one is the first best of them on validation
    assert [(v["normalization"], v["source"]) for v in r["variants"]] == [(a, c) for a, b, c in S.CLOSED_VARIANTS]
    first = max(r["variants"], key=lambda v: v["val"])
    assert r["closed_val"] == first["val"] and r["closed_choice"] == [first["normalization"], first["source"],
                                                                      first["alpha"]]
    assert r["closed_s"] == sum(v["s"] for v in r["variants"])
    md = S.markdown({"command": "c", "machine": C.machine_info(), "graph": facts, "rows": rows, "pyg_mlp_cs_accuracy": 0.5})
    assert "| mlp |" in md and "hidden accuracy 0.5000" in md and "| mlp | sym / mlp |" in md
