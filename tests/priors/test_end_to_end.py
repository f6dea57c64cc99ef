"""End-to-end training of the prior through the closed-form CLP (jaxclp.end_to_end): the gradient through the
solve (central finite differences, float64), the label trick (a scored node's label never reaches B0 or H), a
training run on a small heterophilous graph against the pretrained prior's CLP, the runner method, bad input."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
from jaxclp.end_to_end import (EndToEndResult, belief_cross_entropy, clp_output, end_to_end_loss,
                               fed_compatibility, fit_end_to_end, label_trick_split)
from jaxclp.mlp import MLP
from jaxclp.solve import solve_operator

N, K, D = 14, 3, 4


# --------------------------------------------------------------------------------------- a tiny problem
@functools.lru_cache(maxsize=None)
def _tiny():
    rng = np.random.default_rng(3)
    pairs = set()
    while len(pairs) < 26:
        s, r = (int(v) for v in rng.integers(0, N, 2))
        if s != r:
            pairs.add((min(s, r), max(s, r)))
    graph = jaxclp.Graph.from_edge_index(np.array(sorted(pairs)).T, N)
    x = jnp.asarray(rng.normal(size=(N, D)))  # float64
    labels = jnp.asarray(rng.integers(0, K, N), jnp.int32)
    train = np.zeros(N, bool)
    train[:10] = True
    model = MLP(hidden=(5,), num_classes=K, dropout=0.5)
    params = model.init(jax.random.key(0), x[:1], train=False)
    params = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), params)

    def apply_fn(p, k, train):
        return model.apply(p, x, train=train, rngs={"dropout": k})

    return graph, labels, jnp.asarray(train), params, apply_fn


LOSS_KW = dict(tol=1e-13, max_iters=5000)


@functools.lru_cache(maxsize=None)
def _jitted_loss():
    graph, _, train, _, apply_fn = _tiny()

    def f(params, key, labels, H, alpha):
        return end_to_end_loss(params, key, apply_fn, graph, labels, train, alpha, H=H, **LOSS_KW)

    def g(params, key, labels, alpha):  # the training loss: H estimated from the fed labels
        return end_to_end_loss(params, key, apply_fn, graph, labels, train, alpha, **LOSS_KW)

    return jax.jit(f), jax.jit(g), jax.jit(jax.value_and_grad(g, has_aux=True))


# ----------------------------------------------------------------------------------------- (a) gradient
@pytest.mark.parametrize("alpha", [0.5, 0.9])
def test_gradient_matches_central_finite_differences(alpha):
    """The training gradient (H estimated from the fed labels, held constant) equals central differences of
    the loss with H fixed at that estimate, along a random direction of every parameter leaf."""
    _, labels, _, params, apply_fn = _tiny()
    with_h, _, value_and_grad = _jitted_loss()
    key = jax.random.key(11)  # fixes the fed/scored partition and the dropout mask
    a = jnp.float64(alpha)
    (loss, aux), grads = value_and_grad(params, key, labels, a)
    assert bool(aux.converged) and np.isfinite(float(loss))
    leaves, tree = jax.tree_util.tree_flatten(grads)
    assert all(np.all(np.isfinite(np.asarray(g))) for g in leaves)
    assert sum(float(jnp.sum(jnp.abs(g))) for g in leaves) > 1e-3  # a real gradient, not zero
    # the loss with H given equals the training loss (same H)
    assert float(with_h(params, key, labels, aux.H, a)[0]) == pytest.approx(float(loss), rel=1e-12)
    rng = np.random.default_rng(4)
    eps = 1e-6
    p_leaves = jax.tree_util.tree_leaves(params)
    for i in range(len(p_leaves)):
        dirs = [jnp.asarray(rng.normal(size=p.shape)) if j == i else jnp.zeros_like(p)
                for j, p in enumerate(p_leaves)]
        plus = jax.tree_util.tree_unflatten(tree, [p + eps * d for p, d in zip(p_leaves, dirs)])
        minus = jax.tree_util.tree_unflatten(tree, [p - eps * d for p, d in zip(p_leaves, dirs)])
        f_plus, f_minus = (float(with_h(q, key, labels, aux.H, a)[0]) for q in (plus, minus))
        fd = (f_plus - f_minus) / (2 * eps)
        an = float(jnp.sum(leaves[i] * dirs[i]))
        assert an == pytest.approx(fd, rel=1e-5, abs=1e-8), (i, an, fd)


def test_gradient_flows_through_b0_not_only_the_right_hand_side():
    """D enters the solve twice (right-hand side and B0 in the operator): the gradient w.r.t. D has both parts
    (central differences w.r.t. D itself, through clp_output)."""
    graph, labels, train, _, _ = _tiny()
    rng = np.random.default_rng(6)
    d = jnp.asarray(rng.dirichlet(np.ones(K), size=N))
    fed = train & (jnp.arange(N) % 2 == 0)
    H = fed_compatibility(graph, d, labels, fed)
    w = jnp.asarray(rng.normal(size=(N, K)))

    def f(d):
        return jnp.sum(w * clp_output(graph, d, labels, fed, H, 0.8, **LOSS_KW)[0])

    def f_rhs(d):  # the D inside B0 held constant: only the right-hand side is differentiated
        return jnp.sum(w * _clp_rhs_only(graph, d, jax.lax.stop_gradient(d), labels, fed, H))

    g_full, g_rhs = jax.jit(lambda d: (jax.grad(f)(d), jax.grad(f_rhs)(d)))(d)
    v = jnp.asarray(rng.normal(size=(N, K)))
    vals = jax.jit(jax.vmap(f))(jnp.stack([d + 1e-6 * v, d - 1e-6 * v]))
    fd = (vals[0] - vals[1]) / 2e-6
    assert float(jnp.sum(g_full * v)) == pytest.approx(float(fd), rel=1e-6)
    assert abs(float(jnp.sum((g_full - g_rhs) * v))) > 1e-3 * abs(float(fd))  # the B0 part is not negligible


def _clp_rhs_only(graph, d, operator_d, labels, fed, H):
    """clp_output with the D inside B0 passed separately (same arithmetic)."""
    y = jax.nn.one_hot(labels, K, dtype=d.dtype)
    op = jaxclp.clp_operator(graph, jnp.where(fed[:, None], y, operator_d), H)
    return solve_operator(op, d, alpha=0.8, method="neumann", **LOSS_KW).value


# -------------------------------------------------------------------------------------- (b) label trick
def test_label_trick_split_partitions_the_training_nodes():
    _, _, train, _, _ = _tiny()
    parts = [label_trick_split(jax.random.key(s), train, 0.5) for s in range(6)]
    for fed, scored in parts:
        fed, scored = np.asarray(fed), np.asarray(scored)
        assert not (fed & scored).any() and np.array_equal(fed | scored, np.asarray(train))
        assert fed.sum() == 5  # floor(0.5 * 10)
    assert len({np.asarray(f).tobytes() for f, _ in parts}) > 1  # the key changes the split
    fed, _ = label_trick_split(jax.random.key(0), train, 0.3)
    assert int(np.sum(fed)) == 3


def test_a_scored_nodes_label_does_not_reach_b0_or_h():
    """Changing a scored node's label changes nothing but its cross-entropy target: B0, H and the CLP output
    are bit-identical, and the loss moves by exactly that node's term. Changing a FED node's label does change
    the output (so the test sees a leak: with B0 or H built from all training labels the first part fails)."""
    graph, labels, train, params, _ = _tiny()
    _, estimated, _ = _jitted_loss()
    key = jax.random.key(5)
    a = jnp.float64(0.7)
    loss, aux = estimated(params, key, labels, a)
    fed, scored = np.asarray(aux.fed), np.asarray(aux.scored)
    deg = np.asarray(graph.in_degree())
    i = int(np.flatnonzero(scored & (deg > 0))[0])  # a scored node with neighbours (it counts in H if fed)
    y2 = labels.at[i].set((labels[i] + 1) % K)
    loss2, aux2 = estimated(params, key, y2, a)
    assert np.array_equal(np.asarray(aux2.fed), fed)
    assert np.array_equal(np.asarray(aux2.H), np.asarray(aux.H))
    assert np.array_equal(np.asarray(aux2.beliefs), np.asarray(aux.beliefs))
    p = np.asarray(aux.beliefs[i]) / float(jnp.sum(aux.beliefs[i]))
    expected = (np.log(p[int(labels[i])]) - np.log(p[int(y2[i])])) / scored.sum()
    assert float(loss2 - loss) == pytest.approx(expected, rel=1e-10)
    # the contrast: a fed node's label is in B0 and H
    j = int(np.flatnonzero(fed & (deg > 0))[0])
    y3 = labels.at[j].set((labels[j] + 1) % K)
    _, aux3 = estimated(params, key, y3, a)
    assert not np.array_equal(np.asarray(aux3.H), np.asarray(aux.H))
    assert float(jnp.max(jnp.abs(aux3.beliefs - aux.beliefs))) > 1e-6


def test_belief_cross_entropy_by_hand():
    b = jnp.asarray([[0.2, 0.6], [0.3, 0.1], [5.0, 5.0]])
    y = jnp.asarray([1, 0, 1])
    m = jnp.asarray([True, True, False])
    want = -(np.log(0.6 / 0.8) + np.log(0.3 / 0.4)) / 2
    assert float(belief_cross_entropy(b, y, m)) == pytest.approx(want, rel=1e-12)


# ------------------------------------------------------------------- (c) training on a heterophilous graph
CFG = jaxclp.TrainConfig(epochs=60, patience=0)
ALPHAS = (0.3, 0.9)


@functools.lru_cache(maxsize=None)
def _synthetic():
    """180 nodes, 3 classes, edge homophily 0.1, weak 2-D features (standardized), the dense 48/32/20 split."""
    ds = jaxclp.datasets.synthetic(h=0.1, avg_degree=8, num_classes=3, nodes_per_class=60, seed=1, radius=60.0)
    x = jnp.asarray((ds.features - ds.features.mean(0)) / ds.features.std(0))  # float32
    sp = jaxclp.datasets.random_splits(ds.num_nodes, "dense", num_splits=1, seed=0)
    return ds, x, jnp.asarray(ds.labels), jnp.asarray(sp.train[0]), jnp.asarray(sp.val[0])


@functools.lru_cache(maxsize=None)
def _pretrained_clp_val():
    """Validation accuracy of the paper's pipeline with the same key: MLP prior, then CLP per alpha."""
    ds, x, y, tr, va = _synthetic()
    pre = jaxclp.fit_mlp(jax.random.key(0), x, y, tr, va, num_classes=3)
    res = jaxclp.clp_beliefs(ds.graph, pre.prior, y, tr, alphas=ALPHAS, spectrum=False)
    return np.asarray([float(jaxclp.accuracy(b, y, va)) for b in res.beliefs])


