"""The experiment runner: records, resumability, and that selection never sees test labels."""

import dataclasses
import json
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxclp
from files import compiled_programs
from jaxclp.experiments import identity, progress, records, runner
from jaxclp.experiments.candidates import select, visible_labels
from jaxclp.experiments.summary import markdown
from jaxclp.baselines import fit_link
from jaxclp.gnn import fit_gcn, fit_h2gcn

METHODS = ("mlp", "link", "lp", "cs", "clp_star", "clp_mlp")
DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets"


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
    lines = (out / records.RESULTS_FILE).read_text().splitlines()
    header = json.loads(lines[0])
    assert header["type"] == "header" and header["jax"] and "git_commit" in header
    for r in recs:
        assert {"dataset", "split", "run", "seed", "method", "metric", "val", "test", "params",
                "seconds"} <= set(r)
        assert 0.0 <= r["test"] <= 1.0 and 0.0 <= r["val"] <= 1.0
    # resumable: nothing left to do, file unchanged
    before = (out / records.RESULTS_FILE).read_text()
    assert runner.run(ds, "medium", METHODS, runs=2, out=out, epochs=15, progress=False) == []
    assert (out / records.RESULTS_FILE).read_text() == before
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
    text = markdown(records.read_records(out / records.RESULTS_FILE))
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
    assert not (tmp_path / records.RESULTS_FILE).exists()  # refused before the header record is written
    runner.check_splits(y, np.asarray(sp.train), np.asarray(sp.val), [0, 1], "syn", "medium")  # the real labels pass


def test_run_refuses_h2gcn_on_a_hub_graph_before_any_fit(tmp_path, monkeypatch):
    """H2GCN asked for on a graph whose 2-hop graph passes the limit: refused before any method runs (not after
    hours of the others), the header record not written."""
    from jaxclp import gnn

    monkeypatch.setattr(gnn.two_hop, "MAX_TWO_HOP_EDGES", 10)
    with pytest.raises(gnn.TwoHopTooLarge, match="--methods without h2gcn"):
        runner.run(_dataset(), "medium", ["mlp", "h2gcn"], 1, tmp_path, progress=False, epochs=5)
    assert not (tmp_path / records.RESULTS_FILE).exists()


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
    # a user's labels are named as their file spells them, not by class code
    with pytest.raises(ValueError, match=r"split 0: every train node has label \['ant'\]"):
        runner.check_splits(y, tr, va, [0], "toy", "medium", np.array(["ant", "bee", "cat"]))


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


# ----------------------------------------------------------------- configuration-keyed resume
def _keys(path):
    return sorted((r["dataset"], r["split"], r["run"], r["method"]) for r in records.read_records(path)
                  if r.get("type") == "result")


def test_metric_override_is_part_of_the_configuration(tmp_path):
    """run(metric="roc_auc") scores a two-class graph by ROC-AUC (records, config and TrainConfig say so); the
    accuracy records of the same folder are another configuration (refused, never mixed); more than 2 classes
    or an unknown metric are refused with the reason."""
    ds = jaxclp.datasets.synthetic(h=0.3, avg_degree=5, num_classes=2, nodes_per_class=40, seed=0)
    assert ds.metric == "accuracy" and ds.with_metric(None) is ds and ds.with_metric("accuracy") is ds
    out = tmp_path / "o"
    acc = runner.run(ds, "medium", ["lp"], runs=1, out=out, epochs=3, progress=False)
    with pytest.raises(records.StaleResultsError, match="another configuration"):
        runner.run(ds, "medium", ["lp"], runs=1, out=out, epochs=3, progress=False, metric="roc_auc")
    auc = runner.run(ds, "medium", ["lp"], runs=1, out=tmp_path / "p", epochs=3, progress=False, metric="roc_auc")
    assert acc[0]["metric"] == "accuracy" and auc[0]["metric"] == "roc_auc" == auc[0]["config"]["metric"]
    assert auc[0]["config"]["train"]["metric"] == "roc_auc" and 0.0 <= auc[0]["test"] <= 1.0
    assert auc[0]["config_hash"] != acc[0]["config_hash"]
    with pytest.raises(ValueError, match=r"'roc_auc' is binary ROC-AUC and needs 2 classes; this dataset has 3"):
        runner.run(_dataset(), "medium", ["lp"], runs=1, out=tmp_path / "q", progress=False, metric="roc_auc")
    with pytest.raises(ValueError, match="metric must be 'accuracy' or 'roc_auc'; got 'f1'"):
        ds.with_metric("f1")


