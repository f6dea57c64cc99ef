"""Figure targets (experiments/analyses): binning, the prediction mirror vs the runner, and the quick
configurations of fig1, fig5 and fig6 end to end.

All quick configurations use graphs of the same shape (90 nodes, 2 features, 3 classes, 2 splits, 20 epochs), so
the MLP training loop is compiled once per test process.
"""

import json
from pathlib import Path

import numpy as np
import pytest

import jaxclp
from jaxclp.experiments import identity, records, runner
from jaxclp.experiments.analyses import common, fig1, fig5, fig6
from jaxclp.experiments.analyses.micro import load_dataset, micro_counts
from jaxclp.homophily import node_homophily_per_node


def test_homophily_bins_hand_example():
    h = [0.0, 0.04, 0.05, 0.149, 0.15, 1 / 3, 0.35, 0.5, 2 / 3, 0.94, 0.95, 1.0]
    assert common.homophily_bins(h).tolist() == [0, 0, 1, 1, 2, 3, 4, 5, 7, 9, 10, 10]
    np.testing.assert_allclose(common.bin_centers(), np.linspace(0, 1, 11))
    with pytest.raises(ValueError):
        common.homophily_bins([0.2, 1.2])
    with pytest.raises(ValueError):
        common.homophily_bins([np.nan])


def test_micro_counts_hand_example():
    # path 0-1-2-3 plus isolated node 4; labels 0 0 1 1 0 -> h_v = 1, 1/2, 1/2, 1, undefined
    g = jaxclp.Graph.from_edge_index(np.array([[0, 1, 2], [1, 2, 3]]), 5)
    y = np.array([0, 0, 1, 1, 0])
    h, has = node_homophily_per_node(g, y)
    np.testing.assert_allclose(np.asarray(h)[:4], [1.0, 0.5, 0.5, 1.0])
    pred = np.array([0, 1, 1, 1, 1])  # node 1 and node 4 wrong
    c = micro_counts(pred, y, np.ones(5, bool), h, has)
    assert c["count"] == [0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2]
    assert c["correct"] == [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 2]
    assert (c["isolated_count"], c["isolated_correct"]) == (1, 0)
    c = micro_counts(pred, y, np.array([True, True, False, False, False]), h, has)
    assert c["count"][5] == 1 and c["count"][10] == 1 and c["correct"][5] == 0 and c["isolated_count"] == 0


@pytest.mark.slow  # > 50 s on 2 loaded cores; run with -m slow
def test_mirror_matches_runner(tmp_path):
    """run_mirror must reproduce the runner's selection and scores record for record."""
    ds = load_dataset("quick-syn")
    methods = ("mlp", "lp", "clp")
    runner.run(ds, "medium", methods, 2, tmp_path / "a", epochs=20, progress=False)
    seen = []
    common.run_mirror(ds, "medium", methods, 2, tmp_path / "b", epochs=20, extra_type="x",
                      extra=lambda i, ctx, chosen, te: seen.append((i, sorted(chosen))) or {"ok": True})
    a = common.last_results(tmp_path / "a" / records.RESULTS_FILE)
    b = common.last_results(tmp_path / "b" / records.RESULTS_FILE)
    assert set(a) == set(b) and len(a) == 2 * len(methods)
    for k in a:
        assert a[k]["params"] == b[k]["params"], k
        assert a[k]["val"] == pytest.approx(b[k]["val"], abs=1e-12), k
        assert a[k]["test"] == pytest.approx(b[k]["test"], abs=1e-12), k
        assert a[k].get("references") == b[k].get("references"), k
        assert a[k]["num_candidates"] == b[k]["num_candidates"], k
    assert seen == [(0, sorted(methods)), (1, sorted(methods))]
    # resumable: a second call does nothing
    before = (tmp_path / "b" / records.RESULTS_FILE).read_text()
    common.run_mirror(ds, "medium", methods, 2, tmp_path / "b", epochs=20, extra_type="x",
                      extra=lambda *a: pytest.fail("recomputed a finished split"))
    assert (tmp_path / "b" / records.RESULTS_FILE).read_text() == before


