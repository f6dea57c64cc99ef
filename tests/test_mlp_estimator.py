"""MLP training, the CLP estimator, and validation-only selection."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxclp
from jaxclp.mlp import mlp_param_count

FAST = dict(epochs=60, patience=20)


def _data(seed=0, n=300, k=3, d=8, h=0.1):
    syn = jaxclp.datasets.synthetic(h=h, avg_degree=6, num_classes=k, nodes_per_class=n // k, seed=seed)
    rng = np.random.default_rng(seed)
    y = np.asarray(syn.labels)
    x = rng.normal(size=(n, d)).astype(np.float32)
    x[:, :k] += 1.5 * np.eye(k)[y]
    tm = rng.random(n) < 0.2
    vm = (~tm) & (rng.random(n) < 0.25)
    return syn.graph, x, y, tm, vm


def test_param_count():
    assert mlp_param_count(10, 3, (64,)) == 10 * 64 + 64 + 64 * 3 + 3
    assert mlp_param_count(10, 3, ()) == 10 * 3 + 3
    assert mlp_param_count(10, 3, (64, 64)) == 10 * 64 + 64 + 64 * 64 + 64 + 64 * 3 + 3


def test_fit_mlp_learns_and_ignores_hidden_labels():
    g, x, y, tm, vm = _data()
    cfg = jaxclp.TrainConfig(**FAST)
    r = jaxclp.fit_mlp(jax.random.key(0), x, jnp.asarray(y), jnp.asarray(tm), jnp.asarray(vm), num_classes=3,
                       cfg=cfg)
    test = ~tm & ~vm
    assert (np.asarray(r.prior).argmax(1) == y)[test].mean() > 0.7
    np.testing.assert_allclose(np.asarray(r.prior).sum(1), 1, atol=1e-5)
    y_hidden = np.where(tm | vm, y, -1)
    r2 = jaxclp.fit_mlp(jax.random.key(0), x, jnp.asarray(y_hidden), jnp.asarray(tm), jnp.asarray(vm),
                        num_classes=3, cfg=cfg)
    np.testing.assert_array_equal(r.prior, r2.prior)


def test_fit_mlp_splits_equals_single_fits():
    g, x, y, tm, vm = _data()
    cfg = jaxclp.TrainConfig(**FAST)
    keys = jax.random.split(jax.random.key(1), 2)
    tms = np.stack([tm, vm])
    vms = np.stack([vm, tm])
    rs = jaxclp.fit_mlp_splits(keys, jnp.asarray(x), jnp.asarray(y), jnp.asarray(tms), jnp.asarray(vms),
                               num_classes=3, cfg=cfg)
    for i in range(2):
        r = jaxclp.fit_mlp(keys[i], x, jnp.asarray(y), jnp.asarray(tms[i]), jnp.asarray(vms[i]), num_classes=3,
                           cfg=cfg)
        np.testing.assert_allclose(rs.prior[i], r.prior, atol=1e-5)


def test_estimator_selects_on_validation_only():
    g, x, y, tm, vm = _data(h=0.0)
    kw = dict(normalization=["sym", "none"], l1_normalize=[False, True], alphas=(0.3, 0.9), **FAST)
    m1 = jaxclp.CLP(**kw).fit(g, x, y, tm, vm)
    y_scrambled = np.where(tm | vm, y, (y + 1) % 3)  # only test labels differ
    m2 = jaxclp.CLP(**kw).fit(g, x, y_scrambled, tm, vm)
    assert (m1.alpha_, m1.normalization_, m1.l1_normalize_) == (m2.alpha_, m2.normalization_, m2.l1_normalize_)
    np.testing.assert_array_equal(m1.predict(), m2.predict())
    assert m1.alpha_ in m1.alphas
    assert m1.val_score_ == max(m1.val_scores_.values())
    p = np.asarray(m1.predict_proba())
    np.testing.assert_allclose(p.sum(1), 1, atol=1e-6)
    assert m1.H_.shape == (3, 3) and m1.spectral_.rho.shape == (3,)


def test_estimator_with_given_prior_matches_clp_beliefs():
    g, x, y, tm, vm = _data()
    rng = np.random.default_rng(3)
    prior = jnp.asarray(rng.dirichlet(np.ones(3), len(y)))
    m = jaxclp.CLP(alphas=(0.5,)).fit(g, None, y, tm, vm, prior=prior)
    res = jaxclp.clp_beliefs(g, prior, jnp.asarray(y), jnp.asarray(tm), alphas=(0.5,))
    np.testing.assert_allclose(m.beliefs_, res.beliefs[0], atol=1e-10)
    # spectral_ is computed on first access (fit skips the power iteration), equal to clp_beliefs' own
    assert m._spectral is None
    for field in ("rho", "upper", "row_sum_bound", "col_sum_bound", "iterations"):
        np.testing.assert_allclose(np.asarray(getattr(m.spectral_, field)), np.asarray(getattr(res.spectral, field)),
                                   rtol=1e-12, err_msg=field)
    assert m._spectral is m.spectral_  # cached


@pytest.mark.parametrize("mutate, match", [
    (lambda a: a.update(tm=np.zeros_like(a["tm"])), "train_mask is empty"),
    (lambda a: a.update(y=np.where(a["tm"], 7, a["y"])), "labels on train/val nodes must be one of classes"),
    (lambda a: a.update(y=np.zeros_like(a["y"])), "K = 2"),
    (lambda a: a.update(vm=a["tm"].copy()), "overlap"),
    (lambda a: a["x"].__setitem__((0, 0), np.nan), "NaN"),
    (lambda a: a.update(tm=a["tm"][:-1]), "shape"),
])
def test_estimator_bad_input(mutate, match):
    g, x, y, tm, vm = _data()
    args = dict(x=x.copy(), y=y.copy(), tm=tm.copy(), vm=vm.copy())
    mutate(args)
    with pytest.raises(ValueError, match=match):
        jaxclp.CLP(num_classes=None if match == "K = 2" else 3, **FAST).fit(
            g, args["x"], args["y"], args["tm"], args["vm"])
