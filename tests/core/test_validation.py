"""Input validation: every bad input raises a ValueError that names the wrong argument (issues 10 and 14).

Each test here failed on the code before the fix (NaN, a silent all-zero row, a message blaming another
argument, numpy's DTypePromotionError, or a silently inferred extra class).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
from jaxclp.mlp import fit_mlp_splits
from jaxclp.operator import lp_operator
from jaxclp.solve import solve_operator
import reference as ref

FAST = jaxclp.TrainConfig(epochs=5, patience=0)


def _problem(seed=0, n=60, k=3):
    syn = jaxclp.datasets.synthetic(h=0.2, avg_degree=4, num_classes=k, nodes_per_class=n // k, seed=seed)
    rng = np.random.default_rng(seed)
    y = np.asarray(syn.labels).astype(np.int64)
    tm = np.zeros(n, bool)
    vm = np.zeros(n, bool)
    order = rng.permutation(n)
    tm[order[: n // 3]] = True
    vm[order[n // 3: 2 * n // 3]] = True
    for c in range(k):  # every class on train and on val
        i0, i1 = np.flatnonzero(y == c)[:2]
        tm[i0], vm[i0], tm[i1], vm[i1] = True, False, False, True
    prior = rng.dirichlet(np.ones(k), n)
    x = rng.normal(size=(n, 4))
    return syn.graph, x, y, tm, vm, prior


# ----------------------------------------------------------------------------- fit_mlp / fit_mlp_splits
@pytest.mark.parametrize("mask_name", ["train_mask", "val_mask"])
@pytest.mark.parametrize("bad", [3, 7, -1])
def test_fit_mlp_refuses_out_of_range_labels(mask_name, bad):
    g, x, y, tm, vm, _ = _problem()
    node = int(np.flatnonzero(tm if mask_name == "train_mask" else vm)[0])
    y = y.copy()
    y[node] = bad
    with pytest.raises(ValueError, match=rf"labels on {mask_name} nodes must lie in \[0, K\) with K = 3.*{node}"):
        jaxclp.fit_mlp(jax.random.key(0), x, jnp.asarray(y), jnp.asarray(tm), jnp.asarray(vm), num_classes=3,
                       cfg=FAST)


def test_fit_mlp_ignores_labels_outside_masks_and_checks_splits():
    g, x, y, tm, vm, _ = _problem()
    y_hidden = np.where(tm | vm, y, -1)  # -1 (or anything) outside train/val is never read
    r = jaxclp.fit_mlp(jax.random.key(0), x, jnp.asarray(y_hidden), jnp.asarray(tm), jnp.asarray(vm),
                       num_classes=3, cfg=FAST)
    assert np.isfinite(np.asarray(r.prior)).all()
    ys = np.stack([y_hidden, y_hidden])
    ys[1, np.flatnonzero(vm)[0]] = 99
    with pytest.raises(ValueError, match=r"labels\[1\] on val_mask nodes"):
        fit_mlp_splits(jax.random.split(jax.random.key(0), 2), x, jnp.asarray(ys),
                       jnp.asarray(np.stack([tm, tm])), jnp.asarray(np.stack([vm, vm])), num_classes=3,
                       cfg=FAST)
    with pytest.raises(ValueError, match="num_classes must be an integer >= 2"):
        jaxclp.fit_mlp(jax.random.key(0), x, jnp.asarray(y), jnp.asarray(tm), jnp.asarray(vm), num_classes=1)


def test_fit_mlp_refuses_string_and_float_labels():
    g, x, y, tm, vm, _ = _problem()
    with pytest.raises(ValueError, match="labels must be integers"):
        jaxclp.fit_mlp(jax.random.key(0), x, y.astype(float), jnp.asarray(tm), jnp.asarray(vm), num_classes=3)


# ----------------------------------------------------------------------------- initial_beliefs / edge_weights
def test_initial_beliefs_refuses_out_of_range_training_label(rng):
    prior, labels, mask = ref.random_problem(rng, 30, 4)
    node = int(np.flatnonzero(mask)[0])
    bad = labels.copy()
    bad[node] = 4
    with pytest.raises(ValueError, match=rf"labels on train_mask nodes must lie in \[0, K\) with K = 4.*\[{node}\]"):
        jaxclp.initial_beliefs(jnp.asarray(prior), jnp.asarray(bad), jnp.asarray(mask))
    bad[node] = -1
    with pytest.raises(ValueError, match="labels on train_mask"):
        jaxclp.initial_beliefs(jnp.asarray(prior), jnp.asarray(bad), jnp.asarray(mask))
    # out-of-range labels outside the training mask are never read
    ok = np.where(mask, labels, 99).astype(np.int32)
    b0 = jaxclp.initial_beliefs(jnp.asarray(prior), jnp.asarray(ok), jnp.asarray(mask))
    np.testing.assert_array_equal(np.asarray(b0), ref.initial_beliefs(prior, labels, mask))


def test_prior_rows_not_summing_to_one_are_refused(rng):
    """Decision: refuse (no silent rescaling), in initial_beliefs and CLP.fit(prior=...)."""
    prior, labels, mask = ref.random_problem(rng, 30, 3)
    with pytest.raises(ValueError, match=r"prior rows must sum to 1.*row 0 sums to 5"):
        jaxclp.initial_beliefs(jnp.asarray(5 * prior), jnp.asarray(labels), jnp.asarray(mask))
    p2 = prior.copy()
    p2[7] *= 1.01
    with pytest.raises(ValueError, match=r"1 row\(s\) do not, e.g. row 7 sums to 1.01"):
        jaxclp.initial_beliefs(jnp.asarray(p2), jnp.asarray(labels), jnp.asarray(mask))
    p3 = prior.copy()
    p3[0] = [np.nan, 0.5, 0.5]
    with pytest.raises(ValueError, match="prior contains 1 NaN/inf"):
        jaxclp.initial_beliefs(jnp.asarray(p3), jnp.asarray(labels), jnp.asarray(mask))
    with pytest.raises(ValueError, match="prior must be a floating-point array"):
        jaxclp.initial_beliefs(jnp.asarray(np.eye(3, dtype=int)[labels]), jnp.asarray(labels), jnp.asarray(mask))
    g, x, y, tm, vm, prior = _problem()
    with pytest.raises(ValueError, match="prior rows must sum to 1"):
        jaxclp.CLP(alphas=(0.5,)).fit(g, None, y, tm, vm, prior=5 * prior)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_edge_weights_refuses_non_finite(rng, bad):
    g = jaxclp.Graph.from_edge_index(np.array([[0, 1, 2], [1, 2, 0]]), 3)
    b0 = rng.dirichlet(np.ones(3), 3)
    h = np.full((3, 3), 1 / 3)
    h[1, 2] = bad
    with pytest.raises(ValueError, match=r"H contains 1 NaN/inf"):
        jaxclp.edge_weights(g, jnp.asarray(b0), jnp.asarray(h))
    b0[0, 0] = bad
    with pytest.raises(ValueError, match=r"b0 "):
        jaxclp.edge_weights(g, jnp.asarray(b0), jnp.full((3, 3), 1 / 3))


# ----------------------------------------------------------------------------- solve / propagate dtypes
def test_integer_prior_blames_prior_not_alpha(rng):
    prior, labels, mask = ref.random_problem(rng, 20, 3)
    g = jaxclp.Graph.from_edge_index(np.stack([np.arange(20), (np.arange(20) + 1) % 20]), 20)
    b0 = ref.initial_beliefs(prior, labels, mask)
    H = jnp.full((3, 3), 1 / 3)
    onehot = np.eye(3, dtype=np.int64)[labels]
    with pytest.raises(ValueError, match="prior must be a floating-point array; got dtype int64"):
        jaxclp.solve(g, jnp.asarray(b0), H, jnp.asarray(onehot), alpha=0.5)
    with pytest.raises(ValueError, match="b0 must be a floating-point array; got dtype int64"):
        jaxclp.solve(g, jnp.asarray(onehot), H, jnp.asarray(onehot), alpha=0.5)
    with pytest.raises(ValueError, match="prior must be a floating-point array"):
        jaxclp.propagate(g, jnp.asarray(b0), H, jnp.asarray(onehot), alpha=0.5, num_iters=3)


# ----------------------------------------------------------------------------- CLP estimator
def test_clp_features_with_wrong_row_count_blame_features():
    g, x, y, tm, vm, _ = _problem()
    with pytest.raises(ValueError, match=r"features must have shape \(60, \?\); got \(59, 4\)"):
        jaxclp.CLP(epochs=2).fit(g, x[:-1], y, tm, vm)


@pytest.mark.parametrize("labels, match", [
    (lambda y: np.array(["abc"[i] for i in y]), "labels must be integers"),
    (lambda y: y.astype(float), "labels must be integers"),
    (lambda y: np.where(np.arange(len(y)) == 5, -5, y), "labels must be class ids >= 0, or -1.*-5 at node 5"),
])
def test_clp_bad_label_values_name_labels(labels, match):
    g, x, y, tm, vm, prior = _problem()
    with pytest.raises(ValueError, match=match):
        jaxclp.CLP(alphas=(0.5,)).fit(g, None, labels(y), tm, vm, prior=prior)


def test_clp_minus_one_on_labelled_node_is_refused():
    g, x, y, tm, vm, prior = _problem()
    y = y.copy()
    node = int(np.flatnonzero(tm)[3])
    y[node] = -1
    with pytest.raises(ValueError, match=rf"labels is -1 \(unlabelled\) on 1 train_mask node.*\[{node}\]"):
        jaxclp.CLP(alphas=(0.5,)).fit(g, None, y, tm, vm, prior=prior)


def test_clp_follows_sklearn_classes():
    """classes_ = sorted train/val labels; arbitrary values map to 0..K-1; predict returns the user's values."""
    g, x, y, tm, vm, prior = _problem()
    values = np.array([99, 3, 7])  # class c is called values[c]; sorted classes_ = [3, 7, 99]
    order = np.argsort(values)  # column j of the mapped model is class order[j] of the original
    y_user = np.where(tm | vm, values[y], -1)
    m0 = jaxclp.CLP(alphas=(0.5,)).fit(g, None, y, tm, vm, prior=prior)
    m1 = jaxclp.CLP(alphas=(0.5,)).fit(g, None, y_user, tm, vm, prior=prior[:, order])
    np.testing.assert_array_equal(m1.classes_, [3, 7, 99])
    np.testing.assert_array_equal(m0.classes_, [0, 1, 2])
    assert m1.num_classes_ == 3
    np.testing.assert_allclose(np.asarray(m1.predict_proba()), np.asarray(m0.predict_proba())[:, order],
                               atol=1e-10)
    np.testing.assert_array_equal(m1.predict(), values[m0.predict()])
    assert set(np.unique(m1.predict())) <= {3, 7, 99}