def test_resume_is_keyed_on_the_configuration(tmp_path):
    """A re-run with another --epochs (or seed, ...) into the same folder used to recompute nothing and keep
    the old numbers. Now every record carries its config and hash; another configuration is refused with a
    one-line message saying how to proceed, --replace-stale moves the old records to results.stale.jsonl
    and recomputes; more runs of the same configuration only add the new runs."""
    ds = _dataset()
    out = tmp_path / "o"
    path = out / records.RESULTS_FILE
    recs = runner.run(ds, "medium", ["mlp", "lp"], runs=1, out=out, epochs=3, progress=False)
    cfg = recs[0]["config"]
    assert cfg["train"]["epochs"] == 3 and cfg["seed"] == 0 and cfg["split"] == "medium"
    assert cfg["dataset"] == ds.name and cfg["jaxclp"] == jaxclp.__version__ and cfg["features"]
    assert cfg["data"]["arrays_sha256"] == identity.dataset_sha256(ds)
    assert recs[0]["config_hash"] == identity.config_hash(cfg) and len(recs[0]["config_hash"]) == 12
    assert len({r["config_hash"] for r in recs}) == 1
    # same configuration, more runs: only run 1 is computed
    more = runner.run(ds, "medium", ["mlp", "lp"], runs=2, out=out, epochs=3, progress=False)
    assert sorted((r["run"], r["method"]) for r in more) == [(1, "lp"), (1, "mlp")]
    before = path.read_text()
    for kw in ({"epochs": 4}, {"seed": 1, "epochs": 3}):
        with pytest.raises(records.StaleResultsError, match=r"another configuration .*--replace-stale") as e:
            runner.run(ds, "medium", ["mlp"], runs=2, out=out, progress=False, **kw)
        assert "\n" not in str(e.value) and ("epochs" in str(e.value) or "seed" in str(e.value))
        assert path.read_text() == before  # nothing written
    # another dataset content (same name) is another configuration too
    y = np.asarray(ds.labels).copy()
    y[:3] = (y[:3] + 1) % 3
    with pytest.raises(records.StaleResultsError, match="data"):
        runner.run(_dataset(labels=y), "medium", ["lp"], runs=2, out=out, epochs=3, progress=False)
    # a method not yet run in the folder is not blocked
    runner.run(ds, "medium", ["link"], runs=1, out=out, epochs=4, progress=False)
    new = runner.run(ds, "medium", ["mlp"], runs=2, out=out, epochs=4, progress=False, replace_stale=True)
    assert sorted(r["run"] for r in new) == [0, 1] and all(r["config"]["train"]["epochs"] == 4 for r in new)
    stale = records.read_records(out / records.STALE_FILE)
    assert sorted((r["run"], r["method"], r["config"]["train"]["epochs"]) for r in stale) == [
        (0, "mlp", 3), (1, "mlp", 3)]
    kept = [r for r in records.read_records(path) if r.get("type") == "result"]
    assert sorted((r["run"], r["method"]) for r in kept) == [(0, "link"), (0, "lp"), (0, "mlp"), (1, "lp"),
                                                             (1, "mlp")]
    assert {r["config"]["train"]["epochs"] for r in kept if r["method"] == "mlp"} == {4}


