"""Priors as a pipeline stage (jaxclp.priors): LINKX against a numpy forward, every prior's shape and rows,
the array / predict_proba / bad-input paths, and the runner's clp_prior / linkx methods."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import jaxclp
from jaxclp import search
from jaxclp import priors as P
from jaxclp.experiments import candidates, methods as M, runner
from jaxclp.features import as_features
from jaxclp.gnn import GNNSpec, fit_gnn_grid, tuned_grid

TINY = jaxclp.TrainConfig(epochs=4, patience=0)


def _tiny(seed=0, n=36, k=3, d=5):
    syn = jaxclp.datasets.synthetic(h=0.2, avg_degree=4, num_classes=k, nodes_per_class=n // k, seed=seed)
    rng = np.random.default_rng(seed)
    y = np.asarray(syn.labels)
    x = (rng.normal(size=(n, d)) + 2.0 * np.eye(k, d)[y]).astype(np.float32)
    tm = np.zeros(n, bool)
    tm[np.concatenate([np.flatnonzero(y == c)[:3] for c in range(k)])] = True  # every class in train
    vm = ~tm & (rng.random(n) < 0.4)
    vm[np.concatenate([np.flatnonzero((y == c) & ~tm)[:1] for c in range(k)])] = True
    return syn.graph, x, y, tm, vm


# ----------------------------------------------------------------------------------------- LINKX forward
def _np_dense(p, h):
    return h @ np.asarray(p["kernel"], np.float64) + np.asarray(p["bias"], np.float64)


def _np_mlp(p, h, num_maps):
    """The reference code's MLP: hidden layers Dense -> ReLU -> BatchNorm (full-batch, biased var) -> dropout."""
    for i in range(num_maps):
        h = _np_dense(p[f"Dense_{i}"], h)
        if i < num_maps - 1:
            h = np.maximum(h, 0.0)
            bn = p[f"BatchNorm_{i}"]
            mu, var = h.mean(0), ((h - h.mean(0)) ** 2).mean(0)
            h = (h - mu) / np.sqrt(var + 1e-5) * np.asarray(bn["scale"]) + np.asarray(bn["bias"])
    return h


def _np_linkx(params, a, x, spec: P.LinkxSpec):
    p = params["params"]
    h_a = _np_mlp(p["mlp_a"], a, spec.init_layers_a)
    h_x = _np_mlp(p["mlp_x"], x, spec.init_layers_x)
    z = _np_dense(p["W"], np.concatenate([h_a, h_x], axis=1))
    if spec.inner_activation:
        z = np.maximum(z, 0.0)
    h = np.maximum(z + h_a + h_x, 0.0)
    return _np_mlp(p["mlp_f"], h, spec.num_layers)


@pytest.mark.parametrize("spec", [P.LinkxSpec(hidden=4, num_layers=2),
                                  P.LinkxSpec(hidden=3, num_layers=3, init_layers_a=2, init_layers_x=2,
                                              inner_activation=True)])
def test_linkx_forward_matches_numpy(spec):
    # a directed, weighted 5-node graph: row r of A holds w at column s for the edge s -> r
    edges = np.array([[0, 1, 1, 2, 3, 4, 4], [1, 0, 2, 3, 1, 0, 2]])
    w = np.array([1.0, 2.0, 0.5, 1.5, 3.0, 1.0, 0.25])
    g = jaxclp.Graph.from_edge_index(edges, 5, weights=w, symmetrize=False)
    a = np.zeros((5, 5))
    np.add.at(a, (np.asarray(g.receivers), np.asarray(g.senders)), np.asarray(g.weights))
    assert a[1, 0] == 1.0 and a[0, 1] == 2.0 and a[3, 2] == 1.5  # the convention, by hand
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 3))
    model = P.linkx_model(2, spec)
    adj = P.adjacency_rows(g, jnp.float64)
    params = model.init(jax.random.key(0), adj, jnp.asarray(x), train=False)
    # fixed, non-default parameters: every leaf random (biases, BatchNorm scale/shift included)
    leaves, tree = jax.tree_util.tree_flatten(params)
    params = jax.tree_util.tree_unflatten(tree, [jnp.asarray(rng.normal(size=l.shape)) for l in leaves])
    out = np.asarray(model.apply(params, adj, jnp.asarray(x), train=False))
    ref = _np_linkx(params, a, x, spec)
    assert out.shape == (5, 2)
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    # sparse features give the same output as dense ones
    xs = as_features(sp.csr_matrix(x))
    np.testing.assert_allclose(np.asarray(model.apply(params, adj, xs, train=False)), ref, rtol=1e-6, atol=1e-6)
    # dropout is active in training only (MLP_f's hidden layers)
    out_train = model.apply(params, adj, jnp.asarray(x), train=True, rngs={"dropout": jax.random.key(1)})
    assert not np.allclose(np.asarray(out_train), ref)


def test_linkx_param_layout():
    g, x, *_ = _tiny()
    params = P.linkx_model(3, P.LinkxSpec(hidden=8))
    params = params.init(jax.random.key(0), P.adjacency_rows(g), jnp.asarray(x), train=False)["params"]
    n = g.num_nodes
    assert params["mlp_a"]["Dense_0"]["kernel"].shape == (n, 8)      # A rows: (n, n) -> p
    assert params["mlp_x"]["Dense_0"]["kernel"].shape == (5, 8)      # X: (n, d) -> p
    assert params["W"]["kernel"].shape == (16, 8)                    # W: 2p -> p
    assert params["mlp_f"]["Dense_1"]["kernel"].shape == (8, 3)      # MLP_f: p -> p -> K


# ----------------------------------------------------------------------------------------- every prior
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow)
                                  if n in ("sage", "gat") + P.TUNED_PRIORS else n
                                  for n in sorted(P.PRIORS)])  # sage / gat: fit_gnn, tested in test_gnn.py
def test_prior_is_row_stochastic(name):
    g, x, y, tm, vm = _tiny()
    y_vis = np.where(tm | vm, y, -1)  # no test label is ever passed
    r = P.fit_prior(name, jax.random.key(0), g, x, y_vis, tm, vm, 3, TINY)
    p = np.asarray(r.prior)
    assert p.shape == (len(y), 3) and r.name == name
    assert np.all(np.isfinite(p)) and np.all(p >= 0)
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-5)
    # val_score is the validation accuracy of the prior itself
    assert r.val_score == pytest.approx(float(np.mean(p[vm].argmax(1) == y[vm])))
    if name != "link":
        assert 0 <= r.best_epoch + 1 <= TINY.epochs and r.info is not None


