"""Per-method definitions in the records' key (jaxclp.experiments.specs): a changed grid or revision makes a
method's old records stale instead of being served as the new method's."""

from __future__ import annotations

import json

import numpy as np
import pytest

import jaxclp
from jaxclp.experiments import methods, records, runner, specs


def _dataset():
    return jaxclp.datasets.synthetic(h=0.2, avg_degree=5, num_classes=3, nodes_per_class=20, seed=0)


def test_every_method_has_a_json_spec_and_a_stable_hash():
    for m in methods.METHODS:
        spec = specs.method_spec(m)
        assert spec["method"] == m and spec["function"].endswith(methods.METHODS[m].__name__)
        assert json.loads(json.dumps(spec)) == spec
        assert specs.method_hash(m) == specs.method_hash(m) and len(specs.method_hash(m)) == 12
    # the grids are the module constants, read at call time
    assert specs.method_spec("lp")["grid"]["alphas"] == list(methods.ALPHAS)
    assert specs.method_spec("clp")["grid"]["spectral_alphas"] == list(methods.SPECTRAL_ALPHAS)
    assert specs.method_spec("clp")["grid"]["authors"]["echo"] == [False]
    assert specs.method_spec("clp_authors")["grid"]["echo"] == [False, True]
    assert specs.method_spec("clp")["grid"]["mlp_depths"] == list(runner.MLP_DEPTHS)
    # clp = clp_mlp's grid + the base priors (the tuned GNN priors with table_gnn's recipe): same candidates per prior
    assert specs.method_spec("clp")["grid"] == specs.method_spec("clp_mlp")["grid"] | {
        "priors": list(methods.CLP_PRIOR_CANDIDATES), "selection": "select_prior_first",
        "tuned_priors": specs.method_spec("sage")["grid"] | {"rungs": [50, 100, 200], "rungs_min_val": 500}}
    assert specs.method_spec("clp")["revision"] == 3 and specs.method_spec("clp_mlp")["revision"] == 0
    assert "mlp_depths" not in specs.method_spec("link")["grid"]
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        specs.method_spec("nope")


def test_a_grid_constant_or_revision_changes_only_that_methods_hash(monkeypatch):
    before = {m: specs.method_hash(m) for m in methods.METHODS}
    monkeypatch.setattr(methods, "CS_SCALES", (1.0, 10.0))
    assert specs.method_hash("cs") != before["cs"]
    assert {m: specs.method_hash(m) for m in methods.METHODS if m != "cs"} == {
        m: h for m, h in before.items() if m != "cs"}
    monkeypatch.setattr(specs, "REVISIONS", {**specs.REVISIONS, "lp": specs.REVISIONS.get("lp", 0) + 1})
    assert specs.method_hash("lp") != before["lp"] and specs.method_hash("link") == before["link"]
    # distinct methods have distinct definitions
    assert len(set(before.values())) == len(before)


def test_resume_skips_only_records_of_the_same_method_definition(tmp_path, monkeypatch):
    ds = _dataset()
    out = tmp_path / "o"
    path = out / records.RESULTS_FILE
    recs = runner.run(ds, "medium", ["lp", "link"], runs=1, out=out, epochs=3, progress=False)
    assert {r["method"]: r["method_hash"] for r in recs} == {"lp": specs.method_hash("lp"),
                                                            "link": specs.method_hash("link")}
    assert all(r["method_spec"] == specs.method_spec(r["method"]) for r in recs)
    assert runner.run(ds, "medium", ["lp", "link"], runs=1, out=out, epochs=3, progress=False) == []
    # lp's grid changes: its record is stale (refused, nothing written), link's is not
    monkeypatch.setattr(methods, "ALPHAS", (0.3, 0.6))
    before = path.read_text()
    with pytest.raises(records.StaleResultsError, match=r"another definition of method 'lp' \(grid.alphas: "
                                                       r"\[0\.1, .*\] -> \[0\.3, 0\.6\]"):
        runner.run(ds, "medium", ["lp"], runs=1, out=out, epochs=3, progress=False)
    assert path.read_text() == before
    assert runner.run(ds, "medium", ["link"], runs=1, out=out, epochs=3, progress=False) == []
    new = runner.run(ds, "medium", ["lp"], runs=1, out=out, epochs=3, progress=False, replace_stale=True)
    assert [r["params"]["alpha"] in (0.3, 0.6) for r in new] == [True]
    assert [r["method"] for r in records.read_records(out / records.STALE_FILE)] == ["lp"]
    kept = [r for r in records.read_records(path) if r.get("type") == "result"]
    assert sorted(r["method"] for r in kept) == ["link", "lp"]
    assert {r["method_hash"] for r in kept if r["method"] == "lp"} == {specs.method_hash("lp")}