def test_reuse_copies_records_of_the_same_computation_from_another_target(tmp_path):
    """Targets over the same splits (table2 / table_gnn, table5 / table_homophily) share records: a record of
    the same configuration and method hash is copied verbatim with its header, not recomputed; another
    configuration (here: epochs) or another method hash is not copied."""
    ds = _dataset()
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    made = runner.run(ds, "medium", ["mlp", "lp"], runs=2, out=a, epochs=3, progress=False)
    recs = runner.run(ds, "medium", ["mlp", "lp", "link"], runs=2, out=b, epochs=3, progress=False, reuse=[a])
    assert sorted((r["run"], r["method"]) for r in recs) == [(0, "link"), (1, "link")]  # only link computed
    in_b = records.read_records(b / records.RESULTS_FILE)
    for r in made:
        assert r in in_b  # verbatim
    assert [r for r in in_b if r["type"] == "header"][0] == [
        r for r in records.read_records(a / records.RESULTS_FILE) if r["type"] == "header"][0]
    assert len([r for r in in_b if r["type"] == "header"]) == 2  # a's (copied) and b's own run
    # again: nothing to copy or compute, nothing appended
    before = (b / records.RESULTS_FILE).read_text()
    assert runner.run(ds, "medium", ["mlp", "lp", "link"], runs=2, out=b, epochs=3, progress=False,
                      reuse=[a]) == []
    assert (b / records.RESULTS_FILE).read_text() == before
    # another configuration is not the same computation: computed, never copied
    other = runner.run(ds, "medium", ["lp"], runs=1, out=c, epochs=4, progress=False, reuse=[a])
    assert [r["method"] for r in other] == ["lp"] and other[0]["config_hash"] != made[0]["config_hash"]
    # another method hash (e.g. an older revision) is not copied
    rows = records.read_records(a / records.RESULTS_FILE)
    for r in rows:
        if r["type"] == "result":
            r["method_hash"] = "0" * 12
    d = tmp_path / "d"
    d.mkdir()
    assert records.reuse_records(a / records.RESULTS_FILE, d / records.RESULTS_FILE, ds.name, "medium",
                                 made[0]["config_hash"], {"lp": runner.method_hash("lp")}) == 2
    (a / records.RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert records.reuse_records(a / records.RESULTS_FILE, tmp_path / "e.jsonl", ds.name, "medium",
                                 made[0]["config_hash"], {"lp": runner.method_hash("lp")}) == 0


def test_records_without_a_configuration_count_as_another(tmp_path):
    """The committed results (older jaxclp, no config) are never resumed into silently."""
    ds = _dataset()
    out = tmp_path / "o"
    out.mkdir()
    old = {"type": "result", "dataset": ds.name, "split": "medium", "run": 0, "method": "lp",
           "metric": "accuracy", "val": 0.5, "test": 0.5, "params": {}, "seconds": 1.0}
    records.append_record(out / records.RESULTS_FILE, old)
    with pytest.raises(records.StaleResultsError, match=r"no configuration recorded"):
        runner.run(ds, "medium", ["lp"], runs=1, out=out, epochs=3, progress=False)
    with records.replacing_stale():  # how `jaxclp reproduce --replace-stale` reaches the target's runs
        recs = runner.run(ds, "medium", ["lp"], runs=1, out=out, epochs=3, progress=False)
    assert [r["run"] for r in recs] == [0]
    assert records.read_records(out / records.STALE_FILE) == [old]
    assert _keys(out / records.RESULTS_FILE) == [(ds.name, "medium", 0, "lp")]


def test_named_dataset_config_uses_the_registry_hashes(tmp_path):
    spec = jaxclp.datasets.REGISTRY["texas"]
    ident = identity.data_identity("texas", None, tmp_path)
    assert ident["files"] == {fs.path: fs.sha256 for fs in spec.files.values()}
    assert all(len(h) == 64 for h in ident["files"].values())


def test_run_validates_runs_and_epochs(tmp_path):
    ds = _dataset()
    for kw, msg in (({"runs": 0}, "runs must be >= 1; got 0"), ({"epochs": 0}, "epochs must be >= 1; got 0")):
        with pytest.raises(ValueError, match=msg):
            runner.run(ds, "medium", ["lp"], out=tmp_path / "o", progress=False, **{"runs": 1, **kw})
    assert not (tmp_path / "o").exists()


@pytest.mark.slow  # > 50 s on 2 loaded cores; run with -m slow
def test_gcn_is_the_papers_single_candidate_and_gcn_tuned_adds_the_grid(tmp_path):
    from jaxclp.experiments import methods, reproduce

    ds = _dataset()
    recs = runner.run(ds, "medium", ["gcn", "gcn_tuned"], runs=1, out=tmp_path, epochs=15, progress=False)
    by = {r["method"]: r for r in recs}
    # Kipf + residual/LayerNorm at depths 1-5 + plain at depths 1-3
    assert by["gcn"]["num_candidates"] == 1 and by["gcn_tuned"]["num_candidates"] == 9
    grid = [(s.num_layers, s.residual, s.norm) for s in methods.gnn_grid("sage")]
    assert sorted(grid) == sorted([(d, True, True) for d in range(1, 6)] + [(d, False, False) for d in (1, 2, 3)])
    # gcn_tuned's candidates include the very same Kipf fit (same key), so validation can only improve on it
    assert by["gcn_tuned"]["val"] >= by["gcn"]["val"]
    assert "gcn" in reproduce.TABLE_METHODS and "gcn_tuned" not in reproduce.TABLE_METHODS  # tables: the paper's GCN
    assert {"gcn_tuned", "sage", "gat", "gat_sep", "gcn_sep"} <= set(reproduce.GNN_METHODS)
    assert "table_gnn" in reproduce.TARGETS


def test_table_ablation_target_runs_the_extensions_in_order(tmp_path, monkeypatch):
    """``jaxclp reproduce table_ablation`` runs paper -> authors -> all variants -> prior choice -> end to end,
    every one through the runner (validation selection), into results/table2 beside table2's records (same
    splits and configuration), its view in ablation.md with exactly these columns."""
    from jaxclp.experiments import methods, reproduce

    assert reproduce.TARGETS["table_ablation"] is reproduce.table_ablation
    assert reproduce.ABLATION_METHODS == ("mlp", "clp_paper", "clp_authors", "clp_mlp", "clp", "clp_e2e")
    assert set(reproduce.ABLATION_METHODS) <= set(methods.METHODS)
    assert {"clp", "clp_mlp", "clp_paper"} <= set(reproduce.TABLE_METHODS)
    calls, summaries = [], []
    monkeypatch.setattr(reproduce, "run", lambda name, split, meth, runs, d, **kw: calls.append(
        (name, split, tuple(meth), runs, d.name)))
    monkeypatch.setattr(reproduce, "write_summary", lambda d, **kw: summaries.append(kw) or d / kw["filename"])
    assert reproduce.table_ablation(tmp_path, runs=2, datasets=("texas",)) == [tmp_path / "table2" / "ablation.md"]
    assert calls == [("texas", "medium", reproduce.ABLATION_METHODS, 2, "table2")]
    assert summaries[0]["only"] is True and summaries[0]["methods"] == reproduce.ABLATION_METHODS


def test_gnn_methods_run_on_sparse_features(tmp_path, monkeypatch):
    """deezer-europe's features are sparse (3.5 GB dense): the GNN methods take them as they are (their first
    layer is a sparse product; the table2 re-run crashed there when they were densified, and they were left out
    until the GNNs took sparse input) and score like on the dense matrix."""
    import scipy.sparse

    ds = _dataset()
    sp = dataclasses.replace(ds, features=scipy.sparse.csr_matrix(np.asarray(ds.features)))
    # small sparse features are densified by node_features; deezer's (> 1 GiB dense) stay sparse
    monkeypatch.setattr(runner, "node_features", lambda d, kind="auto": (d.features.tocsr(), "own (sparse)"))
    recs = runner.run(sp, "medium", ["lp", "gcn", "h2gcn"], runs=1, out=tmp_path / "o", epochs=3, progress=False)
    assert [r["method"] for r in recs] == ["lp", "gcn", "h2gcn"]
    monkeypatch.undo()
    dense = runner.run(ds, "medium", ["h2gcn"], runs=1, out=tmp_path / "d", epochs=3, progress=False)
    assert recs[2]["val"] == pytest.approx(dense[0]["val"], abs=1e-6)  # H2GCN drops no input feature


@pytest.mark.cpu_bitwise
def test_link_gcn_h2gcn_routes_are_bit_identical():
    """The baseline rows (labels 0 outside train|val) and clp's base predictors (fit_prior, labels -1 there) fit
    the same model: the per-split cache shares them, so their outputs must agree bit for bit."""
    from jaxclp.priors import fit_prior

    ds = _dataset()
    sp = runner.get_splits(ds, "medium", 1, 0)
    tr, va = np.asarray(sp.train[0]), np.asarray(sp.val[0])
    y_vis = jax.numpy.asarray(visible_labels(np.asarray(ds.labels), tr, va))
    y0 = jax.numpy.where(y_vis >= 0, y_vis, 0)
    x = jax.numpy.asarray(ds.features, jax.numpy.float32)
    key = jax.random.key(3)
    cfg = jaxclp.TrainConfig(epochs=20, metric=ds.metric)
    a = fit_link(key, ds.graph, y0, tr, va, ds.num_classes, cfg)
    b = fit_prior("link", key, ds.graph, x, y_vis, tr, va, ds.num_classes, cfg).prior
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for name, fit in (("gcn", fit_gcn), ("h2gcn", fit_h2gcn)):
        a = fit(key, ds.graph, x, y0, tr, va, num_classes=ds.num_classes, cfg=cfg).prior
        b = fit_prior(name, key, ds.graph, x, y_vis, tr, va, ds.num_classes, cfg).prior
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)