@pytest.mark.cpu_bitwise
def test_tuned_gnn_prior_is_the_best_validation_spec():
    """Nested selection: the prior is fit_gnn_grid's output for the spec with the best validation score (first on
    ties), fitted with the tuned recipe's lr / weight decay and cfg's epochs; sparse features give the same."""
    g, x, y, tm, vm = _tiny()
    y_vis = np.where(tm | vm, y, -1)
    grid = tuned_grid("sage", depths=(1,), plain_depths=(1, 2), hidden=8)
    assert [(s.num_layers, s.residual, s.ffn, s.dropout) for s in grid] == [(1, False, False, 0.2),
                                                                             (2, False, False, 0.2),
                                                                             (1, True, True, 0.2)]
    cfg = jaxclp.TrainConfig(epochs=6, patience=0, lr=0.5, weight_decay=0.1)
    r = P.fit_prior("sage_tuned", jax.random.key(1), g, x, y_vis, tm, vm, 3, cfg, grid=grid)
    fit_cfg = cfg._replace(lr=1e-3, weight_decay=0.0)
    refs = fit_gnn_grid(jax.random.key(1), g, x, jnp.asarray(y_vis), tm, vm, num_classes=3, specs=grid,
                        cfg=fit_cfg)
    scores = [float(np.mean(np.asarray(f.prior)[vm].argmax(1) == y[vm])) for f in refs]
    i = int(np.argmax(scores))  # argmax: the first maximum
    assert r.name == "sage_tuned" and r.choice == grid[i] and r.val_score == pytest.approx(scores[i])
    np.testing.assert_array_equal(np.asarray(r.prior), np.asarray(refs[i].prior))
    assert r.best_epoch == int(refs[i].info.best_epoch)
    rs = P.tuned_gnn_prior(jax.random.key(1), g, sp.csr_matrix(x), y_vis, tm, vm, 3, cfg, kind="sage", grid=grid)
    np.testing.assert_allclose(np.asarray(rs.prior), np.asarray(r.prior), atol=1e-5)
    with pytest.raises(ValueError, match="conv='gcn'"):
        P.fit_prior("gcn_tuned", jax.random.key(1), g, x, y_vis, tm, vm, 3, cfg, grid=grid)
    with pytest.raises(ValueError, match="grid is empty"):
        P.fit_prior("gcn_tuned", jax.random.key(1), g, x, y_vis, tm, vm, 3, cfg, grid=[])
    with pytest.raises(ValueError, match="kind must be one of"):
        P.tuned_gnn_prior(jax.random.key(1), g, x, y_vis, tm, vm, 3, cfg, kind="h2gcn")


def test_tuned_grid_is_the_documented_recipe():
    grid = tuned_grid("gcn")
    assert [(s.num_layers, s.residual, s.norm, s.ffn) for s in grid] == (
        [(d, False, False, False) for d in (1, 2, 3)] + [(d, True, True, True) for d in (1, 2, 3, 4, 5)])
    assert all((s.hidden, s.dropout, s.conv, s.sep) == (64, 0.2, "gcn", False) for s in grid)
    assert M.gnn_grid("gcn") == grid and M.gnn_train_config("accuracy") == jaxclp.gnn.tuned_train_config(
        jaxclp.TrainConfig())
    with pytest.raises(ValueError, match="spec.conv must be one of"):
        tuned_grid("gin")


@pytest.mark.cpu_bitwise
def test_priors_never_read_test_labels():
    g, x, y, tm, vm = _tiny()
    for name in ("linkx", "link"):
        a = P.fit_prior(name, jax.random.key(2), g, x, np.where(tm | vm, y, -1), tm, vm, 3, TINY)
        b = P.fit_prior(name, jax.random.key(2), g, x, np.where(tm | vm, y, (y + 1) % 3), tm, vm, 3, TINY)
        np.testing.assert_array_equal(np.asarray(a.prior), np.asarray(b.prior))


def test_mlp_prior_is_fit_mlp():
    g, x, y, tm, vm = _tiny()
    r = P.mlp_prior(jax.random.key(3), g, x, y, tm, vm, 3, TINY, hidden=(16,))
    ref = jaxclp.fit_mlp(jax.random.key(3), x, jnp.asarray(y), jnp.asarray(tm), jnp.asarray(vm), num_classes=3,
                         hidden=(16,), cfg=TINY)
    np.testing.assert_array_equal(np.asarray(r.prior), np.asarray(ref.prior))
    assert r.best_epoch == int(ref.info.best_epoch)


def test_linkx_learns_structure_without_feature_signal():
    # features are pure noise; the class is a function of the neighbourhood (heterophilous 2-class graph)
    syn = jaxclp.datasets.synthetic(h=0.0, avg_degree=8, num_classes=2, nodes_per_class=60, seed=1)
    y = np.asarray(syn.labels)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(len(y), 4)).astype(np.float32)
    tm = rng.random(len(y)) < 0.5
    vm = ~tm & (rng.random(len(y)) < 0.5)
    te = ~tm & ~vm
    cfg = jaxclp.TrainConfig(epochs=60, patience=0)
    linkx = np.asarray(P.linkx_prior(jax.random.key(0), syn.graph, x, y, tm, vm, 2, cfg).prior)
    mlp = np.asarray(P.mlp_prior(jax.random.key(0), syn.graph, x, y, tm, vm, 2, cfg).prior)
    acc = lambda p: float(np.mean(p[te].argmax(1) == y[te]))  # noqa: E731
    assert acc(linkx) > 0.75 and acc(mlp) < 0.65, (acc(linkx), acc(mlp))