def test_warm_start_is_never_worse_on_validation_than_the_pretrained_prior_clp():
    ds, x, y, tr, va = _synthetic()
    r = fit_end_to_end(jax.random.key(0), ds.graph, x, y, tr, va, 3, alphas=ALPHAS, cfg=CFG)
    assert isinstance(r, EndToEndResult)
    ref = _pretrained_clp_val()
    n_val = int(jnp.sum(va))
    # epoch -1 of every alpha is the paper's CLP on the pretrained prior (same key): same validation accuracy
    np.testing.assert_allclose(r.pretrained_val_scores, ref, atol=1.0 / n_val + 1e-9)
    assert np.all(r.val_scores >= r.pretrained_val_scores)  # the warm start is a candidate of early stopping
    assert r.val_score >= ref.max() - 1.0 / n_val - 1e-9
    # the result is the selected alpha's, scored as the runner scores it
    i = int(np.flatnonzero(r.alphas == r.alpha)[0])
    assert r.val_score == r.val_scores.max() and np.array_equal(np.asarray(r.beliefs), np.asarray(r.all_beliefs[i]))
    assert float(jaxclp.accuracy(r.beliefs, y, va)) == pytest.approx(r.val_score)
    assert r.beliefs.shape == (180, 3) and r.prior.shape == (180, 3) and r.H.shape == (3, 3)
    assert r.converged.all() and (r.nonfinite_steps == 0).all() and (r.epochs_run == CFG.epochs).all()
    np.testing.assert_allclose(np.asarray(r.prior).sum(1), 1.0, rtol=1e-5)