def test_split_cache_fits_once_and_leaves_records_unchanged(tmp_path, monkeypatch):
    """clp_mlp, clp, link, gcn, h2gcn in one run: with the per-split cache LINK, GCN and H2GCN are fitted once
    (not twice) and clp_mlp's grid is computed once per split (clp reuses it when validation chooses the MLP as its
    base predictor); the records equal those without the cache
    (in both orders of the methods)."""
    import jaxclp.baselines
    import jaxclp.gnn
    import jaxclp.priors
    from jaxclp.experiments import methods as M

    counts = {}

    def counting(owner, name, tag):
        orig = getattr(owner, name)

        def wrapped(*a, **k):
            counts[tag] = counts.get(tag, 0) + 1
            return orig(*a, **k)
        monkeypatch.setattr(owner, name, wrapped)

    # every name a fit is called through: the baselines' methods and the base predictors' fit_prior hold their own
    for owner in (jaxclp, jaxclp.gnn, jaxclp.baselines, M, jaxclp.priors):
        for name in ("fit_link", "fit_gcn", "fit_h2gcn"):
            if hasattr(owner, name):
                counting(owner, name, name)
    counting(M, "_clp_grid", "clp_grid")  # one call per CLP grid computed (nonlinear_grid runs once per weight)
    # the run's config equals the baselines' default one (paper epochs) so the fits can be shared
    ds = _dataset()
    order = ["clp_mlp", "clp", "link", "gcn", "h2gcn"]

    def strip(recs):
        return sorted((json.dumps({k: v for k, v in r.items() if k != "seconds"}, sort_keys=True) for r in recs))

    out = {}
    shared = M._cached
    for cache, methods in ((True, order), (False, order), (True, order[::-1])):
        # off: every method computes everything itself (no fit or grid shared through the split's cache)
        monkeypatch.setattr(M, "_cached", shared if cache else lambda ctx, key, compute: compute())
        counts.clear()
        # clp's base predictors: the ones shared with the table's rows (the tuned grids share nothing here)
        recs = runner.run(ds, "medium", methods, runs=1, out=tmp_path / f"{cache}{methods[0]}", progress=False,
                          priors=("mlp", "link", "gcn", "h2gcn"))
        out[cache, methods[0]] = (strip(recs), dict(counts))
    (on, c_on), (off, c_off), (rev, c_rev) = out[True, "clp_mlp"], out[False, "clp_mlp"], out[True, "h2gcn"]
    assert on == off == rev and len(on) == 5
    # clp computes only the grid of the base predictor validation chose (select_prior_first): off, that is one
    # grid besides clp_mlp's; on, clp_mlp's grid is reused when the chosen predictor is the MLP
    chosen = [json.loads(r)["params"]["base_prior"] for r in on if json.loads(r)["method"] == "clp"]
    assert len(chosen) == 1
    grids_on = 1 if chosen[0] == "mlp" else 2
    # off: link/gcn/h2gcn twice (baseline + base predictor)
    assert c_off == {"fit_link": 2, "fit_gcn": 2, "fit_h2gcn": 2, "clp_grid": 2}, c_off
    assert c_on == c_rev == {"fit_link": 1, "fit_gcn": 1, "fit_h2gcn": 1, "clp_grid": grids_on}, (c_on, c_rev)