# ------------------------------------------------------------------------ array / predict_proba / bad input
def test_array_and_predict_proba_paths():
    g, x, y, tm, vm = _tiny()
    n = len(y)
    d = np.random.default_rng(0).dirichlet(np.ones(3), n)
    r = P.fit_prior(d, None, g, None, y, tm, vm, 3)
    np.testing.assert_array_equal(np.asarray(r.prior), d)
    assert r.name == "array" and r.best_epoch is None

    class Est:
        classes_ = np.array([0, 2])  # never saw class 1; columns in its own order

        def predict_proba(self, feats):
            assert feats is x
            return np.column_stack([np.full(n, 0.25), np.full(n, 0.75)])

    r = P.fit_prior(Est(), None, g, x, y, tm, vm, 3, classes=np.array([0, 1, 2]))
    np.testing.assert_allclose(np.asarray(r.prior), np.tile([0.25, 0.0, 0.75], (n, 1)))
    assert r.name == "predict_proba"

    class Transductive:  # predicts its own graph's nodes (a fitted jaxclp.CLP), columns in its own order
        transductive = True
        classes_ = np.array([2, 1, 0])

        def predict_proba(self):
            return np.tile([0.5, 0.3, 0.2], (n, 1))

    r = P.fit_prior(Transductive(), None, g, None, y, tm, vm, 3, classes=np.array([0, 1, 2]))
    np.testing.assert_allclose(np.asarray(r.prior), np.tile([0.2, 0.3, 0.5], (n, 1)))

    def my_prior(key, graph, features, labels, train_mask, val_mask, num_classes, cfg):
        return np.full((graph.num_nodes, num_classes), 1.0 / num_classes)

    r = P.fit_prior(my_prior, None, g, x, y, tm, vm, 3)
    assert r.name == "my_prior" and np.asarray(r.prior).shape == (n, 3)


@pytest.mark.parametrize("bad, match", [
    ("mlpp", "prior must be one of"),
    (np.full((36, 2), 0.5), r"prior must have shape \(36, 3\)"),
    (np.full((36, 3), 0.5), "prior rows must sum to 1"),
    (np.where(np.arange(3) == 0, -0.5, 0.75) * np.ones((36, 1)), "prior must be nonnegative"),
    (np.full((36, 3), np.nan), "prior contains"),
    (np.ones((36, 3), int), "prior must be a floating-point array"),
    (42, "prior must be one of"),
])
def test_bad_prior_refused(bad, match):
    g, x, y, tm, vm = _tiny()
    with pytest.raises(ValueError, match=match):
        P.fit_prior(bad, jax.random.key(0), g, x, y, tm, vm, 3, TINY)


def test_bad_predict_proba_refused():
    g, x, y, tm, vm = _tiny()

    class Unnormalized:
        def predict_proba(self, feats):
            return np.ones((len(feats), 3))

    with pytest.raises(ValueError, match=r"prior.predict_proba\(features\) rows must sum to 1"):
        P.fit_prior(Unnormalized(), None, g, x, y, tm, vm, 3)

    class Stranger:
        classes_ = np.array([0, 1, 5])

        def predict_proba(self, feats):
            return np.full((len(feats), 3), 1 / 3)

    with pytest.raises(ValueError, match="prior.classes_ holds class"):
        P.fit_prior(Stranger(), None, g, x, y, tm, vm, 3, classes=np.arange(3))
    with pytest.raises(ValueError, match="features is None"):
        P.fit_prior(Stranger(), None, g, None, y, tm, vm, 3)
    with pytest.raises(ValueError, match="features must have"):  # sparse features are taken, wrong rows are not
        P.fit_prior("gcn", jax.random.key(0), g, sp.csr_matrix(x[:-1]), y, tm, vm, 3, TINY)
    with pytest.raises(ValueError, match="labels on train_mask"):
        P.fit_prior("linkx", jax.random.key(0), g, x, np.where(tm, 7, y), tm, vm, 3, TINY)
    with pytest.raises(ValueError, match="num_layers must be an integer >= 1"):
        P.fit_prior("linkx", jax.random.key(0), g, x, y, tm, vm, 3, TINY, num_layers=0)


# ----------------------------------------------------------------------------------------- runner methods
def _context(g, x, y, tm, vm):
    y_vis = jnp.asarray(candidates.visible_labels(y, tm, vm))
    mlp = jaxclp.fit_mlp(jax.random.key(0), x, y_vis, jnp.asarray(tm), jnp.asarray(vm), num_classes=3, cfg=TINY)
    return candidates.Context(graph=g, features=jnp.asarray(x), labels=y_vis, train=jnp.asarray(tm),
                              val=jnp.asarray(vm), num_classes=3, metric="accuracy", key=jax.random.key(5),
                              priors={1: mlp.prior}, mlp_depth=1)


def test_clp_prior_method_records_the_chosen_prior(monkeypatch):
    g, x, y, tm, vm = _tiny()
    ctx = _context(g, x, y, tm, vm)
    monkeypatch.setattr(M, "prior_train_config", lambda c: TINY)  # a few epochs: this tests the plumbing
    small = dict(variants=(("sym", False, "mlp"),), authors=False, spectral=False)
    cands = M.method_clp_prior(ctx, priors=("mlp", "link", "linkx"), lazy=False, **small)
    assert not cands.pending
    base = {k[1] for k in cands}
    assert base == {"mlp", "link", "linkx"}
    # every prior gets CLP's own grid, untouched: the "mlp" block equals method_clp on the runner's prior
    plain = M.method_clp(ctx, **small)
    for key, b in plain.items():
        np.testing.assert_array_equal(np.asarray(cands[("base_prior", "mlp") + key]), np.asarray(b))
    # the "link" block is method_clp on the LINK prior
    link = P.fit_prior("link", ctx.key, g, ctx.features, ctx.labels, ctx.train, ctx.val, 3, TINY).prior
    for key, b in M.method_clp(candidates.with_prior(ctx, link), **small).items():
        np.testing.assert_allclose(np.asarray(cands[("base_prior", "link") + key]), np.asarray(b))
    cfg, val = candidates.select(cands, np.asarray(ctx.labels), vm, "accuracy")
    params = runner.chosen_params(cfg, "clp", 1)
    assert params["base_prior"] == cfg[1] and params["mlp_depth"] == 1 and "alpha" in params
    assert val == max(float(jaxclp.accuracy(jnp.asarray(b), jnp.asarray(np.where(vm, y, 0)), jnp.asarray(vm)))
                      for b in cands.values())
    # revision 2: each prior alone is also a candidate (CLP at alpha = 0), and the runner chooses by
    # select_prior_first: the best prior on validation, then CLP on it only if a variant beats it there
    for name in ("mlp", "link", "linkx"):
        np.testing.assert_array_equal(np.asarray(cands[("base_prior", name, "alpha", 0.0)]),
                                      np.asarray(cands.references[name]))
    assert cands.rule is candidates.select_prior_first
    y_v = np.asarray(ctx.labels)
    best_prior, s_prior = candidates.select(cands.references, y_v, vm, "accuracy")
    cfg2, val2 = cands.rule(cands, y_v, vm, "accuracy")
    assert cfg2[:2] == ("base_prior", best_prior) and val2 >= s_prior
    assert (val2 == s_prior) == (cfg2 == ("base_prior", best_prior, "alpha", 0.0))
    # each prior alone is a reference (recorded beside the choice): exactly the base predictors' outputs
    assert set(cands.references) == {"mlp", "link", "linkx"} and not set(cands.references) & set(cands)
    np.testing.assert_array_equal(np.asarray(cands.references["mlp"]), np.asarray(ctx.prior))
    np.testing.assert_allclose(np.asarray(cands.references["link"]), np.asarray(link))