def test_records_without_a_method_hash_count_as_another_definition(tmp_path):
    ds = _dataset()
    out = tmp_path / "o"
    recs = runner.run(ds, "medium", ["lp"], runs=1, out=out, epochs=3, progress=False)
    old = {k: v for k, v in recs[0].items() if k not in ("method_hash", "method_spec")}
    path = out / records.RESULTS_FILE
    path.write_text(json.dumps(old) + "\n")
    with pytest.raises(records.StaleResultsError, match="no method definition recorded"):
        runner.run(ds, "medium", ["lp"], runs=1, out=out, epochs=3, progress=False)
    np.testing.assert_equal(len(records.read_records(path)), 1)


def test_tuned_gnn_grid_uses_platonovs_blocks_and_its_hash_sees_them(monkeypatch):
    """Residual + LayerNorm candidates carry the feed-forward layer (GNN_FFN), plain ones do not; turning it off is
    another definition of every tuned GNN (their old records become stale) and of `clp` (its tuned GNN priors), of
    no other method."""
    grid = methods.gnn_grid("gat", sep=True)
    assert sorted((s.num_layers, s.residual, s.ffn) for s in grid) == sorted(
        [(d, True, True) for d in range(1, 6)] + [(d, False, False) for d in (1, 2, 3)])
    assert all(s.sep and s.heads == 4 and s.hidden == methods.GNN_HIDDEN for s in grid)
    assert specs.method_spec("sage")["grid"]["ffn"] is True
    tuned = ("gcn_tuned", "sage", "gat", "gat_sep", "gcn_sep")
    before = {m: specs.method_hash(m) for m in methods.METHODS}
    monkeypatch.setattr(methods, "GNN_FFN", False)
    assert not any(s.ffn for s in methods.gnn_grid("sage"))
    after = {m: specs.method_hash(m) for m in methods.METHODS}
    assert {m for m in before if before[m] != after[m]} == set(tuned) | {"clp"}


def test_a_changed_numeric_default_changes_every_method_hash(monkeypatch):
    """The method hash derives from the numeric stages' defaults (Sinkhorn's tolerance here): changing one changes
    the hash of every method, so records made with the old default are stale without a REVISIONS bump; the
    current defaults are the snapshot the committed records were made with (their hashes unchanged)."""
    import importlib
    import inspect

    assert specs.changed_numerics() == {}
    before = {m: specs.method_hash(m) for m in ("clp", "clp_mlp", "lp", "gcn")}
    sk = importlib.import_module("jaxclp.sinkhorn")
    real = sk.sinkhorn
    params = [p.replace(default=1e-5) if p.name == "tol" else p for p in inspect.signature(real).parameters.values()]

    def looser(*args, **kwargs):
        return real(*args, **kwargs)

    looser.__signature__ = inspect.Signature(params)
    monkeypatch.setattr(sk, "sinkhorn", looser)
    assert specs.changed_numerics() == {"sinkhorn.sinkhorn": {"tol": 1e-5, "max_iters": 100000, "smoothing": 1e-6}}
    after = {m: specs.method_hash(m) for m in before}
    assert all(after[m] != before[m] for m in before)
    assert specs.method_spec("clp")["grid"]["numerics"]["sinkhorn.sinkhorn"]["tol"] == 1e-5