def test_mirror_is_config_keyed(tmp_path, monkeypatch):
    """run_mirror serves only records of the current configuration and method definition: records without hashes
    (the figures' records before the mirror had them) or of another method definition make it refuse; with
    replace_stale they and the extra records of another configuration move to results.stale.jsonl and are
    recomputed; given splits are part of the configuration."""
    ds = load_dataset("quick-syn")
    out = tmp_path / "m"
    extra = lambda i, ctx, chosen, te: {"value": i}  # noqa: E731
    path = common.run_mirror(ds, "medium", ("lp",), 2, out, epochs=5, extra=extra, extra_type="x")
    recs = records.read_records(path)
    res = [r for r in recs if r.get("type") == "result"]
    assert len(res) == 2 and all(r["config_hash"] and r["method_hash"] == runner.method_hash("lp") for r in res)
    assert {r["config_hash"] for r in recs if r.get("type") == "x"} == {res[0]["config_hash"]}
    before = path.read_text()
    common.run_mirror(ds, "medium", ("lp",), 2, out, epochs=5, extra=lambda *a: pytest.fail("recomputed"),
                      extra_type="x")
    assert path.read_text() == before
    # a record written before the hashes existed: refused, then replaced
    legacy = {k: v for k, v in res[0].items() if k not in ("config", "config_hash", "method_spec", "method_hash")}
    records.append_record(path, legacy | {"test": 0.123})
    with pytest.raises(records.StaleResultsError, match="another configuration"):
        common.run_mirror(ds, "medium", ("lp",), 2, out, epochs=5, extra=extra, extra_type="x")
    common.run_mirror(ds, "medium", ("lp",), 2, out, epochs=5, extra=extra, extra_type="x", replace_stale=True)
    stale = records.read_records(out / records.STALE_FILE)
    assert [r["test"] for r in stale] == [0.123]
    last = common.last_results(path)
    assert last[(ds.name, "medium", 0, "lp")] == res[0]  # the current record stays
    # another definition of the method: stale too
    monkeypatch.setattr(runner, "method_hash", lambda m: "changed")
    with pytest.raises(records.StaleResultsError, match="another definition of method 'lp'"):
        common.run_mirror(ds, "medium", ("lp",), 2, out, epochs=5, extra=extra, extra_type="x")
    monkeypatch.undo()
    # other splits = another configuration; its extra records move with the results
    sp = runner.get_splits(ds, "medium", 2, 7)
    with records.replacing_stale():
        common.run_mirror(ds, "medium", ("lp",), 2, out, splits=sp, epochs=5, extra=extra, extra_type="x")
    moved = records.read_records(out / records.STALE_FILE)
    assert sum(r.get("type") == "x" for r in moved) == 2 and sum(r.get("type") == "result" for r in moved) == 3
    assert len({r["config_hash"] for r in records.read_records(path) if r.get("type") in ("result", "x")}) == 1


def _png_ok(path):
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_fig1_quick(tmp_path, cheap_clp_priors):
    paths = fig1(tmp_path, quick=True, progress=False)
    assert [p.name for p in paths] == ["fig1_quick.json", "fig1_quick.png"]
    assert _png_ok(paths[1])
    d = json.loads(paths[0].read_text())["datasets"]["quick-syn"]
    np.testing.assert_allclose(d["bins"], np.round(np.arange(11) * 0.1, 10))  # bins cover [0, 1]
    assert d["runs"] == 2 and d["num_test"] == [72, 72]  # 80% of 90 nodes
    counts = None
    for m, s in d["methods"].items():
        cnt = np.asarray(s["count_per_run"])
        assert cnt.shape == (2, 11)
        # every test node is in exactly one bin or isolated
        np.testing.assert_array_equal(cnt.sum(1) + np.asarray(s["isolated_count"]), d["num_test"])
        counts = cnt if counts is None else counts
        np.testing.assert_array_equal(cnt, counts)  # the same test nodes for every method
        # per-bin correct counts add up to the runner-format record's test accuracy
        np.testing.assert_allclose(s["overall_from_bins"], s["overall_from_records"], atol=1e-6)
        acc = [a for a in s["accuracy_mean"] if a is not None]
        assert acc and all(0.0 <= a <= 1.0 for a in acc)
        # a bin has a mean exactly when some split has test nodes in it
        assert [a is not None for a in s["accuracy_mean"]] == (cnt.sum(0) > 0).tolist()