@pytest.mark.cpu_bitwise
def test_clp_prior_lazy_grids_choose_the_same_and_compute_only_the_chosen_one(monkeypatch):
    """The runner's default: each predictor's CLP grid is a pending group; select_prior_first computes only the
    chosen predictor's. Same choice, same validation score, same scores as computing every grid; a plain
    select (or anything iterating) expands everything first."""
    g, x, y, tm, vm = _tiny()
    ctx = _context(g, x, y, tm, vm)
    monkeypatch.setattr(M, "prior_train_config", lambda c: TINY)
    small = dict(variants=(("sym", False, "mlp"), ("row", True, "b0")), authors=False, spectral=False)
    y_v = np.asarray(ctx.labels)
    eager = M.method_clp_prior(ctx, priors=("mlp", "link", "linkx"), lazy=False, **small)
    cfg_e, val_e = eager.rule(eager, y_v, vm, "accuracy")
    calls = []
    real = M.method_clp
    monkeypatch.setattr(M, "method_clp", lambda c, **kw: calls.append(c) or real(c, **kw))
    lazy = M.method_clp_prior(ctx, priors=("mlp", "link", "linkx"), **small)
    assert set(lazy.pending) == {("base_prior", n) for n in ("mlp", "link", "linkx")} and not calls
    assert len(lazy) == 3  # the predictors alone
    cfg_l, val_l = lazy.rule(lazy, y_v, vm, "accuracy")
    assert (cfg_l, val_l) == (cfg_e, val_e) and len(calls) == 1
    np.testing.assert_array_equal(np.asarray(lazy[cfg_l]), np.asarray(eager[cfg_e]))
    chosen = candidates.select(lazy.references, y_v, vm, "accuracy")[0]
    assert set(lazy.pending) == {("base_prior", n) for n in ("mlp", "link", "linkx") if n != chosen}
    per_grid = (len(eager) - 3) // 3
    assert len(lazy) == 3 + per_grid  # the record's num_candidates: what was computed
    for key in lazy:
        np.testing.assert_array_equal(np.asarray(lazy[key]), np.asarray(eager[key]))
    assert candidates.select(lazy, y_v, vm, "accuracy") == candidates.select(eager, y_v, vm, "accuracy")
    assert not lazy.pending and set(lazy) == set(eager)


@pytest.mark.cpu_bitwise
def test_base_priors_include_gnns_on_sparse_features_and_tuned_ones_use_the_runner_grid(monkeypatch):
    """clp revision 1: GNN priors also on sparse features; a tuned GNN prior's candidates are methods.gnn_grid's
    (the grid the spec hash reads), with prior_train_config's epochs and the tuned learning rate."""
    g, x, y, tm, vm = _tiny()
    ctx = dataclasses.replace(_context(g, x, y, tm, vm), features=as_features(sp.csr_matrix(x)))
    monkeypatch.setattr(M, "prior_train_config", lambda c: TINY)
    tiny = [GNNSpec(conv="sage", hidden=8, num_layers=1, dropout=0.2)]
    monkeypatch.setattr(M, "gnn_grid", lambda conv, sep=False: [s._replace(conv=conv) for s in tiny])
    out = M.fit_base_priors(ctx, ("gcn", "sage_tuned"))
    assert set(out) == {"gcn", "sage_tuned"}
    # the reference fit on the context's own (sparse) features: the same program, so equal bit for bit (sparse vs
    # dense features fit alike: tests/priors/test_gnn.py::test_sparse_features_fit_like_dense)
    ref, = fit_gnn_grid(ctx.key, g, ctx.features, ctx.labels, tm, vm, num_classes=3, specs=tiny,
                        cfg=TINY._replace(lr=M.GNN_LR, weight_decay=0.0))
    np.testing.assert_array_equal(np.asarray(out["sage_tuned"]), np.asarray(ref.prior))
    assert ("fit", "sage_tuned", TINY) in ctx.cache  # fitted once per split, shared by the methods


def test_base_priors_leave_h2gcn_out_where_its_two_hop_graph_is_too_large(monkeypatch):
    """A hub-heavy graph: H2GCN's 2-hop graph above the limit is left out of clp's choice with a warning and a
    status line (the other predictors are fitted as usual); asked for alone, the error stands."""
    from jaxclp import gnn

    g, x, y, tm, vm = _tiny()
    ctx = _context(g, x, y, tm, vm)
    monkeypatch.setattr(M, "prior_train_config", lambda c: TINY)
    monkeypatch.setattr(gnn.two_hop, "MAX_TWO_HOP_EDGES", 5)
    said = []
    with candidates.reporting(said.append), pytest.warns(UserWarning, match="h2gcn left out.*more than 5 pairs"):
        out = M.fit_base_priors(ctx, ("mlp", "link", "h2gcn"))
    assert set(out) == {"mlp", "link"} and any("h2gcn left out" in t for t in said)
    with pytest.raises(gnn.TwoHopTooLarge):
        M.fit_base_priors(ctx, ("h2gcn",))
    monkeypatch.setattr(gnn.two_hop, "MAX_TWO_HOP_EDGES", None)  # no limit: fitted
    assert set(M.fit_base_priors(ctx, ("mlp", "h2gcn"))) == {"mlp", "h2gcn"}