def test_link_early_stops_on_the_task_metric(monkeypatch):
    """method_link passes the task's metric to fit_link (it stopped on accuracy on ROC-AUC datasets before
    revision 1), and its revision is part of its definition."""
    import jax.numpy as jnp

    from jaxclp.experiments import candidates, methods, specs

    seen = []
    monkeypatch.setattr(methods, "fit_link", lambda *a, **k: seen.append(a[6]) or jnp.zeros((3, 2)))
    ctx = candidates.Context(graph=None, features=None, labels=jnp.zeros(3, jnp.int32), train=None, val=None,
                             num_classes=2, metric="roc_auc", key=None, priors={}, mlp_depth=1)
    methods.method_link(ctx)
    assert seen and seen[0].metric == "roc_auc"
    assert specs.method_spec("link")["revision"] == 1


def test_run_releases_compiled_executables_near_the_mapping_limit(tmp_path, monkeypatch):
    """runner.run drops JAX's compiled executables once the process holds more than MAP_FRACTION of the kernel's
    vm.max_map_count mappings: every XLA:CPU executable keeps LLVM mappings, and table_gnn died with SIGSEGV on its
    third graph before this. Below the threshold nothing is dropped."""
    import jax.numpy as jnp

    maps = progress.memory_maps()
    if maps is None:
        pytest.skip("no /proc/self/maps or vm.max_map_count here")
    held, limit = maps
    assert 0 < held < limit
    f = jax.jit(lambda v: v * 2.0)
    f(jnp.ones(3))
    # below the threshold (set at the limit itself: a test process may hold many executables already)
    monkeypatch.setattr(progress, "MAP_FRACTION", 1.0)
    assert runner.run(_dataset(), "medium", ["lp"], runs=1, out=tmp_path / "a", progress=False)
    assert f._cache_size() == 1  # kept
    assert progress.release_compiled(fraction=1.0) is False and f._cache_size() == 1
    monkeypatch.setattr(progress, "MAP_FRACTION", held / limit / 2)  # as if the process were past the threshold
    assert len(runner.run(_dataset(), "medium", ["lp"], runs=1, out=tmp_path / "b", progress=False)) == 1
    assert f._cache_size() == 0