def test_fig6_quick_distance_decreases_with_labels(tmp_path):
    with pytest.warns(UserWarning, match="single-class"):
        paths = fig6(tmp_path, quick=True, progress=False)
    assert _png_ok(paths[1])
    d = json.loads(paths[0].read_text())["datasets"]["quick-syn-h0"]
    H = np.asarray(d["H_true"])
    np.testing.assert_allclose(H.sum(0), 1, atol=1e-4)
    np.testing.assert_allclose(H.sum(1), 1, atol=1e-4)
    np.testing.assert_allclose(np.diag(H), 0, atol=1e-4)  # h = 0: no intra-class edge
    rows = {r["train_fraction"]: r for r in d["rows"]}
    assert sorted(rows) == [0.01, 0.1, 0.48]
    assert rows[0.01]["num_train"] == [1, 1] and rows[0.48]["num_train"] == [43, 43]
    # one training node is one class: run (the runner would refuse) but flagged, in the records and the JSON
    assert rows[0.01]["single_class_runs"] == [0, 1] and rows[0.48]["single_class_runs"] == []
    recs = common.last_results(tmp_path / "figures" / "records" / "fig6_quick" / records.RESULTS_FILE)
    for i in (0, 1):
        flag = recs[("quick-syn-h0", "1/1/98", i, "clp_mlp")]["single_class"]
        assert sorted(flag) == ["train", "validation"] and all(len(v) == 1 for v in flag.values())
        assert "single_class" not in recs[("quick-syn-h0", "48/32/20", i, "clp_mlp")]
    dist = {f: r["distance"]["mean"] for f, r in rows.items()}
    assert dist[0.48] < dist[0.1] < dist[0.01], dist
    assert dist[0.48] < 0.5 * rows[0.48]["distance_uniform"]["mean"]
    for r in rows.values():
        assert r["clp_mlp"]["n"] == 2 and 0.0 <= r["clp_mlp"]["mean"] <= 1.0
        assert "clp" not in r  # Fig. 6's CLP is CLP on the MLP prior


def test_fig5_quick_paired_differences(tmp_path, cheap_clp_priors):
    paths = fig5(tmp_path, quick=True, progress=False)
    assert _png_ok(paths[1])
    data = json.loads(paths[0].read_text())
    rows = data["rows"]
    assert sorted({r["h"] for r in rows}) == [0.0, 0.5, 1.0]
    assert {r["method"] for r in rows} == {"mlp", "clp_star", "clp", "clp_paper"}
    assert all(r["n"] == 2 and len(r["values"]) == 2 for r in rows)
    by = {(r["h"], r["method"]): r for r in rows}
    for d in data["differences"]:
        a, b = by[(d["h"], d["method"])]["values"], by[(d["h"], "clp_star")]["values"]
        np.testing.assert_allclose(d["values"], np.subtract(a, b))
    # realized homophily of the generated graphs matches the grid
    for r in rows:
        assert abs(r["h_realized"] - r["h"]) < 0.01


def _rows_match_records(rows, records_path, key):
    """Each row's values are the test scores of its runner-format records, and mean/std their sample stats."""
    recs = common.last_results(records_path)
    for r in rows:
        vals = [recs[key(r, i)]["test"] for i in range(r["n"])]
        np.testing.assert_allclose(r["values"], vals, rtol=1e-12)
        np.testing.assert_allclose(r["mean"], np.mean(vals), rtol=1e-12)
        np.testing.assert_allclose(r["std"], np.std(vals, ddof=1), rtol=1e-9, atol=1e-12)