def test_clp_grid_past_its_memory_budget_keeps_group_bests_and_the_same_choice(monkeypatch):
    """GRID_MAX_BYTES exceeded (forced: 0): each computed group keeps its first best candidate; select and
    clp's select_prior_first choose the same configuration with the same score and scores, and far fewer
    candidates are stored."""
    g, x, y, tm, vm = _tiny()
    ctx = _context(g, x, y, tm, vm)
    monkeypatch.setattr(M, "prior_train_config", lambda c: TINY)
    y_v = np.asarray(ctx.labels)
    full = M.method_clp(ctx)
    full_prior = M.method_clp_prior(ctx, priors=("mlp", "link"), lazy=False)
    monkeypatch.setattr(M, "GRID_MAX_BYTES", 0)
    lean_ctx = _context(g, x, y, tm, vm)  # a fresh cache
    lean = M.method_clp(lean_ctx)
    assert len(lean) < len(full) / 10 and set(lean) <= set(full)
    (c_full, s_full), (c_lean, s_lean) = (candidates.select(c, y_v, vm, "accuracy") for c in (full, lean))
    assert (c_lean, s_lean) == (c_full, s_full)
    np.testing.assert_array_equal(np.asarray(lean[c_lean]), np.asarray(full[c_full]))
    lean_prior = M.method_clp_prior(lean_ctx, priors=("mlp", "link"), lazy=False)
    assert lean_prior.rule(lean_prior, y_v, vm, "accuracy") == full_prior.rule(full_prior, y_v, vm, "accuracy")
    # every group kept exactly its first best: e.g. the paper's variant, alpha by alpha
    group = {k: v for k, v in full.items() if k[:6] == ("normalization", "sym", "l1", False, "prior", "mlp")}
    kept = [k for k in lean if k[:6] == ("normalization", "sym", "l1", False, "prior", "mlp")]
    assert kept == [candidates.select(group, y_v, vm, "accuracy")[0]]


def test_linkx_method_and_registry(monkeypatch):
    assert M.METHODS["clp"] is M.method_clp_prior and M.METHODS["clp_mlp"] is M.method_clp
    assert "clp_prior" not in M.METHODS and {"clp", "clp_mlp"} <= M.NEEDS_PRIOR and "linkx" in M.METHODS
    monkeypatch.setattr(M, "prior_train_config", lambda c: TINY)
    g, x, y, tm, vm = _tiny()
    ctx = _context(g, x, y, tm, vm)
    out = M.METHODS["linkx"](ctx)
    assert list(out) == [("linkx",)] and np.asarray(out[("linkx",)]).shape == (len(y), 3)


def test_runner_records_base_prior(tmp_path, monkeypatch):
    """End to end through runner.run: the record's params name the base prior validation chose."""
    monkeypatch.setattr(M, "prior_train_config", lambda c: TINY)
    def cheap(ctx):  # a named function: method specs read its qualified name
        return M.method_clp_prior(ctx, priors=("mlp", "link"), variants=(("sym", False, "mlp"),), authors=False,
                                  spectral=False)

    monkeypatch.setitem(M.METHODS, "clp", cheap)
    ds = jaxclp.datasets.synthetic(h=0.2, avg_degree=5, num_classes=3, nodes_per_class=20, seed=0)
    recs = runner.run(ds, "medium", ["clp", "linkx", "mlp", "link"], runs=1, out=tmp_path, epochs=3,
                      progress=False)
    rec = {r["method"]: r for r in recs}
    params = rec["clp"]["params"]
    assert params["base_prior"] in ("mlp", "link") and "alpha" in params
    assert params.get("normalization") == "sym" or params["alpha"] == 0.0  # a CLP variant, or the prior alone
    assert rec["clp"]["num_candidates"] == len(M.ALPHAS) + 2  # the chosen prior's grid only (lazy)
    # the references are the priors alone, scored on the same split: equal to the mlp / link methods' records
    refs = rec["clp"]["references"]
    assert set(refs) == {"mlp", "link"} and "references" not in rec["mlp"]
    for name in ("mlp", "link"):
        assert refs[name]["test"] == pytest.approx(rec[name]["test"]) and refs[name]["val"] == pytest.approx(
            rec[name]["val"])
    assert rec["linkx"]["num_candidates"] == 1 and 0.0 <= rec["linkx"]["test"] <= 1.0


def test_clp_grid_bytes_counts_the_grid_it_stores():
    """312 candidates for clp_mlp's grid (160 authors' + 12 x 9 + 4 x 11), 9 for clp_paper's: the budget compares
    what each grid would store."""
    g, x, y, tm, vm = _tiny()
    ctx = _context(g, x, y, tm, vm)
    n, k = ctx.prior.shape
    per = n * k * np.dtype(ctx.prior.dtype).itemsize
    assert M._grid_bytes(ctx, M.CLP_VARIANTS, True, True) == 312 * per == len(M.method_clp(ctx)) * per
    assert M._grid_bytes(ctx, (("sym", False, "mlp"),), False, False) == 9 * per == len(M.method_clp_paper(ctx)) * per