def test_clp_stray_validation_label_is_refused_not_a_new_class():
    g, x, y, tm, vm, prior = _problem()
    y = y.copy()
    node = int(np.flatnonzero(vm)[0])
    y[node] = 99
    with pytest.raises(ValueError, match=rf"class\(es\) \[99\] occur on val_mask node\(s\) \[{node}\] but on no "
                                         "train_mask node"):
        jaxclp.CLP(alphas=(0.5,)).fit(g, None, y, tm, vm, prior=prior)
    # declared on purpose: a 4th class (no silent 100 classes either way)
    rng = np.random.default_rng(0)
    m = jaxclp.CLP(alphas=(0.5,), classes=[0, 1, 2, 99]).fit(g, None, y, tm, vm,
                                                             prior=rng.dirichlet(np.ones(4), len(y)))
    np.testing.assert_array_equal(m.classes_, [0, 1, 2, 99])
    assert m.predict_proba().shape == (len(y), 4)
    # with num_classes the labels must lie in 0..K-1
    with pytest.raises(ValueError, match=r"must be one of classes \[0, 1, 2\]; got \[99\]"):
        jaxclp.CLP(alphas=(0.5,), num_classes=3).fit(g, None, y, tm, vm, prior=prior)
    with pytest.raises(ValueError, match="classes or num_classes, not both"):
        jaxclp.CLP(classes=[0, 1], num_classes=2)


def test_clp_metric_is_checked_and_selects_the_mlp_too():
    assert jaxclp.CLP(metric="roc_auc").cfg.metric == "roc_auc"
    with pytest.raises(ValueError, match="metric must be 'accuracy' or 'roc_auc'; got 'f1'"):
        jaxclp.CLP(metric="f1")


def test_solve_operator_refuses_integer_prior_naming_it():
    g = jaxclp.Graph.from_edge_index(np.array([[0, 1, 2], [1, 2, 0]]), 3)
    op = lp_operator(g, 2)
    with pytest.raises(ValueError, match="prior must be a floating-point"):
        solve_operator(op, np.ones((3, 2), np.int32), alpha=0.5)