@pytest.mark.slow  # > 50 s on 2 loaded cores; run with -m slow
def test_fig4_quick(tmp_path):
    from jaxclp.experiments.analyses import fig4

    paths = fig4(tmp_path, quick=True, progress=False)
    assert [p.name for p in paths] == ["fig4_quick.json", "fig4_quick_gaussian.png", "fig4_quick_quick-real.png"]
    assert all(_png_ok(p) for p in paths[1:])
    data = json.loads(paths[0].read_text())
    rows = data["rows"]
    gauss = {"mlp", "lp", "cs", "clp_star", "clp_mlp", "gcn"}  # Fig. 4's CLP: on the MLP prior
    assert {(r["features"], r["method"]) for r in rows} == \
        {("gaussian", m) for m in gauss} | {("quick-real", "mlp"), ("quick-real", "clp_mlp")}
    assert len(rows) == 3 * (len(gauss) + 2) and all(r["n"] == 2 for r in rows)
    assert all(abs(r["h_realized"] - r["h"]) < 0.01 for r in rows)  # the generator hits the grid
    _rows_match_records(rows, Path(data["records"]), lambda r, i: (r["dataset"], r["split"], i, r["method"]))
    by = {(r["features"], r["h"], r["method"]): r["mean"] for r in rows}
    # structure-only LP and Kipf's GCN (the paper's; the `gcn` method) follow homophily: both gain a lot from
    # h = 0 to h = 1 (the tuned, residual `gcn_tuned` keeps the features' accuracy at h = 0 instead).
    assert by[("gaussian", 1.0, "lp")] > by[("gaussian", 0.0, "lp")] + 0.3
    assert by[("gaussian", 1.0, "gcn")] > by[("gaussian", 0.0, "gcn")] + 0.2


@pytest.mark.slow  # > 50 s on 2 loaded cores; run with -m slow
def test_fig7_quick_parameter_counts_and_compile_split(tmp_path):
    from jaxclp.experiments.analyses import fig7

    paths = fig7(tmp_path, quick=True, progress=False)
    assert [p.name for p in paths] == ["fig7_quick.json", "fig7_quick.md", "fig7_quick.png"]
    assert _png_ok(paths[2])
    rows = {(r["model"], r["variant"]): r for r in json.loads(paths[0].read_text())["rows"]}
    d, k = 2, 3  # quick-syn: 2-D Gaussian features, 3 classes
    linear, two = d * k + k, (d * 16 + 16) + (16 * k + k)
    for model in ("mlp", "clp_paper", "clp", "gcn"):  # CLP adds no parameters to its MLP; GCN has the same W's
        assert rows[(model, "linear")]["params"] == linear == 9
        assert rows[(model, "2-layer")]["params"] == two == 99
    # H2GCN p=8, R=1: embedding d x p (no bias), 1 round gives 2p, final concat p + 2p -> classifier 3p x k + k
    assert rows[("h2gcn", "p=8, R=1")]["params"] == d * 8 + 3 * 8 * k + k == 91
    for r in rows.values():
        assert r["compile_seconds"] == pytest.approx(r["first_call_seconds"] - r["second_call_seconds"])
        assert len(r["run_seconds_values"]) == 2 and r["test"]["n"] == 2
        assert 0.0 <= r["test"]["mean"] <= 1.0


def test_clp_dagger_embeddings_against_dense_numpy():
    from jaxclp.experiments.analyses.dagger import diffusion_embedding, load_dataset, spectral_embedding

    ds = load_dataset("quick-syn")
    a = np.asarray(ds.graph.to_scipy("none").todense(), np.float64)
    np.fill_diagonal(a, 0.0)
    a = (a + a.T) / 2
    deg = a.sum(1)
    dinv = np.where(deg > 0, 1 / np.sqrt(np.where(deg > 0, deg, 1)), 0)
    s = dinv[:, None] * a * dinv[None, :]
    w, v = np.linalg.eigh(s)
    assert w[-4] - w[-5] > 1e-3  # the top-4 subspace is well defined
    got = spectral_embedding(ds.graph, 4)
    # same subspace as the 4 largest eigenvalues of D^-1/2 A D^-1/2 (smallest of the normalized Laplacian)
    np.testing.assert_allclose(np.linalg.svd(got.T @ v[:, -4:], compute_uv=False), 1.0, atol=1e-6)
    x = np.asarray(ds.features, np.float64)  # 2 columns <= svd_dim: no SVD
    a1 = a + np.eye(len(a))
    d1 = 1 / np.sqrt(a1.sum(1))
    step = 0.5 * np.eye(len(a)) + 0.5 * d1[:, None] * a1 * d1[None, :]
    np.testing.assert_allclose(diffusion_embedding(ds.graph, x, 2, steps=10, alpha=0.5),
                               np.linalg.matrix_power(step, 10) @ x, rtol=1e-10, atol=1e-12)