def test_clp_time_limit_fits_cheap_priors_first_and_names_the_skipped_ones(monkeypatch):
    """Under Context.time_limit, clp fits its base predictors in order while PRIOR_COST * (the largest seconds per
    cost unit seen so far) fits in the time left; a fake clock makes the fits' seconds exact."""
    g, x, y, tm, vm = _tiny()
    ctx = _context(g, x, y, tm, vm)
    seconds = {"link": 1.0, "linkx": 4.0, "gcn": 2.0, "h2gcn": 4.0, "gcn_tuned": 32.0, "sage_tuned": 32.0}
    clock = {"t": 0.0}
    fitted = []

    def fake_fit(name, *args, **kwargs):
        clock["t"] += seconds[name]
        fitted.append(name)
        return P.PriorResult(prior=jnp.full((len(y), 3), 1 / 3), name=name, val_score=0.0)

    monkeypatch.setattr(M, "fit_prior", fake_fit)
    monkeypatch.setattr(search.time, "perf_counter", lambda: clock["t"])
    small = dict(variants=(("sym", False, "mlp"),), authors=False, spectral=False)
    names = ("mlp", "link", "linkx", "gcn", "h2gcn", "gcn_tuned", "sage_tuned")
    # unit = max(1/0.5, 4/2, 2/1, 4/2) = 2 s; at t = 11 the tuned GNNs' 6 * 2 = 12 s exceed the 9 s left
    cands = M.method_clp_prior(dataclasses.replace(ctx, time_limit=20.0, cache={}), priors=names, **small)
    assert fitted == ["link", "linkx", "gcn", "h2gcn"]
    assert cands.skipped == ["gcn_tuned", "sage_tuned"]
    assert list(cands.references) == ["mlp", "link", "linkx", "gcn", "h2gcn"]
    # the first split of a run decides (its decisions handed on as a value): a later split (fits now compiled and 100x faster) leaves out the same
    for s in seconds:
        seconds[s] /= 100
    fitted.clear()
    again = M.method_clp_prior(dataclasses.replace(ctx, time_limit=20.0, cache={},
                                                   decisions=cands.search.decisions()), priors=names, **small)
    # (a later split fits side by side, jaxclp.fit_threads: the order of the calls is the threads')
    assert sorted(fitted) == sorted(["link", "linkx", "gcn", "h2gcn"]) and again.skipped == ["gcn_tuned", "sage_tuned"]
    for s in seconds:
        seconds[s] *= 100
    # without a limit everything is fitted; ctx.base_priors names the predictors when priors= is not given
    fitted.clear()
    assert not M.method_clp_prior(dataclasses.replace(ctx, cache={}), priors=names, **small).skipped
    assert sorted(fitted) == sorted(names[1:])
    fitted.clear()
    only = M.method_clp_prior(dataclasses.replace(ctx, base_priors=("link", "gcn"), cache={}), **small)
    assert list(only.references) == ["link", "gcn"] and sorted(fitted) == ["gcn", "link"]
    # a spent budget still fits the first predictor, so there is a choice; cached fits are free
    fitted.clear()
    spent = dataclasses.replace(ctx, base_priors=("link", "gcn"), time_limit=0.0, cache={})
    assert list(M.method_clp_prior(spent, **small).references) == ["link"] and fitted == ["link"]
    assert M.method_clp_prior(spent, **small).skipped == ["gcn"] and fitted == ["link"]
    # the MLP prior's own fit (ctx.mlp_fit_seconds: 8 s for its 1 unit) sets the unit, not LINK's 1 s for 0.5:
    # at t = 1 linkx's 2 x 8 = 16 s fit the 19.5 s left, at t = 5 gcn's 8 s fit, at t = 7 h2gcn's 16 s do not
    # (with LINK's unit of 2 s they would)
    fitted.clear()
    clock["t"] = 0.0
    slow_mlp = dataclasses.replace(ctx, time_limit=20.5, mlp_fit_seconds=8.0, cache={})
    cands = M.method_clp_prior(slow_mlp, priors=names, **small)
    assert fitted == ["link", "linkx", "gcn"] and cands.skipped == ["h2gcn", "gcn_tuned", "sage_tuned"]
    # a tuned GNN started trains until the split's time runs out (its deadline: the split's start + the limit);
    # the later splits of the graph train it for the epochs the first one reached (no clock), and say so
    calls = []

    def fake_cut(name, *args, **kwargs):
        calls.append((name, args[7].epochs, kwargs.get("deadline")))
        clock["t"] += 1.0
        return P.PriorResult(prior=jnp.full((len(y), 3), 1 / 3), name=name, val_score=0.0,
                             stopped_at=25 if kwargs.get("deadline", np.inf) < np.inf else None)

    monkeypatch.setattr(M, "fit_prior", fake_cut)
    clock["t"] = 100.0
    tuned = dataclasses.replace(ctx, time_limit=5.0, base_priors=("gcn_tuned",), cache={})
    first = M.method_clp_prior(tuned, **small)
    assert calls == [("gcn_tuned", M.prior_train_config(ctx).epochs, 105.0)]
    assert first.skipped == ["gcn_tuned epochs after 25"]
    calls.clear()
    later = M.method_clp_prior(dataclasses.replace(tuned, cache={}, decisions=first.search.decisions()), **small)
    assert calls == [("gcn_tuned", 25, np.inf)] and later.skipped == ["gcn_tuned epochs after 25"]


def test_clp_on_the_other_priors_is_left_out_when_the_deadline_cannot_fit_it(monkeypatch):
    """With the large-validation step on, select_prior_first computes CLP's grid on the other predictors only
    while the chosen one's grid time fits before the split's deadline; a left-out one is named ("clp on NAME")."""
    import jaxclp.selection as S

    g, x, y, tm, vm = _tiny()
    ctx = _context(g, x, y, tm, vm)
    monkeypatch.setattr(S, "LARGE_VALIDATION", 1)
    clock = {"t": 0.0}
    real = M.method_clp

    def timed(*args, **kwargs):  # every prior's grid takes 10 s
        clock["t"] += 10.0
        return real(*args, **kwargs)

    monkeypatch.setattr(M, "method_clp", timed)
    monkeypatch.setattr(search.time, "perf_counter", lambda: clock["t"])
    small = dict(variants=(("sym", False, "mlp"),), authors=False, spectral=False)
    for limit, left_out in ((15.0, 1), (25.0, 0)):  # the chosen grid ends at t = 10; the other's would at 20
        clock["t"] = 0.0
        c = M.method_clp_prior(dataclasses.replace(ctx, time_limit=limit, cache={}), priors=("mlp", "link"),
                               **small)
        c.rule(c, np.asarray(ctx.labels), np.asarray(ctx.val), ctx.metric)
        assert len([s for s in c.skipped if s.startswith("clp on ")]) == left_out
        assert len(c.pending) == left_out  # the left-out grid was never computed