def test_cold_start_trains_through_clp():
    """From random MLP parameters the label-trick loss falls and the end-to-end model reaches the validation
    accuracy of the two-stage pipeline (pretrained MLP, then CLP) within 2 validation nodes."""
    ds, x, y, tr, va = _synthetic()
    p0 = MLP(hidden=(64,), num_classes=3).init(jax.random.key(5), x[:1], train=False)
    r = fit_end_to_end(jax.random.key(0), ds.graph, x, y, tr, va, 3, alphas=ALPHAS, cfg=CFG, init_params=p0)
    loss = r.train_loss
    assert np.isfinite(loss).all()
    first, last = loss[:, :5].mean(axis=1), loss[:, -10:].mean(axis=1)
    assert np.all(last < 0.7 * first), (first, last)
    n_val = int(jnp.sum(va))
    assert r.val_score >= _pretrained_clp_val().max() - 2.0 / n_val
    assert r.val_score > r.pretrained_val_scores.max() + 0.2  # far above the random initialisation


def test_runner_method_clp_e2e(monkeypatch):
    from jaxclp.end_to_end import fit_end_to_end as fit
    from jaxclp.experiments import candidates, methods as M

    assert M.METHODS["clp_e2e"] is M.method_clp_e2e and "clp_e2e" in M.NEEDS_PRIOR
    ds, x, y, tr, va = _synthetic()
    calls = {}

    def spy(*args, **kw):  # the method's own settings, at the test's (compiled) cost
        calls.update(kw)
        return fit(*args, **(kw | dict(cfg=CFG, alphas=ALPHAS)))

    monkeypatch.setattr("jaxclp.experiments.methods.fit_end_to_end", spy)
    labels_vis = jnp.where(tr | va, y, -1)
    ctx = candidates.Context(graph=ds.graph, features=x, labels=labels_vis, train=tr, val=va, num_classes=3,
                             metric="accuracy", key=jax.random.key(0), priors={1: None}, mlp_depth=1)
    cands = M.method_clp_e2e(ctx)
    assert sorted(cands) == [("train", "e2e", "alpha", a) for a in ALPHAS]
    assert calls["hidden"] == (64,) and calls["normalization"] == "sym" and calls["cfg"].metric == "accuracy"
    cfg, val = candidates.select(cands, labels_vis, va, "accuracy")
    assert val >= _pretrained_clp_val().max() - 1.0 / int(jnp.sum(va)) - 1e-9