def test_clp_dagger_sparse_features_stay_sparse_and_match_dense():
    import dataclasses

    import scipy.sparse as sp

    from jaxclp.experiments.analyses.dagger import QUICK_DAGGER, dagger_dataset, diffusion_embedding, load_dataset

    ds = load_dataset("quick-syn")
    rng = np.random.default_rng(0)
    x = rng.random((ds.num_nodes, 12)) * (rng.random((ds.num_nodes, 12)) < 0.3)  # 30 % nonzeros
    xs = sp.csr_matrix(x)
    # the rank-5 SVD of a sparse X equals the dense one's up to the sign of each singular vector (the diffusion
    # is linear, so each diffused column is +- the other's)
    zd, zs = diffusion_embedding(ds.graph, x, 5), diffusion_embedding(ds.graph, xs, 5)
    np.testing.assert_allclose(np.abs(zs), np.abs(zd), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(np.abs((zs * zd).sum(0)) / np.linalg.norm(zs, axis=0) / np.linalg.norm(zd, axis=0),
                               1.0, atol=1e-9)
    dense, _ = dagger_dataset(dataclasses.replace(ds, features=x.astype(np.float32)), QUICK_DAGGER)
    sparse, info = dagger_dataset(dataclasses.replace(ds, features=xs.astype(np.float32)), QUICK_DAGGER)
    assert sp.issparse(sparse.features) and sparse.features.shape == dense.features.shape == (ds.num_nodes, 12 + 4 + 2)
    assert info["dagger_dim"] == 18 and sparse.name == "quick-syn+dagger"
    got = sparse.features.toarray()
    np.testing.assert_array_equal(got[:, :16], dense.features[:, :16])  # X and the spectral block are identical
    np.testing.assert_allclose(np.abs(got[:, 16:]), np.abs(dense.features[:, 16:]), atol=1e-4)  # SVD signs


def test_clp_dagger_block_scale():
    """``block_scale="x_std"``: the appended standardized columns take X's mean column std (numpy, dense and CSR
    alike); ``"unit"`` (the default, every committed † record) leaves them at unit variance."""
    import dataclasses

    import scipy.sparse as sp

    from jaxclp.experiments.analyses.dagger import QUICK_DAGGER, block_scale, dagger_dataset, load_dataset

    ds = load_dataset("quick-syn")
    rng = np.random.default_rng(1)
    x = (rng.random((ds.num_nodes, 12)) < 0.2).astype(np.float32)  # binary, like bag-of-words
    want = float(x.astype(np.float64).std(axis=0).mean())
    assert block_scale(x, "x_std") == pytest.approx(want, rel=1e-12)
    assert block_scale(sp.csr_matrix(x), "x_std") == pytest.approx(want, rel=1e-9)
    assert block_scale(x, "unit") == 1.0 and block_scale(np.zeros((3, 2)), "x_std") == 1.0
    with pytest.raises(ValueError, match="block_scale must be"):
        block_scale(x, "huge")
    assert QUICK_DAGGER.block_scale == "unit"
    unit, _ = dagger_dataset(dataclasses.replace(ds, features=x), QUICK_DAGGER)
    scaled, info = dagger_dataset(dataclasses.replace(ds, features=x), dataclasses.replace(QUICK_DAGGER,
                                                                                         block_scale="x_std"))
    assert info["block_scale"] == pytest.approx(want, rel=1e-12)
    np.testing.assert_array_equal(scaled.features[:, :12], x)
    np.testing.assert_allclose(unit.features[:, 12:].std(axis=0), 1.0, rtol=1e-4)
    np.testing.assert_allclose(scaled.features[:, 12:], want * unit.features[:, 12:], rtol=1e-6, atol=1e-7)


def test_clp_dagger_blocks_cache(tmp_path, monkeypatch):
    """The † blocks are cached per (recipe, source arrays): a second call serves the same bits without computing
    (the eigensolver is disabled), a foreign or damaged entry is recomputed with a warning, another recipe or
    another X is another entry, and ``cache=False`` writes nothing."""
    import dataclasses

    from jaxclp.experiments.analyses import dagger as D

    ds = D.load_dataset("quick-syn")
    cache = tmp_path / "c"
    a, ia = D.dagger_dataset(ds, D.QUICK_DAGGER, cache=cache)
    (entry,) = (cache / "dagger").glob("*.npz")
    assert entry.name == f"quick-syn+dagger-{D.blocks_key(ds, D.QUICK_DAGGER)}.npz" and ia["from_cache"] is False

    def boom(*args, **kw):
        raise AssertionError("recomputed")

    monkeypatch.setattr(D, "spectral_embedding", boom)
    b, ib = D.dagger_dataset(ds, D.QUICK_DAGGER, cache=cache)
    assert ib["from_cache"] is True and ib["block_scale"] == ia["block_scale"]
    np.testing.assert_array_equal(a.features, b.features)

    assert identity.dataset_sha256(a) == identity.dataset_sha256(b)
    # another recipe or another X: another key (nothing served across them)
    assert D.blocks_key(ds, dataclasses.replace(D.QUICK_DAGGER, block_scale="x_std")) != entry.stem.split("-")[-1]
    other = dataclasses.replace(ds, features=np.asarray(ds.features) * 2)
    assert D.blocks_key(other, D.QUICK_DAGGER) != D.blocks_key(ds, D.QUICK_DAGGER)
    monkeypatch.undo()
    # an entry renamed under this key (another dataset's blocks) is not served
    entry.unlink()
    D.dagger_dataset(other, D.QUICK_DAGGER, cache=cache)
    (other_entry,) = (cache / "dagger").glob("*.npz")
    other_entry.rename(entry)
    with pytest.warns(UserWarning, match="not served"):
        c, ic = D.dagger_dataset(ds, D.QUICK_DAGGER, cache=cache)
    assert ic["from_cache"] is False
    np.testing.assert_array_equal(a.features, c.features)
    (cache / "dagger" / entry.name).write_bytes(b"damaged")
    with pytest.warns(UserWarning, match="not served"):
        D.dagger_dataset(ds, D.QUICK_DAGGER, cache=cache)
    n = len(list((cache / "dagger").glob("*.npz")))
    d, _ = D.dagger_dataset(ds, D.QUICK_DAGGER, cache=False)
    np.testing.assert_array_equal(a.features, d.features)
    assert len(list((cache / "dagger").glob("*.npz"))) == n


@pytest.mark.slow  # > 50 s on 2 loaded cores; run with -m slow
def test_clp_dagger_quick(tmp_path):
    from jaxclp.experiments.analyses import clp_dagger

    paths = clp_dagger(tmp_path, quick=True, progress=False)
    assert [p.name for p in paths] == ["clp_dagger_quick.json", "clp_dagger_quick.md", "clp_dagger_quick.png"]
    assert _png_ok(paths[2])
    d = json.loads(paths[0].read_text())["datasets"]["quick-syn"]
    assert d["features"]["dagger_dim"] == 2 + 4 + 2  # X, 4 eigenvectors, 2 diffusion columns
    for m in ("mlp", "clp"):
        plain, dagger, diff = d[m], d[f"{m}_dagger"], d[f"{m}_dagger_minus_plain"]
        assert plain["n"] == dagger["n"] == 2
        np.testing.assert_allclose(diff["values"], np.subtract(dagger["values"], plain["values"]))  # paired