def test_clp_grid_deadline_keeps_the_closed_form_and_drops_the_costly_kinds_in_order(monkeypatch):
    """Under a deadline, method_clp computes the first closed-form variant, the others while one more (their mean
    seconds) fits, then each costlier kind of candidate
    (GRID_COST order: spectral, per-step L1, the authors' step) while GRID_COST x (closed-form seconds) fits the
    time left; the kinds left out are named; the candidates kept are the full grid's, in its order, with the same
    beliefs; a graph's first split decides for the later ones. A fake clock makes the seconds exact."""
    g, x, y, tm, vm = _tiny()
    ctx = _context(g, x, y, tm, vm)
    full = M.method_clp(dataclasses.replace(ctx, cache={}))
    clock = {"t": 0.0, "scale": 1.0}
    real_beliefs, real_nonlinear = jaxclp.clp_beliefs, M.nonlinear_grid

    def timed_beliefs(*args, **kwargs):  # closed form 1 s per variant (6 s in all), spectral 4.2 s, L1 6 s
        cost = 4.2 if kwargs.get("spectral_scale") else 6.0 if kwargs.get("l1_normalize") else 1.0
        clock["t"] += cost * clock["scale"]
        return real_beliefs(*args, **kwargs)

    def timed_nonlinear(*args, **kwargs):
        clock["t"] += 20.0 * clock["scale"]
        return real_nonlinear(*args, **kwargs)

    monkeypatch.setattr(jaxclp, "clp_beliefs", timed_beliefs)
    monkeypatch.setattr(M, "nonlinear_grid", timed_nonlinear)
    monkeypatch.setattr(search.time, "perf_counter", lambda: clock["t"])

    # a far deadline: the whole grid, same keys in the same order, same beliefs
    far_search = search.Search(1e9)
    far = M.method_clp(dataclasses.replace(ctx, cache={}), search=far_search)
    assert list(far) == list(full) and far_search.skipped == []
    assert all(np.array_equal(np.asarray(far[k]), np.asarray(full[k])) for k in full)

    # unit = 6 s (closed form); at t = 6: spectral 2.8 x 6 = 16.8 s fits before 24, then at t = 22.8 the L1
    # variants' 21.6 s and the authors' 49.2 s do not
    start = clock["t"]
    first = search.Search(24.0)
    part = M.method_clp(dataclasses.replace(ctx, cache={}), search=first)
    left = first.skipped
    assert abs(clock["t"] - start - (6.0 + 4 * 4.2)) < 1e-9
    assert left == ["clp L1 variants", "clp authors' step"]
    kept = [k for k in full if k[3] is False]  # ("normalization", norm, "l1", l1, ...): closed and spectral
    assert list(part) == kept and len(kept) == 6 * 9 + 4 * 11
    # the next split of the same graph (100x faster now) leaves out the same kinds
    clock["scale"] = 0.01
    later = search.Search(24.0, first.decisions())
    again = M.method_clp(dataclasses.replace(ctx, cache={}), search=later)
    assert list(again) == kept and later.skipped == ["clp L1 variants", "clp authors' step"]
    clock["scale"] = 1.0

    # deadline 3.5 s: the closed-form variants (1 s each) while one more fits: 3 of 6, in their order; then the
    # whole closed form is estimated at 6 s, so no costlier kind fits either
    start, short = clock["t"], search.Search(3.5)
    few = M.method_clp(dataclasses.replace(ctx, cache={}), search=short)
    left = short.skipped
    assert abs(clock["t"] - start - 3.0) < 1e-9
    closed = [k for k in full if k[3] is False and "/rho" not in k[1]]
    assert list(few) == closed[:3 * 9] and [k[1] + "/" + k[5] for k in closed[::9]][:4] == [
        "sym/mlp", "sym/b0", "row/mlp", "row/b0"]
    late = ["clp closed form row/b0", "clp closed form none/mlp", "clp closed form none/b0"]
    assert left == late + ["clp spectral variants", "clp L1 variants", "clp authors' step"]

    # through clp: one deadline for the split; a spent one still computes the first closed-form variant on the
    # chosen prior
    cands = M.method_clp_prior(dataclasses.replace(ctx, time_limit=0.0, cache={}), priors=("mlp",), lazy=False)
    assert cands.skipped == ["clp closed form sym/b0", "clp closed form row/mlp"] + late + [
        "clp spectral variants", "clp L1 variants", "clp authors' step"]
    assert [k[2:] for k in cands if k[2] == "normalization"] == closed[:9] and len(closed) == 6 * 9


def test_split_context_time_limit_is_what_the_mlp_priors_left():
    """A split's Context gets what remains of the user's time limit after its share of the MLP priors (never
    below 0), so --time-limit bounds the whole fit; no limit stays no limit."""
    ds = jaxclp.datasets.synthetic(0.3, 4, num_classes=3, nodes_per_class=10, seed=0)
    sp = runner.get_splits(ds, "medium", 1, 0)
    feats, _ = runner.node_features(ds)
    setup = runner.prepare_splits(ds, feats, sp, 1, [0], 0, jaxclp.TrainConfig(epochs=2), False, None, 10.0)
    assert setup.mlp_seconds == 0.0 and setup.context(0).time_limit == 10.0
    assert dataclasses.replace(setup, mlp_seconds=4.0).context(0).time_limit == 6.0
    assert dataclasses.replace(setup, mlp_seconds=15.0).context(0).time_limit == 0.0
    assert dataclasses.replace(setup, mlp_seconds=4.0, time_limit=None).context(0).time_limit is None


def test_mlp_priors_under_a_time_limit_fit_depths_while_their_share_allows(monkeypatch):
    """Under a time limit the runner's MLP priors are fitted in MLP_DEPTHS order, the first always, a further depth
    while (seconds so far + the last depth's seconds) per split fits MLP_TIME_SHARE of the limit; the depths left
    out are named (for the methods built on the prior) ahead of the candidates' own skipped names. Fake clock:
    each depth's fit of 2 splits takes 10 s, 5 s per split."""
    clock = {"t": 0.0}
    fitted = []

    deadlines = []

    def fake_fit(keys, x, y, tr, va, *, num_classes, hidden, cfg, deadline, shared_depths):
        clock["t"] += 10.0
        fitted.append(len(hidden))
        deadlines.append(deadline)
        info = jaxclp.train.TrainInfo(*[np.asarray([cfg.epochs, cfg.epochs])] * 6)  # every split ran to the end
        return type("R", (), {"prior": jnp.zeros((2, 4, num_classes)), "info": info})()

    monkeypatch.setattr(runner, "fit_mlp_splits", fake_fit)
    monkeypatch.setattr(runner.time, "perf_counter", lambda: clock["t"])
    args = (jax.random.split(jax.random.key(0), 2), [0, 1], jnp.zeros((4, 2)), np.zeros((2, 4), np.int32),
            np.ones((2, 4), bool), np.ones((2, 4), bool), 3, jaxclp.TrainConfig())
    assert search.MLP_TIME_SHARE == 0.25
    # limit 32 s per split: share 8; after depth 1: 5 + 5 = 10 > 8, stop
    priors, secs, cut = runner.mlp_priors(*args, time_limit=32.0)
    assert list(priors) == [1] and fitted == [1] and secs == 5.0 and cut == {}
    assert deadlines == [0.25 * 32.0 * 2]  # the share of the limit, for the 2 splits fitted together
    # limit 48: share 12; depth 2 fits (5 + 5 = 10), depth 3 does not (10 + 5 = 15)
    fitted.clear()
    assert list(runner.mlp_priors(*args, time_limit=48.0)[0]) == [1, 2] and fitted == [1, 2]
    fitted.clear()
    deadlines.clear()
    assert list(runner.mlp_priors(*args)[0]) == list(search.MLP_DEPTHS) and fitted == [1, 2, 3]
    assert deadlines == [None] * 3
    # the depths a context lacks are named for the methods on the prior only, before the candidates' skipped
    ctx = candidates.Context(graph=None, features=None, labels=None, train=None, val=None, num_classes=3,
                             metric="accuracy", key=None, priors={1: None}, mlp_depth=1)
    cands = candidates.Candidates(skipped=["gcn_tuned"])
    assert runner.left_out(ctx, cands, "clp") == ["mlp depth 2", "mlp depth 3", "gcn_tuned"]
    assert runner.left_out(ctx, cands, "lp") == ["gcn_tuned"] and runner.left_out(ctx, {}, "lp") == []
    # a depth whose training the deadline stopped: neither early-stopped (patience 50 epochs past the best) nor at
    # the last epoch; named with its epochs for the methods on the prior
    cfg = jaxclp.TrainConfig(epochs=500, patience=50)
    info = lambda run, best: jaxclp.train.TrainInfo(np.asarray(best), np.asarray(run), *[np.zeros(2)] * 4)  # noqa: E731
    assert runner.cut_epochs(info([75, 120], [70, 69]), cfg) == 75  # split 1 early-stopped at 120
    assert runner.cut_epochs(info([120, 500], [69, 400]), cfg) is None  # early-stopped / ran to the end
    assert runner.cut_epochs(info([75, 75], [70, 10]), cfg._replace(patience=0)) == 75
    ctx = dataclasses.replace(ctx, mlp_cut={1: 75})
    assert runner.left_out(ctx, cands, "clp") == ["mlp depth 2", "mlp depth 3", "mlp depth 1 epochs after 75",
                                                  "gcn_tuned"]
    assert runner.left_out(ctx, cands, "lp") == ["gcn_tuned"]


