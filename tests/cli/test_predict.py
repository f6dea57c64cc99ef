"""``jaxclp predict`` (``jaxclp.experiments.predict``): every labelled node used, every node predicted."""

import csv
import json

import numpy as np
import pytest

from jaxclp.datasets import load_file
from jaxclp.experiments import cli
from jaxclp.experiments.predict import predict, write_predictions


def _two_cliques(tmp_path, label_rows):
    """Two 6-cliques (nodes 10..15 and 20..25) joined by the edge 15-20; labels as given."""
    edges = [(a, b) for c in (10, 20) for a in range(c, c + 6) for b in range(a + 1, c + 6)] + [(15, 20)]
    (tmp_path / "e.csv").write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in edges))
    (tmp_path / "y.csv").write_text("node,label\n" + "".join(f"{n},{v}\n" for n, v in label_rows))
    return tmp_path / "e.csv", tmp_path / "y.csv"


def test_predict_label_propagation_on_two_cliques(tmp_path):
    """Label propagation from 3 labelled nodes per clique gives every unlabelled node its clique's label (by
    hand: a clique's nodes are connected to its labelled nodes only through the clique, the bridge is one edge);
    the CSV lists every node with its role, the user's label values and scores summing to 1."""
    rows = [(n, "ant" if n < 20 else "bee") if n in (10, 11, 12, 21, 22, 23) else (n, "?")
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    with pytest.warns(UserWarning, match="6 of 12 node"):
        ds = load_file(e, labels=y)
    pred = predict(ds, "lp", val_fraction=0.34, seed=0)
    assert list(pred.classes) == ["ant", "bee"]
    got = dict(zip(ds.node_ids.tolist(), pred.classes[pred.predicted].tolist()))
    assert got == {n: "ant" if n < 20 else "bee" for n in got}
    assert pred.val.sum() == 2 and pred.train.sum() == 4 and pred.val_score == 1.0
    np.testing.assert_allclose(pred.scores.sum(axis=1), 1.0)
    path, side = write_predictions(pred, tmp_path / "out" / "p.csv", argv=["jaxclp", "predict"])
    with open(path) as f:
        table = list(csv.DictReader(f))
    assert [r["node"] for r in table] == [str(n) for n in ds.node_ids]
    assert {r["node"]: r["role"] for r in table if r["role"] != "unlabelled"}.keys() == {"10", "11", "12", "21",
                                                                                            "22", "23"}
    assert all(r["label"] == "" for r in table if r["role"] == "unlabelled")
    assert all(r["predicted"] == ("ant" if int(r["node"]) < 20 else "bee") for r in table)
    assert list(table[0])[-2:] == ["score_ant", "score_bee"]
    info = json.loads(side.read_text())
    assert info["method"] == "lp" and info["num_unlabelled"] == 6 and info["classes"] == ["ant", "bee"]
    assert info["params"] == pred.params and "alpha" in info["params"]
    # the refit: the chosen alpha propagates again from the 6 labelled nodes, validation included (numpy: LP's
    # closed form (1 - a)(I - a D^-1/2 A D^-1/2)^-1 Y, rows normalized); without it, from the 4 training nodes
    # (what the validation score measured)
    assert pred.refit and info["refit"] and pred.explain().endswith("; final labels propagated from all 6 labelled nodes")
    kept = predict(ds, "lp", val_fraction=0.34, seed=0, refit=False)
    assert not kept.refit and kept.params == pred.params and kept.val_score == pred.val_score
    a = float(pred.params["alpha"])
    adj = np.zeros((12, 12))
    ids = {v: i for i, v in enumerate(ds.node_ids.tolist())}
    for ln in e.read_text().split()[1:]:
        u, v = (ids[int(t)] for t in ln.split(","))
        adj[u, v] = adj[v, u] = 1
    s = adj / np.sqrt(np.outer(adj.sum(1), adj.sum(1)))
    for p, fed in ((pred, pred.train | pred.val), (kept, kept.train)):
        ref = (1 - a) * np.linalg.solve(np.eye(12) - a * s, np.eye(2)[np.asarray(ds.labels)] * fed[:, None])
        np.testing.assert_allclose(p.scores, ref / ref.sum(1, keepdims=True), atol=1e-5)  # solver tol 1e-6
    assert np.abs(pred.scores - kept.scores).max() > 1e-4


def test_predict_says_when_the_refit_was_refused(tmp_path, monkeypatch):
    """Where the chosen alpha is past the convergence bound of the operator built from every labelled node
    (``refit_candidate`` says ``refused``), the training-only scores are kept and the sentence and sidecar say so."""
    import jaxclp.experiments.predict as P
    from jaxclp.experiments import refit

    rows = [(n, 0 if n < 20 else 1) if n in (10, 11, 12, 21, 22, 23) else (n, -1)
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    with pytest.warns(UserWarning):
        ds = load_file(e, labels=y)
    kept = predict(ds, "lp", val_fraction=0.34, seed=0, refit=False)
    monkeypatch.setattr(P, "refit_candidate", lambda *a: refit.Refit(None, refused=True))
    pred = predict(ds, "lp", val_fraction=0.34, seed=0)
    assert (pred.refit, pred.refit_refused, kept.refit_refused) == (False, True, False)
    np.testing.assert_array_equal(pred.scores, kept.scores)
    assert pred.explain().endswith(f"; final labels propagated from the training nodes only: alpha "
                                   f"{pred.params['alpha']} is past the convergence bound of the operator built "
                                   "from all 6 labelled nodes")
    _, side = write_predictions(pred, tmp_path / "p.csv")
    assert json.loads(side.read_text())["refit_refused"] is True


def test_refit_candidate_with_the_training_nodes_gives_back_each_candidate(rng):
    """``refit_candidate`` parses every kind of candidate key (CLP's closed form, L1 and spectrally scaled variants,
    the authors' step at its chosen layer, ``clp``'s base-prior keys, C&S, LP) into the one computation that made
    it: given the training nodes it returns the candidate (to the solvers' tolerance, 1e-6), given more labels it
    differs."""
    import jax
    import jax.numpy as jnp

    import jaxclp
    from jaxclp.experiments import candidates, methods as M, refit

    n, k = 40, 3
    y = rng.integers(0, k, n)
    g = jaxclp.Graph.from_edge_index(rng.integers(0, n, (2, 160)), n)  # symmetrized, loops dropped
    role = rng.permutation(n)
    train, val = np.isin(np.arange(n), role[:16]), np.isin(np.arange(n), role[16:26])
    prior = jax.nn.softmax(jnp.asarray(rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y]))
    ctx = candidates.Context(graph=g, features=None, labels=jnp.asarray(candidates.visible_labels(y, train, val)),
                             train=jnp.asarray(train), val=jnp.asarray(val), num_classes=k, metric="accuracy", key=None,
                             priors={1: prior}, mlp_depth=1)
    grid = M.method_clp(ctx, variants=(("sym", False, "mlp"), ("row", True, "b0")), authors=False)
    grid |= M.method_clp_authors(ctx, echo=(False,), alphas=(0.4, 1.0), num_layers=5)  # method_clp's keys, fewer
    kinds = {}
    for key in grid:
        kinds.setdefault(key[1] if key[3] != "authors" else "authors", []).append(key)
    assert set(kinds) == {"sym", "row", "sym/rho", "row/rho", "authors"}
    picked = [(m, key, grid) for ks in kinds.values() for key in (ks[0], ks[-1]) for m in ("clp_mlp",)]
    clp = candidates.Candidates({("base_prior", "mlp") + key: v for key, v in grid.items()}, references={"mlp": prior})
    picked += [("clp", ("base_prior", "mlp") + kinds["authors"][7], clp), ("clp", ("base_prior", "mlp") + kinds["sym"][3], clp)]
    cs, lp = M.method_cs(ctx), M.method_lp(ctx)
    picked += [("cs", key, cs) for key in list(cs)[::7]] + [("lp", key, lp) for key in list(lp)[::4]]
    both = jnp.asarray(train | val)
    for method, key, cands in picked:
        got = refit.refit_candidate(ctx, method, key, cands, ctx.train)
        assert not got.refused
        got = got.scores
        np.testing.assert_allclose(np.asarray(got), np.asarray(cands[key]), rtol=0, atol=2e-6,  # solver tol 1e-6
                                   err_msg=f"{method} {key}")
        more = refit.refit_candidate(ctx, method, key, cands, both).scores
        assert np.abs(np.asarray(more) - np.asarray(cands[key])).max() > 1e-3, (method, key)
    assert refit.refit_candidate(ctx, "clp", ("base_prior", "mlp", "alpha", 0.0), clp, both) == (None, False)
    assert refit.refit_candidate(ctx, "mlp", ("depth", 1), {("depth", 1): prior}, both) == (None, False)


def test_cli_predict(tmp_path, capsys):
    rows = [(n, 0 if n < 20 else 1) if n in (10, 11, 12, 21, 22, 23) else (n, -1)
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    out = tmp_path / "pred.csv"
    with pytest.warns(UserWarning):
        assert cli.main(["predict", "--graph", str(e), "--labels", str(y), "--method", "lp", "--val-fraction",
                         "0.34", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert str(out) in printed and "6 unlabelled" in printed and "lp chose" in printed
    with open(out) as f:
        assert [r["predicted"] for r in csv.DictReader(f)] == ["0"] * 6 + ["1"] * 6
    assert json.loads(out.with_suffix(".json").read_text())["argv"][:2] == ["jaxclp", "predict"]
    with pytest.warns(UserWarning):  # the choice by validation ROC-AUC (two classes): the same labels here
        assert cli.main(["predict", "--graph", str(e), "--labels", str(y), "--method", "lp", "--val-fraction",
                         "0.34", "--metric", "roc_auc", "--out", str(out)]) == 0
    assert "validation roc_auc" in capsys.readouterr().out
    with open(out) as f:
        assert [r["predicted"] for r in csv.DictReader(f)] == ["0"] * 6 + ["1"] * 6
    assert cli.main(["predict", "--dataset", "texas", "--labels", str(y), "--weighted", "--out", str(out)]) == 2
    assert "--labels, --weighted only apply to --graph FILE" in capsys.readouterr().err
    # --weighted: a third column; the bridge made light, the cliques heavy, the same labels come out
    e.write_text("".join(f"{ln},{0.01 if ln == '15,20' else 5}\n" for ln in e.read_text().split()[1:]))
    with pytest.warns(UserWarning):
        assert cli.main(["predict", "--graph", str(e), "--labels", str(y), "--weighted", "--method", "lp",
                         "--val-fraction", "0.34", "--out", str(out)]) == 0
    with open(out) as f:
        assert [r["predicted"] for r in csv.DictReader(f)] == ["0"] * 6 + ["1"] * 6


def test_cli_predict_reports_what_it_fits(tmp_path, capsys, monkeypatch):
    """`jaxclp predict` prints the methods' status lines (clp's base predictors) to stderr; --no-progress not."""
    from jaxclp.experiments import candidates, methods

    lp = methods.METHODS["lp"]

    def reporting_lp(ctx, *a, **k):
        candidates.status("base predictor demo")
        return lp(ctx, *a, **k)

    monkeypatch.setitem(methods.METHODS, "lp", reporting_lp)
    rows = [(n, 0 if n < 20 else 1) if n in (10, 11, 12, 21, 22, 23) else (n, -1)
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    args = ["predict", "--graph", str(e), "--labels", str(y), "--method", "lp", "--val-fraction", "0.34",
            "--out", str(tmp_path / "pred.csv")]
    with pytest.warns(UserWarning):
        assert cli.main(args) == 0
    assert "jaxclp: lp: base predictor demo" in capsys.readouterr().err
    with pytest.warns(UserWarning):
        assert cli.main(args + ["--no-progress"]) == 0
    assert "base predictor demo" not in capsys.readouterr().err


def test_predict_few_labels_one_class_validation(tmp_path, capsys):
    """With 3 labelled nodes per clique and one validation node, validation would hold one class on every
    seed: the hold-out moves a node of the other class over (both cliques still train), so predict runs; where
    no other class can spare a node the error names the user's label and what to do."""
    rows = [(n, "ant" if n < 20 else "bee") if n in (10, 11, 12, 21, 22, 23) else (n, "?")
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    with pytest.warns(UserWarning):
        ds = load_file(e, labels=y)
    for seed in range(3):
        pred = predict(ds, "lp", val_fraction=0.1, seed=seed)
        assert pred.val.sum() == 2 and set(pred.classes[np.asarray(ds.labels)[pred.val]]) == {"ant", "bee"}
        assert pred.classes[pred.predicted].tolist() == ["ant"] * 6 + ["bee"] * 6
    rows = [(n, "ant" if n < 20 else "bee") if n in (10, 11, 12, 21) else (n, "?")
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    with pytest.warns(UserWarning):
        assert cli.main(["predict", "--graph", str(e), "--labels", str(y), "--method", "lp", "--out",
                         str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err
    assert "every validation node has label ['ant']" in err and "label more nodes of another class" in err


def _fake_clp(prior_scores, propagated_scores, skipped=()):
    """A method shaped like ``clp`` (candidates keyed by base prior, the prior alone a reference, the prior-first
    rule) with the given (n, K) scores: LINK alone, and CLP on LINK at alpha 0.5."""
    from jaxclp.experiments import candidates

    def method(ctx):
        cands = candidates.Candidates({("base_prior", "link", "alpha", 0.0): prior_scores,
                                       ("base_prior", "link", "alpha", 0.5): propagated_scores},
                                      references={"link": prior_scores}, rule=candidates.select_prior_first)
        if skipped:
            cands.skipped = list(skipped)
        return cands

    return method


def test_predict_says_which_predictor_made_the_labels(tmp_path, monkeypatch, capsys):
    """``predict`` says in a sentence which base predictor produced the labels and what CLP's propagation added on
    validation (its validation score before -> after), or that it did not beat the predictor (alpha = 0); the
    sentence is printed and kept in the JSON sidecar, with the predictors left out for time."""
    from jaxclp.experiments import methods

    rows = [(n, 0 if n < 20 else 1) if n in (10, 11, 12, 21, 22, 23) else (n, -1)
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    with pytest.warns(UserWarning):
        ds = load_file(e, labels=y)
    n = ds.num_nodes
    truth = (np.asarray(ds.node_ids) >= 20).astype(int)
    right = np.eye(2)[truth]
    wrong = np.eye(2)[1 - truth]
    half = np.full((n, 2), 0.5)
    # the prior right on the first clique only: validation (one node of each clique) 0.5; propagation: 1.0
    prior = np.where((truth == 0)[:, None], right, wrong)
    monkeypatch.setitem(methods.METHODS, "clp", _fake_clp(prior, right))
    pred = predict(ds, "clp", val_fraction=0.34, seed=0, refit=False)
    assert (pred.base_prior, pred.prior_val_score, pred.val_score) == ("link", 0.5, 1.0)
    # chance: the training labels hold two nodes of each class (tie: class 0), one of the 2 validation nodes is 0
    assert pred.chance == 0.5
    assert pred.explain() == ("labels from CLP's propagation on top of LINK: validation accuracy 0.50 -> 1.00 on 2 "
                              "nodes (alpha 0.5); +0.50 over chance (always the majority class: 0.50 on the "
                              "validation nodes)")
    monkeypatch.setitem(methods.METHODS, "clp", _fake_clp(right, half, skipped=("gcn_tuned",)))
    pred = predict(ds, "clp", val_fraction=0.34, seed=0)
    assert pred.params["alpha"] == 0.0 and pred.prior_val_score == pred.val_score == 1.0
    assert pred.explain() == ("labels from LINK alone (validation accuracy 1.00 on 2 nodes): CLP's propagation did "
                              "not beat it on validation, so alpha = 0; +0.50 over chance (always the majority "
                              "class: 0.50 on the validation nodes); left out for the time limit: gcn_tuned")
    out = tmp_path / "p.csv"
    with pytest.warns(UserWarning):
        assert cli.main(["predict", "--graph", str(e), "--labels", str(y), "--val-fraction", "0.34", "--out",
                         str(out), "--metric", "accuracy"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == pred.explain()  # between the CSV's and the JSON's path
    info = json.loads(out.with_suffix(".json").read_text())
    assert info["explanation"] == pred.explain() and info["base_prior"] == "link" and info["skipped"] == ["gcn_tuned"]
    lp = predict(ds, "lp", val_fraction=0.34, seed=0)  # any other method: its name and validation score
    assert lp.base_prior is None and lp.explain().startswith("labels from lp (validation accuracy 1.00 on 2 nodes, ")


def test_predict_passes_priors_and_time_limit_to_the_context(tmp_path, monkeypatch):
    from jaxclp.experiments import methods

    rows = [(n, 0 if n < 20 else 1) if n in (10, 11, 12, 21, 22, 23) else (n, -1)
            for n in list(range(10, 16)) + list(range(20, 26))]
    e, y = _two_cliques(tmp_path, rows)
    with pytest.warns(UserWarning):
        ds = load_file(e, labels=y)
    seen = []
    lp = methods.METHODS["lp"]
    monkeypatch.setitem(methods.METHODS, "lp", lambda ctx: seen.append((ctx.base_priors, ctx.time_limit)) or lp(ctx))
    predict(ds, "lp", val_fraction=0.34)
    predict(ds, "lp", val_fraction=0.34, priors=["link", "mlp"], time_limit=12)
    assert seen == [(None, None), (("link", "mlp"), 12.0)]
    with pytest.raises(ValueError, match=r"unknown base predictor\(s\) \['mpl'\]"):
        predict(ds, "lp", priors="mpl")


def _clp_record(dataset, data, base_prior, run, method="clp"):
    """A result record as a run writes it, with only what :func:`previous_priors` reads."""
    return {"type": "result", "method": method, "dataset": dataset, "run": run, "config": {"data": data},
            "params": {"base_prior": base_prior, "alpha": 0.5}}


def test_previous_priors_counts_the_choices_of_clp_on_the_same_data(tmp_path):
    """A run's clp choices of the same data, counted per base predictor in the search's order (cheap first);
    other data, other methods, records without a choice and a torn last line are not counted; no file or no
    matching record: an error naming the folder and the way out."""
    from jaxclp.experiments.predict import previous_priors

    mine, other = {"arrays_sha256": "aa"}, {"arrays_sha256": "bb"}
    recs = [_clp_record("g", mine, "gcn_tuned", 0), _clp_record("g", mine, "link", 1),
            _clp_record("g", mine, "gcn_tuned", 2), _clp_record("h", other, "mlp", 0),
            _clp_record("g", mine, "mlp", 3, method="clp_mlp"), _clp_record("g", mine, None, 4),
            {"type": "header", "argv": ["jaxclp", "run"]}]
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs) + '{"type": "res')
    assert previous_priors(out, mine) == {"link": 1, "gcn_tuned": 2}
    assert list(previous_priors(out / "results.jsonl", mine)) == ["link", "gcn_tuned"]  # the file itself
    assert previous_priors(out, other) == {"mlp": 1}
    with pytest.raises(ValueError, match=r"no clp record of this graph .*other data: g, h\); run `jaxclp run`"):
        previous_priors(out, {"arrays_sha256": "cc"})
    with pytest.raises(ValueError, match=r"--previous .*nowhere: no results.jsonl there; name the --out folder"):
        previous_priors(tmp_path / "nowhere", mine)


def test_cli_predict_previous_fits_the_priors_the_run_chose(tmp_path, monkeypatch, capsys):
    """`jaxclp predict --previous DIR` after `jaxclp run --out DIR` on the same graph file: clp tries the base
    predictors that run's clp chose (the records' data identity is the one predict computes for the file);
    --previous with another method, with --priors, or for another graph: one-line errors."""
    from files import platonov_npz

    from jaxclp.experiments import methods

    graph = platonov_npz(tmp_path / "g.npz", n=60, classes=2)
    run = tmp_path / "run"
    assert cli.main(["run", "--graph", str(graph), "--methods", "clp", "--runs", "2", "--priors", "mlp,link",
                     "--time-limit", "none", "--out", str(run), "--no-progress"]) == 0
    chosen = [r["params"]["base_prior"] for r in map(json.loads, (run / "results.jsonl").read_text().splitlines())
              if r.get("method") == "clp"]
    assert len(chosen) == 2 and set(chosen) <= {"mlp", "link"}
    capsys.readouterr()
    seen = []
    clp = methods.METHODS["clp"]
    monkeypatch.setitem(methods.METHODS, "clp", lambda ctx, *a, **k: seen.append(ctx.base_priors) or clp(ctx, *a, **k))
    out = tmp_path / "pred.csv"
    assert cli.main(["predict", "--graph", str(graph), "--previous", str(run), "--out", str(out)]) == 0
    want = tuple(p for p in ("mlp", "link") if p in chosen)
    assert seen == [want]
    counts = ", ".join(f"{p} ({chosen.count(p)} of 2 splits)" for p in want)
    assert f"clp: base predictors from {run}'s records (chosen there on validation): {counts}" in capsys.readouterr().err
    for extra, message in ((["--method", "lp"], "--previous reads the base predictors clp chose; it applies to "
                                                 "--method clp, not lp"),
                           (["--priors", "mlp"], "--previous and --priors both name clp's base predictors")):
        assert cli.main(["predict", "--graph", str(graph), "--previous", str(run), "--out", str(out)] + extra) == 2
        assert message in capsys.readouterr().err
    other = platonov_npz(tmp_path / "other.npz", n=60, classes=2, seed=1)
    assert cli.main(["predict", "--graph", str(other), "--previous", str(run), "--out", str(out)]) == 2
    assert "no clp record of this graph" in capsys.readouterr().err