def test_reproduce_splits_runs_a_subset_in_the_targets_order(tmp_path, monkeypatch, capsys):
    """``--splits`` (``splits=``) runs only the named split kinds of a multi-split table, in the target's own
    order (plain and † rows of table_homophily alike); a split kind the target lacks, or a one-split target, is
    a clear error before anything runs."""
    from jaxclp.experiments import cli
    from jaxclp.experiments import reproduce as R

    ran = []
    monkeypatch.setattr(R, "run", lambda name, split, *a, **k: ran.append((getattr(name, "name", name), split)))
    monkeypatch.setattr(R, "write_summary", lambda *a, **k: tmp_path / "summary.md")
    R.table4(tmp_path, datasets=["texas", "wiki"], splits=["dense"])
    assert ran == [("texas", "dense"), ("wiki", "dense")]
    ran.clear()
    R.table5(tmp_path, datasets=["acm"], splits=["dense", "sparse"])
    assert ran == [("acm", "sparse"), ("acm", "dense")]  # the target's order, not the argument's
    ran.clear()
    from jaxclp.experiments.analyses import dagger as D

    monkeypatch.setattr(R, "load", lambda name, root=None: D.load_dataset("quick-syn"))
    monkeypatch.setattr(D, "dagger_dataset", lambda ds, cfg, cache=True: (dataclasses.replace(
        ds, name=ds.name + "+dagger"), {}))
    R.table_homophily(tmp_path, datasets=["acm"], splits=["medium"])
    assert ran == [("acm", "medium"), ("quick-syn+dagger", "medium")]
    assert R.pick_splits("table_homophily") == ("sparse", "medium", "dense")
    with pytest.raises(ValueError, match="table4 has the splits sparse, dense; got medium"):
        R.pick_splits("table4", ["medium", "dense"])
    ran.clear()
    assert cli.main(["reproduce", "table4", "--splits", "medium", "--out", str(tmp_path)]) != 0
    assert "table4 has the splits sparse, dense; got medium" in capsys.readouterr().err
    assert cli.main(["reproduce", "table2", "--splits", "medium", "--out", str(tmp_path)]) != 0
    assert "--splits is for the tables with several split kinds (table4, table5, table_homophily)" in \
        capsys.readouterr().err
    assert ran == []
    assert cli.main(["reproduce", "table4", "--splits", "dense", "--datasets", "texas", "--out",
                     str(tmp_path)]) == 0
    assert ran == [("texas", "dense")]