def test_sparse_and_float64_features_give_the_dense_float32_result():
    """scipy.sparse features (never densified) and float64 features follow the same trajectory."""
    import scipy.sparse as sps

    ds, x, y, tr, va = _synthetic()
    x = np.concatenate([np.asarray(x), np.zeros((180, 3), np.float32)], axis=1)  # a few zero columns
    cfg = jaxclp.TrainConfig(epochs=10, patience=0)
    runs = [fit_end_to_end(jax.random.key(0), ds.graph, f, y, tr, va, 3, alphas=(0.5,), cfg=cfg)
            for f in (x, sps.csr_matrix(x), x.astype(np.float64))]
    assert runs[2].beliefs.dtype == jnp.float64 and runs[0].beliefs.dtype == jnp.float32
    for r in runs[1:]:
        np.testing.assert_allclose(np.asarray(r.beliefs), np.asarray(runs[0].beliefs), atol=1e-5)
        np.testing.assert_allclose(r.train_loss, runs[0].train_loss, rtol=1e-4)


# ----------------------------------------------------------------------------------------- (d) bad input
def _args():
    ds, x, y, tr, va = _synthetic()
    return dict(key=jax.random.key(0), graph=ds.graph, features=x, labels=y, train_mask=tr, val_mask=va,
                num_classes=3)


@pytest.mark.parametrize("change, match", [
    (dict(graph="g"), "graph"),
    (dict(features=None), "features"),
    (dict(features=jnp.ones((7, 2))), "features"),
    (dict(features=jnp.full((180, 2), jnp.nan)), "features"),
    (dict(train_mask=jnp.ones(180, jnp.int32)), "train_mask"),
    (dict(train_mask=jnp.zeros(180, bool).at[0].set(True)), "train_mask"),
    (dict(val_mask=jnp.zeros(180, bool)), "val_mask"),
    (dict(labels=jnp.full(180, 3)), "labels"),
    (dict(num_classes=1), "num_classes"),
    (dict(alphas=(0.5, 1.0)), "alphas"),
    (dict(alphas=()), "alphas"),
    (dict(alphas=((0.1, 0.2),)), "alphas"),
    (dict(normalization="none"), "normalization"),
    (dict(fed_fraction=0.0), "fed_fraction"),
    (dict(fed_fraction=1.0), "fed_fraction"),
    (dict(cfg=dict(lr=0.1)), "cfg"),
    (dict(cfg=jaxclp.TrainConfig(metric="f1")), "metric"),
    (dict(cfg=jaxclp.TrainConfig(optimizer="sgd")), "optimizer"),
    (dict(cfg=jaxclp.TrainConfig(epochs=0)), "epochs"),
    (dict(cfg=jaxclp.TrainConfig(metric="roc_auc")), "roc_auc"),
    (dict(hidden=(0,)), "hidden"),
    (dict(dropout=1.0), "dropout"),
    (dict(tol=0.0), "tol"),
    (dict(max_iters=0), "max_iters"),
    (dict(init_params={"params": {}}), "init_params"),
])
def test_bad_input_raises_naming_the_argument(change, match):
    with pytest.raises(ValueError, match=match):
        fit_end_to_end(**(_args() | change))