def test_tuned_prior_halving_setting_is_read_from_one_place(monkeypatch):
    """tuned_gnn_prior (the estimator's and the runner's clp's path) takes jaxclp.priors.TUNED_RUNGS and
    TUNED_RUNGS_MIN_VAL unless rungs are given, and clp's method hash changes with them."""
    from jaxclp import gnn
    from jaxclp.experiments.specs import method_hash

    g, x, y, tm, vm = _tiny()
    seen = []
    real = gnn.fit_gnn_grid
    monkeypatch.setattr(gnn, "fit_gnn_grid",
                        lambda *a, **k: seen.append((k["rungs"], k["rungs_min_val"])) or real(*a, **k))
    grid = [GNNSpec(conv="gcn", hidden=4, num_layers=1)]
    cfg = jaxclp.TrainConfig(epochs=3, patience=0)
    before = method_hash("clp")
    monkeypatch.setattr(P, "TUNED_RUNGS", (1, 2))
    monkeypatch.setattr(P, "TUNED_RUNGS_MIN_VAL", 7)
    P.tuned_gnn_prior(jax.random.key(0), g, x, np.where(tm | vm, y, -1), tm, vm, 3, cfg, grid=grid)
    P.tuned_gnn_prior(jax.random.key(0), g, x, np.where(tm | vm, y, -1), tm, vm, 3, cfg, grid=grid, rungs=(1,))
    assert seen == [((1, 2), 7), ((1,), 0)]
    assert method_hash("clp") != before


def test_clp_tuned_priors_halve_with_the_adopted_rule():
    """The adopted setting is the rule benchmarks/halving.py judged: gnn.HALVING_RUNGS from gnn.HALVING_MIN_VAL."""
    from jaxclp import gnn

    assert (P.TUNED_RUNGS, P.TUNED_RUNGS_MIN_VAL) == (gnn.HALVING_RUNGS, gnn.HALVING_MIN_VAL) == ((50, 100, 200), 500)


@pytest.mark.parametrize("name", ["mlp", "h2gcn"])
def test_a_deadline_stops_training_after_a_chunk_and_a_late_one_changes_nothing(name):
    """The predictors of DEADLINE_PRIORS take ``deadline=``: one far ahead gives the fit without it, bit for bit
    (the same epochs and keys in chunks of DEADLINE_EPOCHS); one already past stops it after the first chunk with
    the fit of ``epochs = DEADLINE_EPOCHS`` (stopped_at says so). Each fit's regular kernel is made from the same
    ``build`` as its chunked path, so two predictors stand for all (the MLP: initialised on a zero row; H2GCN:
    two graph inputs); the tuned grids are tested in test_gnn."""
    import time

    from jaxclp.train import DEADLINE_EPOCHS

    g, x, y, tm, vm = _tiny()
    cfg = jaxclp.TrainConfig(epochs=DEADLINE_EPOCHS + 5, patience=0)
    args = (jax.random.key(1), g, x, y, tm, vm, 3)
    assert name in P.DEADLINE_PRIORS and "link" not in P.DEADLINE_PRIORS
    plain = P.fit_prior(name, *args, cfg)
    late = P.fit_prior(name, *args, cfg, deadline=time.perf_counter() + 1e6)
    np.testing.assert_array_equal(np.asarray(late.prior), np.asarray(plain.prior))
    assert late.stopped_at is None and plain.stopped_at is None and int(late.info.epochs_run) == cfg.epochs
    past = P.fit_prior(name, *args, cfg, deadline=0.0)
    cut = P.fit_prior(name, *args, cfg._replace(epochs=DEADLINE_EPOCHS))
    assert past.stopped_at == DEADLINE_EPOCHS == int(past.info.epochs_run)
    np.testing.assert_array_equal(np.asarray(past.prior), np.asarray(cut.prior))


def test_next_chunk_reads_the_clock_often_only_near_the_deadline():
    """Chunks of a deadline-bound fit: 25 epochs first (the rate is unknown), then half the time left at the last
    chunk's rate, at least 25, none (0) once 25 would end past it; a deadline at infinity (the runner's later
    splits) is one chunk."""
    import math

    from jaxclp.train import DEADLINE_EPOCHS, next_chunk

    assert next_chunk(0, None, 100.0, 0.0) == DEADLINE_EPOCHS == 25
    assert next_chunk(25, 0.01, 100.0, 50.0) == 2500  # 0.5 * 50 s / 0.01 s per epoch
    assert next_chunk(50, 1.0, 100.0, 70.0) == 25  # 30 s left: half of it holds 15 epochs, at least 25
    assert next_chunk(50, 1.0, 100.0, 76.0) == 0  # 24 s left: 25 epochs would end past it, stop
    assert next_chunk(50, 1.0, 100.0, 120.0) == 0  # past
    assert next_chunk(0, None, math.inf, 0.0) == next_chunk(25, 0.5, math.inf, 9.0) >= 2 ** 30