def test_targets_over_the_same_splits_reuse_each_other(tmp_path, monkeypatch):
    from jaxclp.experiments import reproduce as R

    seen = {}
    monkeypatch.setattr(R, "run", lambda name, split, *a, reuse=(), **k: seen.setdefault((name, split), reuse))
    monkeypatch.setattr(R, "write_summary", lambda *a, **k: None)
    R.table2(tmp_path, datasets=["texas"])
    assert seen.pop(("texas", "medium")) == [tmp_path / "table_gnn"]
    R.table5(tmp_path, datasets=["acm"])
    assert seen.pop(("acm", "dense")) == [tmp_path / "table_homophily"]
    seen.clear()
    R.table_homophily(tmp_path, datasets=["acm"], dagger=False)
    assert seen[("acm", "sparse")] == [tmp_path / "table5"]
    for a, b in R.SHARES.items():
        assert all(a in R.SHARES[t] for t in b)  # symmetric


def test_progress_bar_says_what_a_long_method_is_fitting(tmp_path, monkeypatch):
    """With a progress bar the runner writes where it is into the bar's postfix: the MLP priors, then per run and
    method, and inside ``clp`` each base predictor it fits and the predictor whose CLP candidates it computes
    (candidates.status); without a bar, nothing is reported."""
    from jaxclp.experiments import candidates, methods

    seen = []

    class Bar(list):
        def set_postfix_str(self, text, refresh=True):
            seen.append(text)

    monkeypatch.setattr(runner, "_progress", lambda items, enabled, desc: Bar(items) if enabled else items)
    monkeypatch.setattr(methods, "CLP_PRIOR_CANDIDATES", ("mlp", "link"))
    monkeypatch.setattr(methods.method_clp_prior, "__defaults__",
                        (("mlp", "link"),) + methods.method_clp_prior.__defaults__[1:])
    runner.run(_dataset(), "medium", ["mlp", "clp"], runs=1, out=tmp_path / "a", epochs=5, progress=True)
    assert seen[0] == "MLP priors" and "split 1/1, method mlp" in seen and "split 1/1, method clp" in seen
    assert "split 1/1, method clp: base predictor link" in seen
    assert any(t.startswith("split 1/1, method clp: CLP candidates on ") for t in seen)
    seen.clear()
    runner.run(_dataset(), "medium", ["mlp"], runs=1, out=tmp_path / "b", epochs=5, progress=False)
    assert seen == []
    candidates.status("outside any run")  # a no-op outside reporting()
    assert seen == []


def test_a_three_split_run_compiles_no_more_programs_than_a_one_split_run(tmp_path):
    """Compile once per graph: every split of a run reuses the programs of the first (same shapes; no Python-int
    slicing or data-dependent shapes per split). Counted by JAX's own backend-compile events."""
    import collections

    counts = collections.Counter()

    def on_duration(event, secs, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            counts[kw.get("fun_name", "?")] += 1

    ds = _dataset()
    jax.monitoring.register_event_duration_secs_listener(on_duration)
    try:
        per_runs = {}
        for runs in (1, 3):
            jax.clear_caches()
            counts.clear()
            recs = runner.run(ds, "medium", ["clp"], runs=runs, out=tmp_path / str(runs), epochs=5,
                              progress=False, priors=("mlp", "link"))
            assert len(recs) == runs
            per_runs[runs] = dict(counts)
    finally:
        jax.monitoring.unregister_event_duration_listener(on_duration)
    more = {f: (per_runs[1].get(f, 0), n) for f, n in per_runs[3].items() if n > per_runs[1].get(f, 0)}
    assert sum(per_runs[1].values()) > 10  # the listener saw the run's compilations
    assert not more, f"programs compiled again for later splits (1-split count, 3-split count): {more}"


def test_header_records_each_splits_majority_class_chance(tmp_path):
    """The run's header holds, per split, the accuracy of always answering the majority class of that split's
    training labels on its test nodes (counted here by hand from the splits); result records are unchanged."""
    ds = _dataset()
    y = np.asarray(ds.labels).copy()
    y[:60] = 0  # 60 of class 0 (40 + 20 relabelled), 40 of class 1, 20 of class 2: 0 is the majority
    y[60:80] = 1
    ds = dataclasses.replace(ds, labels=y)
    out = tmp_path / "chance"
    recs = runner.run(ds, "medium", ["lp"], runs=2, out=out, epochs=5, progress=False)
    header = next(r for r in records.read_records(out / records.RESULTS_FILE) if r["type"] == "header")
    sp = runner.get_splits(ds, "medium", 2, 0)
    hand = []
    for i in range(2):
        counts = [int((y[np.asarray(sp.train[i])] == c).sum()) for c in range(3)]
        majority = counts.index(max(counts))
        test_labels = y[np.asarray(sp.test[i])]
        hand.append(sum(int(v == majority) for v in test_labels) / len(test_labels))
    assert header["chance"] == pytest.approx(hand) and all(0.3 < h < 0.7 for h in hand)
    assert all("chance" not in r for r in recs)


def test_shape_buckets_give_the_exact_shapes_records(tmp_path):
    """A run on shape buckets (the priors: MLP depths, LINK, LINKX; the propagation stages: clp's grid, LP, C&S,
    CLP*) chooses and scores as the run on the graph's own shapes (each bucketed prior, GCN and H2GCN among them:
    tests/priors/test_buckets.py; the stages' numbers: tests/core/test_padded_propagation.py); the option is part of
    the configuration only when on."""
    ds = _dataset()
    methods = ["mlp", "link", "linkx", "clp_mlp", "lp", "cs", "clp_star"]
    exact = runner.run(ds, "medium", methods, runs=1, out=tmp_path / "e", epochs=15, progress=False)
    padded = runner.run(ds, "medium", methods, runs=1, out=tmp_path / "b", epochs=15, progress=False,
                        shape_buckets=True)

    def scores(recs):
        return {(r["method"], r["run"]): (r["test"], r["val"], r["params"]) for r in recs}

    assert len(exact) == len(methods) and scores(padded) == scores(exact)
    assert padded[0]["config"]["shape_buckets"] is True and "shape_buckets" not in exact[0]["config"]
    assert padded[0]["config_hash"] != exact[0]["config_hash"]


def test_a_split_context_slices_keys_and_priors_without_a_program():
    """SplitSetup.context on the CPU: split todo[j]'s key is keys[todo[j]] and its MLP priors row j of each depth's,
    sliced on the host (no compiled program); the jitted path gives the same values."""
    ds = jaxclp.datasets.synthetic(0.3, 4, num_classes=3, nodes_per_class=20, seed=1)
    sp = runner.get_splits(ds, "medium", 3, 0)
    feats, _ = runner.node_features(ds)
    setup = runner.prepare_splits(ds, feats, sp, 3, [2, 0], 0, jaxclp.TrainConfig(epochs=3), True)
    with compiled_programs() as names:
        contexts = [setup.context(j) for j in range(2)]
    assert not names, names
    for j, (i, ctx) in enumerate(zip(setup.todo, contexts)):
        np.testing.assert_array_equal(jax.random.key_data(ctx.key), jax.random.key_data(setup.keys)[i])
        assert set(ctx.priors) == set(setup.priors)
        for d, p in setup.priors.items():
            np.testing.assert_array_equal(np.asarray(ctx.priors[d]), np.asarray(p)[j])
        key, priors = runner._split_row_jit((setup.keys, setup.priors), jax.device_put(np.asarray([i, j], np.int32)))
        np.testing.assert_array_equal(jax.random.key_data(key), jax.random.key_data(ctx.key))
        assert all(np.array_equal(np.asarray(priors[d]), np.asarray(ctx.priors[d])) for d in priors)


@pytest.mark.parametrize("seed", [0, 1, 12345, 2 ** 31 - 1, 2 ** 31 + 5])
def test_split_keys_are_the_eager_split_in_one_program(seed):
    """runner.split_keys gives split(key(seed), n)'s bits; within int32's range it compiles one program."""
    want = jax.random.key_data(jax.random.split(jax.random.key(seed), 4))
    np.testing.assert_array_equal(np.asarray(jax.random.key_data(runner.split_keys(seed, 4))), np.asarray(want))
    if seed < 2 ** 31:
        jax.clear_caches()
        with compiled_programs() as names:
            runner.split_keys(seed, 5)
        assert names == ["_split_keys_jit"], names
